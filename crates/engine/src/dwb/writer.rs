//! [`Doublewrite`]: opening (or creating) the doublewrite file, and the write path — a batch of
//! sealed page images through the slots, then in place.
//!
//! What must stay true: D1 and D2 (`dwb/mod.rs`): within a chunk the order is always doublewrite
//! write, doublewrite fsync, in-place writes, data fsync, and the segment's mutex is held across
//! all four, so no other chunk can overwrite that segment's slots before the in-place copies are
//! durable. Segments never share a slot. D4: the first failure is returned as is (it names the
//! file) and poisons this `Doublewrite` (every segment): every write or fsync of every segment
//! checks the shared failure state first, so nothing is written anywhere after it; nothing is
//! retried. Must never write a page image that fails `page::verify` (that is a caller bug: panic).

use super::format;
use super::header;
use super::stats::{Counters, DwbStats};
use super::{DWB_FILE_NAME, MAX_AREA_BYTES, MAX_SLOTS};
use crate::error::{Error, Health, Result};
use crate::io::{AlignedBuf, File, FileKind, Storage};
use crate::page::{self, PAGE_SIZES};
use crate::types::PageId;
use parking_lot::{Mutex, MutexGuard};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The doublewrite area of one data file. `Send + Sync`: share it between page cleaners.
pub struct Doublewrite {
    pub(super) file: Arc<dyn File>,
    /// Full path of the doublewrite file, for error messages.
    pub(super) path: String,
    pub(super) page_size: usize,
    pub(super) slots: usize,
    /// The slots split into equal runs; each held for a whole batch (see "Concurrency" in
    /// `dwb/mod.rs`). `recover` takes them all.
    pub(super) segments: Vec<Mutex<Segment>>,
    /// The segment the next `write_batch` waits on when all are busy.
    next_segment: AtomicUsize,
    /// Set (with `failed`) by the first failed write or fsync of any segment (D4).
    /// The engine's fail-stop state (D4); fresh unless [`Doublewrite::with_health`] shares
    /// the engine's.
    health: Arc<Health>,
    pub(super) counters: Counters,
    header_repaired: bool,
    /// The format the slot area was written in: the header's version, or None when the header
    /// was damaged (`recover` then tells by the contents).
    pub(super) area_version: Option<u32>,
    /// The header must be rewritten (this version, this geometry) before the first chunk: set
    /// when the file was of version 1 or its header was damaged. Deferred until after `recover`,
    /// which reads the area in the format it was written in; rewriting first would leave a
    /// crash in between with a header that misdescribes the area.
    header_pending: Mutex<bool>,
    /// With `doublewrite_compression = auto`: the share of copies compressed (`auto.rs`).
    auto: Option<super::auto::Auto>,
    /// How copies are stored (`with_compression`).
    compression: format::Compression,
}

pub(super) struct Segment {
    /// Byte offset of this segment's area in the doublewrite file.
    pub offset: u64,
    /// `format::seg_bytes` bytes, allocated once: the chunk as written to the area.
    pub staging: AlignedBuf,
    /// `slots_per_segment * page_size` bytes, allocated once: the chunk's images as they are
    /// written in place (consecutive pages become one write).
    pub raw: AlignedBuf,
    /// This segment's compressor.
    pub coder: format::Coder,
}

impl std::fmt::Debug for Doublewrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doublewrite")
            .field("path", &self.path)
            .field("page_size", &self.page_size)
            .field("slots", &self.slots)
            .field("segments", &self.segments.len())
            .finish_non_exhaustive()
    }
}

impl Doublewrite {
    /// Opens `evenkeel.dblwr` in `storage` with one segment of `slots` slots (see
    /// [`Doublewrite::open_segments`]).
    pub fn open(storage: &dyn Storage, page_size: usize, slots: usize) -> Result<Doublewrite> {
        Self::open_segments(storage, page_size, 1, slots)
    }

    /// Opens `evenkeel.dblwr` in `storage`, creating it when missing (or when an earlier create
    /// was interrupted before any slot was written), with room for `segments` segments of
    /// `slots_per_segment` pages of `page_size`: up to `segments` batches are written at once.
    /// An existing file must have been created with the same page size; one created with
    /// another slot count (another `write_io_threads`) is taken as it is (`recover` reads every
    /// slot present in the file, whatever the header says) and its header is rewritten.
    pub fn open_segments(
        storage: &dyn Storage,
        page_size: usize,
        segments: usize,
        slots_per_segment: usize,
    ) -> Result<Doublewrite> {
        let path = PathBuf::from(storage.describe())
            .join(DWB_FILE_NAME)
            .display()
            .to_string();
        if segments == 0 || segments > MAX_SLOTS {
            return Err(Error::InvalidConfig {
                origin: path,
                reason: format!(
                    "{segments} doublewrite segments: the valid range is 1..={MAX_SLOTS}"
                ),
            });
        }
        let slots = segments.saturating_mul(slots_per_segment);
        check_geometry(&path, page_size, slots)?;
        let existed = storage.exists(DWB_FILE_NAME);
        let file = storage.open(DWB_FILE_NAME, FileKind::Doublewrite, true)?;
        let (state, found_version) = if existed {
            header_state(&*file, &path, page_size, slots)?
        } else {
            (HeaderState::Absent, Some(header::FORMAT_VERSION))
        };
        if state == HeaderState::Resized && found_version == Some(header::FORMAT_VERSION) {
            tracing::info!(
                "{path}: slot count changed to {slots} ({segments} segments); slots are read \
                 as the file holds them"
            );
        }
        let defer = state == HeaderState::Damaged || found_version != Some(header::FORMAT_VERSION);
        if state != HeaderState::Valid && !defer {
            file.write_at(&header::encode(page_size, slots), 0)?;
            // IMPORTANT: the header must be durable before any slot is written: a file whose
            // header is unreadable but whose slots hold pages would be refused at open.
            file.sync()?;
            // IMPORTANT: a new file is not durable until its directory entry is.
            storage.sync_dir()?;
        }
        Ok(Doublewrite {
            file,
            path,
            page_size,
            slots,
            segments: (0..segments)
                .map(|k| {
                    let bytes = format::seg_bytes(page_size, slots_per_segment);
                    Mutex::new(Segment {
                        offset: (page_size + k * bytes) as u64,
                        staging: AlignedBuf::new(bytes),
                        raw: AlignedBuf::new(slots_per_segment * page_size),
                        coder: format::Coder::new(format::Compression::default(), page_size),
                    })
                })
                .collect(),
            next_segment: AtomicUsize::new(0),
            health: Health::new(),
            counters: Counters::default(),
            header_repaired: state == HeaderState::Damaged,
            area_version: found_version,
            header_pending: Mutex::new(defer),
            auto: None,
            compression: format::Compression::default(),
        })
    }

    /// The header was damaged at open and has been rewritten.
    pub fn header_repaired(&self) -> bool {
        self.header_repaired
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Batches that can be in flight at once.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Slots of each segment: the largest chunk.
    pub fn slots_per_segment(&self) -> usize {
        self.slots / self.segments.len()
    }

    /// All segments, in order (for `recover`: no batch may run meanwhile).
    pub(super) fn lock_all(&self) -> Vec<MutexGuard<'_, Segment>> {
        self.segments.iter().map(|s| s.lock()).collect()
    }

    /// A free segment: the lowest-numbered free one; only when all are busy does the caller
    /// wait, on one picked by a rotating index (so waiters spread over the segments). Lowest
    /// first rather than rotating: a lone writer keeps reusing segment 0, the same 64 slots as
    /// with one segment; rotating it over all segments measured 5-13% fewer pages/s with
    /// flush_method = fsync (`figures.rs`).
    fn take_segment(&self) -> MutexGuard<'_, Segment> {
        for seg in &self.segments {
            if let Some(g) = seg.try_lock() {
                return g;
            }
        }
        let n = self.segments.len();
        self.segments[self.next_segment.fetch_add(1, Ordering::Relaxed) % n].lock()
    }

    /// Stores the copies with `compression` (the `doublewrite_compression` option; raw
    /// unless set). Reading takes every kind whatever this is: each copy names its own.
    pub fn with_compression(mut self, compression: format::Compression) -> Self {
        for seg in &self.segments {
            seg.lock().coder = format::Coder::new(compression, self.page_size);
        }
        self.compression = compression;
        self.auto = (compression == format::Compression::Auto)
            .then(|| super::auto::Auto::new(super::auto::proc_stat_cpu, Instant::now()));
        self
    }

    /// The share of copies being compressed now, 0 to 1: all of them with lz4 or zstd, none
    /// with none or trim, and with auto the share it last decided.
    pub fn compressed_share(&self) -> f64 {
        match (&self.auto, self.compression) {
            (Some(a), _) => a.share(),
            (None, format::Compression::None | format::Compression::Trim) => 0.0,
            (None, _) => 1.0,
        }
    }

    /// Shares the engine's fail-stop state: a failure here stops every writer, and a failure
    /// anywhere stops this area's writes.
    pub fn with_health(mut self, health: Arc<Health>) -> Self {
        self.health = health;
        self
    }

    /// D4: refuses once any segment (or, with a shared state, any writer) has failed.
    fn check_poison(&self) -> Result<()> {
        if let Some(first) = self.health.first_failure() {
            return Err(Error::Poisoned(format!(
                "doublewrite {}: an earlier write or fsync failed ({first})",
                self.path
            )));
        }
        Ok(())
    }

    fn set_poison(&self, e: &Error) {
        self.health.fail(&e.to_string());
    }

    pub fn stats(&self) -> DwbStats {
        self.counters.snapshot()
    }

    /// Where the slot area starts: after the header block.
    pub(super) fn area_offset(&self) -> u64 {
        self.page_size as u64
    }

    /// Rewrites the header for this version and geometry if open deferred it, before any chunk
    /// is written (see `header_pending`).
    fn write_pending_header(&self) -> Result<()> {
        let mut pending = self.header_pending.lock();
        if *pending {
            self.check_poison()?;
            self.file
                .write_at(&header::encode(self.page_size, self.slots), 0)?;
            // IMPORTANT: durable before the first chunk: a crash after a chunk must find a
            // header that says how the area is written.
            self.file.sync()?;
            Counters::add(&self.counters.fsyncs, 1);
            *pending = false;
        }
        Ok(())
    }

    /// Writes sealed page images to `data` through the doublewrite area; returns when both the
    /// slot copies and the in-place copies are durable. The batch goes through one free segment
    /// (other threads' batches go through the others meanwhile); batches larger than a segment
    /// are written as several chunks, one after the other. A page may appear more than once: its
    /// images are written in LSN order, so the newest lands last, as recovery would choose.
    ///
    /// Panics if an image is not `page_size` bytes; debug builds also panic if one fails
    /// `page::verify` for its `PageId`. Release builds leave that check to the producer: the
    /// buffer pool's `prepare_batch`, which seals every image and refuses an invalid one before
    /// it reaches a sink (the checksum and the layout walk would otherwise run twice per page).
    pub fn write_batch(&self, data: &dyn File, pages: &[(PageId, &[u8])]) -> Result<()> {
        for (pid, image) in pages {
            assert_eq!(
                image.len(),
                self.page_size,
                "page {pid}: image of wrong size"
            );
            if cfg!(debug_assertions) {
                if let Err(fault) = page::verify(image, *pid) {
                    panic!("page {pid} handed to the doublewrite unsealed or invalid: {fault}");
                }
            }
        }
        if pages.is_empty() {
            return Ok(());
        }
        // Page order, so consecutive pages of a chunk become one in-place write; LSN order
        // within a page, so the newest image of a page is the one left in place.
        let mut order: Vec<usize> = (0..pages.len()).collect();
        order.sort_by_key(|&i| (pages[i].0, page::hdr::lsn(pages[i].1)));
        self.check_poison()?;
        let mut seg = self.take_segment();
        let mut rest: Vec<(PageId, &[u8])> = order.iter().map(|&i| pages[i]).collect();
        let mut images = &mut rest[..];
        while !images.is_empty() {
            let done = self
                .write_pending_header()
                .and_then(|()| self.write_chunk(&mut seg, data, images));
            match done {
                Ok(n) => images = &mut images[n..],
                Err(e) => {
                    if !matches!(e, Error::Poisoned(_)) {
                        self.set_poison(&e);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// One chunk in `seg`, both phases: the first of `images` (sorted by page number) that fit
    /// the segment, at most its slot count of them; returns how many it took (at least one).
    /// Every write and fsync is preceded by a check of the shared failure state (D4: once any
    /// segment failed, nothing more is written anywhere).
    fn write_chunk(
        &self,
        seg: &mut Segment,
        data: &dyn File,
        images: &[(PageId, &[u8])],
    ) -> Result<usize> {
        let ps = self.page_size;
        let Segment {
            offset: seg_offset,
            staging,
            raw,
            coder,
        } = seg;
        let room = staging.len();
        let mut end = format::FIRST_ENTRY;
        let mut n = 0;
        if let Some(a) = &self.auto {
            coder.share = a.share();
        }
        coder.compressed = 0;
        coder.trimmed = 0;
        for (pid, image) in images.iter().take(self.slots_per_segment()) {
            if end + format::max_entry(ps) > room {
                break;
            }
            end += format::encode_entry(*pid, image, &mut staging[end..], coder);
            raw[n * ps..(n + 1) * ps].copy_from_slice(image);
            n += 1;
        }
        let images = &images[..n];
        let len = format::seal_chunk(staging, n, end);
        // The device's busy time is measured from the copies' write to the in-place fsync, on
        // success or failure alike (an interval left open would count forever).
        let _io = self.auto.as_ref().map(IoSpan::new);
        self.check_poison()?;
        self.file.write_at(&staging[..len], *seg_offset)?;
        // IMPORTANT (D1): the slot copies must be durable before any page of this chunk is
        // written in place; an in-place write torn by a crash is repairable only from them.
        self.check_poison()?;
        self.file.sync()?;
        Counters::add(&self.counters.fsyncs, 1);

        let mut run_start = 0;
        for k in 1..=images.len() {
            let next_follows = images
                .get(k)
                .is_some_and(|(pid, _)| Some(pid.0) == images[k - 1].0 .0.checked_add(1));
            if next_follows {
                continue;
            }
            let offset = u64::from(images[run_start].0 .0) * ps as u64;
            self.check_poison()?;
            data.write_at(&raw[run_start * ps..k * ps], offset)?;
            Counters::add(&self.counters.data_writes, 1);
            run_start = k;
        }
        // IMPORTANT (D2): the in-place copies must be durable before these slots are reused by
        // the next chunk or batch, and before the caller treats the pages as clean.
        self.check_poison()?;
        data.sync()?;
        Counters::add(&self.counters.fsyncs, 1);

        Counters::add(&self.counters.batches, 1);
        Counters::add(&self.counters.pages_written, n as u64);
        Counters::add(&self.counters.bytes_written, (len + n * ps) as u64);
        Counters::add(&self.counters.copy_bytes, len as u64);
        Counters::add(&self.counters.copies_compressed, coder.compressed as u64);
        Counters::add(&self.counters.copies_trimmed, coder.trimmed as u64);
        Ok(n)
    }
}

/// A chunk's IO for `auto`: begun when made, ended when dropped.
struct IoSpan<'a>(&'a super::auto::Auto);

impl<'a> IoSpan<'a> {
    fn new(auto: &'a super::auto::Auto) -> Self {
        auto.io_begin(Instant::now());
        IoSpan(auto)
    }
}

impl Drop for IoSpan<'_> {
    fn drop(&mut self) {
        self.0.io_end(Instant::now());
    }
}

fn check_geometry(path: &str, page_size: usize, slots: usize) -> Result<()> {
    let bad = |reason: String| Error::InvalidConfig {
        origin: path.to_string(),
        reason,
    };
    if !PAGE_SIZES.contains(&page_size) {
        return Err(bad(format!(
            "page_size {page_size} is not one of {PAGE_SIZES:?}"
        )));
    }
    if slots == 0 || slots > max_slots(page_size) {
        return Err(bad(format!(
            "{slots} doublewrite slots of {page_size} bytes: the valid range is 1..={} slots \
             and at most {MAX_AREA_BYTES} bytes of slots",
            max_slots(page_size)
        )));
    }
    Ok(())
}

/// The most slots a doublewrite file of `page_size` pages can have.
pub(super) fn max_slots(page_size: usize) -> usize {
    MAX_SLOTS.min(MAX_AREA_BYTES / page_size)
}

/// The longest a doublewrite file of `page_size` pages can be (and so the most `recover`
/// reads, whatever the header says): the header, the slots, and a block per segment.
pub(super) fn max_file_len(page_size: usize) -> u64 {
    (page_size + max_slots(page_size) * page_size + MAX_SLOTS * format::BLOCK) as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeaderState {
    Valid,
    /// Valid, same page size, another slot count (another `write_io_threads`): rewritten. The
    /// slot layout does not depend on the count, and `recover` reads every slot in the file.
    Resized,
    /// Never written (create interrupted) or no file.
    Absent,
    /// Damaged over slots: rewritten, slots read with the configured geometry.
    Damaged,
}

/// Valid when the existing file has a valid header for this geometry; Absent when an earlier
/// create was interrupted: the file is no longer than a header block whose page size is unknown
/// or the configured one, and the header is not valid. No slot can have been written then, since
/// slots are written only after a durable header. Any other defect is an error naming the file:
/// its slots may hold the only intact copy of a page.
fn header_state(
    file: &dyn File,
    path: &str,
    page_size: usize,
    slots: usize,
) -> Result<(HeaderState, Option<u32>)> {
    let len = file.len()?;
    let mut head = vec![0u8; len.min(16) as usize];
    file.read_at(&mut head, 0)?;
    let stored_ps = header::stored_page_size(&head);
    let header_len = stored_ps.unwrap_or(page_size);
    let mut raw = vec![0u8; len.min(header_len as u64) as usize];
    file.read_at(&mut raw, 0)?;
    match header::check(&raw, page_size, slots) {
        Ok(()) => Ok((HeaderState::Valid, Some(header::FORMAT_VERSION))),
        Err(_) if let Ok(version) = header::check_page_size(&raw, page_size) => {
            Ok((HeaderState::Resized, Some(version)))
        }
        Err(_) if len <= header_len as u64 && stored_ps.is_none_or(|s| s == page_size) => {
            Ok((HeaderState::Absent, Some(header::FORMAT_VERSION)))
        }
        // A damaged header (bad checksum or magic) over slots: the copies are self-verifying
        // (each checked against the page number it holds) and read without the geometry, in
        // the format the contents show; the header is rewritten before the next write. A
        // readable header that disagrees with the configuration stays an error.
        Err(reason)
            if header::is_damage(&raw)
                && len % page_size.min(format::BLOCK) as u64 == 0
                && len <= max_file_len(page_size) =>
        {
            tracing::warn!(
                "{path}: {reason}; the header is rewritten, the copies are checked one by one"
            );
            Ok((HeaderState::Damaged, None))
        }
        Err(reason) => Err(Error::BadDatabase {
            path: PathBuf::from(path),
            reason,
        }),
    }
}
