//! steady: evenkeel's default, not an InnoDB algorithm: a feedback controller on the checkpoint
//! age, with commit admission as its second actuator. Its parts are textbook (feed-forward plus
//! proportional-integral control with anti-windup, e.g. Åström & Murray, "Feedback Systems",
//! ch. 10-11, https://fbswiki.org/; admission control in the spirit of CoDel/TCP pacing), and
//! the problem it solves is the one the seeds show: 1-second holes when the log fills.
//!
//! Each loop, with age the log in use ([`in_use`]: the checkpoint age plus the log space
//! promised to transactions in flight) and sp the set point = 85% of the async point:
//! - feed-forward: redo_rate_avg * the dirty pages per redo byte at the tail of the flush
//!   lists (those whose oldest modification lies within one loop's redo past the checkpoint):
//!   the pages that must be written per second for the checkpoint to keep pace with the LSN,
//!   i.e. to hold the age still. Measured at the tail, not at the head (pages newly dirtied per
//!   redo byte, the fallback when the tail is empty), because between head and tail the LRU
//!   evicts, and so writes, many of them: measured at the head, steady writes pages the LRU
//!   is about to evict anyway (docs/measurements.md, "steady's feed-forward");
//! - feedback: the pages standing for the age above sp, (age - sp) / age * dirty (below sp,
//!   (age - sp) / sp * dirty), removed over P_TIME_S = 4 s (P), plus an integral of the same
//!   over I_TIME_S = 20 s that absorbs any bias of the measured demand (pages re-dirtied,
//!   uneven page ages);
//! - clamp: to the device: 1.1 x device_pages_per_s (a little more than observed, so the
//!   estimate can grow; the cleaner measures it counting every writer's pages, its own, the
//!   LRU cleaner's and user threads'), and write_cap_pages_per_s if set. io_capacity is not
//!   used, except as the trickle when the log is idle. Above sp never below the demand (up to
//!   the clamp), and never zero pages while one is dirty;
//! - admission: a curve ([`AdmissionCurve`]) each commit evaluates on the log in use it
//!   sees, so the delay follows the age between loops: with x = (age - sp) / (async - sp),
//!   2 ms * x² (0 at sp, 2 ms at the async point), plus 5 ms * x * overload where overload =
//!   (feed-forward - budget) / budget (at most 1), the budget being the device's pages/s less
//!   what the LRU cleaner and user threads write ([`flush_list_budget`]); past the async point
//!   the wait climbs linearly to 20 ms at the sync point.
//! - where the curve cannot act (one commit's redo a large share of a small log, or a device
//!   that cannot absorb what the clients dirty) a commit that finds no room writes the oldest
//!   pages nobody is writing itself, one commit at a time, as under every policy
//!   (`Durability::admit_stalled`; why not wait for the cleaner instead: there);
//! - LRU: free frames for 10 ms of reads plus one 64-page read-ahead extent, which the LRU
//!   cleaner (flush/lru.rs) keeps ready continuously;
//! - pace, where the device is the limit (the feed-forward past 95% of the budget) and the band from
//!   sp to the async point holds 32 commits' redo or more: writing transactions are admitted
//!   on an even schedule whose rate a PI controller sets on the log in use, around its own set
//!   point a quarter of the way from sp to the async point ([`Steady::pace`]); the curve then
//!   keeps only its age terms. Pacing ends when the clients stay under it, or when the flush
//!   rate stays under half the budget, for 5 s.
//!
//! Why this law does not oscillate or starve the log, what sets each constant, and how it
//! differs from the classic policies: docs/design.md, "steady: the law, its inputs, and why it
//! holds".

use super::{loop_s, AdmissionCurve, FlushInputs, FlushPlan, Policy};

/// Set point, as a fraction of the async point.
pub const SETPOINT_FRAC: f64 = 0.85;
/// Seconds over which the proportional term removes the age above the set point, at most.
/// A small log that the workload fills in a few seconds needs a shorter horizon: the horizon
/// is a quarter of the log's fill time (capacity / redo rate), between 0.25 s and 4 s.
const P_TIME_S: f64 = 4.0;
const P_TIME_MIN_S: f64 = 0.25;

/// The proportional horizon for this loop.
fn p_time_s(inp: &FlushInputs) -> f64 {
    let redo = sane(inp.redo_rate_avg).max(sane(inp.redo_rate_last));
    if redo <= 0.0 {
        return P_TIME_S;
    }
    (inp.log_capacity as f64 / redo / 4.0).clamp(P_TIME_MIN_S, P_TIME_S)
}
/// Integral time, seconds.
const I_TIME_S: f64 = 20.0;
/// Headroom over the observed device rate, so the observation can grow.
const PROBE: f64 = 1.1;
/// Commit delay at the async point, and at the sync point.
const DELAY_AT_ASYNC_US: f64 = 2_000.0;
/// The overload term's delay at the async point, at full overload (demand twice the device).
const OVERLOAD_DELAY_US: f64 = 5_000.0;
const DELAY_AT_SYNC_US: f64 = 20_000.0;
/// Free frames kept: this many seconds of reads, plus one read-ahead extent. The LRU cleaner
/// refills continuously (lru.rs), so the horizon is its reaction time (about one doublewrite
/// batch's write), not a cleaner loop. No longer: a free frame caches nothing, and where the
/// device's reads are the limit every frame kept free is a miss more. At 10,000 reads/s a
/// 50 ms horizon kept 564 of a 64 MiB pool's 4,096 frames free, and TPC-C read 16.4-16.6
/// pages per New-Order against 15.4-15.5 with 10 ms, at 6-7% fewer New-Order/s; readers'
/// waits for a free frame stayed at 0.1% of 64 clients' time or less (docs/measurements.md,
/// "steady's free frames").
const LRU_HORIZON_S: f64 = 0.01;
const LRU_EXTENT: u64 = 64;
/// Admissions are paced when the flush-list rate that holds the log still (the
/// feed-forward) is more than this share of the device's pages left for the flush lists
/// ([`flush_list_budget`]).
const PACE_ENGAGE: f64 = 0.95;
/// The pace's own set point, as a share of the band from sp to the async point: above the
/// flush rate's (sp), so that where the page cleaner can hold sp the pace keeps rising, and
/// only where the device cannot (the flush rate pinned at it) does the pace hold the log.
pub const PACE_ABOVE: f64 = 0.25;
/// The pace's proportional gain: it gives up this share of itself per unit of
/// x = (u - sp_pace) / (async - sp), and takes up to 20% more below sp_pace.
const PACE_GAIN: f64 = 0.5;
/// The pace's integral gain: ln(pace) moves by -PACE_KI * x per second.
const PACE_KI: f64 = 0.1;
/// The clients bind the pace when they reach this share of it.
const PACE_BINDS: f64 = 0.9;
/// Pacing ends when the clients have stayed under [`PACE_BINDS`] of the pace, with the log
/// in use under the set point, this long: the device is no longer the limit.
const PACE_RELEASE_S: f64 = 5.0;
/// Pacing needs a band (sp to the async point) that holds at least this many commits' redo:
/// where one commit moves the log in use by a large share of the band (insert l.i1's 50-row
/// transactions in a 2 x 4 MiB log: a band of about 1 MiB, 50-200 KB a commit, and 16 of them
/// reserved at once), an even schedule cannot hold it, and the curve, which each commit
/// evaluates on what it sees, acts first.
const PACE_MIN_COMMITS_IN_BAND: f64 = 32.0;
/// The time over which the commit rate is averaged.
const COMMITS_AVG_S: f64 = 1.0;
/// The time over which the other writers' page rate is averaged ([`flush_list_budget`]).
const OTHERS_AVG_S: f64 = 2.0;
/// The flush lists' share of the device is never taken as less than this, however much the
/// other writers wrote: it is what the flush lists can claim back once the plan asks for it.
const MIN_BUDGET_FRAC: f64 = 0.1;
/// Pacing also ends when the flush-list rate has stayed under this share of 1.1 x its budget
/// ([`flush_list_budget`]: what the device absorbs, or `write_cap_pages_per_s`, less the other
/// writers' pages) for [`PACE_RELEASE_S`]: the pace may
/// hold the log only where the flush rate is pinned at the device, and a flush rate well under
/// it says the device is not the limit. Without this, a pace engaged at a passing overload (a
/// slow first second of a run, a neighbour's burst of writes) could settle far below what the
/// device sustains: the flush rate holds `u` at sp only through its own proportional and
/// integral terms, and where those write little more than the feed-forward, `u` sat at
/// sp_pace, the pace's error at 0, and the pace at a quarter of the rate the device sustains,
/// rising a few percent a second (docs/measurements.md, "A pace engaged at a passing
/// overload").
const PACE_IDLE_FRAC: f64 = 0.5;

#[derive(Clone, Debug, Default)]
pub struct Steady {
    /// The integral term, pages/s.
    integral: f64,
    /// Fraction of a page carried to the next loop, so short loops do not round to 0.
    carry: f64,
    /// The pace's integral state, writing transactions per second; 0 while not pacing.
    pace_i: f64,
    /// The pace of the last loop, and how long the clients have stayed under it.
    pace: f64,
    slack_s: f64,
    /// How long, while pacing, the flush-list rate has stayed under [`PACE_IDLE_FRAC`] of its
    /// cap.
    idle_s: f64,
    /// Commits per second, averaged over about a second of loops (loops last 10 ms to 1 s).
    commits: f64,
    /// Pages/s written by others than the flush list (the LRU cleaner, user threads), averaged
    /// over about [`OTHERS_AVG_S`]; see [`flush_list_budget`].
    others: f64,
}

/// Finite and non-negative, else 0.
fn sane(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

/// The log in use, bytes: the checkpoint age plus the space promised to transactions in
/// flight (a commit reserves its COMMIT and its estimated apply before it appends). Why: with a
/// small log and large transactions the promises are a large share of the log (insert l.i1,
/// 4 clients of 400-write transactions in a 4 MiB log: about a third of it), and when age plus
/// promises reach the log's usable space a committing thread must flush for room itself (the
/// log-space stall). Holding the age alone at the set point leaves no margin for the promises.
pub fn in_use(inp: &FlushInputs) -> u64 {
    inp.checkpoint_age() + inp.reserved_bytes
}

/// The set point, bytes of the log in use ([`in_use`]).
pub fn setpoint(inp: &FlushInputs) -> f64 {
    inp.async_point as f64 * SETPOINT_FRAC
}

/// The pace's set point, bytes of the log in use: [`PACE_ABOVE`] of the way from sp to the
/// async point.
pub fn pace_setpoint(inp: &FlushInputs) -> f64 {
    let sp = setpoint(inp);
    sp + PACE_ABOVE * (inp.async_point as f64 - sp).max(0.0)
}

/// Pages/s the device can absorb (no headroom); infinite if neither known nor capped.
fn device_rate(inp: &FlushInputs) -> f64 {
    let dev = sane(inp.device_pages_per_s);
    let dev = if dev > 0.0 { dev } else { f64::INFINITY };
    if inp.write_cap_pages_per_s > 0 {
        dev.min(inp.write_cap_pages_per_s as f64)
    } else {
        dev
    }
}

/// Pages/s of the device left for the flush lists: what it absorbs less what the other writers
/// (the LRU cleaner, user threads writing for a free frame or for log space) wrote, averaged
/// over [`OTHERS_AVG_S`] (`others`, pages/s), and at least [`MIN_BUDGET_FRAC`] of it. The
/// feed-forward is the flush lists' demand, so this, not the whole device, is what it must be
/// compared with: where the data is larger than the pool the LRU cleaner writes a large share
/// of the device's pages (about half in IO-bound TPC-C, where every page read needs a free
/// frame), and the flush lists' demand can exceed what is left for them while it stays under
/// the whole device's rate; measured against the whole device, that overload would neither
/// engage the pace nor raise the curve's overload term (docs/measurements.md, "steady's
/// flush-list budget").
fn flush_list_budget(inp: &FlushInputs, others: f64) -> f64 {
    let dev = device_rate(inp);
    if !dev.is_finite() {
        return dev;
    }
    (dev - sane(others)).max(dev * MIN_BUDGET_FRAC)
}

/// Pages/s being newly dirtied.
pub fn demand(inp: &FlushInputs) -> f64 {
    sane(inp.redo_rate_avg) * sane(inp.dirtied_per_redo_byte)
}

/// The feed-forward, pages/s: the redo rate times the dirty pages per redo byte at the tail
/// of the flush lists, or the demand when the tail measure is missing.
pub fn feed_forward(inp: &FlushInputs) -> f64 {
    let tail = sane(inp.tail_pages_per_redo_byte);
    if tail > 0.0 {
        sane(inp.redo_rate_avg) * tail
    } else {
        demand(inp)
    }
}

/// The commit delay curve for this loop (evaluated by each commit on the age it sees).
/// While admissions are paced the pace answers the overload, so the curve keeps only its
/// age terms. `others`: the other writers' pages/s ([`flush_list_budget`]).
pub fn admission_curve(inp: &FlushInputs, paced: bool, others: f64) -> AdmissionCurve {
    let dev = flush_list_budget(inp, others);
    let overload = if paced {
        0.0
    } else if dev.is_finite() && dev > 0.0 {
        ((feed_forward(inp) - dev) / dev).clamp(0.0, 1.0)
    } else {
        0.0
    };
    AdmissionCurve {
        from_age: setpoint(inp) as u64,
        async_age: inp.async_point,
        sync_age: inp.sync_point,
        at_async_us: DELAY_AT_ASYNC_US,
        overload_us: OVERLOAD_DELAY_US,
        at_sync_us: DELAY_AT_SYNC_US,
        overload,
    }
}

/// The commit delay at this loop's checkpoint age, microseconds, with no pace.
#[cfg(test)]
fn admission_delay_us(inp: &FlushInputs) -> u64 {
    admission_curve(inp, false, 0.0).delay_us(in_use(inp))
}

/// LRU pages to free this loop.
pub fn lru_pages(inp: &FlushInputs) -> u64 {
    let target = (sane(inp.reads_per_s) * LRU_HORIZON_S).ceil() as u64 + LRU_EXTENT;
    target.saturating_sub(inp.free_pages).min(inp.data_pages)
}

impl Steady {
    /// The admission pace for this loop, writing transactions per second (0: not paced).
    ///
    /// Where the device cannot write what the clients dirty, the classic answer is to let
    /// the log fill until commits stall, and the curve's answer is a delay that grows with
    /// the log in use; either way a transaction's wait depends on the moment it arrives,
    /// and at one-second resolution that shows. The pace admits writing transactions on an
    /// even schedule instead, at a rate a PI controller sets on the log in use: starting
    /// from the commit rate it found, pace = I x (1 - PACE_GAIN x), clamped to [0.5, 1.2] x I,
    /// where x = (u - sp_pace) / (async - sp) ([`pace_setpoint`]) and ln I moves by
    /// -PACE_KI x per second. With the flush rate pinned at the device, u integrates the
    /// excess of the commits over what the device can clean up after, so this is PI control
    /// of an integrating plant: at about 150 commits/s of 50 KB of redo over an 8 MiB band, a
    /// time constant of about 2.5 s and damping about 0.7. The estimate of what the device sustains (commits x device /
    /// feed-forward) is not used: its noise from loop to loop would move the pace with it.
    /// `flush_share` is this loop's flush-list rate over its cap (0 with no cap known).
    fn pace(&mut self, inp: &FlushInputs, flush_share: f64) -> f64 {
        let dev = flush_list_budget(inp, self.others);
        let dt = loop_s(inp).min(1.0);
        self.commits += (sane(inp.commits_per_s) - self.commits) * (dt / COMMITS_AVG_S).min(1.0);
        let commits = self.commits;
        let band = (inp.async_point as f64 - setpoint(inp)).max(1.0);
        let x = (in_use(inp) as f64 - pace_setpoint(inp)) / band;
        let fine =
            commits >= 1.0 && band >= PACE_MIN_COMMITS_IN_BAND * sane(inp.redo_rate_avg) / commits;
        if !fine {
            return self.stop_pacing();
        }
        if self.pace_i == 0.0 {
            let overloaded = dev.is_finite() && dev > 0.0 && feed_forward(inp) > dev * PACE_ENGAGE;
            if !overloaded {
                return 0.0;
            }
            self.pace_i = commits;
            self.slack_s = 0.0;
            self.idle_s = 0.0;
        } else {
            let binds = commits >= PACE_BINDS * self.pace;
            if !binds && x < 0.0 {
                self.slack_s += dt;
            } else {
                self.slack_s = 0.0;
            }
            if flush_share < PACE_IDLE_FRAC {
                self.idle_s += dt;
            } else {
                self.idle_s = 0.0;
            }
            if self.slack_s >= PACE_RELEASE_S || self.idle_s >= PACE_RELEASE_S {
                return self.stop_pacing();
            }
            // anti-windup: the integral rises only while the pace binds, so a pace the clients
            // cannot reach does not grow out of reach
            let step = -PACE_KI * x.clamp(-1.0, 2.0) * dt;
            if step < 0.0 || binds {
                self.pace_i *= step.exp();
            }
        }
        self.pace = self.pace_i * (1.0 - PACE_GAIN * x).clamp(0.5, 1.2);
        self.pace
    }

    /// Not pacing (any more): the pace and its integral at 0.
    fn stop_pacing(&mut self) -> f64 {
        self.pace_i = 0.0;
        self.pace = 0.0;
        0.0
    }

    /// The flush-list rate, pages/s, updating the integral.
    fn rate(&mut self, inp: &FlushInputs) -> f64 {
        let dt = loop_s(inp);
        let age = in_use(inp) as f64;
        let sp = setpoint(inp);
        let ff = feed_forward(inp);
        // Above sp: the dirty pages standing for the excess age, taking them spread evenly over
        // the age. Below: the same fraction of the deficit, so the rate eases off smoothly.
        let excess_pages = (age - sp) / age.max(sp).max(1.0) * inp.dirty_pages as f64;
        let cap = device_rate(inp) * PROBE;
        let pt = p_time_s(inp);
        let raw = ff + excess_pages / pt + self.integral;
        let mut rate = raw.clamp(0.0, cap);
        // Anti-windup: integrate only when the output is not pinned in the error's direction.
        let pinned_high = raw >= cap && excess_pages > 0.0;
        let pinned_low = raw <= 0.0 && excess_pages < 0.0;
        if !pinned_high && !pinned_low {
            self.integral += excess_pages / (pt * I_TIME_S) * dt;
        }
        // The integral corrects a bias of the feed-forward; it never needs more than the device.
        let bound = if cap.is_finite() {
            cap
        } else {
            ff.max(inp.dirty_pages as f64 / pt)
        };
        self.integral = self.integral.clamp(-bound, bound);
        if age > sp {
            rate = rate.max(ff.min(cap));
        }
        if sane(inp.redo_rate_last) == 0.0 && inp.dirty_pages > 0 {
            // idle log: let the pages trickle out
            rate = rate.max((inp.io_capacity as f64).min(cap));
        }
        rate
    }
}

impl Policy for Steady {
    fn name(&self) -> &'static str {
        "steady"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        // The pages of one period at most: a loop whose plan outran the device lasted longer
        // than its period, and planning for that whole time would make the next loop as long
        // again (rate x elapsed pages at a rate the device cannot beat), so control would act
        // every few seconds instead of every period.
        let span = if inp.period_s > 0.0 {
            loop_s(inp).min(inp.period_s)
        } else {
            loop_s(inp)
        };
        let rate = self.rate(inp);
        let dt = loop_s(inp);
        if dt > 0.0 {
            let others = (inp.lru_flushed_last + inp.foreground_flushed_last) as f64 / dt;
            self.others += (others - self.others) * (dt / OTHERS_AVG_S).min(1.0);
        }
        // the flush lists' share of their budget, not of the whole device: with the LRU
        // cleaner writing half the device's pages, a flush list pinned at what is left reads
        // as half the device, and the pace would end as if the device were idle
        let budget = flush_list_budget(inp, self.others) * PROBE;
        let flush_share = if budget.is_finite() && budget > 0.0 {
            rate / budget
        } else {
            0.0
        };
        let pages = rate * span + self.carry;
        let whole = pages.floor();
        let mut n = whole as u64;
        self.carry = (pages - whole).clamp(0.0, 1.0);
        if in_use(inp) as f64 > setpoint(inp) {
            n = n.max(1); // never nothing while above the set point
        }
        if n >= inp.dirty_pages {
            n = inp.dirty_pages;
            self.carry = 0.0;
        }
        let pace = self.pace(inp, flush_share);
        let curve = admission_curve(inp, pace > 0.0, self.others);
        FlushPlan {
            flush_list_pages: n,
            lru_pages: lru_pages(inp),
            admission_delay_us: curve.delay_us(in_use(inp)),
            admission: Some(curve),
            pace_per_s: pace,
            ..FlushPlan::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{base, with_age};
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;
    // base: async 56 MiB -> sp 47.6 MiB; demand 4e6 / 4000 = 1000 pages/s; device 5000.

    /// The set point of `base()` rounded up: async 56 MiB x 0.85 = 47.6 MiB.
    fn sp_age() -> u64 {
        setpoint(&base()).ceil() as u64
    }

    #[test]
    fn rate_table_first_loop() {
        // demand 4e6 / 4000 = 1000 pages/s; P over 4 s (a quarter of the 16.8 s fill time,
        // capped at 4 s); the I term starts at 0 and counts from the next loop.
        // (age, dirty, device, write cap, want pages)
        let sp = sp_age();
        let cases = [
            // at sp: demand only
            (sp, 2_000, 5_000.0, 0, 1_000),
            // 4 MiB above sp, 2000 dirty over 51.6 MiB: excess 155.0 pages -> +38
            (sp + 4 * MIB, 2_000, 5_000.0, 0, 1_038),
            // 8 MiB below sp: -8/47.6 of 2000 = -336.1 pages -> -84.0
            (sp - 8 * MIB, 2_000, 5_000.0, 0, 915),
            // clamp to 1.1 x device
            (55 * MIB, 9_000, 500.0, 0, 550),
            // and to the write cap
            (55 * MIB, 9_000, 5_000.0, 300, 330),
            // device unknown: no clamp. excess (55-47.6)/55*9000 = 1210.9 -> +302
            (55 * MIB, 9_000, 0.0, 0, 1_302),
        ];
        for (age, dirty, dev, wcap, want) in cases {
            let mut i = with_age(age);
            i.dirty_pages = dirty;
            i.device_pages_per_s = dev;
            i.write_cap_pages_per_s = wcap;
            let got = Steady::default().plan(&i).flush_list_pages;
            assert_eq!(got, want, "age {age} dirty {dirty} dev {dev} cap {wcap}");
        }
    }

    #[test]
    fn a_loop_that_overran_its_period_plans_one_period_of_pages() {
        // at sp: the demand alone, 1000 pages/s
        let mut i = with_age(sp_age());
        i.elapsed_s = 2.0;
        i.period_s = 0.0;
        assert_eq!(Steady::default().plan(&i).flush_list_pages, 2_000);
        i.period_s = 0.25;
        assert_eq!(Steady::default().plan(&i).flush_list_pages, 250);
        // a loop shorter than its period plans for the time it covers
        i.elapsed_s = 0.1;
        assert_eq!(Steady::default().plan(&i).flush_list_pages, 100);
    }

    #[test]
    fn admission_table() {
        // sp 47.6 MiB, async 56, sync 60; x = (age - sp) / (async - sp).
        // (age, device, want µs)
        let sp = setpoint(&base()) as u64;
        let span = 56 * MIB - sp;
        let cases = [
            (20 * MIB, 5_000.0, 0),
            (sp, 5_000.0, 0),
            (sp + span / 4, 5_000.0, 124), // x = 0.25: 2000 * 0.0625 (a byte short)
            (sp + span / 2, 5_000.0, 499), // x = 0.5
            (56 * MIB, 5_000.0, 2_000),    // at async
            // feed-forward 1000 = 2 x device: overload 1 -> + 5000 * 0.5
            (sp + span / 2, 500.0, 2_999),
            (58 * MIB, 5_000.0, 11_000), // halfway to sync: 2000 + 18000 / 2
            (60 * MIB, 5_000.0, 20_000),
            (63 * MIB, 5_000.0, 20_000),
        ];
        for (age, dev, want) in cases {
            let mut i = with_age(age);
            i.device_pages_per_s = dev;
            assert_eq!(admission_delay_us(&i), want, "age {age} dev {dev}");
        }
    }

    #[test]
    fn lru_keeps_free_frames_ahead_of_reads() {
        // (reads/s, elapsed, free, want): 10 ms of reads plus a 64-page extent, less the free
        // frames; the loop's length does not matter (the LRU cleaner refills continuously)
        for (reads, el, free, want) in [
            (0.0, 1.0, 999, 0),
            (0.0, 1.0, 10, 54),
            (1_000.0, 1.0, 999, 0),
            (1_000.0, 0.5, 50, 24),
            (20_000.0, 1.0, 100, 164),
            (20_000.0, 0.1, 100, 164),
        ] {
            let mut i = base();
            i.reads_per_s = reads;
            i.elapsed_s = el;
            i.free_pages = free;
            assert_eq!(lru_pages(&i), want, "reads {reads} free {free}");
        }
    }

    #[test]
    fn feed_forward_from_the_tail_of_the_flush_list() {
        // at sp the rate is the feed-forward alone; redo 4 MB/s
        for (tail, want) in [
            (0.0, 1_000), // unknown: the demand, 4e6 / 4000
            (1.0 / 4_000.0, 1_000),
            (1.0 / 16_000.0, 250), // the LRU took three quarters of them off the list
            (1.0 / 1_000.0, 4_000), // hot pages piled up at the tail: more to write
        ] {
            let mut i = with_age(sp_age());
            i.dirty_pages = 8_000;
            i.tail_pages_per_redo_byte = tail;
            assert_eq!(
                Steady::default().plan(&i).flush_list_pages,
                want,
                "tail {tail}"
            );
        }
    }

    #[test]
    fn paces_only_where_the_device_is_the_limit() {
        // demand 1000 pages/s: a 5000-page device keeps up, a 500-page one does not
        let mut i = with_age(pace_setpoint(&base()).round() as u64);
        let mut p = Steady::default();
        assert_eq!(p.plan(&i).pace_per_s, 0.0);
        i.device_pages_per_s = 500.0;
        // at its set point the pace starts at the commit rate it found (2000/s, over 1 s)
        let pace = p.plan(&i).pace_per_s;
        assert!((pace - 2_000.0).abs() < 1.0, "{pace}");
        // paced, the curve leaves the overload to the pace: its age term alone
        let curve = p.plan(&i).admission;
        assert_eq!(curve.map(|c| c.overload), Some(0.0));
        // above the set point the pace falls, below it rises, by the proportional term
        // at once and the integral over time
        let span = i.async_point as f64 - setpoint(&i);
        let mut hi = with_age((pace_setpoint(&i) + span / 2.0) as u64);
        hi.device_pages_per_s = 500.0;
        let mut q = p.clone();
        let a = q.plan(&hi).pace_per_s;
        let b = q.plan(&hi).pace_per_s;
        assert!(a < pace * 0.76 && b < a, "{pace} {a} {b}");
        let mut lo = with_age((pace_setpoint(&i) - span / 2.0) as u64);
        lo.device_pages_per_s = 500.0;
        let mut q = p.clone();
        let a = q.plan(&lo).pace_per_s;
        assert!(a > pace * 1.2, "{pace} {a}");
        // the clients stay under the pace below its set point for 5 s: pacing ends
        lo.commits_per_s = 500.0;
        lo.device_pages_per_s = 5_000.0;
        let mut q = p.clone();
        let paces: Vec<f64> = (0..8).map(|_| q.plan(&lo).pace_per_s).collect();
        assert!(paces[0] > 0.0 && paces[7] == 0.0, "{paces:?}");
        // a band of about 8.4 MiB: commits of 2 KB pace, commits of 512 KB (16 in the band)
        // do not
        let mut big = i.clone();
        big.commits_per_s = 8.0;
        assert_eq!(Steady::default().plan(&big).pace_per_s, 0.0);
    }

    #[test]
    fn the_device_is_the_limit_when_the_lru_takes_what_the_flush_lists_need() {
        // demand 1000 pages/s on a 5000-page device: alone, the flush lists keep up
        let mut i = with_age(pace_setpoint(&base()).round() as u64);
        let mut p = Steady::default();
        assert_eq!(p.plan(&i).pace_per_s, 0.0);
        // the LRU cleaner writes 4500 pages/s of it: 500 are left for a demand of 1000; once
        // the average of the LRU's rate has seen it, the pace engages, where it did not while
        // the whole device was the measure
        i.lru_flushed_last = 4_500;
        let paces: Vec<f64> = (0..8).map(|_| p.plan(&i).pace_per_s).collect();
        assert_eq!(paces[0], 0.0, "{paces:?}");
        assert!(paces[7] > 0.0, "{paces:?}");
        // the pace holds: the flush lists at what is left of the device are not an idle
        // device (a flush rate of 550 is a ninth of the whole device's 1.1 x 5000)
        let held: Vec<f64> = (0..10).map(|_| p.plan(&i).pace_per_s).collect();
        assert!(held.iter().all(|&x| x > 0.0), "{held:?}");
        // unpaced, the curve's overload term counts the same budget: (1000 - 500) / 500
        let curve = admission_curve(&i, false, 4_500.0);
        assert_eq!(curve.overload, 1.0);
        assert_eq!(admission_curve(&i, false, 0.0).overload, 0.0);
        // user threads' writes count as the LRU's do
        let mut j = i.clone();
        j.lru_flushed_last = 0;
        j.foreground_flushed_last = 4_500;
        let mut q = Steady::default();
        let paces: Vec<f64> = (0..8).map(|_| q.plan(&j).pace_per_s).collect();
        assert!(paces[7] > 0.0, "{paces:?}");
        // however much the others write, the flush lists keep a tenth of the device
        assert_eq!(flush_list_budget(&i, 1e9), 500.0);
    }

    #[test]
    fn a_pace_ends_when_the_flush_rate_leaves_the_device_idle() {
        // engaged where the device could not keep up (500 pages/s against a demand of 1000)
        let mut i = with_age(pace_setpoint(&base()).round() as u64);
        i.device_pages_per_s = 500.0;
        let mut p = Steady::default();
        let pace = p.plan(&i).pace_per_s;
        assert!(pace > 0.0);
        // the device still the limit, the clients at the pace, the log at its set point: the
        // flush rate is pinned at the device and the pace holds
        let mut q = p.clone();
        let paces: Vec<f64> = (0..10).map(|_| q.plan(&i).pace_per_s).collect();
        assert!(paces.iter().all(|&x| x > 0.0), "{paces:?}");
        // the same, but the device absorbs 5000 pages/s and the flush rate uses a fifth of it:
        // the clients still reach the pace and the log is not under its set point, so only the
        // idle device says that the pace is what limits them; it ends after 5 s
        i.device_pages_per_s = 5_000.0;
        let plans: Vec<(u64, f64)> = (0..8)
            .map(|_| {
                let plan = p.plan(&i);
                (plan.flush_list_pages, plan.pace_per_s)
            })
            .collect();
        assert!(plans.iter().all(|&(n, _)| n < 2_750), "{plans:?}");
        assert!(plans[0].1 > 0.0 && plans[3].1 > 0.0, "{plans:?}");
        assert_eq!(plans[7].1, 0.0, "{plans:?}");
    }

    #[test]
    fn idle_log_trickles_at_io_capacity() {
        let mut i = with_age(10 * MIB);
        i.redo_rate_last = 0.0;
        i.redo_rate_avg = 0.0;
        assert_eq!(Steady::default().plan(&i).flush_list_pages, 200);
        i.dirty_pages = 0;
        assert_eq!(Steady::default().plan(&i).flush_list_pages, 0);
    }

    #[test]
    fn short_loops_carry_fractions() {
        // 10 pages/s in 0.05 s loops: 0.5 page per loop -> 1 page every other loop.
        let mut i = with_age(setpoint(&base()) as u64);
        i.redo_rate_avg = 40_000.0;
        i.elapsed_s = 0.05;
        let mut p = Steady::default();
        let total: u64 = (0..20).map(|_| p.plan(&i).flush_list_pages).sum();
        // 9, not 10: the age is a fraction of a byte under sp, so the P term is a hair
        // negative
        assert!((9..=10).contains(&total), "{total}");
    }

    fn arb_inputs() -> impl Strategy<Value = FlushInputs> {
        (
            0u64..64 * MIB,
            1u64..10_000,
            0.0f64..1e8,
            0.0f64..1e-2,
            0.0f64..1e5,
            0u64..5_000,
            0.01f64..3.0,
        )
            .prop_map(|(age, dirty, redo, dpb, dev, wcap, el)| {
                let mut i = with_age(age);
                i.dirty_pages = dirty;
                i.redo_rate_avg = redo;
                i.redo_rate_last = redo;
                i.dirtied_per_redo_byte = dpb;
                i.device_pages_per_s = dev;
                i.write_cap_pages_per_s = wcap;
                i.elapsed_s = el;
                i
            })
    }

    proptest! {
        #[test]
        fn never_zero_above_the_set_point(inp in arb_inputs()) {
            let plan = Steady::default().plan(&inp);
            if in_use(&inp) as f64 > setpoint(&inp) {
                prop_assert!(plan.flush_list_pages >= 1);
            }
        }

        #[test]
        fn within_the_device_and_cap(inp in arb_inputs()) {
            let plan = Steady::default().plan(&inp);
            let dt = loop_s(&inp);
            let cap = device_rate(&inp) * PROBE * dt;
            // at least one page may go out above the set point
            prop_assert!(plan.flush_list_pages as f64 <= cap.max(1.0) + 1.0);
            prop_assert!(plan.flush_list_pages <= inp.dirty_pages);
        }

        #[test]
        fn delay_monotonic_in_age(inp in arb_inputs(), a in 0u64..64 * MIB, b in 0u64..64 * MIB) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let mut i = inp;
            i.checkpoint_lsn = i.lsn - lo;
            let d_lo = admission_delay_us(&i);
            i.checkpoint_lsn = i.lsn - hi;
            prop_assert!(d_lo <= admission_delay_us(&i));
            prop_assert!(admission_delay_us(&i) <= DELAY_AT_SYNC_US as u64);
        }

        #[test]
        fn rate_monotonic_in_age(inp in arb_inputs(), a in 0u64..64 * MIB, b in 0u64..64 * MIB) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let mut i = inp;
            i.checkpoint_lsn = i.lsn - lo;
            let r_lo = Steady::default().plan(&i).flush_list_pages;
            i.checkpoint_lsn = i.lsn - hi;
            prop_assert!(r_lo <= Steady::default().plan(&i).flush_list_pages);
        }
    }
}
