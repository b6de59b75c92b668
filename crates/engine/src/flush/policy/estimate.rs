//! estimate: Percona XtraDB's adaptive checkpoint, method `estimate` (Percona Server 5.1
//! `innodb_adaptive_checkpoint=estimate`; 5.5 `innodb_adaptive_flushing_method=estimate`).
//! Source: Percona Server 5.5 `storage/innobase/srv/srv0srv.c`, `srv_master_thread`, the
//! branch `srv_adaptive_flushing_method == 1`; described by Yasufumi Kinoshita, "Which
//! adaptive should we use?" (https://www.percona.com/blog/2009/09/15/which-adaptive-should-we-use/):
//! blocks to flush are estimated from how many blocks are dirty, how fast the log progresses
//! and the average modified age of the dirty blocks.
//!
//! Each 1-second loop, with age = checkpoint age and max = max_checkpoint_age (our log
//! capacity, whose 7/8 is the async point):
//! - if dirty % > max_dirty_pages_pct: PCT_IO(100) (the master thread checks that first);
//! - else if age > 7/8 max: nothing — the async point's forced flushing has taken over;
//! - else if age > max / 4: bpl = n_dirty * Δlsn / (max - mean_age), where Δlsn is the redo
//!   since the previous loop and mean_age the mean of (lsn - oldest_modification) over the
//!   dirty pages (XtraDB summed max - age over the flush list: n * (max - mean_age)); times 7/8
//!   without doublewrite ("flush is faster"); flushing stops at pages younger than
//!   oldest + Δlsn (`lsn_limit`, with the checkpoint LSN standing in for the oldest
//!   modification);
//! - else nothing (the blog's table says 50%; the 5.5 code tests max / 4, which we follow).
//!
//! The rate is n_dirty / (time for the average dirty page to reach max at the current redo
//! rate): a page-age estimate rather than a checkpoint set point, and not capped by
//! io_capacity. Below max / 4 it flushes only the master thread's 10-second batch.

use super::classic::{free_margin_lru_pages, pct_io, TenSecondBatch};
use super::{loop_s, FlushInputs, FlushPlan, Policy};

#[derive(Clone, Debug, Default)]
pub struct Estimate {
    lsn_old: Option<u64>,
    ten: TenSecondBatch,
}

/// bpl and the LSN limit for one loop in the estimate band; (0, 0) outside it.
fn blocks_per_loop(inp: &FlushInputs, lsn_delta: u64) -> (u64, u64) {
    let age = inp.checkpoint_age();
    let max = inp.log_capacity;
    if inp.dirty_pages == 0 || age > max - max / 8 || age <= max / 4 {
        return (0, 0);
    }
    let mean_age = if inp.dirty_age_mean > 0.0 {
        inp.dirty_age_mean
    } else {
        age as f64 / 2.0
    };
    let level = (max as f64 - mean_age).max(1.0);
    let mut bpl = (inp.dirty_pages as f64 * lsn_delta as f64 / level) as u64;
    if !inp.doublewrite {
        bpl = bpl * 7 / 8;
    }
    if bpl == 0 {
        return (0, 0);
    }
    (bpl, inp.checkpoint_lsn.saturating_add(lsn_delta))
}

impl Policy for Estimate {
    fn name(&self) -> &'static str {
        "estimate"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        let lsn_delta = match self.lsn_old {
            Some(old) => inp.lsn.saturating_sub(old),
            None => (inp.redo_rate_last.max(0.0) * loop_s(inp)) as u64,
        };
        self.lsn_old = Some(inp.lsn);
        let (pages, lsn_limit) = if inp.dirty_pct() > inp.max_dirty_pages_pct {
            (pct_io(inp, 100), 0)
        } else {
            blocks_per_loop(inp, lsn_delta)
        };
        let batch = self.ten.step(inp);
        FlushPlan {
            flush_list_pages: pages + batch,
            lru_pages: free_margin_lru_pages(inp),
            // the 10 s batch has no LSN limit
            lsn_limit: if batch > 0 { 0 } else { lsn_limit },
            ..FlushPlan::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::with_age;
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn table_first_loop() {
        // log 64 MiB, 2000 dirty, first loop: Δlsn = redo_rate_last * 1 s = 4e6.
        // (age, mean age, doublewrite, dirty_pct_max, want pages)
        let cases = [
            (16 * MIB, 0.0, true, 90.0, 0),    // exactly max/4: not above it
            (32 * MIB, 0.0, true, 90.0, 158),  // 2000*4e6/(64Mi-16Mi) = 158.9
            (32 * MIB, 0.0, false, 90.0, 138), // 158 * 7 / 8
            (32 * MIB, 8.0 * MIB as f64, true, 90.0, 136), // /(64Mi-8Mi) = 136.2
            (56 * MIB, 0.0, true, 90.0, 211),  // at 7/8, still in: /(64Mi-28Mi) = 211.9
            (57 * MIB, 0.0, true, 90.0, 0),    // past 7/8 of 64 MiB = 56 MiB
            (8 * MIB, 0.0, true, 10.0, 200),   // 20% dirty > 10%: PCT_IO(100)
        ];
        for (age, mean, dw, max_dirty, want) in cases {
            let mut i = with_age(age);
            i.dirty_age_mean = mean;
            i.doublewrite = dw;
            i.max_dirty_pages_pct = max_dirty;
            let plan = Estimate::default().plan(&i);
            assert_eq!(plan.flush_list_pages, want, "age {age} mean {mean} dw {dw}");
        }
    }

    #[test]
    fn uses_lsn_progress_since_the_previous_loop() {
        let mut p = Estimate::default();
        let mut i = with_age(32 * MIB);
        p.plan(&i);
        i.lsn += 8_000_000;
        i.checkpoint_lsn += 8_000_000;
        let plan = p.plan(&i);
        // 2000 * 8e6 / 48 MiB = 317.9
        assert_eq!(plan.flush_list_pages, 317);
        assert_eq!(plan.lsn_limit, i.checkpoint_lsn + 8_000_000);
        // no progress: nothing to flush
        assert_eq!(p.plan(&i).flush_list_pages, 0);
    }

    proptest! {
        #[test]
        fn monotonic_in_age_within_the_band(a in 17 * MIB..56 * MIB, b in 17 * MIB..56 * MIB) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let p_lo = Estimate::default().plan(&with_age(lo)).flush_list_pages;
            let p_hi = Estimate::default().plan(&with_age(hi)).flush_list_pages;
            prop_assert!(p_lo <= p_hi);
            prop_assert!(p_lo > 0);
        }

        #[test]
        fn silent_below_a_quarter_and_past_seven_eighths(
            age in prop_oneof![0..=16 * MIB, 56 * MIB + 1..64 * MIB]
        ) {
            prop_assert_eq!(Estimate::default().plan(&with_age(age)).flush_list_pages, 0);
        }
    }
}
