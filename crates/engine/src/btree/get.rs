//! get: the point lookup, by the adaptive hash index's guess (ahi.rs) when it has one and
//! the guess holds, else by a descent from the root.
//!
//! Both paths hold the tree's SMO latch shared and one leaf latched shared when they read
//! the value, and once they have the leaf and the key's slot they do the same thing
//! (`guard_leaf`, then `overflow::read_value`), so a get answers the same whichever path it
//! took. Never: answer from a guessed page that fails a check below, or latch the guessed
//! leaf while holding another page latch.

use super::ahi::{self, AdaptiveHash, Guess};
use super::{overflow, Ctx, LeafHint, Step, Target, Tree};
use crate::page::{hdr, node, PageType};
use crate::types::{FrameId, PageId};
use std::sync::atomic::Ordering;

impl Tree {
    /// Point lookup.
    pub fn get(&self, cx: &Ctx<'_>, key: &[u8]) -> crate::error::Result<Option<Vec<u8>>> {
        Ok(self.lookup::<false>(cx, key)?.0)
    }

    /// Point lookup that also says where the key's leaf is, for a write of the same key that
    /// follows (`Tree::put_hinted`).
    pub(crate) fn get_hinted(
        &self,
        cx: &Ctx<'_>,
        key: &[u8],
    ) -> crate::error::Result<(Option<Vec<u8>>, Option<LeafHint>)> {
        self.lookup::<true>(cx, key)
    }

    /// The lookup of both: a constant `HINT`, so a plain get compiles without the hint.
    fn lookup<const HINT: bool>(
        &self,
        cx: &Ctx<'_>,
        key: &[u8],
    ) -> crate::error::Result<(Option<Vec<u8>>, Option<LeafHint>)> {
        let ahi = cx.ahi.map(|a| (a, ahi::hash(self.id, key)));
        let hint_for = |pid| HINT.then(|| self.hint_for(pid));
        self.with_merges(cx, || {
            let _smo = self.smo_read();
            let guess = ahi.and_then(|(a, h)| a.lookup(h).map(|g| (a, h, g)));
            match (ahi, guess) {
                (Some((a, _)), None) => {
                    a.counters.misses.fetch_add(1, Ordering::Relaxed);
                }
                (_, Some((a, h, g))) => match self.get_guessed(cx, a, h, g, key)? {
                    Some((v, pid)) => {
                        a.counters.hits.fetch_add(1, Ordering::Relaxed);
                        return Ok((Some(v), hint_for(pid)));
                    }
                    None => {
                        a.counters.failed_guesses.fetch_add(1, Ordering::Relaxed);
                        a.forget(h, g);
                    }
                },
                (None, None) => {}
            }
            let leaf = self.descend_read(cx, Target::Key(key))?;
            let pid = leaf.page_id();
            match node::search(&leaf, key) {
                Ok(i) => {
                    // a root leaf is reached in one fetch already: no entry for it
                    if let (Some((a, h)), false) = (ahi, pid == self.root) {
                        a.record(h, leaf.frame_id().0, i, node::cell_offset(&leaf, i));
                    }
                    let v = overflow::read_value(cx, self.id, &leaf, i)?;
                    Ok((Some(v), hint_for(pid)))
                }
                Err(_) => Ok((None, hint_for(pid))),
            }
        })
    }

    /// The value of `key` read from the page in the frame `g` guesses, when that page is,
    /// now, the leaf of this tree that holds `key`; None when it is not (the caller
    /// descends). The caller holds the SMO latch shared, and no page latch.
    ///
    /// Why a page that passes these checks is the key's leaf, whatever happened since the
    /// guess was recorded:
    /// - `read_frame` latches the frame only while the page table maps a page to it (B1' in
    ///   buffer/mod.rs), and the pin it holds keeps the page there: the bytes read are the
    ///   pool's current copy of that page, whichever page it is. A frame that was evicted is
    ///   refused; one evicted and taken since by another page holds that page, which the
    ///   checks below judge as they would any page. (Which page the guess was recorded for
    ///   does not matter: only what the frame holds now.)
    /// - The SMO latch, shared, excludes every structure modification (split, merge, root
    ///   growth or collapse, freeing, a drop's `free_all`); each runs whole under it
    ///   exclusive, unlinking and freeing pages in the same hold. So while it is held, every
    ///   page whose header says "leaf of tree `self.id`" is a leaf reachable in this tree,
    ///   and the tree holds each key in one leaf only.
    /// - The leaf's shared latch excludes a change to it in progress (an optimistic put or
    ///   delete, a change-buffer merge): the page read is a whole state of the leaf.
    /// - A page freed since (by a delete that emptied it, a merge, a drop) is formatted
    ///   `Free` with owner 0: the type check fails. Reused since by another tree (a new
    ///   table, the catalog, the change buffer), or as an overflow or internal page: the
    ///   type, level or owner check fails. Reused by this tree as another leaf: it holds
    ///   `key` only if the tree holds `key` there.
    /// - The key moved by a split or merge, or deleted: the slot no longer holds it, and the
    ///   search of the page does not find it.
    /// - The hash's tag matched another key (a collision): the same key compare fails.
    /// - A leaf with buffered changes (an index table's, btr/ibuf.rs): `guard_leaf` stops
    ///   with `Merge` as it does on the descent, and the get starts again after the merge.
    /// - MVCC: the tree answers the newest committed value on both paths; the read view is
    ///   applied above the tree (mvcc.rs) to whatever this returns.
    /// - The frame holds no page now (evicted and free, or a read into it failed): no
    ///   page is read at all, and the descent decides.
    ///
    /// A slot hint past the page's slots, or pointing at another key, costs the search of
    /// the page, and the entry is given the slot found.
    fn get_guessed(
        &self,
        cx: &Ctx<'_>,
        a: &AdaptiveHash,
        h: u64,
        g: Guess,
        key: &[u8],
    ) -> Step<Option<(Vec<u8>, PageId)>> {
        if g.cell != 0 {
            // the cell's first two lines: its key, and the value after it
            let at = [node::slot_pos(g.slot), g.cell, g.cell + 64];
            cx.pool.prefetch_guess(FrameId(g.frame), at);
        }
        let Some(leaf) = cx.pool.read_frame(FrameId(g.frame), node::slot_pos(g.slot)) else {
            return Ok(None);
        };
        let pid = leaf.page_id();
        let b: &[u8] = &leaf;
        if hdr::page_type(b) != Some(PageType::Leaf) || hdr::level(b) != 0 {
            return Ok(None);
        }
        if hdr::owner(b) != self.id {
            return Ok(None);
        }
        self.guard_leaf(cx, pid, b)?;
        let slot = if g.slot < node::nslots(b) && node::key(b, g.slot) == key {
            if node::cell_offset(b, g.slot) / 64 != g.cell / 64 {
                // the page was reorganised since: the cell's new place, for the next get
                a.record(h, g.frame, g.slot, node::cell_offset(b, g.slot));
            }
            g.slot
        } else {
            match node::search(b, key) {
                Ok(i) => {
                    a.record(h, g.frame, i, node::cell_offset(b, i));
                    i
                }
                Err(_) => return Ok(None),
            }
        };
        Ok(Some((overflow::read_value(cx, self.id, b, slot)?, pid)))
    }
}
