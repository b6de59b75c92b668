//! transaction: a private write set with read-your-writes and key locks, applied at commit.
//!
//! Nothing a transaction writes touches a page before its COMMIT record is in the log:
//! rollback is dropping the write set and the locks. Writes and `get_for_update` take an
//! exclusive key lock (waits bounded by lock_wait_timeout, deadlocks detected); plain reads
//! take none and see the latest committed value of each key.
//!
//! Commit (DESIGN.md, "The write path"): admission at the flush points -> COMMIT record (the
//! logical write set) appended -> writes applied in (table, key) order, one mtr each ->
//! ApplyDone appended -> wait until durable as flush_log_at_trx_commit promises (group commit)
//! -> release the key locks. Invariant 3: `commit()` returns Ok only after that wait.
//! Limits: max_write_set_size on the bytes written, and a COMMIT record at most a quarter of
//! the log capacity (a transaction must never be able to fill the log by itself).

use crate::error::{Error, Result};
use crate::locks::LockMode;
use crate::page::node;
use crate::shared::{DbInner, Table};
use crate::types::{Lsn, TableId, TxnId};
use crate::wal::record::{self, WriteOp};
use crate::wal::FlushAtCommit;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Rows a scan fetches from the tree per descent.
const SCAN_BATCH_ROWS: usize = 256;

type WriteKey = (u32, Vec<u8>);

/// Share of the log capacity one COMMIT record may take.
const MAX_COMMIT_SHARE_OF_LOG: u64 = 4;

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

/// A transaction: reads see the latest committed value of each key plus this transaction's
/// own writes; writes are private until `commit`. A retryable error (deadlock, lock wait
/// timeout) rolls it back: every later call fails with [`Error::TransactionAborted`].
pub struct Transaction {
    db: Arc<DbInner>,
    id: TxnId,
    writes: BTreeMap<WriteKey, (Table, Option<Vec<u8>>)>,
    write_bytes: usize,
    /// `None`: the database's flush_log_at_trx_commit as it is at commit.
    durability: Option<Durability>,
    /// `None`: the database's lock_wait_timeout as it is at each wait.
    lock_wait_timeout: Option<Duration>,
    /// Why the transaction was rolled back, once a retryable error ended it.
    aborted: Option<String>,
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // commit, rollback and an abandoned transaction all end here
        self.db.locks.release_all(self.id);
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
            .field("aborted", &self.aborted)
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(db: Arc<DbInner>) -> Self {
        let id = TxnId(db.next_txn.fetch_add(1, Ordering::Relaxed));
        Transaction {
            db,
            id,
            writes: BTreeMap::new(),
            write_bytes: 0,
            durability: None,
            lock_wait_timeout: None,
            aborted: None,
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

    /// Whether a retryable error has rolled this transaction back.
    pub fn is_aborted(&self) -> bool {
        self.aborted.is_some()
    }

    /// Refuses any call on a closed database or an aborted transaction.
    fn usable(&self) -> Result<()> {
        self.db.check_open()?;
        match &self.aborted {
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
        if let Err(e) = &r {
            if e.is_retryable() && self.aborted.is_none() {
                self.writes.clear();
                self.write_bytes = 0;
                self.db.locks.release_all(self.id);
                self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
                self.aborted = Some(e.to_string());
            }
        }
        r
    }

    fn lock_x(&mut self, t: &Table, key: &[u8]) -> Result<()> {
        let timeout = self
            .lock_wait_timeout
            .unwrap_or_else(|| self.db.dur.knobs.read().lock_wait_timeout);
        let r = self
            .db
            .locks
            .lock(self.id, TableId(t.id()), key, LockMode::Exclusive, timeout);
        self.ends_on_retryable(r)
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

    /// The latest value of `key`: this transaction's own write, else the committed value.
    pub fn get(&self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.usable()?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        if let Some((_, v)) = self.writes.get(&(t.id(), key.to_vec())) {
            return Ok(v.clone());
        }
        t.tree.get(&self.db.ctx(), key)
    }

    /// As `get`, after taking an exclusive lock on the key (held until commit or rollback).
    pub fn get_for_update(&mut self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.usable()?;
        t.check_usable(&self.db)?;
        self.check_key(key)?;
        self.lock_x(t, key)?;
        self.get(t, key)
    }

    /// Inserts or replaces `key`.
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
        self.record(t, key, Some(value.to_vec()))
    }

    /// Deletes `key` (a no-op at commit if it is absent).
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
        self.writes.insert((t.id(), key.to_vec()), (t.clone(), v));
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
                .map(|((_, k), (_, v))| (k.clone(), v.clone()))
                .collect()
        };
        Ok(Scan {
            db: self.db.clone(),
            table: t.clone(),
            lo: lower.map(<[u8]>::to_vec),
            hi: upper.map(<[u8]>::to_vec),
            front: Side::new(lower.map(<[u8]>::to_vec)),
            back: Side::new(upper.map(<[u8]>::to_vec)),
            ws,
            reverse,
        })
    }

    /// Makes the write set durable and visible; returns once the COMMIT is as durable as
    /// [`durability`](Self::durability) promises.
    pub fn commit(self) -> Result<()> {
        self.usable()?;
        if self.writes.is_empty() {
            self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.db.check_writable("a commit of writes")?;
        for (t, _) in self.writes.values() {
            t.check_live()?;
        }
        let durability = self.durability();
        let db = &self.db;
        let dur = &db.dur;
        let ops: Vec<record::WriteRef<'_>> = self
            .writes
            .iter()
            .map(|((tid, k), (_, v))| (*tid, &k[..], v.as_deref()))
            .collect();
        let size = record::commit_size(ops.iter().map(|o| (o.1.len(), o.2.map_or(0, <[u8]>::len))));
        let limit =
            (dur.log.capacity() / MAX_COMMIT_SHARE_OF_LOG).min(dur.log.max_payload() as u64);
        if size as u64 > limit {
            return Err(Error::TransactionTooLarge {
                what: "COMMIT record",
                bytes: size as u64,
                limit,
                why: "a quarter of the redo log capacity, and no more than log_buffer_size; \
                      raise log_file_size (x log_files_in_group) and log_buffer_size, or \
                      commit in smaller transactions",
            });
        }
        let mut payload = Vec::with_capacity(size);
        record::encode_commit(&mut payload, self.id.0, &ops);
        let redo = size as u64 + apply_redo_estimate(db.pool.page_size(), &ops);
        let redo_limit = max_transaction_redo(dur.log.capacity());
        if redo > redo_limit {
            return Err(Error::TransactionTooLarge {
                what: "redo of the COMMIT record and its page changes (estimated)",
                bytes: redo,
                limit: redo_limit,
                why: "half the redo log capacity; raise log_file_size (x \
                      log_files_in_group), or commit in smaller transactions",
            });
        }
        // Reserved: the COMMIT and its apply, once. If the engine crashes while this
        // transaction applies, recovery re-applies it into a log that already holds the COMMIT
        // and what the first apply wrote (its COMMIT pins the checkpoint): it has room because
        // it skips the writes already in place (see `reapply`), so it logs at most what this
        // reservation still held unspent.
        let _room = dur.admit(redo)?;
        let range = {
            let (range, _fence) = dur.space.append_fenced(&payload)?;
            dur.space.begin_applying(range.start);
            range
        };
        let applied = apply_writes(db, &self.writes, false);
        if let Err(e) = applied {
            // the COMMIT is in the log: recovery will re-apply it; this process cannot
            dur.poison(&e);
            return Err(e);
        }
        let mut done = Vec::with_capacity(16);
        record::encode_apply_done(&mut done, range.start.0);
        let r = dur.space.append_fenced(&done).map(|(_, _fence)| ());
        dur.space.end_applying(range.start);
        r?;
        dur.log
            .flush_for_commit_with(range.end, durability.flush_at_commit())
            .inspect_err(|e| dur.poison(e))?;
        db.counters.commits.fetch_add(1, Ordering::Relaxed);
        dur.counters.commits_logged.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the write set and the locks.
    pub fn rollback(self) {
        if self.aborted.is_none() {
            self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The most redo one transaction may need (its COMMIT record and the page changes of
/// applying it): half the log's capacity, so no transaction can fill the log by itself.
pub fn max_transaction_redo(log_capacity: u64) -> u64 {
    log_capacity / 2
}

/// Redo of applying one write of `key_len + value_len` bytes, at the least: the changed cell
/// twice (the new one and the bytes it moves), header bytes and record framing (256), and a
/// 64th of a page for the slot-array shift of an insert in the middle of a page and the
/// amortized split. The reservation must not be short: an applying transaction pins the
/// checkpoint at its COMMIT, so a log that fills under it cannot be freed.
pub fn apply_redo_per_write(page_size: usize, key_len: usize, value_len: usize) -> u64 {
    2 * (key_len + value_len) as u64 + 256 + (page_size / 64) as u64
}

/// The most writes of `key_len + value_len` bytes one transaction can commit on a log of
/// `log_capacity` bytes whose largest group is `max_payload` bytes, and the option that bounds
/// it: both commit limits (the COMMIT record, the estimated redo) applied to that shape.
pub fn max_writes_per_transaction(
    log_capacity: u64,
    max_payload: usize,
    page_size: usize,
    key_len: usize,
    value_len: usize,
) -> (u64, &'static str) {
    let record_per_write = (record::commit_size(std::iter::once((key_len, value_len)))
        - record::commit_size(std::iter::empty())) as u64;
    let record_fixed = record::commit_size(std::iter::empty()) as u64;
    let record_limit = (log_capacity / MAX_COMMIT_SHARE_OF_LOG).min(max_payload as u64);
    let by_record = record_limit.saturating_sub(record_fixed) / record_per_write;
    let redo_per_write = record_per_write + apply_redo_per_write(page_size, key_len, value_len);
    let by_redo = max_transaction_redo(log_capacity).saturating_sub(record_fixed) / redo_per_write;
    if by_record < by_redo {
        let option = if max_payload as u64 <= log_capacity / MAX_COMMIT_SHARE_OF_LOG {
            "log_buffer_size"
        } else {
            "log_file_size"
        };
        (by_record, option)
    } else {
        (by_redo, "log_file_size")
    }
}

fn apply_redo_estimate(page_size: usize, ops: &[record::WriteRef<'_>]) -> u64 {
    ops.iter()
        .map(|o| apply_redo_per_write(page_size, o.1.len(), o.2.map_or(0, <[u8]>::len)))
        .sum()
}

/// Applies a write set to the B+trees. With `skip_applied` (recovery's re-apply), a write
/// already in place (the key holds that value, or a deleted key is absent) is skipped, so it
/// logs nothing. Sound because the key locks kept every later transaction off these keys until
/// this one's apply finished. Why: the log holds the COMMIT and the first apply's redo, and
/// the commit reserved room for its apply once; re-applying only what is missing stays within
/// what that reservation left.
fn apply_writes(
    db: &DbInner,
    writes: &BTreeMap<WriteKey, (Table, Option<Vec<u8>>)>,
    skip_applied: bool,
) -> Result<()> {
    let cx = db.ctx();
    for ((_, key), (t, v)) in writes {
        if skip_applied && t.tree.get(&cx, key)? == *v {
            continue;
        }
        match v {
            Some(v) => {
                t.tree.put(&cx, key, v)?;
                db.counters.rows_written.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if t.tree.delete(&cx, key)? {
                    db.counters.rows_deleted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

/// Recovery: re-applies, in commit order, write sets whose COMMIT is durable but whose
/// ApplyDone is not (their page changes may be partly missing). Returns how many.
pub(crate) fn reapply(db: &DbInner, pending: BTreeMap<u64, Vec<WriteOp>>) -> Result<u64> {
    let by_id: std::collections::HashMap<u32, Table> = db
        .catalog
        .all()
        .into_iter()
        .map(|(name, tree)| (tree.id, db.table_handle(tree, &name)))
        .collect();
    let mut n = 0;
    // The checkpoint must not pass a COMMIT whose writes are not all applied: if it did and
    // this recovery crashed, the next one would not find them. Appending the re-applied
    // changes may need log space, and making room checkpoints (append_fenced).
    for &commit_lsn in pending.keys() {
        let _f = db.dur.space.fence_shared();
        db.dur.space.begin_applying(Lsn(commit_lsn));
    }
    if !pending.is_empty() {
        // all the room there is: write what redo dirtied, checkpoint up to the oldest COMMIT
        db.pool.flush_all()?;
        db.dur.checkpoint()?;
    }
    for (commit_lsn, writes) in pending {
        let mut ws = BTreeMap::new();
        for w in writes {
            // a table dropped after the commit has nothing left to apply to
            if let Some(t) = by_id.get(&w.table) {
                ws.insert((w.table, w.key), (t.clone(), w.value));
            }
        }
        apply_writes(db, &ws, true)?;
        let mut done = Vec::with_capacity(16);
        record::encode_apply_done(&mut done, commit_lsn);
        drop(db.dur.space.append_fenced(&done)?);
        db.dur.space.end_applying(Lsn(commit_lsn));
        n += 1;
    }
    Ok(n)
}

/// True when no key can lie between the bounds (BTreeMap::range panics on such ranges).
fn range_is_empty(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u))
        | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Key bounds a scan accepts: the Rust ranges (`a..b`, `a..=b`, `a..`, `..b`, `..=b`, `..`)
/// and a pair of [`Bound`]s, over anything that is bytes (`&[u8]`, `&str`, `Vec<u8>`, ...).
pub trait KeyRange {
    /// The lower and upper bound.
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

impl<K: AsRef<[u8]>> KeyRange for Range<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start.as_ref()),
            Bound::Excluded(self.end.as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start().as_ref()),
            Bound::Included(self.end().as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeFrom<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Included(self.start.as_ref()), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeTo<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Excluded(self.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for RangeToInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Included(self.end.as_ref()))
    }
}

impl KeyRange for RangeFull {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (as_bytes(&self.0), as_bytes(&self.1))
    }
}

fn as_bytes<K: AsRef<[u8]>>(b: &Bound<K>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// True when `k` lies above the lower bound `b`.
fn above(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    }
}

/// True when `k` lies below the upper bound `b`.
fn below(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(u) => k <= u.as_slice(),
        Bound::Excluded(u) => k < u.as_slice(),
        Bound::Unbounded => true,
    }
}

/// One end of a scan: rows fetched from the tree ahead of being returned, and where the next
/// fetch continues.
struct Side {
    rows: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The next fetch starts past this bound (the last key fetched, or the scan's bound).
    cursor: Bound<Vec<u8>>,
    done: bool,
}

impl Side {
    fn new(cursor: Bound<Vec<u8>>) -> Side {
        Side {
            rows: VecDeque::new(),
            cursor,
            done: false,
        }
    }
}

/// A lazy range scan merging the tree with the transaction's own writes (as they were when
/// the scan began). Double-ended: `next` walks up from the lower bound, `next_back` down from
/// the upper one, and the two meet without repeating a row. Owns what it needs, so it does
/// not borrow the transaction.
pub struct Scan {
    db: Arc<DbInner>,
    table: Table,
    /// Keys not yet returned lie within (`lo`, `hi`): each end moves its bound past every key
    /// it returns, and a row fetched by one end past the other's bound is not returned.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    front: Side,
    back: Side,
    /// The transaction's writes in the range, ascending; each end takes from its own end.
    ws: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    /// `Transaction::scan(.., reverse = true)`: `next` walks down.
    reverse: bool,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("table", &self.table.name())
            .field("lo", &self.lo)
            .field("hi", &self.hi)
            .finish()
    }
}

impl Scan {
    /// Fetches the next batch for one end (`up`: the front) until it has a row or is done.
    fn refill(&mut self, up: bool) -> Result<()> {
        loop {
            let side = if up { &self.front } else { &self.back };
            if !side.rows.is_empty() || side.done {
                return Ok(());
            }
            self.db.check_open()?;
            self.table.check_live()?;
            let (lower, upper) = if up {
                (as_ref(&self.front.cursor), as_ref(&self.hi))
            } else {
                (as_ref(&self.lo), as_ref(&self.back.cursor))
            };
            let batch = if range_is_empty(lower, upper) {
                None
            } else {
                Some(self.table.tree.scan_batch(
                    &self.db.ctx(),
                    lower,
                    upper,
                    !up,
                    SCAN_BATCH_ROWS,
                )?)
            };
            let side = if up { &mut self.front } else { &mut self.back };
            match batch {
                None => side.done = true,
                Some(batch) => {
                    if let Some((k, _)) = batch.rows.last() {
                        side.cursor = Bound::Excluded(k.clone());
                    }
                    side.done = batch.done;
                    side.rows.extend(batch.rows);
                }
            }
        }
    }

    /// The next row from one end: the tree's rows merged with the transaction's writes.
    fn next_from(&mut self, up: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.refill(up)?;
            // a tree row the other end has already passed ends this end's tree rows
            let (lo, hi) = (&self.lo, &self.hi);
            let side = if up { &mut self.front } else { &mut self.back };
            if let Some((k, _)) = side.rows.front() {
                if !(above(k, lo) && below(k, hi)) {
                    side.rows.clear();
                    side.done = true;
                }
            }
            let tree = side.rows.front().map(|(k, _)| k);
            let own = if up { self.ws.front() } else { self.ws.back() }.map(|(k, _)| k);
            let take_own = match (own, tree) {
                (None, None) => return Ok(None),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(w), Some(t)) => {
                    if w == t {
                        side.rows.pop_front(); // shadowed by the transaction's own write
                        true
                    } else {
                        (w < t) == up
                    }
                }
            };
            // (key, value), the value None for a key the transaction deleted
            let row = if take_own {
                if up {
                    self.ws.pop_front()
                } else {
                    self.ws.pop_back()
                }
            } else {
                side.rows.pop_front().map(|(k, v)| (k, Some(v)))
            };
            let Some((k, v)) = row else { continue };
            // every key up to this one is done for this end, a deleted one too (the other
            // end's tree rows may still hold it)
            if up {
                self.lo = Bound::Excluded(k.clone());
            } else {
                self.hi = Bound::Excluded(k.clone());
            }
            if let Some(v) = v {
                return Ok(Some((k, v)));
            }
        }
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        let up = !self.reverse;
        self.next_from(up).transpose()
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        let up = self.reverse;
        self.next_from(up).transpose()
    }
}
