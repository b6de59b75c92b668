//! keep_average: Percona XtraDB's adaptive checkpoint, method `keep_average` (Percona Server
//! 5.1 `innodb_adaptive_checkpoint=keep_average`; 5.5 `innodb_adaptive_flushing_method=
//! keep_average`), written by Yasufumi Kinoshita for flash devices. Source: Percona Server 5.5
//! `storage/innobase/srv/srv0srv.c`, `srv_master_thread`, the branch
//! `srv_adaptive_flushing_method == 2`; introduced in Vadim Tkachenko's "MySQL 5.5.8 and Percona
//! Server: being adaptive" (Percona blog, December 2010), which notes it wants
//! flush_neighbors off so that pages flushed can be counted exactly.
//!
//! It runs ten times a second (`next_loop_ms` = 100) and keeps the flushing even by asking, each
//! loop, for the share of the dirty pages that the log's progress since the previous loop
//! represents of the async point:
//! - if dirty % > max_dirty_pages_pct: PCT_IO(100), and the method restarts;
//! - on the first loop (after a start or a restart): nothing, only remember the LSN;
//! - else n = n_dirty * Δlsn / async_point, minus the dirty pages others cleaned since the
//!   previous loop (LRU and foreground flushes: XtraDB counted the pages that left the flush
//!   list and subtracted its own batch), plus 1 if positive; flushing stops at pages younger
//!   than oldest + Δlsn (`lsn_limit`; the checkpoint LSN stands in for the oldest modification).
//!
//! Not capped by io_capacity; blind to the checkpoint age itself (only its growth matters), so
//! a rate that falls behind is never caught up except by the async point. Plus the master
//! thread's 10-second batch and free margin (`classic`).

use super::classic::{free_margin_lru_pages, pct_io, TenSecondBatch};
use super::{FlushInputs, FlushPlan, Policy};

/// XtraDB's inner loop: ten per second.
const LOOP_MS: u64 = 100;

#[derive(Clone, Debug, Default)]
pub struct KeepAverage {
    /// LSN at the previous loop; `None` when (re)starting.
    lsn_old: Option<u64>,
    ten: TenSecondBatch,
}

/// Pages for one loop and the LSN limit, given the LSN progress since the previous loop.
fn keep_average_pages(inp: &FlushInputs, lsn_delta: u64) -> (u64, u64) {
    let need = (inp.dirty_pages as u128 * lsn_delta as u128 / inp.async_point.max(1) as u128)
        .min(i64::MAX as u128) as i64;
    let others = (inp.lru_flushed_last + inp.foreground_flushed_last).min(i64::MAX as u64) as i64;
    let n = need - others;
    if n > 0 {
        (n as u64 + 1, inp.checkpoint_lsn.saturating_add(lsn_delta))
    } else {
        (0, 0)
    }
}

impl Policy for KeepAverage {
    fn name(&self) -> &'static str {
        "keep_average"
    }

    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan {
        let (pages, lsn_limit) = if inp.dirty_pct() > inp.max_dirty_pages_pct {
            self.lsn_old = None;
            (pct_io(inp, 100), 0)
        } else {
            let prev = self.lsn_old.replace(inp.lsn);
            match prev {
                Some(old) => keep_average_pages(inp, inp.lsn.saturating_sub(old)),
                None => (0, 0),
            }
        };
        let batch = self.ten.step(inp);
        FlushPlan {
            flush_list_pages: pages + batch,
            lru_pages: free_margin_lru_pages(inp),
            next_loop_ms: LOOP_MS,
            lsn_limit: if batch > 0 { 0 } else { lsn_limit },
            ..FlushPlan::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::base;
    use super::*;
    use proptest::prelude::*;

    /// Two loops 100 ms apart, the log advancing `delta` bytes between them; the second plan.
    fn second(mut i: FlushInputs, delta: u64) -> FlushPlan {
        i.elapsed_s = 0.1;
        let mut p = KeepAverage::default();
        p.plan(&i);
        i.lsn += delta;
        i.checkpoint_lsn += delta;
        p.plan(&i)
    }

    #[test]
    fn table() {
        // async point = 7/8 of 64 MiB = 58 720 256 B; 2000 dirty.
        // (Δlsn, lru, foreground, want)
        let cases = [
            (400_000, 0, 0, 14),    // 2000*4e5/58720256 = 13.6 -> 13, +1
            (4_000_000, 0, 0, 137), // 136.2 -> 136, +1
            (4_000_000, 50, 0, 87), // others cleaned 50
            (4_000_000, 50, 36, 51),
            (4_000_000, 136, 0, 0), // others did it all
            (0, 0, 0, 0),           // log did not move
        ];
        for (delta, lru, fg, want) in cases {
            let mut i = base();
            i.lru_flushed_last = lru;
            i.foreground_flushed_last = fg;
            let plan = second(i, delta);
            assert_eq!(
                plan.flush_list_pages, want,
                "delta {delta} lru {lru} fg {fg}"
            );
            assert_eq!(plan.next_loop_ms, 100);
            if want > 0 {
                assert_eq!(plan.lsn_limit, base().checkpoint_lsn + 2 * delta);
            }
        }
    }

    #[test]
    fn first_loop_and_restart_after_max_dirty() {
        let mut i = base();
        i.elapsed_s = 0.1;
        let mut p = KeepAverage::default();
        assert_eq!(p.plan(&i).flush_list_pages, 0);
        i.max_dirty_pages_pct = 10.0; // 20% dirty: over
        assert_eq!(p.plan(&i).flush_list_pages, 200);
        i.max_dirty_pages_pct = 90.0;
        i.lsn += 4_000_000;
        assert_eq!(p.plan(&i).flush_list_pages, 0, "restarted: remembers only");
        i.lsn += 4_000_000;
        assert_eq!(p.plan(&i).flush_list_pages, 137);
    }

    proptest! {
        #[test]
        fn linear_in_lsn_progress(delta in 0u64..50_000_000, k in 1u64..8) {
            let a = second(base(), delta).flush_list_pages;
            let b = second(base(), delta * k).flush_list_pages;
            prop_assert!(a <= b);
            // (need + 1) scales by k, up to the floor in each
            prop_assert!(b <= k * a.max(1) + k);
        }
    }
}
