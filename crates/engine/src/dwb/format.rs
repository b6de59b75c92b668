//! The slot area's two formats: how a chunk of page images is laid out in the doublewrite file
//! (version 3, written now; version 2 is the same without trimmed entries) and how every
//! version is read back.
//!
//! Version 1 (read only): slot `i` at `(1 + i) * page_size` holds a raw page image.
//!
//! Versions 2 and 3: segment `k` has `seg_bytes = slots_per_segment * page_size + 4096` bytes at
//! `page_size + k * seg_bytes`; a chunk is written at its segment's start: a 64-byte chunk header,
//! then one entry per page, each starting 64-byte aligned, then zeros to the next 4 KiB (O_DIRECT
//! writes whole blocks). An entry stores its page image compressed when
//! `doublewrite_compression` asks for it (zstd or LZ4; zstd for a share of them with auto,
//! `auto.rs`) and that is smaller, else raw. With every setting but `none` (version 3), a
//! B+tree page's copy first leaves out the free space between its slot array and its cells:
//! that costs a copy of the bytes kept, and no CPU beyond it. Written B+tree pages compress to a
//! half or a third (the free space between the slot array and the cells, repeated key
//! prefixes), and the copy is half of the bytes a page write costs, so the doublewrite's share
//! of the device falls by that much. PostgreSQL compresses its torn-page copies (full-page
//! images in the WAL) for the same reason.
//!
//! Chunk header (little-endian):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `EKDB` |
//! | 4 | 4 | entries |
//! | 8 | 4 | chunk bytes (header and entries, before the zero padding) |
//! | 12 | 4 | crc32c of bytes `0..12` |
//! | 16 | 48 | zero |
//!
//! Entry:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | page number |
//! | 4 | 4 | stored length `n` |
//! | 8 | 8 | the image's LSN |
//! | 16 | 1 | encoding: 0 raw, 1 LZ4 block, 2 zstd frame; plus 128 when trimmed (version 3) |
//! | 17 | 7 | zero |
//! | 24 | 4 | crc32c of bytes `0..24`, then of the `n` stored bytes |
//! | 28 | 4 | zero (checked) |
//! | 32 | n | the stored image |
//!
//! A trimmed entry's `n` stored bytes start with the left-out range's start and end offsets
//! (u32 each); the rest is the image without those bytes, encoded as the low bits say. It
//! decodes to the page with zeros in that range, sealed again (the range's old bytes are no
//! part of the page's contents, but were part of its checksum).
//!
//! Reading needs no geometry: every 4 KiB-aligned offset of the area is tried as a chunk start,
//! so a file written with another segment count (`write_io_threads`) reads the same. A chunk's
//! entries are read in order from its header's count and length; bytes past them (older,
//! longer chunks overwritten at the same start) are never read, so an older entry half
//! overwritten is not mistaken for a torn one. Each entry carries its own checksum: a chunk torn
//! by a crash keeps the entries before the tear (valid copies whose in-place writes had not
//! started, D1) and its torn entries count as corrupt, as torn version 1 slots did. The image an
//! entry decodes to is then checked with `page::verify` like a version 1 slot (D3).

use crate::page::{self, hdr};
use crate::types::{Lsn, PageId};

const CHUNK_MAGIC: &[u8; 4] = b"EKDB";
const CHUNK_HEADER: usize = 64;
const ENTRY_HEADER: usize = 32;
const ENTRY_ALIGN: usize = 64;
/// Chunk starts and write lengths are multiples of this (O_DIRECT's block).
pub(super) const BLOCK: usize = 4096;
const RAW: u8 = 0;
const LZ4: u8 = 1;
const ZSTD: u8 = 2;
/// Added to an encoding (version 3): the stored bytes leave out a B+tree page's free space
/// between its slot array and its cells, and start with where it was (`TRIM_HEADER`).
const TRIMMED: u8 = 0x80;
/// The trimmed range's start and end offsets (u32 each) before a trimmed image.
const TRIM_HEADER: usize = 8;
/// The least free space worth leaving out: less saves no alignment unit once the trim header
/// is paid.
const MIN_TRIM: usize = TRIM_HEADER + ENTRY_ALIGN;
/// zstd's level: its fastest positive one. On pages written by TPC-C and by the insert
/// benchmark it kept 0.49 and 0.31 of the bytes, against LZ4's 0.66 and 0.47, at about 30 µs
/// a 16 KiB page against 14-21 (docs/measurements.md, "The doublewrite copies compressed").
const ZSTD_LEVEL: i32 = 1;

/// How copies are stored (the `doublewrite_compression` option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    Lz4,
    Zstd,
    /// zstd for a share of the copies that grows while the device is the limit of page writes
    /// and the CPUs have room, and shrinks while they have none (`dwb/auto.rs`).
    Auto,
    /// No compression: B+tree pages' copies leave out their free space, which costs a copy of
    /// the bytes kept and nothing more. (Every kind but `None` trims first.)
    Trim,
}

impl Compression {
    /// From the option's index: none, lz4, zstd, auto, trim.
    pub fn from_index(i: usize) -> Compression {
        match i {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd,
            3 => Compression::Auto,
            _ => Compression::Trim,
        }
    }
}

/// A segment's compressor: its output buffer and, for zstd, its context (made once: making
/// one costs more than compressing a page).
pub(super) struct Coder {
    kind: Compression,
    /// With [`Compression::Auto`]: the share of copies to compress, 0 to 1 (set per chunk by
    /// the writer from `Auto::share`).
    pub share: f64,
    /// With [`Compression::Auto`]: the share's sum over the copies since the last one
    /// compressed; a copy is compressed each time it reaches 1, so the compressed ones are
    /// spread evenly over the copies written.
    credit: f64,
    /// Copies stored compressed since the writer last reset this.
    pub compressed: usize,
    /// Whether copies of B+tree pages leave out their free space (every kind but `none`).
    trim: bool,
    /// Copies stored trimmed since the writer last reset this.
    pub trimmed: usize,
    /// A trimmed image: the page without its free space.
    body: Vec<u8>,
    scratch: Vec<u8>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl Coder {
    pub fn new(kind: Compression, page_size: usize) -> Coder {
        let zstd = match kind {
            // A context that cannot be made (out of memory) leaves the copies raw.
            Compression::Zstd | Compression::Auto => zstd::bulk::Compressor::new(ZSTD_LEVEL).ok(),
            _ => None,
        };
        Coder {
            kind,
            share: 0.0,
            credit: 0.0,
            compressed: 0,
            trim: kind != Compression::None,
            trimmed: 0,
            body: vec![0; page_size],
            scratch: vec![
                0;
                lz4_flex::block::get_maximum_output_size(page_size)
                    .max(zstd::zstd_safe::compress_bound(page_size))
            ],
            zstd,
        }
    }

    /// With auto: whether the next copy is one of the share compressed.
    fn take_credit(&mut self) -> bool {
        self.credit += self.share;
        if self.credit >= 1.0 {
            self.credit -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether the next copy is to be compressed (with auto, this takes its credit).
    fn compresses_next(&mut self) -> bool {
        match self.kind {
            Compression::None | Compression::Trim => false,
            Compression::Lz4 | Compression::Zstd => true,
            Compression::Auto => self.take_credit(),
        }
    }

    /// The compressed bytes of `image` in the scratch buffer, and their encoding; None when
    /// not compressing or when it failed.
    fn compress(&mut self, image: &[u8]) -> Option<(u8, usize)> {
        match self.kind {
            Compression::None | Compression::Trim => None,
            Compression::Lz4 => lz4_flex::block::compress_into(image, &mut self.scratch)
                .ok()
                .map(|n| (LZ4, n)),
            Compression::Zstd | Compression::Auto => self
                .zstd
                .as_mut()?
                .compress_to_buffer(image, &mut self.scratch[..])
                .ok()
                .map(|n| (ZSTD, n)),
        }
    }
}

/// Bytes of a version 2 segment: room for `slots_per_segment` page images, plus a block so
/// that even one incompressible page (entry header, image, alignment) fits a one-slot segment.
pub(super) fn seg_bytes(page_size: usize, slots_per_segment: usize) -> usize {
    slots_per_segment * page_size + BLOCK
}

/// The largest entry a page of `page_size` can take.
pub(super) fn max_entry(page_size: usize) -> usize {
    (ENTRY_HEADER + page_size).next_multiple_of(ENTRY_ALIGN)
}

/// Where a chunk's first entry goes.
pub(super) const FIRST_ENTRY: usize = CHUNK_HEADER;

/// Writes `image` (of page `pid`) as an entry at the start of `out`, which has room for
/// [`max_entry`], compressed by `coder`; returns the entry's length including its alignment
/// padding (zeroed).
pub(super) fn encode_entry(pid: PageId, image: &[u8], out: &mut [u8], coder: &mut Coder) -> usize {
    let ps = image.len();
    let (head, rest) = out.split_at_mut(ENTRY_HEADER);
    // The free space left out first (B+tree pages), so compression reads only live bytes.
    let gap = if coder.trim { free_gap(image) } else { None };
    let (flag, skip, kept) = match gap {
        Some((start, end)) => {
            rest[0..4].copy_from_slice(&(start as u32).to_le_bytes());
            rest[4..8].copy_from_slice(&(end as u32).to_le_bytes());
            (TRIMMED, TRIM_HEADER, ps - (end - start))
        }
        None => (0, 0, ps),
    };
    let (encoding, n) = if coder.compresses_next() {
        let mut body = std::mem::take(&mut coder.body);
        let source = match gap {
            Some(gap) => {
                copy_kept(image, gap, &mut body[..kept]);
                &body[..kept]
            }
            None => image,
        };
        // Compressed only when that saves at least an alignment unit.
        let stored = match coder.compress(source) {
            Some((encoding, n)) if n + ENTRY_ALIGN <= kept => {
                rest[skip..skip + n].copy_from_slice(&coder.scratch[..n]);
                coder.compressed += 1;
                (encoding | flag, skip + n)
            }
            _ => {
                rest[skip..skip + kept].copy_from_slice(source);
                (RAW | flag, skip + kept)
            }
        };
        coder.body = body;
        stored
    } else {
        // Stored as it is: the kept bytes go straight to the entry, copied once.
        let dst = &mut rest[skip..skip + kept];
        match gap {
            Some(gap) => copy_kept(image, gap, dst),
            None => dst.copy_from_slice(image),
        }
        (RAW | flag, skip + kept)
    };
    coder.trimmed += usize::from(gap.is_some());
    head.fill(0);
    head[0..4].copy_from_slice(&pid.0.to_le_bytes());
    head[4..8].copy_from_slice(&(n as u32).to_le_bytes());
    head[8..16].copy_from_slice(&hdr::lsn(image).0.to_le_bytes());
    head[16] = encoding;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..24]), &rest[..n]);
    head[24..28].copy_from_slice(&crc.to_le_bytes());
    let len = (ENTRY_HEADER + n).next_multiple_of(ENTRY_ALIGN);
    out[ENTRY_HEADER + n..len].fill(0);
    len
}

/// Copies `image` without its bytes `[start, end)` into `dst` (their length less the gap's).
fn copy_kept(image: &[u8], (start, end): (usize, usize), dst: &mut [u8]) {
    dst[..start].copy_from_slice(&image[..start]);
    dst[start..].copy_from_slice(&image[end..]);
}

/// A B+tree page's free space between its slot array and its cells, `[start, end)`, when it
/// is worth leaving out of its copy; None for every other page and for a header that does
/// not describe a valid layout (the copy is then stored whole).
fn free_gap(image: &[u8]) -> Option<(usize, usize)> {
    let ps = image.len();
    if !matches!(
        hdr::page_type(image),
        Some(page::PageType::Leaf | page::PageType::Internal)
    ) {
        return None;
    }
    let start = page::node::slot_pos(hdr::nslots(image));
    let end = hdr::heap_top(image);
    (start <= end && end <= ps - page::PAGE_TRAILER_SIZE && end - start >= MIN_TRIM)
        .then_some((start, end))
}

/// Writes the chunk header for `entries` entries ending at byte `end` of the chunk, and zeroes
/// the padding up to the next block; returns the bytes to write.
pub(super) fn seal_chunk(chunk: &mut [u8], entries: usize, end: usize) -> usize {
    let head = &mut chunk[..CHUNK_HEADER];
    head.fill(0);
    head[0..4].copy_from_slice(CHUNK_MAGIC);
    head[4..8].copy_from_slice(&(entries as u32).to_le_bytes());
    head[8..12].copy_from_slice(&(end as u32).to_le_bytes());
    let crc = crc32c::crc32c(&head[..12]);
    head[12..16].copy_from_slice(&crc.to_le_bytes());
    let len = end.next_multiple_of(BLOCK);
    chunk[end..len].fill(0);
    len
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One page copy found in the doublewrite file.
#[derive(Clone, Debug)]
pub struct DwCopy {
    /// Byte offset of the copy in the doublewrite file (a version 1 slot, or a version 2
    /// entry), for messages.
    pub offset: u64,
    /// The page number the copy claims.
    pub page: u32,
    /// The page image, checked with `page::verify` for `page`; or what is wrong with the copy
    /// (torn or corrupted: never used).
    pub image: Result<Vec<u8>, String>,
}

impl DwCopy {
    /// The LSN of a valid copy.
    pub fn lsn(&self) -> Option<Lsn> {
        self.image.as_ref().ok().map(|b| hdr::lsn(b))
    }
}

/// The page copies in a doublewrite file's slot area, `area` read from file offset `base`
/// (the first byte after the header), in file order, and the slot-sized blocks of a version 1
/// area that were never written (all zero).
pub(super) fn read_area(
    area: &[u8],
    base: u64,
    page_size: usize,
    version: u32,
) -> (Vec<DwCopy>, usize) {
    if version == 1 {
        read_v1(area, base, page_size)
    } else {
        (read_v2(area, base, page_size), 0)
    }
}

/// The format of an area whose header was damaged: version 2 if any block starts a valid
/// chunk, else version 1 (raw slots).
pub(super) fn version_of(area: &[u8]) -> u32 {
    let chunk_at = |start: usize| {
        area.get(start..start + CHUNK_HEADER).is_some_and(|head| {
            &head[0..4] == CHUNK_MAGIC && le_u32(head, 12) == crc32c::crc32c(&head[..12])
        })
    };
    if (0..area.len()).step_by(BLOCK).any(chunk_at) {
        2
    } else {
        1
    }
}

fn checked(page_no: u32, image: Vec<u8>) -> Result<Vec<u8>, String> {
    page::verify(&image, PageId(page_no))
        .map(|()| image)
        .map_err(|f| f.to_string())
}

fn read_v1(area: &[u8], base: u64, ps: usize) -> (Vec<DwCopy>, usize) {
    let mut copies = Vec::new();
    let mut empty = 0;
    for (slot, image) in area.chunks_exact(ps).enumerate() {
        if image.iter().all(|&b| b == 0) {
            empty += 1;
            continue;
        }
        let page = hdr::page_no(image).0;
        copies.push(DwCopy {
            offset: base + (slot * ps) as u64,
            page,
            image: checked(page, image.to_vec()),
        });
    }
    (copies, empty)
}

fn read_v2(area: &[u8], base: u64, ps: usize) -> Vec<DwCopy> {
    let mut copies = Vec::new();
    let mut start = 0;
    while start + CHUNK_HEADER <= area.len() {
        let head = &area[start..start + CHUNK_HEADER];
        let valid = &head[0..4] == CHUNK_MAGIC
            && le_u32(head, 12) == crc32c::crc32c(&head[..12])
            && (le_u32(head, 8) as usize) <= area.len() - start;
        if !valid {
            start += BLOCK;
            continue;
        }
        let (entries, end) = (le_u32(head, 4) as usize, le_u32(head, 8) as usize);
        let chunk = &area[start..start + end];
        let mut at = FIRST_ENTRY;
        for _ in 0..entries {
            if at + ENTRY_HEADER > chunk.len() {
                break;
            }
            let e = &chunk[at..at + ENTRY_HEADER];
            let page = le_u32(e, 0);
            let n = le_u32(e, 4) as usize;
            let offset = base + (start + at) as u64;
            let stored = chunk.get(at + ENTRY_HEADER..at + ENTRY_HEADER + n);
            let image = match stored {
                Some(s)
                    if n <= ps
                        && le_u32(e, 28) == 0
                        && le_u32(e, 24) == crc32c::crc32c_append(crc32c::crc32c(&e[..24]), s) =>
                {
                    decode(e[16], s, ps).and_then(|img| checked(page, img))
                }
                _ => Err("doublewrite entry checksum mismatch (torn or corrupted)".to_string()),
            };
            copies.push(DwCopy {
                offset,
                page,
                image,
            });
            // A damaged length sends the walk past the chunk's end, which ends it.
            at += (ENTRY_HEADER + n).next_multiple_of(ENTRY_ALIGN);
        }
        start += end.next_multiple_of(BLOCK).max(BLOCK);
    }
    copies
}

fn decode(encoding: u8, stored: &[u8], ps: usize) -> Result<Vec<u8>, String> {
    if encoding & TRIMMED == 0 {
        return decode_bytes(encoding, stored, ps);
    }
    if stored.len() < TRIM_HEADER {
        return Err("trimmed doublewrite entry shorter than its header".to_string());
    }
    let (start, end) = (le_u32(stored, 0) as usize, le_u32(stored, 4) as usize);
    if !(page::PAGE_HEADER_SIZE <= start && start <= end && end <= ps - page::PAGE_TRAILER_SIZE) {
        return Err(format!(
            "trimmed doublewrite entry leaves out bytes {start}..{end} of a {ps}-byte page"
        ));
    }
    let kept = ps - (end - start);
    let body = decode_bytes(encoding & !TRIMMED, &stored[TRIM_HEADER..], kept)?;
    let mut image = vec![0u8; ps];
    image[..start].copy_from_slice(&body[..start]);
    image[end..].copy_from_slice(&body[start..]);
    // The free space was not kept, so the page is sealed again over the zeros put there: its
    // other bytes are what was written (the entry's checksum covered them).
    page::seal(&mut image);
    Ok(image)
}

/// Decodes `stored` to `len` bytes.
fn decode_bytes(encoding: u8, stored: &[u8], len: usize) -> Result<Vec<u8>, String> {
    match encoding {
        RAW if stored.len() == len => Ok(stored.to_vec()),
        LZ4 => {
            let mut out = vec![0u8; len];
            match lz4_flex::block::decompress_into(stored, &mut out) {
                Ok(n) if n == len => Ok(out),
                Ok(n) => Err(format!("doublewrite entry decodes to {n} bytes, not {len}")),
                Err(e) => Err(format!("doublewrite entry does not decode: {e}")),
            }
        }
        ZSTD => {
            let mut out = vec![0u8; len];
            match zstd::bulk::decompress_to_buffer(stored, &mut out[..]) {
                Ok(n) if n == len => Ok(out),
                Ok(n) => Err(format!("doublewrite entry decodes to {n} bytes, not {len}")),
                Err(e) => Err(format!("doublewrite entry does not decode: {e}")),
            }
        }
        _ => Err(format!(
            "doublewrite entry of unknown encoding {encoding} or length {}",
            stored.len()
        )),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Leaf `pid` of `n` cells at `lsn` whose free space holds old bytes (as a page's free
    /// space does after deletes and compactions), sealed.
    pub(in crate::dwb) fn leaf_with_old_free_space(
        ps: usize,
        pid: u32,
        n: usize,
        lsn: u64,
    ) -> Vec<u8> {
        let mut b = vec![0u8; ps];
        page::init(&mut b, PageId(pid), page::PageType::Leaf, 3);
        for i in 0..n {
            let k = format!("key{i:05}");
            assert!(page::node::insert_leaf_inline(
                &mut b,
                i,
                k.as_bytes(),
                &[i as u8; 40]
            ));
        }
        let (start, end) = free_gap(&b).expect("room left");
        for (j, x) in b[start..end].iter_mut().enumerate() {
            *x = (j * 7 + 1) as u8;
        }
        hdr::set_lsn(&mut b, Lsn(lsn));
        page::seal(&mut b);
        b
    }

    fn leaf(ps: usize, n: usize) -> Vec<u8> {
        leaf_with_old_free_space(ps, 9, n, 77)
    }

    /// Every kind but none leaves a B+tree page's free space out of its copy, and the copy
    /// decodes to a page that verifies with the same header, slots and cells, and zeros where
    /// the free space was.
    #[test]
    fn trimmed_copies_decode_to_the_page_without_its_free_space() {
        let ps = 4096;
        let image = leaf(ps, 20);
        let (start, end) = free_gap(&image).expect("room left");
        assert!(end - start > ps / 2, "{start}..{end}");
        let mut want = image.clone();
        want[start..end].fill(0);
        page::seal(&mut want);
        for kind in [
            Compression::None,
            Compression::Trim,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut coder = Coder::new(kind, ps);
            let mut out = vec![0u8; max_entry(ps)];
            let len = encode_entry(PageId(9), &image, &mut out, &mut coder);
            let n = le_u32(&out, 4) as usize;
            let back = decode(out[16], &out[ENTRY_HEADER..ENTRY_HEADER + n], ps)
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            page::verify(&back, PageId(9)).unwrap_or_else(|f| panic!("{kind:?}: {f}"));
            if kind == Compression::None {
                assert_eq!((out[16], coder.trimmed, len), (RAW, 0, max_entry(ps)));
                assert_eq!(back, image);
            } else {
                assert_eq!(coder.trimmed, 1, "{kind:?}");
                assert_ne!(out[16] & TRIMMED, 0, "{kind:?}");
                assert!(n <= TRIM_HEADER + ps - (end - start), "{kind:?}: {n}");
                assert_eq!(back, want, "{kind:?}");
            }
        }
        // Not a B+tree page, or too little free space: stored whole.
        let mut coder = Coder::new(Compression::Trim, ps);
        let mut out = vec![0u8; max_entry(ps)];
        let mut overflow = vec![0u8; ps];
        page::init(&mut overflow, PageId(4), page::PageType::Overflow, 1);
        page::seal(&mut overflow);
        encode_entry(PageId(4), &overflow, &mut out, &mut coder);
        assert_eq!((out[16], coder.trimmed), (RAW, 0));
        let mut full = vec![0u8; ps];
        page::init(&mut full, PageId(9), page::PageType::Leaf, 3);
        let mut i = 0;
        while page::node::insert_leaf_inline(
            &mut full,
            i,
            format!("key{i:05}").as_bytes(),
            &[1; 40],
        ) {
            i += 1;
        }
        page::seal(&mut full);
        assert_eq!(free_gap(&full), None, "{i} cells");
        encode_entry(PageId(9), &full, &mut out, &mut coder);
        assert_eq!((out[16], coder.trimmed), (RAW, 0));
    }

    /// A trimmed entry whose range does not fit the page is refused, not decoded.
    #[test]
    fn a_trimmed_entry_with_a_range_outside_the_page_is_refused() {
        let ps = 4096;
        for (start, end) in [(10u32, 100u32), (200, 100), (200, 4095), (200, 9000)] {
            let mut stored = vec![0u8; 64];
            stored[0..4].copy_from_slice(&start.to_le_bytes());
            stored[4..8].copy_from_slice(&end.to_le_bytes());
            let e = decode(RAW | TRIMMED, &stored, ps).expect_err("refused");
            assert!(e.contains("leaves out bytes"), "{e}");
        }
        assert!(decode(RAW | TRIMMED, &[1, 2, 3], ps).is_err());
    }

    /// auto's coder compresses the share it is given of the copies it writes, spread evenly,
    /// and every copy decodes to its page whichever way it was stored.
    #[test]
    fn auto_compresses_its_share_of_the_copies_spread_evenly() {
        let ps = 4096;
        let image = vec![7u8; ps];
        for (share, pages, want) in [
            (0.0, 10, 0),
            (1.0, 10, 10),
            (0.25, 8, 2),
            (0.5, 9, 4),
            (0.75, 8, 6),
        ] {
            let mut coder = Coder::new(Compression::Auto, ps);
            coder.share = share;
            let mut out = vec![0u8; max_entry(ps)];
            let mut stored = Vec::new();
            for k in 0..pages {
                let before = coder.compressed;
                encode_entry(PageId(k), &image, &mut out, &mut coder);
                stored.push(coder.compressed > before);
                let n = le_u32(&out, 4) as usize;
                assert_eq!(out[16] == RAW, !stored[k as usize]);
                let back = decode(out[16], &out[ENTRY_HEADER..ENTRY_HEADER + n], ps);
                assert_eq!(back.as_deref(), Ok(&image[..]), "share {share}, copy {k}");
            }
            assert_eq!(coder.compressed, want, "share {share}: {stored:?}");
            // Spread: never two compressed in a row at a half or less, never two raw over it.
            if share > 0.0 && share <= 0.5 {
                assert!(
                    !stored.windows(2).any(|w| w[0] && w[1]),
                    "{share}: {stored:?}"
                );
            } else if share > 0.5 {
                assert!(
                    !stored.windows(2).any(|w| !w[0] && !w[1]),
                    "{share}: {stored:?}"
                );
            }
        }
    }
}
