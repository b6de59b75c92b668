//! mtr: mini-transactions. A set of X-latched pages changed together and committed at once:
//! at commit every changed page gets the mtr's LSN and enters its flush list (if it was clean).
//!
//! Recipe for every page change (as PostgreSQL's): latch -> modify -> log -> stamp LSN ->
//! mark dirty -> unlatch. The first write access to a page snapshots it; at commit each changed
//! page becomes one PageDiff record (the changed byte ranges; wal/record.rs), and all of them
//! are appended as one log group, which the reader returns only whole: splits and root growth
//! are atomic in the log. Pages get the group's end LSN; clean pages enter their flush list
//! with the group's start LSN as oldest_modification, under the checkpoint fence (flush/).
//!
//! What must stay true: an mtr acquires every page it may need (and reads it from disk) before
//! it changes the first one, so an I/O error can abort it cleanly with nothing modified.

use crate::buffer::{BufferPool, PageWrite};
use crate::error::Result;
use crate::page::node;
use crate::types::{Lsn, PageId};
use crate::wal::record;
use crate::wal::LogSpace;

/// Handle of a page held by an mtr.
pub type Slot = usize;

/// Redo a page's record may take beyond the page's own bytes (its header and ranges).
const PAGE_RECORD_OVERHEAD: u64 = 256;

/// The most redo an mtr that changes `pages` pages of `page_size` bytes can log: a whole-page
/// diff each, with its record's overhead. What callers outside a transaction reserve before
/// they latch (`LogSpace::with_room`).
pub fn redo_bound(page_size: usize, pages: u64) -> u64 {
    pages * (page_size as u64 + PAGE_RECORD_OVERHEAD)
}

/// What a held page looked like before this mtr changed it.
enum Before {
    /// Not changed yet.
    Untouched,
    /// A page beyond the old end of the file: all zeros.
    Fresh,
    Image(Box<[u8]>),
    /// The page just after this mtr compacted it ([`Mtr::compact`]): redo compacts first.
    Compacted(Box<[u8]>),
}

/// Page-image buffers for before-images, kept per thread between mtrs: an mtr's first write
/// to a page copies it, and a fresh page-size allocation and free for every changed page of
/// every mtr showed in TPC-C profiles (malloc and free of 16 KiB blocks).
const SPARE_IMAGES: usize = 8;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Box<[u8]>>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Bytes of redo the mtrs of this thread appended.
    static REDO_APPENDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes of redo the mtrs of the calling thread have appended so far: what a commit's apply
/// measures its own redo by (other threads append to the same log meanwhile).
pub fn thread_redo_bytes() -> u64 {
    REDO_APPENDED.with(std::cell::Cell::get)
}

/// A copy of `page` in a reused buffer when one of its size is spare.
fn image_of(page: &[u8]) -> Box<[u8]> {
    let reused = SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let at = s.iter().rposition(|b| b.len() == page.len())?;
        Some(s.swap_remove(at))
    });
    match reused {
        Some(mut b) => {
            b.copy_from_slice(page);
            b
        }
        None => page.into(),
    }
}

/// Keeps `img` for the next mtr of this thread (up to SPARE_IMAGES).
fn recycle(img: Box<[u8]>) {
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_IMAGES {
            s.push(img);
        }
    });
}

pub struct Mtr<'a> {
    pool: &'a BufferPool,
    space: &'a LogSpace,
    pages: Vec<Option<PageWrite<'a>>>,
    before: Vec<Before>,
    /// Records of changes made before a compaction, logged ahead of the commit's diffs.
    early: Vec<u8>,
}

impl<'a> Mtr<'a> {
    pub fn new(pool: &'a BufferPool, space: &'a LogSpace) -> Self {
        Mtr {
            pool,
            space,
            pages: Vec::with_capacity(8),
            before: Vec::with_capacity(8),
            early: Vec::new(),
        }
    }

    pub fn pool(&self) -> &'a BufferPool {
        self.pool
    }

    /// X-latches `pid` (reading it if needed) and holds it until commit. A page this mtr
    /// already holds is returned as is (latches are not re-entrant: a second latch would hang).
    pub fn write(&mut self, pid: PageId) -> Result<Slot> {
        if let Some(s) = self.find(pid) {
            return Ok(s);
        }
        let g = self.pool.write(pid)?;
        Ok(self.adopt(g))
    }

    /// A frame for a page beyond the end of the file (no read).
    pub fn create(&mut self, pid: PageId) -> Result<Slot> {
        let g = self.pool.create(pid)?;
        let s = self.adopt(g);
        self.before[s] = Before::Fresh;
        Ok(s)
    }

    pub fn adopt(&mut self, g: PageWrite<'a>) -> Slot {
        self.pages.push(Some(g));
        self.before.push(Before::Untouched);
        self.pages.len() - 1
    }

    fn snapshot(&mut self, s: Slot) {
        if matches!(self.before[s], Before::Untouched) {
            if let Some(Some(g)) = self.pages.get(s) {
                self.before[s] = Before::Image(image_of(&g[..]));
            }
        }
    }

    /// The slot holding `pid`, if this mtr latched it already.
    pub fn find(&self, pid: PageId) -> Option<Slot> {
        self.pages
            .iter()
            .position(|g| g.as_ref().is_some_and(|g| g.page_id() == pid))
    }

    fn guard(&self, s: Slot) -> &PageWrite<'a> {
        match self.pages.get(s) {
            Some(Some(g)) => g,
            _ => unreachable!("mtr slot {s} not held"),
        }
    }

    /// Read access to a held page.
    pub fn peek(&self, s: Slot) -> &[u8] {
        self.guard(s)
    }

    pub fn pid(&self, s: Slot) -> PageId {
        self.guard(s).page_id()
    }

    /// Write access to a held page: the page will be stamped at commit.
    pub fn pg(&mut self, s: Slot) -> &mut [u8] {
        self.snapshot(s);
        match self.pages.get_mut(s) {
            Some(Some(g)) => &mut g[..],
            _ => unreachable!("mtr slot {s} not held"),
        }
    }

    /// Two distinct held pages, both writable.
    pub fn pg2(&mut self, a: Slot, b: Slot) -> (&mut [u8], &mut [u8]) {
        assert_ne!(a, b, "pg2 of one slot");
        self.snapshot(a);
        self.snapshot(b);
        let (lo, hi, swap) = if a < b { (a, b, false) } else { (b, a, true) };
        let (left, right) = self.pages.split_at_mut(hi);
        let (x, y) = match (&mut left[lo], &mut right[0]) {
            (Some(x), Some(y)) => (&mut x[..], &mut y[..]),
            _ => unreachable!("mtr slots {a},{b} not held"),
        };
        if swap {
            (y, x)
        } else {
            (x, y)
        }
    }

    /// Compacts held node page `s` (page::node::compact) and logs it as a compaction: the
    /// changes this mtr made to the page so far, then a flag that redo compacts the page, and
    /// at commit only what changed after it. Why: logged as changed bytes, a compaction is
    /// most of the page (every cell below the first hole moves), and an update that lengthens
    /// a row in a full leaf compacts it every few updates; such a transaction wrote several
    /// times the redo its commit reserved for its apply, and an applying transaction pins the
    /// checkpoint at its COMMIT, so a log it fills cannot be freed.
    pub fn compact(&mut self, s: Slot) {
        self.snapshot(s);
        let pid = self.pid(s);
        let Some(Some(g)) = self.pages.get_mut(s) else {
            unreachable!("mtr slot {s} not held")
        };
        match &mut self.before[s] {
            // logged whole from zeros at commit anyway
            Before::Fresh => node::compact(&mut g[..]),
            Before::Image(img) => {
                record::encode_page_diff(&mut self.early, pid, Some(img), g);
                node::compact(&mut g[..]);
                img.copy_from_slice(g);
                let img = std::mem::replace(img, Box::new([]));
                self.before[s] = Before::Compacted(img);
            }
            Before::Compacted(img) => {
                record::encode_compacted_page_diff(&mut self.early, pid, img, g);
                node::compact(&mut g[..]);
                img.copy_from_slice(g);
            }
            Before::Untouched => unreachable!("snapshot taken above"),
        }
    }

    /// Makes room for a cell of `len` bytes on held node page `s` contiguous: compacts it
    /// ([`Mtr::compact`]) when the cell fits only counting fragmented bytes.
    pub fn make_contiguous(&mut self, s: Slot, len: usize) {
        if node::insert_needs_compact(self.peek(s), len) {
            self.compact(s);
        }
    }

    /// Releases an unmodified page early (latch coupling on the way down).
    pub fn release(&mut self, s: Slot) {
        if let Some(g) = self.pages.get_mut(s).and_then(Option::take) {
            debug_assert!(!g.is_modified(), "releasing a modified page before commit");
        }
    }

    /// The slots of every page this mtr holds, in the order it latched them.
    pub fn held_slots(&self) -> impl Iterator<Item = Slot> + '_ {
        self.pages
            .iter()
            .enumerate()
            .filter_map(|(s, g)| g.as_ref().map(|_| s))
    }

    pub fn modified_count(&self) -> usize {
        self.pages
            .iter()
            .filter(|g| g.as_ref().is_some_and(|g| g.is_modified()))
            .count()
    }

    /// Logs every changed page as one group, stamps the pages and releases all latches.
    /// Returns the group's end LSN (or the log's current LSN if nothing changed).
    pub fn commit(mut self) -> Result<Lsn> {
        self.finish()
    }

    fn finish(&mut self) -> Result<Lsn> {
        let mut payload = std::mem::take(&mut self.early);
        for (g, before) in self.pages.iter().zip(&self.before) {
            let Some(g) = g else { continue };
            if !g.is_modified() {
                continue;
            }
            match before {
                Before::Fresh => {
                    record::encode_page_diff(&mut payload, g.page_id(), None, g);
                }
                Before::Image(b) => {
                    record::encode_page_diff(&mut payload, g.page_id(), Some(b), g);
                }
                Before::Compacted(b) => {
                    record::encode_compacted_page_diff(&mut payload, g.page_id(), b, g);
                }
                Before::Untouched => unreachable!("modified page without a before-image"),
            }
        }
        let result = if payload.is_empty() {
            for g in self.pages.iter_mut().flatten() {
                g.abandon_changes(); // only LSN bytes differ: nothing to log or write
            }
            Ok(self.space.log().current_lsn())
        } else {
            match self.space.append_fenced(&payload) {
                Ok((range, fence)) => {
                    REDO_APPENDED.with(|r| r.set(r.get() + payload.len() as u64));
                    for g in self.pages.iter_mut().flatten() {
                        if g.is_modified() {
                            g.stamp(range.start, range.end);
                        }
                    }
                    drop(fence);
                    Ok(range.end)
                }
                Err(e) => {
                    // poisoned: these changes are never logged, so they must never be written
                    for g in self.pages.iter_mut().flatten() {
                        g.abandon_changes();
                    }
                    Err(e)
                }
            }
        };
        while let Some(g) = self.pages.pop() {
            drop(g);
        }
        for b in self.before.drain(..) {
            if let Before::Image(img) | Before::Compacted(img) = b {
                recycle(img);
            }
        }
        result
    }
}

impl Drop for Mtr<'_> {
    /// An mtr dropped on an error path after it began changing pages (only possible when an
    /// allocation fails midway) commits what it changed: the changes are each self-consistent
    /// (allocated and formatted pages) and must reach their flush lists.
    fn drop(&mut self) {
        if self.modified_count() > 0 {
            if let Err(e) = self.finish() {
                tracing::error!("an mtr dropped on an error path could not be logged: {e}");
            }
        }
    }
}
