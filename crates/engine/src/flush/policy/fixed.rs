//! fixed: InnoDB 5.1's flushing, which knows nothing of the redo log. Described in the InnoDB
//! plugin 1.0 for MySQL 5.1 (`storage/innodb_plugin/srv/srv0srv.c`, `srv_master_thread`, with
//! innodb_adaptive_flushing off; the same code as the built-in 5.1 InnoDB with its hard-coded
//! 100 pages replaced by PCT_IO(100) of io_capacity):
//!
//! - each 1-second loop: if dirty % > max_dirty_pages_pct, flush PCT_IO(100) = io_capacity
//!   pages and skip the sleep (so it goes all-out, batch after batch, while over the limit);
//!   otherwise nothing;
//! - every 10 seconds: PCT_IO(100) more if the disk was idle, then PCT_IO(100) if dirty % > 70
//!   else PCT_IO(10) — the trickle that is all it flushes below the limit (see `classic`);
//! - LRU: 5.x's free margin (see `classic`).
//!
//! No redo awareness at all: the checkpoint age grows until the async and sync points (outside
//! the policy) force the sharp checkpoints the seeds graph. That is its purpose here.

use super::classic::{free_margin_lru_pages, pct_io, TenSecondBatch};
use super::{FlushInputs, FlushPlan, Policy};

#[derive(Clone, Debug, Default)]
pub struct Fixed {
    ten: TenSecondBatch,
}

impl Policy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        let over_limit = inp.dirty_pct() > inp.max_dirty_pages_pct;
        let per_second = if over_limit { pct_io(inp, 100) } else { 0 };
        FlushPlan {
            flush_list_pages: per_second + self.ten.step(inp),
            lru_pages: free_margin_lru_pages(inp),
            admission_delay_us: 0,
            // skip_sleep: plan again as soon as this batch is written.
            next_loop_ms: if over_limit { 1 } else { 0 },
            lsn_limit: 0,
            admission: None,
            pace: None,
            room_help: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{base, with_age};
    use super::*;

    #[test]
    fn table_first_loops() {
        // (dirty pages, max_dirty_pct, io_capacity, expected pages on loop 1, next_loop_ms)
        // base: dirty % = 100 * dirty / 10 000.
        let cases = [
            (2_000, 90.0, 200, 0, 0),   // 20% < 90%: nothing until the 10 s batch
            (9_100, 90.0, 200, 200, 1), // 91%: io_capacity, all-out
            (9_000, 90.0, 200, 0, 0),   // exactly at the limit: not over
            (5_000, 40.0, 1_000, 1_000, 1),
        ];
        for (dirty, max, io, want, next) in cases {
            let mut i = base();
            i.dirty_pages = dirty;
            i.max_dirty_pages_pct = max;
            i.io_capacity = io;
            let plan = Fixed::default().plan(&i);
            assert_eq!(plan.flush_list_pages, want, "dirty {dirty} max {max}");
            assert_eq!(plan.next_loop_ms, next);
            assert_eq!(plan.admission_delay_us, 0);
        }
    }

    #[test]
    fn blind_to_checkpoint_age() {
        // Whatever the age, even past the sync point, the plan is the same.
        let want = Fixed::default().plan(&with_age(1 << 20));
        for age in [0u64, 30 << 20, 60 << 20, 63 << 20] {
            assert_eq!(Fixed::default().plan(&with_age(age)), want, "age {age}");
        }
    }

    #[test]
    fn ten_seconds_below_the_limit_trickle_pct_io_10() {
        let mut p = Fixed::default();
        let mut i = base();
        i.flushed_last = 100; // a busy disk
        let total: u64 = (0..30).map(|_| p.plan(&i).flush_list_pages).sum();
        assert_eq!(total, 3 * 20); // 3 batches of PCT_IO(10) = 20
    }
}
