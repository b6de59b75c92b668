//! innodb80: MySQL 8.0 adaptive flushing, `page_cleaner_flush_pages_recommendation` with
//! `af_get_pct_for_dirty` and `af_get_pct_for_lsn` in `storage/innobase/buf/buf0flu.cc`
//! (mysql-server 8.0); described in the 8.0 manual, "Configuring Buffer Pool Flushing"
//! (https://dev.mysql.com/doc/refman/8.0/en/innodb-buffer-pool-flushing.html).
//!
//! Each ~1-second loop, pages/s =
//!   min(io_capacity_max, (io_capacity * max(pct_for_dirty, pct_for_lsn) / 100
//!                         + avg_page_rate + pages_for_lsn) / 3)
//! - pct_for_dirty = 0 if nothing is dirty or dirty % < max_dirty_pages_pct_lwm, else
//!   dirty% * 100 / (max_dirty_pages_pct + 1); with lwm = 0, 100 once dirty % reaches the max;
//! - pct_for_lsn = 0 below adaptive_flushing_lwm % of the log capacity, else with
//!   f = age * 100 / async_point (integer), (io_capacity_max / io_capacity) * f * sqrt(f) / 7.5;
//! - avg_page_rate and lsn_avg_rate are updated every flushing_avg_loops loops (or that many
//!   seconds) as the mean of the old value and the new window's pages flushed / s and redo / s;
//! - pages_for_lsn = the dirty pages whose oldest modification lies within 3 * lsn_avg_rate of
//!   the oldest (buf_flush_lsn_scan_factor = 3), divided by 3, at least 1, at most
//!   2 * io_capacity_max. 8.0 counts them on the flush lists; we have no per-page ages among the
//!   inputs and assume the dirty pages spread evenly over the checkpoint age.
//!
//! The first loop only remembers the LSN. A loop in which the LSN did not move is idle: the
//! 8.0 coordinator then flushes PCT_IO(innodb_idle_flush_pct = 100). LRU: like
//! buf_flush_LRU_list, lru_scan_depth minus the free frames.

use super::{loop_s, per_loop, FlushInputs, FlushPlan, Policy};

/// buf_flush_lsn_scan_factor.
const LSN_SCAN_FACTOR: u64 = 3;

#[derive(Clone, Debug, Default)]
pub struct Innodb80 {
    /// LSN at the start of the averaging window; `None` before the first loop.
    prev_lsn: Option<u64>,
    /// LSN at the previous loop (idle detection).
    last_lsn: u64,
    sum_pages: u64,
    n_iterations: u64,
    window_s: f64,
    avg_page_rate: u64,
    lsn_avg_rate: u64,
}

/// af_get_pct_for_dirty: percent of io_capacity for the dirty-page ratio.
pub fn pct_for_dirty(inp: &FlushInputs) -> u64 {
    let dirty_pct = inp.dirty_pct();
    if dirty_pct == 0.0 {
        return 0;
    }
    if inp.max_dirty_pages_pct_lwm == 0.0 {
        if dirty_pct >= inp.max_dirty_pages_pct {
            return 100;
        }
    } else if dirty_pct >= inp.max_dirty_pages_pct_lwm {
        return (dirty_pct * 100.0 / (inp.max_dirty_pages_pct + 1.0)) as u64;
    }
    0
}

/// af_get_pct_for_lsn: percent of io_capacity for a checkpoint age of `age` bytes.
pub fn pct_for_lsn(inp: &FlushInputs, age: u64) -> u64 {
    let lwm = (inp.adaptive_flushing_lwm * inp.log_capacity as f64 / 100.0) as u64;
    if age < lwm {
        return 0;
    }
    let age_factor = (age as u128 * 100 / inp.async_point.max(1) as u128) as f64;
    let ratio = (inp.io_capacity_max / inp.io_capacity.max(1)) as f64;
    (ratio * age_factor * age_factor.sqrt() / 7.5) as u64
}

impl Innodb80 {
    /// Every flushing_avg_loops loops (or seconds): fold the window into the averages.
    fn update_averages(&mut self, inp: &FlushInputs, prev_lsn: u64) {
        self.sum_pages += inp.flushed_last;
        self.n_iterations += 1;
        self.window_s += loop_s(inp);
        let loops = inp.flushing_avg_loops.max(1);
        if self.n_iterations < loops && self.window_s < loops as f64 {
            return;
        }
        let elapsed = self.window_s.max(1.0);
        let page_rate = self.sum_pages as f64 / elapsed;
        self.avg_page_rate = ((page_rate + self.avg_page_rate as f64) / 2.0) as u64;
        let lsn_rate = (inp.lsn.saturating_sub(prev_lsn) as f64 / elapsed) as u64;
        self.lsn_avg_rate = (self.lsn_avg_rate + lsn_rate) / 2;
        self.prev_lsn = Some(inp.lsn);
        self.n_iterations = 0;
        self.sum_pages = 0;
        self.window_s = 0.0;
    }

    /// pages_for_lsn, with dirty pages assumed spread evenly over the checkpoint age.
    fn pages_for_lsn(&self, inp: &FlushInputs, age: u64) -> u64 {
        let window = self.lsn_avg_rate.saturating_mul(LSN_SCAN_FACTOR);
        let in_window = if age == 0 || window >= age {
            inp.dirty_pages
        } else {
            (inp.dirty_pages as u128 * window as u128 / age as u128) as u64
        };
        (in_window / LSN_SCAN_FACTOR)
            .max(1)
            .min(inp.io_capacity_max.saturating_mul(2))
    }

    /// page_cleaner_flush_pages_recommendation, in pages per second.
    fn recommendation(&mut self, inp: &FlushInputs, prev_lsn: u64) -> u64 {
        self.update_averages(inp, prev_lsn);
        let age = inp.checkpoint_age();
        let pct_total = pct_for_dirty(inp).max(pct_for_lsn(inp, age));
        let pct_io = inp.io_capacity.saturating_mul(pct_total) / 100;
        let sum = pct_io + self.avg_page_rate + self.pages_for_lsn(inp, age);
        (sum / 3).min(inp.io_capacity_max)
    }
}

impl Policy for Innodb80 {
    fn name(&self) -> &'static str {
        "innodb80"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        let lru_pages = inp.lru_scan_depth.saturating_sub(inp.free_pages);
        let idle = inp.lsn == self.last_lsn;
        self.last_lsn = inp.lsn;
        let per_s = match self.prev_lsn {
            None => {
                self.prev_lsn = Some(inp.lsn);
                0
            }
            Some(_) if idle => inp.io_capacity.min(inp.dirty_pages),
            Some(prev) => self.recommendation(inp, prev),
        };
        FlushPlan {
            flush_list_pages: per_loop(per_s as f64, inp),
            lru_pages,
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

    #[test]
    fn pct_for_dirty_table() {
        // base: 10 000 frames; dirty % = dirty / 100. (dirty, lwm, max, want)
        let cases = [
            (0, 10.0, 90.0, 0),
            (2_000, 10.0, 90.0, 21),  // 20 * 100 / 91 = 21.98
            (2_000, 25.0, 90.0, 0),   // under the lwm
            (2_000, 0.0, 90.0, 0),    // lwm off, under max
            (9_100, 0.0, 90.0, 100),  // lwm off, past max
            (9_500, 10.0, 90.0, 104), // 95 * 100 / 91 = 104.4
        ];
        for (dirty, lwm, max, want) in cases {
            let mut i = base();
            i.dirty_pages = dirty;
            i.max_dirty_pages_pct_lwm = lwm;
            i.max_dirty_pages_pct = max;
            assert_eq!(pct_for_dirty(&i), want, "dirty {dirty} lwm {lwm}");
        }
    }

    #[test]
    fn pct_for_lsn_table() {
        // log 64 MiB, async 56 MiB, lwm 10% = 6.4 MiB. (age, io_capacity, io_max, want)
        let cases = [
            (6 * MIB, 200, 2_000, 0),      // under the lwm
            (16 * MIB, 200, 2_000, 197),   // f = 28: 10 * 28 * 5.2915 / 7.5 = 197.5
            (16 * MIB, 200, 200, 19),      // ratio 1
            (56 * MIB, 200, 2_000, 1_333), // f = 100: 10 * 1000 / 7.5
            (56 * MIB, 300, 2_000, 800),   // ratio 2000/300 = 6 (integer)
            (60 * MIB, 200, 200, 147),     // f = 107: 107 * 10.344 / 7.5 = 147.6
        ];
        for (age, io, max, want) in cases {
            let mut i = base();
            i.io_capacity = io;
            i.io_capacity_max = max;
            assert_eq!(pct_for_lsn(&i, age), want, "age {age} io {io}/{max}");
        }
    }

    /// Runs loops with the log advancing `redo` bytes per loop and the checkpoint following.
    fn run(mut i: FlushInputs, redo: u64, loops: usize) -> Vec<u64> {
        let mut p = Innodb80::default();
        (0..loops)
            .map(|_| {
                let n = p.plan(&i).flush_list_pages;
                i.lsn += redo;
                i.checkpoint_lsn += redo;
                n
            })
            .collect()
    }

    #[test]
    fn recommendation_table() {
        // age 16 MiB: pct_for_lsn 197 > pct_for_dirty 21 -> PCT_IO = 394.
        // avg loops 30: no averages yet -> (394 + 0 + 1) / 3 = 131.
        let i = with_age(16 * MIB);
        assert_eq!(run(i.clone(), 4_000_000, 3), vec![0, 131, 131]);
        // avg loops 1, 300 pages flushed per loop: at loop 2 avg_page_rate = 150,
        // lsn_avg_rate = 2e6 -> window 6e6 -> 2000 * 6e6 / 16 Mi = 715 pages -> 238;
        // (394 + 150 + 238) / 3 = 260.
        let mut j = i.clone();
        j.flushing_avg_loops = 1;
        j.flushed_last = 300;
        assert_eq!(run(j, 4_000_000, 2), vec![0, 260]);
        // io_capacity_max 500: ratio 500 / 200 = 2, pct_for_lsn(60 MiB) = 2 * 107 * 10.34 / 7.5
        // = 295 -> (590 + 0 + 1) / 3 = 197
        let mut k = with_age(60 * MIB);
        k.io_capacity_max = 500;
        assert_eq!(run(k.clone(), 4_000_000, 2), vec![0, 197]);
        // with 10 000 pages flushed last loop and avg loops 1: avg_page_rate 5000 ->
        // (590 + 5000 + 63) / 3 = 1884, capped at io_capacity_max = 500
        k.flushing_avg_loops = 1;
        k.flushed_last = 10_000;
        assert_eq!(run(k, 4_000_000, 2), vec![0, 500]);
    }

    #[test]
    fn idle_flushes_io_capacity_and_lru_fills_scan_depth() {
        let i = base();
        let mut p = Innodb80::default();
        p.plan(&i);
        let plan = p.plan(&i); // the LSN did not move
        assert_eq!(plan.flush_list_pages, 200);
        assert_eq!(plan.lru_pages, 1_024 - 999);
    }

    proptest! {
        #[test]
        fn capped_at_io_capacity_max(
            age in 0u64..64 * MIB, dirty in 0u64..10_000, io in 1u64..5_000, extra in 0u64..20_000,
            flushed in 0u64..1_000_000, avg in 1u64..5,
        ) {
            let mut i = with_age(age);
            i.dirty_pages = dirty;
            i.io_capacity = io;
            i.io_capacity_max = io + extra;
            i.flushed_last = flushed;
            i.flushing_avg_loops = avg;
            for n in run(i, 4_000_000, 8) {
                prop_assert!(n <= io + extra);
            }
        }

        #[test]
        fn pct_for_lsn_monotonic_in_age(a in 0u64..64 * MIB, b in 0u64..64 * MIB) {
            let i = base();
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(pct_for_lsn(&i, lo) <= pct_for_lsn(&i, hi));
        }

        #[test]
        fn pct_for_dirty_monotonic(a in 0u64..10_000, b in 0u64..10_000) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let mut i = base();
            i.dirty_pages = lo;
            let p_lo = pct_for_dirty(&i);
            i.dirty_pages = hi;
            prop_assert!(p_lo <= pct_for_dirty(&i));
        }
    }
}
