//! Page lookup: a hit pins the frame under a read lock of its page-table shard (no instance
//! mutex), touches the LRU only when the page must move in it, and latches the frame; a miss
//! takes a free frame (evicting a clean page from the LRU tail, or writing a batch of dirty
//! tail pages when none is clean), installs the page and reads it outside the instance mutex
//! (B1, B4 in mod.rs).

use super::lru::{Peek, Touch};
use super::{BufferPool, InstState, Latched, Meta, Mode, PageRead, PageWrite};
use crate::error::{Error, Result};
use crate::page;
use crate::types::{FrameId, Lsn, PageId};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Dirty pages a user thread writes at once when it finds no clean page to evict.
const FOREGROUND_FLUSH_BATCH: usize = 32;
/// A reader with no free frame waits for the LRU cleaner as long as the cleaner frees frames
/// (any reader's), and writes dirty tail pages itself only when the cleaner has freed none
/// for this long: the cleaner is stuck behind a stalled device or a failed write, where a
/// reader's own batch is the only way on. Writing sooner does not get a frame sooner where
/// the device is the limit: the reader's batch (a doublewrite write, two fsyncs, the in-place
/// writes) queues behind the cleaner's on the same device, and takes device time from it.
/// MariaDB 10.5 and later removed InnoDB's single-page flush by user threads for the same
/// reason (`buf_LRU_get_free_block` waits for the page cleaner instead).
const CLEANER_STALLED: Duration = Duration::from_secs(1);
/// One wait for the cleaner's next freed batch, before the reader looks again.
const CLEANER_WAIT_STEP: Duration = Duration::from_millis(2);
/// How far a reader looks for a clean page when the LRU tail holds none, in tail depths
/// (`lru_scan_depth`): at the default 1,024, the old sublist of a pool up to about 11,000
/// frames (173 MiB of 16 KiB pages), and 4,096 frames of a larger one.
const DEEP_SCAN_TAILS: usize = 4;

/// How many times a thread retries for a free frame when every frame is pinned, before it
/// reports the pool as too small for the concurrency asked of it.
const FREE_FRAME_RETRIES: u32 = 2000;

impl BufferPool {
    pub(super) fn fetch(&self, pid: PageId, mode: Mode) -> Result<Latched<'_>> {
        self.counters.page_requests.fetch_add(1, Ordering::Relaxed);
        let k = self.instance_of(pid);
        let inst = &self.instances[k];
        loop {
            let hit = {
                let table = inst.table(pid).read();
                let hit = table.get(&pid).copied();
                if let Some(fid) = hit {
                    // the page header and the start of the slot array, loading while the
                    // frame is pinned and latched
                    self.frames[fid.index()].prefetch(2);
                    // pin under the shard's read lock (B1): eviction unmaps under its write
                    // lock and only an unpinned frame
                    self.frames[fid.index()].pin.fetch_add(1, Ordering::Acquire);
                }
                hit
            };
            if let Some(fid) = hit {
                match self.fetch_hit(k, fid, pid, mode) {
                    Some(latched) => return Ok(latched),
                    None => continue, // the frame was reused for another page: look again
                }
            }
            let st = inst.state.lock();
            if inst.lookup(pid).is_some() {
                continue; // installed meanwhile (pages are installed under the mutex)
            }
            // Miss: find a frame, install the page, read it outside the mutex.
            let fid = match self.take_free_frame(k, st)? {
                Some(fid) => fid,
                None => continue, // the mutex was released: re-check the page table
            };
            if let Some(latched) = self.fetch_miss(k, fid, pid, mode)? {
                return Ok(latched);
            }
        }
    }

    /// Latches shared whatever page frame `fid` holds now, without the page table: for a
    /// caller that remembers a frame (the adaptive hash index, btree/ahi.rs). None when the
    /// frame holds no page (free, being evicted, or its read failed) or is not a frame of
    /// this pool. The page latched is the frame's page now, which may be another page than
    /// the one the caller remembers: the caller checks `page_id()` or the content. Counted
    /// as a page request and a hit, and touches the LRU list as a hit does. The page header
    /// and the cache line of byte `also` (the caller's guess of what it reads first) start
    /// loading while the frame is latched.
    /// Starts loading, all at once, what a read of frame `fid` guessed by the adaptive hash
    /// index touches: the frame itself (its pin and latch), its page's header, and bytes `at`
    /// of the page (the slot, the cell; each clamped to the page). Without it each is a
    /// cache miss that waits for the one before: the frame's, for the page's address; the
    /// slot's, for the cell's. Nothing is read or pinned: the frame may hold another page by
    /// the time it is latched, which costs only the loads.
    #[inline]
    pub fn prefetch_guess<const N: usize>(&self, fid: FrameId, at: [usize; N]) {
        let (Some(frame), Some(&base)) = (
            self.frames.get(fid.index()),
            self.buf_addrs.get(fid.index()),
        ) else {
            return;
        };
        super::prefetch_addr(std::ptr::from_ref(frame) as usize);
        super::prefetch_addr(base);
        for off in at {
            super::prefetch_addr(base.wrapping_add(off.min(self.page_size - 1)));
        }
    }

    pub fn read_frame(&self, fid: FrameId, also: usize) -> Option<PageRead<'_>> {
        let frame = self.frames.get(fid.index())?;
        // B1' (mod.rs): the pin before the page, both SeqCst against unmap_unpinned
        frame.pin.fetch_add(1, Ordering::SeqCst);
        let pid = PageId(frame.mapped.load(Ordering::SeqCst));
        if pid.is_none() {
            self.unpin(fid);
            return None;
        }
        frame.prefetch(1);
        frame.prefetch_at(also.min(self.page_size - 1));
        self.counters.page_requests.fetch_add(1, Ordering::Relaxed);
        // the frame may have been freed and taken for another page since the load: fetch_hit
        // checks the page under the latch and unpins when it differs
        match self.fetch_hit(self.instance_of_frame(fid), fid, pid, Mode::Read)? {
            Latched::R(g) => Some(g),
            Latched::W(_) | Latched::Loaded => unreachable!("a read hit returned no read latch"),
        }
    }

    /// A hit on `fid` of instance `k` (found for `pid` and pinned by the caller): touches the
    /// LRU, and latches it as `mode` asks. None when the frame no longer holds `pid` once
    /// latched (the caller looks again).
    fn fetch_hit(&self, k: usize, fid: FrameId, pid: PageId, mode: Mode) -> Option<Latched<'_>> {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
        let inst = &self.instances[k];
        // The mutex only when the page may move; the clock only for an old page.
        match inst
            .hints
            .peek(fid.offset_from(inst.base), || self.now_ms())
        {
            Peek::Young => {}
            Peek::NotYoung => {
                self.counters.made_not_young.fetch_add(1, Ordering::Relaxed);
            }
            Peek::Move => match inst.state.lock().lru.touch(fid, self.now_ms()) {
                Touch::MadeYoung => {
                    self.counters.made_young.fetch_add(1, Ordering::Relaxed);
                }
                Touch::NotYoung => {
                    self.counters.made_not_young.fetch_add(1, Ordering::Relaxed);
                }
                Touch::AlreadyYoung => {}
            },
        }
        let frame = &self.frames[fid.index()];
        if matches!(mode, Mode::Prefetch) {
            self.unpin(fid);
            return Some(Latched::Loaded);
        }
        // The first access of a page read ahead may trigger linear read-ahead, as a miss does
        // (InnoDB: buf_read_ahead_linear only when the page had not been accessed); later hits
        // do not, or every hit on an extent's last page would queue the next extent again.
        if frame.ra.load(Ordering::Relaxed) && frame.ra.swap(false, Ordering::Relaxed) {
            self.maybe_read_ahead(pid, false);
        }
        let latched = match mode {
            Mode::Read => {
                let g = frame.latch.read();
                if !g.valid || g.page != pid {
                    drop(g);
                    self.unpin(fid);
                    return None;
                }
                Latched::R(PageRead {
                    pool: self,
                    fid,
                    g: Some(g),
                })
            }
            _ => {
                let mut g = frame.latch.write();
                if !g.valid || g.page != pid {
                    drop(g);
                    self.unpin(fid);
                    return None;
                }
                if matches!(mode, Mode::Create) {
                    // read ahead past the old end of the file: whatever was read is
                    // not the page's content; a new page starts from zeros
                    g.buf.fill(0);
                }
                Latched::W(PageWrite {
                    pool: self,
                    fid,
                    g: Some(g),
                    modified: false,
                })
            }
        };
        Some(latched)
    }

    /// A miss on `pid` with the free frame `fid` of instance `k`: installs the page in the
    /// page table and the LRU, and reads it (or zeroes it for `Create`) under the frame's
    /// exclusive latch, outside the instance mutex. None when another thread installed `pid`
    /// first (the frame goes back to the free list and the caller looks again).
    fn fetch_miss(
        &self,
        k: usize,
        fid: FrameId,
        pid: PageId,
        mode: Mode,
    ) -> Result<Option<Latched<'_>>> {
        let inst = &self.instances[k];
        let mut st = inst.state.lock();
        let mut table = inst.table(pid).write();
        if table.contains_key(&pid) {
            drop(table);
            st.free.push(fid);
            return Ok(None);
        }
        let frame = &self.frames[fid.index()];
        let Some(mut g) = frame.latch.try_write() else {
            unreachable!("free frame {fid} is latched (B1 broken)");
        };
        frame.pin.fetch_add(1, Ordering::Acquire);
        frame
            .ra
            .store(matches!(mode, Mode::Prefetch), Ordering::Relaxed);
        table.insert(pid, fid);
        // after the exclusive latch: a read_frame that sees the page waits for the read
        frame.mapped.store(pid.0, Ordering::SeqCst);
        drop(table);
        *st.meta_mut(fid) = Meta::clean(pid);
        let now = self.now_ms();
        st.lru.insert_new(fid, now);
        drop(st);
        g.page = pid;
        if matches!(mode, Mode::Create) {
            g.buf.fill(0);
            g.valid = true;
            self.counters.pages_created.fetch_add(1, Ordering::Relaxed);
        } else if let Err(e) = self.read_into(pid, &mut g.buf) {
            g.valid = false;
            g.page = PageId::NONE;
            let mut st = inst.state.lock();
            let mut table = inst.table(pid).write();
            table.remove(&pid);
            frame.mapped.store(PageId::NONE.0, Ordering::SeqCst);
            drop(table);
            frame.ra.store(false, Ordering::Relaxed);
            st.lru.remove(fid);
            st.meta_mut(fid).page = PageId::NONE;
            st.free.push(fid);
            drop(st);
            drop(g);
            self.unpin(fid);
            return Err(e);
        } else {
            g.valid = true;
        }
        let w = PageWrite {
            pool: self,
            fid,
            g: Some(g),
            modified: false,
        };
        if matches!(mode, Mode::Prefetch) {
            self.counters
                .read_ahead_pages
                .fetch_add(1, Ordering::Relaxed);
            drop(w);
            return Ok(Some(Latched::Loaded));
        }
        if !matches!(mode, Mode::Create) {
            self.maybe_read_ahead(pid, true);
        }
        Ok(Some(match mode {
            Mode::Read => Latched::R(w.downgrade()),
            _ => Latched::W(w),
        }))
    }

    fn read_into(&self, pid: PageId, buf: &mut [u8]) -> Result<()> {
        let off = pid.0 as u64 * self.page_size as u64;
        self.file.read_at(buf, off).map_err(|e| match e {
            Error::Io { file, source, .. } => Error::PageRead {
                file,
                page: pid.0,
                source,
            },
            other => other,
        })?;
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        page::verify(buf, pid).map_err(|f| {
            self.counters
                .pages_read_corrupt
                .fetch_add(1, Ordering::Relaxed);
            Error::corrupt(self.file.name(), pid.0, f.to_string())
        })
    }

    /// Takes a free frame of instance `k`, evicting a clean page from the LRU tail if needed,
    /// or writing back a dirty one (through `write_back`) when no clean page is near the tail.
    /// Returns None when it had to release the mutex (the caller re-checks its page table).
    fn take_free_frame<'a>(
        &'a self,
        k: usize,
        mut st: parking_lot::MutexGuard<'a, InstState>,
    ) -> Result<Option<FrameId>> {
        let inst = &self.instances[k];
        let mut waited: Option<Instant> = None;
        // when this reader last saw the LRU cleaner free a frame (or began to wait)
        let mut progress = Instant::now();
        let mut cleaner = true;
        let mut tries = 0u32;
        let mut deep = true;
        loop {
            if let Some(fid) = st.free.pop() {
                self.count_wait(waited);
                return Ok(Some(fid));
            }
            let (clean_victim, dirty_victims) = self.scan_tail(&st, deep);
            deep = false;
            if let Some(fid) = clean_victim {
                if self.evict(k, &mut st, fid) {
                    self.count_wait(waited);
                    return Ok(Some(fid));
                }
                continue; // pinned by a hit since the scan: look again
            }
            if waited.is_none() {
                waited = Some(Instant::now());
                self.counters
                    .free_frame_waits
                    .fetch_add(1, Ordering::Relaxed);
            }
            if !dirty_victims.is_empty() && cleaner && progress.elapsed() < CLEANER_STALLED {
                // Ask the LRU cleaner and wait for the frames it frees: writing here is what
                // the LRU cleaner exists to avoid (counted and timed as a wait).
                if let Some(wake) = self.free_frame_waker.get() {
                    let mark = self.frames_freed_mark();
                    drop(st);
                    if wake() {
                        self.wait_frames_freed(mark, CLEANER_WAIT_STEP);
                        if self.frames_freed_mark() != mark {
                            progress = Instant::now();
                        }
                        st = inst.state.lock();
                        continue;
                    }
                    // no LRU cleaner runs: look again (the mutex was released), then write
                    cleaner = false;
                    st = inst.state.lock();
                    continue;
                }
            }
            if !dirty_victims.is_empty() {
                drop(st);
                // A user thread writing for a free frame: what LRU cleaning exists to avoid.
                // It writes a batch of the coldest dirty pages, not one: through the
                // doublewrite area every batch costs two fsyncs, so one page per batch made
                // each miss pay them (measured: throughput fell 2.5x as these grew).
                let n = self.flush_batch(&dirty_victims)?;
                if n > 0 {
                    self.counters
                        .eviction_writes
                        .fetch_add(n as u64, Ordering::Relaxed);
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                }
                return Ok(None);
            }
            tries += 1;
            if tries > FREE_FRAME_RETRIES {
                return Err(Error::Poisoned(format!(
                    "buffer pool instance {k} has all {} frames pinned: buffer_pool_size is too \
                     small for the number of concurrent threads",
                    self.per_instance
                )));
            }
            drop(st);
            std::thread::sleep(Duration::from_micros(500));
            st = inst.state.lock();
        }
    }

    /// The LRU tail (as deep as `lru_scan_depth`): the first unpinned clean page, and up to
    /// FOREGROUND_FLUSH_BATCH unpinned dirty pages before it that no one is writing. `deep`:
    /// when the tail holds no clean page, look for one on through the rest of the old
    /// sublist.
    ///
    /// Why deep, once per frame taken: dirty pages settle at the tail (the readers and the LRU
    /// cleaner evict the clean ones around them, and the dirty ones wait to be written), so
    /// on a device that is the limit the first `lru_scan_depth` frames can be all dirty while
    /// clean pages lie just beyond them. Evicting one of those costs a scan; waiting for the
    /// LRU cleaner's next batch costs a doublewrite write and two fsyncs on a busy device.
    /// InnoDB's `buf_LRU_get_free_block` does the same from its second try on, over the
    /// whole list; the old sublist is as far as this goes, so no page made young (touched
    /// again after `old_blocks_time`) is evicted for it, and never more than
    /// [`DEEP_SCAN_TAILS`] times the tail's depth, so a large pool's miss is not O(pool) under
    /// the mutex. Not on every retry: a reader that waits rescans only the tail, so an old
    /// sublist without a clean page is walked once per frame, not once per wait.
    fn scan_tail(&self, st: &InstState, deep: bool) -> (Option<FrameId>, Vec<FrameId>) {
        let mut dirty_victims: Vec<FrameId> = Vec::new();
        let mut clean_victim = None;
        // Never the whole list: scanning it under the mutex on every miss made each miss
        // O(pool) and evicted hot internal pages under puts.
        let depth = self.victim_scan_depth.load(Ordering::Relaxed) as usize;
        let depth = if deep {
            depth.max(st.lru.old_len().min(depth * DEEP_SCAN_TAILS))
        } else {
            depth
        };
        for fid in st.lru.tail_iter(depth) {
            if self.frames[fid.index()].pin.load(Ordering::Acquire) != 0 {
                continue;
            }
            let m = st.meta(fid);
            if m.oldest_lsn == Lsn(0) {
                clean_victim = Some(fid);
                break;
            }
            // a page being written right now is clean in a moment: do not write it again
            if dirty_victims.len() < FOREGROUND_FLUSH_BATCH && !m.io_busy {
                dirty_victims.push(fid);
            }
        }
        (clean_victim, dirty_victims)
    }

    /// Removes clean `fid`'s page from instance `k`'s page table if no one holds a pin on it
    /// (B1: checked under the shard's write lock, where hits pin, with the instance mutex
    /// held by the caller, where everyone else pins). False, changing nothing, when pinned.
    pub(super) fn unmap_unpinned(&self, k: usize, st: &InstState, fid: FrameId) -> bool {
        let pid = st.meta(fid).page;
        let frame = &self.frames[fid.index()];
        let mut table = self.instances[k].table(pid).write();
        // B1': clear `mapped`, then look at the pin (see mod.rs); a pin taken by read_frame
        // before the clearing is seen here, one taken after it finds no page
        frame.mapped.store(PageId::NONE.0, Ordering::SeqCst);
        if frame.pin.load(Ordering::SeqCst) != 0 {
            frame.mapped.store(pid.0, Ordering::SeqCst);
            return false;
        }
        table.remove(&pid);
        drop(table);
        if self.frames[fid.index()].ra.swap(false, Ordering::Relaxed) {
            self.counters
                .read_ahead_evicted_unused
                .fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Evicts the clean page in `fid` of instance `k` unless it is pinned, and counts it.
    /// False when it is pinned (nothing changed).
    fn evict(&self, k: usize, st: &mut InstState, fid: FrameId) -> bool {
        if !self.unmap_unpinned(k, st, fid) {
            return false;
        }
        st.lru.remove(fid);
        st.meta_mut(fid).page = PageId::NONE;
        self.counters.evictions.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Adds the wait that began at `waited` (if one did) to free_frame_wait_us.
    fn count_wait(&self, waited: Option<Instant>) {
        if let Some(t) = waited {
            self.counters
                .free_frame_wait_us
                .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
    }
}
