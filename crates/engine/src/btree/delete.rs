//! delete: remove a key; free leaves that become empty (and internal pages left without
//! children), collapse a root with a single child, so deleted space is reused. Dropping a
//! table frees every page of its tree.

use super::overflow;
use super::{Ctx, Step, Tree, MAX_DEPTH};
use crate::error::Result;
use crate::mtr::{Mtr, Slot};
use crate::page::{self, hdr, node, PageType};
use crate::space::{self, HEADER_PAGE};
use crate::types::PageId;
use std::sync::atomic::Ordering;

impl Tree {
    /// Removes `key`; returns whether it was present (a delete the change buffer takes is
    /// assumed present: an index table's contract, ibuf.rs).
    pub fn delete(&self, cx: &Ctx<'_>, key: &[u8]) -> Result<bool> {
        let buffer = self.bufferable(cx, super::ibuf::Op::Delete);
        let emptied = self.with_merges(cx, || {
            let _smo = self.smo_read();
            let mut mtr = Mtr::new(cx.pool, cx.space);
            let Some(leaf) = self.leaf_for_write(cx, &mut mtr, key, buffer)? else {
                return Ok(Some(false)); // in the change buffer
            };
            let Ok(i) = node::search(mtr.peek(leaf), key) else {
                return Ok(None);
            };
            if let node::LeafValue::Overflow { len, first } = node::leaf_value(mtr.peek(leaf), i) {
                let hs = mtr.write(HEADER_PAGE)?;
                for s in overflow::latch_chain(&mut mtr, self.id, first, len)? {
                    space::free(&mut mtr, hs, s);
                }
            }
            mtr.change(leaf, |b, t| node::remove_noting(b, i, t));
            let emptied = node::nslots(mtr.peek(leaf)) == 0 && mtr.pid(leaf) != self.root;
            self.note_leaves(cx, &mtr);
            mtr.commit()?;
            Ok(Some(emptied))
        })?;
        match emptied {
            None => Ok(false),
            Some(emptied) => {
                if emptied {
                    self.reclaim_empty_leaf(cx, key)?;
                }
                Ok(true)
            }
        }
    }

    /// If the leaf for `key` is still empty, unlinks and frees it, then frees ancestors left
    /// without children and collapses the root (under the exclusive SMO latch).
    pub(crate) fn reclaim_empty_leaf(&self, cx: &Ctx<'_>, key: &[u8]) -> Result<()> {
        self.with_merges(cx, || {
            let _smo = self.smo_write();
            self.reclaim_empty_leaf_once(cx, key)
        })
    }

    fn reclaim_empty_leaf_once(&self, cx: &Ctx<'_>, key: &[u8]) -> Step<()> {
        let mut mtr = Mtr::new(cx.pool, cx.space);
        let path = self.latch_path(cx, &mut mtr, key)?;
        let leaf = path[path.len() - 1].0;
        if path.len() < 2 || node::nslots(mtr.peek(leaf)) > 0 {
            return Ok(()); // refilled meanwhile, or it is the root
        }
        // Latch everything first: siblings, header, and (for a collapse) the root's last child.
        let sib = self.latch_siblings(cx, &mut mtr, leaf)?;
        let hs = mtr.write(HEADER_PAGE)?;
        // Which levels lose their last child: the leaf, then each parent left with none.
        let mut depth = path.len() - 1;
        while depth > 1 && node::nslots(mtr.peek(path[depth - 1].0)) == 1 {
            depth -= 1;
        }
        // path[depth..] are freed; path[depth-1] loses slot path[depth-1].1
        let root_s = path[0].0;
        let remaining_root_slots = if depth == 1 {
            node::nslots(mtr.peek(root_s)) - 1
        } else {
            usize::MAX
        };
        let collapse_child = if remaining_root_slots == 1 {
            let idx = if path[0].1 == 0 { 1 } else { 0 };
            let cpid = node::child(mtr.peek(root_s), idx);
            let c = mtr.write(cpid)?;
            if hdr::level(mtr.peek(c)) == 0 {
                // its content moves into the root: its buffered changes must be in it first
                self.guard_leaf(cx, cpid, mtr.peek(c))?;
            }
            Some(c)
        } else {
            None
        };
        // All latched: now change.
        sib.unlink(&mut mtr);
        for k in (depth..path.len()).rev() {
            space::free(&mut mtr, hs, path[k].0);
            self.counters.pages_freed.fetch_add(1, Ordering::Relaxed);
        }
        let (ps_slot, ps_idx) = path[depth - 1];
        node::remove(mtr.pg(ps_slot), ps_idx);
        if let Some(c) = collapse_child {
            self.collapse_root(&mut mtr, root_s, c, hs);
        } else if node::nslots(mtr.peek(root_s)) == 0 {
            // the whole tree emptied under a root that had a single child: an empty leaf root
            page::init(mtr.pg(root_s), self.root, PageType::Leaf, self.id);
        }
        self.note_leaves(cx, &mtr);
        mtr.commit()?;
        Ok(())
    }

    /// If the leaf for `key` holds at most a quarter of a page and the neighbour that takes
    /// over its keys when it goes can hold its cells too, moves them there and frees the leaf,
    /// in one mtr under the exclusive SMO latch.
    ///
    /// Used on the change buffer's tree, where a merge deletes one target leaf's entries from
    /// the middle of a leaf that keeps others': without it leaves thin out but are freed only
    /// when emptied, and the tree's page count climbs while what it holds does not.
    pub(crate) fn merge_thin_leaf(&self, cx: &Ctx<'_>, key: &[u8]) -> Result<bool> {
        self.with_merges(cx, || {
            let _smo = self.smo_write();
            self.merge_thin_leaf_once(cx, key)
        })
    }

    fn merge_thin_leaf_once(&self, cx: &Ctx<'_>, key: &[u8]) -> Step<bool> {
        let mut mtr = Mtr::new(cx.pool, cx.space);
        let path = self.latch_path(cx, &mut mtr, key)?;
        if path.len() < 2 {
            return Ok(false); // the root
        }
        let leaf = path[path.len() - 1].0;
        let (parent, idx) = path[path.len() - 2];
        let (n, used) = {
            let b = mtr.peek(leaf);
            (node::nslots(b), node::used_space(b))
        };
        if n == 0 || used > cx.pool.page_size() / 4 {
            return Ok(false); // empty (reclaim_empty_leaf frees it) or refilled meanwhile
        }
        // The parent keeps at least two children (a root three: it never collapses here), so
        // only the leaf's slot goes. Keys route to the last slot at or below them, the first
        // slot taking everything below it: the leaf's keys go to its left neighbour, or to its
        // right one when it is the first child.
        let pn = node::nslots(mtr.peek(parent));
        if pn < if path.len() == 2 { 3 } else { 2 } {
            return Ok(false);
        }
        let sib = self.latch_siblings(cx, &mut mtr, leaf)?;
        let into_left = idx > 0;
        let heir = node::child(mtr.peek(parent), if into_left { idx - 1 } else { 1 });
        let (linked, heir_slot) = if into_left {
            (sib.prev, sib.prev_slot)
        } else {
            (sib.next, sib.next_slot)
        };
        let Some(heir_s) = heir_slot.filter(|_| heir == linked) else {
            return Err(crate::error::Error::corrupt(
                cx.pool.file().name(),
                mtr.pid(leaf).0,
                "a leaf's sibling links disagree with its parent",
            )
            .into());
        };
        if node::free_space(mtr.peek(heir_s)) < used {
            return Ok(false);
        }
        let hs = mtr.write(HEADER_PAGE)?;
        // All latched: now change. The heir's free bytes made contiguous first, so the copies
        // below do not compact it (a compaction is logged as such, not as moved bytes).
        if hdr::frag_bytes(mtr.peek(heir_s)) > 0 {
            mtr.compact(heir_s);
        }
        {
            let (src, dst) = mtr.pg2(leaf, heir_s);
            let at = if into_left { node::nslots(dst) } else { 0 };
            for i in 0..n {
                if !node::copy_cell(src, i, dst, at + i) {
                    unreachable!("the heir's free space was checked for the leaf's cells");
                }
            }
        }
        sib.unlink(&mut mtr);
        space::free(&mut mtr, hs, path[path.len() - 1].0);
        self.counters.pages_freed.fetch_add(1, Ordering::Relaxed);
        node::remove(mtr.pg(parent), idx);
        self.note_leaves(cx, &mtr);
        mtr.commit()?;
        Ok(true)
    }

    /// Latches the siblings of held leaf `leaf`, left then right (the leaf chain's order, the
    /// same in every SMO that relinks leaves).
    fn latch_siblings(&self, cx: &Ctx<'_>, mtr: &mut Mtr<'_>, leaf: Slot) -> Step<Siblings> {
        let (prev, next) = (hdr::prev(mtr.peek(leaf)), hdr::next(mtr.peek(leaf)));
        let mut latch = |pid: PageId| -> Step<Option<Slot>> {
            if pid.is_none() {
                return Ok(None);
            }
            let s = mtr.write(pid)?;
            self.guard_leaf(cx, pid, mtr.peek(s))?;
            Ok(Some(s))
        };
        let prev_slot = latch(prev)?;
        let next_slot = latch(next)?;
        Ok(Siblings {
            prev,
            next,
            prev_slot,
            next_slot,
        })
    }

    /// The root has a single child left: pull the child's content up into the root.
    fn collapse_root(&self, mtr: &mut Mtr<'_>, root: Slot, child: Slot, hs: Slot) {
        let (rb, cb) = mtr.pg2(root, child);
        let lsn = hdr::lsn(rb);
        rb.copy_from_slice(cb);
        page::set_page_no(rb, self.root);
        hdr::set_lsn(rb, lsn);
        // the only child of the root has no siblings at its level
        hdr::set_next(rb, PageId::NONE);
        hdr::set_prev(rb, PageId::NONE);
        space::free(mtr, hs, child);
        self.counters.pages_freed.fetch_add(1, Ordering::Relaxed);
        self.counters.root_collapses.fetch_add(1, Ordering::Relaxed);
    }

    /// Frees every page of the tree, root included. The caller has marked the tree dropped and
    /// logged the drop's intent (catalog.rs); this takes the exclusive SMO latch to wait out
    /// readers.
    ///
    /// Pages are freed deepest level first, the root last, one page (with its overflow chains)
    /// per mtr: at every mtr boundary each page not yet freed is reachable from the root through
    /// pages not yet freed, so a crash leaves a tree this can free again. `after_crash` is that
    /// second run (recovery completing the drop): a page met that is not a tree page of this
    /// table was freed before the crash (and is free, or reused by another table since; table
    /// ids are never reused) and is skipped instead of refused.
    pub fn free_all(&self, cx: &Ctx<'_>, after_crash: bool) -> Result<u64> {
        let _smo = self.smo_write();
        let mut level = vec![self.root];
        // (page, pages its mtr frees), level by level from the root
        let mut pages = Vec::new();
        let page_size = cx.pool.page_size();
        for _ in 0..MAX_DEPTH {
            if level.is_empty() {
                break;
            }
            let mut below = Vec::new();
            if after_crash {
                let mut kept = Vec::with_capacity(level.len());
                for pid in level {
                    if self.owns(cx, pid)? {
                        kept.push(pid);
                    }
                }
                level = kept;
            }
            for &pid in &level {
                let g = cx.pool.read(pid)?;
                self.check_node(cx, &g, pid, None)?;
                if hdr::level(&g) > 0 {
                    below.extend((0..node::nslots(&g)).map(|i| node::child(&g, i)));
                }
                // the pages its mtr will free: itself and its values' overflow chains
                let chains: usize = overflow_chains(&g)
                    .iter()
                    .map(|&(_, len)| overflow::pages_for(page_size, len))
                    .sum();
                pages.push((pid, 1 + chains as u64));
            }
            level = below;
        }
        let mut freed = 0;
        // leaves first (deepest pages are last in `pages`), the root last
        for &(pid, to_free) in pages.iter().rev() {
            // Each mtr frees the page and its overflow chains, and changes the file header:
            // room for that is taken before it latches anything (`LogSpace::with_room`). The
            // tree is unreachable (dropped), so the chains counted in the walk are the ones
            // freed here.
            let redo = crate::mtr::redo_bound(page_size, to_free + 1);
            cx.space.with_room(redo, || {
                let mut mtr = Mtr::new(cx.pool, cx.space);
                let s = mtr.write(pid)?;
                let hs = mtr.write(HEADER_PAGE)?;
                for (first, len) in overflow_chains(mtr.peek(s)) {
                    for c in overflow::latch_chain(&mut mtr, self.id, first, len)? {
                        space::free(&mut mtr, hs, c);
                        freed += 1;
                    }
                }
                space::free(&mut mtr, hs, s);
                freed += 1;
                mtr.commit().map(|_| ())
            })?;
        }
        Ok(freed)
    }

    /// Whether page `pid` is a tree page of this table.
    fn owns(&self, cx: &Ctx<'_>, pid: PageId) -> Result<bool> {
        let g = cx.pool.read(pid)?;
        Ok(matches!(
            hdr::page_type(&g),
            Some(PageType::Leaf) | Some(PageType::Internal)
        ) && hdr::owner(&g) == self.id)
    }
}

/// The overflow chains (first page, value length) a leaf's values point to; none for an
/// internal page.
fn overflow_chains(b: &[u8]) -> Vec<(PageId, usize)> {
    if hdr::level(b) != 0 {
        return Vec::new();
    }
    (0..node::nslots(b))
        .filter_map(|i| match node::leaf_value(b, i) {
            node::LeafValue::Overflow { len, first } => Some((first, len)),
            _ => None,
        })
        .collect()
}

/// A leaf's siblings, latched ([`Tree::latch_siblings`]).
struct Siblings {
    prev: PageId,
    next: PageId,
    prev_slot: Option<Slot>,
    next_slot: Option<Slot>,
}

impl Siblings {
    /// Links the siblings to each other, leaving the leaf between them out of the chain.
    fn unlink(&self, mtr: &mut Mtr<'_>) {
        if let Some(p) = self.prev_slot {
            hdr::set_next(mtr.pg(p), self.next);
        }
        if let Some(n) = self.next_slot {
            hdr::set_prev(mtr.pg(n), self.prev);
        }
    }
}
