//! mtr: mini-transactions. A set of X-latched pages changed together and committed at once:
//! at commit every changed page gets the mtr's LSN and enters its flush list (if it was clean).
//!
//! Recipe for every page change (as PostgreSQL's): latch -> modify -> (log) -> stamp LSN ->
//! mark dirty -> unlatch. Until the redo log lands, the LSN comes from a counter; the durable
//! write path will make commit append the mtr's redo records and an end marker first.
//!
//! What must stay true: an mtr acquires every page it may need (and reads it from disk) before
//! it changes the first one, so an I/O error can abort it cleanly with nothing modified.

use crate::buffer::{BufferPool, PageWrite};
use crate::error::Result;
use crate::types::{Lsn, PageId};
use std::sync::atomic::{AtomicU64, Ordering};

/// Handle of a page held by an mtr.
pub type Slot = usize;

pub struct Mtr<'a> {
    pool: &'a BufferPool,
    lsn: &'a AtomicU64,
    pages: Vec<Option<PageWrite<'a>>>,
}

impl<'a> Mtr<'a> {
    pub fn new(pool: &'a BufferPool, lsn: &'a AtomicU64) -> Self {
        Mtr {
            pool,
            lsn,
            pages: Vec::with_capacity(8),
        }
    }

    pub fn pool(&self) -> &'a BufferPool {
        self.pool
    }

    /// X-latches `pid` (reading it if needed) and holds it until commit.
    pub fn write(&mut self, pid: PageId) -> Result<Slot> {
        let g = self.pool.write(pid)?;
        Ok(self.adopt(g))
    }

    /// A frame for a page beyond the end of the file (no read).
    pub fn create(&mut self, pid: PageId) -> Result<Slot> {
        let g = self.pool.create(pid)?;
        Ok(self.adopt(g))
    }

    pub fn adopt(&mut self, g: PageWrite<'a>) -> Slot {
        self.pages.push(Some(g));
        self.pages.len() - 1
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
        match self.pages.get_mut(s) {
            Some(Some(g)) => &mut g[..],
            _ => unreachable!("mtr slot {s} not held"),
        }
    }

    /// Two distinct held pages, both writable.
    pub fn pg2(&mut self, a: Slot, b: Slot) -> (&mut [u8], &mut [u8]) {
        assert_ne!(a, b, "pg2 of one slot");
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

    /// Releases an unmodified page early (latch coupling on the way down).
    pub fn release(&mut self, s: Slot) {
        if let Some(g) = self.pages.get_mut(s).and_then(Option::take) {
            debug_assert!(!g.is_modified(), "releasing a modified page before commit");
        }
    }

    pub fn modified_count(&self) -> usize {
        self.pages
            .iter()
            .filter(|g| g.as_ref().is_some_and(|g| g.is_modified()))
            .count()
    }

    /// Stamps every modified page with a fresh LSN and releases all latches.
    pub fn commit(mut self) -> Lsn {
        self.finish()
    }

    fn finish(&mut self) -> Lsn {
        let lsn = Lsn(self.lsn.fetch_add(1, Ordering::AcqRel) + 1);
        for g in self.pages.iter_mut().flatten() {
            if g.is_modified() {
                g.stamp(lsn);
            }
        }
        while let Some(g) = self.pages.pop() {
            drop(g);
        }
        lsn
    }
}

impl Drop for Mtr<'_> {
    /// An mtr dropped on an error path after it began changing pages (only possible when an
    /// allocation fails midway) commits what it changed: the changes are each self-consistent
    /// (allocated and formatted pages) and must reach their flush lists.
    fn drop(&mut self) {
        if self.modified_count() > 0 {
            self.finish();
        }
    }
}
