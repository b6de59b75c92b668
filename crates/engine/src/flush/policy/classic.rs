//! classic: what InnoDB's 5.x master thread did around whichever flushing method was chosen,
//! shared by `fixed`, `innodb55`, `estimate` and `keep_average` so each shows its method in
//! the setting it really ran in.
//!
//! - The 10-second batch (InnoDB plugin 1.0 / MySQL 5.5 `storage/innobase/srv/srv0srv.c`,
//!   `srv_master_thread`, the code after the ten 1-second iterations; the same in Percona
//!   Server 5.5): if the I/Os of the past ten seconds were under 200% of io_capacity, flush
//!   PCT_IO(100); then, always, flush PCT_IO(100) if more than 70% of the pool is dirty, else
//!   PCT_IO(10). Here "ten seconds" is ten seconds of loop time, and the I/Os counted are page
//!   reads and page writes (the log's own I/Os are not among our inputs).
//! - The free margin (`buf/buf0flu.c`, `buf_flush_LRU_recommendation` and
//!   `buf_flush_free_margin`): when fewer than 5 + min(64, pool/32) frames are replaceable,
//!   flush from the LRU tail up to that margin plus a quarter of it plus 100. Only free frames
//!   count here (5.5 also counted clean pages near the LRU tail).
//!
//! Pure, like every policy: state is the loop time and I/Os since the last 10-second batch.

use super::{loop_s, FlushInputs};

/// io_capacity * pct / 100, InnoDB's PCT_IO.
pub(super) fn pct_io(inp: &FlushInputs, pct: u64) -> u64 {
    inp.io_capacity.saturating_mul(pct) / 100
}

/// The master thread's once-per-10-seconds flush.
#[derive(Clone, Debug, Default)]
pub(super) struct TenSecondBatch {
    since_s: f64,
    ios: f64,
}

impl TenSecondBatch {
    const PERIOD_S: f64 = 10.0;

    /// Pages to add to this loop: 0 on most loops, the 10-second batch once per 10 s.
    pub(super) fn step(&mut self, inp: &FlushInputs) -> u64 {
        let dt = loop_s(inp);
        self.since_s += dt;
        let writes = inp.flushed_last + inp.lru_flushed_last + inp.foreground_flushed_last;
        self.ios += inp.reads_per_s.max(0.0) * dt + writes as f64;
        if self.since_s < Self::PERIOD_S {
            return 0;
        }
        let idle_disk = self.ios < pct_io(inp, 200) as f64;
        self.since_s = 0.0;
        self.ios = 0.0;
        let spare = if idle_disk { pct_io(inp, 100) } else { 0 };
        let by_dirty = if inp.dirty_pct() > 70.0 {
            pct_io(inp, 100)
        } else {
            pct_io(inp, 10)
        };
        spare + by_dirty
    }
}

/// LRU pages to free this loop, after 5.5's buf_flush_LRU_recommendation.
pub(super) fn free_margin_lru_pages(inp: &FlushInputs) -> u64 {
    let read_ahead_area = (inp.total_pages / 32).min(64);
    let margin = 5 + read_ahead_area;
    let extra = margin / 4 + 100;
    if inp.free_pages >= margin {
        0
    } else {
        margin + extra - inp.free_pages
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::base;
    use super::*;

    #[test]
    fn ten_second_batch_fires_once_per_ten_seconds() {
        // io_capacity 200: busy disk, 20% dirty -> PCT_IO(10) = 20 at t = 10 s and 20 s.
        let mut t = TenSecondBatch::default();
        let mut i = base();
        i.flushed_last = 100; // 1000 I/Os in 10 s > PCT_IO(200) = 400: not idle
        let got: Vec<u64> = (0..20).map(|_| t.step(&i)).collect();
        let mut want = vec![0u64; 20];
        want[9] = 20;
        want[19] = 20;
        assert_eq!(got, want);
    }

    #[test]
    fn ten_second_batch_table() {
        // (dirty pages, I/Os per loop, expected batch at the 10th loop)
        let cases = [
            (2_000, 100, 20),  // busy, 20% dirty: PCT_IO(10)
            (2_000, 0, 220),   // idle disk: PCT_IO(100) + PCT_IO(10)
            (7_100, 100, 200), // 71% dirty: PCT_IO(100)
            (7_100, 0, 400),   // both
            (2_000, 39, 220),  // 390 < 400: still idle
            (2_000, 40, 20),   // 400: not idle
        ];
        for (dirty, ios, want) in cases {
            let mut i = base();
            i.dirty_pages = dirty;
            i.flushed_last = ios;
            let mut t = TenSecondBatch::default();
            let got: u64 = (0..10).map(|_| t.step(&i)).sum();
            assert_eq!(got, want, "dirty {dirty} ios {ios}");
        }
    }

    #[test]
    fn free_margin_table() {
        // pool 10 000 frames: margin = 5 + 64 = 69, extra = 17 + 100 = 117.
        for (free, want) in [(0, 186), (68, 118), (69, 0), (999, 0)] {
            let mut i = base();
            i.free_pages = free;
            assert_eq!(free_margin_lru_pages(&i), want, "free {free}");
        }
        // a tiny pool: 320 frames -> area 10, margin 15, extra 103.
        let mut i = base();
        i.total_pages = 320;
        i.free_pages = 0;
        assert_eq!(free_margin_lru_pages(&i), 118);
    }
}
