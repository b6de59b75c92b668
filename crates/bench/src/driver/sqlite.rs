//! The sqlite driver: SQLite (rusqlite's bundled build) in WAL mode, one file
//! `<dir>/sqlite/evenkeel.sqlite`, one `WITHOUT ROWID` table `(k BLOB PRIMARY KEY, v BLOB)` per
//! driver table, connections pooled (one per transaction in flight).
//!
//! Mapping of evenkeel's options: `flush_log_at_trx_commit` 1 → `synchronous=FULL` (the WAL is
//! synced at every commit), 2 and 0 → `NORMAL` (synced at checkpoints only); `buffer_pool_size`
//! → `cache_size` of every connection (SQLite's page cache is per connection); the redo
//! capacity (`log_file_size` x `log_files_in_group`) → `wal_autocheckpoint` in pages, so the
//! WAL is checkpointed when it holds as much as evenkeel's log; `page_size` → `page_size` at
//! create; `lock_wait_timeout` → `busy_timeout`; `doublewrite` on only (the WAL holds whole
//! pages, so a torn page write is always repaired).
//!
//! SQLite has one writer at a time, and the adapter cannot say ahead whether a transaction
//! will write: every transaction takes the write lock with `BEGIN IMMEDIATE` at its first
//! statement, so transactions run one at a time, every read is a locking read, and a write
//! lock not had within `busy_timeout` is a retryable error (SQLITE_BUSY / SQLITE_LOCKED).
//!
//! Per second: the WAL not yet checkpointed (frames in the WAL less frames copied back, read
//! from the wal-index in the -shm file) as the checkpoint age, and the WAL file's size.
//!
//! Must never: return a connection with an open transaction to the pool.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rusqlite::{params_from_iter, Connection, ErrorCode, OptionalExtension};

use super::peer_options::{PeerOptions, DEFAULT_BUFFER_POOL_BYTES, DEFAULT_LOCK_WAIT_TIMEOUT_S};
use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};
use crate::error::{BenchError, BenchResult};

/// evenkeel options the sqlite engine takes.
pub const MAPPED: &[&str] = &[
    "buffer_pool_size",
    "log_file_size",
    "log_files_in_group",
    "flush_log_at_trx_commit",
    "page_size",
    "lock_wait_timeout",
    "doublewrite",
];

/// Options that only take effect when the database file is created.
pub const CREATE_TIME: &[&str] = &["page_size"];

fn map_err(e: rusqlite::Error) -> DriverError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            DriverError::retryable(format!("sqlite: {e}"))
        }
        _ => DriverError::fatal(format!("sqlite: {e}")),
    }
}

/// The effective settings.
#[derive(Debug, Clone)]
struct Settings {
    synchronous: &'static str,
    cache_kib: u64,
    page_size: u64,
    wal_autocheckpoint_pages: u64,
    busy_timeout_s: u64,
    durability: u64,
}

impl Settings {
    fn from(o: &PeerOptions) -> BenchResult<Settings> {
        let page_size = o.size("page_size", 16 << 10, 512, 64 << 10)?;
        if !page_size.is_power_of_two() {
            return Err(BenchError::Usage(format!(
                "sqlite engine: page_size={page_size} is not valid: expected a power of two from 512 to 64K"
            )));
        }
        if !o.bool("doublewrite", true)? {
            return Err(BenchError::Usage(
                "sqlite engine: doublewrite=off has no equivalent: SQLite's WAL holds whole pages, \
                 so torn page writes are always repaired"
                    .into(),
            ));
        }
        let durability = o.durability()?;
        Ok(Settings {
            synchronous: if durability == 1 { "FULL" } else { "NORMAL" },
            cache_kib: o.size(
                "buffer_pool_size",
                DEFAULT_BUFFER_POOL_BYTES,
                1 << 20,
                1 << 40,
            )? >> 10,
            page_size,
            wal_autocheckpoint_pages: (o.redo_capacity()? / page_size).max(1),
            busy_timeout_s: o.int("lock_wait_timeout", DEFAULT_LOCK_WAIT_TIMEOUT_S, 1, 1 << 30)?,
            durability,
        })
    }
}

/// Check options as `open` would, without opening anything.
pub fn check_options(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<()> {
    Settings::from(&PeerOptions::parse("sqlite", config, set, MAPPED)?).map(|_| ())
}

type Tables = Arc<Vec<Option<Arc<TableSql>>>>;

/// Bytes of a WAL frame's header (SQLite's file format, section 4.1).
const WAL_FRAME_HEADER_BYTES: u64 = 24;
/// Offsets in the wal-index (the -shm file, in the host's byte order; SQLite's wal.c): the
/// first copy of the header's `mxFrame` (frames in the WAL), and the checkpoint info's
/// `nBackfill` (frames already copied into the database), after the header's two copies.
const SHM_MX_FRAME: usize = 16;
const SHM_N_BACKFILL: usize = 96;

/// (frames in the WAL, frames checkpointed) from the -shm file's bytes; `None` when it is
/// missing or short.
fn wal_frames(shm: &[u8]) -> Option<(u32, u32)> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(shm.get(at..at + 4)?.try_into().ok()?))
    };
    Some((word(SHM_MX_FRAME)?, word(SHM_N_BACKFILL)?))
}

struct TableSql {
    name: String,
    quoted: String,
    get: String,
    put: String,
    delete: String,
}

impl TableSql {
    fn new(name: &str) -> TableSql {
        let quoted = format!("\"t_{}\"", name.replace('"', "\"\""));
        TableSql {
            name: name.to_string(),
            get: format!("SELECT v FROM {quoted} WHERE k = ?1"),
            put: format!("INSERT INTO {quoted} (k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v"),
            delete: format!("DELETE FROM {quoted} WHERE k = ?1"),
            quoted,
        }
    }
}

/// SQLite behind the adapter.
pub struct SqliteDriver {
    path: PathBuf,
    settings: Settings,
    pool: Arc<Mutex<Vec<Connection>>>,
    tables: RwLock<Tables>,
}

impl SqliteDriver {
    pub fn open(
        dir: &Path,
        config: Option<&Path>,
        set: &[(String, String)],
    ) -> BenchResult<SqliteDriver> {
        let o = PeerOptions::parse("sqlite", config, set, MAPPED)?;
        let settings = Settings::from(&o)?;
        let root = dir.join("sqlite");
        std::fs::create_dir_all(&root)
            .map_err(|e| BenchError::io(format!("create {}", root.display()), e))?;
        let d = SqliteDriver {
            path: root.join("evenkeel.sqlite"),
            settings,
            pool: Arc::new(Mutex::new(Vec::new())),
            tables: RwLock::new(Arc::new(Vec::new())),
        };
        let c = d.connect().map_err(BenchError::Driver)?;
        d.pool.lock().push(c);
        Ok(d)
    }

    fn connect(&self) -> DriverResult<Connection> {
        let c = Connection::open(&self.path).map_err(map_err)?;
        let s = &self.settings;
        // page_size only takes effect before the first table exists.
        c.execute_batch(&format!(
            "PRAGMA page_size = {};\n\
             PRAGMA journal_mode = WAL;\n\
             PRAGMA synchronous = {};\n\
             PRAGMA cache_size = -{};\n\
             PRAGMA wal_autocheckpoint = {};",
            s.page_size, s.synchronous, s.cache_kib, s.wal_autocheckpoint_pages
        ))
        .map_err(map_err)?;
        c.busy_timeout(Duration::from_secs(s.busy_timeout_s))
            .map_err(map_err)?;
        c.set_prepared_statement_cache_capacity(256);
        Ok(c)
    }

    fn with_conn<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> DriverResult<R> {
        let c = match self.pool.lock().pop() {
            Some(c) => c,
            None => self.connect()?,
        };
        let r = f(&c).map_err(map_err);
        self.pool.lock().push(c);
        r
    }

    fn exists(&self, quoted_name: &str) -> DriverResult<bool> {
        let bare = quoted_name.trim_matches('"').replace("\"\"", "\"");
        self.with_conn(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [bare],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n > 0)
    }
}

impl Driver for SqliteDriver {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        if let Some(i) = guard
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.name == name))
        {
            return Ok(i);
        }
        let sql = TableSql::new(name);
        if create {
            let ddl = format!(
                "CREATE TABLE IF NOT EXISTS {} (k BLOB PRIMARY KEY NOT NULL, v BLOB NOT NULL) WITHOUT ROWID",
                sql.quoted
            );
            self.with_conn(|c| c.execute_batch(&ddl))?;
        } else if !self.exists(&sql.quoted)? {
            return Err(DriverError::fatal(format!(
                "sqlite: table {name} not found"
            )));
        }
        let mut next = Vec::clone(&guard);
        next.push(Some(Arc::new(sql)));
        *guard = Arc::new(next);
        Ok(guard.len() - 1)
    }

    fn tables(&self) -> DriverResult<Vec<String>> {
        let mut names: Vec<String> = self.with_conn(|c| {
            let mut st = c.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 't\\_%' ESCAPE '\\'")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })?;
        for n in &mut names {
            *n = n["t_".len()..].to_string();
        }
        names.sort();
        Ok(names)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut guard = self.tables.write();
        let sql = TableSql::new(name);
        if !self.exists(&sql.quoted)? {
            return Err(DriverError::fatal(format!(
                "sqlite: table {name} not found"
            )));
        }
        self.with_conn(|c| c.execute_batch(&format!("DROP TABLE {}", sql.quoted)))?;
        let next: Vec<_> = guard
            .iter()
            .map(|t| t.as_ref().filter(|t| t.name != name).cloned())
            .collect();
        *guard = Arc::new(next);
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        let conn = match self.pool.lock().pop() {
            Some(c) => c,
            None => self.connect()?,
        };
        Ok(Box::new(SqliteTxn {
            conn: Some(conn),
            started: false,
            pool: self.pool.clone(),
            tables: self.tables.read().clone(),
        }))
    }

    fn stats(&self) -> EngineStats {
        let mut e = EngineStats::default();
        let wal = self.path.with_extension("sqlite-wal");
        let wal_file_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
        e.extra
            .insert("wal_file_bytes".into(), wal_file_bytes as f64);
        let shm = std::fs::read(self.path.with_extension("sqlite-shm")).unwrap_or_default();
        if let Some((frames, backfilled)) = wal_frames(&shm) {
            // The WAL's content not yet copied back into the database: SQLite's checkpoint age.
            let pending = u64::from(frames.saturating_sub(backfilled));
            let bytes = pending * (self.settings.page_size + WAL_FRAME_HEADER_BYTES);
            let capacity = self.settings.wal_autocheckpoint_pages * self.settings.page_size;
            e.checkpoint_age_bytes = Some(bytes);
            e.checkpoint_age_pct = Some(100.0 * bytes as f64 / capacity.max(1) as f64);
            e.extra.insert("wal_frames".into(), f64::from(frames));
            e.extra
                .insert("wal_frames_backfilled".into(), f64::from(backfilled));
        }
        e
    }

    fn config(&self) -> Vec<(String, String)> {
        let s = &self.settings;
        vec![
            ("version".into(), rusqlite::version().to_string()),
            ("journal_mode".into(), "WAL".into()),
            (
                "synchronous".into(),
                format!(
                    "{} (flush_log_at_trx_commit={})",
                    s.synchronous, s.durability
                ),
            ),
            (
                "cache_size".into(),
                format!("-{} (KiB, per connection)", s.cache_kib),
            ),
            ("page_size".into(), s.page_size.to_string()),
            (
                "wal_autocheckpoint".into(),
                format!("{} pages", s.wal_autocheckpoint_pages),
            ),
            ("busy_timeout".into(), format!("{} s", s.busy_timeout_s)),
            ("transactions".into(), "BEGIN IMMEDIATE (one writer)".into()),
        ]
    }

    fn close(&self) -> DriverResult<()> {
        let conns: Vec<Connection> = std::mem::take(&mut *self.pool.lock());
        for c in conns {
            c.close().map_err(|(_, e)| map_err(e))?;
        }
        Ok(())
    }
}

struct SqliteTxn {
    /// `None` once finished.
    conn: Option<Connection>,
    /// Whether BEGIN IMMEDIATE has run.
    started: bool,
    pool: Arc<Mutex<Vec<Connection>>>,
    tables: Tables,
}

impl SqliteTxn {
    fn table(&self, t: TableId) -> DriverResult<Arc<TableSql>> {
        self.tables
            .get(t)
            .and_then(Option::clone)
            .ok_or_else(|| DriverError::fatal(format!("sqlite: table id {t} not open")))
    }

    /// Run `f` inside the transaction (starting it first); an error ends the transaction.
    fn run<R>(&mut self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> DriverResult<R> {
        let Some(conn) = self.conn.as_ref() else {
            return Err(DriverError::fatal(
                "sqlite: the transaction already ended (an earlier statement failed)",
            ));
        };
        let r = if self.started {
            f(conn)
        } else {
            conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
                self.started = true;
                f(conn)
            })
        };
        r.map_err(|e| {
            self.finish("ROLLBACK");
            map_err(e)
        })
    }

    /// End the transaction with `sql`; a connection still inside a transaction after a
    /// failure is rolled back, and only a connection outside any transaction is pooled.
    fn finish(&mut self, sql: &str) -> Option<rusqlite::Error> {
        let conn = self.conn.take()?;
        let r = if self.started {
            conn.execute_batch(sql).err()
        } else {
            None
        };
        if r.is_some() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        if conn.is_autocommit() {
            self.pool.lock().push(conn);
        }
        r
    }
}

impl DriverTxn for SqliteTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let sql = self.table(t)?;
        self.run(|c| {
            c.prepare_cached(&sql.get)?
                .query_row([key], |r| r.get(0))
                .optional()
        })
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        // Every transaction holds the database's write lock: a plain read is a locking read.
        self.get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        let sql = self.table(t)?;
        self.run(|c| {
            c.prepare_cached(&sql.put)?
                .execute([key, value])
                .map(|_| ())
        })
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        let sql = self.table(t)?;
        self.run(|c| c.prepare_cached(&sql.delete)?.execute([key]).map(|_| ()))
    }

    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let sql = self.table(t)?;
        let mut conds = Vec::new();
        let mut params: Vec<&[u8]> = Vec::new();
        for (b, inc, exc) in [(lower, "k >= ?", "k > ?"), (upper, "k <= ?", "k < ?")] {
            match b {
                Bound::Included(k) => {
                    conds.push(inc);
                    params.push(k);
                }
                Bound::Excluded(k) => {
                    conds.push(exc);
                    params.push(k);
                }
                Bound::Unbounded => {}
            }
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let order = if reverse { "DESC" } else { "ASC" };
        // SQLite's LIMIT is a signed 64-bit integer; larger means no limit.
        let limit = i64::try_from(limit).unwrap_or(-1);
        let text = format!(
            "SELECT k, v FROM {}{filter} ORDER BY k {order} LIMIT {limit}",
            sql.quoted
        );
        self.run(|c| {
            let mut st = c.prepare_cached(&text)?;
            let rows = st.query_map(params_from_iter(params), |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    fn commit(mut self: Box<Self>) -> DriverResult<()> {
        if self.conn.is_none() {
            return Err(DriverError::fatal(
                "sqlite: commit of a transaction that already ended",
            ));
        }
        match self.finish("COMMIT") {
            None => Ok(()),
            Some(e) => Err(map_err(e)),
        }
    }

    fn rollback(mut self: Box<Self>) {
        self.finish("ROLLBACK");
    }
}

impl Drop for SqliteTxn {
    fn drop(&mut self) {
        self.finish("ROLLBACK");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_age_is_the_wal_not_yet_copied_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = SqliteDriver::open(dir.path(), None, &[]).expect("open");
        let t = d.open_table("t", true).expect("table");
        let mut x = d.begin().expect("begin");
        for i in 0..200u32 {
            x.put(t, &i.to_be_bytes(), &[7u8; 500]).expect("put");
        }
        x.commit().expect("commit");
        let age = d.stats().checkpoint_age_bytes.expect("age");
        assert!(age >= 100_000, "200 rows of 500 bytes pending, age {age}");
        d.with_conn(|c| c.execute_batch("PRAGMA wal_checkpoint(PASSIVE)"))
            .expect("checkpoint");
        assert_eq!(
            d.stats().checkpoint_age_bytes,
            Some(0),
            "after a checkpoint"
        );
        let wal = d.stats().extra["wal_file_bytes"];
        assert!(wal > 0.0, "the WAL file keeps its size: {wal}");
        d.close().expect("close");
    }
}
