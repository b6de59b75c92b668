//! buffer: the buffer pool. Frames allocated once at open, split into instances (pages hashed
//! to an instance), each with a page table, an LRU list with midpoint insertion, a free list
//! and a flush list ordered by oldest modification LSN.
//!
//! Invariants kept here (docs/invariants.md):
//! - B1: a pin is taken only under the instance mutex or under a read lock of the page-table
//!   shard that maps the frame's page; eviction picks only frames with pin count zero, checked
//!   under that mutex and again under that shard's write lock, which is where the page leaves
//!   the page table. Every latch holder holds a pin, so an evicted frame is never latched.
//!   Lock order: instance mutex, then a page-table shard; a hit takes only the shard (read)
//!   and, when its page must move in the LRU list, the mutex after releasing the shard.
//! - B1': the one pin taken under neither: [`BufferPool::read_frame`] pins a frame it was
//!   given (a guess), then reads the frame's `mapped` page, and latches only if one is there.
//!   Eviction clears `mapped` before it checks the pin count and puts it back if the frame
//!   is pinned, all SeqCst: of the pin and the clearing, each side sees the one that came
//!   first, so either the reader finds no page or the eviction finds the pin. A frame taken
//!   from the free list may carry such a transient pin but is never latched by it.
//! - B2: a frame is on the flush list iff it holds changes not yet written; its key is the LSN
//!   of the first change since it was last written (oldest_modification).
//! - B3 (invariant 1, the WAL rule) lives in [`BufferPool::write_back`], the one function that
//!   writes a page to the data file: the page cleaner, eviction and close all call it.
//! - B4: a page read from disk is used only after `page::verify` accepted it (invariant 4).
//!
//! Never: write a page without going through `write_back`; allocate frames after open.

mod fetch;
mod guard;
mod lru;
mod read_ahead;
mod write_back;

pub use guard::{PageRead, PageWrite};

use crate::counter::Hot;
use crate::error::{Error, Health, Result};
use crate::io::{AlignedBuf, File};
use crate::types::{FrameId, Lsn, PageId};
use lru::{Lru, LruHints};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pages per extent: the unit of read-ahead and of flush_neighbors=2 (and of instance hashing).
pub const EXTENT_PAGES: u32 = 64;

/// The bytes of one frame and which page they hold.
pub struct FrameData {
    /// Not aligned: writes go through a sealed, aligned copy, and the io layer bounces
    /// unaligned O_DIRECT reads. Aligned frames cost a quarter of the pool in allocator
    /// padding at 16 KiB pages (measured: RSS 28% over buffer_pool_size).
    pub(crate) buf: Box<[u8]>,
    pub(crate) page: PageId,
    /// False after a failed read: waiters that pinned the frame must retry.
    valid: bool,
}

struct Frame {
    latch: RwLock<FrameData>,
    pin: AtomicU32,
    /// The page the page table maps to this frame, `PageId::NONE` while the frame is free.
    /// Set and cleared under the shard's write lock together with the page-table entry, so a
    /// reader that holds a pin and sees a page here may latch the frame without the page
    /// table (B1': [`BufferPool::read_frame`], `unmap_unpinned`).
    mapped: AtomicU32,
    /// Read by read-ahead and not accessed since (set by the miss that installs the page,
    /// cleared by its first access or its eviction).
    ra: AtomicBool,
    /// The address of `latch`'s page bytes, which never move (allocated at open, never
    /// replaced): a hit asks the CPU for the page header while it pins and latches. Used only
    /// as a prefetch hint, never dereferenced.
    buf_addr: usize,
}

/// Starts loading the cache line holding `addr` into the CPU cache.
#[inline(always)]
fn prefetch_addr(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = addr as *const i8;
        // SAFETY: a prefetch instruction never faults, writes nothing and has no effect the
        // program can observe except timing, whatever the address; `p` is not dereferenced
        // (callers pass addresses in the pool's frames or page bytes, which live as long as
        // the pool).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

impl Frame {
    /// Starts loading the first `lines` cache lines of the frame's page into the CPU cache.
    #[inline(always)]
    fn prefetch(&self, lines: usize) {
        for i in 0..lines {
            prefetch_addr(self.buf_addr.wrapping_add(i * 64));
        }
    }

    /// Starts loading the cache line holding byte `off` of the frame's page (`off` below the
    /// page size: the caller clamps it).
    #[inline(always)]
    fn prefetch_at(&self, off: usize) {
        prefetch_addr(self.buf_addr.wrapping_add(off));
    }
}

/// A hasher for page numbers: one multiply, with the high bits folded down (the table uses
/// both the low bits, for the bucket, and the top 7, for the control byte).
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 << 32) | n as u64;
    }
}

type PageMap = HashMap<PageId, FrameId, BuildHasherDefault<PageHasher>>;

/// Page-table shards per instance: hits on different pages rarely share a lock word.
const TABLE_SHARDS: usize = 64;

/// One page-table shard, alone on its cache line(s).
#[repr(align(128))]
struct TableShard(RwLock<PageMap>);

#[derive(Clone, Copy)]
struct Meta {
    page: PageId,
    /// Lsn(0) when clean (B2).
    oldest_lsn: Lsn,
    /// The page LSN at the last stamp: a write-back marks the frame clean only if the image it
    /// wrote carried this LSN (nothing changed while it was being written).
    newest_lsn: Lsn,
    /// A write-back of this frame is in flight (InnoDB's io_fix). B5: at most one write of a
    /// page is in flight, so an older image can never land after a newer one.
    io_busy: bool,
    /// While `io_busy`: the start LSN of the first change made after the image being written
    /// was copied (Lsn(0): none). When the write completes, the page is still dirty, but only
    /// from this LSN on, so it moves to this place in the flush list.
    redirty_lsn: Lsn,
}

struct InstState {
    /// The instance's first frame: `meta` is indexed from it.
    base: FrameId,
    free: Vec<FrameId>,
    lru: Lru,
    flush_list: BTreeSet<(Lsn, FrameId)>,
    /// Sum of oldest_modification over the flush list (for the mean dirty age, in O(1)).
    oldest_sum: u128,
    meta: Vec<Meta>,
}

impl InstState {
    fn meta(&self, fid: FrameId) -> &Meta {
        &self.meta[fid.offset_from(self.base)]
    }

    fn meta_mut(&mut self, fid: FrameId) -> &mut Meta {
        let i = fid.offset_from(self.base);
        &mut self.meta[i]
    }
}

impl Meta {
    /// A frame holding `page`, clean and not being written.
    fn clean(page: PageId) -> Self {
        Meta {
            page,
            oldest_lsn: Lsn(0),
            newest_lsn: Lsn(0),
            io_busy: false,
            redirty_lsn: Lsn(0),
        }
    }
}

struct Instance {
    state: Mutex<InstState>,
    /// The page table, sharded by page number: written under `state` (B1), read by hits
    /// without it.
    tables: Box<[TableShard]>,
    /// The LRU list's hints, read by hits without `state`.
    hints: Arc<LruHints>,
    /// The instance's first frame (as `InstState::base`).
    base: FrameId,
}

impl Instance {
    fn table(&self, pid: PageId) -> &RwLock<PageMap> {
        let h = (pid.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        &self.tables[h as usize % TABLE_SHARDS].0
    }

    fn lookup(&self, pid: PageId) -> Option<FrameId> {
        self.table(pid).read().get(&pid).copied()
    }

    /// Pages in the page table.
    fn resident(&self) -> usize {
        self.tables.iter().map(|t| t.0.read().len()).sum()
    }
}

/// Counters of the buffer pool (cumulative since open).
#[derive(Default)]
pub struct PoolCounters {
    /// Bumped by every page access of every thread: striped (`counter::Hot`).
    pub page_requests: Hot,
    pub hits: Hot,
    pub pages_read: AtomicU64,
    /// Reads whose page failed `page::verify` (returned as `Error::CorruptPage`).
    pub pages_read_corrupt: AtomicU64,
    pub pages_written: AtomicU64,
    pub pages_created: AtomicU64,
    pub evictions: AtomicU64,
    pub made_young: AtomicU64,
    pub made_not_young: Hot,
    pub eviction_writes: AtomicU64,
    pub free_frame_waits: AtomicU64,
    pub free_frame_wait_us: AtomicU64,
    /// Clean -> dirty transitions (pages newly dirtied).
    pub pages_dirtied: AtomicU64,
    pub lru_evictions: AtomicU64,
    /// Clean cold pages dropped so that a change could be buffered instead of dirtying them.
    pub cold_drops: AtomicU64,
    pub read_ahead_pages: AtomicU64,
    pub read_ahead_evicted_unused: AtomicU64,
    /// Batches written through the sink (each ends with a data file sync).
    pub write_batches: AtomicU64,
    /// Pages changed while being written: still dirty after the write, from a newer LSN.
    pub pages_redirtied_in_write: AtomicU64,
}

/// A consistent-enough snapshot of pool sizes and counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PoolStatus {
    pub frames: u64,
    pub pages_data: u64,
    pub pages_free: u64,
    pub pages_dirty: u64,
    pub page_requests: u64,
    pub hits: u64,
    pub pages_read: u64,
    /// Reads whose page failed verification (each returned as an error naming the page).
    pub pages_read_corrupt: u64,
    pub pages_written: u64,
    pub pages_created: u64,
    pub evictions: u64,
    pub made_young: u64,
    pub made_not_young: u64,
    pub eviction_writes: u64,
    pub free_frame_waits: u64,
    pub free_frame_wait_us: u64,
    pub pages_dirtied: u64,
    pub lru_evictions: u64,
    pub cold_drops: u64,
    pub read_ahead_pages: u64,
    pub read_ahead_evicted_unused: u64,
    /// Pages changed while being written: still dirty after the write, from a newer LSN.
    pub pages_redirtied_in_write: u64,
}

pub struct PoolConfig {
    pub page_size: usize,
    pub pool_bytes: u64,
    pub instances: usize,
    pub old_blocks_pct: usize,
    pub old_blocks_time_ms: u64,
}

/// Where sealed page images go: straight to the data file, or through the doublewrite area.
pub trait PageSink: Send + Sync {
    /// Writes every image in place durably (the data file is synced before returning).
    fn write_pages(&self, file: &dyn File, pages: &[(PageId, &[u8])]) -> Result<()>;
}

/// Without doublewrite: in-place writes, then one sync. A torn page is still detected on read
/// (checksum and LSN copy) and reported, but cannot be repaired.
pub struct DirectSink;

impl PageSink for DirectSink {
    fn write_pages(&self, file: &dyn File, pages: &[(PageId, &[u8])]) -> Result<()> {
        for (pid, img) in pages {
            file.write_at(img, pid.0 as u64 * img.len() as u64)?;
        }
        file.sync()
    }
}

/// Page images copied and sealed by [`BufferPool::prepare_batch`], their frames marked
/// `io_busy` until this is written or dropped.
pub struct PreparedBatch<'a> {
    pool: &'a BufferPool,
    imgs: Vec<(PageId, FrameId, Lsn, AlignedBuf)>,
}

impl PreparedBatch<'_> {
    /// Pages in the batch.
    pub fn len(&self) -> usize {
        self.imgs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.imgs.is_empty()
    }

    /// The second half of [`BufferPool::flush_batch`]: log durable up to the newest image,
    /// images through the sink, frames that did not change meanwhile marked clean. Returns the
    /// pages written.
    pub fn write(self) -> Result<usize> {
        if self.imgs.is_empty() {
            return Ok(0);
        }
        self.pool.write_clock.begin(Instant::now());
        let r = self.pool.write_images(&self.imgs);
        let pages = r.as_ref().map_or(0, |n| *n as u64);
        self.pool.write_clock.end(pages, Instant::now());
        r
    }
}

impl Drop for PreparedBatch<'_> {
    fn drop(&mut self) {
        for (_, fid, _, _) in &self.imgs {
            self.pool.clear_io_busy(*fid);
        }
    }
}

pub struct BufferPool {
    page_size: usize,
    /// The redo log whose durable LSN gates every write-back (None only in tools that never
    /// change pages).
    wal: Option<Arc<crate::wal::Log>>,
    sink: Box<dyn PageSink>,
    /// The engine's fail-stop state (shared with the log and the doublewrite area).
    health: Arc<Health>,
    /// Frames a thread looking for a free frame scans from the LRU tail (lru_scan_depth).
    victim_scan_depth: AtomicU32,
    /// 0 none, 1 linear, 2 random (read_ahead); and read_ahead_threshold.
    ra_mode: std::sync::atomic::AtomicU8,
    ra_threshold: AtomicU32,
    ra_queue: Mutex<Option<crossbeam::channel::Sender<PageId>>>,
    /// Called when a reader finds no free frame and no clean page near the LRU tail: wakes
    /// the LRU cleaner, and says whether one runs (false: the reader writes pages itself).
    free_frame_waker: std::sync::OnceLock<Box<dyn Fn() -> bool + Send + Sync>>,
    /// Counts the LRU cleaner's additions to the free lists; a reader waiting for a frame
    /// waits on the condvar for it to move.
    frames_freed: (Mutex<u64>, parking_lot::Condvar),
    frames: Box<[Frame]>,
    /// Each frame's `buf_addr` again, apart from the frames: 8 bytes a frame, so the array
    /// stays in the CPU cache where the frames (a cache line each) do not, and a guessed get
    /// finds the page's address without waiting for the frame ([`BufferPool::prefetch_guess`]).
    buf_addrs: Box<[usize]>,
    instances: Box<[Instance]>,
    per_instance: u32,
    file: Arc<dyn File>,
    epoch: Instant,
    /// Time with page writes in flight, every writer's (the page cleaner's device rate).
    pub write_clock: crate::io::busy::BusyClock,
    pub counters: PoolCounters,
}

#[derive(Clone, Copy)]
enum Mode {
    Read,
    Write,
    Create,
    /// Read-ahead: load into the pool, mark as read ahead, latch nothing afterwards.
    Prefetch,
}

enum Latched<'a> {
    R(PageRead<'a>),
    W(PageWrite<'a>),
    /// A prefetch: the page is in the pool, nothing is held.
    Loaded,
}

impl BufferPool {
    /// Allocates every frame now; nothing is allocated per page later.
    pub fn new(
        cfg: &PoolConfig,
        file: Arc<dyn File>,
        wal: Option<Arc<crate::wal::Log>>,
        sink: Box<dyn PageSink>,
        health: Arc<Health>,
    ) -> Result<Self> {
        let total = (cfg.pool_bytes / cfg.page_size as u64) as usize;
        let per_instance = total / cfg.instances.max(1);
        if per_instance < 16 {
            return Err(Error::InvalidOption {
                name: "buffer_pool_size".into(),
                value: cfg.pool_bytes.to_string(),
                expected: format!(
                    "at least 16 pages of {} bytes per instance ({} instances): {} bytes or more",
                    cfg.page_size,
                    cfg.instances,
                    16 * cfg.page_size * cfg.instances
                ),
            });
        }
        let n = per_instance * cfg.instances;
        let frames: Box<[Frame]> = (0..n)
            .map(|_| {
                let buf = vec![0u8; cfg.page_size].into_boxed_slice();
                Frame {
                    buf_addr: buf.as_ptr() as usize,
                    latch: RwLock::new(FrameData {
                        buf,
                        page: PageId::NONE,
                        valid: false,
                    }),
                    pin: AtomicU32::new(0),
                    mapped: AtomicU32::new(PageId::NONE.0),
                    ra: AtomicBool::new(false),
                }
            })
            .collect();
        let instances = (0..cfg.instances)
            .map(|k| {
                let base = (k * per_instance) as u32;
                let frames = base..base + per_instance as u32;
                let lru = Lru::new(
                    FrameId(base),
                    per_instance,
                    cfg.old_blocks_pct,
                    cfg.old_blocks_time_ms,
                );
                let shard_cap = per_instance / TABLE_SHARDS + 16;
                Instance {
                    hints: lru.hints(),
                    tables: (0..TABLE_SHARDS)
                        .map(|_| {
                            TableShard(RwLock::new(PageMap::with_capacity_and_hasher(
                                shard_cap,
                                Default::default(),
                            )))
                        })
                        .collect(),
                    base: FrameId(base),
                    state: Mutex::new(InstState {
                        base: FrameId(base),
                        free: frames.rev().map(FrameId).collect(),
                        lru,
                        flush_list: BTreeSet::new(),
                        oldest_sum: 0,
                        meta: vec![Meta::clean(PageId::NONE); per_instance],
                    }),
                }
            })
            .collect();
        Ok(BufferPool {
            page_size: cfg.page_size,
            wal,
            sink,
            health,
            victim_scan_depth: AtomicU32::new(1024),
            ra_mode: std::sync::atomic::AtomicU8::new(0),
            ra_threshold: AtomicU32::new(56),
            ra_queue: Mutex::new(None),
            free_frame_waker: std::sync::OnceLock::new(),
            frames_freed: (Mutex::new(0), parking_lot::Condvar::new()),
            buf_addrs: frames.iter().map(|f| f.buf_addr).collect(),
            frames,
            instances,
            per_instance: per_instance as u32,
            file,
            epoch: Instant::now(),
            write_clock: crate::io::busy::BusyClock::default(),
            counters: PoolCounters::default(),
        })
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    pub fn file(&self) -> &Arc<dyn File> {
        &self.file
    }

    fn instance_of(&self, pid: PageId) -> usize {
        // Pages of one 64-page extent share an instance (read-ahead works on extents).
        let h = ((pid.0 >> 6) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        (h % self.instances.len() as u64) as usize
    }

    /// The instance frame `fid` belongs to.
    fn instance_of_frame(&self, fid: FrameId) -> usize {
        (fid.0 / self.per_instance) as usize
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn unpin(&self, fid: FrameId) {
        let prev = self.frames[fid.index()].pin.fetch_sub(1, Ordering::Release);
        debug_assert!(prev > 0, "unpin of unpinned frame {fid}");
    }

    fn note_dirty(&self, fid: FrameId, start: Lsn, end: Lsn) {
        let k = self.instance_of_frame(fid);
        let mut st = self.instances[k].state.lock();
        let m = st.meta_mut(fid);
        m.newest_lsn = end;
        if m.oldest_lsn != Lsn(0) && m.io_busy && m.redirty_lsn == Lsn(0) {
            // The first change while a write of the page is in flight. The caller holds the
            // page's exclusive latch and the image was copied under a shared one, so if the
            // copy was taken this change is not in it; if not yet, recording it is merely
            // early. Later changes come after it: the latch orders a page's stamps.
            m.redirty_lsn = start.max(Lsn(1));
        }
        if m.oldest_lsn == Lsn(0) {
            self.counters.pages_dirtied.fetch_add(1, Ordering::Relaxed);
            let oldest = start.max(Lsn(1));
            m.oldest_lsn = oldest;
            st.flush_list.insert((oldest, fid));
            st.oldest_sum += oldest.0 as u128;
        }
    }

    /// Whether page `pid` is in the page table now (resident, or being read in). Takes no
    /// latch and pins nothing, so the answer may be stale at once: the change buffer asks it
    /// under its own per-page lock and pairs it with a fence (btree/ibuf.rs).
    pub fn is_resident(&self, pid: PageId) -> bool {
        self.instances[self.instance_of(pid)].lookup(pid).is_some()
    }

    /// Latches page `pid` shared, reading it from disk if it is not in the pool.
    pub fn read(&self, pid: PageId) -> Result<PageRead<'_>> {
        match self.fetch(pid, Mode::Read)? {
            Latched::R(g) => Ok(g),
            Latched::W(g) => Ok(g.downgrade()),
            Latched::Loaded => unreachable!("read returned a prefetch"),
        }
    }

    /// Latches page `pid` exclusive, reading it from disk if it is not in the pool.
    pub fn write(&self, pid: PageId) -> Result<PageWrite<'_>> {
        match self.fetch(pid, Mode::Write)? {
            Latched::W(g) => Ok(g),
            Latched::R(_) | Latched::Loaded => unreachable!("write fetch returned a read latch"),
        }
    }

    /// A frame for a page that has never been written (the file is being extended): no read.
    /// The caller formats it with `page::init`.
    pub fn create(&self, pid: PageId) -> Result<PageWrite<'_>> {
        match self.fetch(pid, Mode::Create)? {
            Latched::W(g) => Ok(g),
            Latched::R(_) | Latched::Loaded => unreachable!("create returned a read latch"),
        }
    }

    /// Stops every later write-back: after an uncertain I/O failure nothing more may reach
    /// the data file (invariant 5). `why` (the first one is kept) goes into every refusal.
    pub fn poison(&self, why: &str) {
        self.health.fail(why);
    }

    /// Why write-back stopped, once it has.
    pub fn poisoned(&self) -> Option<String> {
        self.health.first_failure()
    }

    /// The fail-stop state this pool shares.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// The LRU cleaner put frames on a free list: wakes the readers waiting for one.
    pub(super) fn notify_frames_freed(&self) {
        *self.frames_freed.0.lock() += 1;
        self.frames_freed.1.notify_all();
    }

    /// The count of [`Self::notify_frames_freed`] calls so far, to wait for the next one.
    pub(super) fn frames_freed_mark(&self) -> u64 {
        *self.frames_freed.0.lock()
    }

    /// Waits up to `d` for frames freed after `mark` was read.
    pub(super) fn wait_frames_freed(&self, mark: u64, d: Duration) {
        let mut n = self.frames_freed.0.lock();
        if *n == mark {
            self.frames_freed.1.wait_for(&mut n, d);
        }
    }

    /// Sets what a reader calls when it finds no free frame (once; later calls are ignored).
    pub fn set_free_frame_waker(&self, f: Box<dyn Fn() -> bool + Send + Sync>) {
        let _ = self.free_frame_waker.set(f);
    }

    /// Sets how many frames a thread that needs a free frame scans from an LRU tail.
    pub fn set_lru_scan_depth(&self, depth: u64) {
        self.victim_scan_depth
            .store(depth.clamp(1, u32::MAX as u64) as u32, Ordering::Relaxed);
    }

    /// Seed 000's dirty %: 100 * dirty / (1 + data + free).
    pub fn dirty_pct(&self) -> f64 {
        let (mut dirty, mut data, mut free) = (0u64, 0u64, 0u64);
        for inst in self.instances.iter() {
            let st = inst.state.lock();
            dirty += st.flush_list.len() as u64;
            // Every page in the page table is on the LRU list (both change under the mutex,
            // together): the list's length counts them without the table's 64 shard locks,
            // which every admission would otherwise take through this.
            debug_assert_eq!(st.lru.len(), inst.resident());
            data += st.lru.len() as u64;
            free += st.free.len() as u64;
        }
        100.0 * dirty as f64 / (1 + data + free) as f64
    }

    /// Data file syncs so far (one per written batch).
    pub fn file_syncs(&self) -> u64 {
        self.counters.write_batches.load(Ordering::Relaxed)
    }

    pub fn instance_count(&self) -> usize {
        self.instances.len()
    }

    pub fn status(&self) -> PoolStatus {
        let mut s = PoolStatus {
            frames: self.frames.len() as u64,
            ..Default::default()
        };
        for inst in self.instances.iter() {
            let st = inst.state.lock();
            s.pages_data += inst.resident() as u64;
            s.pages_free += st.free.len() as u64;
            s.pages_dirty += st.flush_list.len() as u64;
        }
        let c = &self.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.page_requests = c.page_requests.load(Ordering::Relaxed);
        s.hits = c.hits.load(Ordering::Relaxed);
        s.pages_read = ld(&c.pages_read);
        s.pages_read_corrupt = ld(&c.pages_read_corrupt);
        s.pages_written = ld(&c.pages_written);
        s.pages_created = ld(&c.pages_created);
        s.evictions = ld(&c.evictions);
        s.made_young = ld(&c.made_young);
        s.made_not_young = c.made_not_young.load(Ordering::Relaxed);
        s.eviction_writes = ld(&c.eviction_writes);
        s.free_frame_waits = ld(&c.free_frame_waits);
        s.free_frame_wait_us = ld(&c.free_frame_wait_us);
        s.pages_dirtied = ld(&c.pages_dirtied);
        s.lru_evictions = ld(&c.lru_evictions);
        s.cold_drops = ld(&c.cold_drops);
        s.read_ahead_pages = ld(&c.read_ahead_pages);
        s.read_ahead_evicted_unused = ld(&c.read_ahead_evicted_unused);
        s.pages_redirtied_in_write = ld(&c.pages_redirtied_in_write);
        s
    }
}

#[cfg(test)]
mod tests;
