//! overflow: values too large for a leaf cell live in a chain of overflow pages.
//!
//! The leaf cell keeps the total length and the first page; each overflow page holds up to
//! page_size - 48 bytes and the next page number. Chains are written and freed inside the
//! mtr that changes the leaf, so a value is never half-replaced.

use super::Ctx;
use crate::error::{Error, Result};
use crate::mtr::{Mtr, Slot};
use crate::page::{self, hdr, node, PageType};
use crate::space;
use crate::types::PageId;

fn bad(cx_file: &str, pid: PageId, why: impl Into<String>) -> Error {
    Error::corrupt(cx_file, pid.0, why)
}

/// Number of overflow pages a value of `len` bytes needs.
pub fn pages_for(page_size: usize, len: usize) -> usize {
    len.div_ceil(page::overflow_capacity(page_size))
}

/// The value of leaf record `i` (reading its overflow chain if it has one).
pub fn read_value(cx: &Ctx<'_>, owner: u32, leaf: &[u8], i: usize) -> Result<Vec<u8>> {
    match node::leaf_value(leaf, i) {
        node::LeafValue::Inline(v) => Ok(v.to_vec()),
        node::LeafValue::Overflow { len, first } => read_chain(cx, owner, first, len),
    }
}

pub fn read_chain(cx: &Ctx<'_>, owner: u32, first: PageId, len: usize) -> Result<Vec<u8>> {
    let file = cx.pool.file().name().to_string();
    let mut out = Vec::with_capacity(len);
    let mut pid = first;
    let max_pages = pages_for(cx.pool.page_size(), len);
    for _ in 0..max_pages {
        let g = cx.pool.read(pid)?;
        if hdr::page_type(&g) != Some(PageType::Overflow) || hdr::owner(&g) != owner {
            return Err(bad(&file, pid, "expected an overflow page of this table"));
        }
        let data = page::overflow::data(&g).ok_or_else(|| bad(&file, pid, "overflow length"))?;
        out.extend_from_slice(data);
        pid = hdr::next(&g);
        if out.len() >= len {
            break;
        }
    }
    if out.len() != len {
        return Err(bad(
            &file,
            first,
            format!(
                "overflow chain holds {} bytes, the record says {len}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// X-latches every page of a chain in `mtr` (before anything is changed).
pub fn latch_chain(mtr: &mut Mtr<'_>, owner: u32, first: PageId, len: usize) -> Result<Vec<Slot>> {
    let n = pages_for(mtr.pool().page_size(), len);
    let mut slots = Vec::with_capacity(n);
    let mut pid = first;
    for _ in 0..n {
        let s = mtr.write(pid)?;
        let b = mtr.peek(s);
        if hdr::page_type(b) != Some(PageType::Overflow) || hdr::owner(b) != owner {
            return Err(bad(
                mtr.pool().file().name(),
                pid,
                "expected an overflow page of this table",
            ));
        }
        pid = hdr::next(b);
        slots.push(s);
    }
    Ok(slots)
}

/// Allocates and fills a chain for `value`; returns its first page.
pub fn write_chain(mtr: &mut Mtr<'_>, hdr_slot: Slot, owner: u32, value: &[u8]) -> Result<PageId> {
    let cap = page::overflow_capacity(mtr.pool().page_size());
    let chunks: Vec<&[u8]> = value.chunks(cap).collect();
    let mut slots = Vec::with_capacity(chunks.len());
    for _ in &chunks {
        slots.push(space::allocate(mtr, hdr_slot, PageType::Overflow, owner)?);
    }
    for (k, chunk) in chunks.iter().enumerate() {
        let next = slots.get(k + 1).map_or(PageId::NONE, |&s| mtr.pid(s));
        page::overflow::write(mtr.pg(slots[k]), chunk, next);
    }
    Ok(slots.first().map_or(PageId::NONE, |&s| mtr.pid(s)))
}
