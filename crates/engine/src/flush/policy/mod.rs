//! policy: how many pages to write back each cleaner loop. One trait, one small file per
//! policy, each the real published algorithm (cited in its file), each a pure function of its
//! inputs and its own history: no clock, no I/O, no locks (STYLE.md habit 8). The cleaner
//! measures, builds [`FlushInputs`], asks the policy, and carries the [`FlushPlan`] out.
//!
//! Limits that hold for every policy live outside the policies: the async and sync flush
//! points of the checkpoint, and foreground flushing past max_dirty_pages_pct when
//! check_max_dirty_foreground is on. So the classic policies can show the classic stalls.
//!
//! Files: `fixed` (InnoDB 5.1), `innodb55` (5.5 adaptive_flushing), `estimate` and
//! `keep_average` (Percona XtraDB adaptive checkpoint), `innodb80` (8.0
//! page_cleaner_flush_pages_recommendation), `steady` (ours, the default); `classic` holds what
//! the 5.x master thread did around every one of its policies (the 10-second batch, the LRU
//! free margin). [`make`] builds a policy from its `adaptive_flushing` name.

mod classic;
pub mod estimate;
pub mod fixed;
pub mod innodb55;
pub mod innodb80;
pub mod keep_average;
pub mod steady;
#[cfg(test)]
mod toy;

pub use crate::options::FlushPolicy;

/// What the cleaner measured for this loop. Rates are per second; pages are buffer-pool pages.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushInputs {
    /// Seconds since the previous plan (about 1; shorter under pressure).
    pub elapsed_s: f64,
    /// Seconds the cleaner means its loops to last (0: not known). A loop that wrote longer
    /// than this (its plan outran the device) makes the next `elapsed_s` longer too.
    pub period_s: f64,
    /// Current LSN, checkpoint LSN and log capacity, in bytes of redo.
    pub lsn: u64,
    pub checkpoint_lsn: u64,
    pub log_capacity: u64,
    /// Checkpoint ages (bytes) of the async and sync flush points.
    pub async_point: u64,
    pub sync_point: u64,
    /// Redo generated per second, over the last loop and averaged over flushing_avg_loops.
    pub redo_rate_last: f64,
    pub redo_rate_avg: f64,
    /// Commits that wrote redo, per second, over the last loop.
    pub commits_per_s: f64,
    /// Pages on flush lists, pages holding data, free frames, all frames.
    pub dirty_pages: u64,
    pub data_pages: u64,
    pub free_pages: u64,
    pub total_pages: u64,
    /// Pages this cleaner wrote in the previous loop, and their average over the avg window.
    pub flushed_last: u64,
    pub flushed_avg: f64,
    /// Pages newly dirtied per byte of redo (measured: clean->dirty transitions / redo bytes).
    pub dirtied_per_redo_byte: f64,
    /// Log space promised to transactions in flight (their reservations), bytes.
    pub reserved_bytes: u64,
    /// The checkpoint age, bytes, at which a commit now finds no log room and writes pages for
    /// it: the sync point, or the log's reservable space less `reserved_bytes` (0: the
    /// reservations alone fill it).
    pub room_age: u64,
    /// Dirty pages per byte of redo at the tail of the flush lists: the pages whose oldest
    /// modification lies in the next loop's worth of redo past the checkpoint, divided by
    /// that many bytes; 0 if unknown. What advancing the checkpoint by one byte costs in page
    /// writes, net of pages the LRU already wrote (they left the flush list).
    pub tail_pages_per_redo_byte: f64,
    /// Observed page-write throughput of the device (pages/s the sink sustained when busy).
    pub device_pages_per_s: f64,
    /// Pages read from disk per second (free frames must keep ahead of this).
    pub reads_per_s: f64,
    /// Knobs (InnoDB's names).
    pub io_capacity: u64,
    pub io_capacity_max: u64,
    pub max_dirty_pages_pct: f64,
    pub max_dirty_pages_pct_lwm: f64,
    pub adaptive_flushing_lwm: f64,
    pub flushing_avg_loops: u64,
    pub lru_scan_depth: u64,
    /// Optional cap on write bandwidth (pages/s) for `steady`; 0 = none.
    pub write_cap_pages_per_s: u64,
    /// Pages written from the LRU tails since the previous plan (`innodb55` subtracts their
    /// 20-second average from its rate, as buf_flush_get_desired_flush_rate did).
    pub lru_flushed_last: u64,
    /// Dirty pages written by user threads since the previous plan (sync-point and
    /// max-dirty foreground flushes); `keep_average` counts them, with the LRU ones, as
    /// flushing it need not repeat.
    pub foreground_flushed_last: u64,
    /// Mean over the flush lists of (lsn - oldest_modification), in bytes; 0 if unknown
    /// (then `estimate` assumes age / 2). O(1) to keep: a running sum of oldest_modification
    /// over the flush lists, updated on insert and removal.
    pub dirty_age_mean: f64,
    /// Page writes go through the doublewrite buffer (`estimate` flushes 7/8 as much without).
    pub doublewrite: bool,
}

impl FlushInputs {
    pub fn checkpoint_age(&self) -> u64 {
        self.lsn.saturating_sub(self.checkpoint_lsn)
    }
    /// Seed 000's formula: 100 * dirty / (1 + data + free).
    pub fn dirty_pct(&self) -> f64 {
        100.0 * self.dirty_pages as f64 / (1 + self.data_pages + self.free_pages) as f64
    }
}

/// What to do this loop.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushPlan {
    /// Pages to write from the flush lists, oldest modification first.
    pub flush_list_pages: u64,
    /// Free frames to produce from the LRU tails (clean pages evicted, dirty ones written).
    pub lru_pages: u64,
    /// Delay, in microseconds, each committing transaction waits before appending its COMMIT
    /// (admission control; only `steady` uses it), at this loop's checkpoint age.
    pub admission_delay_us: u64,
    /// The delay as a function of the checkpoint age, applied by each commit to the age it
    /// sees (so the delay follows the age between loops, not only at them); None = no delay.
    pub admission: Option<AdmissionCurve>,
    /// Preferred time before the next plan, in milliseconds; 0 = the cleaner's default (about
    /// 1 s). `keep_average` asks for 100 ms, as XtraDB ran it ten times a second.
    pub next_loop_ms: u64,
    /// Flush no flush-list page whose oldest_modification is at or past this LSN, even if
    /// fewer than `flush_list_pages` were written; 0 = no limit. XtraDB's `estimate` and
    /// `keep_average` flush only as far as the LSN moved since their last loop.
    pub lsn_limit: u64,
    /// A pace on the log's head, applied by each writing transaction before its first lock
    /// (`Durability::admission_delay`); None = no pace.
    pub pace: Option<Pace>,
    /// Whether a commit that finds no log room asks the page cleaner to write toward that
    /// room beside it (`Durability::admit_stalled`); false = the commit writes alone, as
    /// InnoDB's user threads did at the sync point.
    pub room_help: bool,
}

/// A pace on the log's head: the LSN may advance along a line whose slope is `ff` plus the
/// distance of the checkpoint age below `target`, removed over `p_time_s`; a writing
/// transaction that finds the LSN past the line waits until the line reaches it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pace {
    /// Redo bytes per second the checkpoint has advanced, averaged.
    pub ff: f64,
    /// The checkpoint age, bytes, the pace holds.
    pub target: u64,
    pub p_time_s: f64,
    /// The checkpoint age from which a waiting transaction writes a batch of the oldest
    /// pages while it waits.
    pub write_from: u64,
}

impl Pace {
    /// The line's slope, bytes/s, at checkpoint age `age`: never under a quarter of `ff`.
    pub fn rate(&self, age: u64) -> f64 {
        let r = self.ff + (self.target as f64 - age as f64) / self.p_time_s.max(0.05);
        r.max(self.ff * 0.25).max(1.0)
    }
}

/// Commit delay as a function of checkpoint age, published by a policy each loop and evaluated
/// by every committing thread on the age it sees. A loop lasts 50 ms to 1 s; a small log at a
/// high redo rate moves from the set point to the sync point within one loop, so a delay fixed
/// at the loop's start arrives too late (measured: steady's TPC-C runs touched the sync point
/// every second with the per-loop delay).
///
/// With x = (age - from) / (async - from): 0 up to `from`, then `at_async_us` * (x² + x *
/// overload) up to the async point, then linear from `at_async_us` * (1 + overload) to
/// `at_sync_us` at the sync point, and `at_sync_us` beyond.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AdmissionCurve {
    /// Checkpoint age (bytes) where delays start: the policy's set point.
    pub from_age: u64,
    pub async_age: u64,
    pub sync_age: u64,
    /// Delay at the async point with no overload, and at the sync point (µs).
    pub at_async_us: f64,
    pub at_sync_us: f64,
    /// (demand - device) / device, clamped to [0, 1]: adds a linear term, `overload_us` at
    /// the async point, so an overloaded system starts slowing commits as soon as the age
    /// passes `from_age`.
    pub overload: f64,
    pub overload_us: f64,
}

impl AdmissionCurve {
    /// The delay (µs) a commit waits when `age` bytes of the log are in use (the committing
    /// thread passes the checkpoint age plus the space promised to transactions in flight).
    pub fn delay_us(&self, age: u64) -> u64 {
        let (age, sp, asy) = (age as f64, self.from_age as f64, self.async_age as f64);
        if age <= sp || asy <= sp {
            return 0;
        }
        let x = (age - sp) / (asy - sp);
        let delay = if x <= 1.0 {
            self.at_async_us * x * x + self.overload_us * x * self.overload
        } else {
            let sync = (self.sync_age as f64).max(asy + 1.0);
            let beyond = ((age - asy) / (sync - asy)).min(1.0);
            let at_async = self.at_async_us + self.overload_us * self.overload;
            at_async + (self.at_sync_us - at_async).max(0.0) * beyond
        };
        if delay.is_finite() && delay > 0.0 {
            delay as u64
        } else {
            0
        }
    }
}

/// A flush policy. `plan` must be deterministic given its inputs and the policy's history.
pub trait Policy: Send {
    fn name(&self) -> &'static str;
    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan;
}

/// A fresh (no history) policy of kind `which`.
pub fn make(which: FlushPolicy) -> Box<dyn Policy> {
    match which {
        FlushPolicy::Fixed => Box::new(fixed::Fixed::default()),
        FlushPolicy::Innodb55 => Box::new(innodb55::Innodb55::default()),
        FlushPolicy::Estimate => Box::new(estimate::Estimate::default()),
        FlushPolicy::KeepAverage => Box::new(keep_average::KeepAverage::default()),
        FlushPolicy::Innodb80 => Box::new(innodb80::Innodb80::default()),
        FlushPolicy::Steady => Box::new(steady::Steady::default()),
    }
}

/// Seconds this loop covers: `elapsed_s`, or the nominal 1 s when it is not a positive number
/// (first loop, a clock that stood still), capped at 10 s so one long stall cannot ask for an
/// unbounded batch.
pub(crate) fn loop_s(inp: &FlushInputs) -> f64 {
    if inp.elapsed_s.is_finite() && inp.elapsed_s > 0.0 {
        inp.elapsed_s.min(10.0)
    } else {
        1.0
    }
}

/// Pages per second times this loop's length, truncated to whole pages (as InnoDB's ulint
/// arithmetic did); negative and NaN rates give 0.
pub(crate) fn per_loop(pages_per_s: f64, inp: &FlushInputs) -> u64 {
    let n = pages_per_s * loop_s(inp);
    if n.is_finite() && n > 0.0 {
        n as u64
    } else {
        0
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::FlushInputs;

    /// A busy, mid-sized system: 64 MiB log, 10 000 frames, 1 s loops, InnoDB's default knobs.
    pub fn base() -> FlushInputs {
        let cap: u64 = 64 << 20;
        FlushInputs {
            elapsed_s: 1.0,
            period_s: 0.0,
            lsn: 1 << 30,
            checkpoint_lsn: (1 << 30) - (cap / 4),
            log_capacity: cap,
            async_point: cap / 8 * 7,
            sync_point: cap / 16 * 15,
            redo_rate_last: 4_000_000.0,
            redo_rate_avg: 4_000_000.0,
            commits_per_s: 2_000.0,
            dirty_pages: 2_000,
            data_pages: 9_000,
            free_pages: 999,
            total_pages: 10_000,
            flushed_last: 0,
            flushed_avg: 0.0,
            dirtied_per_redo_byte: 1.0 / 4_000.0,
            tail_pages_per_redo_byte: 0.0,
            reserved_bytes: 0,
            room_age: cap / 16 * 15,
            device_pages_per_s: 5_000.0,
            reads_per_s: 0.0,
            io_capacity: 200,
            io_capacity_max: 2_000,
            max_dirty_pages_pct: 90.0,
            max_dirty_pages_pct_lwm: 10.0,
            adaptive_flushing_lwm: 10.0,
            flushing_avg_loops: 30,
            lru_scan_depth: 1_024,
            write_cap_pages_per_s: 0,
            lru_flushed_last: 0,
            foreground_flushed_last: 0,
            dirty_age_mean: 0.0,
            doublewrite: true,
        }
    }

    /// `base` with a checkpoint age of `age` bytes.
    pub fn with_age(age: u64) -> FlushInputs {
        let mut i = base();
        i.checkpoint_lsn = i.lsn - age;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_builds_the_policy_of_each_name() {
        for which in FlushPolicy::ALL {
            assert_eq!(make(which).name(), which.name());
            assert_eq!(FlushPolicy::parse(which.name()), Some(which));
        }
        assert_eq!(
            FlushPolicy::parse("Keep-Average"),
            Some(FlushPolicy::KeepAverage)
        );
        assert!(FlushPolicy::parse("adaptive").is_none());
        assert!(FlushPolicy::parse("").is_none());
    }

    #[test]
    fn only_steady_asks_the_cleaner_to_write_beside_a_commit_that_finds_no_room() {
        // below, at and past the sync point (the classic policies flush hardest there)
        let cap = testutil::base().log_capacity;
        for age in [cap / 4, cap * 3 / 4, cap * 95 / 100] {
            for which in FlushPolicy::ALL {
                let mut p = make(which);
                let x = p.plan(&testutil::with_age(age));
                assert_eq!(x.room_help, which == FlushPolicy::Steady, "{which:?} {x:?}");
            }
        }
    }

    #[test]
    fn loop_seconds_fall_back_and_cap() {
        let mut i = testutil::base();
        for (e, want) in [
            (0.5, 0.5),
            (0.0, 1.0),
            (-1.0, 1.0),
            (f64::NAN, 1.0),
            (60.0, 10.0),
        ] {
            i.elapsed_s = e;
            assert_eq!(loop_s(&i), want, "elapsed {e}");
        }
        i.elapsed_s = 0.5;
        assert_eq!(per_loop(301.0, &i), 150);
        assert_eq!(per_loop(-5.0, &i), 0);
        assert_eq!(per_loop(f64::NAN, &i), 0);
    }
}
