//! transaction: a private write set with read-your-writes, applied to the B+trees at commit.
//!
//! Nothing a transaction writes touches a page before `commit()`: rollback is dropping the
//! write set. Commit applies the writes in (table, key) order, one mini-transaction per key.
//! Until the durable write path lands there is no redo log and no key locking: a crash during
//! commit can leave part of a transaction applied, and concurrent transactions see each
//! other's committed keys as soon as they are applied.

use crate::db::{DbInner, Table};
use crate::error::{Error, Result};
use crate::page::node;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Rows a scan fetches from the tree per descent.
const SCAN_BATCH_ROWS: usize = 256;

type WriteKey = (u32, Vec<u8>);

pub struct Transaction {
    db: Arc<DbInner>,
    writes: BTreeMap<WriteKey, (Table, Option<Vec<u8>>)>,
    write_bytes: usize,
}

impl Transaction {
    pub(crate) fn new(db: Arc<DbInner>) -> Self {
        Transaction {
            db,
            writes: BTreeMap::new(),
            write_bytes: 0,
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

    /// As `get`; with key locks (durable write path) it takes an exclusive lock.
    pub fn get_for_update(&mut self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
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
        self.record(t, key, Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key` (a no-op at commit if it is absent).
    pub fn delete(&mut self, t: &Table, key: &[u8]) -> Result<()> {
        self.db.check_open()?;
        t.check_live()?;
        self.check_key(key)?;
        self.record(t, key, None);
        Ok(())
    }

    fn record(&mut self, t: &Table, key: &[u8], v: Option<Vec<u8>>) {
        self.write_bytes += key.len() + v.as_ref().map_or(0, Vec::len);
        self.writes.insert((t.id(), key.to_vec()), (t.clone(), v));
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

    /// Applies the write set. Counts as one commit.
    pub fn commit(self) -> Result<()> {
        self.db.check_open()?;
        let cx = self.db.ctx();
        for ((_, key), (t, v)) in &self.writes {
            t.check_live()?;
            match v {
                Some(v) => {
                    t.tree.put(&cx, key, v)?;
                    self.db
                        .counters
                        .rows_written
                        .fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    if t.tree.delete(&cx, key)? {
                        self.db
                            .counters
                            .rows_deleted
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        self.db.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the write set.
    pub fn rollback(self) {
        self.db.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
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
