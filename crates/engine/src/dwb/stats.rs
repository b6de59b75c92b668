//! Counters of the doublewrite area, kept as relaxed atomics and read as one [`DwbStats`]
//! snapshot.
//!
//! What must stay true: counters only count (never drive decisions); an operation that failed is
//! not counted as done.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the doublewrite counters since [`super::Doublewrite::open`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DwbStats {
    /// Chunks written through the area (a `write_batch` larger than the slot count is several):
    /// each one doublewrite write, one doublewrite fsync, in-place writes, one data fsync.
    pub batches: u64,
    /// Pages made durable in place through the area.
    pub pages_written: u64,
    /// Bytes written by `write_batch` to both files: the chunks to the doublewrite file and
    /// `pages_written * page_size` in place.
    pub bytes_written: u64,
    /// Of `bytes_written`, those written to the doublewrite file (compressed copies, their
    /// headers and each chunk's padding to a 4 KiB block).
    pub copy_bytes: u64,
    /// Page copies stored compressed (`doublewrite_compression`; with auto, the share it
    /// chose; a page that does not compress by at least 64 bytes is stored raw).
    pub copies_compressed: u64,
    /// Page copies stored without their free space (B+tree pages, with every
    /// `doublewrite_compression` but none; counted whether or not they were also compressed).
    pub copies_trimmed: u64,
    /// In-place write calls (one per run of consecutive page numbers in a chunk).
    pub data_writes: u64,
    /// fsyncs issued by `write_batch` and `recover`, on either file.
    pub fsyncs: u64,
    /// Pages restored in place by `recover`.
    pub pages_repaired: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub batches: AtomicU64,
    pub pages_written: AtomicU64,
    pub bytes_written: AtomicU64,
    pub copy_bytes: AtomicU64,
    pub copies_compressed: AtomicU64,
    pub copies_trimmed: AtomicU64,
    pub data_writes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub pages_repaired: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> DwbStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DwbStats {
            batches: g(&self.batches),
            pages_written: g(&self.pages_written),
            bytes_written: g(&self.bytes_written),
            copy_bytes: g(&self.copy_bytes),
            copies_compressed: g(&self.copies_compressed),
            copies_trimmed: g(&self.copies_trimmed),
            data_writes: g(&self.data_writes),
            fsyncs: g(&self.fsyncs),
            pages_repaired: g(&self.pages_repaired),
        }
    }
}
