//! cleaner: the page cleaner. About once a second (every 10-100 ms under pressure: `wait`) it
//! runs one loop of four steps, each a method of `CleanerState`, which holds what persists
//! from one loop to the next (the averages, the counter marks, the timers):
//! - `measure`: reads the knobs and the engine (LSNs, redo rate, pages dirtied per redo byte,
//!   device write throughput, reads, dirty and free pages) into the policy's [`FlushInputs`];
//! - `plan`: asks the configured policy how many pages to write from the flush lists and the
//!   LRU tails, enforces the limits every policy shares (the async flush point, background work
//!   waiting for log room) and publishes the admission delay the policy asks of commits;
//! - `write`: sets the LRU cleaner's free-frame target, carries the plan out with
//!   `page_cleaners` threads, each owning a share of the buffer-pool instances
//!   (cleaner/flush_list.rs), and writes a checkpoint;
//! - `sample`: records the per-second sample.
//!
//! Knob changes (`Database::set_option`) are read at the top of every loop, so a new policy or
//! io_capacity takes effect within one loop. Never: latch pages itself (it only calls pool
//! functions that skip busy pages) or hold a lock across a write.

mod flush_list;

use super::policy::{self, FlushInputs, FlushPlan, FlushPolicy, Policy};
use super::sample::Sample;
use super::Durability;
use crate::options::Options;
use flush_list::carry_out;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Samples kept in memory (one hour at one per second).
const SAMPLES_KEPT: usize = 3600;

/// Counter values at the previous loop, for rates.
#[derive(Default, Clone)]
struct Marks {
    lsn: u64,
    dirtied: u64,
    reads: u64,
    /// Commits that wrote redo.
    commits: u64,
}

struct Meter {
    redo_rates: VecDeque<f64>,
    flushed: VecDeque<f64>,
    /// Best recent page-write throughput seen while the cleaner was writing (pages/s).
    device_pages_per_s: f64,
    /// When the device's window started, and the pool's write clock then
    /// (`BufferPool::write_clock`: seconds with a page write in flight, pages written).
    window_at: Instant,
    busy_pages: u64,
    busy_s: f64,
    dirtied_per_redo_byte: f64,
}

/// The longest the page cleaner stands in for the pace's writer in one loop
/// ([`Durability::pace_stand_in`]): the loop measures and plans again within this.
const STAND_IN_MAX: Duration = Duration::from_millis(50);

/// The wall time over which the device's page-write rate is measured: every writer's pages
/// (the page cleaner's, the LRU cleaner's, user threads') over the window, in a window where
/// page writes were in flight for at least [`DEVICE_BUSY_FRAC`] of it (one that kept the
/// device idle says nothing of what it can do, and leaves the estimate as it was).
///
/// Why wall time, not writing time: pages over the time writes were in flight read 2-3 times
/// what the device wrote over a second. The cleaner's own writing time missed the pages the
/// commits and the LRU cleaner wrote while it slept, and counted those that completed in its
/// short windows (a 2 ms loop that saw a commit's 64-page batch complete); the time any write
/// was in flight read 9,000-15,000 pages/s on insert l.i1 where the device wrote 5,400 (the
/// steady device's throttle admits each 100 ms slice's bytes in bursts, and the log's writes
/// share its bandwidth). A plan clamped to such an estimate wrote at twice the device for a
/// loop and starved the commits' log writes (docs/measurements.md, "The device's rate over wall
/// time, and the feed-forward averaged"). A second spans ten of the throttle's slices.
const DEVICE_WINDOW_S: f64 = 1.0;
/// The share of a window page writes must have kept the device busy for it to measure it.
const DEVICE_BUSY_FRAC: f64 = 0.5;

/// The device's page-write rate after a window of `wall` seconds in which `written` pages
/// were written with a write in flight for `busy` seconds, from the estimate `prev` (0:
/// none). Fast attack, slower decay: what the device sustained when page writes kept it busy
/// (for at least [`DEVICE_BUSY_FRAC`] of the window; a window that left it idle more than
/// that leaves the estimate as it was).
fn next_device_rate(prev: f64, written: u64, busy: f64, wall: f64) -> f64 {
    if wall.is_nan() || wall <= 0.0 || busy < DEVICE_BUSY_FRAC * wall || written < 8 {
        return prev;
    }
    let rate = written as f64 / wall;
    if rate > prev {
        rate
    } else {
        0.8 * prev + 0.2 * rate
    }
}

/// The page cleaner's thread: one loop of `CleanerState`'s steps after another, until the
/// database stops it or a write fails.
pub fn run(dur: Arc<Durability>) {
    let mut cleaner = CleanerState::new(&dur);
    while let Some(start) = cleaner.wait(&dur) {
        let measured = cleaner.measure(&dur, start);
        let plan = cleaner.plan(&dur, &measured);
        if !cleaner.write(&dur, &measured, &plan) {
            return;
        }
        cleaner.sample(&dur);
    }
}

/// What the page cleaner carries from one loop to the next.
struct CleanerState {
    /// When the cleaner started (a sample's time).
    started: Instant,
    /// The `adaptive_flushing` the policy was made for (`None` until the first loop reads it).
    policy_kind: Option<FlushPolicy>,
    policy: Box<dyn Policy>,
    meter: Meter,
    marks: Marks,
    /// When the previous loop woke.
    last: Instant,
    /// When the last sample was recorded, and the counters at that moment.
    last_sample: Instant,
    sample_base: SampleBase,
    /// Pages written in the previous loop: from the flush lists and by the LRU cleaner, and by
    /// the LRU cleaner alone.
    flushed_last: u64,
    lru_last: u64,
    /// The LRU cleaner's pages written (its counter) at the previous loop.
    lru_mark: u64,
    /// The longest wait before the next loop, as the last plan asked.
    next_loop: Duration,
    /// Pages user threads had written themselves at the previous loop.
    fg_mark: u64,
    /// What the plans asked since the last sample.
    planned: FlushPlan,
    /// EVENKEEL_SAMPLE_LOG, the file samples are appended to.
    sample_log: Option<OsString>,
}

/// What `wait` found before it slept, for the loop it starts.
struct LoopStart {
    /// Checkpoint ages (bytes) of the async and sync flush points.
    async_point: u64,
    sync_point: u64,
    /// The loop's period.
    period: Duration,
}

/// What `measure` read, for `plan` and `write`.
struct Measured {
    /// Seconds since the previous loop.
    elapsed: f64,
    /// The loop's period.
    period: Duration,
    knobs: Options,
    inputs: FlushInputs,
}

/// Rates since the previous loop.
struct Rates {
    elapsed: f64,
    /// Redo bytes per second.
    redo: f64,
    /// Commits that wrote redo, per second.
    commits: f64,
    /// Pages read per second.
    reads: f64,
}

impl CleanerState {
    fn new(dur: &Durability) -> CleanerState {
        // the write clock counts from the pool's start (recovery's writes, a load's)
        let (busy_s, busy_pages) = dur.pool.write_clock.read(Instant::now());
        CleanerState {
            started: Instant::now(),
            policy_kind: None,
            policy: policy::make(FlushPolicy::default()),
            meter: Meter {
                redo_rates: VecDeque::new(),
                flushed: VecDeque::new(),
                device_pages_per_s: 0.0,
                window_at: Instant::now(),
                busy_pages,
                busy_s,
                dirtied_per_redo_byte: 0.0,
            },
            marks: current_marks(dur),
            last: Instant::now(),
            last_sample: Instant::now(),
            sample_base: SampleBase::take(dur),
            flushed_last: 0,
            lru_last: 0,
            lru_mark: dur.counters.pages_flushed_lru.load(Ordering::Relaxed),
            // The first loop runs at once: until it has run, steady's admission curve is not
            // published, so a workload that starts at once (a benchmark step over a warm pool)
            // met a full log with the classic stalls for most of a second.
            next_loop: Duration::ZERO,
            fg_mark: foreground_flushed(dur),
            planned: FlushPlan::default(),
            sample_log: std::env::var_os("EVENKEEL_SAMPLE_LOG"),
        }
    }

    /// Sleeps until the next loop is due (10 ms while the checkpoint age is past the async
    /// point or commits wait for log room), or until woken; `None` when asked to stop.
    fn wait(&self, dur: &Durability) -> Option<LoopStart> {
        let (asyncp, syncp) = dur.points();
        // The loop must be short against the time the workload takes to fill the log: about
        // a tenth of it (a 8 MiB log filled at 4 MB/s is controlled every 200 ms).
        let fill_s = dur.flush_capacity() as f64 / avg(&self.meter.redo_rates).max(1.0);
        let period = self
            .next_loop
            .min(Duration::from_secs_f64((fill_s / 10.0).clamp(0.05, 1.0)));
        let room_asked = dur.room_target.load(Ordering::Acquire) > dur.log.checkpoint_lsn().0;
        let wait = if dur.checkpoint_age() > asyncp || room_asked {
            Duration::from_millis(10)
        } else {
            period.saturating_sub(self.last.elapsed())
        };
        if !dur.sleep(wait) {
            return None;
        }
        Some(LoopStart {
            async_point: asyncp,
            sync_point: syncp,
            period,
        })
    }

    /// Reads the knobs and what the policy needs: rates since the previous loop, LSNs, dirty,
    /// data and free pages, pages written since the previous loop, the device's rate.
    fn measure(&mut self, dur: &Durability, start: LoopStart) -> Measured {
        let elapsed = self.last.elapsed().as_secs_f64().max(0.001);
        self.last = Instant::now();
        let knobs = self.read_knobs(dur);
        let rates = self.rates(dur, elapsed, &knobs);
        let inputs = self.inputs(dur, &start, &knobs, &rates);
        Measured {
            elapsed,
            period: start.period,
            knobs,
            inputs,
        }
    }

    /// The knobs as they are now; a changed `adaptive_flushing` makes a new policy, and the
    /// pool takes its read-ahead and LRU scan depth from them.
    fn read_knobs(&mut self, dur: &Durability) -> Options {
        let knobs = dur.knobs.read().clone();
        if self.policy_kind != Some(knobs.adaptive_flushing) {
            self.policy = policy::make(knobs.adaptive_flushing);
            self.policy_kind = Some(knobs.adaptive_flushing);
        }
        dur.pool
            .set_read_ahead(knobs.read_ahead as u8, knobs.read_ahead_threshold as u32);
        dur.pool.set_lru_scan_depth(knobs.lru_scan_depth);
        knobs
    }

    /// Redo and read rates since the previous loop; updates the redo-rate average and the
    /// pages dirtied per redo byte, and moves the marks to now.
    fn rates(&mut self, dur: &Durability, elapsed: f64, knobs: &Options) -> Rates {
        let now = current_marks(dur);
        let redo = now.lsn.saturating_sub(self.marks.lsn);
        let redo_rate = redo as f64 / elapsed;
        push_avg(
            &mut self.meter.redo_rates,
            redo_rate,
            knobs.flushing_avg_loops as usize,
        );
        if redo > 0 {
            let d = now.dirtied.saturating_sub(self.marks.dirtied) as f64 / redo as f64;
            self.meter.dirtied_per_redo_byte = 0.7 * self.meter.dirtied_per_redo_byte + 0.3 * d;
        }
        let reads_per_s = now.reads.saturating_sub(self.marks.reads) as f64 / elapsed;
        let commits = now.commits.saturating_sub(self.marks.commits) as f64 / elapsed;
        self.marks = now;
        Rates {
            elapsed,
            commits,
            redo: redo_rate,
            reads: reads_per_s,
        }
    }

    /// The policy's inputs for this loop.
    fn inputs(
        &mut self,
        dur: &Durability,
        start: &LoopStart,
        knobs: &Options,
        rates: &Rates,
    ) -> FlushInputs {
        let meter = &self.meter;
        let st = dur.pool.status();
        FlushInputs {
            elapsed_s: rates.elapsed,
            period_s: start.period.as_secs_f64(),
            lsn: dur.log.current_lsn().0,
            checkpoint_lsn: dur.log.checkpoint_lsn().0,
            // under recovery_time_target, the age that target allows
            log_capacity: dur.flush_capacity(),
            async_point: start.async_point,
            sync_point: start.sync_point,
            redo_rate_last: rates.redo,
            redo_rate_avg: avg(&meter.redo_rates),
            commits_per_s: rates.commits,
            dirty_pages: st.pages_dirty,
            data_pages: st.pages_data,
            free_pages: st.pages_free,
            total_pages: st.frames,
            flushed_last: self.flushed_last,
            flushed_avg: avg(&meter.flushed),
            dirtied_per_redo_byte: meter.dirtied_per_redo_byte,
            reserved_bytes: dur.reserved_bytes(),
            room_age: dur.room_age(),
            tail_pages_per_redo_byte: {
                // the next loop's redo (at least 64 KiB) past the checkpoint
                let cp = dur.log.checkpoint_lsn().0;
                let window = (avg(&meter.redo_rates) * start.period.as_secs_f64()).max(65_536.0);
                // at most 64Ki pages per instance: the walk holds the instance's lock, and a
                // loop never writes that many
                let n = dur
                    .pool
                    .dirty_below(crate::types::Lsn(cp + window as u64), 1 << 16);
                n as f64 / window
            },
            device_pages_per_s: meter.device_pages_per_s,
            reads_per_s: rates.reads,
            io_capacity: knobs.io_capacity,
            io_capacity_max: knobs.io_capacity_max,
            max_dirty_pages_pct: knobs.max_dirty_pages_pct as f64,
            max_dirty_pages_pct_lwm: knobs.max_dirty_pages_pct_lwm as f64,
            adaptive_flushing_lwm: knobs.adaptive_flushing_lwm as f64,
            flushing_avg_loops: knobs.flushing_avg_loops,
            lru_scan_depth: knobs.lru_scan_depth,
            write_cap_pages_per_s: knobs.write_bandwidth_max / dur.pool.page_size() as u64,
            lru_flushed_last: self.lru_last,
            foreground_flushed_last: {
                let fg = foreground_flushed(dur);
                let d = fg.saturating_sub(self.fg_mark);
                self.fg_mark = fg;
                d
            },
            dirty_age_mean: dur
                .pool
                .oldest_modification_mean()
                .map_or(0.0, |m| (dur.log.current_lsn().0 as f64 - m).max(0.0)),
            doublewrite: knobs.doublewrite,
        }
    }

    /// The policy's plan with the limits every policy shares; publishes the admission delay
    /// and curve the plan asks of commits.
    fn plan(&mut self, dur: &Durability, m: &Measured) -> FlushPlan {
        let inp = &m.inputs;
        let mut plan = self.policy.plan(inp);
        // Shared by every policy: past the async point flushing is forced (io_capacity_max).
        if inp.checkpoint_age() > inp.async_point {
            let forced = (m.knobs.io_capacity_max as f64 * m.elapsed).ceil() as u64;
            plan.flush_list_pages = plan.flush_list_pages.max(forced);
        }
        // Background work waiting for log room (the change buffer's merges,
        // Durability::admit_background), and under steady a commit that finds no room
        // (Durability::admit_stalled), asks the checkpoint to reach an LSN: every page below
        // it is written first (the plan takes pages oldest first), as MySQL 8.0's page
        // cleaner serves buf_flush_sync_lsn for the user threads that wait on it.
        let room = dur.room_target.load(Ordering::Acquire);
        if room > inp.checkpoint_lsn {
            let below = dur.pool.dirty_below(crate::types::Lsn(room), 1 << 16);
            plan.flush_list_pages = plan.flush_list_pages.max(below);
            if plan.lsn_limit != 0 {
                plan.lsn_limit = plan.lsn_limit.max(room);
            }
        }
        dur.admission_delay_now_us
            .store(plan.admission_delay_us, Ordering::Relaxed);
        *dur.admission.write() = plan.admission;
        *dur.pace.write() = plan.pace;
        dur.room_help.store(plan.room_help, Ordering::Relaxed);
        tracing::debug!(
            elapsed_ms = (inp.elapsed_s * 1000.0) as u64,
            commits_per_s = inp.commits_per_s,
            in_use_pct =
                100.0 * policy::steady::in_use(inp) as f64 / inp.log_capacity.max(1) as f64,
            age_pct = 100.0 * inp.checkpoint_age() as f64 / inp.log_capacity.max(1) as f64,
            redo_last = inp.redo_rate_last as u64,
            redo_avg = inp.redo_rate_avg as u64,
            feed_forward = policy::steady::feed_forward(inp) as u64,
            dirty_pages = inp.dirty_pages,
            flush_list_pages = plan.flush_list_pages,
            flushed_last = inp.flushed_last,
            delay_at_async_us = plan.admission.map_or(0, |c| c.delay_us(c.async_age)),
            device_pages_per_s = inp.device_pages_per_s,
            "page cleaner plan"
        );
        plan
    }

    /// Carries the plan out: the LRU cleaner's target, the flush-list pages, the device rate
    /// and page counts the next loop measures, a checkpoint. False when a write or the
    /// checkpoint failed: the cleaner stops (the error is logged).
    fn write(&mut self, dur: &Durability, m: &Measured, plan: &FlushPlan) -> bool {
        set_lru_target(dur, plan, &m.inputs);
        self.next_loop = if plan.next_loop_ms > 0 {
            Duration::from_millis(plan.next_loop_ms)
        } else {
            Duration::from_secs(1)
        };
        self.planned.flush_list_pages += plan.flush_list_pages;
        self.planned.lru_pages += plan.lru_pages;
        let flushed = match carry_out(dur, plan, &m.knobs) {
            Ok(x) => x,
            Err(e) => {
                tracing::error!("page cleaner stops: {e}");
                return false;
            }
        };
        if let Some(pace) = plan.pace {
            let until = Instant::now() + m.period.min(STAND_IN_MAX);
            if let Err(e) = dur.pace_stand_in(pace, until) {
                tracing::error!("page cleaner stops: {e}");
                return false;
            }
        }
        let lru = dur
            .counters
            .pages_flushed_lru
            .load(Ordering::Relaxed)
            .saturating_sub(self.lru_mark);
        self.lru_mark += lru;
        // every writer's pages over the window's wall time, where page writes kept the
        // device busy for most of it
        let now = Instant::now();
        let wall = now
            .saturating_duration_since(self.meter.window_at)
            .as_secs_f64();
        if wall >= DEVICE_WINDOW_S {
            let (busy_s, pages) = dur.pool.write_clock.read(now);
            let busy = busy_s - self.meter.busy_s;
            let written = pages.saturating_sub(self.meter.busy_pages);
            self.meter.window_at = now;
            self.meter.busy_s = busy_s;
            self.meter.busy_pages = pages;
            self.meter.device_pages_per_s =
                next_device_rate(self.meter.device_pages_per_s, written, busy, wall);
        }
        self.flushed_last = flushed + lru;
        self.lru_last = lru;
        push_avg(
            &mut self.meter.flushed,
            self.flushed_last as f64 / m.elapsed,
            m.knobs.flushing_avg_loops as usize,
        );
        dur.counters
            .pages_flushed_background
            .fetch_add(flushed, Ordering::Relaxed);
        if let Err(e) = dur.checkpoint() {
            tracing::error!("checkpoint failed, page cleaner stops: {e}");
            return false;
        }
        true
    }

    /// Once a second: the sample of the second since the last one, kept in `dur.samples` (the
    /// last hour) and appended to EVENKEEL_SAMPLE_LOG when it is set.
    fn sample(&mut self, dur: &Durability) {
        if self.last_sample.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_sample = Instant::now();
        let next = SampleBase::take(dur);
        let mut s = next.sample_since(&self.sample_base, dur, self.started, &self.planned);
        s.device_pages_per_s = self.meter.device_pages_per_s;
        self.sample_base = next;
        self.planned = FlushPlan::default();
        if let Some(path) = &self.sample_log {
            // EVENKEEL_SAMPLE_LOG: one JSON line per second, for diagnosing a run
            use std::io::Write;
            if let (Ok(mut f), Ok(line)) = (
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path),
                serde_json::to_string(&s),
            ) {
                let _ = writeln!(f, "{line}");
            }
        }
        let mut q = dur.samples.lock();
        if q.len() >= SAMPLES_KEPT {
            q.pop_front();
        }
        q.push_back(s);
    }
}

/// The LRU cleaner (lru.rs) produces the free frames the plan asks for, continuously: its
/// target is the free count the plan aims at, per instance, at most a quarter of it.
fn set_lru_target(dur: &Durability, plan: &FlushPlan, inp: &FlushInputs) {
    let insts = dur.pool.instance_count() as u64;
    let per_inst_frames = inp.total_pages / insts.max(1);
    let target = (plan.lru_pages + inp.free_pages).div_ceil(insts.max(1));
    dur.lru_free_target
        .store(target.min(per_inst_frames / 4), Ordering::Relaxed);
    if target > 0 && inp.free_pages < target * insts {
        dur.wake_lru();
    }
}

/// Pages written outside the cleaner's plans: by user threads (sync point, log space, the
/// pace's waits, max-dirty, single-page for a free frame) and by the cleaner standing in for
/// the pace's writer (counted with the pace's waits: the same writes, made for the same pace).
fn foreground_flushed(dur: &Durability) -> u64 {
    let c = &dur.counters;
    c.pages_flushed_sync.load(Ordering::Relaxed)
        + c.pages_flushed_log_space.load(Ordering::Relaxed)
        + c.pages_flushed_pace.load(Ordering::Relaxed)
        + c.pages_flushed_max_dirty.load(Ordering::Relaxed)
        + dur.pool.counters.eviction_writes.load(Ordering::Relaxed)
}

fn push_avg(q: &mut VecDeque<f64>, v: f64, n: usize) {
    q.push_back(v);
    while q.len() > n.max(1) {
        q.pop_front();
    }
}

fn avg(q: &VecDeque<f64>) -> f64 {
    if q.is_empty() {
        0.0
    } else {
        q.iter().sum::<f64>() / q.len() as f64
    }
}

fn current_marks(dur: &Durability) -> Marks {
    let c = &dur.pool.counters;
    Marks {
        lsn: dur.log.current_lsn().0,
        dirtied: c.pages_dirtied.load(Ordering::Relaxed),
        reads: c.pages_read.load(Ordering::Relaxed),
        commits: dur.counters.commits_logged.load(Ordering::Relaxed),
    }
}

/// Counter values at a sample boundary.
struct SampleBase {
    lsn: u64,
    fc: super::FlushCounts,
    pool: crate::buffer::PoolStatus,
    log: crate::wal::LogStats,
    data_syncs: u64,
}

impl SampleBase {
    fn take(dur: &Durability) -> Self {
        SampleBase {
            lsn: dur.log.current_lsn().0,
            fc: dur.counters.snapshot(),
            pool: dur.pool.status(),
            log: dur.log.stats(),
            data_syncs: dur.pool.file_syncs(),
        }
    }

    fn sample_since(
        &self,
        b: &SampleBase,
        dur: &Durability,
        started: Instant,
        planned: &FlushPlan,
    ) -> Sample {
        let d = self.fc.since(&b.fc);
        let cp = dur.log.checkpoint_lsn().0;
        let age = self.lsn.saturating_sub(cp);
        let history = dur.versions.stats();
        Sample {
            t_s: started.elapsed().as_secs_f64(),
            device_pages_per_s: 0.0, // set by the caller
            lsn: self.lsn,
            checkpoint_lsn: cp,
            checkpoint_age_bytes: age,
            checkpoint_age_pct: 100.0 * age as f64 / dur.log.capacity() as f64,
            dirty_pct: 100.0 * self.pool.pages_dirty as f64
                / (1 + self.pool.pages_data + self.pool.pages_free) as f64,
            pages_dirty: self.pool.pages_dirty,
            pages_free: self.pool.pages_free,
            redo_bytes: self.lsn.saturating_sub(b.lsn),
            flushed_policy: d.pages_flushed_background,
            flushed_lru: d.pages_flushed_lru,
            flushed_sync: d.pages_flushed_sync,
            flushed_log_space: d.pages_flushed_log_space,
            flushed_pace: d.pages_flushed_pace,
            flushed_max_dirty: d.pages_flushed_max_dirty,
            flushed_single_page: self
                .pool
                .eviction_writes
                .saturating_sub(b.pool.eviction_writes),
            planned_flush_list: planned.flush_list_pages,
            planned_lru: planned.lru_pages,
            admission_delay_us: dur.admission_delay_now_us.load(Ordering::Relaxed),
            admission_delay_total_us: d.admission_delay_us,
            stall_sync_us: d.sync_flush_wait_us,
            stall_log_space_us: d.log_space_wait_us,
            stall_max_dirty_us: d.max_dirty_wait_us,
            stall_free_frame_us: self
                .pool
                .free_frame_wait_us
                .saturating_sub(b.pool.free_frame_wait_us),
            pages_read: self.pool.pages_read.saturating_sub(b.pool.pages_read),
            read_ahead_pages: self
                .pool
                .read_ahead_pages
                .saturating_sub(b.pool.read_ahead_pages),
            read_ahead_evicted_unused: self
                .pool
                .read_ahead_evicted_unused
                .saturating_sub(b.pool.read_ahead_evicted_unused),
            log_bytes_written: self.log.written_bytes.saturating_sub(b.log.written_bytes),
            log_fsyncs: self.log.fsyncs.saturating_sub(b.log.fsyncs),
            data_fsyncs: self.data_syncs.saturating_sub(b.data_syncs),
            commits: d.commits_logged,
            history_versions: history.history_versions,
            purge_lag: history.purge_lag,
            oldest_view_age_ms: history.oldest_view_age_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_rate_is_pages_over_wall_time_where_writes_kept_it_busy() {
        // (previous, written, busy s, wall s, want)
        for (prev, written, busy, wall, want) in [
            // first window: the rate over the wall time, not over the busy time
            (0.0, 5_400, 0.54, 1.0, 5_400.0),
            // faster: at once
            (5_000.0, 6_000, 0.9, 1.0, 6_000.0),
            // slower: a fifth of the way
            (10_000.0, 5_000, 0.9, 1.0, 9_000.0),
            // idle more than half the window: says nothing
            (5_000.0, 1_000, 0.3, 1.0, 5_000.0),
            // too few pages, or no time
            (5_000.0, 7, 1.0, 1.0, 5_000.0),
            (5_000.0, 100, 0.0, 0.0, 5_000.0),
        ] {
            assert_eq!(
                next_device_rate(prev, written, busy, wall),
                want,
                "{prev} {written} {busy} {wall}"
            );
        }
    }
}
