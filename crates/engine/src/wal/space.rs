//! space: the log space every writer shares, and the checkpoint that frees it.
//!
//! Owns the checkpoint fence, the COMMIT LSNs of transactions still applying, appending a
//! group under the fence ([`LogSpace::append_fenced`]) and computing the checkpoint LSN
//! ([`LogSpace::checkpoint`]). `mtr` and `btree` reach the log only through this handle; what
//! frees space when the log is full (writing back the oldest dirty pages) belongs to the
//! layer above, `flush`, which registers itself as the [`MakeRoom`] callback.
//!
//! Invariants (docs/invariants.md):
//! - 2: checkpoint LSN = min(log end, oldest_modification of every dirty page, COMMIT LSN of
//!   every transaction still applying). The fence makes "append a group, then put its pages on
//!   the flush list" atomic with respect to computing that minimum: an mtr holds the fence
//!   shared from append to stamping, the checkpoint takes it exclusive to compute.
//!
//! Never: wait for log space while holding the fence (the checkpoint that would free it takes
//! the fence exclusive).

use super::{Log, LsnRange};
use crate::error::{Error, Result};
use crate::types::Lsn;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How long a writer may wait for log space before the engine gives up and poisons itself.
pub const LOG_SPACE_WAIT_MAX: Duration = Duration::from_secs(30);
/// How long a writer waits for log space before a warning names it.
pub const LOG_SPACE_WAIT_WARN: Duration = Duration::from_secs(5);

/// What the layer above does for a writer that found the log full.
pub trait MakeRoom: Send + Sync {
    /// Writes back some of the oldest dirty pages and checkpoints; true when that made
    /// progress (pages written or the checkpoint moved).
    fn make_room(&self) -> Result<bool>;
    /// Stops writes for good after an error whose outcome is uncertain.
    fn poison(&self, e: &Error);
    /// Runs `f` holding a reservation of `bytes` of log space, taken as a transaction's
    /// (waiting for room, and writing pages for it, before `f` latches anything).
    fn with_room(&self, bytes: u64, f: &mut dyn FnMut() -> Result<()>) -> Result<()>;
}

/// The log and the state that decides how much of it is free.
pub struct LogSpace {
    log: Arc<Log>,
    fence: RwLock<()>,
    /// COMMIT LSN -> transactions applying from it, and the largest of their records (the
    /// COMMIT or continuation there, bytes); also the pins of backups copying the log
    /// ([`LogSpace::pin_checkpoint`], record 0).
    applying: Mutex<BTreeMap<u64, (u32, u64)>>,
    /// The largest record in `applying`, kept beside it (under its mutex) so that every
    /// admission and every apply's check of the log's last room reads it without the lock.
    largest_record: AtomicU64,
    /// Held from re-reading `applying` to writing the checkpoint, and by `pin_checkpoint`: a
    /// pin taken at the checkpoint is never passed by a checkpoint computed before it.
    gate: Mutex<()>,
    /// Set once, by the layer above, right after construction (weak: it owns this handle).
    room: OnceLock<Weak<dyn MakeRoom>>,
    /// Appends that found the log full.
    pub log_full_waits: AtomicU64,
    /// Checkpoints written by [`LogSpace::checkpoint`].
    pub checkpoints: AtomicU64,
}

impl LogSpace {
    pub fn new(log: Arc<Log>) -> LogSpace {
        LogSpace {
            log,
            fence: RwLock::new(()),
            applying: Mutex::new(BTreeMap::new()),
            largest_record: AtomicU64::new(0),
            gate: Mutex::new(()),
            room: OnceLock::new(),
            log_full_waits: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
        }
    }

    /// Registers what frees space when the log is full. Only the first call takes effect.
    pub fn set_make_room(&self, room: Weak<dyn MakeRoom>) {
        let _ = self.room.set(room);
    }

    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn room(&self) -> Option<Arc<dyn MakeRoom>> {
        self.room.get().and_then(Weak::upgrade)
    }

    fn poison(&self, e: &Error) {
        if let Some(r) = self.room() {
            r.poison(e);
        }
    }

    /// Runs `f`, an mtr (or a few) that no transaction's reservation covers and that logs at
    /// most `bytes`, once the log has room for it, holding that room while `f` runs: InnoDB's
    /// log_free_check(). Why before: an mtr holds its page latches until its redo is appended,
    /// so one that waits for log space at append can hold the very page the checkpoint waits
    /// for. Dropping a table frees each page in an mtr that also changes the file header (page
    /// 0), so page 0 is the oldest dirty page; waiting at append, the dropping thread held it
    /// while nothing could write it, and the engine gave up after LOG_SPACE_WAIT_MAX
    /// (docs/measurements.md, "Dropping a table stalled the engine"). Without a registered
    /// [`MakeRoom`] (while a database opens) `f` runs at once.
    pub fn with_room(&self, bytes: u64, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some(room) = self.room() else {
            return f();
        };
        let mut f = Some(f);
        room.with_room(bytes, &mut || match f.take() {
            Some(f) => f(),
            None => Ok(()),
        })
    }

    pub fn fence_shared(&self) -> RwLockReadGuard<'_, ()> {
        self.fence.read()
    }

    /// Appends an mtr group and returns it with the fence held shared; the caller keeps the
    /// guard until its pages are stamped (invariant 2). On a full log, asks [`MakeRoom`]
    /// (without the fence) until the checkpoint makes room, for at most 30 s.
    pub fn append_fenced<'a>(
        &'a self,
        payload: &[u8],
    ) -> Result<(LsnRange, RwLockReadGuard<'a, ()>)> {
        let start = Instant::now();
        let mut warned = false;
        loop {
            let fence = self.fence.read();
            match self.log.append_range(payload) {
                Ok(r) => return Ok((r, fence)),
                Err(Error::LogFull { .. }) => {
                    drop(fence);
                    self.log_full_waits.fetch_add(1, Ordering::Relaxed);
                    if !warned && start.elapsed() > LOG_SPACE_WAIT_WARN {
                        // Once per wait: which append starves, and (RUST_BACKTRACE=1) from
                        // where, before the wait ends in LOG_SPACE_WAIT_MAX's refusal.
                        warned = true;
                        tracing::warn!(
                            "an append of {} bytes has found the redo log full for {}s \
                             (checkpoint age {} of {} bytes); its stack: {}",
                            payload.len(),
                            LOG_SPACE_WAIT_WARN.as_secs(),
                            self.log.current_lsn().0 - self.log.checkpoint_lsn().0,
                            self.log.capacity(),
                            std::backtrace::Backtrace::capture()
                        );
                    }
                    // The writer makes room itself too: at open, recovery re-applies
                    // transactions before any page cleaner runs, into a log that may have
                    // crashed nearly full.
                    let progressed = match self.room() {
                        Some(r) => r.make_room()?,
                        None => false,
                    };
                    if progressed {
                        continue;
                    }
                    if start.elapsed() > LOG_SPACE_WAIT_MAX {
                        let e = Error::Poisoned(format!(
                            "the redo log stayed full for {}s: checkpoints could not advance",
                            LOG_SPACE_WAIT_MAX.as_secs()
                        ));
                        self.poison(&e);
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => {
                    self.poison(&e);
                    return Err(e);
                }
            }
        }
    }

    /// Registers a transaction whose COMMIT group starts at `lsn` and is still being applied:
    /// the checkpoint may not pass it. Called with the fence held.
    pub fn begin_applying(&self, lsn: Lsn, record: u64) {
        let mut a = self.applying.lock();
        let e = a.entry(lsn.0).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.max(record);
        self.largest_record.fetch_max(record, Ordering::AcqRel);
    }

    /// The largest record a pin holds: what the owner of the oldest pin needs room for to
    /// continue its commit (`Durability::admit_continuation`).
    pub fn largest_pinned_record(&self) -> u64 {
        self.largest_record.load(Ordering::Acquire)
    }

    /// The oldest pin: the COMMIT or continuation of a transaction still applying, or a
    /// backup's pin, that the checkpoint may not pass.
    pub fn oldest_pin(&self) -> Option<Lsn> {
        self.applying.lock().first_key_value().map(|(&a, _)| Lsn(a))
    }

    /// Pins the checkpoint where it is: until [`LogSpace::end_applying`] of the LSN returned
    /// (or of a later pin taken with `begin_applying` before it is released), no checkpoint
    /// passes it, so no log from it on is recycled. What an online backup copying the log
    /// holds; it moves the pin forward as it copies.
    pub fn pin_checkpoint(&self) -> Lsn {
        let _gate = self.gate.lock();
        let cp = self.log.checkpoint_lsn();
        self.applying.lock().entry(cp.0).or_insert((0, 0)).0 += 1;
        cp
    }

    pub fn end_applying(&self, lsn: Lsn) {
        let mut a = self.applying.lock();
        if let Some(n) = a.get_mut(&lsn.0) {
            n.0 -= 1;
            if n.0 == 0 {
                a.remove(&lsn.0);
                let largest = a.values().map(|e| e.1).max().unwrap_or(0);
                self.largest_record.store(largest, Ordering::Release);
            }
        }
    }

    /// The switch of an online resize ([`Log::resize_commit`]) with appends held off: the fence
    /// taken exclusively, as a checkpoint takes it, so no mtr is between append and stamping
    /// and none appends until the new log is in use.
    pub fn resize_commit(
        &self,
        r: &mut super::LogResize,
        headroom: u64,
    ) -> Result<Option<super::ResizeOutcome>> {
        let _f = self.fence.write();
        self.log.resize_commit(r, headroom)
    }

    /// Fuzzy checkpoint (invariant 2): computes the checkpoint LSN under the fence from the
    /// log end, `oldest_dirty` (the oldest modification of any dirty page, read under the
    /// fence) and the transactions still applying, makes the log durable up to that log end,
    /// then writes it. Returns the checkpoint LSN.
    pub fn checkpoint(&self, oldest_dirty: impl FnOnce() -> Option<Lsn>) -> Result<Lsn> {
        let (target, end) = {
            let _f = self.fence.write();
            let end = self.log.current_lsn();
            let mut cp = end;
            if let Some(o) = oldest_dirty() {
                cp = cp.min(o);
            }
            if let Some((&a, _)) = self.applying.lock().first_key_value() {
                cp = cp.min(Lsn(a));
            }
            (cp, end)
        };
        if target > self.log.checkpoint_lsn() {
            // IMPORTANT (invariant 2): durable up to `end`, not only up to `target`. A
            // transaction stops pinning the checkpoint when its ApplyDone is appended, not when
            // it is durable, and its commit returned once the COMMIT alone was durable. A
            // checkpoint past its COMMIT is sound only if the redo of its apply (below `end`,
            // appended before the ApplyDone) is durable too: otherwise a crash would lose both
            // the COMMIT (before the checkpoint) and the page changes (never on disk).
            self.log.flush_to(end, true)?;
            // A pin taken since `target` was computed (pin_checkpoint) holds it back: the
            // minimum is read again under the gate the pin is taken under.
            let _gate = self.gate.lock();
            let target = match self.applying.lock().first_key_value() {
                Some((&a, _)) => target.min(Lsn(a)),
                None => target,
            };
            self.log.write_checkpoint(target)?;
            self.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        Ok(self.log.checkpoint_lsn())
    }
}
