//! shared: the state of one open database that the API (`db`) and transactions (`txn`) share:
//! [`DbInner`] (the pool, the durability state, key locks, the catalog, counters, background
//! threads and the file lock) and the [`Table`] handle, which carries its database's identity.
//!
//! Sits below `txn` and `db`: both use it, it uses neither. Shutting down (stop the threads,
//! write every dirty page back, mark a clean shutdown, release the file lock) lives here
//! because the last handle to drop, of either kind, runs it.

use crate::btree::{ibuf, AdaptiveHash, ChangeBuffer, Ctx, Tree, TreeCounters};
use crate::buffer::BufferPool;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::flush::{self, cleaner, Durability};
use crate::io::Storage;
use crate::locks::LockTable;
use crate::mtr::Mtr;
use crate::options::Options;
use crate::recovery::RecoveryReport;
use crate::space::{self, HEADER_PAGE};
use crate::types::PageId;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Identity of one open of a database: a [`Table`] handle carries its database's, and a
/// transaction refuses a handle whose identity is not its own.
pub(crate) static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// A table handle, valid until the table is dropped, and only with the `Database` (open)
/// it came from: a transaction of another database refuses it with [`Error::ForeignTable`].
/// One reference count for the whole handle: every write of a transaction keeps a clone of
/// its table in the write set, so a clone is one atomic increment, not one per field.
#[derive(Clone)]
pub struct Table(pub(crate) Arc<TableHandle>);

/// What a [`Table`] refers to.
pub(crate) struct TableHandle {
    pub(crate) tree: Arc<Tree>,
    pub(crate) name: Arc<str>,
    /// `DbInner::id` of the database this handle belongs to.
    pub(crate) db_id: u64,
    pub(crate) db_location: Arc<str>,
}

impl Table {
    pub(crate) fn tree(&self) -> &Arc<Tree> {
        &self.0.tree
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
    pub fn id(&self) -> u32 {
        self.0.tree.id
    }
    /// Whether this is an index table (`Database::create_index_table`).
    pub fn is_index(&self) -> bool {
        self.0.tree.key_set
    }
    /// Refuses a handle of a dropped table, or of another database than `db`.
    pub(crate) fn check_usable(&self, db: &DbInner) -> Result<()> {
        if self.0.db_id != db.id {
            return Err(Error::ForeignTable {
                table: self.0.name.to_string(),
                table_db: self.0.db_location.to_string(),
                txn_db: db.location.clone(),
            });
        }
        self.check_live()
    }
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.0.tree.dropped.load(Ordering::Acquire) {
            return Err(Error::TableDropped(self.0.name.to_string()));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.0.name)
            .field("id", &self.0.tree.id)
            .field("database", &self.0.db_location)
            .finish()
    }
}

crate::counter::counter_group! {
    /// Transactions and rows, counted by the API layer.
    pub struct DbCounters => DbCounts {
        /// Transactions committed (read-only and empty ones included).
        commits: "commits" hot,
        /// Commits whose apply logged what they reserved and re-logged the writes left (a
        /// CommitContinued record), so that the checkpoint could pass their COMMIT.
        commit_continuations: "continuations",
        /// Times an apply stopped before a write, its reservation released, to leave the log's
        /// last room to the owner of the oldest pin (the log's free space was down to what that
        /// owner needs for its next step).
        apply_yields: "yields",
        /// Transactions rolled back, by the caller or by an error.
        rollbacks: "rollbacks",
        /// Rows put by committed transactions.
        rows_written: "rows",
        /// Rows deleted by committed transactions.
        rows_deleted: "rows",
        /// Puts logged in their COMMIT record as the bytes that changed, not the whole value
        /// (the transaction had read the value under its lock, and the length is the same).
        writes_logged_as_patches: "writes",
    }
}

pub(crate) struct DbInner {
    /// This open's identity (see [`Table`]).
    pub(crate) id: u64,
    pub(crate) location: String,
    /// Opened with [`Database::open_read_only`]: nothing reaches the files.
    pub(crate) read_only: bool,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) pool: Arc<BufferPool>,
    pub(crate) dur: Arc<Durability>,
    pub(crate) locks: LockTable,
    /// Its own cache line: every transaction bumps it, and the fields around it are read by
    /// every operation.
    pub(crate) next_txn: crossbeam::utils::CachePadded<AtomicU64>,
    pub(crate) recovery: RecoveryReport,
    pub(crate) cleaner: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) lru_cleaner: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) readers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    pub(crate) catalog: Catalog,
    /// The change buffer (None only on a read-only open of a file made before it existed).
    pub(crate) ibuf: Option<Arc<ChangeBuffer>>,
    /// The adaptive hash index (None: `adaptive_hash_index` is off).
    pub(crate) ahi: Option<AdaptiveHash>,
    /// The doublewrite area, for its counters (None: read-only, or `doublewrite` off on a
    /// database that never had one).
    pub(crate) dwb: Option<Arc<crate::dwb::Doublewrite>>,
    pub(crate) ibuf_merger: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) opts: Options,
    pub(crate) tree_counters: Arc<TreeCounters>,
    pub(crate) counters: DbCounters,
    pub(crate) closed: AtomicBool,
    pub(crate) close_lock: Mutex<()>,
    /// Lock on the data file while open (exclusive, shared when read-only); released by
    /// `shutdown`, so `close` returning means another process may open the database.
    pub(crate) dir_lock: Mutex<Option<std::fs::File>>,
}

impl DbInner {
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pool: &self.pool,
            space: &self.dur.space,
            ibuf: self.ibuf.as_deref(),
            ahi: self.ahi.as_ref(),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::DatabaseClosed(self.location.clone()));
        }
        self.dur.check_poison()
    }

    /// Refuses a change (`what`) on a read-only open.
    pub(crate) fn check_writable(&self, what: &'static str) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly {
                location: self.location.clone(),
                what,
            });
        }
        Ok(())
    }

    /// Starts the page cleaner and the LRU cleaner (a read-write open only).
    pub(crate) fn start_cleaners(&self) -> Result<()> {
        let dur = self.dur.clone();
        let handle = std::thread::Builder::new()
            .name("evenkeel-flusher".into())
            .spawn(move || cleaner::run(dur))
            .map_err(|e| Error::io("flusher thread", "spawn", e))?;
        *self.cleaner.lock() = Some(handle);
        let dur = self.dur.clone();
        let handle = std::thread::Builder::new()
            .name("evenkeel-lru".into())
            .spawn(move || flush::lru::run(dur))
            .map_err(|e| Error::io("LRU cleaner thread", "spawn", e))?;
        *self.lru_cleaner.lock() = Some(handle);
        if let Some(ib) = self.ibuf.clone() {
            let dur = self.dur.clone();
            let handle = std::thread::Builder::new()
                .name("evenkeel-ibuf".into())
                .spawn(move || run_change_buffer_merge(&ib, &dur))
                .map_err(|e| Error::io("change buffer merge thread", "spawn", e))?;
            *self.ibuf_merger.lock() = Some(handle);
        }
        // a reader that finds no free frame wakes the LRU cleaner (weak: the pool must not
        // keep the durability state, which owns the pool, alive)
        let weak = Arc::downgrade(&self.dur);
        self.pool.set_free_frame_waker(Box::new(move || {
            weak.upgrade().is_some_and(|d| d.wake_lru())
        }));
        Ok(())
    }

    /// Starts the read-ahead threads: requests are hints, so a bounded queue drops them when
    /// full.
    pub(crate) fn start_read_ahead(&self) -> Result<()> {
        let (tx, rx) = crossbeam::channel::bounded::<PageId>(1024);
        for i in 0..self.opts.read_io_threads {
            let (pool, rx) = (self.pool.clone(), rx.clone());
            let h = std::thread::Builder::new()
                .name(format!("evenkeel-read-{i}"))
                .spawn(move || {
                    while let Ok(pid) = rx.recv() {
                        // a failed read-ahead is not an error: the page is read when needed
                        let _ = pool.prefetch(pid);
                    }
                })
                .map_err(|e| Error::io("read-ahead thread", "spawn", e))?;
            self.readers.lock().push(h);
        }
        self.pool.set_read_ahead_queue(Some(tx));
        self.pool.set_read_ahead(
            self.opts.read_ahead as u8,
            self.opts.read_ahead_threshold as u32,
        );
        Ok(())
    }

    /// A handle to `tree` belonging to this database.
    pub(crate) fn table_handle(&self, tree: Arc<Tree>, name: &str) -> Table {
        Table(Arc::new(TableHandle {
            tree,
            name: Arc::from(name),
            db_id: self.id,
            db_location: Arc::from(self.location.as_str()),
        }))
    }

    pub(crate) fn shutdown(&self) -> Result<()> {
        let _g = self.close_lock.lock();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.stop_and_write_back();
        // The file lock goes last: another process may open the database once this returns.
        drop(self.dir_lock.lock().take());
        result
    }

    fn stop_and_write_back(&self) -> Result<()> {
        let merged = self.stop_change_buffer();
        self.dur.stop();
        if let Some(h) = self.cleaner.lock().take() {
            let _ = h.join();
        }
        if let Some(h) = self.lru_cleaner.lock().take() {
            let _ = h.join();
        }
        self.pool.set_read_ahead_queue(None);
        for h in self.readers.lock().drain(..) {
            let _ = h.join();
        }
        // During a panic (an engine invariant failed, perhaps mid-write-back with frames left
        // busy) the pool's state is not to be trusted: flushing it could write bad pages or
        // wait forever on a frame nobody will release. Recovery redoes from the log instead.
        if self.dur.check_poison().is_err() || std::thread::panicking() {
            // nothing more may reach the data file; recovery will redo from the log
            return self.dur.log.close();
        }
        if self.read_only {
            // nothing was appended and no page dirtied, so closing writes nothing
            debug_assert_eq!(self.pool.status().pages_dirty, 0);
            return self.dur.log.close();
        }
        merged?;
        sharp_checkpoint(&self.dur, true)?;
        self.dur.log.close()
    }
}

impl DbInner {
    /// Stops the background merge and, read-write and healthy, merges every buffered change
    /// (with the page cleaner still running): a clean shutdown leaves the change buffer empty,
    /// so a read-only open, which must write nothing, never has a merge to do.
    fn stop_change_buffer(&self) -> Result<()> {
        let Some(ib) = &self.ibuf else {
            return Ok(());
        };
        ib.stop.store(true, Ordering::Release);
        if let Some(h) = self.ibuf_merger.lock().take() {
            let _ = h.join();
        }
        if self.read_only || self.dur.check_poison().is_err() || std::thread::panicking() {
            return Ok(());
        }
        ib.merge_all(&self.ctx())
    }
}

/// The background merge: every 100 ms, merges the buffered changes of as many leaves as
/// `ibuf::merge_rate` gives for the change buffer's size (InnoDB's master thread merges 5%
/// of io_capacity pages a second, more as the buffer fills). Runs until shutdown; an error
/// (a poisoned engine) is logged, and the next reader of that leaf meets it.
fn run_change_buffer_merge(ib: &ChangeBuffer, dur: &Durability) {
    const TICK: std::time::Duration = std::time::Duration::from_millis(100);
    let mut credit = 0.0f64;
    while !ib.stop.load(Ordering::Acquire) {
        std::thread::sleep(TICK);
        if ib.entries() == 0 {
            credit = 0.0;
            continue;
        }
        let (pct, cap, cap_max) = {
            let k = dur.knobs.read();
            (k.change_buffer_merge_pct, k.io_capacity, k.io_capacity_max)
        };
        // the buffer's size by its entries, or the limit once the tree's pages reach it
        let max = ib.max_pages();
        let size = if ib.tree_pages() >= max {
            max
        } else {
            ib.size() as u64
        };
        credit += ibuf::merge_rate(pct, cap, cap_max, size, max) * TICK.as_secs_f64();
        let n = credit.floor();
        if n < 1.0 {
            continue;
        }
        credit -= n;
        if let Err(e) = merge_admitted(ib, dur, n as usize) {
            tracing::warn!("change buffer: background merge failed: {e}");
            if dur.check_poison().is_err() {
                return;
            }
        }
    }
}

/// Leaves the background merge takes log space for at once.
const MERGE_ADMIT_LEAVES: usize = 8;

/// Merges the buffered changes of up to `leaves` leaves, those with the most changes first
/// ([`ChangeBuffer::fullest`]; the change buffer's order, which also discards the entries of a
/// table that is gone, when no registered table's leaf has any), [`MERGE_ADMIT_LEAVES`] at a
/// time, each group holding a log reservation ([`Durability::admit_background`]) of two pages
/// of redo per leaf: the leaf's changes (its buffered inserts fit its free space, so at most a
/// page) and the change buffer's own leaf. Merges are writes: unreserved, a merge rate that
/// rises as the buffer fills took log space no admission had counted, and the checkpoint age
/// reached the log's end.
fn merge_admitted(ib: &ChangeBuffer, dur: &Durability, leaves: usize) -> Result<()> {
    let cx = Ctx {
        pool: &dur.pool,
        space: &dur.space,
        ibuf: Some(ib),
        ahi: None,
    };
    let per_leaf = 2 * dur.pool.page_size() as u64;
    let fullest = ib.fullest(leaves);
    if !fullest.is_empty() {
        for group in fullest.chunks(MERGE_ADMIT_LEAVES) {
            if ib.stop.load(Ordering::Acquire) {
                break;
            }
            let Some(_room) = dur.admit_background(group.len() as u64 * per_leaf, &ib.stop)? else {
                break;
            };
            ib.merge_listed(&cx, group)?;
        }
        return Ok(());
    }
    let mut left = leaves;
    while left > 0 && !ib.stop.load(Ordering::Acquire) {
        let n = left.min(MERGE_ADMIT_LEAVES);
        let Some(_room) = dur.admit_background(n as u64 * per_leaf, &ib.stop)? else {
            break;
        };
        if ib.merge_some(&cx, n)? == 0 {
            break;
        }
        left -= n;
    }
    Ok(())
}

/// Writes every dirty page and a checkpoint at the log end (and the clean-shutdown flag).
pub(crate) fn sharp_checkpoint(dur: &Durability, clean: bool) -> Result<()> {
    {
        let mut mtr = Mtr::new(&dur.pool, &dur.space);
        let hs = mtr.write(HEADER_PAGE)?;
        let lsn = dur.log.current_lsn();
        space::set_shutdown(mtr.pg(hs), lsn, clean);
        mtr.commit()?;
    }
    dur.pool.flush_all().inspect_err(|e| dur.poison(e))?;
    dur.checkpoint()?;
    Ok(())
}

impl Drop for DbInner {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!("closing {} failed: {e}", self.location);
        }
    }
}
