//! db: the public API an embedding program uses: [`Database`], [`Table`], [`Status`].
//!
//! A database is a directory holding one data file (`evenkeel.data`). Opening it sizes the
//! buffer pool once; closing it (or dropping the last handle) writes every dirty page back and
//! records a clean shutdown in the file header. Until the durable write path lands, a process
//! that dies without closing loses what was not yet written back.

use crate::btree::{Ctx, TreeCounters};
use crate::buffer::{BufferPool, DirectSink, PageSink, PoolConfig};
use crate::catalog::Catalog;
use crate::dwb::{Doublewrite, DWB_FILE_NAME};
use crate::error::{Error, Health, Result};
use crate::flush::Durability;
use crate::io::{File, FileKind, FileStorage, Storage};
use crate::locks::{LockLimits, LockTable};
use crate::mtr::Mtr;
use crate::options::Options;
use crate::page::{self, node};
use crate::recovery::{self, RecoveryReport};
pub use crate::shared::Table;
use crate::shared::{sharp_checkpoint, DbCounters, DbInner, NEXT_DB_ID};
use crate::space::{self, Header, HEADER_PAGE};
use crate::status::Status;
use crate::txn::transaction::Transaction;
use crate::types::PageId;
use crate::wal::{self, FlushAtCommit, Log, LogConfig};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub const DATA_FILE: &str = "evenkeel.data";

/// A handle to an open database; cheap to clone and share between threads.
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<DbInner>,
}

impl Table {
    /// Rows of this table with keys in `range`, as `txn` sees them (see
    /// [`Transaction::range`]): `t.range(&txn, "a".."m")`, `t.range(&txn, ..)?.rev()`.
    pub fn range<R: crate::txn::transaction::KeyRange>(
        &self,
        txn: &Transaction,
        range: R,
    ) -> Result<crate::txn::transaction::Scan> {
        txn.range(self, range)
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = &self.inner;
        f.debug_struct("Database")
            .field("location", &i.location)
            .field("page_size", &i.pool.page_size())
            .field("read_only", &i.read_only)
            .field("closed", &i.closed.load(Ordering::Acquire))
            .finish()
    }
}

fn log_config(opts: &Options) -> LogConfig {
    LogConfig {
        file_size: opts.log_file_size,
        files: opts.log_files_in_group,
        // A small log gets a buffer to match: at most a quarter of its capacity.
        buffer_size: opts
            .log_buffer_size
            .min(opts.log_file_size * opts.log_files_in_group as u64 / 4)
            as usize,
        block_size: opts.log_block_size,
        flush_at_commit: match opts.flush_log_at_trx_commit {
            0 => FlushAtCommit::Zero,
            2 => FlushAtCommit::Two,
            _ => FlushAtCommit::One,
        },
        ..LogConfig::default()
    }
}

/// Slots per doublewrite segment: one full page-cleaner batch (fewer only where
/// `write_io_threads` segments of that size would exceed the area limit at large page sizes;
/// a batch larger than a segment is written in chunks).
fn doublewrite_segment_slots(page_size: usize, segments: usize) -> usize {
    let area = crate::dwb::MAX_SLOTS.min(crate::dwb::MAX_AREA_BYTES / page_size);
    crate::flush::FLUSH_BATCH_PAGES
        .min(area / segments.max(1))
        .max(1)
}

/// Writes page batches through the doublewrite area (invariant 4: a torn page is repairable).
struct DoublewriteSink(Arc<Doublewrite>);

impl PageSink for DoublewriteSink {
    fn write_pages(&self, file: &dyn File, pages: &[(PageId, &[u8])]) -> Result<()> {
        self.0.write_batch(file, pages)
    }
}

/// The doublewrite area, when `doublewrite` is on or a doublewrite file exists (a database
/// last run with doublewrite on may hold the only good copy of a torn page).
fn open_doublewrite(
    storage: &Arc<dyn Storage>,
    opts: &Options,
    page_size: usize,
    health: &Arc<Health>,
) -> Result<Option<Arc<Doublewrite>>> {
    if !opts.doublewrite && !storage.exists(DWB_FILE_NAME) {
        return Ok(None);
    }
    let segments = opts.write_io_threads as usize;
    Ok(Some(Arc::new(
        Doublewrite::open_segments(
            storage.as_ref(),
            page_size,
            segments,
            doublewrite_segment_slots(page_size, segments),
        )?
        .with_health(health.clone()),
    )))
}

fn page_sink(opts: &Options, dwb: &Option<Arc<Doublewrite>>) -> Box<dyn PageSink> {
    match dwb {
        Some(d) if opts.doublewrite => Box::new(DoublewriteSink(d.clone())),
        _ => Box::new(DirectSink),
    }
}

fn pool_config(opts: &Options, page_size: usize) -> PoolConfig {
    PoolConfig {
        page_size,
        pool_bytes: opts.buffer_pool_size,
        instances: opts.buffer_pool_instances,
        old_blocks_pct: opts.old_blocks_pct as usize,
        old_blocks_time_ms: opts.old_blocks_time as u64,
    }
}

impl Database {
    /// Creates a new database in `dir` (created if missing). Fails if one exists there.
    pub fn create(dir: impl AsRef<Path>, opts: Options) -> Result<Database> {
        let dir = dir.as_ref();
        if dir.exists() && !dir.is_dir() {
            return Err(Error::BadDatabase {
                path: dir.to_path_buf(),
                reason: "is a file, not a directory: a database is a directory".into(),
            });
        }
        let storage = Arc::new(FileStorage::new(dir, opts.flush_method)?);
        if storage.exists(DATA_FILE) {
            return Err(Error::BadDatabase {
                path: dir.to_path_buf(),
                reason: "a database already exists here".into(),
            });
        }
        let db = Self::create_in(storage, opts)?;
        db.with_dir_lock(dir)
    }

    /// Takes the exclusive lock that keeps a second process (or a second open in this one)
    /// from writing the same database: two writers would corrupt it silently.
    fn with_dir_lock(self, dir: &Path) -> Result<Database> {
        let lock = lock_data_file(dir, true)?;
        *self.inner.dir_lock.lock() = Some(lock);
        Ok(self)
    }

    /// Opens the database in `dir`, running crash recovery first when its last run did not
    /// shut down cleanly.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Database> {
        let dir = dir.as_ref();
        require_database(dir)?;
        // Lock first: opening writes the header, which must not race another writer.
        let lock = lock_data_file(dir, true)?;
        let storage = Arc::new(FileStorage::new(dir, opts.flush_method)?);
        Self::open_locked(storage, opts, Some(lock), false)
    }

    /// Opens the database in `dir` for reading only: nothing is written to any of its files,
    /// now or at close (the files are reached through [`crate::io::ReadOnlyStorage`]), and
    /// other read-only opens may run beside it. Transactions may read; a write, a commit of
    /// writes, creating or dropping a table fail with [`Error::ReadOnly`]. A database that
    /// was not shut down cleanly is refused with [`Error::NeedsRecovery`] (recovery writes),
    /// and a data file whose size does not match its header with [`Error::BadDatabase`].
    pub fn open_read_only(dir: impl AsRef<Path>, opts: Options) -> Result<Database> {
        let dir = dir.as_ref();
        require_database(dir)?;
        let lock = lock_data_file(dir, false)?;
        // No directory is created: FileStorage::new would, so the directory is checked above.
        let storage = Arc::new(crate::io::ReadOnlyStorage::new(Arc::new(FileStorage::new(
            dir,
            opts.flush_method,
        )?)));
        Self::open_locked(storage, opts, Some(lock), true)
    }

    /// Opens the database in `dir`, creating it when there is none.
    pub fn open_or_create(dir: impl AsRef<Path>, opts: Options) -> Result<Database> {
        if dir.as_ref().join(DATA_FILE).exists() {
            Self::open(dir, opts)
        } else {
            Self::create(dir, opts)
        }
    }

    /// Creates a database on any storage (the simulated disk in tests).
    pub fn create_in(storage: Arc<dyn Storage>, opts: Options) -> Result<Database> {
        opts.validate()?;
        if storage.exists(DATA_FILE) {
            return Err(Error::BadDatabase {
                path: PathBuf::from(storage.describe()).join(DATA_FILE),
                reason: "a database already exists here".into(),
            });
        }
        let log0 = wal::layout::file_name(0);
        if storage.exists(&log0) {
            return Err(Error::BadDatabase {
                path: PathBuf::from(storage.describe()).join(&log0),
                reason: format!(
                    "a redo log file exists but {DATA_FILE} does not: an earlier create did not \
                     finish (the data file is made durable last), or the data file was removed; \
                     remove the ib_logfile* and {DWB_FILE_NAME} files to create a new database"
                ),
            });
        }
        let ps = opts.page_size;
        let health = Health::new();
        let mut log_cfg = log_config(&opts);
        log_cfg.health = Some(health.clone());
        let log = Arc::new(Log::create(storage.clone(), log_cfg)?);
        // IMPORTANT: the data file is created last and its directory entry made durable only
        // once it is complete (the sync_dir below): the doublewrite file's creation syncs the
        // directory, so opening it after the data file would make an empty data file durable,
        // and a crash then would leave a database that can be neither opened nor re-created.
        let dwb = open_doublewrite(&storage, &opts, ps, &health)?;
        let file = storage.open(DATA_FILE, FileKind::Data, true)?;
        let pool = Arc::new(BufferPool::new(
            &pool_config(&opts, ps),
            file,
            Some(log.clone()),
            page_sink(&opts, &dwb),
            health,
        )?);
        let dur = Durability::new(log.clone(), pool, opts.clone());
        {
            let mut mtr = Mtr::new(&dur.pool, &dur.space);
            let hs = mtr.create(HEADER_PAGE)?;
            let cs = mtr.create(PageId(1))?;
            space::format_header(mtr.pg(hs), ps, PageId(1));
            page::init(
                mtr.pg(cs),
                PageId(1),
                page::PageType::Leaf,
                crate::catalog::CATALOG_TABLE_ID,
            );
            mtr.commit()?;
        }
        sharp_checkpoint(&dur, true)?;
        // IMPORTANT: the new data file is not durable until its directory is synced.
        storage.sync_dir()?;
        log.close()?;
        drop(dur);
        Self::open_in(storage, opts)
    }

    /// Opens a database on any storage, running crash recovery first.
    pub fn open_in(storage: Arc<dyn Storage>, opts: Options) -> Result<Database> {
        Self::open_locked(storage, opts, None, false)
    }

    /// Opens a database on any storage for reading only (see [`Database::open_read_only`]).
    pub fn open_in_read_only(storage: Arc<dyn Storage>, opts: Options) -> Result<Database> {
        let storage: Arc<dyn Storage> = Arc::new(crate::io::ReadOnlyStorage::new(storage));
        Self::open_locked(storage, opts, None, true)
    }

    fn open_locked(
        storage: Arc<dyn Storage>,
        mut opts: Options,
        dir_lock: Option<std::fs::File>,
        read_only: bool,
    ) -> Result<Database> {
        let started = std::time::Instant::now();
        let location = storage.describe();
        let bad = |reason: String| Error::BadDatabase {
            path: PathBuf::from(&location).join(DATA_FILE),
            reason,
        };
        let (file, ps, header_fault) = probe_data_file(&storage, &mut opts, read_only)?;
        let health = Health::new();
        let mut log_cfg = log_config(&opts);
        log_cfg.read_only = read_only;
        log_cfg.health = Some(health.clone());
        let (log, recovered) = Log::open(storage.clone(), log_cfg)?;
        if read_only && !recovered.groups.is_empty() {
            // the header says clean, yet the log holds changes past its checkpoint
            return Err(Error::NeedsRecovery {
                path: PathBuf::from(&location).join(DATA_FILE),
                dir: location.clone(),
            });
        }
        let log = Arc::new(log);
        let mut report = RecoveryReport::default();
        // A clean shutdown left no torn page to repair, and opening the area may write it.
        let dwb = if read_only {
            None
        } else {
            open_doublewrite(&storage, &opts, ps, &health)?
        };
        if let Some(d) = &dwb {
            // IMPORTANT: torn pages are restored before redo reads them.
            repair_torn_pages(d, file.as_ref(), &mut report)?;
        }
        if let Some(reason) = &header_fault {
            let mut first = vec![0u8; page::MIN_PAGE_SIZE];
            file.read_at(&mut first, 0)?;
            space::probe_page_size(&first).map_err(|_| {
                bad(format!(
                    "file header (page 0): {reason}, and the doublewrite area holds no usable \
                     copy of it"
                ))
            })?;
        }
        let pool = Arc::new(BufferPool::new(
            &pool_config(&opts, ps),
            file.clone(),
            Some(log.clone()),
            page_sink(&opts, &dwb),
            health,
        )?);
        let pending = recovery::redo(&pool, &recovered, &mut report)?;
        let (recovered_end, recovered_stop) = (recovered.end_lsn, recovered.stop.clone());
        drop(recovered);
        let dur = Durability::new(log.clone(), pool.clone(), opts.clone());
        let header = {
            let g = pool.read(HEADER_PAGE)?;
            // The header page changes with every allocation and every shutdown, so it is the
            // page most likely to show that the log lost durable records redo never saw.
            if page::hdr::lsn(&g) > recovered_end {
                return Err(recovery::log_behind_page(
                    pool.file().name(),
                    HEADER_PAGE.0,
                    page::hdr::lsn(&g).0,
                    recovered_end,
                    &recovered_stop,
                ));
            }
            Header::decode(&g)
        };
        let tree_counters = Arc::new(TreeCounters::default());
        let catalog = {
            let cx = Ctx {
                pool: &pool,
                space: &dur.space,
            };
            Catalog::load(&cx, header.catalog_root, tree_counters.clone())?
        };
        let inner = DbInner {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            location,
            read_only,
            storage,
            pool,
            dur,
            locks: LockTable::new(LockLimits {
                memory_max_bytes: opts.max_lock_memory as usize,
            }),
            next_txn: AtomicU64::new(1),
            recovery: RecoveryReport::default(),
            cleaner: Mutex::new(None),
            lru_cleaner: Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            catalog,
            opts,
            tree_counters,
            counters: DbCounters::default(),
            closed: AtomicBool::new(false),
            close_lock: Mutex::new(()),
            dir_lock: Mutex::new(dir_lock),
        };
        if !read_only {
            report.transactions_reapplied = crate::txn::apply::reapply(&inner, pending)?;
            // A sharp checkpoint ends recovery: the next crash starts from here.
            sharp_checkpoint(&inner.dur, false)?;
        }
        report.seconds = started.elapsed().as_secs_f64();
        if report.groups > 0 {
            tracing::info!("{}: recovery: {report:?}", inner.location);
        }
        let mut inner = inner;
        inner.recovery = report;
        if !read_only {
            log.start_background()?;
            inner.start_cleaners()?;
        }
        inner.start_read_ahead()?;
        Ok(Database {
            inner: Arc::new(inner),
        })
    }
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    pub fn page_size(&self) -> usize {
        self.inner.pool.page_size()
    }

    /// Largest key accepted, in bytes (page_size / 8).
    pub fn max_key_len(&self) -> usize {
        node::max_key_len(self.page_size())
    }

    pub fn create_table(&self, name: &str) -> Result<Table> {
        self.inner.check_writable("creating a table")?;
        let tree = self.inner.catalog.create(&self.inner.ctx(), name)?;
        self.make_durable()?;
        Ok(self.inner.table_handle(tree, name))
    }

    /// The table named `name`, creating it if missing.
    pub fn create_table_if_missing(&self, name: &str) -> Result<Table> {
        match self.table(name) {
            Err(Error::TableNotFound(_)) => match self.create_table(name) {
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
            r => r,
        }
    }

    pub fn table(&self, name: &str) -> Result<Table> {
        self.inner.check_open()?;
        match self.inner.catalog.get(name) {
            Some(tree) => Ok(self.inner.table_handle(tree, name)),
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Drops a table and frees its pages for reuse.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.inner.check_writable("dropping a table")?;
        self.inner.catalog.drop_table(&self.inner.ctx(), name)?;
        self.make_durable()
    }

    /// DDL is acknowledged only once its redo is durable (invariant 3 holds for DDL too).
    fn make_durable(&self) -> Result<()> {
        let log = &self.inner.dur.log;
        log.flush_to(log.current_lsn(), true)
            .inspect_err(|e| self.inner.dur.poison(e))
    }

    pub fn tables(&self) -> Result<Vec<String>> {
        self.inner.check_open()?;
        Ok(self.inner.catalog.names())
    }

    /// The most writes one transaction can commit when each writes `key_len + value_len`
    /// bytes (the redo log's size bounds a transaction), and the option to raise for more
    /// (`log_file_size` or `log_buffer_size`).
    pub fn max_writes_per_transaction(
        &self,
        key_len: usize,
        value_len: usize,
    ) -> (u64, &'static str) {
        let log = &self.inner.dur.log;
        crate::txn::transaction::max_writes_per_transaction(
            log.capacity(),
            log.max_payload(),
            self.page_size(),
            key_len,
            value_len,
        )
    }

    /// Whether this handle was opened with [`Database::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    pub fn begin(&self) -> Transaction {
        Transaction::new(self.inner.clone())
    }

    pub fn status(&self) -> Status {
        let i = &self.inner;
        let buffer = i.pool.status();
        let header = i.pool.read(HEADER_PAGE).map(|g| Header::decode(&g)).ok();
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let log = &i.dur.log;
        let (lsn, cp) = (log.current_lsn().0, log.checkpoint_lsn().0);
        Status {
            location: i.location.clone(),
            page_size: i.pool.page_size(),
            lsn,
            flushed_lsn: log.flushed_lsn().0,
            checkpoint_lsn: cp,
            checkpoint_age_bytes: lsn.saturating_sub(cp),
            checkpoint_age_pct: 100.0 * lsn.saturating_sub(cp) as f64 / log.capacity() as f64,
            log_capacity_bytes: log.capacity(),
            log: log.stats(),
            flush_policy: i.dur.knobs.read().adaptive_flushing,
            flush: i.dur.counters.snapshot(),
            admission_delay_now_us: ld(&i.dur.admission_delay_now_us),
            log_full_waits: ld(&i.dur.space.log_full_waits),
            checkpoints: ld(&i.dur.space.checkpoints),
            recovery: i.recovery.clone(),
            locks: i.locks.stats(),
            page_overhead_bytes: page::PAGE_OVERHEAD,
            buffer_pool_size: i.pool.frame_count() as u64 * i.pool.page_size() as u64,
            buffer_pool_instances: i.opts.buffer_pool_instances,
            file_pages: header.map_or(0, |h| h.page_count),
            free_list_pages: header.map_or(0, |h| h.free_count),
            file_bytes: i.pool.file().len().unwrap_or(0),
            tables: i.catalog.names().len(),
            dirty_pct: 100.0 * buffer.pages_dirty as f64
                / (1 + buffer.pages_data + buffer.pages_free) as f64,
            buffer,
            tree: i.tree_counters.snapshot(),
            txns: i.counters.snapshot(),
            io: i.storage.io_stats(),
        }
    }

    /// Writes every dirty page back and writes a checkpoint at the log end (a sharp
    /// checkpoint). Returns the pages written.
    pub fn flush(&self) -> Result<usize> {
        self.inner.check_open()?;
        if self.inner.read_only {
            return Ok(0); // nothing can be dirty, and a checkpoint would write
        }
        let n = self
            .inner
            .pool
            .flush_all()
            .inspect_err(|e| self.inner.dur.poison(e))?;
        self.inner.dur.checkpoint()?;
        Ok(n)
    }

    /// Verifies every page checksum and every B+tree invariant, and that no page LSN is beyond
    /// the redo log's end. Run it on a quiescent database: it flushes, then reads the data file
    /// directly.
    pub fn check(&self) -> Result<crate::check::CheckReport> {
        self.flush()?;
        let log = &self.inner.dur.log;
        crate::check::check_file_with_log(
            self.inner.pool.file().as_ref(),
            Some(&|| log.current_lsn()),
        )
    }

    /// Changes a dynamic option on the open database (see `options::DYNAMIC_KNOBS`); it takes
    /// effect within one page-cleaner loop. Others are rejected with the list of dynamic ones.
    pub fn set_option(&self, name: &str, value: &str) -> Result<()> {
        self.inner.check_open()?;
        let canonical = name.trim().to_ascii_lowercase().replace('-', "_");
        let canonical = canonical
            .strip_prefix("innodb_")
            .unwrap_or(&canonical)
            .to_string();
        if !crate::options::DYNAMIC_KNOBS.contains(&canonical.as_str()) {
            return Err(Error::InvalidOption {
                name: name.to_string(),
                value: value.to_string(),
                expected: format!(
                    "an option that can change while open: {}",
                    crate::options::DYNAMIC_KNOBS.join(", ")
                ),
            });
        }
        let mut k = self.inner.dur.knobs.read().clone();
        k.set(&canonical, value)?;
        k.validate()?;
        *self.inner.dur.knobs.write() = k;
        self.inner.dur.wake_flusher();
        Ok(())
    }

    /// The current value of every option (dynamic ones as last set).
    pub fn current_options(&self) -> Options {
        self.inner.dur.knobs.read().clone()
    }

    /// The per-second samples recorded by the page cleaner (up to the last hour).
    pub fn samples(&self) -> Vec<crate::flush::sample::Sample> {
        self.inner.dur.samples.lock().iter().cloned().collect()
    }

    /// The newest per-second sample, if a second has passed since open.
    pub fn last_sample(&self) -> Option<crate::flush::sample::Sample> {
        self.inner.dur.samples.lock().back().cloned()
    }

    /// Writes everything back and marks a clean shutdown. Other handles become unusable.
    pub fn close(self) -> Result<()> {
        self.inner.shutdown()
    }
}

/// Opens the data file and checks what can be checked before the log is read: it exists, its
/// header gives the page size (or, when damaged, the doublewrite area does, read-write only),
/// it holds at least its header page, and after a clean shutdown (always, when `read_only`)
/// it is whole and its header verifies; a read-only open of a database that needs recovery is
/// refused. Sets the options the files decide (page size, log geometry). Returns the file, the
/// page size and the header page's fault when the doublewrite area must repair it.
fn probe_data_file(
    storage: &Arc<dyn Storage>,
    opts: &mut Options,
    read_only: bool,
) -> Result<(Arc<dyn File>, usize, Option<String>)> {
    let location = storage.describe();
    let bad = |reason: String| Error::BadDatabase {
        path: PathBuf::from(&location).join(DATA_FILE),
        reason,
    };
    if !storage.exists(DATA_FILE) {
        let log0 = wal::layout::file_name(0);
        return Err(bad(if storage.exists(&log0) {
            format!(
                "no database here: the data file is missing but the redo log {log0} exists \
                 (a create that did not finish, or a removed data file)"
            )
        } else {
            "no database here".into()
        }));
    }
    let file = storage.open(DATA_FILE, FileKind::Data, false)?;
    let len = file.len()?;
    if len < page::MIN_PAGE_SIZE as u64 {
        return Err(bad(format!(
            "the file is {len} bytes, shorter than the smallest page ({} bytes): it was \
             truncated, or is not an evenkeel data file",
            page::MIN_PAGE_SIZE
        )));
    }
    let mut first = vec![0u8; page::MIN_PAGE_SIZE];
    file.read_at(&mut first, 0)?;
    // A damaged header page may still have a good copy in the doublewrite area, whose own
    // header gives the page size; repair is tried below, before anything reads page 0.
    let (ps, header_fault) = match space::probe_page_size(&first) {
        Ok(ps) => (ps, None),
        Err(reason) => match crate::dwb::stored_page_size(storage.as_ref()) {
            Some(ps) if !read_only => (ps, Some(reason)),
            _ => return Err(bad(format!("file header (page 0): {reason}"))),
        },
    };
    if len < ps as u64 {
        // No crash cuts the header page: it is written before the file is made durable.
        return Err(bad(space::truncated_header_page(len, ps)));
    }
    // The file's page size wins over the option (which only applies at create time), and so
    // does the log's recorded geometry.
    opts.page_size = ps;
    if let Some((file_size, files, block)) = wal::probe_geometry(storage.as_ref()) {
        opts.log_file_size = file_size;
        opts.log_files_in_group = files;
        opts.log_block_size = block;
    }
    opts.validate()?;
    // After a clean shutdown the file must be whole; after a crash a torn extension write
    // may leave a partial last page, which doublewrite and redo repair.
    let mut p0 = vec![0u8; ps];
    let header_ok = file.read_at(&mut p0, 0).is_ok() && page::verify(&p0, HEADER_PAGE).is_ok();
    let clean = header_ok && Header::decode(&p0).clean;
    if clean || read_only {
        if !header_ok {
            return Err(bad(
                "file header (page 0) fails verification; `evenkeel check` names the fault \
                 and `evenkeel check --salvage --out DIR` exports every readable row"
                    .into(),
            ));
        }
        if let Err(reason) = space::check_file_length(len, ps, &Header::decode(&p0)) {
            return Err(bad(reason));
        }
    }
    if read_only && !clean {
        return Err(Error::NeedsRecovery {
            path: PathBuf::from(&location).join(DATA_FILE),
            dir: location.clone(),
        });
    }
    Ok((file, ps, header_fault))
}

/// Restores torn pages from the doublewrite area into `file` and counts what it did in
/// `report`; a torn page without a usable copy refuses the open, naming the page.
fn repair_torn_pages(d: &Doublewrite, file: &dyn File, report: &mut RecoveryReport) -> Result<()> {
    let r = d.recover(file)?;
    report.pages_repaired_from_doublewrite = r.pages_repaired.len() as u64;
    report.doublewrite_slots_corrupt = r.slots_corrupt as u64;
    report.corruptions_detected += (r.pages_damaged + r.slots_corrupt) as u64;
    report.file_header_repaired = r.pages_repaired.contains(&HEADER_PAGE.0);
    report.doublewrite_header_repaired = d.header_repaired();
    report.corruptions_detected += u64::from(d.header_repaired());
    if let Some((page, reason)) = r.pages_unrepairable.first() {
        let more = r.pages_unrepairable.len() - 1;
        return Err(Error::corrupt(
            file.name(),
            *page,
            format!(
                "{reason}{}. Refusing to open; `evenkeel check --salvage --out DIR` \
                     exports every readable row",
                if more > 0 {
                    format!(" (and {more} more page(s) like it)")
                } else {
                    String::new()
                }
            ),
        ));
    }
    Ok(())
}

/// Locks `dir/evenkeel.data` (exclusive for writers, shared for `check`) with flock(2),
/// through a handle of its own so the lock does not depend on the storage backend.
fn lock_data_file(dir: &Path, exclusive: bool) -> Result<std::fs::File> {
    let path = dir.join(DATA_FILE);
    let f = std::fs::File::open(&path)
        .map_err(|e| Error::io(path.display().to_string(), "open for locking", e))?;
    let r = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    match r {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::BadDatabase {
            path: path.clone(),
            reason: "the database is open in another process (or another handle in this one)"
                .into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io(path.display().to_string(), "lock", e))
        }
    }
}

/// The data file of the database in `dir`, or an error saying what `dir` is instead.
pub fn require_database(dir: &Path) -> Result<PathBuf> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::BadDatabase {
            path: dir.to_path_buf(),
            reason: "is a file, not a directory: a database is a directory holding \
                     evenkeel.data"
                .into(),
        });
    }
    let path = dir.join(DATA_FILE);
    if !path.is_file() {
        return Err(Error::BadDatabase {
            path: dir.to_path_buf(),
            reason: format!("no database here ({DATA_FILE} is missing)"),
        });
    }
    Ok(path)
}

/// Checks the database in a directory without opening it for writing.
pub fn check_dir(dir: impl AsRef<Path>) -> Result<crate::check::CheckReport> {
    let dir = dir.as_ref();
    require_database(dir)?;
    let _lock = lock_data_file(dir, false)?;
    let storage = FileStorage::new(dir, crate::io::FlushMethod::Fsync)?;
    let file: Arc<dyn File> = storage.open(DATA_FILE, FileKind::Data, false)?;
    crate::check::check_file(file.as_ref())
}
