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

use crate::db::{DbInner, Table};
use crate::error::{Error, Result};
use crate::page::node;
use crate::txn::locks::LockMode;
use crate::types::{Lsn, TableId, TxnId};
use crate::wal::record::{self, WriteOp};
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Rows a scan fetches from the tree per descent.
const SCAN_BATCH_ROWS: usize = 256;

type WriteKey = (u32, Vec<u8>);

/// Share of the log capacity one COMMIT record may take.
const MAX_COMMIT_SHARE_OF_LOG: u64 = 4;

pub struct Transaction {
    db: Arc<DbInner>,
    id: TxnId,
    writes: BTreeMap<WriteKey, (Table, Option<Vec<u8>>)>,
    write_bytes: usize,
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // commit, rollback and an abandoned transaction all end here
        self.db.locks.release_all(self.id);
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
        }
    }

    pub fn id(&self) -> u64 {
        self.id.0
    }

    fn lock_x(&mut self, t: &Table, key: &[u8]) -> Result<()> {
        let timeout = Duration::from_secs(self.db.dur.knobs.read().lock_wait_timeout);
        self.db
            .locks
            .lock(self.id, TableId(t.id()), key, LockMode::Exclusive, timeout)
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
    pub fn get(&mut self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.check_open()?;
        t.check_live()?;
        self.check_key(key)?;
        if let Some((_, v)) = self.writes.get(&(t.id(), key.to_vec())) {
            return Ok(v.clone());
        }
        t.tree.get(&self.db.ctx(), key)
    }

    /// As `get`, after taking an exclusive lock on the key (held until commit or rollback).
    pub fn get_for_update(&mut self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.check_open()?;
        t.check_live()?;
        self.check_key(key)?;
        self.lock_x(t, key)?;
        self.get(t, key)
    }

    /// Inserts or replaces `key`.
    pub fn put(&mut self, t: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.check_open()?;
        t.check_live()?;
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
        self.db.check_open()?;
        t.check_live()?;
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

    /// Rows of `t` with keys in (`lower`, `upper`), ascending, or descending when `reverse`;
    /// this transaction's writes included. Lazy: rows are fetched a leaf at a time.
    pub fn scan(
        &mut self,
        t: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Scan<'_>> {
        self.db.check_open()?;
        t.check_live()?;
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
        let mut ws: VecDeque<(Vec<u8>, Option<Vec<u8>>)> = if range_is_empty(lower, upper) {
            VecDeque::new()
        } else {
            self.writes
                .range((lo, hi))
                .map(|((_, k), (_, v))| (k.clone(), v.clone()))
                .collect()
        };
        if reverse {
            ws = ws.into_iter().rev().collect();
        }
        Ok(Scan {
            db: self.db.clone(),
            table: t.clone(),
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            reverse,
            tree_rows: VecDeque::new(),
            tree_done: false,
            ws,
            _txn: PhantomData,
        })
    }

    /// Makes the write set durable and visible; returns once the COMMIT is as durable as
    /// flush_log_at_trx_commit promises.
    pub fn commit(self) -> Result<()> {
        self.db.check_open()?;
        if self.writes.is_empty() {
            self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        for (t, _) in self.writes.values() {
            t.check_live()?;
        }
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
                why: "a quarter of the redo log capacity, and no more than log_buffer_size",
            });
        }
        let mut payload = Vec::with_capacity(size);
        record::encode_commit(&mut payload, self.id.0, &ops);
        // Page diffs of applying the writes: per write the changed cell (twice: the new one
        // and the bytes it moves), header bytes and record framing, and a 64th of a page
        // for the slot-array shift of an insert in the middle of a page and the amortized
        // split. The reservation must not be short: an applying transaction pins the
        // checkpoint at its COMMIT, so a log that fills under it cannot be freed (measured:
        // 3,000 random index inserts in one transaction wrote 3x the old estimate of 2 x the
        // cell + 256 bytes, filled a 4 MiB log and stopped the engine).
        let per_op_pages = (db.pool.page_size() / 64) as u64;
        let apply_estimate: u64 = ops
            .iter()
            .map(|o| 2 * (o.1.len() + o.2.map_or(0, <[u8]>::len)) as u64 + 256 + per_op_pages)
            .sum();
        let redo = size as u64 + apply_estimate;
        let redo_limit = dur.log.capacity() / 2;
        if redo > redo_limit {
            return Err(Error::TransactionTooLarge {
                what: "redo of the COMMIT record and its page changes (estimated)",
                bytes: redo,
                limit: redo_limit,
                why: "half the redo log capacity (log_file_size x log_files_in_group)",
            });
        }
        // Reserved: the COMMIT and its apply, once. If the engine crashes while this
        // transaction applies, recovery re-applies it into a log that already holds the COMMIT
        // and what the first apply wrote (its COMMIT pins the checkpoint): it has room because
        // it skips the writes already in place (see `reapply`), so it logs at most what this
        // reservation still held unspent. (Session 2 reserved the apply twice for that; with 4
        // insert clients the promises alone filled 60% of a 4 MiB log, and every policy
        // stalled on log space at 62-66% age.)
        let _room = dur.admit(redo)?;
        let range = {
            let (range, _fence) = dur.append_fenced(&payload)?;
            dur.begin_applying(range.start);
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
        let r = dur.append_fenced(&done).map(|(_, _fence)| ());
        dur.end_applying(range.start);
        r?;
        dur.log
            .flush_for_commit(range.end)
            .inspect_err(|e| dur.poison(e))?;
        db.counters.commits.fetch_add(1, Ordering::Relaxed);
        dur.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the write set and the locks.
    pub fn rollback(self) {
        self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
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
        .map(|(name, tree)| {
            (
                tree.id,
                Table {
                    tree,
                    name: Arc::from(name.as_str()),
                },
            )
        })
        .collect();
    let mut n = 0;
    // The checkpoint must not pass a COMMIT whose writes are not all applied: if it did and
    // this recovery crashed, the next one would not find them. Appending the re-applied
    // changes may need log space, and making room checkpoints (append_fenced).
    for &commit_lsn in pending.keys() {
        let _f = db.dur.fence_shared();
        db.dur.begin_applying(Lsn(commit_lsn));
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
        drop(db.dur.append_fenced(&done)?);
        db.dur.end_applying(Lsn(commit_lsn));
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

/// A lazy range scan merging the tree with the transaction's own writes.
pub struct Scan<'t> {
    db: Arc<DbInner>,
    table: Table,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    tree_rows: VecDeque<(Vec<u8>, Vec<u8>)>,
    tree_done: bool,
    ws: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    _txn: PhantomData<&'t mut Transaction>,
}

impl Scan<'_> {
    fn refill(&mut self) -> Result<()> {
        while self.tree_rows.is_empty() && !self.tree_done {
            self.table.check_live()?;
            let batch = self.table.tree.scan_batch(
                &self.db.ctx(),
                as_ref(&self.lower),
                as_ref(&self.upper),
                self.reverse,
                SCAN_BATCH_ROWS,
            )?;
            if let Some((k, _)) = batch.rows.last() {
                // continue after the last key returned
                if self.reverse {
                    self.upper = Bound::Excluded(k.clone());
                } else {
                    self.lower = Bound::Excluded(k.clone());
                }
            }
            self.tree_done = batch.done;
            self.tree_rows.extend(batch.rows);
        }
        Ok(())
    }

    fn next_row(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.refill()?;
            let take_ws = match (self.ws.front(), self.tree_rows.front()) {
                (None, None) => return Ok(None),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((wk, _)), Some((tk, _))) => {
                    if wk == tk {
                        self.tree_rows.pop_front(); // shadowed by our own write
                        true
                    } else {
                        (wk < tk) != self.reverse
                    }
                }
            };
            if take_ws {
                if let Some((k, Some(v))) = self.ws.pop_front() {
                    return Ok(Some((k, v)));
                }
            } else {
                return Ok(self.tree_rows.pop_front());
            }
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}
