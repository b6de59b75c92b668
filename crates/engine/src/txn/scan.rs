//! scan: range scans over a table as a transaction sees them ([`Scan`]), and the key bounds
//! they accept ([`KeyRange`]). A scan reads the tree's rows a leaf batch at a time, puts the
//! read view's values in place of the rows changed since the view (mvcc.rs), and merges the
//! transaction's own writes as they were when it began.

use crate::error::Result;
use crate::mvcc::View;
use crate::shared::{DbInner, Table};
use std::collections::VecDeque;
use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::sync::Arc;

/// Rows a scan fetches from the tree per descent.
const SCAN_BATCH_ROWS: usize = 256;

pub(super) use crate::mvcc::range_is_empty;

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

/// Moves bound `b` to just past `k`, in the bound's own buffer once it has one (a scan moves
/// a bound past every row it returns: a new copy of each key was an allocation per row).
fn pass(b: &mut Bound<Vec<u8>>, k: &[u8]) {
    if let Bound::Excluded(buf) = b {
        buf.clear();
        buf.extend_from_slice(k);
    } else {
        *b = Bound::Excluded(k.to_vec());
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

/// The rows a view sees: the tree's `rows` (ascending when `up`, else descending) with each
/// key in `hidden` (ascending) given the view's value, dropped when it is `None`.
fn see_through(
    rows: Vec<(Vec<u8>, Vec<u8>)>,
    hidden: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    up: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if hidden.is_empty() {
        return rows;
    }
    let mut merged: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = rows.into_iter().collect();
    for (k, v) in hidden {
        match v {
            Some(v) => merged.insert(k, v),
            None => merged.remove(&k),
        };
    }
    if up {
        merged.into_iter().collect()
    } else {
        merged.into_iter().rev().collect()
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
    /// The read view the rows are seen through; `None`: the newest committed rows.
    view: Option<Arc<View>>,
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
    /// A scan of `table` over (`lower`, `upper`), merging the transaction's writes `ws` in that
    /// range (ascending); `next` walks down when `reverse`.
    pub(super) fn new(
        db: Arc<DbInner>,
        table: Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        ws: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
        reverse: bool,
        view: Option<Arc<View>>,
    ) -> Scan {
        Scan {
            db,
            table,
            lo: lower.map(<[u8]>::to_vec),
            hi: upper.map(<[u8]>::to_vec),
            front: Side::new(lower.map(<[u8]>::to_vec)),
            back: Side::new(upper.map(<[u8]>::to_vec)),
            ws,
            reverse,
            view,
        }
    }

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
                Some(self.table.tree().scan_batch(
                    &self.db.ctx(),
                    lower,
                    upper,
                    !up,
                    SCAN_BATCH_ROWS,
                )?)
            };
            let Some(mut batch) = batch else {
                let side = if up { &mut self.front } else { &mut self.back };
                side.done = true;
                continue;
            };
            // the next fetch continues past the tree's last row, whatever the view makes of it
            let tree_last = batch.rows.last().map(|(k, _)| k.clone());
            if let Some(view) = &self.view {
                // the keys this batch covers: from the cursor to its last row, or to the
                // bound when it ends the range (rows deleted since the view lie there too);
                // none when it ends nothing and holds no row
                let covered = match (batch.done, batch.rows.last()) {
                    (true, _) => Some((lower, upper)),
                    (false, Some((k, _))) if up => Some((lower, Bound::Included(&k[..]))),
                    (false, Some((k, _))) => Some((Bound::Included(&k[..]), upper)),
                    (false, None) => None,
                };
                if let Some((l, u)) = covered {
                    let hidden = view.hidden_in(self.table.id(), l, u)?;
                    batch.rows = see_through(std::mem::take(&mut batch.rows), hidden, up);
                }
            }
            let side = if up { &mut self.front } else { &mut self.back };
            if let Some(k) = tree_last {
                side.cursor = Bound::Excluded(k);
            }
            side.done = batch.done;
            side.rows.extend(batch.rows);
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
            pass(if up { &mut self.lo } else { &mut self.hi }, &k);
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
