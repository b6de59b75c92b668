//! The [`Log`] handle: create and open, append (into the log buffer), and the group-commit flush
//! that writes and fsyncs. One mutex guards the buffer and the LSNs; at most one thread (the
//! leader) does log I/O at a time, outside the mutex, while others append or wait on a condvar.
//!
//! What must stay true: W2 (a `flush_to(.., true)` returns only after an fsync covering its LSN
//! completed), W3 (a durable flush pads first, so each fsync follows a write ending on a block
//! boundary), W4 (append refuses past `checkpoint + capacity`), W6 (a new run starts on a fresh
//! block with a new epoch, recorded before any block of it), W7 (the first I/O error is returned
//! and poisons the log). Must never retry a failed write or fsync, never hold the mutex across
//! I/O, never call user code (`append_with`'s fill aside) under it.

use super::buffer::{BlockImage, Failure, Sleeper, State};
use super::checkpoint::{encode_slot, read_slots, write_slot, CheckpointWriter, Slot};
use super::header::{choose_set, create_files, open_files, remove_set};
use super::layout::{Geometry, LogSet};
use super::reader::scan;
pub(crate) use super::ring::Ring;
use super::stats::Counters;
use super::{FlushAtCommit, LogConfig, LogStats, LsnRange, Recovered};
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::types::Lsn;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

thread_local! {
    /// What this thread sleeps on while it waits in `flush_to` (with the log's mutex, one
    /// wait at a time).
    static FLUSH_WAKER: Arc<parking_lot::Condvar> = Arc::new(parking_lot::Condvar::new());
}

/// Who uses the log's files besides the writer: backups copying the redo, and a resize
/// replacing the files. One excludes the other.
#[derive(Default)]
pub(crate) struct FileUsers {
    pub copiers: u32,
    pub resizing: bool,
}

/// State shared by the handle and the background thread.
pub(crate) struct Shared {
    pub cfg: LogConfig,
    /// The fail-stop state (`cfg.health`, or one of the log's own).
    pub health: Arc<crate::error::Health>,
    /// Where the log files are (a resize creates and removes files there).
    pub storage: Arc<dyn Storage>,
    /// Stream bytes per block; fixed for the log's life (a resize keeps the block size).
    pub payload: u64,
    /// The ring's capacity, readable without the log's mutex (admission reads it per commit);
    /// set with the ring, under the mutex.
    pub capacity: AtomicU64,
    pub users: Mutex<FileUsers>,
    /// The epoch of this run, written in every block (W6).
    pub epoch: u32,
    pub max_payload: usize,
    pub state: Mutex<State>,
    /// Signalled when a flush ends (LSNs moved, buffer drained, or the log failed); `flush_to`
    /// sleeps on its own condvar instead (`State::sleepers`).
    pub flushed: Condvar,
    pub ckpt: Mutex<CheckpointWriter>,
    /// `state.current`, `state.checkpoint` and `ckpt.replay_rate` as last set, readable without
    /// either mutex: admission and the flush policy read them per transaction, and taking the
    /// log's mutex for them queued every commit behind the appenders. Each is stored under the
    /// mutex that guards its source right after the source changes, so a thread sees at least
    /// the value its own appends left; another thread's value may be a moment old, as it may be
    /// the moment a mutex-read returns.
    pub current_lsn: AtomicU64,
    pub checkpoint_lsn: AtomicU64,
    pub replay_rate: AtomicU64,
    pub counters: Counters,
    /// Set to stop the background thread; `bg_wake` interrupts its sleep.
    pub bg_stop: Mutex<bool>,
    pub bg_wake: Condvar,
}

/// The redo log. `Send + Sync`; share it in an `Arc`.
pub struct Log {
    pub(crate) shared: Arc<Shared>,
    pub(crate) background: Mutex<Option<JoinHandle<()>>>,
    /// False for the background thread's own view of the log (its drop closes nothing).
    pub(crate) is_handle: bool,
}

impl Shared {
    /// The files and geometry in use now.
    pub fn ring(&self) -> Arc<Ring> {
        self.state.lock().ring.clone()
    }

    /// Records the first failure (W7) and wakes every waiter so it sees it.
    pub fn poison(&self, e: &Error) {
        let mut st = self.state.lock();
        if st.failure.is_none() {
            st.failure = Some(Failure::Poisoned(e.to_string()));
        }
        self.health.fail(&e.to_string());
        self.wake(&mut st);
    }

    /// After a flush ended, the log failed or closed, or a resize let flushes go on: wakes the
    /// threads waiting for room in the buffer or for the flush to end, and the `flush_to`
    /// sleepers that [`State::wake_sleepers`] picks.
    pub fn wake(&self, st: &mut State) {
        self.flushed.notify_all();
        st.wake_sleepers();
    }
}

impl Log {
    /// Creates a new log: `cfg.files` files of `cfg.file_size` bytes with headers and two valid
    /// checkpoint slots, all fsynced, and the directory synced. Refuses if a log file exists.
    pub fn create(storage: Arc<dyn Storage>, cfg: LogConfig) -> Result<Log> {
        let geom = Geometry::new(&cfg)?;
        let lsn = geom.first_lsn();
        let slot = |number| Slot {
            number,
            lsn,
            epoch: 1,
            replay_rate: 0,
        };
        let (s0, s1) = (encode_slot(&geom, &slot(0)), encode_slot(&geom, &slot(1)));
        let files = create_files(storage.as_ref(), &geom, LogSet::A, 0, Some([&s0, &s1]))?;
        let ring = Ring {
            geom,
            files,
            set: LogSet::A,
            generation: 0,
        };
        Ok(Self::assemble(storage, cfg, ring, 1, lsn, lsn, 2))
    }

    /// Opens an existing log and recovers it: picks the newest valid checkpoint slot, scans
    /// forward to the end of the last complete group after it (checking every group, keeping
    /// none: [`Recovered::source`] reads them again), starts a new epoch (rewriting the older
    /// or invalid slot) and positions appends at the first block boundary after the last
    /// complete group. A configuration whose file count, file size or block size differs from
    /// the files' is an error naming the file. Of the two file sets, it opens the one in use
    /// and (unless read-only) removes the files a resize a crash interrupted left in the other.
    pub fn open(storage: Arc<dyn Storage>, cfg: LogConfig) -> Result<(Log, Recovered)> {
        let geom = Geometry::new(&cfg)?;
        let (set, leftover) = choose_set(storage.as_ref()).unwrap_or((LogSet::A, None));
        let (files, generation) = open_files(storage.as_ref(), &geom, set)?;
        if let (Some(other), false) = (leftover, cfg.read_only) {
            tracing::info!(
                "{}: removing the redo log files of an online resize a crash interrupted \
                 ({} files of set {other:?}; the log is in set {set:?})",
                storage.describe(),
                other.file_name(0)
            );
            remove_set(storage.as_ref(), other)?;
        }
        let file0 = files
            .first()
            .ok_or_else(|| Error::Poisoned("redo log: no files".into()))?;
        let slots = read_slots(file0.as_ref(), &geom)?;
        let ckpt = slots.newest;
        let outcome = scan(
            &geom,
            &files,
            ckpt.lsn,
            slots.max_epoch,
            u64::MAX,
            &mut |_| Ok(()),
        )?;
        if let super::ScanStop::Corrupt {
            block,
            stored,
            computed,
            valid_after,
        } = outcome.stop
        {
            let (file, offset) = geom.locate(block);
            return Err(Error::BadDatabase {
                path: super::header::path_of(storage.as_ref(), set, file),
                reason: format!(
                    "redo log block {block} at offset {offset} (LSN {}..{}) is corrupted: \
                     checksum mismatch, stored {stored:#010x}, computed {computed:#010x}; block \
                     {valid_after} after it is intact, so the damage is inside the log that \
                     recovery needs (from the checkpoint at LSN {}), not a torn end. Refusing \
                     to recover: it would lose the committed changes logged after it. Way out: \
                     `evenkeel check --salvage --out DIR` exports every readable row",
                    geom.block_start(block),
                    geom.block_start(block + 1),
                    ckpt.lsn
                ),
            });
        }
        let epoch = slots.max_epoch.max(outcome.max_epoch).saturating_add(1);
        let next = Slot {
            number: ckpt.number + 1,
            lsn: ckpt.lsn,
            epoch,
            replay_rate: ckpt.replay_rate,
        };
        // IMPORTANT (W6): the new epoch is durable before any block carrying it is written.
        // A read-only open writes no block, so it leaves the slots as they are.
        if !cfg.read_only {
            write_slot(file0.as_ref(), &geom, &next)?;
        }
        let start = geom.round_up(outcome.end_lsn);
        let source = super::RedoSource {
            geom: geom.clone(),
            files: files.clone(),
            start: ckpt.lsn,
            end: outcome.end_lsn,
            last_run_epoch: slots.max_epoch,
        };
        let ring = Ring {
            geom,
            files,
            set,
            generation,
        };
        let log = Self::assemble(storage, cfg, ring, epoch, start, ckpt.lsn, next.number + 1);
        log.set_replay_rate(ckpt.replay_rate);
        let c = &log.shared.counters;
        c.add(&c.checkpoints, 1);
        c.add(&c.fsyncs, 1);
        let recovered = Recovered {
            checkpoint_lsn: Lsn(ckpt.lsn),
            group_count: outcome.groups,
            source,
            replay_rate: ckpt.replay_rate,
            bytes_scanned: outcome.bytes_scanned,
            checkpoint_slot_repaired: slots.one_bad,
            end_lsn: Lsn(outcome.end_lsn),
            stop: outcome.stop,
        };
        Ok((log, recovered))
    }

    fn assemble(
        storage: Arc<dyn Storage>,
        cfg: LogConfig,
        ring: Ring,
        epoch: u32,
        start: u64,
        checkpoint: u64,
        next_number: u64,
    ) -> Log {
        let shared = Shared {
            max_payload: ring.geom.max_payload(cfg.buffer_size),
            payload: ring.geom.payload,
            capacity: AtomicU64::new(ring.geom.capacity()),
            health: cfg.health.clone().unwrap_or_default(),
            storage,
            users: Mutex::new(FileUsers::default()),
            state: Mutex::new(State::new(
                start,
                checkpoint,
                Arc::new(ring),
                cfg.buffer_size,
            )),
            cfg,
            epoch,
            flushed: Condvar::new(),
            ckpt: Mutex::new(CheckpointWriter {
                next_number,
                replay_rate: 0,
            }),
            current_lsn: AtomicU64::new(start),
            checkpoint_lsn: AtomicU64::new(checkpoint),
            replay_rate: AtomicU64::new(0),
            counters: Counters::default(),
            bg_stop: Mutex::new(false),
            bg_wake: Condvar::new(),
        };
        Log {
            shared: Arc::new(shared),
            background: Mutex::new(None),
            is_handle: true,
        }
    }

    /// Appends one group; returns its end LSN. See [`Log::append_range`].
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        Ok(self.append_range(payload)?.end)
    }

    /// Appends one group and returns where it lies. The payload's checksum is computed before
    /// the log's mutex is taken.
    pub fn append_range(&self, payload: &[u8]) -> Result<LsnRange> {
        let crc = crc32c::crc32c(payload);
        self.reserve_and_push(payload.len(), |dst| {
            dst.copy_from_slice(payload);
            crc
        })
    }

    /// Appends one group of `len` bytes written in place by `fill` (no intermediate copy).
    /// `fill` runs under the log's mutex: it must be short and must not call into this log.
    pub fn append_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<LsnRange> {
        self.reserve_and_push(len, |dst| {
            fill(dst);
            crc32c::crc32c(dst)
        })
    }

    /// The largest payload one group may carry (bounded by `buffer_size`).
    pub fn max_payload(&self) -> usize {
        self.shared.max_payload
    }

    fn reserve_and_push(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> u32,
    ) -> Result<LsnRange> {
        let sh = &*self.shared;
        if len > sh.max_payload {
            return Err(Error::LogGroupTooLarge {
                len,
                max: sh.max_payload,
            });
        }
        let total = (len + super::layout::GROUP_OVERHEAD) as u64;
        let mut st = sh.state.lock();
        let mut wait_started: Option<Instant> = None;
        loop {
            st.usable()?;
            // nothing more is logged once any writer of the engine failed (invariant 5)
            sh.health.check()?;
            // W4: refuse rather than overwrite log space the checkpoint has not released. The
            // group must leave room for the padding a durable flush may add after it, so that
            // `current - checkpoint <= capacity` holds after padding and after a reopen too.
            let room_for_padding = sh.payload - 1;
            let capacity = st.ring.geom.capacity();
            if st.current + total + room_for_padding > st.checkpoint + capacity {
                sh.counters.add(&sh.counters.log_full_refusals, 1);
                return Err(Error::LogFull {
                    needed_bytes: total,
                    current_lsn: Lsn(st.current),
                    checkpoint_lsn: Lsn(st.checkpoint),
                    capacity_bytes: capacity,
                });
            }
            if st.buf.len() as u64 + total <= sh.cfg.buffer_size as u64 {
                break;
            }
            wait_started.get_or_insert_with(Instant::now);
            if st.writer_active {
                sh.flushed.wait(&mut st);
            } else {
                self.lead(&mut st, false)?;
            }
        }
        if let Some(t) = wait_started {
            sh.counters.add(&sh.counters.buffer_full_waits, 1);
            let us = t.elapsed().as_micros() as u64;
            sh.counters.add(&sh.counters.buffer_full_wait_us, us);
        }
        let start = st.push_group(len, fill);
        let end = st.current;
        sh.current_lsn.store(end, Ordering::Release);
        drop(st);
        sh.counters.add(&sh.counters.groups, 1);
        sh.counters.add(&sh.counters.payload_bytes, len as u64);
        Ok(LsnRange {
            start: Lsn(start),
            end: Lsn(end),
        })
    }

    /// Group commit: returns once everything up to `lsn` (clamped to the current LSN) is
    /// written to the OS, and, when `durable`, fsynced. One caller at a time leads: it writes
    /// everything buffered with one write per contiguous file range and, if durable, one fsync
    /// per file touched; the others wait and usually find their LSN covered by its flush.
    pub fn flush_to(&self, lsn: Lsn, durable: bool) -> Result<()> {
        let sh = &*self.shared;
        let c = &sh.counters;
        c.add(&c.flush_requests, 1);
        if durable {
            c.add(&c.durable_flush_requests, 1);
        }
        let mut st = sh.state.lock();
        let mut waited = false;
        loop {
            st.usable()?;
            let target = lsn.0.min(st.current);
            let reached = if durable { st.flushed } else { st.written };
            if reached >= target {
                if waited {
                    c.add(&c.flush_waits, 1);
                }
                return Ok(());
            }
            if st.writer_active {
                waited = true;
                let waker = FLUSH_WAKER.with(Arc::clone);
                st.sleepers.push(Sleeper {
                    target,
                    durable,
                    waker: waker.clone(),
                });
                st.flush_waiters += 1;
                waker.wait(&mut st);
                st.flush_waiters -= 1;
                // woken by `wake_sleepers`, which took the entry out; any other wakeup leaves it
                st.sleepers.retain(|s| !Arc::ptr_eq(&s.waker, &waker));
            } else {
                self.lead(&mut st, durable)?;
            }
        }
    }

    /// What a commit whose group ends at `end` waits for under `flush_at_commit`.
    pub fn flush_for_commit(&self, end: Lsn) -> Result<()> {
        self.flush_for_commit_with(end, self.shared.cfg.flush_at_commit)
    }

    /// As [`flush_for_commit`](Self::flush_for_commit), for a commit that asked for `level`.
    pub fn flush_for_commit_with(&self, end: Lsn, level: FlushAtCommit) -> Result<()> {
        match level {
            FlushAtCommit::One => self.flush_to(end, true),
            FlushAtCommit::Two => self.flush_to(end, false),
            FlushAtCommit::Zero => self.shared.state.lock().usable(),
        }
    }

    /// Does one flush as leader: pads (if durable), formats, writes and syncs with the mutex
    /// released, then publishes the new LSNs. On error the log is poisoned and the error
    /// (naming the file) returned.
    pub(crate) fn lead(&self, st: &mut MutexGuard<'_, State>, durable: bool) -> Result<()> {
        let sh = &*self.shared;
        let c = &sh.counters;
        debug_assert!(!st.writer_active);
        st.writer_active = true;
        let ring = st.ring.clone();
        let geom = &ring.geom;
        // IMPORTANT (W3): close the last block before an fsync so that no fsynced block is ever
        // written again; the next group starts on a fresh block.
        let pad = if durable { st.pad(geom) } else { None };
        if let Some((_, len)) = pad {
            c.add(&c.padding_bytes, geom.payload - u64::from(len));
            sh.current_lsn.store(st.current, Ordering::Release);
        }
        let end = st.current;
        let image = (end > st.written).then(|| st.format(geom, sh.epoch, pad));
        if geom.offset_in_block(st.written) != 0 && image.is_some() {
            c.add(&c.partial_block_rewrites, 1);
        }
        let pending_sync = st.unsynced.clone();
        let io = MutexGuard::unlocked(st, || self.write_image(&ring, image, durable, pending_sync));
        st.writer_active = false;
        let touched = match io {
            Ok(t) => t,
            Err(e) => {
                if st.failure.is_none() {
                    st.failure = Some(Failure::Poisoned(e.to_string()));
                }
                sh.health.fail(&e.to_string());
                sh.wake(st);
                return Err(e);
            }
        };
        st.written = end;
        if durable {
            st.flushed = end;
            st.unsynced.iter_mut().for_each(|u| *u = false);
        } else {
            for (u, t) in st.unsynced.iter_mut().zip(&touched) {
                *u |= *t;
            }
        }
        st.drain(geom, end);
        c.add(&c.flushes, 1);
        c.max(&c.max_waiters_per_flush, st.flush_waiters + 1);
        sh.wake(st);
        Ok(())
    }

    /// Writes the formatted blocks (one write per contiguous file range) and, when `durable`,
    /// fsyncs every file written now or since its last fsync. Returns the files written.
    fn write_image(
        &self,
        ring: &Ring,
        image: Option<BlockImage>,
        durable: bool,
        mut to_sync: Vec<bool>,
    ) -> Result<Vec<bool>> {
        let sh = &*self.shared;
        let c = &sh.counters;
        let mut touched = vec![false; ring.files.len()];
        if let Some(img) = image {
            let bs = ring.geom.block_size;
            let n = (img.image.len() / bs) as u64;
            for (file, offset, first, count) in ring.geom.runs(img.first_block, img.first_block + n)
            {
                let from = (first - img.first_block) as usize * bs;
                let bytes = &img.image[from..from + count as usize * bs];
                ring.file(file)?.write_at(bytes, offset)?;
                c.add(&c.writes, 1);
                c.add(&c.written_bytes, bytes.len() as u64);
                touched[file] = true;
            }
        }
        if durable {
            for (i, t) in touched.iter().enumerate() {
                to_sync[i] |= *t;
            }
            for (i, needed) in to_sync.iter().enumerate() {
                if *needed {
                    // IMPORTANT (W2): never retried; a failure poisons the log (W7).
                    let t = std::time::Instant::now();
                    ring.file(i)?.sync()?;
                    let us = t.elapsed().as_micros() as u64;
                    c.add(&c.fsyncs, 1);
                    c.add(&c.fsync_us, us);
                    if us >= super::stats::SLOW_FSYNC_US {
                        c.add(&c.slow_fsyncs, 1);
                    }
                }
            }
        }
        Ok(touched)
    }

    pub fn current_lsn(&self) -> Lsn {
        Lsn(self.shared.current_lsn.load(Ordering::Acquire))
    }

    pub fn written_lsn(&self) -> Lsn {
        Lsn(self.shared.state.lock().written)
    }

    pub fn flushed_lsn(&self) -> Lsn {
        Lsn(self.shared.state.lock().flushed)
    }

    pub fn checkpoint_lsn(&self) -> Lsn {
        Lsn(self.shared.checkpoint_lsn.load(Ordering::Acquire))
    }

    /// Stream bytes that may lie between the checkpoint and the current LSN.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity.load(Ordering::Acquire)
    }

    /// The size of each log file and their number, as the files in use now have them.
    pub fn file_geometry(&self) -> (u64, u32) {
        let ring = self.shared.ring();
        (ring.geom.file_size, ring.geom.files)
    }

    pub fn config(&self) -> &LogConfig {
        &self.shared.cfg
    }

    pub fn stats(&self) -> LogStats {
        self.shared.counters.snapshot()
    }

    /// The redo replay rate (bytes per second) recorded with the checkpoints (what the layer
    /// above chose to record after the recoveries it measured), or 0 if none was recorded.
    pub fn replay_rate(&self) -> u64 {
        self.shared.replay_rate.load(Ordering::Acquire)
    }

    /// Records a redo replay rate (bytes per second); the next checkpoint slot written carries
    /// it, so it outlives this run (and a crash of it).
    pub fn set_replay_rate(&self, bytes_per_s: u64) {
        let mut writer = self.shared.ckpt.lock();
        writer.replay_rate = bytes_per_s;
        self.shared
            .replay_rate
            .store(bytes_per_s, Ordering::Release);
    }
}

impl Log {
    /// Records `lsn` (a group boundary, `<= flushed_lsn`) as the checkpoint: everything before it
    /// may be reused. A value not above the current checkpoint is ignored. Writes the older slot
    /// and fsyncs it; an I/O error poisons the log.
    ///
    /// Panics if `lsn > flushed_lsn()`: checkpointing undurable log is a bug in the caller.
    pub fn write_checkpoint(&self, lsn: Lsn) -> Result<()> {
        let sh = &self.shared;
        let mut writer = sh.ckpt.lock();
        let ring = {
            let st = sh.state.lock();
            st.usable()?;
            assert!(
                lsn.0 <= st.flushed,
                "checkpoint at {lsn} beyond the flushed LSN {}",
                st.flushed
            );
            if lsn.0 <= st.checkpoint {
                return Ok(());
            }
            st.ring.clone()
        };
        let slot = Slot {
            number: writer.next_number,
            lsn: lsn.0,
            epoch: sh.epoch,
            replay_rate: writer.replay_rate,
        };
        let file0 = ring.file(0)?;
        if let Err(e) = write_slot(file0.as_ref(), &ring.geom, &slot) {
            sh.poison(&e);
            return Err(e);
        }
        writer.next_number += 1;
        let mut st = sh.state.lock();
        st.checkpoint = lsn.0;
        sh.checkpoint_lsn.store(lsn.0, Ordering::Release);
        drop(st);
        sh.counters.add(&sh.counters.checkpoints, 1);
        sh.counters.add(&sh.counters.fsyncs, 1);
        Ok(())
    }
}
