//! resize: changing the log's size on an open database (InnoDB 8.0.30's
//! `innodb_redo_log_capacity`), crash-safe at every step.
//!
//! The resized log is built in the other file set ([`LogSet`]), one generation newer, while
//! writers go on: [`Log::resize_begin`] creates its files (headers only, no checkpoint slot) and
//! copies the blocks from the checkpoint's on that are final (W3: every block before the one
//! holding the written LSN), each checked as the block of its number, to their places in the new
//! ring; [`Log::resize_catch_up`] copies what was written since. Then, with appends held off by
//! the caller (the log space's fence), [`Log::resize_commit`] makes the log durable, copies the
//! last blocks, fsyncs the new files and writes the new set's checkpoint slot: that one write is
//! the switch. A crash before it leaves the old set in use (the new one has no slot, and the
//! next open removes it); a crash after it leaves the new set in use (newer generation with a
//! slot; the next open removes the old one). Both sets hold the same stream from the checkpoint
//! to the end, block for block (a block's bytes do not depend on where it lies), so recovery
//! replays the same groups whichever it reads.
//!
//! What must stay true: the new ring holds every block from the checkpoint to the end when the
//! slot is written (W1, W2 carry over); its capacity covers the checkpoint age then, padding
//! included (W4); the new slot keeps the run's epoch and the next checkpoint number (W5, W6);
//! no backup copies the files while they are replaced; a failure before the switch leaves the
//! old log in use and removes the new files, a failed slot write poisons the log (W7: which set
//! a recovery will use is then unknown, though both hold the same log).

use super::block::check_data_block;
use super::checkpoint::{write_slot, Slot};
use super::header::{create_files, remove_set};
use super::layout::Geometry;
use super::ring::Ring;
use super::writer::Log;
use crate::error::{Error, Result};
use std::sync::Arc;

/// Largest read of blocks per step of a copy, in bytes.
const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// A resize under way: the new files exist, and blocks `[.., copied)` from the checkpoint on
/// are in them. Dropped without [`Log::resize_commit`], it removes the new files and lets a
/// backup or another resize start.
pub struct LogResize {
    log: Arc<super::writer::Shared>,
    ring: Arc<Ring>,
    /// One past the last block copied in order: every block from the checkpoint's (when it is
    /// below this) up to here is in the new ring.
    copied: u64,
    /// Bytes of blocks copied by all passes.
    copied_bytes: u64,
    committed: bool,
    /// The set the committed resize replaced: its files are removed by [`Log::resize_cleanup`]
    /// (after appends are let go: removing large files takes time), or by the next open.
    replaced: Option<super::layout::LogSet>,
}

/// What a committed resize did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeOutcome {
    /// Log capacity (LSN units) before and after.
    pub old_capacity: u64,
    pub new_capacity: u64,
    /// The checkpoint age when the new log took over, bytes.
    pub age_at_switch: u64,
    /// Bytes of redo blocks copied into the new files (all passes).
    pub copied_bytes: u64,
    /// Microseconds the switch held appends off (the last copy, the fsyncs, the slots).
    pub stall_us: u64,
    /// Seconds the whole resize took, the write-back before it included (set by the caller
    /// that drives the resize; 0 from the log alone).
    pub seconds: f64,
    /// Pages the resize wrote back itself to bring the checkpoint age within the new log (set
    /// by the caller).
    pub pages_written: u64,
}

impl LogResize {
    /// Capacity of the new log (LSN units).
    pub fn capacity(&self) -> u64 {
        self.ring.geom.capacity()
    }
}

impl Drop for LogResize {
    fn drop(&mut self) {
        if !self.committed {
            let storage = self.log.storage.clone();
            if let Err(e) = remove_set(storage.as_ref(), self.ring.set) {
                tracing::warn!(
                    "redo log resize abandoned; its files could not be removed ({e}); the next \
                     open removes them"
                );
            }
        }
        self.log.users.lock().resizing = false;
    }
}

impl Log {
    /// The capacity a log of `files` files of `file_size` bytes would have, or the error naming
    /// what is out of range (file size, block multiple, the log buffer).
    pub fn capacity_for(&self, file_size: u64, files: u32) -> Result<u64> {
        let mut cfg = self.shared.cfg.clone();
        cfg.file_size = file_size;
        cfg.files = files;
        cfg.block_size = self.shared.ring().geom.block_size;
        Ok(Geometry::new(&cfg)?.capacity())
    }

    /// The total size of `files` log files whose capacity is at least `capacity` (LSN units):
    /// the `log_capacity` that holds that much redo.
    pub fn file_bytes_for(&self, capacity: u64, files: u32) -> u64 {
        let geom = self.shared.ring().geom.clone();
        let files = u64::from(files.max(1));
        let blocks = capacity.div_ceil(geom.payload) + 1;
        let per_file = blocks.div_ceil(files) + super::layout::HEADER_BLOCKS;
        per_file * geom.block_size as u64 * files
    }

    /// Starts a resize to `files` files of `file_size` bytes: creates them in the other file
    /// set and copies the final blocks from the checkpoint on. Refused while a backup copies
    /// the log or another resize runs. Writers may go on meanwhile.
    pub fn resize_begin(&self, file_size: u64, files: u32) -> Result<LogResize> {
        let sh = &self.shared;
        let old = sh.ring();
        let mut cfg = sh.cfg.clone();
        cfg.file_size = file_size;
        cfg.files = files;
        cfg.block_size = old.geom.block_size;
        let geom = Geometry::new(&cfg)?;
        {
            let mut users = sh.users.lock();
            if users.copiers > 0 {
                return Err(Error::LogResize {
                    requested: file_size * u64::from(files),
                    reason: "a backup is copying the redo log; resize when it has finished".into(),
                });
            }
            if users.resizing {
                return Err(Error::LogResize {
                    requested: file_size * u64::from(files),
                    reason: "another resize of the redo log is under way".into(),
                });
            }
            users.resizing = true;
        }
        // From here on the Drop of `resize` undoes what was done.
        let set = old.set.other();
        let mut resize = LogResize {
            log: sh.clone(),
            ring: Arc::new(Ring {
                geom: geom.clone(),
                files: Vec::new(),
                set,
                generation: old.generation + 1,
            }),
            copied: 0,
            copied_bytes: 0,
            committed: false,
            replaced: None,
        };
        // Files left in the other set are never in use (the open that chose this set would
        // have removed them): a resize that failed and could not remove its files.
        remove_set(sh.storage.as_ref(), set)?;
        let files = create_files(sh.storage.as_ref(), &geom, set, old.generation + 1, None)?;
        resize.ring = Arc::new(Ring {
            geom,
            files,
            set,
            generation: old.generation + 1,
        });
        self.resize_catch_up(&mut resize)?;
        Ok(resize)
    }

    /// Copies the blocks written since the last pass that are final, without holding writers
    /// back. Returns the bytes copied.
    pub fn resize_catch_up(&self, r: &mut LogResize) -> Result<u64> {
        let (old, checkpoint, written) = {
            let st = self.shared.state.lock();
            (st.ring.clone(), st.checkpoint, st.written)
        };
        let from = old.geom.block_of(checkpoint).max(r.copied);
        // The block holding `written` may still be rewritten (it is partial): not final.
        let to = old.geom.block_of(written);
        let (n, stopped_at) = copy_blocks(&old, &r.ring, from, to, Mode::Paced)?;
        r.copied = stopped_at.unwrap_or(to).max(r.copied);
        r.copied_bytes += n;
        Ok(n)
    }

    /// Switches to the resized log if the checkpoint age fits in it with `headroom` bytes to
    /// spare: makes the log durable, copies its last blocks, fsyncs the new files and writes
    /// the new set's checkpoint slots ([`Log::resize_cleanup`] then removes the old files).
    /// Returns None (and leaves
    /// everything as it was) when the age does not fit. The caller holds appends off for the
    /// whole call (the log space's fence, exclusively).
    pub fn resize_commit(&self, r: &mut LogResize, headroom: u64) -> Result<Option<ResizeOutcome>> {
        let sh = &*self.shared;
        let started = std::time::Instant::now();
        self.flush_to(self.current_lsn(), true)?;
        // The checkpoint writer's lock keeps slot writes out until the switch is done.
        let mut writer = sh.ckpt.lock();
        let (old, checkpoint, end) = {
            let mut st = sh.state.lock();
            while st.writer_active {
                sh.flushed.wait(&mut st);
            }
            st.usable()?;
            // Nothing is appended while the caller holds appends off, so the flush above left
            // the end durable and on a block boundary.
            debug_assert_eq!(st.flushed, st.current);
            let age = st.current - st.checkpoint;
            if age + headroom + sh.payload > r.ring.geom.capacity() {
                return Ok(None);
            }
            // No flush may start while the files change under it.
            st.writer_active = true;
            (st.ring.clone(), st.checkpoint, st.current)
        };
        let result = (|| -> Result<u64> {
            let from = old.geom.block_of(checkpoint).max(r.copied);
            let to = old.geom.block_of(end);
            let (n, _) = copy_blocks(&old, &r.ring, from, to, Mode::Strict)?;
            for f in &r.ring.files {
                // IMPORTANT: every block of the new log is durable before its slot makes it
                // the log recovery reads.
                f.sync()?;
            }
            Ok(n)
        })();
        let release = |st: &mut parking_lot::MutexGuard<'_, super::buffer::State>| {
            st.writer_active = false;
            sh.wake(st);
        };
        let copied_now = match result {
            Ok(n) => n,
            Err(e) => {
                release(&mut sh.state.lock());
                return Err(e);
            }
        };
        let file0 = r.ring.file(0)?.clone();
        for i in 0..2 {
            let slot = Slot {
                number: writer.next_number,
                lsn: checkpoint,
                epoch: sh.epoch,
                replay_rate: writer.replay_rate,
            };
            // IMPORTANT: the first of these writes is the switch (W5: it names a durable LSN,
            // fsynced by write_slot). A failure leaves unknown which set a recovery reads, so
            // the log stops (W7).
            if let Err(e) = write_slot(file0.as_ref(), &r.ring.geom, &slot) {
                let mut st = sh.state.lock();
                release(&mut st);
                drop(st);
                sh.poison(&e);
                // Past the first write the new set is in use: its files must stay.
                r.committed = i > 0;
                return Err(e);
            }
            writer.next_number += 1;
        }
        r.committed = true;
        {
            let mut st = sh.state.lock();
            st.unsynced = vec![false; r.ring.files.len()];
            st.ring = r.ring.clone();
            sh.capacity
                .store(r.ring.geom.capacity(), std::sync::atomic::Ordering::Release);
            release(&mut st);
        }
        drop(writer);
        r.replaced = Some(old.set);
        r.copied_bytes += copied_now;
        Ok(Some(ResizeOutcome {
            old_capacity: old.geom.capacity(),
            new_capacity: r.ring.geom.capacity(),
            age_at_switch: end - checkpoint,
            copied_bytes: r.copied_bytes,
            stall_us: started.elapsed().as_micros() as u64,
            seconds: 0.0,
            pages_written: 0,
        }))
    }
}

impl Log {
    /// Removes the files of the log a committed resize replaced. A failure is only logged:
    /// the next open removes them (the replaced set is never chosen again).
    pub fn resize_cleanup(&self, r: &mut LogResize) {
        if let Some(set) = r.replaced.take() {
            if let Err(e) = remove_set(self.shared.storage.as_ref(), set) {
                tracing::warn!(
                    "redo log resized, but the old files could not be removed ({e}); the next \
                     open removes them"
                );
            }
        }
    }
}

/// How [`copy_blocks`] runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Beside the writers: a block that fails its checks ends the copy (the writer recycled it
    /// since the checkpoint passed it), and after each chunk the copy sleeps as long as the
    /// chunk took, so it takes at most half of a core and of the device from the workload
    /// while still copying far faster than any log is written.
    Paced,
    /// With appends held off: a block that fails is an error (the log recovery needs is
    /// damaged), and there is no pause.
    Strict,
}

/// Copies blocks `[from, to)` of `old` to their places in `new`, each checked as the block of
/// its number. Returns the bytes copied and where a paced copy stopped.
fn copy_blocks(
    old: &Ring,
    new: &Ring,
    from: u64,
    to: u64,
    mode: Mode,
) -> Result<(u64, Option<u64>)> {
    let bs = old.geom.block_size as u64;
    let mut copied = 0;
    let mut b = from;
    while b < to {
        let chunk_started = std::time::Instant::now();
        let n = (to - b).min(COPY_CHUNK_BYTES / bs);
        for (file, offset, first, count) in old.geom.runs(b, b + n) {
            let mut buf = vec![0u8; (count * bs) as usize];
            old.file(file)?.read_at(&mut buf, offset)?;
            let good = buf
                .chunks(bs as usize)
                .enumerate()
                .take_while(|(i, block)| check_data_block(block, first + *i as u64).is_ok())
                .count() as u64;
            for (nf, noff, nfirst, ncount) in new.geom.runs(first, first + good) {
                let at = ((nfirst - first) * bs) as usize;
                new.file(nf)?
                    .write_at(&buf[at..at + (ncount * bs) as usize], noff)?;
                copied += ncount * bs;
            }
            if good < count {
                let bad = first + good;
                if mode == Mode::Strict {
                    let (f, off) = old.geom.locate(bad);
                    return Err(Error::BadDatabase {
                        path: old.file(f)?.name().into(),
                        reason: format!(
                            "redo log block {bad} at offset {off} (LSN {}) fails its checks \
                             while the log is resized: the log recovery needs is damaged; the \
                             resize is abandoned and the log keeps its size",
                            old.geom.block_start(bad)
                        ),
                    });
                }
                return Ok((copied, Some(bad)));
            }
        }
        b += n;
        if mode == Mode::Paced {
            std::thread::sleep(chunk_started.elapsed());
        }
    }
    Ok((copied, None))
}
