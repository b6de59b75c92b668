//! open: creating and opening a database. Each open probes the data file, reads the redo
//! log, restores torn pages from the doublewrite area, runs redo into a new buffer pool, loads
//! the catalog, re-applies the COMMITs whose apply was cut, and ends recovery with a sharp
//! checkpoint before the cleaners start (a read-only open writes nothing and refuses a
//! database that needs recovery).

use super::files::{lock_data_file, probe_data_file, repair_torn_pages, require_database};
use super::{Database, DATA_FILE};
use crate::btree::{AdaptiveHash, ChangeBuffer, ChangeBuffering, Ctx, TreeCounters};
use crate::buffer::{BufferPool, DirectSink, PageSink, PoolConfig};
use crate::catalog::Catalog;
use crate::dwb::{Compression, Doublewrite, DWB_FILE_NAME};
use crate::error::{Error, Health, Result};
use crate::flush::Durability;
use crate::io::{File, FileKind, FileStorage, Storage};
use crate::locks::{LockLimits, LockTable};
use crate::mtr::Mtr;
use crate::options::Options;
use crate::page;
use crate::recovery::{self, RecoveryReport};
use crate::shared::{sharp_checkpoint, DbCounters, DbInner, NEXT_DB_ID};
use crate::space::{self, Header, HEADER_PAGE};
use crate::types::{Lsn, PageId};
use crate::wal::{self, FlushAtCommit, Log, LogConfig, Recovered, ScanStop};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

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
        .with_health(health.clone())
        .with_compression(Compression::from_index(opts.doublewrite_compression)),
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
        if wal::log_exists(storage.as_ref()) {
            return Err(Error::BadDatabase {
                path: PathBuf::from(storage.describe()).join(&log0),
                reason: format!(
                    "a redo log file exists but {DATA_FILE} does not: an earlier create did not \
                     finish (the data file is made durable last), or the data file was removed; \
                     remove the ib_logfile*, ib_redo* and {DWB_FILE_NAME} files to create a new database"
                ),
            });
        }
        let mut opts = opts;
        opts.log_file_size = opts.log_file_size_wanted();
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

    /// Sets the recorded redo replay rate (bytes per second), as a recovery records it; the
    /// next checkpoint slot carries it. Tests use it to give `recovery_time_target` a known
    /// rate.
    #[doc(hidden)]
    pub fn record_replay_rate(&self, bytes_per_s: u64) {
        self.inner.dur.log.set_replay_rate(bytes_per_s);
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

    /// Opens the database on `storage`: probes the data file, reads the log, repairs torn
    /// pages, runs redo, loads the catalog and, read-write, ends recovery and starts the
    /// background threads. `dir_lock` is held for as long as the database is open.
    fn open_locked(
        storage: Arc<dyn Storage>,
        mut opts: Options,
        dir_lock: Option<std::fs::File>,
        read_only: bool,
    ) -> Result<Database> {
        let started = Instant::now();
        let location = storage.describe();
        let (file, ps, header_fault) = probe_data_file(&storage, &mut opts, read_only)?;
        let health = Health::new();
        let scan_started = Instant::now();
        let (log, recovered) = open_log(&storage, &opts, read_only, &health, &location)?;
        let mut report = RecoveryReport {
            scan_seconds: scan_started.elapsed().as_secs_f64(),
            ..RecoveryReport::default()
        };
        // A clean shutdown left no torn page to repair, and opening the area may write it.
        let dwb = if read_only {
            None
        } else {
            open_doublewrite(&storage, &opts, ps, &health)?
        };
        if let Some(d) = &dwb {
            // IMPORTANT: torn pages are restored before redo reads them.
            repair_torn_pages(d, file.as_ref(), &mut report, &recovered)?;
        }
        if let Some(reason) = &header_fault {
            require_header_repaired(file.as_ref(), reason, &location)?;
        }
        let pool = Arc::new(BufferPool::new(
            &pool_config(&opts, ps),
            file.clone(),
            Some(log.clone()),
            page_sink(&opts, &dwb),
            health,
        )?);
        let budget = usize::try_from(opts.recovery_memory).unwrap_or(usize::MAX);
        let pending = recovery::redo(&pool, &recovered, budget, &mut report)?;
        let dur = Durability::new(log.clone(), pool.clone(), opts.clone());
        let header = read_header(&pool, recovered.end_lsn, &recovered.stop)?;
        let tree_counters = Arc::new(TreeCounters::default());
        let catalog = {
            let cx = Ctx {
                pool: &pool,
                space: &dur.space,
                ibuf: None,
                ahi: None,
            };
            Catalog::load(&cx, header.catalog_root, tree_counters.clone())?
        };
        let ibuf = {
            let cx = Ctx {
                pool: &pool,
                space: &dur.space,
                ibuf: None,
                ahi: None,
            };
            match catalog.change_buffer_tree(&cx, !read_only)? {
                Some((id, root)) => {
                    let ib = ChangeBuffer::load(&cx, id, root, !read_only)?;
                    ib.configure(
                        ChangeBuffering::from_index(opts.change_buffering),
                        opts.change_buffer_max_size,
                        pool.frame_count() as u64,
                    );
                    for (_, t) in catalog.all() {
                        ib.register(&t);
                    }
                    Some(Arc::new(ib))
                }
                None => None,
            }
        };
        let ahi = opts
            .adaptive_hash_index
            .then(|| AdaptiveHash::for_pool(pool.frame_count() as u64 * pool.page_size() as u64));
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
            next_txn: crossbeam::utils::CachePadded::new(AtomicU64::new(1)),
            recovery: RecoveryReport::default(),
            cleaner: Mutex::new(None),
            lru_cleaner: Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            catalog,
            ibuf,
            ahi,
            dwb,
            ibuf_merger: Mutex::new(None),
            opts,
            tree_counters,
            counters: DbCounters::default(),
            closed: AtomicBool::new(false),
            close_lock: Mutex::new(()),
            dir_lock: Mutex::new(dir_lock),
        };
        finish_open(inner, &recovered, &pending, report, started, &log)
    }
}

/// Opens the redo log (its recovered groups are what redo replays). A read-only open of a
/// log holding changes past its checkpoint is refused: recovery would write.
fn open_log(
    storage: &Arc<dyn Storage>,
    opts: &Options,
    read_only: bool,
    health: &Arc<Health>,
    location: &str,
) -> Result<(Arc<Log>, Recovered)> {
    let mut log_cfg = log_config(opts);
    log_cfg.read_only = read_only;
    log_cfg.health = Some(health.clone());
    let (log, recovered) = Log::open(storage.clone(), log_cfg)?;
    if read_only && recovered.group_count > 0 {
        // the header says clean, yet the log holds changes past its checkpoint
        return Err(Error::NeedsRecovery {
            path: PathBuf::from(location).join(DATA_FILE),
            dir: location.to_string(),
        });
    }
    Ok((Arc::new(log), recovered))
}

/// After the doublewrite repair: the header page, which failed to give the page size when the
/// file was probed (`reason`), must now give it, or the open is refused.
fn require_header_repaired(file: &dyn File, reason: &str, location: &str) -> Result<()> {
    let mut first = vec![0u8; page::MIN_PAGE_SIZE];
    file.read_at(&mut first, 0)?;
    space::probe_page_size(&first).map_err(|_| Error::BadDatabase {
        path: PathBuf::from(location).join(DATA_FILE),
        reason: format!(
            "file header (page 0): {reason}, and the doublewrite area holds no usable \
             copy of it"
        ),
    })?;
    Ok(())
}

/// The file header after redo, refused when its page is newer than the log's end.
fn read_header(pool: &BufferPool, recovered_end: Lsn, recovered_stop: &ScanStop) -> Result<Header> {
    let g = pool.read(HEADER_PAGE)?;
    // The header page changes with every allocation and every shutdown, so it is the
    // page most likely to show that the log lost durable records redo never saw.
    if page::hdr::lsn(&g) > recovered_end {
        return Err(recovery::log_behind_page(
            pool.file().name(),
            HEADER_PAGE.0,
            page::hdr::lsn(&g).0,
            recovered_end,
            recovered_stop,
        ));
    }
    Ok(Header::decode(&g))
}

/// Redo shorter than this says little about the replay rate (fixed costs dominate it), so a
/// recovery of less keeps the rate recorded before.
const REPLAY_RATE_MIN_REDO: u64 = 1 << 20;

/// The end of an open: read-write, re-applies the COMMITs whose apply was cut (`pending`, read
/// back from `recovered`'s log one at a time) and writes a sharp checkpoint; records the
/// recovery report and, from the replay rate it measured, the rate to record
/// ([`crate::flush::next_replay_rate`]); starts the log's and the cleaners' threads
/// (read-write) and read-ahead.
fn finish_open(
    inner: DbInner,
    recovered: &Recovered,
    pending: &[Lsn],
    mut report: RecoveryReport,
    started: Instant,
    log: &Log,
) -> Result<Database> {
    let read_only = inner.read_only;
    if !read_only {
        let t = Instant::now();
        let ps = inner.pool.page_size();
        report.transactions_reapplied = crate::txn::apply::reapply(&inner, pending, &mut |lsn| {
            recovery::commit_writes(recovered, lsn, ps)
        })?;
        // Drops a crash interrupted are completed once no COMMIT is left to re-apply.
        inner.catalog.finish_drops(&inner.ctx())?;
        // and the buffered changes of tables a crash left dropped
        if let Some(ib) = &inner.ibuf {
            ib.discard_stale(&inner.ctx())?;
        }
        // A sharp checkpoint ends recovery: the next crash starts from here.
        sharp_checkpoint(&inner.dur, false)?;
        report.reapply_seconds = t.elapsed().as_secs_f64();
    }
    report.seconds = started.elapsed().as_secs_f64();
    if report.groups > 0 {
        tracing::info!("{}: recovery: {report:?}", inner.location);
    }
    if !read_only && report.redo_bytes() >= REPLAY_RATE_MIN_REDO && report.seconds > 0.0 {
        // Over the whole open's time: what recovery_time_target must bound. The record falls
        // to a slower rate at once and rises slowly to a faster one (the next checkpoint slot
        // carries it).
        let measured = (report.redo_bytes() as f64 / report.seconds) as u64;
        log.set_replay_rate(crate::flush::next_replay_rate(log.replay_rate(), measured));
    }
    let mut inner = inner;
    inner.recovery = report;
    if !read_only {
        log.start_background()?;
        inner.start_cleaners()?;
    }
    inner.start_read_ahead()?;
    let resize_to = (!read_only
        && inner.opts.log_capacity != 0
        && inner.opts.log_file_size_wanted() != inner.opts.log_file_size)
        .then_some(inner.opts.log_capacity);
    let db = Database {
        inner: Arc::new(inner),
    };
    // A log_capacity that differs from the files' resizes the log now, as a restart with a new
    // innodb_redo_log_capacity does.
    if let Some(capacity) = resize_to {
        db.resize_log(capacity)?;
    }
    Ok(db)
}
