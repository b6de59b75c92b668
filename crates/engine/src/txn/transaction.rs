//! transaction: a private write set with read-your-writes and key locks, applied at commit.
//!
//! Nothing a transaction writes touches a page before its COMMIT record is in the log:
//! rollback is dropping the write set and the locks. Writes and `get_for_update` take an
//! exclusive key lock (waits bounded by lock_wait_timeout, deadlocks detected) and act on the
//! newest committed value; plain reads take none and read through a read view (mvcc.rs): one
//! view for the whole transaction, taken at its first plain read (repeatable read, the
//! default, and snapshot), or the newest committed value per `get` and a view per scan (read
//! committed).
//!
//! Under a policy with an admission curve (steady) a transaction serves its admission delay
//! before its first key lock, so the delay never holds up transactions queued on its keys.
//! Commit (DESIGN.md, "The write path"): admission at the flush points -> COMMIT record (the
//! logical write set) appended -> writes applied in (table, key) order, one mtr each ->
//! ApplyDone appended -> release the key locks -> wait until durable as
//! flush_log_at_trx_commit promises (group commit). Invariant 3: `commit()` returns Ok only
//! after that wait. The locks go before the wait (InnoDB's order too), so a hot key is not
//! held through an fsync: the next holder reads the applied value, and its own COMMIT lies
//! after this one's in the log, so it cannot be durable without this one. A transaction that
//! only read under locks logs nothing: its commit waits for the log up to where it is then,
//! so it never returns before what it read is as durable as it asks for itself.
//! Limits: max_write_set_size on the bytes written, and a COMMIT record at most a quarter of
//! the log capacity (a transaction must never be able to fill the log by itself).
//!
//! The COMMIT's limits and the apply of the write set are in apply.rs; scans in scan.rs.

use super::apply::{self, LockedValues, WriteSet};
pub use super::apply::{apply_redo_per_write, max_transaction_redo, max_writes_per_transaction};
use super::scan::range_is_empty;
pub use super::scan::{KeyRange, Scan};
use crate::error::{Error, Result};
use crate::locks::LockMode;
use crate::mvcc::{Isolation, View};
use crate::page::node;
use crate::shared::{DbInner, Table};
use crate::types::{TableId, TxnId};
use crate::wal::record;
use crate::wal::FlushAtCommit;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How durable a commit is when `commit()` returns. The database's `flush_log_at_trx_commit`
/// (1, 2, 0) gives the default; [`Transaction::set_durability`] overrides it for one
/// transaction, as InnoDB users set it per session and RocksDB users per write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The COMMIT is written and fsynced: it survives a power loss (`flush_log_at_trx_commit=1`).
    Sync,
    /// The COMMIT is written to the OS, fsynced within about a second: it survives a crash of
    /// the process, not of the machine (`flush_log_at_trx_commit=2`).
    OsBuffered,
    /// The COMMIT is in the log buffer, written and fsynced within about a second: up to a
    /// second of commits may be lost in any crash (`flush_log_at_trx_commit=0`).
    Lazy,
}

impl Durability {
    /// The level `flush_log_at_trx_commit` names (0, 1 or 2; anything else is `Sync`).
    pub fn from_flush_log_at_trx_commit(v: u32) -> Durability {
        match v {
            0 => Durability::Lazy,
            2 => Durability::OsBuffered,
            _ => Durability::Sync,
        }
    }

    fn flush_at_commit(self) -> FlushAtCommit {
        match self {
            Durability::Sync => FlushAtCommit::One,
            Durability::OsBuffered => FlushAtCommit::Two,
            Durability::Lazy => FlushAtCommit::Zero,
        }
    }
}

/// A transaction: plain reads see one read view plus this transaction's own writes (see
/// [`Isolation`]); locking reads and writes act on the newest committed values under key
/// locks; writes are private until `commit`. A retryable error (deadlock, lock wait timeout,
/// an expired view, a snapshot write conflict) rolls it back: every later call fails with
/// [`Error::TransactionAborted`].
pub struct Transaction {
    db: Arc<DbInner>,
    id: TxnId,
    writes: WriteSet,
    write_bytes: usize,
    /// Values `get_for_update` read from the tree (the commit's before-images of those keys),
    /// up to `max_write_set_size` bytes of keys and values.
    locked_values: LockedValues,
    locked_value_bytes: usize,
    /// `None`: the database's flush_log_at_trx_commit as it is at commit.
    durability: Option<Durability>,
    /// `None`: the database's lock_wait_timeout as it is at each wait.
    lock_wait_timeout: Option<Duration>,
    isolation: Isolation,
    /// The read view of repeatable read and snapshot, taken at the first plain read.
    view: OnceLock<Arc<View>>,
    /// Why the transaction was rolled back, once a retryable error ended it (set by reads
    /// too, which borrow the transaction shared).
    aborted: parking_lot::Mutex<Option<String>>,
    /// Whether it has served its admission delay (before its first key lock): false means
    /// it never asked for a key lock.
    admitted: bool,
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // commit, rollback and an abandoned transaction all end here. Key locks are taken
        // only in lock_x, after it set `admitted`: a transaction that never got there (every
        // read-only one) holds none, and skips the lock table's shard mutex.
        if self.admitted {
            self.db.locks.release_all(self.id);
        }
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id.0)
            .field("database", &self.db.location)
            .field("writes", &self.writes.len())
            .field("write_bytes", &self.write_bytes)
            .field("durability", &self.durability())
            .field("isolation", &self.isolation)
            .field("view", &self.view.get().map(|v| v.at()))
            .field("aborted", &*self.aborted.lock())
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(db: Arc<DbInner>) -> Self {
        let id = TxnId(db.next_txn.fetch_add(1, Ordering::Relaxed));
        let isolation = db.dur.knobs.read().transaction_isolation;
        Transaction {
            db,
            id,
            writes: WriteSet::default(),
            write_bytes: 0,
            locked_values: BTreeMap::new(),
            locked_value_bytes: 0,
            durability: None,
            lock_wait_timeout: None,
            isolation,
            view: OnceLock::new(),
            aborted: parking_lot::Mutex::new(None),
            admitted: false,
        }
    }

    pub fn id(&self) -> u64 {
        self.id.0
    }

    /// Sets how durable this transaction's commit is when `commit()` returns.
    pub fn set_durability(&mut self, d: Durability) {
        self.durability = Some(d);
    }

    /// The durability `commit()` would give now: the one set, else the database's default.
    pub fn durability(&self) -> Durability {
        self.durability.unwrap_or_else(|| {
            Durability::from_flush_log_at_trx_commit(
                self.db.dur.knobs.read().flush_log_at_trx_commit,
            )
        })
    }

    /// Sets how long this transaction waits for a key lock before failing with
    /// [`Error::LockWaitTimeout`] (default: the database's lock_wait_timeout).
    pub fn set_lock_wait_timeout(&mut self, timeout: Duration) {
        self.lock_wait_timeout = Some(timeout);
    }

    /// Sets how this transaction's plain reads see other commits (default: the database's
    /// `transaction_isolation` when the transaction began). A view already taken is dropped:
    /// the next plain read takes a new one.
    pub fn set_isolation(&mut self, isolation: Isolation) {
        self.isolation = isolation;
        self.view = OnceLock::new();
    }

    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The commit number this transaction's read view sees up to, once it has one.
    pub fn read_view(&self) -> Option<u64> {
        self.view.get().map(|v| v.at())
    }

    /// Whether a retryable error has rolled this transaction back.
    pub fn is_aborted(&self) -> bool {
        self.aborted.lock().is_some()
    }

    /// Refuses any call on a closed database or an aborted transaction.
    fn usable(&self) -> Result<()> {
        self.db.check_open()?;
        match &*self.aborted.lock() {
            Some(cause) => Err(Error::TransactionAborted {
                txn: self.id,
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Passes `r` through; a retryable error first rolls the transaction back, so its locks
    /// are released at once and nothing it wrote can commit.
    fn ends_on_retryable<T>(&mut self, r: Result<T>) -> Result<T> {
        if matches!(&r, Err(e) if e.is_retryable()) && self.marks_aborted(&r) {
            self.writes.clear();
            self.write_bytes = 0;
            self.locked_values.clear();
            self.locked_value_bytes = 0;
        }
        r
    }

    /// As `ends_on_retryable`, for reads (which borrow the transaction shared): the write set
    /// stays in memory until the transaction is dropped, but it can no longer commit.
    fn read_ends_on_retryable<T>(&self, r: Result<T>) -> Result<T> {
        self.marks_aborted(&r);
        r
    }

    /// On a retryable error, marks the transaction aborted and releases its locks; true when
    /// this call did it.
    fn marks_aborted<T>(&self, r: &Result<T>) -> bool {
        let Err(e) = r else { return false };
        if !e.is_retryable() {
            return false;
        }
        let mut aborted = self.aborted.lock();
        if aborted.is_some() {
            return false;
        }
        self.db.locks.release_all(self.id);
        self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
        *aborted = Some(e.to_string());
        true
    }

    /// The transaction's read view (repeatable read, snapshot), taken now if it has none.
    fn view(&self) -> &Arc<View> {
        self.view
            .get_or_init(|| Arc::new(self.db.dur.versions.open_view()))
    }

    /// The view a scan starting now reads through: the transaction's, or a new one under read
    /// committed (one view per statement).
    fn scan_view(&self) -> Arc<View> {
        if self.isolation.holds_view() {
            self.view().clone()
        } else {
            Arc::new(self.db.dur.versions.open_view())
        }
    }

    fn lock_x(&mut self, t: &Table, key: &[u8]) -> Result<()> {
        if !self.admitted {
            // The admission delay, while this transaction holds no lock: served at commit it
            // would hold up every transaction queued on this one's keys as well.
            self.admitted = true;
            self.db.dur.admission_delay();
        }
        let timeout = self
            .lock_wait_timeout
            .unwrap_or_else(|| self.db.dur.knobs.read().lock_wait_timeout);
        let r = self
            .db
            .locks
            .lock(self.id, TableId(t.id()), key, LockMode::Exclusive, timeout);
        let r = r.and_then(|()| self.first_committer_wins(t, key));
        self.ends_on_retryable(r)
    }

    /// Under snapshot isolation, refuses a key another transaction committed after this one's
    /// view was taken. Called holding the key's lock, so no such commit is still applying.
    fn first_committer_wins(&self, t: &Table, key: &[u8]) -> Result<()> {
        if self.isolation != Isolation::Snapshot {
            return Ok(());
        }
        match self.view.get() {
            Some(view) if view.changed_since(t.id(), key)? => Err(Error::SerializationFailure {
                txn: self.id,
                table: t.name().to_string(),
                key: String::from_utf8_lossy(key).into_owned(),
            }),
            _ => Ok(()),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        let ps = self.db.pool.page_size();
        let max = node::max_key_len(ps);
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
                page_size: ps,
            });
        }
        Ok(())
    }

    /// The value of `key`: this transaction's own write, else the committed value its
    /// isolation level sees (the read view's; under read committed, the newest).
    pub fn get(&self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.usable()?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        // (the lookup key is an owned copy: skipped for a transaction that wrote nothing)
        if !self.writes.is_empty() {
            if let Some(v) = self.writes.get(&(t.id(), key.to_vec())) {
                return Ok(v.clone());
            }
        }
        if !self.isolation.holds_view() {
            return t.tree().get(&self.db.ctx(), key);
        }
        let view = self.view();
        // the tree first, then the versions (mvcc.rs: the order makes the read right)
        let r = t
            .tree()
            .get(&self.db.ctx(), key)
            .and_then(|latest| view.resolve(t.id(), key, latest));
        self.read_ends_on_retryable(r)
    }

    /// A locking read: takes an exclusive lock on the key (held until commit or rollback),
    /// then reads this transaction's own write, else the newest committed value, whatever
    /// the isolation level (as InnoDB's locking reads do). Under snapshot isolation a key
    /// committed by another transaction after the view was taken fails with
    /// [`Error::SerializationFailure`].
    pub fn get_for_update(&mut self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.usable()?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        self.lock_x(t, key)?;
        let wk = (t.id(), key.to_vec());
        if let Some(v) = self.writes.get(&wk) {
            return Ok(v.clone());
        }
        let (v, hint) = t.tree().get_hinted(&self.db.ctx(), key)?;
        let add = key.len() + v.as_ref().map_or(0, Vec::len);
        if !t.tree().key_set
            && (self.locked_value_bytes + add) as u64 <= self.db.opts.max_write_set_size
            && !self.locked_values.contains_key(&wk)
        {
            self.locked_value_bytes += add;
            self.locked_values.insert(wk, (v.clone(), hint));
        }
        Ok(v)
    }

    /// Inserts or replaces `key`. On an index table (`Database::create_index_table`) the
    /// value must be empty and the key must not be in the table (see there).
    pub fn put(&mut self, t: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.usable()?;
        self.db.check_writable("a write")?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        if value.len() > node::MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: node::MAX_VALUE_LEN,
            });
        }
        if t.tree().key_set && !value.is_empty() {
            return Err(Error::IndexValueNotEmpty {
                table: t.name().to_string(),
                len: value.len(),
            });
        }
        self.record(t, key, Some(value.to_vec()))
    }

    /// Deletes `key` (a no-op at commit if it is absent; on an index table the key must be
    /// in the table, see `Database::create_index_table`).
    pub fn delete(&mut self, t: &Table, key: &[u8]) -> Result<()> {
        self.usable()?;
        self.db.check_writable("a write")?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        self.record(t, key, None)
    }

    fn record(&mut self, t: &Table, key: &[u8], v: Option<Vec<u8>>) -> Result<()> {
        let add = key.len() + v.as_ref().map_or(0, Vec::len);
        let limit = self.db.opts.max_write_set_size;
        if (self.write_bytes + add) as u64 > limit {
            return Err(Error::TransactionTooLarge {
                what: "write set",
                bytes: (self.write_bytes + add) as u64,
                limit,
                why: "max_write_set_size",
            });
        }
        self.lock_x(t, key)?;
        self.write_bytes += add;
        self.writes.insert(t, key.to_vec(), v);
        Ok(())
    }

    /// Number of keys written so far.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    /// Bytes of keys and values written so far (including overwritten ones).
    pub fn write_bytes(&self) -> usize {
        self.write_bytes
    }

    /// Rows of `t` with keys in `range`, in key order; `.rev()` walks them from the top.
    /// The transaction's own writes are included as they were when the scan began; the scan
    /// borrows nothing from the transaction, so the transaction may go on writing meanwhile.
    ///
    /// ```no_run
    /// # fn f(db: &evenkeel::Database) -> evenkeel::Result<()> {
    /// let t = db.table("fruit")?;
    /// let txn = db.begin();
    /// for row in txn.range(&t, "a".."m")? {
    ///     let (key, value) = row?;
    ///     println!("{key:?} = {value:?}");
    /// }
    /// let last_three: Vec<_> = txn.range(&t, ..)?.rev().take(3).collect();
    /// # Ok(()) }
    /// ```
    pub fn range<R: KeyRange>(&self, t: &Table, range: R) -> Result<Scan> {
        let (lower, upper) = range.key_bounds();
        self.scan(t, lower, upper, false)
    }

    /// Rows of `t` with keys in (`lower`, `upper`), ascending, or descending when `reverse`
    /// (the same as [`range`](Self::range), with explicit bounds). Lazy: rows are fetched a
    /// leaf at a time.
    pub fn scan(
        &self,
        t: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Scan> {
        self.usable()?;
        t.check_usable(&self.db)?;
        let own = |b: Bound<&[u8]>| match b {
            Bound::Included(k) => Bound::Included((t.id(), k.to_vec())),
            Bound::Excluded(k) => Bound::Excluded((t.id(), k.to_vec())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lo = match lower {
            Bound::Unbounded => Bound::Included((t.id(), Vec::new())),
            b => own(b),
        };
        let hi = match upper {
            Bound::Unbounded => Bound::Excluded((t.id() + 1, Vec::new())),
            b => own(b),
        };
        let ws: VecDeque<(Vec<u8>, Option<Vec<u8>>)> = if range_is_empty(lower, upper) {
            VecDeque::new()
        } else {
            self.writes
                .range((lo, hi))
                .map(|((_, k), v)| (k.clone(), v.clone()))
                .collect()
        };
        Ok(Scan::new(
            self.db.clone(),
            t.clone(),
            lower,
            upper,
            ws,
            reverse,
            Some(self.scan_view()),
        ))
    }

    /// Makes the write set durable and visible; returns once the COMMIT is as durable as
    /// [`durability`](Self::durability) promises.
    pub fn commit(mut self) -> Result<()> {
        self.usable()?;
        if self.writes.is_empty() {
            if self.admitted {
                // its locking reads may have seen commits still waiting for their fsync
                let log = &self.db.dur.log;
                log.flush_for_commit_with(log.current_lsn(), self.durability().flush_at_commit())
                    .inspect_err(|e| self.db.dur.poison(e))?;
            }
            self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.db.check_writable("a commit of writes")?;
        for t in self.writes.tables() {
            t.check_live()?;
        }
        let durability = self.durability();
        let db = &self.db;
        let dur = &db.dur;
        let befores = apply::read_befores(db, &self.writes, &mut self.locked_values)?;
        let apply::CommitRecord {
            payload,
            redo,
            patches,
        } = apply::commit_record(db, self.id, &self.writes, &befores)?;
        // Reserved: the COMMIT and its apply, once. If the engine crashes while this
        // transaction applies, recovery re-applies it into a log that already holds the COMMIT
        // and what the first apply wrote (its COMMIT pins the checkpoint): it has room because
        // it skips the writes already in place (see `apply::reapply`), so it logs at most what
        // this reservation still held unspent.
        let room = if self.admitted {
            dur.admit_delayed(redo)?
        } else {
            dur.admit(redo)?
        };
        let range = {
            let (range, _fence) = dur.space.append_fenced(&payload)?;
            dur.space.begin_applying(range.start, payload.len() as u64);
            range
        };
        db.counters
            .writes_logged_as_patches
            .fetch_add(patches, Ordering::Relaxed);
        let mut applying = apply::Applying::new(
            range.start,
            self.id.0,
            redo - payload.len() as u64,
            Some(room),
        );
        // numbered just before the apply: views taken until it ends do not see it
        let cno = db.dur.versions.begin_commit();
        let applied = apply::apply_writes(db, &self.writes, Some((cno, befores)), &mut applying);
        db.dur.versions.end_commit(cno);
        if let Err(e) = applied {
            // the COMMIT is in the log: recovery will re-apply it; this process cannot
            dur.poison(&e);
            return Err(e);
        }
        let mut done = Vec::with_capacity(16);
        record::encode_apply_done(&mut done, applying.pin.0);
        let r = dur.space.append_fenced(&done).map(|(_, _fence)| ());
        dur.space.end_applying(applying.pin);
        drop(applying);
        r?;
        // applied and logged: the keys go to their next holders before the wait (module doc)
        db.locks.release_all(self.id);
        self.admitted = false;
        dur.log
            .flush_for_commit_with(range.end, durability.flush_at_commit())
            .inspect_err(|e| dur.poison(e))?;
        db.counters.commits.fetch_add(1, Ordering::Relaxed);
        dur.counters.commits_logged.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the write set and the locks.
    pub fn rollback(self) {
        if self.aborted.lock().is_none() {
            self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
        }
    }
}
