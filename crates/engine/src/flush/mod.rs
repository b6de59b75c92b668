//! flush: when and how much to write back.
//!
//! Owns the [`Durability`] state of the write path above the log: admission at the async/sync
//! flush points, log-space reservations of transactions in flight, the page cleaner and LRU
//! cleaner threads and their policies, the per-second samples, and the engine's poison flag.
//! It frees log space for writers that find the log full ([`MakeRoom`], registered with the
//! log's [`LogSpace`], which owns the checkpoint fence and computation, invariant 2). `buffer`
//! knows how to write pages (and keeps the WAL rule); this module decides when and how many.
//!
//! Invariants (docs/invariants.md):
//! - Past the async point (`checkpoint_async_pct` of capacity) the flusher writes as fast as it
//!   can; past the sync point (`checkpoint_sync_pct`) a committing thread flushes oldest pages
//!   itself before it may append more, and the time it waits is counted. The sync point leaves
//!   headroom so an mtr that is already holding latches never finds the log full.
//!
//! Never: flush while holding a page latch (a page cleaner would wait on that very page).

pub mod cleaner;
pub mod concurrency;
pub mod lru;
pub mod policy;
mod resize;
pub mod sample;

pub use resize::RESIZE_WAIT_MAX;

use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::types::Lsn;
use crate::wal::space::LOG_SPACE_WAIT_MAX;
use crate::wal::{Log, LogSpace, MakeRoom};
use parking_lot::{Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pages written per doublewrite batch.
pub const FLUSH_BATCH_PAGES: usize = 64;

/// How far ahead of the LSN the pace's line may run, in seconds of its rate: time that
/// clients not ready for it left unused is kept this long.
const PACE_CREDIT_S: f64 = 0.02;
/// The longest one pace wait; the line is never further behind the LSN than this, in seconds
/// of its rate (an older debt is forgiven, so a line left behind cannot hold every
/// transaction for the longest wait from then on).
const PACE_WAIT_MAX_S: f64 = 0.05;

/// One step of the pace's line: the line `line` (LSN) advanced by `rate` bytes/s over `dt`
/// seconds, held within [`PACE_WAIT_MAX_S`] behind and [`PACE_CREDIT_S`] ahead of the LSN
/// `cur`. Returns the new line and the seconds a transaction starting now waits for the line
/// to reach `cur`.
fn pace_line(line: f64, dt: f64, cur: f64, rate: f64) -> (f64, f64) {
    let l = (line + rate * dt)
        .min(cur + rate * PACE_CREDIT_S)
        .max(cur - rate * PACE_WAIT_MAX_S);
    (l, ((cur - l) / rate).max(0.0))
}

/// The pace's writer ([`Durability::pace_wait`]): batches by `write` while `held` says the
/// transaction is still held with the age past the pace's `write_from`, until a batch fails
/// (`None`) or finds nothing to write. Returns the batches written.
fn write_while_held(
    mut held: impl FnMut() -> bool,
    mut write: impl FnMut() -> Option<usize>,
) -> u32 {
    let mut batches = 0;
    while held() {
        match write() {
            Some(n) if n > 0 => batches += 1,
            _ => break,
        }
    }
    batches
}

/// When and why a commit joined the admission queue ([`Durability::admit_stalled`]): whether
/// its redo would have taken the age past the sync point then.
#[derive(Clone, Copy, Debug)]
struct Queued {
    at: Instant,
    at_sync: bool,
}

/// The least room, beyond its next record, with which the owner of the oldest pin continues
/// its commit ([`Durability::admit_continuation`]): one write, then the next continuation
/// record. A leaf split logs about a page, so four pages is a write that splits a leaf and its
/// parent; a write that logs more finds the log full as it would have without this.
pub const CONTINUATION_LEAST_PAGES: u64 = 4;

crate::counter::counter_group! {
    /// Who wrote pages back, and what commits waited for it.
    pub struct FlushCounters => FlushCounts {
        /// Pages written from the flush lists by the page cleaner (the policy's plan).
        pages_flushed_background: "pages",
        /// Pages written from the LRU tails by the page cleaner.
        pages_flushed_lru: "pages",
        /// Pages written by committing threads past the sync point (checkpoint age).
        pages_flushed_sync: "pages",
        /// Pages written by committing threads that found the log's free space promised to
        /// transactions in flight (reservations), below the sync point.
        pages_flushed_log_space: "pages",
        /// Pages written for the pace (steady where commits write for their room): by a
        /// transaction it held back, while it waited, or by the page cleaner standing in for
        /// one while none is held and the checkpoint age is past the pace's target.
        pages_flushed_pace: "pages",
        /// Pages written by committing threads past max_dirty_pages_pct.
        pages_flushed_max_dirty: "pages",
        /// Commits that flushed pages themselves past max_dirty_pages_pct.
        max_dirty_waits: "waits",
        /// Time commits spent flushing past max_dirty_pages_pct.
        max_dirty_wait_us: "us",
        /// Commit admission delays served (steady).
        admission_delays: "delays",
        /// Time commits spent in admission delays.
        admission_delay_us: "us",
        /// Background work (the change buffer's merges) that found no room in the log and
        /// waited for the page cleaner to free it (it writes no page itself: it is no client,
        /// and a commit queued behind it writes its own batch).
        room_waits: "waits",
        /// Time background work spent waiting for the page cleaner to free log room.
        room_wait_us: "us",
        /// Commits that wrote redo (commits of an empty write set are not counted here).
        commits_logged: "commits",
        /// Commits that flushed pages themselves past the sync point.
        sync_flush_waits: "waits",
        /// Time commits spent flushing past the sync point.
        sync_flush_wait_us: "us",
        /// Waits for log space below the sync point (reservations of transactions in flight).
        log_space_waits: "waits",
        /// Time spent waiting for log space below the sync point.
        log_space_wait_us: "us",
    }
}

pub struct Durability {
    pub log: Arc<Log>,
    /// The log's space: fence, applying transactions, the checkpoint computation.
    pub space: Arc<LogSpace>,
    pub pool: Arc<BufferPool>,
    reserved: AtomicU64,
    /// The checkpoint LSN that background work waiting for log room
    /// ([`Durability::admit_background`]) needs; the page cleaner writes every page below it
    /// first. 0: none asked.
    pub room_target: AtomicU64,
    /// Threads waiting for log space in `admit`, and the turn they take one at a time.
    admit_waiters: AtomicU64,
    admit_turn: Mutex<()>,
    /// The options; the dynamic ones may change while open (read each cleaner loop). Written
    /// through [`Durability::set_knobs`] only.
    pub knobs: Knobs,
    /// The admission delay the last commit waited (or the policy asked at its last loop), µs.
    pub admission_delay_now_us: AtomicU64,
    /// The policy's delay curve, evaluated by each commit on the checkpoint age it sees.
    pub admission: RwLock<Option<policy::AdmissionCurve>>,
    /// The policy's pace on the log's head, served with the admission delay, and its line:
    /// (when, LSN) last computed ([`pace_line`]).
    pub pace: RwLock<Option<policy::Pace>>,
    /// The policy's [`policy::FlushPlan::room_help`], as of the page cleaner's last plan.
    pub room_help: AtomicBool,
    pace_line: Mutex<(Instant, f64)>,
    /// Held by the one waiting transaction that writes pages in its pace wait.
    pace_writer: Mutex<()>,
    /// Free frames per buffer-pool instance the LRU cleaner keeps ready (set by the cleaner
    /// from the policy's plan each loop).
    pub lru_free_target: AtomicU64,
    /// Page-write batches the page cleaner and the LRU cleaner keep in flight.
    pub write_concurrency: concurrency::WriteConcurrency,
    lru_wake: Mutex<bool>,
    lru_wake_cv: Condvar,
    /// The LRU cleaner's thread is running (set by it on start, cleared when it returns): a
    /// reader waits for it only while it runs.
    lru_running: std::sync::atomic::AtomicBool,
    /// Old row versions kept for read views (the per-second sample reports the history).
    pub versions: Arc<crate::mvcc::VersionStore>,
    /// Per-second samples recorded by the cleaner (the last hour).
    pub samples: Mutex<std::collections::VecDeque<sample::Sample>>,
    pub counters: FlushCounters,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    stop: AtomicBool,
}

/// The options, read without a lock: every transaction reads a few (its isolation, its
/// durability, the lock wait timeout), and a read lock writes its lock word, a cache line
/// that every thread's transactions then pass between the cores (with two threads doing point
/// gets, one of a dozen such lines that made a second thread add nothing). A read is a
/// snapshot of all options at once; a change replaces the whole set.
pub struct Knobs(arc_swap::ArcSwap<Options>);

/// A read of [`Knobs`]: the options as they were when it was taken.
pub struct KnobsRef(arc_swap::Guard<Arc<Options>>);

impl std::ops::Deref for KnobsRef {
    type Target = Options;
    fn deref(&self) -> &Options {
        &self.0
    }
}

impl Knobs {
    pub fn read(&self) -> KnobsRef {
        KnobsRef(self.0.load())
    }
}

impl Durability {
    /// Replaces the options (what `set_option` and a log resize changed).
    pub fn set_knobs(&self, k: Options) {
        self.knobs.0.store(Arc::new(k));
    }

    /// The durability state over `log` and `pool`; it frees log space for writers that find
    /// the log full (registered with the log's [`LogSpace`] as its [`MakeRoom`]).
    pub fn new(log: Arc<Log>, pool: Arc<BufferPool>, knobs: Options) -> Arc<Self> {
        let space = Arc::new(LogSpace::new(log.clone()));
        let history_limit = knobs.max_history_size;
        let write_concurrency =
            concurrency::WriteConcurrency::new(knobs.write_io_threads as usize, Instant::now());
        let dur = Arc::new(Durability {
            log,
            space,
            pool,
            reserved: AtomicU64::new(0),
            room_target: AtomicU64::new(0),
            admit_waiters: AtomicU64::new(0),
            admit_turn: Mutex::new(()),
            knobs: Knobs(arc_swap::ArcSwap::from_pointee(knobs)),
            admission_delay_now_us: AtomicU64::new(0),
            admission: RwLock::new(None),
            pace: RwLock::new(None),
            room_help: AtomicBool::new(false),
            pace_line: Mutex::new((Instant::now(), 0.0)),
            pace_writer: Mutex::new(()),
            lru_free_target: AtomicU64::new(0),
            write_concurrency,
            lru_wake: Mutex::new(false),
            lru_wake_cv: Condvar::new(),
            lru_running: std::sync::atomic::AtomicBool::new(false),
            versions: crate::mvcc::VersionStore::new(history_limit),
            samples: Mutex::new(std::collections::VecDeque::new()),
            counters: FlushCounters::default(),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&dur);
        dur.space.set_make_room(weak);
        dur
    }

    /// Fails once the engine has stopped accepting writes (invariant 5): after any failure
    /// recorded in the engine's [`crate::error::Health`] (shared with the pool, the log and the doublewrite
    /// area, so a user thread evicting a page that hits a write error stops commits too).
    pub fn check_poison(&self) -> Result<()> {
        self.pool.health().check()
    }

    /// Stops writes for good after an I/O failure whose outcome is uncertain.
    pub fn poison(&self, e: &Error) {
        if self.pool.health().fail(&e.to_string()) {
            tracing::error!("evenkeel stops accepting writes: {e}");
        }
    }

    /// Log space promised to transactions in flight ([`Durability::admit`]), bytes.
    pub fn reserved_bytes(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    pub fn checkpoint_age(&self) -> u64 {
        self.log
            .current_lsn()
            .0
            .saturating_sub(self.log.checkpoint_lsn().0)
    }

    /// What `recovery_time_target` asks now: None when it is off.
    pub fn recovery_target(&self) -> Option<RecoveryTarget> {
        let seconds = self.knobs.read().recovery_time_target;
        RecoveryTarget::new(seconds, self.log.replay_rate(), self.log.capacity())
    }

    /// The log capacity the flush points and the policies plan against: the log's own, or
    /// under `recovery_time_target` the checkpoint age recovery replays in that time, so every
    /// policy, the async and sync points and the commits' admission hold the age under it as
    /// they hold it under a log of that size.
    pub fn flush_capacity(&self) -> u64 {
        self.recovery_target()
            .map_or(self.log.capacity(), |t| t.max_age)
    }

    /// Checkpoint ages (bytes) of the async and sync flush points (of [`Self::flush_capacity`]).
    pub fn points(&self) -> (u64, u64) {
        let cap = self.flush_capacity() as f64;
        let k = self.knobs.read();
        (
            (cap * k.checkpoint_async_point_pct as f64 / 100.0) as u64,
            (cap * k.checkpoint_sync_point_pct as f64 / 100.0) as u64,
        )
    }

    /// Admission delay (steady): a writing transaction waits what the policy's curve asks at
    /// the checkpoint age it sees now, so demand above what the device absorbs slows writers
    /// smoothly instead of driving the log into the sync point — and the delay follows the age
    /// between cleaner loops.
    ///
    /// A transaction serves it before it takes its first key lock (`Transaction::lock_x`),
    /// not at commit: a delay served holding locks is served again by every transaction
    /// queued on them, so on hot rows (TPC-C's warehouse and district rows) a 2 ms delay per
    /// commit became convoys of a hundred milliseconds and more, and the rate control turned
    /// into 1-second dips (docs/measurements.md, "Admission before the first lock").
    pub fn admission_delay(&self) {
        if let Some(pace) = *self.pace.read() {
            self.pace_wait(pace);
        }
        let Some(curve) = *self.admission.read() else {
            return;
        };
        let us = curve.delay_us(self.checkpoint_age() + self.reserved_bytes());
        self.admission_delay_now_us.store(us, Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
            self.count_admission_delay(us);
        }
    }

    /// Counts one admission delay of `us` microseconds (the curve's or the pace's).
    fn count_admission_delay(&self, us: u64) {
        self.counters
            .admission_delays
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .admission_delay_us
            .fetch_add(us, Ordering::Relaxed);
    }

    /// Waits until the pace's line reaches the LSN ([`pace_line`]). A transaction held back
    /// with the checkpoint age past the pace's `write_from` writes batches of the oldest pages
    /// while it waits, if no other waiting transaction is writing: the writes that keep the
    /// device full and the checkpoint moving while the pace keeps commits off the log's room,
    /// as a commit that finds no room writes until it has some (a batch may outlast the wait;
    /// one writer at a time bounds what that costs the clients).
    ///
    /// Batches for the whole wait, not one: with one batch per wait the device wrote the 64
    /// pages in less than the wait and then sat idle, so it measured its own rate lower
    /// (`next_device_rate`), the flush lists' share of it fell, the checkpoint's advance with
    /// it, and the pace's line, which follows that advance, held the commits lower still
    /// (docs/measurements.md, "The pace's writer, and its line at engagement").
    fn pace_wait(&self, pace: policy::Pace) {
        let now = Instant::now();
        let cur = self.log.current_lsn().0 as f64;
        let age = self.checkpoint_age();
        let rate = pace.rate(age);
        let wait_s = {
            let mut line = self.pace_line.lock();
            let dt = now.saturating_duration_since(line.0).as_secs_f64();
            let (l, wait_s) = pace_line(line.1, dt, cur, rate);
            *line = (now, l);
            wait_s
        };
        if wait_s <= 0.0 {
            return;
        }
        let wait = Duration::from_secs_f64(wait_s);
        if age >= pace.write_from {
            if let Some(_writer) = self.pace_writer.try_lock() {
                write_while_held(
                    || now.elapsed() < wait && self.checkpoint_age() >= pace.write_from,
                    || {
                        // a failed write poisons the engine (flush_oldest); the commit finds it
                        let n = self.pace_batch().ok()?;
                        let _ = self.checkpoint();
                        Some(n)
                    },
                );
            }
        }
        std::thread::sleep(wait.saturating_sub(now.elapsed()));
        self.count_admission_delay(now.elapsed().as_micros() as u64);
    }

    /// The page cleaner standing in for the pace's writer ([`Self::pace_wait`]) while no held
    /// transaction writes: with the checkpoint age at or past the pace's `target`, batches of
    /// the oldest pages until the age is under it or `until`. Returns the pages written.
    ///
    /// Why: the pace's writer is a transaction the pace holds, so it writes only while commits
    /// run faster than the pace's line. Where they run slower (the engine short of CPU, not
    /// of the device), nobody is held, the flush lists write their share of the device
    /// ([`policy::steady::ROOM_SHARE`]) and the rest of it idles, the age climbs past the
    /// target to the commits' room, and commits stall writing for it: the lowest seconds of
    /// the holes' insert setup (docs/measurements.md, "The cleaner standing in for the pace's
    /// writer"). Only past the target: under it the held writer's writes, from `write_from`,
    /// are the pace's own, and more here would hold the age lower and write pages younger.
    pub fn pace_stand_in(&self, pace: policy::Pace, until: Instant) -> Result<u64> {
        let Some(_writer) = self.pace_writer.try_lock() else {
            return Ok(0);
        };
        let mut written = 0u64;
        while Instant::now() < until && self.checkpoint_age() >= pace.target {
            let n = self.pace_batch()?;
            if n == 0 {
                break;
            }
            written += n as u64;
            self.checkpoint()?;
        }
        Ok(written)
    }

    /// One batch of the oldest pages written for the pace, by a held transaction or by the
    /// cleaner in its stead, counted in `pages_flushed_pace`.
    fn pace_batch(&self) -> Result<usize> {
        let n = self.flush_oldest(FLUSH_BATCH_PAGES)?;
        self.counters
            .pages_flushed_pace
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// check_max_dirty_foreground: while dirty pages exceed max_dirty_pages_pct, a
    /// committing thread writes oldest pages itself before it may dirty more, so the limit
    /// really holds whatever the policy does.
    fn max_dirty_foreground(&self) -> Result<()> {
        let (on, max_pct) = {
            let k = self.knobs.read();
            (k.check_max_dirty_foreground, k.max_dirty_pages_pct as f64)
        };
        if !on || self.pool.dirty_pct() <= max_pct {
            return Ok(());
        }
        let t = Instant::now();
        self.counters
            .max_dirty_waits
            .fetch_add(1, Ordering::Relaxed);
        let mut rounds = 0;
        while self.pool.dirty_pct() > max_pct && rounds < 64 {
            let n = self.flush_oldest(FLUSH_BATCH_PAGES)?;
            self.counters
                .pages_flushed_max_dirty
                .fetch_add(n as u64, Ordering::Relaxed);
            if n == 0 {
                break;
            }
            rounds += 1;
        }
        self.counters
            .max_dirty_wait_us
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Admission before a transaction (or DDL) appends `redo_bytes` at most: past the sync
    /// point the caller flushes oldest pages itself until there is room (counted as a stall).
    /// Returns a reservation to release when the writes are appended.
    ///
    /// Waiters are served one at a time in arrival order, and while one waits every later
    /// arrival queues behind it: without that a large transaction (an index build's batch in
    /// a 4 MiB log) never found room, because small ones kept taking what the flushing freed,
    /// until the engine gave up after 30 s (found by the insert benchmark's l.x step).
    pub fn admit(&self, redo_bytes: u64) -> Result<Reservation<'_>> {
        self.admission_delay();
        self.admit_delayed(redo_bytes)
    }

    /// [`Self::admit`] for a transaction that has served its admission delay already (before
    /// its first lock, see [`Self::admission_delay`]): the reservation alone.
    pub fn admit_delayed(&self, redo_bytes: u64) -> Result<Reservation<'_>> {
        self.check_poison()?;
        self.max_dirty_foreground()?;
        let (asyncp, syncp) = self.points();
        if let Some(r) = self.reserve_unqueued(redo_bytes, asyncp, syncp) {
            return Ok(r);
        }
        let queued = Queued {
            at: Instant::now(),
            at_sync: self.checkpoint_age() + redo_bytes > syncp,
        };
        self.in_turn(|| self.admit_stalled(redo_bytes, asyncp, syncp, queued))
    }

    /// A reservation taken at once: only when nobody waits in the admission queue (waiters
    /// are served in arrival order) and it fits.
    fn reserve_unqueued(&self, bytes: u64, asyncp: u64, syncp: u64) -> Option<Reservation<'_>> {
        if self.admit_waiters.load(Ordering::Acquire) != 0 {
            return None;
        }
        self.try_reserve(bytes, asyncp, syncp)
    }

    /// Runs `f` at the head of the admission queue: one waiter at a time, in arrival order,
    /// counted in `admit_waiters` so later arrivals queue behind it.
    fn in_turn<R>(&self, f: impl FnOnce() -> R) -> R {
        self.admit_waiters.fetch_add(1, Ordering::AcqRel);
        let res = {
            let _turn = self.admit_turn.lock();
            f()
        };
        self.admit_waiters.fetch_sub(1, Ordering::AcqRel);
        res
    }

    /// Admission for background work (the change buffer's merges): a reservation of
    /// `redo_bytes` as [`Self::admit`] makes, with no admission delay and no stall counted
    /// (those are what clients wait, and this is not a client). Taken at once when it fits
    /// and no transaction is waiting; otherwise the caller queues with the transactions, in
    /// arrival order, and waits for the page cleaner to make room (as a steady commit's room
    /// wait does), writing nothing itself. None when `stop` is set first.
    ///
    /// Queued, not yielding: a merge that took room only when no transaction waited never got
    /// any while clients queued for log space all the time (insert l.i1, 16 clients over a
    /// 2 x 4 MiB log), so the change buffer filled to its limit, buffering stopped and every
    /// insert read its leaf.
    pub fn admit_background(
        &self,
        redo_bytes: u64,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<Reservation<'_>>> {
        self.check_poison()?;
        if stop.load(Ordering::Acquire) {
            return Ok(None);
        }
        let (asyncp, syncp) = self.points();
        if let Some(r) = self.reserve_unqueued(redo_bytes, asyncp, syncp) {
            return Ok(Some(r));
        }
        self.in_turn(|| self.background_wait(redo_bytes, stop))
    }

    /// [`Self::admit_background`]'s wait at the head of the queue: asks the page cleaner for
    /// room ([`Self::ask_room`]) until the reservation fits or `stop` is set.
    fn background_wait(
        &self,
        bytes: u64,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<Reservation<'_>>> {
        let mut woke: Option<Instant> = None;
        let t = Instant::now();
        let done = |waited: Duration| {
            let c = &self.counters;
            c.room_waits.fetch_add(1, Ordering::Relaxed);
            c.room_wait_us
                .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
        };
        loop {
            self.check_poison()?;
            if stop.load(Ordering::Acquire) {
                done(t.elapsed());
                return Ok(None);
            }
            let (asyncp, syncp) = self.points();
            if let Some(r) = self.try_reserve(bytes, asyncp, syncp) {
                done(t.elapsed());
                return Ok(Some(r));
            }
            self.ask_room(bytes, syncp, self.flush_capacity() / 32, &mut woke);
            std::thread::sleep(Duration::from_micros(250));
        }
    }

    /// The log space reservations may fill. Reservations are estimates; a sixteenth of the log
    /// stays free for an apply that writes more than estimated: an mtr that finds the log full
    /// holds page latches, and the page that would free the log may be one of them (found by
    /// the insert benchmark's load into a 4 MiB log with reservations allowed up to the full
    /// log).
    fn usable_log(&self) -> u64 {
        self.log.capacity() - self.log.capacity() / 16
    }

    /// What reservations leave of the log for the owner of the oldest pin to continue its
    /// commit ([`Self::admit_continuation`]): twice the largest record a pin holds plus
    /// [`CONTINUATION_LEAST_PAGES`] pages, the next owner's step on top of the current one's
    /// (each step moves a pin to the log end and frees at least the record it moved from).
    fn continuation_room(&self) -> u64 {
        2 * (self.space.largest_pinned_record()
            + CONTINUATION_LEAST_PAGES * self.pool.page_size() as u64)
    }

    /// The most the checkpoint age and every reservation together may reach: the usable log,
    /// and under `recovery_time_target` no more than its `max_age`. The sync point alone does
    /// not bound the age: each writer checks its own redo against it, so the reservations of
    /// others in flight come on top; counted against `max_age`, they cannot carry the age that
    /// recovery replays past what the target planned.
    fn reservable(&self) -> u64 {
        let usable = self
            .usable_log()
            .min(self.log.capacity().saturating_sub(self.continuation_room()));
        self.recovery_target()
            .map_or(usable, |t| usable.min(t.max_age))
    }

    /// The checkpoint age at which a commit now finds no log room ([`Self::try_reserve`]): the
    /// sync point, or the log's reservable space less what transactions in flight hold.
    pub fn room_age(&self) -> u64 {
        let (_, syncp) = self.points();
        syncp.min(self.reservable().saturating_sub(self.reserved_bytes()))
    }

    /// Reserves `bytes` of log if the age after them stays under the sync point and every
    /// reservation together fits in the log's free space ([`Self::reservable`]: under
    /// `recovery_time_target`, under its `max_age`); or, when nobody else holds one, anywhere
    /// in that space. Two limits, two purposes: the sync point is the flushing
    /// threshold every policy shares (on the age, as InnoDB's), the reservations keep a
    /// transaction that is applying — and so pins the checkpoint at its COMMIT — from finding
    /// the log full. Counting reservations against the sync point too made the sync point
    /// move with the number of clients (measured: 4 insert clients reserving 0.5 MB each in a
    /// 4 MiB log stalled at the sync point every second at 45% age).
    fn try_reserve(&self, bytes: u64, asyncp: u64, syncp: u64) -> Option<Reservation<'_>> {
        let reserved = self.reserved.load(Ordering::Acquire);
        let age = self.checkpoint_age();
        // recovery_time_target bounds the age with every reservation, a lone writer's too (a
        // transaction larger than its limit still goes through once the age is 0)
        let cap = self.reservable();
        let fits = (age + bytes <= syncp && age + reserved + bytes <= cap)
            || (reserved == 0 && (age == 0 || age + bytes <= cap));
        if !fits {
            return None;
        }
        self.reserved.fetch_add(bytes, Ordering::AcqRel);
        if age > asyncp {
            self.wake_flusher();
        }
        Some(Reservation { dur: self, bytes })
    }

    /// The slow path of [`admit`]: flush oldest pages and checkpoint until there is room.
    ///
    /// Two reasons to be here, counted apart: the checkpoint age is past the sync point (the
    /// classic stall every policy shares), or the age is below it but the log's free space (or
    /// the room under `recovery_time_target`'s `max_age`) is promised to transactions in
    /// flight (reservations). The wait is counted under the reason
    /// found when it began; each batch of pages written under the reason of that moment.
    ///
    /// The wait counted is the commit's whole wait, from when it joined the queue: a commit
    /// queued behind one that writes for room waits for log room as much as the one writing,
    /// and stalls counted from the head of the queue alone understate what the clients lost
    /// (docs/measurements.md, "The host's memory speed, and stalls counted from the queue").
    /// A commit that finds room at once when its turn comes counts its time in the queue
    /// under the reason found when it joined it.
    ///
    /// Every policy's commits come here, steady's too: the thread at the head of the queue
    /// writes the oldest pages nobody is writing (the page cleaner's batches are skipped, so
    /// the two never write the same page) while the others wait their turn. Under steady this
    /// is where the admission curve could not act: one commit's redo is a large share of a
    /// small log, or the device cannot absorb what the clients dirty. There, a commit that
    /// waited for the page cleaner instead (steady did, up to 100 ms) ran less level than
    /// one that writes its own batch: on the device-bound insert cells of `evenkeel matrix`,
    /// per-second CV 0.033-0.042 against 0.022-0.026 with a 1 GiB pool and 0.047-0.064
    /// against 0.036-0.043 with a 2 x 2 MiB log, three alternating pairs each
    /// (docs/measurements.md, "Commits that find no room write their own batch").
    ///
    /// Where the policy asks for it ([`policy::FlushPlan::room_help`]: steady), the commit
    /// also asks the page cleaner for its room ([`Self::ask_room`], no lead), and the cleaner's
    /// writers write the pages below it beside the commit. Alone, one commit's batches at a
    /// time were the only writes toward the room: in a TPC-C cell over a 1 GiB pool the
    /// device then took 7,000-7,700 of its 10,000 writes/s in the low seconds, and two runs
    /// in ten fell to detrended p1/mean 0.79-0.81 (docs/measurements.md, "The page cleaner
    /// writes beside a commit that finds no room"). The commit's own batch is still the
    /// oldest pages nobody is writing, which may lie past what it asked for: limited to the
    /// pages below its ask, it waited whenever the cleaner's batches held them all, and that
    /// TPC-C cell ran 13% slower. The classic policies keep the commit alone, as InnoDB 5.5's
    /// user threads flushed at the sync point.
    fn admit_stalled(
        &self,
        bytes: u64,
        asyncp: u64,
        syncp: u64,
        queued: Queued,
    ) -> Result<Reservation<'_>> {
        let counters = |at_sync: bool| {
            let c = &self.counters;
            if at_sync {
                (&c.sync_flush_waits, &c.sync_flush_wait_us)
            } else {
                (&c.log_space_waits, &c.log_space_wait_us)
            }
        };
        // the reason and the moment this commit first found no room at the head of the queue
        let mut stalled: Option<(bool, Instant)> = None;
        let mut woke: Option<Instant> = None;
        loop {
            // the waiter before this one may have given up and stopped the engine
            self.check_poison()?;
            if let Some(r) = self.try_reserve(bytes, asyncp, syncp) {
                // a wait that began at the head was counted then; one spent in the queue alone
                // is counted now
                let at_sync = stalled.map_or(queued.at_sync, |(at_sync, _)| at_sync);
                let (n, us) = counters(at_sync);
                if stalled.is_none() {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                us.fetch_add(queued.at.elapsed().as_micros() as u64, Ordering::Relaxed);
                return Ok(r);
            }
            let at_sync = self.checkpoint_age() + bytes > syncp;
            if stalled.is_none() {
                stalled = Some((at_sync, Instant::now()));
                counters(at_sync).0.fetch_add(1, Ordering::Relaxed);
            }
            if self.room_help.load(Ordering::Relaxed) {
                self.ask_room(bytes, syncp, 0, &mut woke);
            }
            self.room_step(if at_sync {
                &self.counters.pages_flushed_sync
            } else {
                &self.counters.pages_flushed_log_space
            })?;
            if stalled.is_some_and(|(_, t)| t.elapsed() > LOG_SPACE_WAIT_MAX) {
                let e = Error::Poisoned(format!(
                    "the redo log stayed past the sync point for {}s: {bytes} bytes of redo \
                     could not be admitted",
                    LOG_SPACE_WAIT_MAX.as_secs()
                ));
                self.poison(&e);
                return Err(e);
            }
        }
    }

    /// One step of a writer waiting for log room: a batch of the oldest pages nobody else is
    /// writing (counted in `flushed`), then a checkpoint; a short sleep when neither moved
    /// (transactions in flight hold the space: let them finish).
    fn room_step(&self, flushed: &AtomicU64) -> Result<()> {
        let before = self.log.checkpoint_lsn();
        let n = self.flush_oldest(FLUSH_BATCH_PAGES)?;
        flushed.fetch_add(n as u64, Ordering::Relaxed);
        self.checkpoint()?;
        if n == 0 && self.log.checkpoint_lsn() == before {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// A new reservation for a commit that continues itself (`txn/apply.rs`, `Applying`):
    /// `bytes` if it can have them, else, for the owner of the oldest pin, `least` (its next
    /// record and one write) from the room [`Self::continuation_room`] keeps out of every
    /// reservation. Returns the reservation and its size.
    ///
    /// Why not [`Self::admit_delayed`]: a continuing transaction has pinned its continuation
    /// record before it asks, and while it waits its pin holds the checkpoint. Queued in
    /// arrival order with the others, several continuing transactions whose records and
    /// applies filled the log waited for room that only the oldest pin's owner, queued among
    /// them, could free (four commits of 350 leaf splits in a 512 KiB log; an index build's 16
    /// clients of 3,000 entries a commit in 8 MiB), until the engine gave up after 30 s. So a
    /// continuation is in-flight work and goes before queued commits, and the owner of the
    /// oldest pin waits only for page writes: nothing older can free the log, and each step it
    /// takes moves its pin to the log end, letting the checkpoint pass what it held.
    ///
    /// A transaction whose pin is not the oldest takes no room while the log's free space is
    /// down to what the oldest pin's owner needs ([`Self::yields_to_oldest_pin`]), though a
    /// reservation would fit: its apply would stop at its first write anyway.
    pub fn admit_continuation(
        &self,
        bytes: u64,
        least: u64,
        pin: Lsn,
        write_max: u64,
    ) -> Result<(Reservation<'_>, u64)> {
        let t = Instant::now();
        let mut counted = false;
        // a wait is a log-space stall like a commit's (status, samples)
        let waited = |counted: bool| {
            if counted {
                self.counters
                    .log_space_wait_us
                    .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        };
        loop {
            self.check_poison()?;
            let (asyncp, syncp) = self.points();
            if !self.yields_to_oldest_pin(pin, write_max) {
                if let Some(r) = self.try_reserve(bytes, asyncp, syncp) {
                    waited(counted);
                    return Ok((r, bytes));
                }
            }
            if self.space.oldest_pin() == Some(pin) {
                let used = self.checkpoint_age() + self.reserved.load(Ordering::Acquire);
                let free = self.log.capacity().saturating_sub(used);
                if free >= least {
                    let granted = bytes.min(least);
                    self.reserved.fetch_add(granted, Ordering::AcqRel);
                    waited(counted);
                    return Ok((
                        Reservation {
                            dur: self,
                            bytes: granted,
                        },
                        granted,
                    ));
                }
            }
            if !counted {
                counted = true;
                self.counters
                    .log_space_waits
                    .fetch_add(1, Ordering::Relaxed);
            }
            self.room_step(&self.counters.pages_flushed_log_space)?;
            if t.elapsed() > LOG_SPACE_WAIT_MAX {
                let e = Error::Poisoned(format!(
                    "a continuing commit found no log room for {}s: {bytes} bytes of redo \
                     could not be admitted, {least} at the least (checkpoint age {} of {} \
                     bytes, {} reserved; its pin at LSN {}, the oldest at {:?}, the oldest \
                     dirty page at {:?})",
                    LOG_SPACE_WAIT_MAX.as_secs(),
                    self.checkpoint_age(),
                    self.log.capacity(),
                    self.reserved.load(Ordering::Acquire),
                    pin.0,
                    self.space.oldest_pin().map(|l| l.0),
                    self.pool.oldest_modification().map(|l| l.0),
                ));
                self.poison(&e);
                return Err(e);
            }
        }
    }

    /// The log's free space: its capacity less the checkpoint age (what appends may still take
    /// before the checkpoint moves).
    pub fn log_free(&self) -> u64 {
        self.log.capacity().saturating_sub(self.checkpoint_age())
    }

    /// Whether an apply whose pin is `pin`, and whose next write logs at most `write_max`
    /// bytes, must leave the log's last room to the owner of the oldest pin before it writes
    /// (`txn/apply.rs`, `Applying`): the log's free space is under [`Self::continuation_room`]
    /// plus one such write, and `pin` is not the oldest.
    ///
    /// Why: only the oldest pin's owner frees the log (the checkpoint cannot pass its pin, and
    /// each step it takes moves the pin to the log end), and its step needs its next record
    /// and a few pages of room ([`Self::admit_continuation`]). Reservations keep that room out
    /// of what commits may promise, but an apply's reservation is an estimate, and appliers
    /// whose pins are younger could still write the log full behind the oldest one: four
    /// commits of 350 leaf splits in a 512 KiB log ended once with the oldest pin's owner
    /// asking for 28 KB, 7.5 KB of the log free, no dirty page, and another apply holding
    /// 123 KB of reservation blocked at a full log, until the engine gave up after 30 s.
    /// Stopping before the write, an apply holds no page latch, and the oldest pin's owner
    /// never waits for a younger one, so the wait ends when the oldest steps.
    pub fn yields_to_oldest_pin(&self, pin: Lsn, write_max: u64) -> bool {
        self.log_free() < self.continuation_room() + write_max
            && self.space.oldest_pin().is_some_and(|oldest| oldest < pin)
    }

    /// Asks the page cleaner to advance the checkpoint far enough for `bytes` more to fit:
    /// by what does not fit, plus `lead` bytes (the cleaner writes every page below that LSN
    /// first). Wakes the cleaner when the target rose, and at least every 10 ms (`woke`: the
    /// last wake).
    ///
    /// The lead: background work that waits for the cleaner alone asks a 32nd of the
    /// capacity the flushing plans against, so the commits queued behind it find room too. A
    /// commit that writes beside the cleaner asks none: with a 32nd, the cleaner wrote pages
    /// younger than any commit needed, and an insert cell over a 1 GiB pool ran 2% slower
    /// and less level (docs/measurements.md, "The page cleaner writes beside a commit that
    /// finds no room").
    fn ask_room(&self, bytes: u64, syncp: u64, lead: u64, woke: &mut Option<Instant>) {
        let age = self.checkpoint_age();
        let over = (age + self.reserved_bytes() + bytes)
            .saturating_sub(self.reservable())
            .max((age + bytes).saturating_sub(syncp));
        let target = self.log.checkpoint_lsn().0 + over + lead;
        let raised = self.room_target.fetch_max(target, Ordering::AcqRel) < target;
        if raised || woke.is_none_or(|w| w.elapsed() >= Duration::from_millis(10)) {
            *woke = Some(Instant::now());
            self.wake_flusher();
        }
    }

    /// Writes back up to `n` of the oldest dirty pages that no other writer is writing.
    pub fn flush_oldest(&self, n: usize) -> Result<usize> {
        let fids = self.pool.oldest_dirty_in(n, Lsn(0), &|_| true);
        self.pool.flush_batch(&fids).inspect_err(|e| self.poison(e))
    }

    /// Fuzzy checkpoint ([`LogSpace::checkpoint`] over the pool's oldest dirty page); a
    /// failed checkpoint write poisons the engine.
    pub fn checkpoint(&self) -> Result<Lsn> {
        self.space
            .checkpoint(|| self.pool.oldest_modification())
            .inspect_err(|e| self.poison(e))
    }

    /// Wakes the LRU cleaner (a reader found no free frame). False when no LRU cleaner runs
    /// (not started, stopping, or stopped on an error): then nobody will free a frame for
    /// the reader, and it writes one itself.
    pub fn wake_lru(&self) -> bool {
        let mut w = self.lru_wake.lock();
        *w = true;
        self.lru_wake_cv.notify_one();
        drop(w);
        self.lru_running.load(Ordering::Acquire) && !self.stop.load(Ordering::Acquire)
    }

    /// Marks the LRU cleaner's thread as running until the returned guard drops (on any
    /// return from its loop, an error's included).
    pub(crate) fn lru_running_guard(&self) -> LruRunning<'_> {
        self.lru_running.store(true, Ordering::Release);
        LruRunning(self)
    }

    /// The LRU cleaner's sleep: up to `d`, or until woken. None when asked to stop, else
    /// whether a reader woke it.
    fn lru_sleep(&self, d: Duration) -> Option<bool> {
        let mut w = self.lru_wake.lock();
        if !*w && !self.stop.load(Ordering::Acquire) && !d.is_zero() {
            self.lru_wake_cv.wait_for(&mut w, d);
        }
        let woken = std::mem::replace(&mut *w, false);
        (!self.stop.load(Ordering::Acquire)).then_some(woken)
    }

    pub fn wake_flusher(&self) {
        let mut w = self.wake.lock();
        *w = true;
        self.wake_cv.notify_one();
    }

    /// Waits up to `d` for a wake-up; returns false when asked to stop.
    fn sleep(&self, d: Duration) -> bool {
        let mut w = self.wake.lock();
        if !*w && !self.stop.load(Ordering::Acquire) {
            self.wake_cv.wait_for(&mut w, d);
        }
        *w = false;
        !self.stop.load(Ordering::Acquire)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake_flusher();
        self.wake_lru();
    }
}

impl MakeRoom for Durability {
    fn make_room(&self) -> Result<bool> {
        self.wake_flusher();
        let before = self.log.checkpoint_lsn();
        let n = self.flush_oldest(FLUSH_BATCH_PAGES)?;
        self.checkpoint()?;
        Ok(n > 0 || self.log.checkpoint_lsn() > before)
    }

    fn poison(&self, e: &Error) {
        Durability::poison(self, e);
    }

    fn with_room(&self, bytes: u64, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        // No admission delay: not a client's transaction; the wait for room is the point.
        let _room = self.admit_delayed(bytes)?;
        f()
    }
}

/// The redo replay rate `recovery_time_target` assumes until a recovery of this database has
/// measured one, bytes per second: below what recovery measured on this machine's disk over
/// logs of 64 MiB and more (docs/measurements.md, "Recovery"), so an unmeasured target errs
/// short. The first recovery records the rate it reached in the checkpoint slots.
pub const ASSUMED_REPLAY_RATE: u64 = 50 << 20;
/// The least checkpoint age `recovery_time_target` holds the log to, bytes: under it the sync
/// point would make nearly every commit flush pages.
pub const RECOVERY_TARGET_MIN_AGE: u64 = 1 << 20;
/// `recovery_time_target` plans with the recorded replay rate divided by this: the safety
/// margin for the next recovery being slower than any recorded one. How fast a recovery
/// replays depends on what the engine neither controls nor sees in advance: how much of the
/// data file the OS still caches, how much of the redo is page replay and how much is COMMITs
/// re-applied, what else uses the disk and the cores. Recoveries of one TPC-C database on one
/// machine, minutes apart, ran at 177 to 500 MB/s (docs/measurements.md); since the recorded
/// rate follows a slower recovery at once ([`next_replay_rate`]), half of it still holds the
/// target through a recovery at half the slowest recent one.
pub const RECOVERY_TARGET_RATE_MARGIN: u64 = 2;
/// A recovery faster than the recorded replay rate moves the record by this fraction of the
/// difference (the divisor): one fast recovery (a warm cache, an idle machine) says little
/// about the next, so the record rises by a quarter of the way per recovery, several in a row
/// to follow a machine that really became faster.
pub const REPLAY_RATE_RISE_DIVISOR: u64 = 4;

/// The replay rate to record after a recovery measured `measured` bytes per second, given the
/// `recorded` one (0: none yet): a slower measurement replaces the record at once, a faster
/// one raises it by a [`REPLAY_RATE_RISE_DIVISOR`]th of the difference. So the record sits at
/// or below the slowest recent recovery and the target errs short.
pub fn next_replay_rate(recorded: u64, measured: u64) -> u64 {
    if recorded == 0 || measured <= recorded {
        measured
    } else {
        recorded + (measured - recorded) / REPLAY_RATE_RISE_DIVISOR
    }
}

/// What `recovery_time_target` asks of the page cleaner (shown in `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryTarget {
    /// The option, seconds.
    pub seconds: u64,
    /// The redo replay rate recorded, bytes per second; `measured` says whether a recovery of
    /// this database measured it (else it is [`ASSUMED_REPLAY_RATE`]).
    pub replay_rate: u64,
    pub measured: bool,
    /// The rate the plan assumes: `replay_rate` / [`RECOVERY_TARGET_RATE_MARGIN`].
    pub planned_rate: u64,
    /// The checkpoint age the flushing keeps under: `seconds` of redo at `planned_rate`, at
    /// least [`RECOVERY_TARGET_MIN_AGE`] and at most the log's capacity. The async and sync
    /// points are percentages of it, and admission counts every reservation against it.
    pub max_age: u64,
}

impl RecoveryTarget {
    /// The target for `seconds` (0: off) at a recorded rate (0: none measured) on a log of
    /// `capacity` bytes.
    pub fn new(seconds: u64, recorded_rate: u64, capacity: u64) -> Option<RecoveryTarget> {
        if seconds == 0 {
            return None;
        }
        let replay_rate = if recorded_rate > 0 {
            recorded_rate
        } else {
            ASSUMED_REPLAY_RATE
        };
        let planned_rate = replay_rate / RECOVERY_TARGET_RATE_MARGIN;
        Some(RecoveryTarget {
            seconds,
            replay_rate,
            measured: recorded_rate > 0,
            planned_rate,
            max_age: seconds
                .saturating_mul(planned_rate)
                .max(RECOVERY_TARGET_MIN_AGE)
                .min(capacity),
        })
    }
}

/// Log space promised to a writer by [`Durability::admit`]; released on drop.
pub struct Reservation<'a> {
    dur: &'a Durability,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.dur.reserved.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// While alive, the LRU cleaner is running ([`Durability::lru_running_guard`]).
pub(crate) struct LruRunning<'a>(&'a Durability);

impl Drop for LruRunning<'_> {
    fn drop(&mut self) {
        self.0.lru_running.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const GIB: u64 = 1 << 30;
    const MB: u64 = 1_000_000;

    #[test]
    fn the_pace_line_advances_at_its_rate_within_its_credit_and_its_longest_wait() {
        // 1 MB/s: 5 ms after a line at the LSN, a transaction 10 KB on waits 5 ms
        let (l, w) = pace_line(1_000_000.0, 0.005, 1_010_000.0, 1e6);
        assert_eq!(l, 1_005_000.0);
        assert!((w - 0.005).abs() < 1e-9, "{w}");
        // the line reached the LSN: no wait
        let (_, w) = pace_line(1_000_000.0, 0.02, 1_010_000.0, 1e6);
        assert_eq!(w, 0.0);
        // unused time is kept 20 ms at most: a second idle gives 20 KB of credit, not 1 MB
        let (l, w) = pace_line(1_000_000.0, 1.0, 1_000_000.0, 1e6);
        assert_eq!((l, w), (1_020_000.0, 0.0));
        // a line far behind (a pace that was off) holds a transaction 50 ms at most
        let (l, w) = pace_line(0.0, 0.001, 1_000_000.0, 1e6);
        assert_eq!(l, 950_000.0);
        assert!((w - PACE_WAIT_MAX_S).abs() < 1e-9, "{w}");
    }

    #[test]
    fn the_pace_writer_writes_for_as_long_as_the_transaction_is_held() {
        // held for five checks: five batches
        let mut checks = 0;
        let n = write_while_held(
            || {
                checks += 1;
                checks <= 5
            },
            || Some(64),
        );
        assert_eq!(n, 5);
        // a batch that finds nothing to write, or fails, ends it
        let mut left = vec![Some(64), Some(10), Some(0), Some(64)];
        assert_eq!(write_while_held(|| true, || left.remove(0)), 2);
        let mut left = vec![Some(64), None, Some(64)];
        assert_eq!(write_while_held(|| true, || left.remove(0)), 1);
        // not held (the wait over, or the age under write_from): nothing written
        assert_eq!(write_while_held(|| false, || Some(64)), 0);
    }

    /// A simulated log of two files of `log_file_size` bytes and a 256-frame pool of 4 KiB
    /// pages over it, nothing dirty.
    fn log_and_pool(log_file_size: u64) -> (Arc<Log>, BufferPool) {
        use crate::buffer::{DirectSink, PoolConfig};
        use crate::io::{FileKind, SimStorage, Storage};
        let storage: Arc<dyn Storage> = Arc::new(SimStorage::new());
        let c = crate::wal::LogConfig {
            file_size: log_file_size,
            files: 2,
            buffer_size: log_file_size as usize,
            ..crate::wal::LogConfig::default()
        };
        let log = Arc::new(Log::create(storage.clone(), c).unwrap());
        let cfg = PoolConfig {
            page_size: 4096,
            pool_bytes: 256 * 4096,
            instances: 1,
            old_blocks_pct: 37,
            old_blocks_time_ms: 0,
        };
        let file = storage.open("d", FileKind::Data, true).unwrap();
        let pool = BufferPool::new(
            &cfg,
            file,
            Some(log.clone()),
            Box::new(DirectSink),
            crate::error::Health::new(),
        )
        .unwrap();
        (log, pool)
    }

    /// A durability state over a 2 x 1 MiB log and a 256-frame pool of 4 KiB pages, 200 of
    /// them dirtied one after another, 2,000 bytes of redo apart: the oldest holds the
    /// checkpoint, so the checkpoint age is the whole log written.
    fn durability_with_200_dirty_pages() -> Arc<Durability> {
        use crate::types::PageId;
        let (log, pool) = log_and_pool(1 << 20);
        for n in 0..200u32 {
            let start = log.current_lsn();
            let end = log.append(&[7u8; 2000]).unwrap();
            let mut g = pool.create(PageId(n)).unwrap();
            crate::page::init(&mut g, PageId(n), crate::page::PageType::Free, 0);
            g.stamp(start, end);
        }
        log.flush_to(log.current_lsn(), true).unwrap();
        Durability::new(log, Arc::new(pool), Options::default())
    }

    #[test]
    fn the_cleaner_stands_in_for_the_pace_writer_past_the_target_while_nobody_writes() {
        let dur = durability_with_200_dirty_pages();
        let age = dur.checkpoint_age();
        assert!(age >= 400_000, "{age}");
        let pace = |target| policy::Pace {
            ff: 1e6,
            target,
            p_time_s: 0.5,
            write_from: 0,
        };
        let later = Instant::now() + Duration::from_secs(60);
        let written = || dur.counters.pages_flushed_pace.load(Ordering::Relaxed);
        // the age under the target: the pace needs no writer
        assert_eq!(dur.pace_stand_in(pace(age + 1), later).unwrap(), 0);
        // a held transaction is the pace's writer: the cleaner leaves it the work
        {
            let _held = dur.pace_writer.lock();
            assert_eq!(dur.pace_stand_in(pace(age / 2), later).unwrap(), 0);
        }
        // its time is up: nothing
        assert_eq!(dur.pace_stand_in(pace(age / 2), Instant::now()).unwrap(), 0);
        assert_eq!(written(), 0);
        // past the target with nobody writing: batches of the oldest pages, each followed by a
        // checkpoint, until the age is under the target. 64 pages leave 136 (age ~272 KB, over
        // the ~200 KB target), 128 leave 72 (~144 KB): two batches, no third
        let n = dur.pace_stand_in(pace(age / 2), later).unwrap();
        assert_eq!(n, 2 * FLUSH_BATCH_PAGES as u64);
        assert!(dur.checkpoint_age() < age / 2, "{}", dur.checkpoint_age());
        assert!(dur.checkpoint_age() > age / 4, "{}", dur.checkpoint_age());
        assert_eq!(written(), n);
    }

    /// A durability layer over a 2 x 256 KiB log and an empty pool: nothing dirty, so the
    /// checkpoint stops only at pins.
    fn durability_over_a_small_log() -> Arc<Durability> {
        let (log, pool) = log_and_pool(256 << 10);
        Durability::new(log, Arc::new(pool), Options::default())
    }

    /// Appends groups of redo until the log's free space is at most `free`.
    fn fill_log_to_free(dur: &Durability, free: u64) {
        while dur.log_free() > free {
            let n = (dur.log_free() - free).clamp(1, 4000) as usize;
            dur.log.append(&vec![5u8; n]).unwrap();
        }
    }

    #[test]
    fn an_apply_with_a_younger_pin_leaves_the_logs_last_room_to_the_oldest_pins_owner() {
        let dur = durability_over_a_small_log();
        let write_max = 16 * 4096;
        // two applying transactions: A's record first, then B's
        let a = dur.log.current_lsn();
        dur.log.append(&[1u8; 10_000]).unwrap();
        dur.space.begin_applying(a, 10_000);
        let b = dur.log.current_lsn();
        dur.log.append(&[2u8; 10_000]).unwrap();
        dur.space.begin_applying(b, 10_000);
        dur.checkpoint().unwrap();
        assert_eq!(dur.log.checkpoint_lsn(), a);
        let room = dur.continuation_room();
        assert_eq!(room, 2 * (10_000 + CONTINUATION_LEAST_PAGES * 4096));
        // plenty of log free: neither waits
        assert!(!dur.yields_to_oldest_pin(a, write_max));
        assert!(!dur.yields_to_oldest_pin(b, write_max));
        // the free space between the oldest's room and that room plus one write: B's
        // reservation would fit (nobody holds one), yet B leaves the room to A
        fill_log_to_free(&dur, room + write_max / 2);
        let free = dur.log_free();
        assert!(free > room && free < room + write_max, "{free}");
        let (asyncp, syncp) = dur.points();
        assert!(dur.try_reserve(20_000, asyncp, syncp).is_some());
        assert!(dur.yields_to_oldest_pin(b, write_max));
        assert!(!dur.yields_to_oldest_pin(a, write_max));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let got = dur.admit_continuation(20_000, 20_000, b, write_max);
                tx.send(got.map(|(_, granted)| granted)).unwrap();
            });
            assert!(
                rx.recv_timeout(Duration::from_millis(300)).is_err(),
                "B took room the oldest pin's owner needs"
            );
            // A takes its step from that room though no reservation of its size fits...
            let least = 10_000 + CONTINUATION_LEAST_PAGES * 4096;
            let (r, granted) = dur
                .admit_continuation(200_000, least, a, write_max)
                .unwrap();
            assert_eq!(granted, least);
            drop(r);
            // ...and once A's pin leaves the oldest place, B's is the oldest and B has its room
            dur.space.end_applying(a);
            let granted = rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
            assert_eq!(granted, 20_000);
        });
        assert!(!dur.yields_to_oldest_pin(b, write_max));
    }

    #[test]
    fn a_commit_that_finds_no_room_asks_the_cleaner_for_it_where_the_policy_says() {
        for help in [false, true] {
            let dur = durability_with_200_dirty_pages();
            dur.room_help.store(help, Ordering::Relaxed);
            let age = dur.checkpoint_age();
            let ckpt = dur.log.checkpoint_lsn().0;
            let (_, syncp) = dur.points();
            // a lone commit 100 KB over the log's reservable space at this age: no room until
            // pages are written
            let bytes = dur.reservable() - age + 100_000;
            let over = (age + bytes - dur.reservable()).max((age + bytes).saturating_sub(syncp));
            let r = dur.admit_delayed(bytes).unwrap();
            // it wrote whole batches of the oldest pages itself (2,000 bytes of redo a page)
            // until it fit
            let c = &dur.counters;
            let own = c.pages_flushed_sync.load(Ordering::Relaxed)
                + c.pages_flushed_log_space.load(Ordering::Relaxed);
            assert!(own >= 100_000 / 2_000, "help {help}: {own}");
            assert_eq!(own % FLUSH_BATCH_PAGES as u64, 0, "help {help}: {own}");
            assert_eq!(r.bytes, bytes);
            drop(r);
            // and asked the cleaner for exactly what did not fit, with no lead, only with help
            let asked = dur.room_target.load(Ordering::Acquire);
            assert_eq!(asked, if help { ckpt + over } else { 0 }, "help {help}");
        }
    }

    #[test]
    fn recovery_target_off_at_zero_seconds() {
        assert_eq!(RecoveryTarget::new(0, 300 * MB, GIB), None);
    }

    #[test]
    fn recovery_target_plans_with_a_share_of_the_recorded_rate() {
        let t = RecoveryTarget::new(5, 300 * MB, 4 * GIB).unwrap();
        assert!(t.measured);
        assert_eq!(t.replay_rate, 300 * MB);
        assert_eq!(t.planned_rate, 300 * MB / RECOVERY_TARGET_RATE_MARGIN);
        assert_eq!(t.max_age, 5 * t.planned_rate);
        assert!(t.max_age < 5 * t.replay_rate);
        // none recorded: the assumed rate, with the same margin
        let t = RecoveryTarget::new(5, 0, 4 * GIB).unwrap();
        assert!(!t.measured);
        assert_eq!(t.replay_rate, ASSUMED_REPLAY_RATE);
        assert_eq!(
            t.max_age,
            5 * ASSUMED_REPLAY_RATE / RECOVERY_TARGET_RATE_MARGIN
        );
    }

    #[test]
    fn recovery_target_age_stays_within_the_least_age_and_the_log() {
        // a tiny rate still leaves the least age
        let t = RecoveryTarget::new(1, 1000, GIB).unwrap();
        assert_eq!(t.max_age, RECOVERY_TARGET_MIN_AGE);
        // a long target on a small log: the log's capacity
        let t = RecoveryTarget::new(3600, 500 * MB, 64 << 20).unwrap();
        assert_eq!(t.max_age, 64 << 20);
        // no overflow at the largest values
        let t = RecoveryTarget::new(86_400, u64::MAX, u64::MAX).unwrap();
        assert_eq!(t.max_age, u64::MAX);
    }

    #[test]
    fn a_recovery_at_half_the_recorded_rate_still_holds_the_target() {
        for (seconds, rate) in [(1u64, 40 * MB), (5, 177 * MB), (5, 500 * MB), (60, 90 * MB)] {
            let t = RecoveryTarget::new(seconds, rate, u64::MAX).unwrap();
            let slow = rate as f64 / RECOVERY_TARGET_RATE_MARGIN as f64;
            assert!(t.max_age as f64 / slow <= seconds as f64, "{t:?}");
        }
    }

    #[test]
    fn the_first_measured_rate_is_recorded_as_it_is() {
        assert_eq!(next_replay_rate(0, 250 * MB), 250 * MB);
    }

    #[test]
    fn a_slower_recovery_lowers_the_record_at_once() {
        assert_eq!(next_replay_rate(500 * MB, 177 * MB), 177 * MB);
        assert_eq!(next_replay_rate(177 * MB, 177 * MB), 177 * MB);
    }

    #[test]
    fn a_faster_recovery_raises_the_record_slowly() {
        // one recovery at twice the record: a quarter of the way
        let r = next_replay_rate(200 * MB, 400 * MB);
        assert_eq!(r, 250 * MB);
        // several in a row approach the faster rate without passing it
        let mut r = 200 * MB;
        let mut steps = 0;
        while r < 390 * MB {
            let next = next_replay_rate(r, 400 * MB);
            assert!(next > r && next <= 400 * MB);
            r = next;
            steps += 1;
        }
        assert!((5..=20).contains(&steps), "{steps} recoveries");
    }

    #[test]
    fn after_a_fast_recovery_the_plan_still_covers_the_slowest_recent_rate() {
        // The campaign that failed before: the plan took 5 s at the last rate (up to 500 MB/s)
        // and the next recovery ran at 177 MB/s. Now one fast recovery after a slow one lifts
        // the planned age to less than 5 s at the slow rate.
        let record = next_replay_rate(next_replay_rate(0, 177 * MB), 500 * MB);
        let t = RecoveryTarget::new(5, record, u64::MAX).unwrap();
        assert!(t.max_age < 5 * 177 * MB, "{t:?}");
    }
}
