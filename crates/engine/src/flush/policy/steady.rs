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
//! - where the device is the limit (for 1 s the law has asked for more than the device
//!   writes with the log in use above sp, or the feed-forward alone has been 0.9 of what the
//!   device leaves the flush lists): the flush lists take half of what the device writes
//!   beside the LRU cleaner, writing no page younger than the commits' room (or the pace)
//!   needs, less, without the pace, the LRU cleaner's share of the device times two loops of
//!   redo ([`room_lsn_limit`]), the curve stands down, and a commit that finds no log room writes
//!   a batch of the oldest pages nobody is writing itself, one commit at a time, as under
//!   every policy (`Durability::admit_stalled`), while the page cleaner writes the pages below
//!   that commit's room beside it (`FlushPlan::room_help`), so the commits follow what the
//!   device cleans up ([`Steady::room_metered`]); it ends when the law has asked for less
//!   than that half for 5 s.
//!   In that mode, where the log's lap at the pace's target is 2 s or more
//!   ([`Steady::pace_engaged`]), a pace holds the log's head to the checkpoint's averaged
//!   advance, with the age 4.5% of the log under the sync point, so the log absorbs the tail's
//!   uneven advance instead of repeating it lap after lap ([`Steady::pace`]); a held
//!   commit writes the oldest pages while it waits, and while no commit is held with the age
//!   past the pace's target the page cleaner writes them (`Durability::pace_stand_in`). A commit that finds no room does the same at any time
//!   (one commit's redo a large share of a small log);
//! - LRU: free frames for 10 ms of reads plus one 64-page read-ahead extent, which the LRU
//!   cleaner (flush/lru.rs) keeps ready continuously.
//!
//! Why this law does not oscillate or starve the log, what sets each constant, and how it
//! differs from the classic policies: docs/design.md, "steady: the law, its inputs, and why it
//! holds".

use super::{loop_s, AdmissionCurve, FlushInputs, FlushPlan, Pace, Policy};

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
/// The feed-forward's share of the flush lists' budget at which the device is the limit
/// ([`Steady::room_metered`]).
const ENGAGE_FRAC: f64 = 0.9;
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
/// The time over which the feed-forward's dirty pages per redo byte at the tail are averaged.
/// One loop's measure moved 1,600 to 12,400 pages/s and back within a second on insert l.i1
/// (256 MiB pool, 64 MiB of redo, the device the limit): the tail holds the pages first
/// dirtied one log's fill earlier, when commits had slowed or surged, and a plan that followed
/// it wrote at twice the device for a loop, starved the commits' log writes, and so made the
/// next tail thin again, in a 1.5-2 s cycle (docs/measurements.md, "The device's rate over wall
/// time, and the feed-forward averaged"). Averaged over longer than that cycle, the feed-forward follows the density the
/// workload makes, and the P and I terms correct the age.
const TAIL_AVG_S: f64 = 2.0;
/// The time over which the other writers' page rate is averaged ([`flush_list_budget`]).
const OTHERS_AVG_S: f64 = 2.0;
/// The flush lists' share of the device is never taken as less than this, however much the
/// other writers wrote: it is what the flush lists can claim back once the plan asks for it.
const MIN_BUDGET_FRAC: f64 = 0.1;
/// Where the device is the limit, the page cleaner's flush lists take at most this share of
/// what the device writes beside the LRU cleaner, and commits that find no log room write the
/// rest themselves ([`Steady::room_metered`]).
pub const ROOM_SHARE: f64 = 0.5;
/// While commits write for their room, the pace ([`Steady::pace`]) holds the checkpoint age
/// this far under the sync point (a share of the log's capacity): the room the log keeps to absorb
/// the checkpoint's uneven advance without a commit finding the log full.
const PACE_MARGIN_FRAC: f64 = 0.045;
/// The pace engages where the log's lap at its target is at least this long, and, once
/// engaged, lets go where it falls under [`PACE_RELEASE_LAP_S`] ([`Steady::pace_engaged`]).
const PACE_MIN_LAP_S: f64 = 2.0;
const PACE_RELEASE_LAP_S: f64 = 1.6;
/// The pace removes the distance of the checkpoint age to its target over this many seconds.
const PACE_P_TIME_S: f64 = 0.5;
/// The time over which the checkpoint's advance is averaged for the pace: two laps of the log
/// where it was measured (about 2 s each), so one lap's dense or thin stretch is averaged out.
const CKPT_AVG_S: f64 = 4.0;
/// The device has been the limit ([`Steady::room_metered`]) for this long before the commits'
/// own writes take over the overload.
const ROOM_ENGAGE_S: f64 = 1.0;
/// Where the LRU cleaner writes the whole device, the flush lists' limit in room mode lies this
/// many of the page cleaner's loops of redo ahead of the commits' room ([`room_lsn_limit`]);
/// where it writes a share of it, that share of this.
const ROOM_LEAD_LOOPS: f64 = 2.0;
/// Commits stop writing for their room when the law has asked for less than the flush lists'
/// share for this long: the flush lists alone hold the log again.
const ROOM_RELEASE_S: f64 = 5.0;

#[derive(Clone, Debug, Default)]
pub struct Steady {
    /// The integral term, pages/s.
    integral: f64,
    /// Fraction of a page carried to the next loop, so short loops do not round to 0.
    carry: f64,
    /// Pages/s written by others than the flush list (the LRU cleaner, user threads), averaged
    /// over about [`OTHERS_AVG_S`]; see [`flush_list_budget`].
    others: f64,
    /// Pages/s the LRU cleaner wrote, averaged over about [`OTHERS_AVG_S`].
    lru: f64,
    /// Whether the last loop found the device the limit: its law asked for more than the
    /// device writes, above sp, or its feed-forward took [`ENGAGE_FRAC`] of the budget.
    device_limited: bool,
    /// The law's unclamped rate of the last loop, pages/s.
    raw: f64,
    /// How long the device has been the limit (not room-metered), or the law has asked for
    /// less than the room share (room-metered), seconds.
    room_s: f64,
    /// While commits meter the overload by their own writes, the flush lists' share of the
    /// device, pages/s; 0 otherwise ([`Steady::room_metered`]).
    room_share: f64,
    /// The dirty pages per redo byte at the tail of the flush lists, averaged over
    /// [`TAIL_AVG_S`]; 0 until measured.
    tail: f64,
    /// The checkpoint LSN at the last loop, and its advance, bytes/s, averaged.
    ckpt_prev: u64,
    ckpt_rate: f64,
    /// The redo rate, bytes/s, averaged over [`CKPT_AVG_S`]: the lap's ([`Steady::pace_engaged`]).
    redo_lap: f64,
    /// Whether the pace runs in this spell of room mode ([`Steady::pace_engaged`]).
    pacing: bool,
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
/// the whole device's rate; measured against the whole device, that overload would not raise
/// the curve's overload term (docs/measurements.md, "steady's flush-list budget").
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

/// The feed-forward, pages/s, of one loop's measure: the redo rate times the dirty pages per
/// redo byte at the tail of the flush lists, or the demand when the tail measure is missing.
/// The law uses the tail's density averaged over [`TAIL_AVG_S`] ([`Steady::feed_forward`]).
pub fn feed_forward(inp: &FlushInputs) -> f64 {
    feed_forward_at(inp, sane(inp.tail_pages_per_redo_byte))
}

/// The feed-forward with `tail` dirty pages per redo byte at the tail (0: unknown).
fn feed_forward_at(inp: &FlushInputs, tail: f64) -> f64 {
    if tail > 0.0 {
        sane(inp.redo_rate_avg) * tail
    } else {
        demand(inp)
    }
}

/// The commit delay curve for this loop (evaluated by each commit on the age it sees).
/// `ff`: the feed-forward, pages/s; `others`: the other writers' pages/s
/// ([`flush_list_budget`]).
pub fn admission_curve(inp: &FlushInputs, ff: f64, others: f64) -> AdmissionCurve {
    let dev = flush_list_budget(inp, others);
    let overload = if dev.is_finite() && dev > 0.0 {
        ((ff - dev) / dev).clamp(0.0, 1.0)
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

/// The commit delay at this loop's checkpoint age, microseconds.
#[cfg(test)]
fn admission_delay_us(inp: &FlushInputs) -> u64 {
    admission_curve(inp, feed_forward(inp), 0.0).delay_us(in_use(inp))
}

/// LRU pages to free this loop.
pub fn lru_pages(inp: &FlushInputs) -> u64 {
    let target = (sane(inp.reads_per_s) * LRU_HORIZON_S).ceil() as u64 + LRU_EXTENT;
    target.saturating_sub(inp.free_pages).min(inp.data_pages)
}

/// Where commits write for their room ([`Steady::room_metered`]): the LSN under which the
/// flush lists' pages lie that the log needs written now, the plan's `lsn_limit`. A page is
/// needed when its age (the LSN less its oldest modification) is past the age at which a
/// commit finds no room ([`FlushInputs::room_age`]), or, under the pace, past its target.
///
/// Why a limit as well as the share. With the device the limit every writer shares one
/// device, and what sets the rows a second is the pages written per row. A page the cleaner
/// writes before the log needs it is written younger and dirtied again sooner: writing its
/// share of the oldest pages at any age, the cleaner held the age at 76-80% of the log where
/// the commits' room sits at 83-86%, and wrote 2-7% more pages per row than with the limit in
/// the matrix's insert cells (docs/measurements.md, "The flush lists' pages no younger than the
/// commits' room"). With the limit it writes those pages the commits would otherwise stop
/// for, beside them, and the pages younger than that absorb more changes first.
///
/// Without the pace, the limit lies ahead of the room by the redo of [`ROOM_LEAD_LOOPS`] of
/// the cleaner's loops, times `lru_share`: the share of the device the LRU cleaner writes
/// (its averaged pages/s over the device's). Why: a commit writes the moment it finds no room
/// and the cleaner plans once a loop, so with the limit at the room the commits took nearly
/// every page past it first. Under TPC-C over a 64 MiB pool with a 2 x 2 MiB log the flush
/// lists wrote 19-38 pages/s of their share while commits wrote about 1,950 for room and
/// stalled 450-520 ms a second. With the lead the flush lists wrote 1,200-1,460, commits
/// 490-770, stalls 170-220 ms, and it ran more level (docs/measurements.md, "Room mode's
/// flush-list limit ahead of the commits' room"). Why scaled by the LRU's share: a page the
/// LRU cleaner would write at its eviction soon anyway costs nothing written early, while in a
/// pool that holds the data a page written early is dirtied again and written twice. A lead
/// of one loop whatever the LRU wrote cost 5.5% of the New-Order/s with a 1 GiB pool and 2% of
/// the rows/s of the insert cell with a 2 x 2 MiB log; there the LRU writes nothing, and the
/// lead is none.
fn room_lsn_limit(inp: &FlushInputs, pace: Option<Pace>, lru_share: f64) -> u64 {
    let mut age = inp.room_age.min(inp.sync_point);
    if let Some(p) = pace {
        age = age.min(p.target);
    } else {
        let lead = ROOM_LEAD_LOOPS * lru_share * sane(inp.redo_rate_avg) * inp.period_s;
        age = age.saturating_sub(lead as u64);
    }
    // at least 1: 0 would be no limit
    inp.lsn.saturating_sub(age).max(1)
}

/// The checkpoint age the pace holds: [`PACE_MARGIN_FRAC`] of the log under the sync point.
fn pace_target(inp: &FlushInputs) -> u64 {
    inp.sync_point
        .saturating_sub((PACE_MARGIN_FRAC * inp.log_capacity as f64) as u64)
}

impl Steady {
    /// Where the device is the limit: the flush lists' share of it, pages/s, while commits
    /// meter the overload by writing for log room themselves; None otherwise.
    ///
    /// The device is the limit when, for [`ROOM_ENGAGE_S`], the law has asked for more than
    /// the device writes with the log in use above sp, or the feed-forward alone (the rate
    /// that holds the log in use still) has been [`ENGAGE_FRAC`] of the flush lists' budget
    /// ([`flush_list_budget`]). The second is the same limit reached from below: a cleaner
    /// that holds the log at sp by writing all the device leaves it never asks for more than
    /// the device, yet every commit's log write queues behind its pages (on the holes' insert
    /// setup the log's fsyncs took 207-281 ms a second that way, against 135-152 ms with the
    /// commits writing for their room; docs/measurements.md, "The device's limit reached
    /// from below"). Then no flush rate holds sp with room to spare, and
    /// what the clients commit is what the device cleans up after, however the admission is
    /// made. Made by a delay on each commit (the curve, or the even schedule steady once
    /// used), it depends on the log in use that a commit sees, which moves with every
    /// reservation taken and every batch the cleaner ends; made by the commits' own writes (a commit that finds
    /// no room writes a batch of the oldest pages and is admitted as its room appears,
    /// `Durability::admit_stalled`), it follows the device one batch at a time. And the
    /// cleaner writing the whole device held the log lower than the commits' room does, so
    /// pages were written younger, more often: on the device-bound cells of `evenkeel matrix`
    /// steady ran less level than every classic policy and 3-12% slower (docs/measurements.md,
    /// "Where the device is the limit, commits write for their room").
    ///
    /// So the flush lists keep [`ROOM_SHARE`] of what the device writes beside the LRU
    /// cleaner (its averaged pages/s; the commits' own writes are not subtracted, or the
    /// share would shrink as they write more), and the curve stands down. The
    /// cleaner keeps half, not none: the commits' writes are client time, and the cleaner's
    /// half keeps the LRU tail and the oldest pages moving between commits.
    ///
    /// It ends when the law has asked for less than that share for [`ROOM_RELEASE_S`]: the
    /// flush lists alone hold the log again.
    fn room_metered(&mut self, inp: &FlushInputs) -> Option<f64> {
        let dev = device_rate(inp);
        if !dev.is_finite() {
            self.room_share = 0.0;
            self.room_s = 0.0;
            return None;
        }
        let share = ROOM_SHARE * (dev - sane(self.lru)).max(dev * MIN_BUDGET_FRAC);
        let dt = loop_s(inp).min(1.0);
        if self.room_share == 0.0 {
            // the time the device has been the limit before this loop: a first loop that finds
            // it so, however long, is not yet an overload that lasts
            let before = self.room_s;
            self.room_s = if self.device_limited {
                before + dt
            } else {
                0.0
            };
            if !self.device_limited || before < ROOM_ENGAGE_S {
                return None;
            }
            self.room_s = 0.0;
        } else {
            self.room_s = if self.raw < share {
                self.room_s + dt
            } else {
                0.0
            };
            if self.room_s >= ROOM_RELEASE_S {
                self.room_share = 0.0;
                self.room_s = 0.0;
                return None;
            }
        }
        self.room_share = share;
        Some(share)
    }

    /// Where commits write for their room ([`Steady::room_metered`]): the pace on the log's
    /// head, None until the checkpoint's advance has been measured.
    ///
    /// Why a pace there. With the device the limit and the log in use at the commits' room,
    /// the commits go at the rate the checkpoint advances, and the checkpoint advances over
    /// the pages first dirtied one lap of the log earlier. A page written at the tail and
    /// dirtied again soon after (the change buffer's leaves, the hot leaves) comes back to the
    /// tail one lap later at the LSN it was dirtied again at: a stretch of the log where the
    /// checkpoint moved slowly is dense in such pages, so one lap later the checkpoint moves
    /// slowly there again. With the log's head tied to its tail that pattern repeats lap after
    /// lap, undamped, whatever writes the pages; at 2 s a lap it is a second-by-second
    /// alternation of 10% and more (docs/measurements.md, "The log's lap echo").
    ///
    /// The pace unties the head: the LSN may advance along a line at the checkpoint's
    /// advance averaged over [`CKPT_AVG_S`], plus the distance of the checkpoint age to a
    /// target [`PACE_MARGIN_FRAC`] under the sync point, removed over [`PACE_P_TIME_S`]. The
    /// log then absorbs the tail's dense and thin stretches, and the pages dirtied again
    /// spread over the LSN as evenly as the head moves. The device stays full because a
    /// transaction the pace holds back with the age above sp writes a batch of the oldest
    /// pages while it waits (one such writer at a time, `Durability::pace_wait`): with no
    /// writer the flush lists' half of the device alone set the checkpoint's advance and the
    /// pace followed it down (17,565 rows/s against 28,600 on the holes' insert setup), and
    /// with a writer only within a point of the target the device stayed a fifth short in the
    /// matrix's cells with a 1 GiB pool and 2 x 4 MiB of redo, where the age sat under that
    /// point (docs/measurements.md, "A pace on the log's head"). Where the commits run slower
    /// than the line (the engine short of CPU), the pace holds nobody; then, with the age past
    /// the target, the page cleaner writes in the held writer's stead
    /// (`Durability::pace_stand_in`). The commits' room stays the backstop.
    ///
    /// The target is on the checkpoint age, not on the log in use: with a small log the
    /// space promised to transactions in flight is a large share of it (a third of a 4 MiB
    /// log under 4 insert clients), a target on the log in use sat under what the promises
    /// alone held, and the pace, following a checkpoint that followed it, slowed the commits
    /// to a quarter. And the pace runs only where the log's lap is long
    /// ([`Steady::pace_engaged`]).
    fn pace(&mut self, inp: &FlushInputs) -> Option<Pace> {
        let target = pace_target(inp);
        if self.ckpt_rate <= 0.0 || !self.pace_engaged(target) {
            return None;
        }
        Some(Pace {
            ff: self.ckpt_rate,
            target,
            p_time_s: PACE_P_TIME_S,
            write_from: setpoint(inp) as u64,
        })
    }

    /// Whether the pace runs this loop (in room mode): where the log's lap at the pace's
    /// target (the target over the redo rate averaged over [`CKPT_AVG_S`]) is at least
    /// [`PACE_MIN_LAP_S`], and, once it runs, until the lap falls under
    /// [`PACE_RELEASE_LAP_S`] or room mode ends.
    ///
    /// Why only at a long lap: the lap echo the pace damps repeats once a lap, and the
    /// throughput is seen a second at a time. A second averages a period-P swing down to
    /// |sin(pi/P) / (pi/P)| of it: 0.19 at 1.2 s, 0.47 at 1.6 s, 0.64 at 2 s, 0.74 at 2.4 s.
    /// So the shorter the lap the less of the echo shows, while the pace's cost does not
    /// shrink: it holds the age under the commits' room, so pages are written younger and
    /// more often, and every held commit waits. In the matrix's two 1 GiB-pool cells (laps of
    /// 1.2-1.3 and 1.7 s at the target) steady ran more level without the pace, TPC-C 7%
    /// faster and insert 1.2% slower, once the page cleaner wrote beside the commits that
    /// found no room (`FlushPlan::room_help`; alone, the one commit writing for the room
    /// left a quarter of the device unused in the low seconds of two TPC-C runs in ten); in
    /// the 64-client cell (1.65 s) as fast and as level; in the holes' insert setup (2.2-2.9
    /// s) the pace made it 7-17% faster, as level (docs/measurements.md, "The pace only where
    /// the log's lap is long" and "The page cleaner writes beside a commit that finds no
    /// room").
    ///
    /// Why the target, a long average and two thresholds: the lap measured on the age and the
    /// cleaner's short redo average moved with each loop, and the pace held the age lower
    /// when it ran, shortening the lap it was judged by. With one threshold near a cell's lap
    /// the pace went on and off every few loops, and each switch moved the commits' rate by a
    /// tenth or more (a 2 s threshold on the age's lap took a 1 GiB-pool TPC-C cell from
    /// detrended p1/mean 0.95 to 0.83).
    fn pace_engaged(&mut self, target: u64) -> bool {
        if self.redo_lap <= 0.0 {
            return false;
        }
        let lap = target as f64 / self.redo_lap;
        let least = if self.pacing {
            PACE_RELEASE_LAP_S
        } else {
            PACE_MIN_LAP_S
        };
        self.pacing = lap >= least;
        self.pacing
    }

    /// The feed-forward, pages/s: [`feed_forward`] with the tail's density averaged over
    /// [`TAIL_AVG_S`] (updated by [`Steady::rate`] once a loop).
    fn feed_forward(&self, inp: &FlushInputs) -> f64 {
        feed_forward_at(inp, self.tail)
    }

    /// The flush-list rate, pages/s, updating the integral and the tail's average.
    fn rate(&mut self, inp: &FlushInputs) -> f64 {
        let dt = loop_s(inp);
        let tail = sane(inp.tail_pages_per_redo_byte);
        if tail > 0.0 {
            self.tail = if self.tail > 0.0 {
                self.tail + (tail - self.tail) * (dt / TAIL_AVG_S).min(1.0)
            } else {
                tail
            };
        }
        let age = in_use(inp) as f64;
        let sp = setpoint(inp);
        let ff = self.feed_forward(inp);
        // Above sp: the dirty pages standing for the excess age, taking them spread evenly over
        // the age. Below: the same fraction of the deficit, so the rate eases off smoothly.
        let excess_pages = (age - sp) / age.max(sp).max(1.0) * inp.dirty_pages as f64;
        // while commits write for their room, the flush lists' share is the clamp, so the
        // integral does not wind up against a rate the plan will not write
        let mut cap = device_rate(inp) * PROBE;
        if self.room_share > 0.0 {
            cap = cap.min(self.room_share);
        }
        let pt = p_time_s(inp);
        let raw = ff + excess_pages / pt + self.integral;
        let mut rate = raw.clamp(0.0, cap);
        // Anti-windup: integrate only when the output is not pinned in the error's direction.
        let pinned_high = raw >= cap && excess_pages > 0.0;
        self.raw = raw;
        // the device is the limit also where the feed-forward alone takes nearly all the
        // device leaves the flush lists
        let budget = flush_list_budget(inp, self.others);
        self.device_limited = pinned_high || (budget.is_finite() && ff >= ENGAGE_FRAC * budget);
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
        let mut rate = self.rate(inp);
        let dt = loop_s(inp);
        if dt > 0.0 {
            let others = (inp.lru_flushed_last + inp.foreground_flushed_last) as f64 / dt;
            self.others += (others - self.others) * (dt / OTHERS_AVG_S).min(1.0);
            let lru = inp.lru_flushed_last as f64 / dt;
            self.lru += (lru - self.lru) * (dt / OTHERS_AVG_S).min(1.0);
        }
        if dt > 0.0 && self.ckpt_prev > 0 && inp.checkpoint_lsn >= self.ckpt_prev {
            let r = (inp.checkpoint_lsn - self.ckpt_prev) as f64 / dt;
            self.ckpt_rate += (r - self.ckpt_rate) * (dt / CKPT_AVG_S).min(1.0);
        }
        self.ckpt_prev = inp.checkpoint_lsn;
        let redo = sane(inp.redo_rate_last);
        self.redo_lap = if self.redo_lap > 0.0 {
            self.redo_lap + (redo - self.redo_lap) * (dt / CKPT_AVG_S).min(1.0)
        } else {
            sane(inp.redo_rate_avg)
        };
        let engaged = self.room_share > 0.0;
        let room = self.room_metered(inp);
        if room.is_some() && !engaged {
            // The pace's line starts at the head's averaged rate, not under it: until the log
            // first filled the checkpoint hardly moved, and an average that still holds those
            // seconds would start the line at a fraction of what the device cleans.
            self.ckpt_rate = self.ckpt_rate.max(sane(inp.redo_rate_avg));
        }
        if let Some(share) = room {
            // the loop that engages: `rate` was clamped to the device, not yet to the share
            rate = rate.min(share);
        } else {
            self.pacing = false;
        }
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
        if room.is_some() {
            // no delay curve: the commits' own writes meter the overload, under the pace; the
            // flush lists write no page younger than the commits' room (or the pace) needs
            let pace = self.pace(inp);
            return FlushPlan {
                flush_list_pages: n,
                lru_pages: lru_pages(inp),
                pace,
                lsn_limit: room_lsn_limit(inp, pace, sane(self.lru / device_rate(inp)).min(1.0)),
                room_help: true,
                ..FlushPlan::default()
            };
        }
        let curve = admission_curve(inp, self.feed_forward(inp), self.others);
        FlushPlan {
            flush_list_pages: n,
            lru_pages: lru_pages(inp),
            admission_delay_us: curve.delay_us(in_use(inp)),
            admission: Some(curve),
            room_help: true,
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

    /// A tail whose density swings loop to loop (thin, thick, thin, ...) moves the law's
    /// feed-forward by a small share of the swing, and a lasting change is followed.
    #[test]
    fn the_feed_forward_averages_the_tails_density() {
        let mut s = Steady::default();
        let mut i = with_age(sp_age());
        i.elapsed_s = 0.2;
        let (thin, thick) = (1.0 / 8_000.0, 1.0 / 2_000.0);
        let mut ffs = Vec::new();
        for k in 0..40 {
            i.tail_pages_per_redo_byte = if k % 2 == 0 { thin } else { thick };
            s.rate(&i);
            ffs.push(s.feed_forward(&i));
        }
        let (lo, hi) = (feed_forward_at(&i, thin), feed_forward_at(&i, thick));
        // from one loop to the next it moves by a tenth of the swing at most
        for w in ffs.windows(2).skip(1) {
            assert!((w[1] - w[0]).abs() < 0.1 * (hi - lo), "{w:?} of {lo}..{hi}");
        }
        assert!(ffs.iter().all(|&x| x >= lo && x < hi), "{ffs:?}");
        // a lasting change: within 10% of the new density's feed-forward after 3 time constants
        let loops = (3.0 * TAIL_AVG_S / i.elapsed_s).ceil() as usize;
        for _ in 0..loops {
            i.tail_pages_per_redo_byte = thick;
            s.rate(&i);
        }
        assert!(
            s.feed_forward(&i) > 0.9 * hi,
            "{} of {hi}",
            s.feed_forward(&i)
        );
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
    fn commits_write_for_their_room_where_the_device_is_the_limit() {
        // demand 1000 pages/s, 8 MiB above sp: a 5000-page device keeps up, a 500-page one
        // does not
        let mut i = with_age(sp_age() + 8 * MIB);
        let mut p = Steady::default();
        let plans: Vec<FlushPlan> = (0..4).map(|_| p.plan(&i)).collect();
        assert!(plans.iter().all(|x| x.admission.is_some()), "{plans:?}");
        assert_eq!(p.room_share, 0.0);
        // on the slow device the law asks for more than it writes: the first loop clamps to
        // 1.1 x the device under the curve; after 1 s of that the flush lists take half the
        // device beside the LRU cleaner (here none), the curve stands down, and commits that
        // find no room write the rest
        i.device_pages_per_s = 500.0;
        let plans: Vec<FlushPlan> = (0..4).map(|_| p.plan(&i)).collect();
        assert_eq!(plans[0].flush_list_pages, 550, "{plans:?}");
        assert!(plans[0].admission.is_some(), "{plans:?}");
        for x in &plans[1..] {
            assert_eq!(x.flush_list_pages, 250, "{plans:?}");
            assert_eq!(x.admission, None, "{plans:?}");
            assert_eq!(x.admission_delay_us, 0, "{plans:?}");
        }
        // the LRU cleaner's pages are not the flush lists': half of what is left (its
        // average over about 2 s moves half of the way in a 1 s loop)
        let mut q = p.clone();
        i.lru_flushed_last = 200;
        assert_eq!(q.plan(&i).flush_list_pages, 200); // (500 - 100) / 2
        assert_eq!(q.plan(&i).flush_list_pages, 175); // (500 - 150) / 2
                                                      // commits' own writes are not subtracted: the share does not shrink as they write
        let mut q = p.clone();
        i.lru_flushed_last = 0;
        i.foreground_flushed_last = 400;
        assert_eq!(q.plan(&i).flush_list_pages, 250);
        // the device keeps up again, the log at sp: the law asks for the demand (1000), under
        // the share (2500); after 5 s of that the curve is back
        i.foreground_flushed_last = 0;
        i.device_pages_per_s = 5_000.0;
        let mut j = i.clone();
        j.checkpoint_lsn = i.lsn - (sp_age() - i.reserved_bytes);
        let plans: Vec<FlushPlan> = (0..6).map(|_| p.plan(&j)).collect();
        assert!(
            plans[..4].iter().all(|x| x.admission.is_none()),
            "{plans:?}"
        );
        assert!(plans[5].admission.is_some(), "{plans:?}");
        assert_eq!(p.room_share, 0.0);
    }

    #[test]
    fn where_commits_write_for_their_room_a_pace_holds_the_head_to_the_checkpoints_advance() {
        // a 500-page device: room mode from the second loop (as above); the checkpoint
        // advances 3 MB a loop with the LSN
        let mut i = with_age(sp_age() + 8 * MIB);
        i.device_pages_per_s = 500.0;
        let mut p = Steady::default();
        let mut plans = Vec::new();
        for _ in 0..6 {
            plans.push(p.plan(&i));
            i.lsn += 3_000_000;
            i.checkpoint_lsn += 3_000_000;
        }
        assert_eq!(plans[0].pace, None, "{plans:?}");
        assert!(
            plans[1..].iter().all(|x| x.admission.is_none()),
            "{plans:?}"
        );
        // the line starts at the head's averaged rate (4 MB/s) where room mode engages, not
        // at the advance averaged from 0 (0.75 MB/s after one loop), and moves to the advance
        // averaged over 4 s, a quarter of the way each 1 s loop: 3e6 + 1e6 x 0.75^4 four
        // loops later
        let pace = plans[1].pace.expect("room mode paces the head");
        assert_eq!(pace.ff, i.redo_rate_avg, "{pace:?}");
        let pace = plans[5].pace.expect("room mode paces the head");
        assert!(
            (pace.ff - (3e6 + 1e6 * 0.75f64.powi(4))).abs() < 1.0,
            "{pace:?}"
        );
        // the age 4.5% of the log under the sync point (60 MiB of 64), over 0.5 s; pages
        // written in the waits from sp
        assert_eq!(pace.target, 60 * MIB - (0.045 * (64 * MIB) as f64) as u64);
        assert_eq!(pace.p_time_s, PACE_P_TIME_S);
        assert_eq!(pace.write_from, setpoint(&i) as u64);
        // the line's slope: the advance at the target, more below it, less above, and never
        // under a quarter of it
        assert_eq!(pace.rate(pace.target), pace.ff);
        assert_eq!(pace.rate(pace.target - MIB), pace.ff + 2.0 * MIB as f64);
        assert_eq!(pace.rate(pace.target + 64 * MIB), pace.ff * 0.25);
        // the redo at 100 MB/s: the lap at the target (57.1 MiB) falls to 0.6 s as the redo
        // averaged over 4 s follows, a quarter of the way a loop. After one loop (28 MB/s, a
        // 2.1 s lap) the pace still runs; after two (46 MB/s, 1.3 s) it has let go, and room
        // mode goes on without it
        let mut q = p.clone();
        i.redo_rate_avg = 100e6;
        i.redo_rate_last = 100e6;
        let x = q.plan(&i);
        assert!(x.pace.is_some(), "{x:?}");
        let x = q.plan(&i);
        assert_eq!(x.admission, None, "{x:?}");
        assert_eq!(x.pace, None, "{x:?}");
        // the law back under the share for 5 s ends room mode, and the pace with it
        let mut j = p.clone();
        let mut k = with_age(sp_age());
        k.device_pages_per_s = 5_000.0;
        let last = (0..6).map(|_| j.plan(&k)).last().expect("six plans");
        assert!(last.admission.is_some() && last.pace.is_none(), "{last:?}");
    }

    #[test]
    fn where_commits_write_for_their_room_the_flush_lists_write_no_page_younger_than_it_needs() {
        // a 500-page device: room mode from the second loop, with the pace (a 14 s lap)
        let mut i = with_age(sp_age() + 8 * MIB);
        i.device_pages_per_s = 500.0;
        let mut p = Steady::default();
        let x = p.plan(&i);
        assert_eq!(x.lsn_limit, 0, "under the curve any age: {x:?}");
        let x = p.plan(&i);
        let pace = x.pace.expect("room mode paces the head");
        // the pace's target (57.1 MiB) is under the age of the commits' room (the sync
        // point, 60 MiB): the pages older than the target
        assert!(pace.target < i.room_age, "{pace:?}");
        assert_eq!(x.lsn_limit, i.lsn - pace.target, "{x:?}");
        // reservations bring the commits' room under the target: the pages older than it
        i.room_age = 50 * MIB;
        assert_eq!(p.clone().plan(&i).lsn_limit, i.lsn - 50 * MIB);
        // no pace (a lap under 1.6 s once the redo averaged over 4 s reaches 46 MB/s, two
        // loops): the commits' room, and never past the sync point
        i.redo_rate_avg = 100e6;
        i.redo_rate_last = 100e6;
        p.plan(&i);
        let x = p.clone().plan(&i);
        assert_eq!(x.pace, None, "{x:?}");
        assert_eq!(x.lsn_limit, i.lsn - 50 * MIB, "{x:?}");
        i.room_age = 64 * MIB;
        assert_eq!(p.clone().plan(&i).lsn_limit, i.lsn - i.sync_point);
        // the reservations fill the log: every page is needed
        i.room_age = 0;
        assert_eq!(p.clone().plan(&i).lsn_limit, i.lsn);
    }

    #[test]
    fn without_the_pace_the_flush_lists_limit_leads_the_room_by_the_lrus_share_of_two_loops() {
        // room mode on a 500-page device with no pace (100 MB/s of redo: a lap under 1.6 s)
        let mut i = with_age(sp_age() + 8 * MIB);
        i.device_pages_per_s = 500.0;
        i.redo_rate_avg = 100e6;
        i.redo_rate_last = 100e6;
        i.period_s = 0.01;
        let mut p = Steady::default();
        for _ in 0..3 {
            p.plan(&i);
        }
        let x = p.clone().plan(&i);
        assert_eq!(x.pace, None, "{x:?}");
        // the LRU cleaner writes nothing: the limit at the commits' room
        assert_eq!(x.lsn_limit, i.lsn - i.room_age.min(i.sync_point), "{x:?}");
        // it writes 250 of the device's 500 pages/s (averaged over 2 s: 20 one-second loops)
        i.lru_flushed_last = 250;
        for _ in 0..20 {
            p.plan(&i);
        }
        let mut q = p.clone();
        let x = q.plan(&i);
        let share = q.lru / device_rate(&i);
        assert!((share - 0.5).abs() < 0.01, "{share}");
        // a lead of half of two loops of redo: 0.5 x 2 x 100 MB/s x 10 ms = 1 MB
        let lead = (ROOM_LEAD_LOOPS * share * 100e6 * 0.01) as u64;
        assert!(lead.abs_diff(1_000_000) < 20_000, "{lead}");
        assert_eq!(
            x.lsn_limit,
            i.lsn - (i.room_age.min(i.sync_point) - lead),
            "{x:?}"
        );
        // and never past the whole log
        i.period_s = 10.0;
        assert_eq!(p.clone().plan(&i).lsn_limit, i.lsn);
    }

    #[test]
    fn steady_asks_the_cleaner_to_write_beside_a_commit_that_finds_no_room_in_both_modes() {
        // the curve's mode, and room mode (a 500-page device)
        let mut p = Steady::default();
        let x = p.plan(&with_age(sp_age()));
        assert!(x.admission.is_some() && x.room_help, "{x:?}");
        let mut i = with_age(sp_age() + 8 * MIB);
        i.device_pages_per_s = 500.0;
        let mut p = Steady::default();
        let x = (0..6).map(|_| p.plan(&i)).last().expect("six plans");
        assert!(p.room_share > 0.0 && x.room_help, "{x:?}");
    }

    #[test]
    fn the_pace_starts_at_a_two_second_lap_and_lets_go_under_one_point_six() {
        // a 500-page device: room mode from the second loop. The lap at the pace's target
        // (57.1 MiB, 59.9 MB) over the redo averaged over 4 s.
        let lap_at = |redo: f64| {
            let mut i = with_age(sp_age() + 8 * MIB);
            i.device_pages_per_s = 500.0;
            i.redo_rate_avg = redo;
            i.redo_rate_last = redo;
            i
        };
        let target = pace_target(&lap_at(1.0)) as f64;
        // a 1.8 s lap: room mode, but no pace where it has not run
        let i = lap_at(target / 1.8);
        let mut p = Steady::default();
        let plans: Vec<FlushPlan> = (0..6).map(|_| p.plan(&i)).collect();
        assert!(p.room_share > 0.0, "{plans:?}");
        assert!(plans.iter().all(|x| x.pace.is_none()), "{plans:?}");
        // a lap of 2 s and more starts it
        let i = lap_at(target / 2.05);
        let mut p = Steady::default();
        let x = (0..6).map(|_| p.plan(&i)).last().expect("six plans");
        assert!(x.pace.is_some(), "{x:?}");
        // back to 1.8 s (the average settled there): it runs on
        let i = lap_at(target / 1.8);
        let x = (0..40).map(|_| p.plan(&i)).last().expect("plans");
        assert!(
            (p.redo_lap - target / 1.8).abs() < 0.01 * p.redo_lap,
            "{p:?}"
        );
        assert!(x.pace.is_some(), "{x:?}");
        // under 1.6 s: it lets go, and does not start again at 1.8 s
        let i = lap_at(target / 1.5);
        let x = (0..40).map(|_| p.plan(&i)).last().expect("plans");
        assert!(x.pace.is_none() && p.room_share > 0.0, "{x:?}");
        let i = lap_at(target / 1.8);
        let x = (0..40).map(|_| p.plan(&i)).last().expect("plans");
        assert!(x.pace.is_none(), "{x:?}");
        // room mode that ends ends the pace: a fresh spell starts without it
        let i = lap_at(target / 2.05);
        let x = (0..40).map(|_| p.plan(&i)).last().expect("plans");
        assert!(x.pace.is_some(), "{x:?}");
        let mut k = with_age(sp_age());
        k.device_pages_per_s = 5_000.0;
        let x = (0..8).map(|_| p.plan(&k)).last().expect("plans");
        assert!(
            x.pace.is_none() && p.room_share == 0.0 && !p.pacing,
            "{x:?}"
        );
    }

    #[test]
    fn the_device_is_the_limit_where_the_demand_alone_takes_it_at_the_set_point() {
        // at sp the law asks for the demand, 1000 pages/s: under the clamp of a 1,050-page
        // device, but 0.95 of it. After 1 s of that the flush lists take half the device and
        // the curve stands down, as where the law asks for more than the device.
        let mut i = with_age(sp_age());
        i.device_pages_per_s = 1_050.0;
        let mut p = Steady::default();
        let plans: Vec<FlushPlan> = (0..3).map(|_| p.plan(&i)).collect();
        assert_eq!(plans[0].flush_list_pages, 1_000, "{plans:?}");
        assert!(plans[0].admission.is_some(), "{plans:?}");
        for x in &plans[1..] {
            assert_eq!(x.flush_list_pages, 525, "{plans:?}");
            assert_eq!(x.admission, None, "{plans:?}");
        }
        // a device with room for twice the demand is not the limit
        let mut i = with_age(sp_age());
        i.device_pages_per_s = 2_000.0;
        let mut p = Steady::default();
        let plans: Vec<FlushPlan> = (0..4).map(|_| p.plan(&i)).collect();
        assert!(plans.iter().all(|x| x.admission.is_some()), "{plans:?}");
        assert!(
            plans.iter().all(|x| x.flush_list_pages == 1_000),
            "{plans:?}"
        );
    }

    #[test]
    fn the_curves_overload_counts_what_the_lru_leaves() {
        // demand 1000 pages/s on a 5000-page device of which the LRU cleaner writes 4500:
        // (1000 - 500) / 500, at most 1
        let i = with_age(sp_age());
        assert_eq!(admission_curve(&i, feed_forward(&i), 4_500.0).overload, 1.0);
        assert_eq!(admission_curve(&i, feed_forward(&i), 0.0).overload, 0.0);
        // however much the others write, the flush lists keep a tenth of the device
        assert_eq!(flush_list_budget(&i, 1e9), 500.0);
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
