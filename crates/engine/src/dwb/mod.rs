//! dwb: the doublewrite area. A batch of page images is first written (trimmed or compressed
//! as `doublewrite_compression` says) to a fixed area of a separate file and fsynced, and only then written in place in the data file and
//! fsynced, so a page whose in-place write is torn by a crash can be restored from an intact
//! copy before redo runs (redo applies changes to whole pages; it cannot rebuild half of one).
//!
//! # Invariants (numbered D1..D5; DESIGN.md invariants 4 and 5 rest on them)
//!
//! - D1 (order): no byte of a page is written in place before the doublewrite copy of that same
//!   image is durable (written and fsynced).
//! - D2 (reservation): the slots holding a chunk are not written again until every in-place
//!   write of that chunk is durable; until then they hold the only intact copy of those pages.
//! - D3 (recovery restores only valid, newer images): a copy is used only if it decodes and
//!   passes `page::verify` for the page number stored with it; the data copy is replaced only if it fails
//!   `page::verify` (torn, checksum, misplaced, all zero, beyond the end of the file) or carries
//!   a lower LSN than the newest valid slot copy of that page. A torn slot is never restored.
//!   A slot copy older than both LSN copies a damaged data page carries is a stale copy from an
//!   earlier batch and is never restored either (it would silently undo the changes between
//!   the two); such a page, and a damaged page whose only slot copy is corrupt, is reported as
//!   unrepairable and the database refuses to open.
//! - D4 (fail-stop): a failed write or fsync is returned once, naming the file, and is never
//!   retried; every later `write_batch` on the same `Doublewrite` is refused (`Error::Poisoned`).
//!   The caller poisons the engine.
//! - D5 (page LSNs never go back): relied on, not enforced here. Stale slots (from earlier
//!   batches) stay in the file and are harmless only because a page's durable in-place LSN is
//!   never below the LSN of an older copy of it. The file therefore belongs to one data file:
//!   whoever recreates the data file must remove the doublewrite file too, or stale slots of the
//!   old database would look newer than the new database's pages.
//!
//! # Concurrency
//!
//! `write_batch` may be called from many threads. The slots are split into `write_io_threads`
//! segments of equal size (`Doublewrite::open_segments`), each with its own staging buffer and
//! mutex; a batch takes the lowest-numbered free segment (waiting, on a rotating one, only when
//! all are busy) and holds it for the whole batch (every chunk, both phases). D2 forces a writer
//! to keep its slots from its doublewrite write until its data fsync, so writers never share a
//! segment; D1 and D2 hold per segment exactly as with one. Up to `segments` batches (their
//! doublewrite writes, fsyncs and in-place writes) are in flight at once: the device sees a
//! deeper queue, and on SSDs and most file systems concurrent fsyncs overlap rather than queue.
//! The failure state is shared (D4): every write and fsync of every segment checks it first.
//! A page is never in two batches at once (the buffer pool's `io_busy`, B5), so two segments
//! can hold the same page only at different LSNs from batches that did not overlap in time;
//! recovery takes the newest valid copy across all slots, which is the last one written.
//!
//! The slot count is `segments * slots_per_segment` and is recorded in the header; a file opened
//! with another count (`write_io_threads` changed) is read as it is (`recover` needs no
//! geometry: it finds every chunk in the file), and the header is rewritten with the new count.
//!
//! # File (`evenkeel.dblwr`; integers little-endian)
//!
//! Block 0 is a header of `page_size` bytes (so the area stays aligned for O_DIRECT); the slot
//! area follows: in versions 3 (written now) and 2 (read, then rewritten) one region per
//! segment holding its last chunk of page copies, each raw, trimmed (version 3) or compressed;
//! in version 1 (read, then rewritten) one raw page image per slot. The layouts are in
//! `format.rs`.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `EKDW` |
//! | 4 | 4 | format version (3; 1 and 2 are read) |
//! | 8 | 4 | page_size |
//! | 12 | 4 | slots |
//! | 16 | ps-20 | zero |
//! | ps-4 | 4 | crc32c of bytes `0..ps-4` |
//!
//! Cost per chunk of `n` pages: one doublewrite write of the copies (`n * page_size`, or a
//! half to a third of it compressed), two fsyncs, and one in-place write per run of consecutive
//! page numbers (the chunk is sorted by page number).

mod auto;
mod format;
mod header;
mod recover;
mod stats;
mod writer;

#[cfg(test)]
mod tests;

pub use format::{Compression, DwCopy};
pub use stats::DwbStats;

/// The page copies held in the bytes of a doublewrite file (`file`, the whole file as read) of
/// `page_size` pages, valid or not, in file order: for tools and tests that look into the file
/// without opening a database. The format is the header's, or, when the header is damaged, the
/// one the contents show.
pub fn copies_in(file: &[u8], page_size: usize) -> Vec<DwCopy> {
    let block = format::BLOCK.min(page_size);
    let end = file.len() / block * block;
    if end <= page_size {
        return Vec::new();
    }
    let area = &file[page_size..end];
    let version = header::check_page_size(&file[..page_size], page_size)
        .unwrap_or_else(|_| format::version_of(area));
    format::read_area(area, page_size as u64, page_size, version).0
}
pub use writer::Doublewrite;

/// The page size recorded in the doublewrite file's header, when there is a file with a
/// readable one (used to find a damaged data file header's copy).
pub fn stored_page_size(storage: &dyn crate::io::Storage) -> Option<usize> {
    if !storage.exists(DWB_FILE_NAME) {
        return None;
    }
    let f = storage
        .open(DWB_FILE_NAME, crate::io::FileKind::Doublewrite, false)
        .ok()?;
    let mut head = [0u8; 16];
    f.read_at(&mut head, 0).ok()?;
    header::stored_page_size(&head)
}

/// The doublewrite file's name in the database directory.
pub const DWB_FILE_NAME: &str = "evenkeel.dblwr";

/// Upper limit on the number of slots (and so on the largest chunk).
pub const MAX_SLOTS: usize = 4096;

/// Upper limit on the slot area, whatever the page size.
pub const MAX_AREA_BYTES: usize = 64 << 20;

/// What [`Doublewrite::recover`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DwbReport {
    /// Slots holding a page image that passed `page::verify`.
    pub slots_valid: usize,
    /// Slots holding bytes that are not a valid page image (torn or corrupted): not used.
    pub slots_corrupt: usize,
    /// Slots never written (all zero, or beyond the end of the doublewrite file).
    pub slots_empty: usize,
    /// Distinct pages whose data copy was compared with their newest valid slot copy.
    pub pages_checked: usize,
    /// Pages restored in place from the doublewrite area, in page order.
    pub pages_repaired: Vec<u32>,
    /// Of `pages_repaired`, those whose data copy failed `page::verify` (torn or corrupted; the
    /// others were older or beyond the end of the file).
    pub pages_damaged: usize,
    /// Pages damaged in place whose doublewrite copy cannot be used (corrupted too, or older
    /// than the damaged page claims to be), with the reason; left as they are. Opening a
    /// database refuses when this is not empty.
    pub pages_unrepairable: Vec<(u32, String)>,
    /// The highest LSN any valid slot carries, and that slot's page. A slot image was written
    /// only after the log was durable up to its LSN (WAL), so a recovered log ending below it
    /// lost durable writes (a lost fsync) or belongs to another database.
    pub newest_slot: Option<(crate::types::Lsn, u32)>,
}
