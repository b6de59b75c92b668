//! insert: put (insert or replace), leaf and internal splits, root growth.
//!
//! A split moves the upper half of a node (by bytes) to a new right sibling; when the new key
//! goes to the very end of the node (sequential keys: auto-increment ids, TPC-C order ids) the
//! new sibling receives only the new record, so append-only tables fill their pages instead of
//! leaving them half empty. The root never moves: root growth copies the root into a new child
//! and turns the root into an internal page above it.

use super::overflow;
use super::{Ctx, LeafHint, Step, Tree, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::mtr::{Mtr, Slot};
use crate::page::{self, hdr, node, PageType};
use crate::space::{self, HEADER_PAGE};
use crate::types::PageId;
use std::sync::atomic::Ordering;

/// A record to place in a node.
enum Cell<'k> {
    Leaf { key: &'k [u8], value: LeafVal<'k> },
    Internal { key: Vec<u8>, child: PageId },
}

#[derive(Clone, Copy)]
enum LeafVal<'v> {
    Inline(&'v [u8]),
    Overflow { len: usize, first: PageId },
}

/// Places cell `c` at `pos` of held node page `s`, compacting it first through the mtr when
/// the cell fits only that way (so the compaction is logged as one, not as moved bytes).
fn try_place(mtr: &mut Mtr<'_>, s: Slot, pos: usize, c: &Cell<'_>) -> bool {
    let len = node::CELL_HEADER
        + match c {
            Cell::Leaf {
                key,
                value: LeafVal::Inline(v),
            } => key.len() + v.len(),
            Cell::Leaf {
                key,
                value: LeafVal::Overflow { .. },
            } => key.len() + 4,
            Cell::Internal { key, .. } => key.len(),
        };
    mtr.make_contiguous(s, len);
    mtr.change(s, |b, t| match c {
        Cell::Leaf {
            key,
            value: LeafVal::Inline(v),
        } => node::insert_leaf_inline_noting(b, pos, key, v, t),
        Cell::Leaf {
            key,
            value: LeafVal::Overflow { len, first },
        } => node::insert_leaf_overflow_noting(b, pos, key, *len, *first, t),
        Cell::Internal { key, child } => node::insert_noting(b, pos, key, child.0, &[], t),
    })
}

/// Where an optimistic put finds its leaf: a descent (with the change-buffer operation a
/// key-set tree may buffer instead), or the leaf a read just found.
#[derive(Clone, Copy)]
enum Start {
    Descend(Option<super::ibuf::Op>),
    Hinted(LeafHint),
}

/// What replacing/inserting `key` in a leaf needs.
struct LeafPlan {
    pos: usize,
    old: Option<usize>,
    old_chain: Option<(PageId, usize)>,
    fits: bool,
}

fn plan_leaf(b: &[u8], key: &[u8], new_cell: usize) -> LeafPlan {
    let (pos, old) = match node::search(b, key) {
        Ok(i) => (i, Some(i)),
        Err(i) => (i, None),
    };
    let freed = old.map_or(0, |i| node::cell_len(b, i) + node::SLOT_SIZE);
    let old_chain = old.and_then(|i| match node::leaf_value(b, i) {
        node::LeafValue::Overflow { len, first } => Some((first, len)),
        node::LeafValue::Inline(_) => None,
    });
    LeafPlan {
        pos,
        old,
        old_chain,
        fits: node::free_space(b) + freed >= new_cell + node::SLOT_SIZE,
    }
}

impl Tree {
    /// Inserts or replaces `key`. The caller has checked the key and value limits.
    pub fn put(&self, cx: &Ctx<'_>, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_hinted(cx, key, value, None)
    }

    /// [`Tree::put`] that starts from the leaf `hint` names, when it still holds (see
    /// [`LeafHint`]), instead of a descent from the root.
    pub(crate) fn put_hinted(
        &self,
        cx: &Ctx<'_>,
        key: &[u8],
        value: &[u8],
        hint: Option<LeafHint>,
    ) -> Result<()> {
        let ps = cx.pool.page_size();
        let inline = node::value_fits_inline(ps, key.len(), value.len());
        let new_cell = node::CELL_HEADER + key.len() + if inline { value.len() } else { 4 };
        // a key-set tree's put may go to the change buffer; others may start at a hint
        let start = match self.bufferable(cx, super::ibuf::Op::Insert) {
            Some(op) => Start::Descend(Some(op)),
            None => hint.map_or(Start::Descend(None), Start::Hinted),
        };
        self.with_merges(cx, || {
            {
                let _smo = self.smo_read();
                if self.put_optimistic(cx, key, value, inline, new_cell, start)? {
                    return Ok(());
                }
            }
            let _smo = self.smo_write();
            self.put_pessimistic(cx, key, value, inline, new_cell)
        })
    }

    /// Puts a run of a commit's writes whose reads all found their keys in the leaf `hint`
    /// names (`run`: keys ascending, values inline) in one mtr: one latch of that leaf, one
    /// log group, one stamp, where one put each took the leaf's latch, built an mtr and
    /// appended a group of its own. TPC-C writes such runs: a New-Order's order lines are
    /// consecutive keys of one leaf, and a Delivery updates each order's lines. Stops at the
    /// first put that would not fit the leaf as it then is, or whose value (new or old) is not
    /// inline; returns how many were applied, from the first on (0 when the hint no longer
    /// holds). The caller puts the rest one by one, where a split may follow.
    ///
    /// Sound for the same reason as a single hinted put: with the SMO epoch the hint's, no
    /// structure change has run since the reads, so every key of the run still belongs to that
    /// leaf, and changes inside the leaf do not move any key's range. Not for a key-set tree
    /// (its writes may go to the change buffer instead, and have no hint).
    pub(crate) fn put_run_hinted(
        &self,
        cx: &Ctx<'_>,
        run: &[(&[u8], &[u8])],
        hint: LeafHint,
    ) -> Result<usize> {
        if self.key_set || run.is_empty() {
            return Ok(0);
        }
        let ps = cx.pool.page_size();
        self.with_merges(cx, || {
            let _smo = self.smo_read();
            let mut mtr = Mtr::new(cx.pool, cx.space);
            let Some(leaf) = self.hinted_leaf(cx, &mut mtr, hint)? else {
                return Ok(0);
            };
            let mut done = 0;
            for &(key, value) in run {
                if !node::value_fits_inline(ps, key.len(), value.len()) {
                    break;
                }
                let new_cell = node::CELL_HEADER + key.len() + value.len();
                let plan = plan_leaf(mtr.peek(leaf), key, new_cell);
                if !plan.fits || plan.old_chain.is_some() {
                    break;
                }
                self.write_into_leaf(&mut mtr, leaf, key, value, true, &plan)?;
                done += 1;
            }
            // `hinted_leaf` counted one put
            match done {
                0 => self.counters.leaf_hint_puts.fetch_sub(1, Ordering::Relaxed),
                n => self
                    .counters
                    .leaf_hint_puts
                    .fetch_add(n as u64 - 1, Ordering::Relaxed),
            };
            mtr.commit()?;
            Ok(done)
        })
    }

    /// X-latches the leaf for `key` under the shared SMO latch (S latches above it, one at a
    /// time; the root's level cannot change while the SMO latch is held shared). With `buffer`
    /// (a key-set tree, ibuf.rs) a leaf that is not in the buffer pool may take the change in
    /// the change buffer instead: then nothing is latched and None is returned. The mtr holds
    /// nothing yet.
    pub(crate) fn leaf_for_write(
        &self,
        cx: &Ctx<'_>,
        mtr: &mut Mtr<'_>,
        key: &[u8],
        buffer: Option<super::ibuf::Op>,
    ) -> Step<Option<Slot>> {
        let mut pid = self.root;
        let mut level = {
            let g = cx.pool.read(pid)?;
            self.check_node(cx, &g, pid, None)?;
            hdr::level(&g)
        };
        for _ in 0..MAX_DEPTH {
            if level == 0 {
                if let (Some(op), Some(ib)) = (buffer, cx.ibuf) {
                    if self.buffer_at(cx, ib, op, key, pid)? {
                        return Ok(None);
                    }
                }
                let s = mtr.write(pid)?;
                self.check_node(cx, mtr.peek(s), pid, Some(0))?;
                self.guard_leaf(cx, pid, mtr.peek(s))?;
                return Ok(Some(s));
            }
            let g = cx.pool.read(pid)?;
            self.check_node(cx, &g, pid, Some(level))?;
            pid = node::child(&g, node::child_index(&g, key));
            level -= 1;
        }
        Err(Error::corrupt(cx.pool.file().name(), pid.0, "tree too deep").into())
    }

    /// The leaf `hint` names, X-latched, when the tree's SMO epoch is still the hint's (the
    /// caller holds the SMO latch shared, so it cannot change while the leaf is used) and the
    /// page passes the leaf checks; None (nothing latched) otherwise, and the caller descends.
    fn hinted_leaf(&self, cx: &Ctx<'_>, mtr: &mut Mtr<'_>, hint: LeafHint) -> Step<Option<Slot>> {
        if self.hint_for(hint.page).epoch != hint.epoch {
            return Ok(None);
        }
        let s = mtr.write(hint.page)?;
        if self
            .check_node(cx, mtr.peek(s), hint.page, Some(0))
            .is_err()
        {
            // cannot happen while the epoch holds; the descent decides what the tree is
            mtr.release(s);
            return Ok(None);
        }
        self.guard_leaf(cx, hint.page, mtr.peek(s))?;
        self.counters.leaf_hint_puts.fetch_add(1, Ordering::Relaxed);
        Ok(Some(s))
    }

    /// Under the exclusive SMO latch: X-latches every page from the root down to the leaf for
    /// `key`, checking levels on the way. Returns (slot, index of the child taken) per level,
    /// root first (the leaf's index is 0).
    pub(crate) fn latch_path(
        &self,
        cx: &Ctx<'_>,
        mtr: &mut Mtr<'_>,
        key: &[u8],
    ) -> Step<Vec<(Slot, usize)>> {
        let mut path: Vec<(Slot, usize)> = Vec::new();
        let mut pid = self.root;
        let mut level = None;
        loop {
            if path.len() >= MAX_DEPTH {
                return Err(Error::corrupt(cx.pool.file().name(), pid.0, "tree too deep").into());
            }
            let s = mtr.write(pid)?;
            self.check_node(cx, mtr.peek(s), pid, level)?;
            let b = mtr.peek(s);
            let l = hdr::level(b);
            if l == 0 {
                self.guard_leaf(cx, pid, b)?;
                path.push((s, 0));
                return Ok(path);
            }
            let i = node::child_index(b, key);
            path.push((s, i));
            level = Some(l - 1);
            pid = node::child(b, i);
        }
    }

    fn put_optimistic(
        &self,
        cx: &Ctx<'_>,
        key: &[u8],
        value: &[u8],
        inline: bool,
        new_cell: usize,
        start: Start,
    ) -> Step<bool> {
        let mut mtr = Mtr::new(cx.pool, cx.space);
        let (hinted, buffer) = match start {
            Start::Hinted(h) => (self.hinted_leaf(cx, &mut mtr, h)?, None),
            Start::Descend(buffer) => (None, buffer),
        };
        let leaf = match hinted {
            Some(s) => s,
            None => match self.leaf_for_write(cx, &mut mtr, key, buffer)? {
                Some(s) => s,
                None => return Ok(true), // in the change buffer
            },
        };
        let plan = plan_leaf(mtr.peek(leaf), key, new_cell);
        if !plan.fits {
            return Ok(false);
        }
        self.write_into_leaf(&mut mtr, leaf, key, value, inline, &plan)?;
        self.note_leaves(cx, &mtr);
        mtr.commit()?;
        Ok(true)
    }

    /// Replaces/inserts in a leaf known to have room; handles overflow chains.
    fn write_into_leaf(
        &self,
        mtr: &mut Mtr<'_>,
        leaf: Slot,
        key: &[u8],
        value: &[u8],
        inline: bool,
        plan: &LeafPlan,
    ) -> Result<()> {
        if let (Some(i), true, None) = (plan.old, inline, plan.old_chain) {
            // same-length replacement (most updates: rows of fixed width): in place, so the
            // redo holds only the bytes that changed, not a moved cell and shifted slots
            if matches!(node::leaf_value(mtr.peek(leaf), i), node::LeafValue::Inline(v) if v.len() == value.len())
            {
                let done = mtr.change(leaf, |b, t| {
                    node::overwrite_inline_value_noting(b, i, value, t)
                });
                debug_assert!(done);
                return Ok(());
            }
        }
        let val = self.prepare_value(mtr, value, inline, plan)?;
        if let Some(i) = plan.old {
            mtr.change(leaf, |b, t| node::remove_noting(b, i, t));
        }
        let placed = try_place(mtr, leaf, plan.pos, &Cell::Leaf { key, value: val });
        assert!(placed, "leaf had room by plan");
        Ok(())
    }

    /// Frees the old overflow chain and writes the new one (all latched/allocated first).
    fn prepare_value<'v>(
        &self,
        mtr: &mut Mtr<'_>,
        value: &'v [u8],
        inline: bool,
        plan: &LeafPlan,
    ) -> Result<LeafVal<'v>> {
        if inline && plan.old_chain.is_none() {
            return Ok(LeafVal::Inline(value));
        }
        let hs = match mtr.find(HEADER_PAGE) {
            Some(s) => s,
            None => mtr.write(HEADER_PAGE)?,
        };
        let old = match plan.old_chain {
            Some((first, len)) => overflow::latch_chain(mtr, self.id, first, len)?,
            None => Vec::new(),
        };
        let val = if inline {
            LeafVal::Inline(value)
        } else {
            LeafVal::Overflow {
                len: value.len(),
                first: overflow::write_chain(mtr, hs, self.id, value)?,
            }
        };
        for s in old {
            space::free(mtr, hs, s);
        }
        Ok(val)
    }

    fn put_pessimistic(
        &self,
        cx: &Ctx<'_>,
        key: &[u8],
        value: &[u8],
        inline: bool,
        new_cell: usize,
    ) -> Step<()> {
        let ps = cx.pool.page_size();
        let mut mtr = Mtr::new(cx.pool, cx.space);
        let path = self.latch_path(cx, &mut mtr, key)?;
        let leaf = path[path.len() - 1].0;
        let plan = plan_leaf(mtr.peek(leaf), key, new_cell);
        if plan.fits {
            // another thread split this leaf while we waited for the SMO latch
            self.write_into_leaf(&mut mtr, leaf, key, value, inline, &plan)?;
            self.note_leaves(cx, &mtr);
            mtr.commit()?;
            return Ok(());
        }
        // Latch and allocate everything the split cascade may touch before changing anything.
        // The right sibling first: it may have buffered changes to merge (nothing is changed
        // yet), and a merge must not wait behind the header page this mtr would hold.
        let right_sib = hdr::next(mtr.peek(leaf));
        let sib = if right_sib.is_none() {
            None
        } else {
            let s = mtr.write(right_sib)?;
            self.guard_leaf(cx, right_sib, mtr.peek(s))?;
            Some(s)
        };
        let hs = mtr.write(HEADER_PAGE)?;
        let sep_max = node::CELL_HEADER + node::max_key_len(ps) + node::SLOT_SIZE;
        let mut splits = 1;
        for &(s, _) in path[..path.len() - 1].iter().rev() {
            if node::free_space(mtr.peek(s)) >= sep_max {
                break;
            }
            splits += 1;
        }
        if splits == path.len() {
            splits += 1; // root growth needs the pushed-down copy too
        }
        let mut spare = Vec::with_capacity(splits);
        for _ in 0..splits {
            spare.push(space::allocate(&mut mtr, hs, PageType::Leaf, self.id)?);
        }
        let val = self.prepare_value(&mut mtr, value, inline, &plan)?;
        if let Some(i) = plan.old {
            node::remove(mtr.pg(leaf), i);
        }
        let mut st = SplitState {
            path,
            spare,
            hs,
            sib,
        };
        let depth = st.path.len() - 1;
        self.place(
            &mut mtr,
            &mut st,
            depth,
            plan.pos,
            Cell::Leaf { key, value: val },
        )?;
        for s in std::mem::take(&mut st.spare) {
            space::free(&mut mtr, hs, s);
        }
        self.note_leaves(cx, &mtr);
        mtr.commit()?;
        Ok(())
    }

    /// Places `cell` at `pos` of the node at `depth`, splitting upward as needed.
    fn place(
        &self,
        mtr: &mut Mtr<'_>,
        st: &mut SplitState,
        depth: usize,
        pos: usize,
        cell: Cell<'_>,
    ) -> Result<()> {
        let s = st.path[depth].0;
        if try_place(mtr, s, pos, &cell) {
            return Ok(());
        }
        if depth == 0 {
            let child = self.grow_root(mtr, st)?;
            st.path.insert(0, (s, 0));
            st.path[1].0 = child;
            return self.place(mtr, st, 1, pos, cell);
        }
        let r = st.take_spare(mtr, self.id)?;
        let (sep, into_right, rpos) = self.split_node(mtr, st, s, r, pos)?;
        let target = if into_right { r } else { s };
        let placed = try_place(mtr, target, rpos, &cell);
        assert!(placed, "half of a split page has room for one cell");
        // the separator is the right page's first key (after placing, it may be the new key)
        let sep = if into_right && rpos == 0 {
            node::key(mtr.peek(r), 0).to_vec()
        } else {
            sep
        };
        let rpid = mtr.pid(r);
        let ppos = st.path[depth - 1].1 + 1;
        self.place(
            mtr,
            st,
            depth - 1,
            ppos,
            Cell::Internal {
                key: sep,
                child: rpid,
            },
        )
    }

    /// Moves the upper part of node `s` into the empty spare `r`. Returns the separator, whether
    /// the new cell goes right, and its position there.
    fn split_node(
        &self,
        mtr: &mut Mtr<'_>,
        st: &mut SplitState,
        s: Slot,
        r: Slot,
        pos: usize,
    ) -> Result<(Vec<u8>, bool, usize)> {
        let (l_pid, r_pid) = (mtr.pid(s), mtr.pid(r));
        let b = mtr.peek(s);
        let n = node::nslots(b);
        let level = hdr::level(b);
        let is_leaf = level == 0;
        let sp = if pos == n { n } else { node::split_point(b) };
        let old_next = hdr::next(b);
        {
            let (lb, rb) = mtr.pg2(s, r);
            page::init(
                rb,
                r_pid,
                if is_leaf {
                    PageType::Leaf
                } else {
                    PageType::Internal
                },
                self.id,
            );
            hdr::set_level(rb, level);
            for (j, i) in (sp..n).enumerate() {
                let ok = node::copy_cell(lb, i, rb, j);
                assert!(ok, "moved cells fit an empty page");
            }
            node::truncate(lb, sp);
            if is_leaf {
                hdr::set_next(rb, old_next);
                hdr::set_prev(rb, l_pid);
                hdr::set_next(lb, r_pid);
            }
        }
        mtr.compact(s);
        if is_leaf && !old_next.is_none() {
            let sib = match st.sib.take() {
                Some(x) if mtr.pid(x) == old_next => x,
                _ => mtr.write(old_next)?,
            };
            hdr::set_prev(mtr.pg(sib), r_pid);
        }
        let sep = if sp < n {
            node::key(mtr.peek(r), 0).to_vec()
        } else {
            Vec::new()
        };
        let into_right = pos >= sp;
        let rpos = if into_right { pos - sp } else { pos };
        self.counters.page_splits.fetch_add(1, Ordering::Relaxed);
        Ok((sep, into_right, rpos))
    }

    /// Root growth: copy the root into a spare child; the root becomes internal above it.
    fn grow_root(&self, mtr: &mut Mtr<'_>, st: &mut SplitState) -> Result<Slot> {
        let root = st.path[0].0;
        let c = st.take_spare(mtr, self.id)?;
        let c_pid = mtr.pid(c);
        let (rb, cb) = mtr.pg2(root, c);
        let lsn = hdr::lsn(cb);
        cb.copy_from_slice(rb);
        page::set_page_no(cb, c_pid);
        hdr::set_lsn(cb, lsn);
        let level = hdr::level(cb);
        page::init(rb, self.root, PageType::Internal, self.id);
        hdr::set_level(rb, level + 1);
        let ok = node::insert(rb, 0, &[], c_pid.0, &[]);
        assert!(ok, "empty root has room");
        self.counters.root_growths.fetch_add(1, Ordering::Relaxed);
        Ok(c)
    }
}

struct SplitState {
    path: Vec<(Slot, usize)>,
    spare: Vec<Slot>,
    hs: Slot,
    sib: Option<Slot>,
}

impl SplitState {
    fn take_spare(&mut self, mtr: &mut Mtr<'_>, owner: u32) -> Result<Slot> {
        match self.spare.pop() {
            Some(s) => Ok(s),
            // The estimate was short (a separator longer than expected): allocate now. This can
            // only fail on I/O, after changes began; the mtr then commits what it changed.
            None => space::allocate(mtr, self.hs, PageType::Leaf, owner),
        }
    }
}
