//! db: the public API an embedding program uses: [`Database`], [`Table`], [`Status`].
//!
//! A database is a directory holding one data file (`evenkeel.data`), the redo log files and,
//! with doublewrite on, the doublewrite file. Opening it (open.rs; the data file's probing and
//! locking: files.rs) sizes the buffer pool once and runs crash recovery when the last run did
//! not shut down cleanly; closing it (or dropping the last handle) writes every dirty page back
//! and records a clean shutdown in the file header.

mod files;
mod open;

pub use files::{check_dir, require_database};

use crate::error::{Error, Result};
use crate::options::Options;
use crate::page::{self, node};
use crate::shared::DbInner;
pub use crate::shared::Table;
use crate::space::{Header, HEADER_PAGE};
use crate::status::Status;
use crate::txn::snapshot::Snapshot;
use crate::txn::transaction::Transaction;
use std::sync::atomic::{AtomicU64, Ordering};
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

impl Database {
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
        self.create_with(name, false)
    }

    /// The table named `name`, creating it if missing.
    pub fn create_table_if_missing(&self, name: &str) -> Result<Table> {
        self.create_if_missing(name, false)
    }

    /// Creates an index table: a set of keys, as InnoDB's secondary index whose key ends with
    /// the primary key. Its changes can go through the change buffer (`change_buffering`):
    /// a put or delete whose leaf is not in the buffer pool is recorded without reading the
    /// leaf, and merged when the leaf is read or in the background. The contract that makes
    /// this possible (the old value is known without the leaf):
    ///
    /// - every value is empty (a put with a value fails with `IndexValueNotEmpty`);
    /// - a put inserts a key the table does not hold, and a delete removes a key it holds.
    ///
    /// Breaking the second rule leaves the table as the writes say, but read views taken
    /// before such a commit may see the key wrong, and the merge counts it in
    /// `change_buffer_contract_violations`. Reads, scans, locks and isolation are as for any
    /// table.
    pub fn create_index_table(&self, name: &str) -> Result<Table> {
        self.create_with(name, true)
    }

    /// The index table named `name`, creating it if missing (an existing plain table of that
    /// name is returned as it is: see [`Table::is_index`]).
    pub fn create_index_table_if_missing(&self, name: &str) -> Result<Table> {
        self.create_if_missing(name, true)
    }

    fn create_with(&self, name: &str, index: bool) -> Result<Table> {
        self.inner.check_writable("creating a table")?;
        let tree = self.inner.catalog.create(&self.inner.ctx(), name, index)?;
        self.make_durable()?;
        Ok(self.inner.table_handle(tree, name))
    }

    fn create_if_missing(&self, name: &str, index: bool) -> Result<Table> {
        match self.table(name) {
            Err(Error::TableNotFound(_)) => match self.create_with(name, index) {
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
        crate::txn::apply::max_writes_per_transaction(
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

    /// A read-only view of every table as of now (see [`Snapshot`]): no locks, no waiting
    /// for writers.
    ///
    /// ```no_run
    /// # fn f(db: &evenkeel::Database) -> evenkeel::Result<()> {
    /// let t = db.table("orders")?;
    /// let snap = db.snapshot();
    /// let total: usize = snap.range(&t, ..)?.map(|r| r.map(|(_, v)| v.len())).sum::<evenkeel::Result<_>>()?;
    /// println!("{total} bytes of orders as of commit {}", snap.at());
    /// # Ok(()) }
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    pub fn status(&self) -> Status {
        let i = &self.inner;
        let buffer = i.pool.status();
        let header = i.pool.read(HEADER_PAGE).map(|g| Header::decode(&g)).ok();
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let log = &i.dur.log;
        let (lsn, cp) = (log.current_lsn().0, log.checkpoint_lsn().0);
        // Read apart, each guard dropped at once: a read guard alive in this statement while
        // another is taken would deadlock with a set_option waiting to write in between.
        let flush_policy = i.dur.knobs.read().adaptive_flushing;
        let recovery_target = i.dur.recovery_target();
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
            flush_policy,
            flush: i.dur.counters.snapshot(),
            admission_delay_now_us: ld(&i.dur.admission_delay_now_us),
            write_concurrency: i
                .dur
                .write_concurrency
                .writers(i.dur.knobs.read().adaptive_write_concurrency)
                as u64,
            log_full_waits: ld(&i.dur.space.log_full_waits),
            checkpoints: ld(&i.dur.space.checkpoints),
            recovery: i.recovery.clone(),
            replay_rate_bytes_per_s: log.replay_rate(),
            recovery_target,
            recovery_time_estimate_s: lsn.saturating_sub(cp) as f64
                / match log.replay_rate() {
                    0 => crate::flush::ASSUMED_REPLAY_RATE,
                    r => r,
                } as f64,
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
            adaptive_hash: i
                .ahi
                .as_ref()
                .map(|a| a.counters.snapshot())
                .unwrap_or_default(),
            adaptive_hash_entries_max: i.ahi.as_ref().map_or(0, |a| a.capacity() as u64),
            change_buffer: i.ibuf.as_ref().map(|b| b.snapshot()).unwrap_or_default(),
            change_buffer_max_pages: i.ibuf.as_ref().map_or(0, |b| b.max_pages()),
            doublewrite: i.dwb.as_ref().map(|d| d.stats()).unwrap_or_default(),
            doublewrite_compressing: if i.opts.doublewrite {
                i.dwb.as_ref().map_or(0.0, |d| d.compressed_share())
            } else {
                0.0
            },
            txns: i.counters.snapshot(),
            history: i.dur.versions.stats(),
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
        let canonical = crate::options::canonical_name(name);
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
        if canonical == "log_capacity" {
            return self.resize_log(k.log_capacity).map(|_| ());
        }
        self.inner.dur.versions.set_limit(k.max_history_size);
        if let Some(ib) = &self.inner.ibuf {
            ib.configure(
                crate::btree::ChangeBuffering::from_index(k.change_buffering),
                k.change_buffer_max_size,
                self.inner.pool.frame_count() as u64,
            );
        }
        self.inner.dur.set_knobs(k);
        self.inner.dur.wake_flusher();
        Ok(())
    }

    /// Resizes the redo log to `capacity` bytes of log files (split evenly over the log's
    /// files, rounded down to whole blocks) while the database keeps taking reads and writes:
    /// what
    /// `set_option("log_capacity", ..)` does. A shrink first writes back the oldest dirty pages
    /// until the checkpoint age fits under the new log's async point; writers are held off only
    /// while the last blocks are copied. Crash-safe at every step: a crash leaves either the old
    /// log or the new one in use, never a mix, and nothing committed is lost. Refused, with the
    /// log keeping its size, while a backup copies the log, when the size is out of range (the
    /// error names it), or when the checkpoint age cannot be brought within it in 30 s.
    pub fn resize_log(&self, capacity: u64) -> Result<crate::wal::ResizeOutcome> {
        self.resize_log_within(capacity, crate::flush::RESIZE_WAIT_MAX)
    }

    /// As [`Database::resize_log`], giving up after `max_wait` (instead of 30 s) when the
    /// checkpoint age cannot be brought within the new log.
    pub fn resize_log_within(
        &self,
        capacity: u64,
        max_wait: std::time::Duration,
    ) -> Result<crate::wal::ResizeOutcome> {
        self.inner.check_writable("resizing the redo log")?;
        let mut k = self.inner.dur.knobs.read().clone();
        let files = self.inner.dur.log.file_geometry().1;
        if capacity == 0 {
            return Err(Error::InvalidOption {
                name: "log_capacity".into(),
                value: "0".into(),
                expected: "the size to resize the open log to (0 means \"as the files are\" \
                           only at open)"
                    .into(),
            });
        }
        k.log_capacity = capacity;
        k.log_files_in_group = files;
        k.validate()?;
        let file_size = k.log_file_size_wanted();
        let requested = file_size * u64::from(files);
        let log = &self.inner.dur.log;
        // The log buffer must fit in the new log (and the geometry be valid): refused with the
        // least size that would do.
        log.capacity_for(file_size, files)
            .map_err(|e| Error::InvalidOption {
                name: "log_capacity".into(),
                value: crate::options::format_size(capacity),
                expected: format!(
                    "a size whose {files} files make a valid log ({e}); with log_buffer_size = {} \
                 at least {}",
                    crate::options::format_size(log.config().buffer_size as u64),
                    crate::options::format_size(
                        log.file_bytes_for(log.config().buffer_size as u64, files)
                    )
                ),
            })?;
        let outcome = if log.file_geometry() == (file_size, files) {
            let cap = log.capacity();
            crate::wal::ResizeOutcome {
                old_capacity: cap,
                new_capacity: cap,
                age_at_switch: self.inner.dur.checkpoint_age(),
                copied_bytes: 0,
                stall_us: 0,
                seconds: 0.0,
                pages_written: 0,
            }
        } else {
            self.inner
                .dur
                .resize_log(file_size, files, requested, max_wait)?
        };
        k.log_file_size = file_size;
        self.inner.dur.set_knobs(k);
        Ok(outcome)
    }

    /// Holds the checkpoint where it is until the returned guard is dropped, as a backup
    /// copying the log does: for tests of what a held-back checkpoint refuses.
    #[doc(hidden)]
    pub fn hold_checkpoint(&self) -> CheckpointHold {
        let space = self.inner.dur.space.clone();
        let lsn = space.pin_checkpoint();
        CheckpointHold { space, lsn }
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

/// See [`Database::hold_checkpoint`].
#[doc(hidden)]
pub struct CheckpointHold {
    space: std::sync::Arc<crate::wal::LogSpace>,
    lsn: crate::types::Lsn,
}

impl Drop for CheckpointHold {
    fn drop(&mut self) {
        self.space.end_applying(self.lsn);
    }
}
