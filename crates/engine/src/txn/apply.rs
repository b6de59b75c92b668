//! apply: a commit's write set against the log and the trees. The limits a COMMIT must fit
//! (its record at most a quarter of the log capacity, its record and estimated redo at most
//! half: a transaction must never be able to fill the log by itself) and the sizing they give
//! ([`max_writes_per_transaction`]); the apply of the writes to the B+trees, one mtr each; and
//! recovery's re-apply of COMMITs whose ApplyDone is not in the log.

use crate::btree::LeafHint;
use crate::error::{Error, Result};
use crate::shared::{DbInner, Table};
use crate::types::{Lsn, TxnId};
use crate::wal::record::{self, WriteOp, WriteValue};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// A written key: its table's id and the key.
pub(super) type WriteKey = (u32, Vec<u8>);

/// A transaction's writes in (table, key) order, each with its new value (`None`: deleted),
/// and the tables they write, each held once. A write names its table by its place in
/// `tables` rather than holding a [`Table`] of its own: cloning and dropping a `Table` per write
/// changes its shared reference count, a cache line that every client writing that table then
/// moves between cores, and that line also holds what every access of the table reads.
#[derive(Default)]
pub(super) struct WriteSet {
    /// Each table written, once, beside its id (so that finding a write's table compares ids
    /// without reading the tables' handles).
    tables: Vec<(u32, Table)>,
    /// Each write: its place in `tables` and its new value.
    map: BTreeMap<WriteKey, (u32, Option<Vec<u8>>)>,
}

impl WriteSet {
    /// Writes `key` of `t` (replacing an earlier write of it).
    pub(super) fn insert(&mut self, t: &Table, key: Vec<u8>, v: Option<Vec<u8>>) {
        let id = t.id();
        let slot = match self.tables.iter().rposition(|(tid, _)| *tid == id) {
            Some(i) => i,
            None => {
                self.tables.push((id, t.clone()));
                self.tables.len() - 1
            }
        };
        self.map.insert((id, key), (slot as u32, v));
    }

    /// This transaction's write of `wk`, if any.
    pub(super) fn get(&self, wk: &WriteKey) -> Option<&Option<Vec<u8>>> {
        self.map.get(wk).map(|(_, v)| v)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.tables.clear();
    }

    /// The tables written.
    pub(super) fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().map(|(_, t)| t)
    }

    /// The writes in (table, key) order, each with its table.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&WriteKey, &Table, &Option<Vec<u8>>)> {
        self.map
            .iter()
            .map(|(wk, (slot, v))| (wk, &self.tables[*slot as usize].1, v))
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &WriteKey> {
        self.map.keys()
    }

    /// The writes with keys in `range`, in order, with their new values.
    pub(super) fn range(
        &self,
        range: (Bound<WriteKey>, Bound<WriteKey>),
    ) -> impl DoubleEndedIterator<Item = (&WriteKey, &Option<Vec<u8>>)> {
        self.map.range(range).map(|(wk, (_, v))| (wk, v))
    }
}

/// Values of keys a transaction read under its exclusive lock (`get_for_update`), before it
/// wrote them: the newest committed value then, and still the tree's value at its commit, since
/// every change of a key's value is an apply holding the key's lock. The commit takes a
/// written key's before-image from here instead of reading the tree again, and the put starts
/// at the leaf that read found (its [`LeafHint`], checked against the tree's SMO epoch then):
/// without it every read-modify-write (a TPC-C stock, district or customer update) descended
/// the tree a second time at its apply.
pub(super) type LockedValues = BTreeMap<WriteKey, (Option<Vec<u8>>, Option<LeafHint>)>;

/// Each write's key's value before the commit (None: absent), in the write set's order, and
/// where the read found its leaf (for the put that follows).
pub(super) type Befores = Vec<(Option<Vec<u8>>, Option<LeafHint>)>;

/// The before-images of a commit's writes, read before its COMMIT record is encoded (its
/// patches are taken against them) and recorded for read views by [`apply_writes`]. Every
/// written key is under this transaction's exclusive lock, and every change of a key's value
/// is an apply holding that lock, so they are the tree's values until this commit applies. A
/// value in `locked` (taken out) is that value without a tree read; an index table's put
/// inserts an absent key and its delete removes a present one (its contract, btree/ibuf.rs),
/// so its before-image is known without reading the leaf, which is what lets the change
/// buffer take the write.
pub(super) fn read_befores(
    db: &DbInner,
    writes: &WriteSet,
    locked: &mut LockedValues,
) -> Result<Befores> {
    let cx = db.ctx();
    let mut out = Vec::with_capacity(writes.len());
    for (wk, t, v) in writes.iter() {
        out.push(if t.tree().key_set {
            (v.is_none().then(Vec::new), None)
        } else if let Some((old, hint)) = locked.remove(wk) {
            debug_assert!(
                old == t.tree().get(&cx, &wk.1)?,
                "a value read under the key's lock changed before the commit"
            );
            (old, hint)
        } else {
            t.tree().get_hinted(&cx, &wk.1)?
        });
    }
    Ok(out)
}

/// The writes of `writes` as the log records them: (table id, key, new value).
fn write_refs<'w>(
    writes: impl Iterator<Item = (&'w WriteKey, &'w Table, &'w Option<Vec<u8>>)>,
) -> Vec<record::WriteRef<'w>> {
    writes
        .map(|((tid, k), _, v)| (*tid, &k[..], v.as_deref()))
        .collect()
}

/// A transaction's encoded COMMIT record.
pub(super) struct CommitRecord {
    pub(super) payload: Vec<u8>,
    /// The redo the record and its apply need (estimated): what the commit reserves.
    pub(super) redo: u64,
    /// Writes logged as patches (counted once the record is in the log).
    pub(super) patches: u64,
}

/// Share of the log capacity one COMMIT record may take.
const MAX_COMMIT_SHARE_OF_LOG: u64 = 4;

/// The COMMIT record of transaction `txn`'s `writes` and the redo it needs with its apply
/// (estimated); refused when either is over its limit. A put over a value of the same length
/// (its before-image in `befores`, from [`read_befores`]) is logged as the runs that changed,
/// where that is shorter: a TPC-C stock update changes 4 columns of a 300-byte row. The
/// limits are checked on the record without patches, so whether a transaction fits does not
/// depend on the values it replaces.
pub(super) fn commit_record(
    db: &DbInner,
    txn: TxnId,
    writes: &WriteSet,
    befores: &Befores,
) -> Result<CommitRecord> {
    let dur = &db.dur;
    let ops = write_refs(writes.iter());
    let size = record::commit_size(ops.iter().map(|o| (o.1.len(), o.2.map_or(0, <[u8]>::len))));
    let limit = (dur.log.capacity() / MAX_COMMIT_SHARE_OF_LOG).min(dur.log.max_payload() as u64);
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
    let before_refs: Vec<Option<&[u8]>> = befores.iter().map(|b| b.0.as_deref()).collect();
    let mut payload = Vec::with_capacity(size);
    let patches = record::encode_commit_patched(&mut payload, txn.0, &ops, &before_refs);
    let redo = payload.len() as u64 + apply_redo_estimate(db.pool.page_size(), &ops);
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
    Ok(CommitRecord {
        payload,
        redo,
        patches: patches as u64,
    })
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
    let record_per_write = record::commit_write_size(key_len, value_len) as u64;
    let record_fixed = record::COMMIT_FIXED_SIZE as u64;
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

/// The most redo one write's apply can log, in pages: a split of the leaf and of every
/// internal level above it logs about a page per level (the half page moved, the new page),
/// and the change buffer's entry for an index write splits its own tree the same way.
const WRITE_REDO_MAX_PAGES: u64 = 16;

/// The most redo one write's apply can log ([`WRITE_REDO_MAX_PAGES`]), in bytes.
fn write_max(page_size: usize) -> u64 {
    WRITE_REDO_MAX_PAGES * page_size as u64
}

/// A commit's apply under way: the COMMIT (or its latest continuation) that pins the
/// checkpoint, and how much redo the apply may log from it.
///
/// Why continuations: an applying transaction pins the checkpoint at its COMMIT (a crash
/// before its ApplyDone re-applies it from the COMMIT's writes), so the log from the COMMIT
/// on cannot be freed until the apply ends. The commit reserved log space for its apply by an
/// estimate of amortized costs, and an apply can log several times that: inserts into leaves
/// that are all full split each one, and each split logs the half page it moves. When the
/// apply has logged what it reserved (less the room to re-log what is left), it appends a
/// CommitContinued record with the writes still to apply, moves its pin there and, in a
/// running engine, takes a new reservation for the rest: the checkpoint may then pass
/// everything before, whose pages the cleaner writes as usual.
pub(crate) struct Applying<'a> {
    /// The LSN of the group holding the COMMIT or continuation this apply re-applies from.
    pub(crate) pin: Lsn,
    txn: u64,
    /// Redo this apply may log from `pin` before it continues its commit.
    budget: u64,
    /// `mtr::thread_redo_bytes()` when `pin` was set.
    spent_from: u64,
    /// The running engine's log reservation; None in recovery (no other writer runs).
    room: Option<crate::flush::Reservation<'a>>,
}

impl<'a> Applying<'a> {
    /// An apply from the COMMIT at `pin` of `txn`, allowed `budget` bytes of redo (the
    /// estimate its reservation `room` holds beyond the COMMIT record).
    pub(crate) fn new(
        pin: Lsn,
        txn: u64,
        budget: u64,
        room: Option<crate::flush::Reservation<'a>>,
    ) -> Self {
        Applying {
            pin,
            txn,
            budget,
            spent_from: crate::mtr::thread_redo_bytes(),
            room,
        }
    }

    fn spent(&self) -> u64 {
        crate::mtr::thread_redo_bytes() - self.spent_from
    }

    /// Whether the next write must wait for a continuation of the commit, whose record of the
    /// writes left is `rest_record` bytes: the apply has logged its budget less that record,
    /// or, in recovery (no reservation), the log's free space is down to that record plus the
    /// most one write can log ([`WRITE_REDO_MAX_PAGES`] pages). Recovery needs the second
    /// test: the log it re-applies into still holds what the cut apply logged after the pin.
    fn must_continue(&self, db: &DbInner, rest_record: u64) -> bool {
        if self.spent() + rest_record >= self.budget {
            return true;
        }
        if self.room.is_some() {
            return false;
        }
        db.dur.log_free() < rest_record + write_max(db.pool.page_size())
    }

    /// Whether a run of puts in one mtr whose apply logs at most `redo` bytes (its estimate,
    /// an upper bound for puts inside one leaf) may go where [`Applying::must_continue`] has
    /// just let one write go: the budget is checked before each write, not after, so one
    /// write may already log up to [`WRITE_REDO_MAX_PAGES`] pages past it (a split up the
    /// tree), and a run that logs no more than that overshoots no further. Recovery (no
    /// reservation) applies one write at a time.
    fn may_run(&self, redo: u64, page_size: usize) -> bool {
        self.room.is_some() && redo <= write_max(page_size)
    }

    /// Before a write (or the record of a continuation) of a running engine's apply: when the
    /// log's free space is down to what the owner of the oldest pin needs and this apply's pin
    /// is younger ([`crate::flush::Durability::yields_to_oldest_pin`]), releases its
    /// reservation and waits for room as a continuation does, taking a new one for the redo
    /// its budget had left (its pin stays where it is). Released, not held: the oldest pin's
    /// owner takes its step only from log that no reservation holds. `rest_record` is the
    /// size of a continuation of the writes left: what this apply needs, with a few pages,
    /// if it is the oldest by the time it has room. Counted in `apply_yields`.
    fn yield_to_oldest_pin(&mut self, db: &'a DbInner, rest_record: u64) -> Result<()> {
        let dur = &db.dur;
        let ps = db.pool.page_size();
        if self.room.is_none() || !dur.yields_to_oldest_pin(self.pin, write_max(ps)) {
            return Ok(());
        }
        let spent = self.spent();
        let left = self.budget.saturating_sub(spent);
        self.room = None;
        let least = rest_record + crate::flush::CONTINUATION_LEAST_PAGES * ps as u64;
        let (room, granted) = dur.admit_continuation(left, least, self.pin, write_max(ps))?;
        self.room = Some(room);
        self.budget = spent + granted;
        db.counters.apply_yields.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Appends a CommitContinued record of `rest` (the writes not yet applied), pins the
    /// checkpoint there instead of at the old record, and takes a new reservation for them.
    fn continue_commit(&mut self, db: &'a DbInner, rest: &[record::WriteRef<'_>]) -> Result<()> {
        let dur = &db.dur;
        let mut payload = Vec::new();
        record::encode_commit_continued(&mut payload, self.pin.0, self.txn, rest);
        let range = {
            let (range, _fence) = dur.space.append_fenced(&payload)?;
            dur.space.begin_applying(range.start, payload.len() as u64);
            range
        };
        dur.space.end_applying(self.pin);
        self.pin = range.start;
        let ps = db.pool.page_size();
        let estimate = apply_redo_estimate(ps, rest);
        let mut budget = estimate;
        if self.room.is_some() {
            // released first: the room it held counts for the new one. No admission delay: the
            // transaction served it before its first lock, and it holds its locks now. The
            // owner of the oldest pin may get less than it asks (down to its next record and
            // a few pages): it then continues again sooner, each time moving its pin to the log
            // end (`Durability::admit_continuation`).
            self.room = None;
            let record = payload.len() as u64;
            let least = record + crate::flush::CONTINUATION_LEAST_PAGES * ps as u64;
            let (room, granted) =
                dur.admit_continuation(record + estimate, least, self.pin, write_max(ps))?;
            self.room = Some(room);
            budget = granted - record;
        } else {
            // Recovery: no page cleaner runs and no reservation holds room, so this thread
            // frees the log itself, here where it holds no page latch: everything this apply
            // dirtied is written and the checkpoint moves to the new pin. (Making room at a
            // full log inside an mtr could not write the pages that mtr latches.)
            db.pool.flush_all()?;
            dur.checkpoint()?;
        }
        self.budget = budget;
        self.spent_from = crate::mtr::thread_redo_bytes();
        db.counters
            .commit_continuations
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Applies a write set to the B+trees. A commit passes its commit number and the writes'
/// before-images ([`read_befores`]): they are recorded for read views first (mvcc.rs), all
/// of them before the first key changes. Recovery's re-apply passes `None` (no view exists
/// while a database opens): a write already in place (the key holds that value, or a deleted
/// key is absent) is skipped, so it logs nothing. Sound because the key locks kept every
/// later transaction off these keys until this one's apply finished. Before each write, an
/// apply that has logged its budget continues its commit ([`Applying`]).
pub(super) fn apply_writes<'a>(
    db: &'a DbInner,
    writes: &WriteSet,
    commit: Option<(u64, Befores)>,
    applying: &mut Applying<'a>,
) -> Result<()> {
    let cx = db.ctx();
    let skip_applied = commit.is_none();
    // where each key's leaf was found by the read of its before-image, for its put
    let mut hints: Vec<Option<LeafHint>> = vec![None; writes.len()];
    if let Some((cno, befores)) = commit {
        let mut before = Vec::with_capacity(writes.len());
        for (i, (wk, (old, hint))) in writes.keys().zip(befores).enumerate() {
            hints[i] = hint;
            before.push((wk.clone(), old));
        }
        db.dur.versions.record(cno, before);
    }
    let write_size =
        |key: &[u8], value_len: usize| record::commit_write_size(key.len(), value_len) as u64;
    let value_len = |v: &Option<Vec<u8>>| v.as_ref().map_or(0, Vec::len);
    // bytes of a continuation of the writes from the current one on
    let mut rest_record = (record::COMMIT_FIXED_SIZE + record::CONTINUED_EXTRA_SIZE) as u64
        + writes
            .iter()
            .map(|((_, k), _, v)| write_size(k, value_len(v)))
            .sum::<u64>();
    let all: Vec<_> = writes.iter().collect();
    let ps = db.pool.page_size();
    // writes before this one were offered to a run that took none of them (its hint had gone
    // stale, or its first put did not fit): they go one by one, not offered again
    let mut runs_from = 0;
    let mut i = 0;
    while i < all.len() {
        let ((_, key), t, v) = all[i];
        applying.yield_to_oldest_pin(db, rest_record)?;
        if i > 0 && applying.must_continue(db, rest_record) {
            applying.continue_commit(db, &write_refs(writes.iter().skip(i)))?;
        }
        let n = match (skip_applied, hints[i]) {
            (false, Some(_)) if i >= runs_from => leaf_run_len(&all[i..], &hints[i..]),
            _ => 0,
        };
        if n > 1 {
            // a run of puts into one leaf goes in one mtr (no continuation cuts it)
            let run: Vec<(&[u8], &[u8])> = all[i..i + n]
                .iter()
                .map(|&((_, k), _, v)| (k.as_slice(), v.as_deref().expect("a run holds puts")))
                .collect();
            let redo: u64 = run
                .iter()
                .map(|(k, v)| apply_redo_per_write(ps, k.len(), v.len()))
                .sum();
            if applying.may_run(redo, ps) {
                let hint = hints[i].expect("a run starts at a hinted write");
                let done = t.tree().put_run_hinted(&cx, &run, hint)?;
                for &(k, v) in &run[..done] {
                    rest_record -= write_size(k, v.len());
                }
                db.counters
                    .rows_written
                    .fetch_add(done as u64, Ordering::Relaxed);
                if done > 0 {
                    i += done;
                    continue;
                }
                runs_from = i + n;
            }
        }
        rest_record -= write_size(key, value_len(v));
        let mut hint = hints[i];
        i += 1;
        if skip_applied {
            let (now, h) = t.tree().get_hinted(&cx, key)?;
            if now == *v {
                continue;
            }
            hint = h;
        }
        match v {
            Some(v) => {
                t.tree().put_hinted(&cx, key, v, hint)?;
                db.counters.rows_written.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if t.tree().delete(&cx, key)? {
                    db.counters.rows_deleted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

/// How many writes, from the first of `writes` on, are a run in one leaf: puts of the same
/// table whose reads found their keys in the same leaf at the same SMO epoch (`hints`, beside
/// `writes`), at most [`MAX_LEAF_RUN`]. 0 when the first write is a delete or has no hint.
fn leaf_run_len(
    writes: &[(&WriteKey, &Table, &Option<Vec<u8>>)],
    hints: &[Option<LeafHint>],
) -> usize {
    let Some(first) = hints.first().copied().flatten() else {
        return 0;
    };
    let table = writes[0].0 .0;
    writes
        .iter()
        .zip(hints)
        .take(MAX_LEAF_RUN)
        .take_while(|(&(wk, _, v), h)| {
            v.is_some() && wk.0 == table && h.is_some_and(|h| h.same_leaf(&first))
        })
        .count()
}

/// The most puts one run into a leaf applies in one mtr ([`leaf_run_len`]): a bound on its log
/// group, whatever the keys' sizes.
const MAX_LEAF_RUN: usize = 64;

/// Recovery: re-applies, in commit order, write sets whose COMMIT is durable but whose
/// ApplyDone is not (their page changes may be partly missing). `pending` holds their COMMIT
/// LSNs in order; `load` reads one write set back (from the log), so one is in memory at a time.
/// Returns how many.
pub(crate) fn reapply(
    db: &DbInner,
    pending: &[Lsn],
    load: &mut dyn FnMut(Lsn) -> Result<(u64, Vec<WriteOp>)>,
) -> Result<u64> {
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
    for &commit_lsn in pending {
        let _f = db.dur.space.fence_shared();
        db.dur.space.begin_applying(commit_lsn, 0);
    }
    if !pending.is_empty() {
        // all the room there is: write what redo dirtied, checkpoint up to the oldest COMMIT
        db.pool.flush_all()?;
        db.dur.checkpoint()?;
    }
    for &commit_lsn in pending {
        let mut ws = WriteSet::default();
        let (txn, writes) = load(commit_lsn)?;
        for w in writes {
            // a table dropped after the commit has nothing left to apply to
            let Some(t) = by_id.get(&w.table) else {
                continue;
            };
            // A patch applies to the value the key held before the commit, or to its new
            // value if the write landed: the two differ only in the patch's runs.
            let value = match w.value {
                WriteValue::Patch { .. } => {
                    let now = t.tree().get(&db.ctx(), &w.key)?;
                    w.value
                        .new_value(now.as_deref())
                        .ok_or_else(|| Error::Recovery {
                            lsn: commit_lsn.0,
                            reason: format!(
                                "a COMMIT patches a value of table {} that is absent or of \
                             another length ({} bytes)",
                                w.table,
                                now.map_or(0, |v| v.len())
                            ),
                        })?
                }
                WriteValue::Put(v) => Some(v),
                WriteValue::Delete => None,
            };
            ws.insert(t, w.key, value);
        }
        let budget = apply_redo_estimate(db.pool.page_size(), &write_refs(ws.iter()));
        let mut applying = Applying::new(commit_lsn, txn, budget, None);
        apply_writes(db, &ws, None, &mut applying)?;
        let mut done = Vec::with_capacity(16);
        record::encode_apply_done(&mut done, applying.pin.0);
        drop(db.dur.space.append_fenced(&done)?);
        db.dur.space.end_applying(applying.pin);
        n += 1;
    }
    Ok(n)
}
