//! write_back: the flush lists and the one path a page takes to the data file.
//!
//! Invariants kept here (docs/invariants.md):
//! - B3 (invariant 1, the WAL rule): [`BufferPool::write_back`] and the batches under it are
//!   the only way a page reaches the data file; each image's LSN is durable in the log before
//!   the image is written (`write_images`).
//! - B5: a batch's frames are marked `io_busy` while prepared, so no other batch takes them;
//!   a page changed while being written moves to the change's LSN in its flush list.
//!
//! Also here: what the page cleaner asks of the flush lists (oldest dirty pages, dirty pages
//! below an LSN, neighbours) and the LRU-tail cleaning that keeps free frames ready.

use super::{BufferPool, PreparedBatch, EXTENT_PAGES};
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::page;
use crate::types::{FrameId, Lsn, PageId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

impl BufferPool {
    /// Writes frame `fid`'s page back if it is dirty. Returns whether it wrote.
    pub fn write_back(&self, fid: FrameId) -> Result<bool> {
        Ok(self.flush_batch(&[fid])? > 0)
    }

    /// Writes back the dirty pages among `fids` as one batch: copy and seal each image under a
    /// shared latch (a page latched exclusively for longer than a moment is skipped), make the
    /// log durable up to the newest image's LSN, write them through the sink (doublewrite), and
    /// mark clean the frames that did not change meanwhile. The only path from a frame to the
    /// data file (B3).
    pub fn flush_batch(&self, fids: &[FrameId]) -> Result<usize> {
        self.prepare_batch(fids)?.write()
    }

    /// The first half of [`BufferPool::flush_batch`]: marks the dirty pages among `fids` as
    /// being written (`io_busy`, so no other batch takes them: B5) and copies and seals their
    /// images. Cheap (no I/O); a page cleaner picks and prepares under one lock so its
    /// concurrent writers take disjoint batches, oldest first, then writes outside it. Dropping
    /// the result unwritten releases the pages.
    pub fn prepare_batch(&self, fids: &[FrameId]) -> Result<PreparedBatch<'_>> {
        if let Some(why) = self.poisoned() {
            return Err(Error::Poisoned(format!(
                "page writes are stopped after an earlier I/O failure: {why}"
            )));
        }
        let mut batch = PreparedBatch {
            pool: self,
            imgs: Vec::with_capacity(fids.len()),
        };
        let imgs = &mut batch.imgs;
        let mut invalid = None;
        for &fid in fids {
            let k = self.instance_of_frame(fid);
            {
                let mut st = self.instances[k].state.lock();
                let m = st.meta_mut(fid);
                if m.oldest_lsn == Lsn(0) || m.page.is_none() || m.io_busy {
                    continue;
                }
                m.io_busy = true;
                m.redirty_lsn = Lsn(0);
                // pin under the mutex (B1)
                self.frames[fid.index()].pin.fetch_add(1, Ordering::Acquire);
            }
            let frame = &self.frames[fid.index()];
            match frame.latch.try_read_for(Duration::from_millis(10)) {
                Some(g) if g.valid => {
                    let mut out = AlignedBuf::copy_of(&g.buf);
                    page::seal(&mut out);
                    // An invalid image never reaches the file. In normal running it cannot
                    // happen; after recovery replayed redo onto a page older than the log
                    // assumed (a lost write or a lost data-file fsync) it can, and then it is
                    // an error that names the page, not a panic (found by the fault campaign).
                    if let Err(fault) = page::verify_sealed(&out, g.page) {
                        invalid = Some((g.page, fault));
                        self.clear_io_busy(fid);
                    } else {
                        imgs.push((g.page, fid, page::hdr::lsn(&g.buf), out));
                    }
                }
                _ => self.clear_io_busy(fid),
            }
            self.unpin(fid);
            if invalid.is_some() {
                break;
            }
        }
        if let Some((pid, fault)) = invalid {
            drop(batch); // releases the pages
            return Err(Error::corrupt(
                self.file.name(),
                pid.0,
                format!(
                    "refusing to write an invalid page image ({fault}); after crash recovery \
                     this means the page on disk was older than the redo log assumed (a lost \
                     write or a lost fsync of the data file)"
                ),
            ));
        }
        Ok(batch)
    }

    pub(super) fn clear_io_busy(&self, fid: FrameId) {
        let k = self.instance_of_frame(fid);
        self.instances[k].state.lock().meta_mut(fid).io_busy = false;
    }

    pub(super) fn write_images(
        &self,
        imgs: &[(PageId, FrameId, Lsn, AlignedBuf)],
    ) -> Result<usize> {
        let newest = imgs.iter().map(|i| i.2).max().unwrap_or(Lsn(0));
        if let Some(log) = &self.wal {
            // IMPORTANT (invariant 1, WAL): the log is durable up to every image's LSN before
            // any image reaches the data file.
            log.flush_to(newest, true)?;
            debug_assert!(log.flushed_lsn() >= newest);
        }
        let pages: Vec<(PageId, &[u8])> = imgs.iter().map(|i| (i.0, &i.3[..])).collect();
        if let Err(e) = self.sink.write_pages(self.file.as_ref(), &pages) {
            self.poison(&e.to_string());
            return Err(e);
        }
        self.counters
            .pages_written
            .fetch_add(imgs.len() as u64, Ordering::Relaxed);
        self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
        for &(pid, fid, lsn, _) in imgs {
            let k = self.instance_of_frame(fid);
            let mut st = self.instances[k].state.lock();
            let m = *st.meta(fid);
            st.meta_mut(fid).redirty_lsn = Lsn(0);
            if m.page != pid || m.oldest_lsn == Lsn(0) {
                continue;
            }
            if m.newest_lsn <= lsn {
                st.flush_list.remove(&(m.oldest_lsn, fid));
                st.oldest_sum -= m.oldest_lsn.0 as u128;
                st.meta_mut(fid).oldest_lsn = Lsn(0);
            } else if m.redirty_lsn > m.oldest_lsn {
                // Changed while being written: the image on disk holds everything before
                // redirty_lsn, so the page is dirty only from there. Keeping its old place
                // pinned the checkpoint on hot pages (a TPC-C district or stock page changes
                // within the milliseconds a doublewrite batch takes, so nearly every write of
                // it left it oldest, and the checkpoint advanced only when one write happened
                // to finish between two changes: the 1-hour soak's sawtooth of the age).
                // InnoDB avoids the case by blocking changes to a page while it is written
                // (the block's SX latch); copying the image lets them go on.
                st.flush_list.remove(&(m.oldest_lsn, fid));
                st.flush_list.insert((m.redirty_lsn, fid));
                st.oldest_sum -= m.oldest_lsn.0 as u128;
                st.oldest_sum += m.redirty_lsn.0 as u128;
                st.meta_mut(fid).oldest_lsn = m.redirty_lsn;
                self.counters
                    .pages_redirtied_in_write
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(imgs.len())
    }

    /// The frames on the flush list with the oldest modifications, up to `n` per instance.
    pub fn oldest_dirty(&self, n: usize) -> Vec<(Lsn, FrameId)> {
        let mut out = Vec::new();
        for inst in self.instances.iter() {
            let st = inst.state.lock();
            out.extend(st.flush_list.iter().take(n).copied());
        }
        out.sort();
        out
    }

    /// The smallest oldest_modification over all flush lists (None when nothing is dirty).
    pub fn oldest_modification(&self) -> Option<Lsn> {
        self.instances
            .iter()
            .filter_map(|i| i.state.lock().flush_list.first().map(|&(l, _)| l))
            .min()
    }

    /// Writes every dirty page back, oldest first (each batch ends with a data file sync).
    pub fn flush_all(&self) -> Result<usize> {
        let mut written = 0;
        loop {
            let batch: Vec<FrameId> = self
                .oldest_dirty(64)
                .into_iter()
                .map(|x| x.1)
                .take(64)
                .collect();
            if batch.is_empty() {
                break;
            }
            written += self.flush_batch(&batch)?;
        }
        Ok(written)
    }

    /// Mean oldest_modification over every flush list (None when nothing is dirty).
    pub fn oldest_modification_mean(&self) -> Option<f64> {
        let (mut sum, mut n) = (0u128, 0u64);
        for inst in self.instances.iter() {
            let st = inst.state.lock();
            sum += st.oldest_sum;
            n += st.flush_list.len() as u64;
        }
        (n > 0).then(|| (sum / n as u128) as f64)
    }

    /// The oldest dirty frames of the instances `pick` selects that are not being written, up to
    /// `n` in all, only those whose oldest_modification is below `lsn_limit` (Lsn(0): no
    /// limit).
    pub fn oldest_dirty_in(
        &self,
        n: usize,
        lsn_limit: Lsn,
        pick: &dyn Fn(usize) -> bool,
    ) -> Vec<FrameId> {
        let mut out: Vec<(Lsn, FrameId)> = Vec::new();
        for (k, inst) in self.instances.iter().enumerate() {
            if !pick(k) {
                continue;
            }
            let st = inst.state.lock();
            // A page being written (io_busy) is another writer's: skipping it lets concurrent
            // writers each take the oldest pages nobody has taken yet.
            out.extend(
                st.flush_list
                    .iter()
                    .filter(|&&(_, f)| !st.meta(f).io_busy)
                    .take(n)
                    .copied(),
            );
        }
        out.sort_unstable();
        out.into_iter()
            .take(n)
            .filter(|(l, _)| lsn_limit == Lsn(0) || *l < lsn_limit)
            .map(|(_, f)| f)
            .collect()
    }

    /// Dirty pages whose oldest modification is below `lsn`, over all instances, counting at
    /// most `max` per instance: the pages that must be written for the checkpoint to pass
    /// `lsn` (steady's feed-forward measures their density per redo byte at the tail).
    pub fn dirty_below(&self, lsn: Lsn, max: usize) -> u64 {
        self.instances
            .iter()
            .map(|inst| {
                let st = inst.state.lock();
                st.flush_list.range(..(lsn, FrameId(0))).take(max).count() as u64
            })
            .sum()
    }

    /// Adds the dirty neighbours of each frame: mode 1 the contiguous dirty pages on each
    /// side, mode 2 every dirty page of the same 64-page extent (flush_neighbors).
    pub fn with_neighbors(&self, fids: &[FrameId], mode: u64) -> Vec<FrameId> {
        let mut out: Vec<FrameId> = fids.to_vec();
        if mode == 0 {
            return out;
        }
        for &fid in fids {
            let k = self.instance_of_frame(fid);
            let st = self.instances[k].state.lock();
            let pid = st.meta(fid).page;
            if pid.is_none() {
                continue;
            }
            let first = pid.0 - pid.0 % EXTENT_PAGES;
            // the frame holding page number `p`, if it is dirty
            let dirty_fid = |p: u32| -> Option<FrameId> {
                let f = self.instances[k].lookup(PageId(p))?;
                (st.meta(f).oldest_lsn != Lsn(0)).then_some(f)
            };
            if mode == 2 {
                out.extend((first..first + EXTENT_PAGES).filter_map(dirty_fid));
            } else {
                let mut p = pid.0;
                while p > first {
                    p -= 1;
                    match dirty_fid(p) {
                        Some(f) => out.push(f),
                        None => break,
                    }
                }
                let mut p = pid.0 + 1;
                while p < first + EXTENT_PAGES {
                    match dirty_fid(p) {
                        Some(f) => out.push(f),
                        None => break,
                    }
                    p += 1;
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// LRU tail cleaning for the instances `pick` selects: until `want_free` frames are free
    /// in an instance, scan up to `scan_depth` frames from its LRU tail, evicting clean
    /// unpinned pages to the free list and taking dirty ones (as many as the free list still
    /// lacks) to write. The dirty pages are written in batches of `batch_pages` by up to
    /// `writers` concurrent writers, each batch through `write` (which writes it with
    /// [`Self::flush_batch`], timing it), and each batch's pages go to the free list as soon as
    /// that batch is written, so a reader waiting for a frame gets one after the first batch, not
    /// after the whole pass. Returns (frames freed, dirty pages written). Keeps free frames
    /// ready so readers need not write.
    pub fn lru_clean(
        &self,
        want_free: usize,
        scan_depth: usize,
        pick: &dyn Fn(usize) -> bool,
        batch_pages: usize,
        writers: usize,
        write: &(dyn Fn(&[FrameId]) -> Result<usize> + Sync),
    ) -> Result<(usize, usize)> {
        let mut freed = 0;
        let mut dirty = Vec::new();
        for (k, inst) in self.instances.iter().enumerate() {
            if !pick(k) {
                continue;
            }
            let mut st = inst.state.lock();
            if st.free.len() >= want_free {
                continue;
            }
            let need = want_free - st.free.len();
            let mut victims = Vec::new();
            let mut dirty_here = 0;
            for fid in st.lru.tail_iter(scan_depth) {
                if victims.len() + dirty_here >= need {
                    break;
                }
                if self.frames[fid.index()].pin.load(Ordering::Acquire) != 0 {
                    continue;
                }
                let m = st.meta(fid);
                if m.oldest_lsn == Lsn(0) {
                    victims.push(fid);
                } else if !m.io_busy {
                    dirty.push(fid);
                    dirty_here += 1;
                }
            }
            for fid in victims {
                freed += self.free_if_clean(k, &mut st, fid) as usize;
            }
        }
        if freed > 0 {
            self.notify_frames_freed();
        }
        let batches: Vec<&[FrameId]> = dirty.chunks(batch_pages.max(1)).collect();
        let next = AtomicUsize::new(0);
        let written = AtomicUsize::new(0);
        let freed_after = AtomicUsize::new(0);
        let writer = || -> Result<()> {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(batch) = batches.get(i) else {
                    return Ok(());
                };
                written.fetch_add(write(batch)?, Ordering::Relaxed);
                let mut n = 0;
                for &fid in batch.iter() {
                    let k = self.instance_of_frame(fid);
                    let mut st = self.instances[k].state.lock();
                    n += self.free_if_clean(k, &mut st, fid) as usize;
                }
                freed_after.fetch_add(n, Ordering::Relaxed);
                if n > 0 {
                    self.notify_frames_freed();
                }
            }
        };
        let extra = writers.min(batches.len()).saturating_sub(1);
        if extra == 0 {
            writer()?;
        } else {
            std::thread::scope(|s| -> Result<()> {
                let others: Vec<_> = (0..extra).map(|_| s.spawn(writer)).collect();
                let mut first = writer();
                for h in others {
                    let r = h.join().expect("an LRU writer panicked");
                    first = first.and(r);
                }
                first
            })?;
        }
        freed += freed_after.into_inner();
        Ok((freed, written.into_inner()))
    }

    /// Moves frame `fid` of instance `k` to the free list if it holds a clean page that no one
    /// pins and no batch is writing. A page written from the tail is freed even if a hit made
    /// it young during the write (InnoDB frees an LRU-flushed page when its write completes,
    /// checking only that it can be relocated): the cost is one read at worst.
    fn free_if_clean(&self, k: usize, st: &mut super::InstState, fid: FrameId) -> bool {
        let freed = self.unmap_clean(k, st, fid);
        if freed {
            self.counters.lru_evictions.fetch_add(1, Ordering::Relaxed);
        }
        freed
    }

    /// [`Self::free_if_clean`] without counting it.
    fn unmap_clean(&self, k: usize, st: &mut super::InstState, fid: FrameId) -> bool {
        let m = st.meta(fid);
        if m.page.is_none() || m.oldest_lsn != Lsn(0) || m.io_busy {
            return false;
        }
        if !self.unmap_unpinned(k, st, fid) {
            return false; // pinned by a hit since the scan
        }
        st.lru.remove(fid);
        st.meta_mut(fid).page = PageId::NONE;
        st.free.push(fid);
        true
    }

    /// Drops page `pid` from the pool, without writing anything, if it is clean, no one pins
    /// it, no batch is writing it, and the LRU counts it cold (`Lru::is_cold`: in the old
    /// sublist, in a pool that has evicted since the page came to the midpoint). True when the
    /// page is not in the pool on return. The change buffer asks this before it applies a change to a
    /// cached leaf: dirtying a clean page the LRU is about to evict costs a whole page write
    /// for that one change, where a buffered change is merged with the leaf's others when the
    /// leaf is next read (ibuf.rs, `Tree::buffer_at`).
    pub fn drop_if_cold(&self, pid: PageId) -> bool {
        let k = self.instance_of(pid);
        let inst = &self.instances[k];
        match inst.lookup(pid) {
            None => return true,
            Some(fid) if !inst.hints.may_be_cold(fid.offset_from(inst.base)) => return false,
            Some(_) => {}
        }
        let mut st = inst.state.lock();
        let Some(fid) = inst.lookup(pid) else {
            return true;
        };
        if st.meta(fid).page != pid || !st.lru.is_cold(fid) || !self.unmap_clean(k, &mut st, fid) {
            return false;
        }
        drop(st);
        self.counters.cold_drops.fetch_add(1, Ordering::Relaxed);
        self.notify_frames_freed();
        true
    }
}
