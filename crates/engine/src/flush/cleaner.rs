//! cleaner: the background flusher. About once a second it writes back io_capacity of the
//! oldest dirty pages (io_capacity_max, in a tighter loop, past the async point), then writes a
//! checkpoint. This is the simple flusher the durable write path needs; flush policies
//! (adaptive rates, LRU cleaning, the `steady` controller) replace the rate decision only.

use super::{Durability, FLUSH_BATCH_PAGES};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs until `dur.stop()`.
pub fn run(dur: Arc<Durability>) {
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    loop {
        let (asyncp, _) = dur.points();
        let pressed = dur.checkpoint_age() > asyncp;
        let wait = if pressed {
            Duration::from_millis(10)
        } else {
            next_tick.saturating_duration_since(Instant::now())
        };
        if !dur.sleep(wait) {
            return;
        }
        let (io_cap, io_max) = {
            let c = dur.cfg.read();
            (c.io_capacity, c.io_capacity_max)
        };
        let pressed = dur.checkpoint_age() > asyncp;
        let budget = if pressed {
            dur.counters
                .async_point_seconds
                .fetch_add(1, Ordering::Relaxed);
            // all-out: a slice of io_capacity_max per 10 ms pass
            (io_max / 100).max(FLUSH_BATCH_PAGES as u64)
        } else if Instant::now() >= next_tick {
            next_tick = Instant::now() + Duration::from_secs(1);
            io_cap
        } else {
            0
        };
        let mut left = budget as usize;
        while left > 0 {
            match dur.flush_oldest(left.min(FLUSH_BATCH_PAGES)) {
                Ok(0) => break,
                Ok(n) => {
                    dur.counters
                        .pages_flushed_background
                        .fetch_add(n as u64, Ordering::Relaxed);
                    left = left.saturating_sub(n);
                }
                Err(e) => {
                    tracing::error!("background flush failed: {e}");
                    return;
                }
            }
        }
        if let Err(e) = dur.checkpoint() {
            tracing::error!("checkpoint failed: {e}");
            return;
        }
    }
}
