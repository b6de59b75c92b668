//! backup: an online backup of an open database ([`Database::backup_to`]), by XtraBackup's
//! method, while the database keeps taking writes.
//!
//! 1. Pin: the checkpoint is pinned where it is, `start` (`LogSpace::pin_checkpoint`, as a
//!    transaction still applying pins it; a checkpoint computed before the pin is held back
//!    too), and may not pass the copy position from then on, so the redo the copy needs is
//!    never recycled. Every change before `start` is in the data file.
//! 2. A thread follows the redo log from `start` (`wal::copy`), staging each block once the log
//!    has written it, and moves the pin forward behind it. Should it fall behind by half the
//!    log's capacity (the target is slower than the source writes redo), the backup stops with
//!    an error rather than let the source's writers wait for log space.
//! 3. Meanwhile the data file is copied page by page. A page read while the page cleaner writes
//!    it can come back torn: every page is verified (checksum, page number) and one that fails
//!    is read again, and after `PAGE_READ_ATTEMPTS` reads taken from the buffer pool (latched,
//!    sealed); an all-zero page (allocated, never written) is copied as it is, since the redo
//!    creates it. Pages in the copy are any mix of versions, each whole, each with its LSN.
//! 4. The log is made durable to its end and the redo copied up to the written LSN `end`: every
//!    page copied was written by the source after the log covering its LSN was durable (WAL
//!    rule), so the redo reaches every page's LSN.
//! 5. Prepare: the copy gets a redo log holding the staged blocks with its checkpoint at
//!    `start` and is opened, which runs recovery: redo brings every page to `end`, and COMMITs
//!    whose apply was cut are re-applied. The copy then holds exactly the transactions whose
//!    COMMIT record lies before `end`, a commit-consistent state of the source, and is closed
//!    cleanly. Its log is finally recreated in the source's geometry, starting past the copy's
//!    last LSN, so the copy is a database like any other.
//!
//! A failure at any step (the target full, the redo recycled, a page that stays damaged)
//! returns [`Error::Backup`] naming the limit, removes what the backup wrote to the target,
//! and leaves the source as it was: the backup only reads the source's files, flushes its log
//! and pins its checkpoint for the duration.

use crate::db::{Database, DATA_FILE};
use crate::dwb::DWB_FILE_NAME;
use crate::error::{Error, Result};
use crate::io::{File, FileKind, FileStorage, Storage};
use crate::page::{self, PageFault};
use crate::types::{Lsn, PageId};
use crate::wal::copy::{create_log_at, log_end, LogCopier};
use crate::wal::{layout, Log, LogSpace};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The staging file of the redo copy, in the target (removed once the copy's log is built).
pub const REDO_STAGING_FILE: &str = "evenkeel.backup-redo";
/// Bytes of the data file read per step.
const DATA_CHUNK_BYTES: usize = 1 << 20;
/// Reads of a page that fails verification before it is taken from the buffer pool.
const PAGE_READ_ATTEMPTS: u32 = 20;
/// Buffer pool of the copy's prepare (its recovery), at most.
const PREPARE_POOL_BYTES: u64 = 64 << 20;
/// How far the redo copy may fall behind the log's end, as a fraction of the capacity, before
/// the backup gives up (so the source's writers never wait on the backup for log space).
const MAX_LAG_FRACTION: f64 = 0.5;

/// What a backup did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BackupReport {
    /// Where the copy is.
    pub target: String,
    /// Data file bytes copied (the file's length when the copy began).
    pub data_bytes: u64,
    /// Redo bytes copied (log blocks from `start_lsn` to `end_lsn`).
    pub redo_bytes: u64,
    /// Pages that failed verification when first read (torn by a concurrent write) and were
    /// read again; of them, `pages_from_pool` were taken from the buffer pool.
    pub pages_reread: u64,
    pub pages_from_pool: u64,
    /// Log blocks read again (the block the log was rewriting).
    pub redo_blocks_reread: u64,
    /// The checkpoint the copy's recovery started from.
    pub start_lsn: u64,
    /// The copy holds every transaction whose COMMIT record lies before this LSN, and none
    /// after.
    pub end_lsn: u64,
    /// Transactions the copy's recovery re-applied (their apply was under way at `end_lsn`).
    pub transactions_reapplied: u64,
    /// Seconds copying (data file and redo), preparing (recovery of the copy), in all.
    pub copy_seconds: f64,
    pub prepare_seconds: f64,
    pub seconds: f64,
    /// Bytes of the finished copy's files.
    pub size_bytes: u64,
}

/// The pin that keeps the checkpoint at or before the redo copy's position (a registration in
/// the log space's list of LSNs the checkpoint may not pass); released on drop.
struct Pin<'a> {
    space: &'a LogSpace,
    lsn: Lsn,
}

impl<'a> Pin<'a> {
    /// Pins the checkpoint where it is and returns the pin, at that checkpoint: every change
    /// before it is in the data file, and no log from it on is recycled while the pin holds.
    fn at_checkpoint(space: &'a LogSpace) -> Pin<'a> {
        let lsn = space.pin_checkpoint();
        Pin { space, lsn }
    }

    /// Moves the pin forward to `lsn` (a group boundary), never back.
    fn advance(&mut self, lsn: Lsn) {
        if lsn > self.lsn {
            self.space.begin_applying(lsn, 0);
            self.space.end_applying(self.lsn);
            self.lsn = lsn;
        }
    }
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.space.end_applying(self.lsn);
    }
}

/// Most redo log files a log may have (`log_files_in_group`'s limit).
const MAX_LOG_FILES: usize = 100;

/// Files the backup may create in the target, for the emptiness check and the cleanup.
fn target_files() -> Vec<String> {
    let mut v = vec![
        DATA_FILE.to_string(),
        DWB_FILE_NAME.to_string(),
        REDO_STAGING_FILE.to_string(),
    ];
    for i in 0..MAX_LOG_FILES {
        v.push(layout::LogSet::A.file_name(i));
        v.push(layout::LogSet::B.file_name(i));
    }
    v
}

impl Database {
    /// Copies this database into `dir` (created if missing, refused unless empty) while it
    /// keeps taking reads and writes, and prepares the copy: when this returns, `dir` holds a
    /// database that opens cleanly (no recovery) and holds exactly the transactions committed
    /// before one point during the backup ([`BackupReport::end_lsn`]). A failure leaves `dir`
    /// without any file of the backup and this database unaffected.
    pub fn backup_to(&self, dir: impl AsRef<Path>) -> Result<BackupReport> {
        let dir = dir.as_ref();
        let target = dir.display().to_string();
        let fail = |reason: String| Error::Backup {
            target: target.clone(),
            reason,
        };
        if dir.exists() && !dir.is_dir() {
            return Err(fail("it is a file; a backup goes into a directory".into()));
        }
        let created = !dir.exists();
        if !created {
            let entries: Vec<String> = std::fs::read_dir(dir)
                .map_err(|e| Error::io(&target, "list", e))?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            if !entries.is_empty() {
                return Err(fail(format!(
                    "the directory is not empty ({} entries, among them `{}`): a backup goes \
                     into an empty or new directory, never over files",
                    entries.len(),
                    entries[0]
                )));
            }
        }
        let storage = Arc::new(FileStorage::new(dir, self.inner.opts.flush_method)?);
        if let Some(free) = free_bytes(dir) {
            let need = self.backup_size_estimate()?;
            if free < need {
                if created {
                    let _ = std::fs::remove_dir(dir);
                }
                return Err(fail(format!(
                    "the file system has {free} bytes free, less than the copy needs: at least \
                     {need} bytes (the data file and the redo log at their current sizes)"
                )));
            }
        }
        let r = self.backup_to_storage(storage);
        if r.is_err() && created {
            let _ = std::fs::remove_dir(dir);
        }
        r
    }

    /// As [`Database::backup_to`], onto any storage (the simulated disk in tests), which must
    /// hold none of a database's files.
    pub fn backup_to_storage(&self, target: Arc<dyn Storage>) -> Result<BackupReport> {
        self.inner.check_open()?;
        let where_ = target.describe();
        if let Some(name) = target_files().into_iter().find(|n| target.exists(n)) {
            return Err(Error::Backup {
                target: where_,
                reason: format!(
                    "the target already holds `{name}`: a backup goes into an empty target, \
                     never over a database"
                ),
            });
        }
        let started = Instant::now();
        let mut report = BackupReport {
            target: where_.clone(),
            ..Default::default()
        };
        match self.backup_steps(target.as_ref(), &target, &mut report) {
            Ok(()) => {
                report.seconds = started.elapsed().as_secs_f64();
                Ok(report)
            }
            Err(e) => {
                for name in target_files() {
                    if target.exists(&name) {
                        let _ = target.remove(&name);
                    }
                }
                let _ = target.sync_dir();
                Err(self.explain(e, &where_, &report))
            }
        }
    }

    /// Bytes a copy takes at least: the data file and the redo log at their sizes now.
    fn backup_size_estimate(&self) -> Result<u64> {
        let cfg = self.inner.dur.log.config();
        Ok(self.inner.pool.file().len()? + cfg.file_size * u64::from(cfg.files))
    }

    /// The error of a failed backup, with the limit named: the target's space when a write
    /// found it full.
    fn explain(&self, e: Error, target: &str, report: &BackupReport) -> Error {
        let full = matches!(&e, Error::Io { source, .. }
            if source.raw_os_error() == Some(libc::ENOSPC));
        let reason = if full {
            format!(
                "the target ran out of space ({e}) after {} bytes of data file and {} bytes of \
                 redo were copied; the copy needs at least {} bytes (the data file and the \
                 redo log at their current sizes), plus the redo written while it runs. The \
                 source is not affected and the target holds nothing of the backup",
                report.data_bytes,
                report.redo_bytes,
                self.backup_size_estimate().unwrap_or(0)
            )
        } else {
            match e {
                Error::Backup { reason, .. } => reason,
                e => format!(
                    "{e}. The source is not affected and the target holds nothing of the backup"
                ),
            }
        };
        Error::Backup {
            target: target.to_string(),
            reason,
        }
    }

    fn backup_steps(
        &self,
        target: &dyn Storage,
        target_arc: &Arc<dyn Storage>,
        report: &mut BackupReport,
    ) -> Result<()> {
        let started = Instant::now();
        let i = &self.inner;
        let log = &i.dur.log;
        let space = &i.dur.space;
        // 1. pin the checkpoint: the copy starts there, every change before it in the data file.
        let mut pin = Pin::at_checkpoint(space);
        let start = pin.lsn;
        report.start_lsn = start.0;
        let staged = target.open(REDO_STAGING_FILE, FileKind::Other, true)?;
        let mut copier = log.copier(start, staged.clone())?;
        // 2. and 3.: the redo follower and the data copy run together.
        let finish_at = AtomicU64::new(0);
        let failed = AtomicBool::new(false);
        let data_copy = std::thread::scope(|s| -> Result<(u64, u64, u64)> {
            let follower = s.spawn(|| {
                let r = follow_redo(log, &mut copier, &mut pin, &finish_at);
                if r.is_err() {
                    failed.store(true, Ordering::Release);
                }
                r
            });
            let copied = self.copy_data_file(target, &failed, report);
            // 4. the redo up to the log's end now covers every page copied.
            let end = copied.and_then(|c| {
                if !i.read_only {
                    log.flush_to(log.current_lsn(), true)?;
                }
                Ok((c, log.written_lsn()))
            });
            // 0 would mean "keep following": the follower stops at the first LSN past it.
            finish_at.store(
                end.as_ref().map_or(1, |(_, e)| e.0.max(1)),
                Ordering::Release,
            );
            let followed = follower
                .join()
                .unwrap_or_else(|_| Err(Error::Poisoned("the redo follower panicked".into())));
            let (c, end) = end?;
            followed?;
            Ok((c.0, c.1, end.0))
        });
        drop(pin);
        let (pages_reread, from_pool, _end) = data_copy?;
        report.pages_reread = pages_reread;
        report.pages_from_pool = from_pool;
        report.redo_bytes = copier.staged_bytes();
        report.redo_blocks_reread = copier.rereads;
        report.end_lsn = copier.copied_lsn().0;
        report.copy_seconds = started.elapsed().as_secs_f64();
        // 5. prepare: the copy's log, recovery, a clean close, then the log in the source's
        // geometry.
        let prepared = Instant::now();
        copier.build_log(target, log.capacity())?;
        drop(copier);
        drop(staged);
        target.remove(REDO_STAGING_FILE)?;
        target.sync_dir()?;
        self.prepare(target, target_arc, report)?;
        report.prepare_seconds = prepared.elapsed().as_secs_f64();
        report.size_bytes = target_files()
            .iter()
            .filter(|n| target.exists(n))
            .map(|n| {
                target
                    .open(n, FileKind::Other, false)
                    .and_then(|f| f.len())
                    .unwrap_or(0)
            })
            .sum();
        Ok(())
    }

    /// Copies the data file page by page, each page verified (see the module comment).
    /// Returns (pages read again, pages taken from the buffer pool).
    fn copy_data_file(
        &self,
        target: &dyn Storage,
        failed: &AtomicBool,
        report: &mut BackupReport,
    ) -> Result<(u64, u64)> {
        let pool = &self.inner.pool;
        let src = pool.file().clone();
        let ps = pool.page_size();
        let pages = src.len()? / ps as u64;
        let dst = target.open(DATA_FILE, FileKind::Data, true)?;
        let per_chunk = (DATA_CHUNK_BYTES / ps).max(1) as u64;
        let (mut reread, mut from_pool) = (0, 0);
        let mut buf = vec![0u8; per_chunk as usize * ps];
        let mut first = 0u64;
        while first < pages {
            if failed.load(Ordering::Acquire) {
                // the follower's error is the one reported
                return Ok((reread, from_pool));
            }
            let n = per_chunk.min(pages - first);
            let chunk = &mut buf[..n as usize * ps];
            src.read_at(chunk, first * ps as u64)?;
            for (k, img) in chunk.chunks_mut(ps).enumerate() {
                let pid = PageId((first + k as u64) as u32);
                match page::verify(img, pid) {
                    Ok(()) | Err(PageFault::AllZero) => {}
                    Err(_) => {
                        reread += 1;
                        from_pool += u64::from(self.reread_page(src.as_ref(), pid, img)?);
                    }
                }
            }
            dst.write_at(chunk, first * ps as u64)?;
            report.data_bytes += chunk.len() as u64;
            first += n;
        }
        dst.sync()?;
        target.sync_dir()?;
        Ok((reread, from_pool))
    }

    /// Reads page `pid` again until it verifies; after `PAGE_READ_ATTEMPTS` reads, takes the
    /// buffer pool's image (S-latched, sealed). Returns whether the pool's image was used.
    fn reread_page(&self, src: &dyn File, pid: PageId, img: &mut [u8]) -> Result<bool> {
        let ps = img.len() as u64;
        for attempt in 0..PAGE_READ_ATTEMPTS {
            if attempt > 2 {
                std::thread::sleep(Duration::from_millis(1));
            }
            src.read_at(img, u64::from(pid.0) * ps)?;
            if matches!(page::verify(img, pid), Ok(()) | Err(PageFault::AllZero)) {
                return Ok(false);
            }
        }
        // The pool's copy of a page is at least as new as the file's, and its LSN is covered
        // by the redo copied after the data file (the log is made durable to its end first).
        let g = self.inner.pool.read(pid)?;
        img.copy_from_slice(&g);
        drop(g);
        page::seal(img);
        page::verify(img, pid).map_err(|f| {
            Error::corrupt(
                src.name(),
                pid.0,
                format!(
                    "{f}, in {PAGE_READ_ATTEMPTS} reads of the file and in the buffer pool, \
                     while the backup copied it"
                ),
            )
        })?;
        Ok(true)
    }

    /// Recovers the copy on `target` (its log holds the copied redo), closes it cleanly, and
    /// gives it a log in the source's geometry that starts past its last LSN.
    fn prepare(
        &self,
        target: &dyn Storage,
        target_arc: &Arc<dyn Storage>,
        report: &mut BackupReport,
    ) -> Result<()> {
        let mut opts = self.inner.opts.clone();
        // The copy's log is replaced below: no resize of it at this open.
        opts.log_capacity = 0;
        opts.buffer_pool_size = opts.buffer_pool_size.min(PREPARE_POOL_BYTES);
        opts.buffer_pool_instances = 1;
        let copy = Database::open_in(target_arc.clone(), opts)?;
        report.transactions_reapplied = copy.status().recovery.transactions_reapplied;
        copy.close()?;
        let src_cfg = self.inner.dur.log.config().clone();
        let end = log_end(target_arc.clone(), src_cfg.clone())?;
        let mut i = 0;
        while target.exists(&layout::file_name(i)) {
            target.remove(&layout::file_name(i))?;
            i += 1;
        }
        target.sync_dir()?;
        create_log_at(target_arc.clone(), src_cfg, end)
    }
}

/// The redo follower: stages the log as it is written and moves the pin behind the copy,
/// until `finish_at` is set and reached. Stops with an error when the copy falls more than
/// `MAX_LAG_FRACTION` of the log's capacity behind its end.
fn follow_redo(
    log: &Log,
    copier: &mut LogCopier,
    pin: &mut Pin<'_>,
    finish_at: &AtomicU64,
) -> Result<()> {
    // Log ends seen, oldest first: each is a group boundary, so a valid checkpoint; the pin
    // moves to the newest one whose block the copy has not yet left behind.
    let mut ends: std::collections::VecDeque<Lsn> = std::collections::VecDeque::new();
    let cap = log.capacity();
    let max_lag = (cap as f64 * MAX_LAG_FRACTION) as u64;
    loop {
        let finish = finish_at.load(Ordering::Acquire);
        ends.push_back(log.current_lsn());
        let written = log.written_lsn();
        let staged = copier.copy_to(written)?;
        let needed = copier.needed_from();
        while ends.len() > 1 && ends[1] <= needed {
            ends.pop_front();
        }
        if let Some(&e) = ends.front() {
            if e <= needed {
                pin.advance(e);
            }
        }
        if finish != 0 && copier.copied_lsn().0 >= finish {
            return Ok(());
        }
        // How far the copy itself is behind (the checkpoint age the source had when the backup
        // began is not the backup's doing).
        let lag = log.current_lsn().0.saturating_sub(needed.0);
        if lag > max_lag {
            return Err(Error::Backup {
                target: String::new(),
                reason: format!(
                    "the redo copy fell {lag} bytes behind the source's log end, over the limit \
                     of {max_lag} bytes (half the log's capacity of {cap} bytes): the target \
                     takes the copy slower than the source writes redo. Back up to a faster \
                     device, or give the source a larger log (log_file_size); the source is \
                     not affected"
                ),
            });
        }
        if staged == 0 && finish == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Bytes free for an unprivileged user on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data, for which all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and `st` is a valid,
    // writable statvfs; the call writes only into it.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail.saturating_mul(st.f_frsize))
}
