//! btree: one B+tree per table over buffer-pool pages.
//!
//! Concurrency (InnoDB's index->lock scheme, before 8.0's SX refinements):
//! - Every operation holds the tree's SMO latch: shared for reads, scans and changes confined
//!   to one leaf; exclusive for structure modifications (splits, root growth, freeing emptied
//!   pages, root collapse). Internal pages change only under the exclusive SMO latch, so a
//!   shared holder descends without latch coupling: it S-latches one page at a time.
//! - A change first tries the optimistic path (SMO shared, X latch on the leaf only). When the
//!   leaf cannot absorb it, it releases everything and retries under the exclusive SMO latch
//!   with X latches on the whole path.
//! - Under the shared SMO latch a thread holds at most two leaf latches, always moving in one
//!   direction of a scan; splits that link siblings run under the exclusive SMO latch, so leaf
//!   coupling cannot deadlock.
//! - An mtr latches every page it may change (and allocates spare pages) before changing the
//!   first one (see mtr.rs), so I/O errors abort with nothing changed.
//!
//! - Key-set trees (index tables, ibuf.rs) take part in the change buffer: every path that
//!   latches one of their leaves calls `Tree::guard_leaf` before it uses the page, and a
//!   leaf with buffered changes makes the operation let go of every latch, merge them
//!   (`Tree::merge_leaf`) and start again (`Stop::Merge`, `Tree::with_merges`).
//!
//! Never: change an internal page under the shared SMO latch; keep a page latch across calls.

pub mod ahi;
mod delete;
mod get;
pub mod ibuf;
mod insert;
mod overflow;
mod scan;

pub use ahi::{AdaptiveHash, AdaptiveHashCounts};
pub use ibuf::{ChangeBuffer, ChangeBufferCounts, ChangeBuffering};
pub use scan::ScanBatch;

/// Overflow pages needed for a value of `len` bytes.
pub fn overflow_pages_for(page_size: usize, len: usize) -> usize {
    overflow::pages_for(page_size, len)
}

use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::page::{hdr, node, PageType};
use crate::types::PageId;
use crossbeam::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

/// Deeper than this is corruption (a 4 KiB page tree of depth 32 would hold more than 2^64 keys).
pub const MAX_DEPTH: usize = 32;

/// What an operation needs from the engine below the tree.
pub struct Ctx<'a> {
    pub pool: &'a BufferPool,
    pub space: &'a crate::wal::LogSpace,
    /// The change buffer (None while a database opens, before it is loaded, and in tools).
    pub ibuf: Option<&'a ChangeBuffer>,
    /// The adaptive hash index point gets consult (None: `adaptive_hash_index` is off, or
    /// the caller is not a user get path).
    pub ahi: Option<&'a AdaptiveHash>,
}

/// Why an operation on a key-set tree stopped before it changed anything: a leaf it latched
/// still has buffered changes (`Merge`: the caller lets go of every latch, merges them and
/// starts again), or an error.
pub(crate) enum Stop {
    Merge(PageId),
    Fail(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Fail(e)
    }
}

/// The result of one attempt of an operation that may meet a leaf with buffered changes.
pub(crate) type Step<T> = std::result::Result<T, Stop>;

crate::counter::counter_group! {
    /// Structure modifications of every B+tree.
    pub struct TreeCounters => TreeCounts {
        /// Page splits (a root split included).
        page_splits: "splits",
        /// Pages emptied by deletes and returned to the free list.
        pages_freed: "pages",
        /// Roots collapsed into their only child.
        root_collapses: "collapses",
        /// Roots grown by a level (the root's content moved into a new child).
        root_growths: "growths",
        /// A commit's puts that latched the leaf its read of the key's before-image had found
        /// (no structure change in between), without a second descent from the root.
        leaf_hint_puts: "puts",
    }
}

pub struct Tree {
    pub id: u32,
    pub root: PageId,
    /// The SMO latch: shared for every read and optimistic change of the tree, exclusive
    /// for a structure modification. Sharded by thread (one reader lock per shard, a writer
    /// takes them all), because every get takes it shared: with one lock word, two threads
    /// doing gets wrote the same cache line twice per get, and a second thread added almost
    /// nothing (docs/measurements.md, "Point gets on two threads").
    smo: ShardedLock<()>,
    /// How many times the SMO latch has been taken exclusively (bumped while it is held, by
    /// [`Tree::smo_write`]): a holder of the shared latch that reads the same value as an
    /// earlier holder knows no structure modification ran in between, so every leaf still
    /// covers the same keys ([`LeafHint`]).
    smo_epoch: AtomicU64,
    pub dropped: AtomicBool,
    pub counters: Arc<TreeCounters>,
    /// An index table (a key set: every value empty; a put inserts a key the table does not
    /// hold, a delete removes one it holds), whose changes the change buffer may take
    /// (ibuf.rs).
    pub key_set: bool,
}

/// Where a read found a key's leaf, for a write of the same key soon after (a commit reads a
/// key's before-image, then puts its new value): the leaf's page and the tree's SMO epoch
/// then. While the epoch is unchanged no split, merge, freeing or root change has run, so
/// that page is still the leaf whose key range holds the key, and the write latches it
/// without descending again (`Tree::put_hinted`). A changed epoch, or a page that no longer
/// passes the leaf checks, and the write descends as usual.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeafHint {
    page: PageId,
    epoch: u64,
}

#[derive(Clone, Copy)]
pub(crate) enum Target<'k> {
    Key(&'k [u8]),
    First,
    Last,
}

impl LeafHint {
    /// Whether two reads found their keys in the same leaf with no structure change between
    /// them.
    pub(crate) fn same_leaf(&self, other: &LeafHint) -> bool {
        self.page == other.page && self.epoch == other.epoch
    }
}

impl Tree {
    pub fn new(id: u32, root: PageId, counters: Arc<TreeCounters>) -> Self {
        Tree {
            id,
            root,
            smo: ShardedLock::new(()),
            smo_epoch: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            counters,
            key_set: false,
        }
    }

    /// The tree of an index table (see [`Tree::key_set`]).
    pub fn new_key_set(id: u32, root: PageId, counters: Arc<TreeCounters>) -> Self {
        Tree {
            key_set: true,
            ..Tree::new(id, root, counters)
        }
    }

    /// The SMO latch, exclusively, with the epoch bumped while it is held (see
    /// [`Tree::smo_epoch`]). Every structure modification takes the latch through this.
    pub(crate) fn smo_write(&self) -> ShardedLockWriteGuard<'_, ()> {
        // (the latch guards no data, so a panic while it was held leaves nothing to repair)
        let g = self.smo.write().unwrap_or_else(PoisonError::into_inner);
        self.smo_epoch.fetch_add(1, Ordering::Relaxed);
        g
    }

    /// The SMO latch, shared.
    pub(crate) fn smo_read(&self) -> ShardedLockReadGuard<'_, ()> {
        self.smo.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A hint for the leaf `page` just found; the caller holds the SMO latch shared.
    pub(crate) fn hint_for(&self, page: PageId) -> LeafHint {
        LeafHint {
            page,
            epoch: self.smo_epoch.load(Ordering::Relaxed),
        }
    }

    /// For a key-set tree, before a leaf just latched (`pid`, its bytes `b`) is used: Stop
    /// with `Merge` when the change buffer holds changes for it (the caller lets go of every
    /// latch and merges them first), else notes the leaf's free space (ibuf.rs). Other trees:
    /// nothing.
    pub(crate) fn guard_leaf(&self, cx: &Ctx<'_>, pid: PageId, b: &[u8]) -> Step<()> {
        if !self.key_set {
            return Ok(());
        }
        match cx.ibuf {
            Some(ib) if ib.has_changes_latched(self.id, pid, node::free_space(b)) => {
                Err(Stop::Merge(pid))
            }
            _ => Ok(()),
        }
    }

    /// Runs `attempt` until it completes without meeting a leaf with buffered changes,
    /// merging each one it meets (the attempt has let go of every latch when it returns).
    pub(crate) fn with_merges<T>(
        &self,
        cx: &Ctx<'_>,
        mut attempt: impl FnMut() -> Step<T>,
    ) -> Result<T> {
        loop {
            match attempt() {
                Ok(v) => return Ok(v),
                Err(Stop::Fail(e)) => return Err(e),
                Err(Stop::Merge(pid)) => self.merge_leaf(cx, pid, ibuf::MergeBy::Read)?,
            }
        }
    }

    /// Checks a page met on the way down: a tree page of this tree at the expected level.
    pub(crate) fn check_node(
        &self,
        cx: &Ctx<'_>,
        b: &[u8],
        pid: PageId,
        level: Option<u8>,
    ) -> Result<()> {
        let bad = |why: String| Err(Error::corrupt(cx.pool.file().name(), pid.0, why));
        match hdr::page_type(b) {
            Some(PageType::Leaf) if hdr::level(b) == 0 => {}
            Some(PageType::Internal) if hdr::level(b) > 0 => {
                if node::nslots(b) == 0 {
                    return bad("internal page without children".into());
                }
            }
            t => {
                return bad(format!(
                    "expected a B+tree page of table {}, found {t:?}",
                    self.id
                ))
            }
        }
        if hdr::owner(b) != self.id {
            return bad(format!(
                "page belongs to table {}, reached from table {}",
                hdr::owner(b),
                self.id
            ));
        }
        if let Some(l) = level {
            if hdr::level(b) != l {
                return bad(format!("level {} where {l} was expected", hdr::level(b)));
            }
        }
        Ok(())
    }

    /// Descends with one S latch at a time; the caller holds the SMO latch (shared or not).
    pub(crate) fn descend_read<'p>(
        &self,
        cx: &Ctx<'p>,
        t: Target<'_>,
    ) -> Step<crate::buffer::PageRead<'p>> {
        let mut pid = self.root;
        let mut level = None;
        for _ in 0..MAX_DEPTH {
            let g = cx.pool.read(pid)?;
            self.check_node(cx, &g, pid, level)?;
            let l = hdr::level(&g);
            if l == 0 {
                self.guard_leaf(cx, pid, &g)?;
                return Ok(g);
            }
            let i = match t {
                Target::Key(k) => node::child_index(&g, k),
                Target::First => 0,
                Target::Last => node::nslots(&g) - 1,
            };
            level = Some(l - 1);
            pid = node::child(&g, i);
        }
        Err(Error::corrupt(
            cx.pool.file().name(),
            pid.0,
            format!("tree {} deeper than {MAX_DEPTH} levels (a cycle?)", self.id),
        )
        .into())
    }
}
