//! scan: range scans forward and backward, one leaf at a time.
//!
//! A batch descends to the leaf holding the start bound, returns the qualifying records of
//! that leaf (moving on to siblings, leaf-coupled, only past empty ones) and releases every
//! latch. The caller continues from the last key returned, exclusive, by descending again.
//! Holding nothing between batches keeps long scans from blocking writers and SMOs, and a scan
//! never sees a key twice or misses a key that was present throughout the scan.

use super::overflow;
use super::{Ctx, Step, Target, Tree};
use crate::error::Result;
use crate::page::{hdr, node};
use std::ops::Bound;

/// Records of one batch and whether the range is exhausted.
pub struct ScanBatch {
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
    pub done: bool,
}

fn below_upper(k: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(u) => k <= u,
        Bound::Excluded(u) => k < u,
        Bound::Unbounded => true,
    }
}

fn above_lower(k: &[u8], lower: Bound<&[u8]>) -> bool {
    match lower {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    }
}

impl Tree {
    /// One batch of at most `max` records in `[lower, upper]`, ascending (or descending when
    /// `reverse`, starting from the upper bound).
    pub fn scan_batch(
        &self,
        cx: &Ctx<'_>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        max: usize,
    ) -> Result<ScanBatch> {
        self.with_merges(cx, || self.scan_batch_once(cx, lower, upper, reverse, max))
    }

    /// One attempt of [`Tree::scan_batch`]: stops before it returns a row of a leaf with
    /// buffered changes (the batch starts again once they are merged).
    fn scan_batch_once(
        &self,
        cx: &Ctx<'_>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        max: usize,
    ) -> Step<ScanBatch> {
        let _smo = self.smo_read();
        let start = if reverse { upper } else { lower };
        let target = match start {
            Bound::Included(k) | Bound::Excluded(k) => Target::Key(k),
            Bound::Unbounded if reverse => Target::Last,
            Bound::Unbounded => Target::First,
        };
        let mut g = self.descend_read(cx, target)?;
        let mut rows = Vec::new();
        loop {
            let n = node::nslots(&g);
            if !reverse {
                let from = match lower {
                    Bound::Included(k) => node::search(&g, k).unwrap_or_else(|i| i),
                    Bound::Excluded(k) => node::search(&g, k).map_or_else(|i| i, |i| i + 1),
                    Bound::Unbounded => 0,
                };
                for i in from..n {
                    let k = node::key(&g, i);
                    if !below_upper(k, upper) {
                        return Ok(ScanBatch { rows, done: true });
                    }
                    rows.push((k.to_vec(), overflow::read_value(cx, self.id, &g, i)?));
                    if rows.len() >= max {
                        return Ok(ScanBatch { rows, done: false });
                    }
                }
            } else {
                let to = match upper {
                    Bound::Included(k) => node::search(&g, k).map_or_else(|i| i, |i| i + 1),
                    Bound::Excluded(k) => node::search(&g, k).unwrap_or_else(|i| i),
                    Bound::Unbounded => n,
                };
                for i in (0..to).rev() {
                    let k = node::key(&g, i);
                    if !above_lower(k, lower) {
                        return Ok(ScanBatch { rows, done: true });
                    }
                    rows.push((k.to_vec(), overflow::read_value(cx, self.id, &g, i)?));
                    if rows.len() >= max {
                        return Ok(ScanBatch { rows, done: false });
                    }
                }
            }
            let sib = if reverse {
                hdr::prev(&g)
            } else {
                hdr::next(&g)
            };
            if sib.is_none() {
                return Ok(ScanBatch { rows, done: true });
            }
            if !rows.is_empty() {
                return Ok(ScanBatch { rows, done: false });
            }
            // leaf coupling: latch the sibling before releasing this leaf
            let next = cx.pool.read(sib)?;
            self.check_node(cx, &next, sib, Some(0))?;
            self.guard_leaf(cx, sib, &next)?;
            g = next;
        }
    }
}
