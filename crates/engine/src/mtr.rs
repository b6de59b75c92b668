//! mtr: mini-transactions. A set of X-latched pages changed together and committed at once:
//! at commit every changed page gets the mtr's LSN and enters its flush list (if it was clean).
//!
//! Recipe for every page change (as PostgreSQL's): latch -> modify -> log -> stamp LSN ->
//! mark dirty -> unlatch. At commit each changed page becomes one PageDiff record (the changed
//! byte ranges; wal/record.rs), and all of them are appended as one log group, which the
//! reader returns only whole: splits and root growth are atomic in the log. Pages get the group's end LSN; clean pages enter their flush list
//! with the group's start LSN as oldest_modification, under the checkpoint fence (flush/).
//!
//! Two ways to know what changed. Changes made through [`Mtr::change`] note every byte range
//! they write (page::Touch), and a page changed only that way is logged from those ranges: no
//! copy of the page, no comparison. Raw write access ([`Mtr::pg`], [`Mtr::pg2`]) copies the
//! page at its first write and diffs the copy at commit; a page first changed through `change`
//! and then written raw logs its noted ranges as a record of their own at that point, then is
//! copied. Debug builds keep a copy of noted pages too and check at commit that every changed
//! byte lies in a noted range, so a change that writes outside what it notes fails the tests.
//!
//! What must stay true: an mtr acquires every page it may need (and reads it from disk) before
//! it changes the first one, so an I/O error can abort it cleanly with nothing modified.

use crate::buffer::{BufferPool, PageWrite};
use crate::error::Result;
use crate::page::{node, Touch};
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
    /// Changed only through [`Mtr::change`] since the mtr latched it or last logged it.
    Noted(Noted),
}

/// What changes through [`Mtr::change`] noted on a page: the byte ranges they wrote, and the
/// shifts they made within it ([`Touch::moved`]), which are logged as moves where redo can
/// replay them. Redo applies the moves first, in order, then writes the ranges with the page's
/// final bytes (record::encode_page_ranges). So a shift is kept as a move only when no range
/// noted before it overlaps its source: at replay the source then holds what it held when the
/// shift was made (the page before the mtr, changed by the earlier moves alone). Otherwise, or
/// when the shift is short, its destination is noted as a range. Why moves: an insert into a
/// node shifts every slot after it (page::node), on average half the slot array, and the
/// change buffer's tree and the secondary indexes' leaves hold hundreds of short entries a
/// page, so those shifts were most of the redo of an insert benchmark's row.
pub(crate) struct Noting {
    pub ranges: Vec<(usize, usize)>,
    pub moves: Vec<record::Move>,
}

/// Shifts shorter than this are noted as ranges: a move's entry is 6 bytes, a range's 4 plus
/// its bytes, and a short range often joins a neighbour's.
const MIN_MOVE: usize = 8;
/// Moves kept per page and mtr; more are noted as ranges (a record counts its entries in a
/// u16).
const MAX_MOVES: usize = 4096;

impl Noting {
    pub fn new() -> Self {
        Noting {
            ranges: spare_ranges(),
            moves: Vec::new(),
        }
    }
}

impl Touch for Noting {
    #[inline]
    fn touch(&mut self, start: usize, end: usize) {
        self.ranges.touch(start, end);
    }

    fn moved(&mut self, dst: usize, src: usize, len: usize) {
        if len == 0 {
            return;
        }
        let source_written = self.ranges.iter().any(|&(s, e)| s < src + len && src < e);
        if !(MIN_MOVE..=record::MAX_MOVE).contains(&len)
            || source_written
            || self.moves.len() >= MAX_MOVES
        {
            self.ranges.touch(dst, dst + len);
        } else {
            self.moves.push(record::Move { dst, src, len });
        }
    }
}

/// The ranges noted on a page changed only through [`Mtr::change`].
struct Noted {
    /// The mtr compacted the page before these ranges were written: redo compacts first.
    compacted: bool,
    noting: Noting,
    /// The page as it was before the first noted range (after the compaction when
    /// `compacted`), which the noted ranges are checked against.
    #[cfg(debug_assertions)]
    image: Box<[u8]>,
}

impl Noted {
    fn new(compacted: bool, _page: &[u8]) -> Self {
        Noted {
            compacted,
            noting: Noting::new(),
            #[cfg(debug_assertions)]
            image: image_of(_page),
        }
    }

    /// Appends the page's record (if there is anything to log) and keeps its buffers for the
    /// next mtr of this thread.
    fn log(mut self, out: &mut Vec<u8>, pid: PageId, page: &[u8]) {
        let _at = out.len();
        let n = &mut self.noting;
        record::encode_page_ranges(out, pid, self.compacted, page, &mut n.ranges, &n.moves);
        recycle_ranges(std::mem::take(&mut n.ranges));
        #[cfg(debug_assertions)]
        {
            check_noted(pid, &self.image, page, &out[_at..]);
            recycle(std::mem::replace(&mut self.image, Box::new([])));
        }
    }
}

/// Panics unless `record` (the record logged from a page's noted ranges, or nothing) turns
/// `before` into `after`, the LSN fields aside: a change that wrote where it did not note would
/// leave redo that does not reproduce the page.
#[cfg(debug_assertions)]
fn check_noted(pid: PageId, before: &[u8], after: &[u8], record: &[u8]) {
    let ps = after.len();
    let mut redone = before.to_vec();
    let Some(recs) = record::decode_group(record, ps) else {
        panic!("page {pid:?}: the record of its noted ranges does not decode")
    };
    for r in recs {
        if let record::Record::PageDiff { moves, ranges, .. } = r {
            record::apply_page_diff(&mut redone, false, &moves, &ranges);
        }
    }
    let lsn_field = |i: usize| (8..16).contains(&i) || i >= ps - 8;
    if let Some(i) = (0..ps).find(|&i| !lsn_field(i) && redone[i] != after[i]) {
        panic!(
            "page {pid:?}: byte {i} is {} after the change but {} after its redo: the change \
             wrote outside the ranges it noted",
            after[i], redone[i]
        );
    }
}

/// Page-image buffers for before-images, kept per thread between mtrs: an mtr's first write
/// to a page copies it, and a fresh page-size allocation and free for every changed page of
/// every mtr showed in TPC-C profiles (malloc and free of 16 KiB blocks).
const SPARE_IMAGES: usize = 8;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Box<[u8]>>> = const { std::cell::RefCell::new(Vec::new()) };
    static SPARE_RANGES: std::cell::RefCell<Vec<Vec<(usize, usize)>>> = const { std::cell::RefCell::new(Vec::new()) };
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

/// An empty range list, reused when this thread has one spare.
fn spare_ranges() -> Vec<(usize, usize)> {
    SPARE_RANGES
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(16))
}

/// Keeps `r` for the next mtr of this thread (up to SPARE_IMAGES lists).
fn recycle_ranges(mut r: Vec<(usize, usize)>) {
    r.clear();
    SPARE_RANGES.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_IMAGES {
            s.push(r);
        }
    });
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

    /// Held page `s` is about to be formatted whole (`page::init` zeroes every byte): its
    /// record at commit is logged from zeros, as a created page's is, and redo starts it from
    /// zeros. Whatever the page held before, and any change this mtr made to it so far, is
    /// neither copied nor logged: a freed page logs its header, not the diff of every byte it
    /// held (most of a page's size).
    pub fn reformat(&mut self, s: Slot) {
        recycle_before(std::mem::replace(&mut self.before[s], Before::Fresh));
    }

    pub fn adopt(&mut self, g: PageWrite<'a>) -> Slot {
        self.pages.push(Some(g));
        self.before.push(Before::Untouched);
        self.pages.len() - 1
    }

    /// Before raw write access to slot `s`: copies the page unless it is copied already. A
    /// page with noted changes logs them first (as a record of their own, into `early`), so the
    /// copy's diff at commit holds only what is written from now on.
    fn snapshot(&mut self, s: Slot) {
        let Some(Some(g)) = self.pages.get(s) else {
            return;
        };
        match &self.before[s] {
            Before::Untouched => self.before[s] = Before::Image(image_of(&g[..])),
            Before::Noted(_) => {
                let Before::Noted(noted) =
                    std::mem::replace(&mut self.before[s], Before::Untouched)
                else {
                    unreachable!("matched above")
                };
                noted.log(&mut self.early, g.page_id(), &g[..]);
                self.before[s] = Before::Image(image_of(&g[..]));
            }
            Before::Fresh | Before::Image(_) | Before::Compacted(_) => {}
        }
    }

    /// Changes held page `s` with `f`, which writes to the page only where it notes (the
    /// `..._noting` functions of page::node). A page changed only this way is logged from the
    /// noted ranges; on a page already copied for raw access ([`Mtr::pg`]) or fresh, what `f`
    /// notes is not needed (the diff finds the changes) and is dropped.
    pub fn change<R>(&mut self, s: Slot, f: impl FnOnce(&mut [u8], &mut dyn Touch) -> R) -> R {
        let Some(Some(g)) = self.pages.get_mut(s) else {
            unreachable!("mtr slot {s} not held")
        };
        if matches!(self.before[s], Before::Untouched) {
            self.before[s] = Before::Noted(Noted::new(false, &g[..]));
        }
        match &mut self.before[s] {
            Before::Noted(noted) => f(&mut g[..], &mut noted.noting),
            _ => f(&mut g[..], &mut ()),
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
    ///
    /// A page not changed yet, or changed only through [`Mtr::change`], logs what was noted and
    /// goes on noting after the compaction, with no copy of the page.
    pub fn compact(&mut self, s: Slot) {
        let pid = self.pid(s);
        let Some(Some(g)) = self.pages.get_mut(s) else {
            unreachable!("mtr slot {s} not held")
        };
        match std::mem::replace(&mut self.before[s], Before::Untouched) {
            Before::Untouched => {}
            Before::Noted(noted) => noted.log(&mut self.early, pid, &g[..]),
            other => self.before[s] = other,
        }
        if matches!(self.before[s], Before::Untouched) {
            node::compact(&mut g[..]);
            self.before[s] = Before::Noted(Noted::new(true, &g[..]));
            return;
        }
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
            Before::Untouched | Before::Noted(_) => unreachable!("handled above"),
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
        for (g, before) in self.pages.iter().zip(self.before.iter_mut()) {
            let Some(g) = g else { continue };
            if !g.is_modified() {
                continue;
            }
            if let Before::Noted(_) = before {
                let Before::Noted(noted) = std::mem::replace(before, Before::Untouched) else {
                    unreachable!("matched above")
                };
                noted.log(&mut payload, g.page_id(), g);
                continue;
            }
            match &*before {
                Before::Fresh => {
                    record::encode_page_diff(&mut payload, g.page_id(), None, g);
                }
                Before::Image(b) => {
                    record::encode_page_diff(&mut payload, g.page_id(), Some(b), g);
                }
                Before::Compacted(b) => {
                    record::encode_compacted_page_diff(&mut payload, g.page_id(), b, g);
                }
                Before::Untouched | Before::Noted(_) => {
                    unreachable!("modified page without a before-image")
                }
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
            recycle_before(b);
        }
        result
    }
}

/// Gives a page's before-image and noted ranges back to this thread's spares.
fn recycle_before(b: Before) {
    match b {
        Before::Image(img) | Before::Compacted(img) => recycle(img),
        Before::Noted(noted) => {
            recycle_ranges(noted.noting.ranges);
            #[cfg(debug_assertions)]
            recycle(noted.image);
        }
        Before::Untouched | Before::Fresh => {}
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
