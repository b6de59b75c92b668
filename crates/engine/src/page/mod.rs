//! page: the on-disk layout of one page. Pure: no I/O, no locks, no clock.
//!
//! Every page, whatever its type, has the same 40-byte header and 8-byte trailer
//! (docs/design.md has the byte table):
//!
//! ```text
//! offset size field
//!      0    4 checksum   crc32c of bytes 4..page_size
//!      4    4 page_no    the page's own number (a misplaced write is detected)
//!      8    8 lsn        LSN of the newest change to this page
//!     16    1 page_type  PageType
//!     17    1 level      0 for leaves, height above the leaves for internal nodes
//!     18    2 nslots     number of slots (records) in the slot array
//!     20    4 heap_top   start of the cell area; cells live in [heap_top, page_size - 8)
//!     24    4 next       right sibling / next overflow page / next free page
//!     28    4 prev       left sibling
//!     32    4 frag_bytes bytes of dead cells inside the cell area (reclaimed by compaction)
//!     36    4 owner      table id owning the page (checked by `check`)
//!     40      slot array: u16 cell offsets in key order, growing upward
//!  ps-8    8 lsn copy   equals `lsn` unless the write was torn
//! ```
//!
//! The fixed per-page overhead is therefore [`PAGE_OVERHEAD`] = 48 bytes at every page size
//! (InnoDB spends about 120 bytes of header, trailer, infimum/supremum and directory per page;
//! ~900 bytes of real per-page overhead were measured on InnoDB at 4 KiB).
//!
//! Invariant 4 (docs/invariants.md): a page is never used unless [`verify`] accepted it.

pub mod node;

use crate::types::{Lsn, PageId};

pub const PAGE_HEADER_SIZE: usize = 40;
pub const PAGE_TRAILER_SIZE: usize = 8;
pub const PAGE_OVERHEAD: usize = PAGE_HEADER_SIZE + PAGE_TRAILER_SIZE;
const _: () = assert!(PAGE_OVERHEAD == 48);

/// Page sizes a database may be created with.
pub const PAGE_SIZES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
pub const MIN_PAGE_SIZE: usize = 4096;

const OFF_CHECKSUM: usize = 0;
const OFF_PAGE_NO: usize = 4;
const OFF_LSN: usize = 8;
const OFF_TYPE: usize = 16;
const OFF_LEVEL: usize = 17;
const OFF_NSLOTS: usize = 18;
const OFF_HEAP_TOP: usize = 20;
const OFF_NEXT: usize = 24;
const OFF_PREV: usize = 28;
const OFF_FRAG: usize = 32;
const OFF_OWNER: usize = 36;

/// What a page holds. Codes are frozen: they are on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageType {
    FileHeader = 1,
    Leaf = 2,
    Internal = 3,
    Overflow = 4,
    Free = 5,
}

impl PageType {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => PageType::FileHeader,
            2 => PageType::Leaf,
            3 => PageType::Internal,
            4 => PageType::Overflow,
            5 => PageType::Free,
            _ => return None,
        })
    }
}

fn rd_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
fn rd_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}
fn wr_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn wr_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn wr_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// The first run `[s, e)` at or after `from` where `a` and `b` (of equal length) differ, if
/// any: the unit both an in-place overwrite and a COMMIT's patch log.
pub fn changed_run(a: &[u8], b: &[u8], from: usize) -> Option<(usize, usize)> {
    let n = a.len().min(b.len());
    let s = (from..n).find(|&i| a[i] != b[i])?;
    let e = (s..n).find(|&i| a[i] == b[i]).unwrap_or(n);
    Some((s, e))
}

/// Where a change to a page wrote. The page-changing functions named `..._noting` report every
/// byte range `start..end` they write to it, so that a mini-transaction that changes a page
/// only through them logs those ranges (mtr.rs) instead of copying the page before its first
/// change and comparing the copy with the page at commit.
pub trait Touch {
    fn touch(&mut self, start: usize, end: usize);
    /// Bytes `dst..dst + len` now hold what `src..src + len` held just before (a shift within
    /// the page, as `copy_within`). Called right after the copy, once every range written
    /// before it is noted. By default a range of the destination; the mtr's noting
    /// (mtr::Noting) logs it as a move where redo can replay one.
    fn moved(&mut self, dst: usize, _src: usize, len: usize) {
        self.touch(dst, dst + len);
    }
}

/// Nothing noted: the caller finds the changes another way (a diff against a copy).
impl Touch for () {
    #[inline(always)]
    fn touch(&mut self, _: usize, _: usize) {}
}

/// The ranges in the order written; a range that continues or overlaps the last one extends it.
impl Touch for Vec<(usize, usize)> {
    #[inline]
    fn touch(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        match self.last_mut() {
            Some(last) if start <= last.1 && end >= last.0 => {
                last.0 = last.0.min(start);
                last.1 = last.1.max(end);
            }
            _ => self.push((start, end)),
        }
    }
}

/// Header accessors over a page buffer. The buffer length is the page size.
pub mod hdr {
    use super::*;

    pub fn page_no(b: &[u8]) -> PageId {
        PageId(rd_u32(b, OFF_PAGE_NO))
    }
    pub fn lsn(b: &[u8]) -> Lsn {
        Lsn(rd_u64(b, OFF_LSN))
    }
    pub fn page_type(b: &[u8]) -> Option<PageType> {
        PageType::from_u8(b[OFF_TYPE])
    }
    pub fn level(b: &[u8]) -> u8 {
        b[OFF_LEVEL]
    }
    pub fn nslots(b: &[u8]) -> usize {
        rd_u16(b, OFF_NSLOTS) as usize
    }
    pub fn heap_top(b: &[u8]) -> usize {
        rd_u32(b, OFF_HEAP_TOP) as usize
    }
    pub fn next(b: &[u8]) -> PageId {
        PageId(rd_u32(b, OFF_NEXT))
    }
    pub fn prev(b: &[u8]) -> PageId {
        PageId(rd_u32(b, OFF_PREV))
    }
    pub fn frag_bytes(b: &[u8]) -> usize {
        rd_u32(b, OFF_FRAG) as usize
    }
    pub fn owner(b: &[u8]) -> u32 {
        rd_u32(b, OFF_OWNER)
    }
    pub fn set_lsn(b: &mut [u8], lsn: Lsn) {
        wr_u64(b, OFF_LSN, lsn.0);
        let n = b.len();
        wr_u64(b, n - PAGE_TRAILER_SIZE, lsn.0);
    }
    pub fn set_level(b: &mut [u8], level: u8) {
        b[OFF_LEVEL] = level;
    }
    pub fn set_nslots(b: &mut [u8], n: usize) {
        wr_u16(b, OFF_NSLOTS, n as u16);
    }
    pub fn set_heap_top(b: &mut [u8], v: usize) {
        wr_u32(b, OFF_HEAP_TOP, v as u32);
    }
    pub fn set_next(b: &mut [u8], p: PageId) {
        wr_u32(b, OFF_NEXT, p.0);
    }
    pub fn set_prev(b: &mut [u8], p: PageId) {
        wr_u32(b, OFF_PREV, p.0);
    }
    pub fn set_frag_bytes(b: &mut [u8], v: usize) {
        wr_u32(b, OFF_FRAG, v as u32);
    }
    pub fn set_owner(b: &mut [u8], v: u32) {
        wr_u32(b, OFF_OWNER, v);
    }
}

/// Formats `b` as an empty page of `ty`, keeping nothing of its old content but the LSN
/// (a reused page's LSN must not go backwards: recovery compares it with record LSNs).
pub fn init(b: &mut [u8], page_no: PageId, ty: PageType, owner: u32) {
    let lsn = hdr::lsn(b);
    b.fill(0);
    wr_u32(b, OFF_PAGE_NO, page_no.0);
    b[OFF_TYPE] = ty as u8;
    hdr::set_heap_top(b, b.len() - PAGE_TRAILER_SIZE);
    hdr::set_next(b, PageId::NONE);
    hdr::set_prev(b, PageId::NONE);
    hdr::set_owner(b, owner);
    hdr::set_lsn(b, lsn);
}

/// Rewrites the page number (a page image copied to another page, as in root growth).
pub fn set_page_no(b: &mut [u8], pid: PageId) {
    wr_u32(b, OFF_PAGE_NO, pid.0);
}

fn compute_checksum(b: &[u8]) -> u32 {
    crc32c::crc32c(&b[OFF_PAGE_NO..])
}

/// Stamps the checksum; called on the copy that is about to be written, never on a frame.
pub fn seal(b: &mut [u8]) {
    let c = compute_checksum(b);
    wr_u32(b, OFF_CHECKSUM, c);
}

/// Why a page read from disk cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageFault {
    AllZero,
    Checksum {
        stored: u32,
        computed: u32,
    },
    TornLsn {
        header: u64,
        trailer: u64,
        stored: u32,
        computed: u32,
    },
    Misplaced {
        found: u32,
    },
    BadType(u8),
    BadLayout(String),
}

impl std::fmt::Display for PageFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageFault::AllZero => write!(f, "page is all zeros (allocated but never written)"),
            PageFault::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            PageFault::TornLsn {
                header,
                trailer,
                stored,
                computed,
            } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}; header LSN \
                 {header} differs from trailer LSN {trailer} (torn write or corrupted LSN)"
            ),
            PageFault::Misplaced { found } => {
                write!(f, "page holds page number {found}: misplaced write")
            }
            PageFault::BadType(t) => write!(f, "unknown page type {t}"),
            PageFault::BadLayout(s) => write!(f, "bad layout: {s}"),
        }
    }
}

/// Checks a page read from disk: checksum, LSN copy, page number, type, header bounds.
pub fn verify(b: &[u8], expect: PageId) -> Result<(), PageFault> {
    verify_checksum(b)?;
    verify_contents(b, expect)
}

/// Checks a page image that [`seal`] has just stamped, with no change since: what [`verify`]
/// checks less the checksum, which seal computed from these very bytes.
pub fn verify_sealed(b: &[u8], expect: PageId) -> Result<(), PageFault> {
    debug_assert_eq!(
        rd_u32(b, OFF_CHECKSUM),
        compute_checksum(b),
        "image not sealed"
    );
    verify_contents(b, expect)
}

/// The checksum and the LSN copy: whether the bytes are the ones last sealed.
fn verify_checksum(b: &[u8]) -> Result<(), PageFault> {
    let stored = rd_u32(b, OFF_CHECKSUM);
    let computed = compute_checksum(b);
    if stored != computed {
        if b.iter().all(|&x| x == 0) {
            return Err(PageFault::AllZero);
        }
        let header = rd_u64(b, OFF_LSN);
        let trailer = rd_u64(b, b.len() - PAGE_TRAILER_SIZE);
        if header != trailer {
            return Err(PageFault::TornLsn {
                header,
                trailer,
                stored,
                computed,
            });
        }
        return Err(PageFault::Checksum { stored, computed });
    }
    Ok(())
}

/// Page number, type and header bounds.
fn verify_contents(b: &[u8], expect: PageId) -> Result<(), PageFault> {
    let found = rd_u32(b, OFF_PAGE_NO);
    if found != expect.0 {
        return Err(PageFault::Misplaced { found });
    }
    let ty = b[OFF_TYPE];
    let Some(ty) = PageType::from_u8(ty) else {
        return Err(PageFault::BadType(ty));
    };
    if matches!(ty, PageType::Leaf | PageType::Internal) {
        node::validate_layout(b).map_err(PageFault::BadLayout)?;
    }
    Ok(())
}

/// The LSN copies a page image carries in its header and its trailer: for a page that fails
/// [`verify`], how new it claims to be (a torn write leaves one copy old, the other new; a
/// flipped bit in one of them leaves the other intact).
pub fn lsn_copies(b: &[u8]) -> (u64, u64) {
    (rd_u64(b, OFF_LSN), rd_u64(b, b.len() - PAGE_TRAILER_SIZE))
}

/// The usable bytes of an overflow page.
pub fn overflow_capacity(page_size: usize) -> usize {
    page_size - PAGE_OVERHEAD
}

/// Overflow page: `heap_top` holds the data length, data follows the header.
pub mod overflow {
    use super::*;

    pub fn write(b: &mut [u8], data: &[u8], next: PageId) {
        b[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + data.len()].copy_from_slice(data);
        hdr::set_heap_top(b, data.len());
        hdr::set_next(b, next);
    }

    /// The data part; `None` when the stored length does not fit the page.
    pub fn data(b: &[u8]) -> Option<&[u8]> {
        let len = hdr::heap_top(b);
        b.get(PAGE_HEADER_SIZE..PAGE_HEADER_SIZE.checked_add(len)?)
            .filter(|_| len <= overflow_capacity(b.len()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn seal_verify_roundtrip_and_faults() {
        for &ps in &PAGE_SIZES {
            let mut b = vec![0u8; ps];
            assert_eq!(verify(&b, PageId(3)), Err(PageFault::AllZero));
            init(&mut b, PageId(3), PageType::Leaf, 7);
            hdr::set_lsn(&mut b, Lsn(99));
            seal(&mut b);
            verify(&b, PageId(3)).unwrap();
            assert!(matches!(
                verify(&b, PageId(4)),
                Err(PageFault::Misplaced { found: 3 })
            ));
            let mut torn = b.clone();
            torn[ps - 1] ^= 1; // trailer LSN differs
            assert!(matches!(
                verify(&torn, PageId(3)),
                Err(PageFault::TornLsn { .. })
            ));
            let mut flipped = b.clone();
            flipped[ps / 2] ^= 0x10;
            assert!(matches!(
                verify(&flipped, PageId(3)),
                Err(PageFault::Checksum { .. })
            ));
        }
    }

    #[test]
    fn init_keeps_lsn() {
        let mut b = vec![0u8; 4096];
        hdr::set_lsn(&mut b, Lsn(1234));
        init(&mut b, PageId(1), PageType::Free, 0);
        assert_eq!(hdr::lsn(&b), Lsn(1234));
        assert_eq!(hdr::heap_top(&b), 4096 - PAGE_TRAILER_SIZE);
    }

    #[test]
    fn overflow_roundtrip() {
        let mut b = vec![0u8; 4096];
        init(&mut b, PageId(5), PageType::Overflow, 1);
        let data: Vec<u8> = (0..overflow_capacity(4096)).map(|i| i as u8).collect();
        overflow::write(&mut b, &data, PageId(6));
        assert_eq!(overflow::data(&b).unwrap(), &data[..]);
        assert_eq!(hdr::next(&b), PageId(6));
        hdr::set_heap_top(&mut b, 5000);
        assert!(overflow::data(&b).is_none());
    }
}
