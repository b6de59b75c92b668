//! The lmdb driver: LMDB through heed, one environment in `<dir>/lmdb/` and one named
//! database per driver table.
//!
//! LMDB has one writer at a time, and a write transaction belongs to the thread that began it,
//! so a driver transaction keeps its writes in its own write set (read back by its own gets and
//! scans) and applies them in one LMDB write transaction at commit. Isolation is READ
//! COMMITTED plus locking reads as evenkeel promises: each read runs in a fresh read snapshot
//! (the latest commit), and the first `put`, `delete` or `get_for_update` takes the driver's
//! writer lock, held to commit or rollback, so writers run one at a time like LMDB's own. A
//! writer lock not had within `lock_wait_timeout` is a retryable error; there are no
//! deadlocks (one lock).
//!
//! Mapping of evenkeel's options: `flush_log_at_trx_commit` 1 → LMDB's default (data and meta
//! page synced at commit), 2 and 0 → `MDB_NOSYNC` with a thread syncing once a second;
//! `lock_wait_timeout` → the writer lock's wait. LMDB has no cache of its own: it reads through
//! the OS page cache, which may use all free memory, so `buffer_pool_size` is accepted and
//! reported as not applied; LMDB has no redo log (copy-on-write pages), so the log sizes are
//! accepted and reported as not applied; `doublewrite` on only (copy-on-write never overwrites
//! a live page). The map size is 1 TiB of address space (LMDB's file grows as pages are used).
//!
//! Must never: write to LMDB outside `commit`, or apply half a write set.

#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use heed::types::Bytes;
use heed::{Database, EnvFlags, EnvOpenOptions, WithoutTls};
use parking_lot::{Condvar, Mutex, RwLock};

use super::peer_options::{PeerOptions, DEFAULT_LOCK_WAIT_TIMEOUT_S};
use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};
use crate::error::{BenchError, BenchResult};

/// evenkeel options the lmdb engine takes (see the module comment for what each becomes).
pub const MAPPED: &[&str] = &[
    "buffer_pool_size",
    "log_file_size",
    "log_files_in_group",
    "flush_log_at_trx_commit",
    "lock_wait_timeout",
    "doublewrite",
];

/// Address space reserved for the map; the file only grows as pages are used.
const MAP_SIZE_BYTES: usize = 1 << 40;
/// Named databases an environment may hold.
const MAX_DBS: u32 = 1024;
/// Read snapshots open at once (client threads plus the sampler, with room).
const MAX_READERS: u32 = 1024;

type Db = Database<Bytes, Bytes>;
/// Read snapshots are not tied to a thread, so a transaction may move between threads.
type Env = heed::Env<WithoutTls>;
/// The named database listing the driver's tables (LMDB cannot delete a named database, so
/// a dropped table is emptied and leaves this list).
const CATALOG: &str = "evenkeel.tables";

/// Opened tables by `TableId` (`None` once dropped: ids never move).
type Tables = Arc<Vec<Option<(String, Db)>>>;
/// Committed rows of a range, in scan order.
type RowIter<'t> = Box<dyn Iterator<Item = heed::Result<(&'t [u8], &'t [u8])>> + 't>;

fn map_err(e: heed::Error) -> DriverError {
    DriverError::fatal(format!("lmdb: {e}"))
}

/// The effective settings and what the report says about options LMDB cannot apply.
struct Settings {
    durability: u64,
    lock_wait_s: u64,
    notes: Vec<(String, String)>,
}

impl Settings {
    fn from(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<Settings> {
        let o = PeerOptions::parse("lmdb", config, set, MAPPED)?;
        if !o.bool("doublewrite", true)? {
            return Err(BenchError::Usage(
                "lmdb engine: doublewrite=off has no equivalent: LMDB copies pages on write and \
                     never overwrites a live one"
                    .into(),
            ));
        }
        let durability = o.durability()?;
        let lock_wait_s = o.int("lock_wait_timeout", DEFAULT_LOCK_WAIT_TIMEOUT_S, 1, 1 << 30)?;
        let mut notes = vec![(
            "sync".to_string(),
            if durability == 1 {
                "at commit (flush_log_at_trx_commit=1)".to_string()
            } else {
                format!("MDB_NOSYNC, synced once a second (flush_log_at_trx_commit={durability})")
            },
        )];
        if let Some(v) = o.raw("buffer_pool_size") {
            notes.push((
                "buffer_pool_size".into(),
                format!("{v} not applied: LMDB reads through the OS page cache (all free memory)"),
            ));
        }
        if o.raw("log_file_size").is_some() || o.raw("log_files_in_group").is_some() {
            notes.push((
                "redo_capacity".into(),
                format!(
                    "{} bytes not applied: LMDB has no redo log",
                    o.redo_capacity()?
                ),
            ));
        }
        Ok(Settings {
            durability,
            lock_wait_s,
            notes,
        })
    }
}

/// Check options as `open` would, without opening anything.
pub fn check_options(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<()> {
    Settings::from(config, set).map(|_| ())
}

/// The writer lock: at most one transaction with writes at a time.
#[derive(Default)]
struct WriterLock {
    held: Mutex<bool>,
    freed: Condvar,
}

impl WriterLock {
    fn acquire(&self, timeout: Duration) -> bool {
        let mut held = self.held.lock();
        let deadline = std::time::Instant::now() + timeout;
        while *held {
            if self.freed.wait_until(&mut held, deadline).timed_out() && *held {
                return false;
            }
        }
        *held = true;
        true
    }

    fn release(&self) {
        *self.held.lock() = false;
        self.freed.notify_one();
    }
}

/// The once-a-second syncer used when commits do not sync.
struct Syncer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// LMDB behind the adapter.
pub struct LmdbDriver {
    env: Env,
    catalog: Db,
    path: PathBuf,
    tables: RwLock<Tables>,
    writer: Arc<WriterLock>,
    lock_wait: Duration,
    durability: u64,
    syncer: Mutex<Option<Syncer>>,
    notes: Vec<(String, String)>,
}

impl LmdbDriver {
    pub fn open(
        dir: &Path,
        config: Option<&Path>,
        set: &[(String, String)],
    ) -> BenchResult<LmdbDriver> {
        let Settings {
            durability,
            lock_wait_s,
            notes,
        } = Settings::from(config, set)?;
        let path = dir.join("lmdb");
        std::fs::create_dir_all(&path)
            .map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        opts.map_size(MAP_SIZE_BYTES)
            .max_dbs(MAX_DBS)
            .max_readers(MAX_READERS);
        if durability != 1 {
            // SAFETY: NO_SYNC only gives up durability of the last commits on a system crash
            // (what flush_log_at_trx_commit 0 and 2 ask for); the syncer below bounds it to
            // about a second. No memory safety depends on it.
            unsafe {
                opts.flags(EnvFlags::NO_SYNC);
            }
        }
        // SAFETY: the environment's files are only touched through this Env: the data
        // directory belongs to this run (the workbench never opens one directory twice in a
        // process, and heed refuses a second open of the same path while this one lives).
        let env: Env = unsafe { opts.open(&path) }.map_err(|e| BenchError::Driver(map_err(e)))?;
        let catalog: Db = (|| {
            let mut w = env.write_txn()?;
            let db = env.create_database(&mut w, Some(CATALOG))?;
            w.commit()?;
            Ok(db)
        })()
        .map_err(|e| BenchError::Driver(map_err(e)))?;
        let syncer = (durability != 1).then(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let (e, s) = (env.clone(), stop.clone());
            let thread = std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(1));
                    let _ = e.force_sync();
                }
            });
            Syncer { stop, thread }
        });
        Ok(LmdbDriver {
            env,
            catalog,
            path,
            tables: RwLock::new(Arc::new(Vec::new())),
            writer: Arc::new(WriterLock::default()),
            lock_wait: Duration::from_secs(lock_wait_s),
            durability,
            syncer: Mutex::new(syncer),
            notes,
        })
    }
}

impl Driver for LmdbDriver {
    fn name(&self) -> &str {
        "lmdb"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        if let Some(i) = guard
            .iter()
            .position(|t| t.as_ref().is_some_and(|(n, _)| n == name))
        {
            return Ok(i);
        }
        if name == CATALOG {
            return Err(DriverError::fatal(format!(
                "lmdb: {CATALOG} is the driver's own table"
            )));
        }
        let db: Db = if create {
            if !self.writer.acquire(self.lock_wait) {
                return Err(DriverError::retryable(
                    "lmdb: writer lock not had within lock_wait_timeout",
                ));
            }
            let r = (|| {
                let mut w = self.env.write_txn()?;
                let db = self.env.create_database(&mut w, Some(name))?;
                self.catalog.put(&mut w, name.as_bytes(), &[])?;
                w.commit()?;
                Ok(db)
            })();
            self.writer.release();
            r.map_err(map_err)?
        } else {
            let r = self.env.read_txn().map_err(map_err)?;
            let listed = self.catalog.get(&r, name.as_bytes()).map_err(map_err)?;
            let db = listed
                .and_then(|_| self.env.open_database(&r, Some(name)).transpose())
                .transpose()
                .map_err(map_err)?
                .ok_or_else(|| DriverError::fatal(format!("lmdb: table {name} not found")))?;
            // A database handle opened in a transaction that aborts is closed with it: the
            // read transaction commits to keep the handle.
            r.commit().map_err(map_err)?;
            db
        };
        let mut next = Vec::clone(&guard);
        next.push(Some((name.to_string(), db)));
        *guard = Arc::new(next);
        Ok(guard.len() - 1)
    }

    fn tables(&self) -> DriverResult<Vec<String>> {
        let r = self.env.read_txn().map_err(map_err)?;
        let mut names = Vec::new();
        for item in self.catalog.iter(&r).map_err(map_err)? {
            let (k, _) = item.map_err(map_err)?;
            names.push(String::from_utf8_lossy(k).into_owned());
        }
        Ok(names)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut guard = self.tables.write();
        if !self.writer.acquire(self.lock_wait) {
            return Err(DriverError::retryable(
                "lmdb: writer lock not had within lock_wait_timeout",
            ));
        }
        let r = (|| -> DriverResult<()> {
            let mut w = self.env.write_txn().map_err(map_err)?;
            let listed = self
                .catalog
                .get(&w, name.as_bytes())
                .map_err(map_err)?
                .is_some();
            let db: Option<Db> = self.env.open_database(&w, Some(name)).map_err(map_err)?;
            let (true, Some(db)) = (listed, db) else {
                return Err(DriverError::fatal(format!("lmdb: table {name} not found")));
            };
            db.clear(&mut w).map_err(map_err)?;
            self.catalog
                .delete(&mut w, name.as_bytes())
                .map_err(map_err)?;
            w.commit().map_err(map_err)
        })();
        self.writer.release();
        r?;
        let next: Vec<_> = guard
            .iter()
            .map(|t| t.as_ref().filter(|(n, _)| n != name).cloned())
            .collect();
        *guard = Arc::new(next);
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        Ok(Box::new(LmdbTxn {
            env: self.env.clone(),
            tables: self.tables.read().clone(),
            writer: self.writer.clone(),
            lock_wait: self.lock_wait,
            locked: false,
            ended: false,
            writes: BTreeMap::new(),
        }))
    }

    fn stats(&self) -> EngineStats {
        let info = self.env.info();
        let stat = self.env.stat();
        let mut e = EngineStats::default();
        let pages_used = info.last_page_number as u64 + 1;
        let extra = [
            ("page_size", stat.page_size as f64),
            ("pages_used", pages_used as f64),
            (
                "used_bytes",
                (pages_used * u64::from(stat.page_size)) as f64,
            ),
            ("last_txn_id", info.last_txn_id as f64),
            ("readers", f64::from(info.number_of_readers)),
            ("tree_depth", f64::from(stat.depth)),
        ];
        e.extra = extra.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        e
    }

    fn config(&self) -> Vec<(String, String)> {
        let mut c = vec![
            ("version".to_string(), format!("{:?}", heed::lmdb_version())),
            ("path".to_string(), self.path.display().to_string()),
            ("map_size".to_string(), MAP_SIZE_BYTES.to_string()),
            (
                "writers".to_string(),
                "one at a time (the driver's writer lock; writes applied at commit)".to_string(),
            ),
            (
                "cache".to_string(),
                "the OS page cache (no knob)".to_string(),
            ),
            (
                "lock_wait_timeout".to_string(),
                format!("{} s", self.lock_wait.as_secs()),
            ),
            (
                "flush_log_at_trx_commit".to_string(),
                self.durability.to_string(),
            ),
        ];
        c.extend(self.notes.iter().cloned());
        c
    }

    fn close(&self) -> DriverResult<()> {
        self.stop_syncer();
        self.env.force_sync().map_err(map_err)
    }
}

impl LmdbDriver {
    /// Stop the once-a-second syncer (it holds the environment open).
    fn stop_syncer(&self) {
        if let Some(s) = self.syncer.lock().take() {
            s.stop.store(true, Ordering::Relaxed);
            let _ = s.thread.join();
        }
    }
}

impl Drop for LmdbDriver {
    fn drop(&mut self) {
        self.stop_syncer();
    }
}

/// A write-set key: table, then key.
type WriteKey = (TableId, Vec<u8>);

struct LmdbTxn {
    env: Env,
    tables: Tables,
    writer: Arc<WriterLock>,
    lock_wait: Duration,
    /// Holds the writer lock.
    locked: bool,
    /// Finished by a retryable error.
    ended: bool,
    /// This transaction's writes: `None` is a delete.
    writes: BTreeMap<WriteKey, Option<Vec<u8>>>,
}

impl LmdbTxn {
    fn db(&self, t: TableId) -> DriverResult<Db> {
        if self.ended {
            return Err(DriverError::fatal(
                "lmdb: the transaction already ended (an earlier statement failed)",
            ));
        }
        self.tables
            .get(t)
            .and_then(|x| x.as_ref().map(|(_, db)| *db))
            .ok_or_else(|| DriverError::fatal(format!("lmdb: table id {t} not open")))
    }

    /// Take the writer lock before the first write or locking read.
    fn lock(&mut self) -> DriverResult<()> {
        if self.locked {
            return Ok(());
        }
        if !self.writer.acquire(self.lock_wait) {
            self.end();
            return Err(DriverError::retryable(format!(
                "lmdb: the writer lock was not had within lock_wait_timeout ({} s)",
                self.lock_wait.as_secs()
            )));
        }
        self.locked = true;
        Ok(())
    }

    fn end(&mut self) {
        self.writes.clear();
        self.ended = true;
        if self.locked {
            self.locked = false;
            self.writer.release();
        }
    }

    fn read(&self, db: Db, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(&(t, key.to_vec())) {
            return Ok(w.clone());
        }
        let r = self.env.read_txn().map_err(map_err)?;
        Ok(db.get(&r, key).map_err(map_err)?.map(<[u8]>::to_vec))
    }
}

impl DriverTxn for LmdbTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let db = self.db(t)?;
        self.read(db, t, key)
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let db = self.db(t)?;
        self.lock()?;
        self.read(db, t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        self.db(t)?;
        self.lock()?;
        self.writes.insert((t, key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        self.db(t)?;
        self.lock()?;
        self.writes.insert((t, key.to_vec()), None);
        Ok(())
    }

    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>> {
        let db = self.db(t)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
            (lower, upper)
        {
            if l > u
                || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))))
            {
                return Ok(Vec::new());
            }
        }
        // This transaction's writes within the bounds, in scan order.
        let mut own: Vec<(&[u8], &Option<Vec<u8>>)> = self
            .writes
            .range((t, Vec::new())..)
            .take_while(|((wt, _), _)| *wt == t)
            .filter(|((_, k), _)| RangeBounds::<[u8]>::contains(&(lower, upper), k.as_slice()))
            .map(|((_, k), v)| (k.as_slice(), v))
            .collect();
        if reverse {
            own.reverse();
        }
        let r = self.env.read_txn().map_err(map_err)?;
        let range = (lower, upper);
        let mut committed: RowIter<'_> = if reverse {
            Box::new(db.rev_range(&r, &range).map_err(map_err)?)
        } else {
            Box::new(db.range(&r, &range).map_err(map_err)?)
        };
        // Merge the two ordered streams; an own write wins over the committed row.
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        let mut out = Vec::new();
        let mut own = own.into_iter().peekable();
        let mut next_committed = committed.next().transpose().map_err(map_err)?;
        while out.len() < limit {
            let take_own = match (own.peek(), next_committed) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((ok, _)), Some((ck, _))) => before(ok, ck) || *ok == ck,
            };
            if take_own {
                let Some((k, v)) = own.next() else { break };
                if next_committed.is_some_and(|(ck, _)| ck == k) {
                    next_committed = committed.next().transpose().map_err(map_err)?;
                }
                if let Some(v) = v {
                    out.push((k.to_vec(), v.clone()));
                }
            } else if let Some((k, v)) = next_committed {
                out.push((k.to_vec(), v.to_vec()));
                next_committed = committed.next().transpose().map_err(map_err)?;
            }
        }
        Ok(out)
    }

    fn commit(mut self: Box<Self>) -> DriverResult<()> {
        if self.ended {
            return Err(DriverError::fatal(
                "lmdb: commit of a transaction that already ended",
            ));
        }
        if self.writes.is_empty() {
            self.end();
            return Ok(());
        }
        let r = (|| -> DriverResult<()> {
            let mut w = self.env.write_txn().map_err(map_err)?;
            for ((t, k), v) in &self.writes {
                let db = self
                    .tables
                    .get(*t)
                    .and_then(|x| x.as_ref().map(|(_, db)| *db))
                    .ok_or_else(|| DriverError::fatal(format!("lmdb: table id {t} not open")))?;
                match v {
                    Some(v) => db.put(&mut w, k, v).map_err(map_err)?,
                    None => {
                        db.delete(&mut w, k).map_err(map_err)?;
                    }
                }
            }
            w.commit().map_err(map_err)
        })();
        self.end();
        r
    }

    fn rollback(mut self: Box<Self>) {
        self.end();
    }
}

impl Drop for LmdbTxn {
    fn drop(&mut self) {
        self.end();
    }
}
