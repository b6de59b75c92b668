//! space: the file header (page 0) and page allocation with a free list.
//!
//! Page 0 after the common page header:
//!
//! ```text
//! offset size field
//!     40    8 magic "EVENKEEL"
//!     48    4 format version (1)
//!     52    4 page_size
//!     56    4 page_count    pages 0..page_count exist in the file
//!     60    4 free_head     first page of the free list (chained through `next`)
//!     64    4 free_count
//!     68    4 catalog_root
//!     72    4 next_table_id
//!     76    8 shutdown_lsn  the LSN counter at the last clean close
//!     84    1 clean         1 after a clean close, 0 while open
//! ```
//!
//! Latch order: page 0 is latched after any tree page an mtr holds, and while holding it an
//! mtr latches only free pages (which nobody else latches), so allocation cannot deadlock.

use crate::error::{Error, Result};
use crate::mtr::{Mtr, Slot};
use crate::page::{self, hdr, PageType, PAGE_HEADER_SIZE};
use crate::types::{Lsn, PageId};

pub const HEADER_PAGE: PageId = PageId(0);
pub const MAGIC: &[u8; 8] = b"EVENKEEL";
pub const FORMAT_VERSION: u32 = 1;
/// Highest page number a file may hold (u32::MAX is PageId::NONE).
pub const MAX_PAGES: u32 = u32::MAX - 1;

const OFF_MAGIC: usize = PAGE_HEADER_SIZE;
const OFF_VERSION: usize = OFF_MAGIC + 8;
const OFF_PAGE_SIZE: usize = OFF_VERSION + 4;
const OFF_PAGE_COUNT: usize = OFF_PAGE_SIZE + 4;
const OFF_FREE_HEAD: usize = OFF_PAGE_COUNT + 4;
const OFF_FREE_COUNT: usize = OFF_FREE_HEAD + 4;
const OFF_CATALOG_ROOT: usize = OFF_FREE_COUNT + 4;
const OFF_NEXT_TABLE: usize = OFF_CATALOG_ROOT + 4;
const OFF_SHUTDOWN_LSN: usize = OFF_NEXT_TABLE + 4;
const OFF_CLEAN: usize = OFF_SHUTDOWN_LSN + 8;
const _: () = assert!(OFF_CLEAN == 84);

fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Reads the page size from the first bytes of a data file, before the pool exists.
pub fn probe_page_size(first: &[u8]) -> std::result::Result<usize, String> {
    if first.len() < OFF_CLEAN + 1 || &first[OFF_MAGIC..OFF_MAGIC + 8] != MAGIC {
        return Err("not an evenkeel data file (bad magic)".into());
    }
    let v = get32(first, OFF_VERSION);
    if v != FORMAT_VERSION {
        return Err(format!(
            "format version {v} is not supported (this build reads {FORMAT_VERSION})"
        ));
    }
    let ps = get32(first, OFF_PAGE_SIZE) as usize;
    if !page::PAGE_SIZES.contains(&ps) {
        return Err(format!(
            "header page size {ps} is not one of {:?}",
            page::PAGE_SIZES
        ));
    }
    Ok(ps)
}

/// Decoded header fields.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub page_size: usize,
    pub page_count: u32,
    pub free_head: PageId,
    pub free_count: u32,
    pub catalog_root: PageId,
    pub next_table_id: u32,
    pub shutdown_lsn: Lsn,
    pub clean: bool,
}

impl Header {
    pub fn decode(b: &[u8]) -> Header {
        Header {
            page_size: get32(b, OFF_PAGE_SIZE) as usize,
            page_count: get32(b, OFF_PAGE_COUNT),
            free_head: PageId(get32(b, OFF_FREE_HEAD)),
            free_count: get32(b, OFF_FREE_COUNT),
            catalog_root: PageId(get32(b, OFF_CATALOG_ROOT)),
            next_table_id: get32(b, OFF_NEXT_TABLE),
            shutdown_lsn: Lsn(u64::from_le_bytes(
                b[OFF_SHUTDOWN_LSN..OFF_SHUTDOWN_LSN + 8]
                    .try_into()
                    .unwrap_or([0; 8]),
            )),
            clean: b[OFF_CLEAN] == 1,
        }
    }
}

/// Formats page 0 of a new database.
/// Why a data file of `len` bytes cannot hold even its header page of `page_size` bytes.
pub fn truncated_header_page(len: u64, page_size: usize) -> String {
    format!(
        "the file is {len} bytes, shorter than its first page: its header gives a page size of \
         {page_size} bytes, so {} bytes of the header page (page 0) and every page after it are \
         missing; the file was truncated",
        page_size as u64 - len
    )
}

/// Whether a data file of `len` bytes is whole for `header`: a multiple of the page size and
/// at least the pages the header counts. The reason names the size, the page size and what
/// is missing or extra. Open (after a clean shutdown) and `check` share this rule.
pub fn check_file_length(
    len: u64,
    page_size: usize,
    header: &Header,
) -> std::result::Result<(), String> {
    let ps = page_size as u64;
    if !len.is_multiple_of(ps) {
        return Err(format!(
            "the file is {len} bytes, not a multiple of its page size of {page_size} bytes: \
             {} bytes past the last whole page (page {}); it was truncated or appended to",
            len % ps,
            len / ps
        ));
    }
    let want = u64::from(header.page_count) * ps;
    if len < want {
        let have = len / ps;
        return Err(format!(
            "the file is {len} bytes ({have} pages of {page_size} bytes) but its header counts \
             {} pages ({want} bytes): pages {have}..={} ({} bytes) are missing; the file was \
             truncated",
            header.page_count,
            header.page_count - 1,
            want - len
        ));
    }
    Ok(())
}

pub fn format_header(b: &mut [u8], page_size: usize, catalog_root: PageId) {
    page::init(b, HEADER_PAGE, PageType::FileHeader, 0);
    b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(MAGIC);
    put32(b, OFF_VERSION, FORMAT_VERSION);
    put32(b, OFF_PAGE_SIZE, page_size as u32);
    put32(b, OFF_PAGE_COUNT, catalog_root.0 + 1);
    put32(b, OFF_FREE_HEAD, PageId::NONE.0);
    put32(b, OFF_FREE_COUNT, 0);
    put32(b, OFF_CATALOG_ROOT, catalog_root.0);
    put32(b, OFF_NEXT_TABLE, 1);
}

pub fn set_next_table_id(b: &mut [u8], v: u32) {
    put32(b, OFF_NEXT_TABLE, v);
}

pub fn set_shutdown(b: &mut [u8], lsn: Lsn, clean: bool) {
    b[OFF_SHUTDOWN_LSN..OFF_SHUTDOWN_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
    b[OFF_CLEAN] = clean as u8;
}

/// Allocates a page inside `mtr` (which must already hold page 0 at `hdr_slot`): the head of
/// the free list, or a new page at the end of the file. The page is X-latched in the mtr and
/// formatted as `ty` for `owner`.
pub fn allocate(mtr: &mut Mtr<'_>, hdr_slot: Slot, ty: PageType, owner: u32) -> Result<Slot> {
    let h = Header::decode(mtr.peek(hdr_slot));
    let slot = if !h.free_head.is_none() {
        let s = mtr.write(h.free_head)?;
        let p = mtr.peek(s);
        if hdr::page_type(p) != Some(PageType::Free) {
            return Err(Error::corrupt(
                mtr.pool().file().name(),
                h.free_head.0,
                "free list points to a page that is not free",
            ));
        }
        let next = hdr::next(p);
        let b = mtr.pg(hdr_slot);
        put32(b, OFF_FREE_HEAD, next.0);
        put32(b, OFF_FREE_COUNT, h.free_count.saturating_sub(1));
        s
    } else {
        if h.page_count >= MAX_PAGES {
            return Err(Error::SpaceExhausted(format!(
                "{} pages of {} bytes are in use, the most one file can address",
                h.page_count, h.page_size
            )));
        }
        let s = mtr.create(PageId(h.page_count))?;
        put32(mtr.pg(hdr_slot), OFF_PAGE_COUNT, h.page_count + 1);
        s
    };
    let pid = mtr.pid(slot);
    // formatted whole below: logged from zeros, without a copy of the free page
    mtr.reformat(slot);
    page::init(mtr.pg(slot), pid, ty, owner);
    Ok(slot)
}

/// Puts a held page on the free list.
pub fn free(mtr: &mut Mtr<'_>, hdr_slot: Slot, slot: Slot) {
    let h = Header::decode(mtr.peek(hdr_slot));
    let pid = mtr.pid(slot);
    // formatted whole: the record is the free page's header, not a diff of every byte the
    // page held
    mtr.reformat(slot);
    let b = mtr.pg(slot);
    page::init(b, pid, PageType::Free, 0);
    hdr::set_next(b, h.free_head);
    let hb = mtr.pg(hdr_slot);
    put32(hb, OFF_FREE_HEAD, pid.0);
    put32(hb, OFF_FREE_COUNT, h.free_count + 1);
}
