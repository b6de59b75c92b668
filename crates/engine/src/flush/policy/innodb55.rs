//! innodb55: InnoDB plugin 1.0.4 / MySQL 5.5 adaptive flushing, `buf_flush_get_desired_flush_rate`
//! in `storage/innobase/buf/buf0flu.c` (stats kept by `buf_flush_stat_update`), called from
//! `srv_master_thread` in `srv/srv0srv.c`; described in the MySQL 5.5 manual, "Configuring
//! Buffer Pool Flushing" (https://dev.mysql.com/doc/refman/5.5/en/innodb-buffer-pool-flushing.html).
//!
//! Each 1-second loop:
//! - if dirty % > max_dirty_pages_pct: PCT_IO(100) = io_capacity pages;
//! - else pages/s = n_dirty * redo_avg / log_capacity - lru_flush_avg, floored at 0 and capped
//!   at io_capacity, where redo_avg is redo bytes per second and lru_flush_avg LRU-flushed
//!   pages per second, both averaged over the last BUF_FLUSH_STAT_N_INTERVAL = 20 intervals.
//!   The idea: flush the dirty pages in proportion to how fast the log is being consumed, a
//!   whole log's worth of redo meaning all of them.
//!
//! The denominator is the whole log capacity (`log_get_capacity()`), not the room left before
//! the async point: 5.5 does not look at the checkpoint age at all, which is why it holds the
//! age at a level set by the workload (the seeds' 3/4-full logs and waves). The 20 slots start
//! at zero, as 5.5's static array did, so the first 20 s underestimate. 5.5 also added the redo
//! of the partly elapsed current second (0 to 1 extra interval, depending on the phase of two
//! threads); we leave that phase noise out and average the 20 completed loops, this one
//! included. Plus the master thread's 10-second batch and free margin (`classic`).

use super::classic::{free_margin_lru_pages, pct_io, TenSecondBatch};
use super::{loop_s, per_loop, FlushInputs, FlushPlan, Policy};

/// BUF_FLUSH_STAT_N_INTERVAL.
const N_INTERVAL: usize = 20;

#[derive(Clone, Debug, Default)]
pub struct Innodb55 {
    /// Redo bytes/s and LRU-flushed pages/s of the last 20 loops (ring).
    redo: [f64; N_INTERVAL],
    lru: [f64; N_INTERVAL],
    next: usize,
    ten: TenSecondBatch,
}

impl Innodb55 {
    /// buf_flush_get_desired_flush_rate: pages/s, before the io_capacity cap.
    fn desired_rate(&mut self, inp: &FlushInputs) -> f64 {
        let dt = loop_s(inp);
        let slot = self.next % N_INTERVAL;
        self.redo[slot] = inp.redo_rate_last.max(0.0);
        self.lru[slot] = inp.lru_flushed_last as f64 / dt;
        self.next = (slot + 1) % N_INTERVAL;
        let redo_avg = self.redo.iter().sum::<f64>() / N_INTERVAL as f64;
        let lru_avg = self.lru.iter().sum::<f64>() / N_INTERVAL as f64;
        let capacity = inp.log_capacity.max(1) as f64;
        (inp.dirty_pages as f64 * redo_avg / capacity - lru_avg).max(0.0)
    }
}

impl Policy for Innodb55 {
    fn name(&self) -> &'static str {
        "innodb55"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        // The stats advance every second whatever the master thread decides.
        let rate = self.desired_rate(inp);
        let per_second = if inp.dirty_pct() > inp.max_dirty_pages_pct {
            pct_io(inp, 100)
        } else {
            per_loop(rate.min(pct_io(inp, 100) as f64), inp)
        };
        FlushPlan {
            flush_list_pages: per_second + self.ten.step(inp),
            lru_pages: free_margin_lru_pages(inp),
            ..FlushPlan::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{base, with_age};
    use super::*;
    use proptest::prelude::*;

    /// The plan of loop 21 of identical loops: window full, no 10-second batch (loops 10, 20).
    fn settled(inp: &FlushInputs) -> u64 {
        let mut p = Innodb55::default();
        let mut last = 0;
        for _ in 0..=N_INTERVAL {
            last = p.plan(inp).flush_list_pages;
        }
        last
    }

    #[test]
    fn table_settled() {
        // log 64 MiB = 67 108 864 B. (dirty, redo B/s, lru/s, io_capacity, max_dirty, want)
        let cases = [
            // 2000 * 4e6 / 67108864 = 119.2 -> 119
            (2_000, 4_000_000.0, 0, 200, 90.0, 119),
            // 8000 dirty -> 476.8, capped at io_capacity 200
            (8_000, 4_000_000.0, 0, 200, 90.0, 200),
            // same with io_capacity 1000 -> 476
            (8_000, 4_000_000.0, 0, 1_000, 90.0, 476),
            // LRU flushing 100/s is subtracted: 119.2 - 100 = 19
            (2_000, 4_000_000.0, 100, 200, 90.0, 19),
            // LRU above the need: 0
            (2_000, 4_000_000.0, 500, 200, 90.0, 0),
            // no redo: 0
            (2_000, 0.0, 0, 200, 90.0, 0),
            // over max dirty (20% > 10%): io_capacity whatever the rate
            (2_000, 0.0, 0, 300, 10.0, 300),
        ];
        for (dirty, redo, lru, io, max, want) in cases {
            let mut i = base();
            i.dirty_pages = dirty;
            i.redo_rate_last = redo;
            i.lru_flushed_last = lru;
            i.io_capacity = io;
            i.max_dirty_pages_pct = max;
            assert_eq!(settled(&i), want, "dirty {dirty} redo {redo} lru {lru}");
        }
    }

    #[test]
    fn window_fills_over_twenty_loops() {
        // One loop of redo counts 1/20: 2000 * 4e6/20 / 2^26 = 5.96 -> 5.
        let mut i = base();
        i.flushed_last = 1_000;
        let mut p = Innodb55::default();
        assert_eq!(p.plan(&i).flush_list_pages, 5);
        // After a burst, the average forgets it only after 20 loops.
        i.redo_rate_last = 0.0;
        let tail: Vec<u64> = (0..N_INTERVAL)
            .map(|_| p.plan(&i).flush_list_pages)
            .collect();
        let mut want = vec![5u64; 19];
        want.push(0);
        want[8] += 20; // loops 10 and 20: the 10 s batch, PCT_IO(10) on a busy disk
        want[18] += 20;
        assert_eq!(tail, want);
    }

    #[test]
    fn blind_to_checkpoint_age() {
        let a = settled(&with_age(1 << 20));
        let b = settled(&with_age(60 << 20));
        assert_eq!(a, b);
    }

    proptest! {
        #[test]
        fn capped_at_io_capacity_and_monotonic_in_dirty(
            dirty in 0u64..9_000, extra in 0u64..1_000, redo in 0.0f64..1e9, io in 1u64..20_000,
        ) {
            let mut i = base();
            i.redo_rate_last = redo;
            i.io_capacity = io;
            i.max_dirty_pages_pct = 100.0;
            i.dirty_pages = dirty;
            let lo = settled(&i);
            i.dirty_pages = dirty + extra;
            let hi = settled(&i);
            prop_assert!(lo <= io);
            prop_assert!(hi <= io);
            prop_assert!(lo <= hi);
        }
    }
}
