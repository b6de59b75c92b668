//! lru: the LRU cleaner, a thread of its own that keeps free frames ready, so a thread that
//! reads a page finds a free frame instead of writing a dirty page itself (InnoDB's
//! single-page flush stall).
//!
//! Why a thread apart from the page cleaner: the page cleaner's loop is 50 ms to 1 s long and
//! spends most of it writing flush-list pages; a 4096-frame pool read at 25,000 pages/s turns
//! over six times a second, so LRU cleaning done once per loop comes too late (figures:
//! docs/measurements.md, "the LRU cleaner thread"). Percona Server 5.6
//! and 5.7 split LRU flushing the same way, into an "LRU manager" thread per instance with an
//! adaptive sleep (https://www.percona.com/doc/percona-server/5.7/performance/xtradb_performance_improvements_for_io-bound_highly-concurrent_workloads.html).
//!
//! Each pass, for every buffer-pool instance below the target, it scans up to
//! max(lru_scan_depth, target) frames from the LRU tail, moves clean unpinned pages to the free
//! list and writes the dirty ones in doublewrite batches, up to as many batches at once as
//! `Durability::write_concurrency` allows (at most `write_io_threads`, concurrency.rs),
//! freeing each batch's frames as soon as it is written. One writer at a time left the
//! cleaner bound by the doublewrite area's two fsyncs per batch (about 2,000 pages/s here),
//! and user threads wrote the rest themselves (docs/measurements.md, "The free-frame
//! producer").
//! The target (free frames per instance) comes from the flush policy's plan each cleaner loop.
//! Sleep adapts to how far the free lists are from it: none while below a quarter, halved
//! while below the target, doubled up to 100 ms while at or above it; and a reader that found
//! no free frame wakes it at once. Readers wait for it rather than write pages themselves
//! while it frees frames (buffer/fetch.rs, `take_free_frame`): user threads write for a free
//! frame only when it has freed none for a second, or does not run.

use super::{Durability, FLUSH_BATCH_PAGES};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const SLEEP_MIN: Duration = Duration::from_millis(1);
const SLEEP_MAX: Duration = Duration::from_millis(100);

/// The next sleep, from the free frames found at the start of a pass (summed over instances)
/// against the target summed over instances.
pub fn next_sleep(prev: Duration, free: u64, target: u64) -> Duration {
    if target == 0 {
        return SLEEP_MAX;
    }
    if free < target / 4 {
        Duration::ZERO
    } else if free < target {
        (prev / 2).max(SLEEP_MIN)
    } else {
        (prev * 2).clamp(SLEEP_MIN, SLEEP_MAX)
    }
}

pub fn run(dur: Arc<Durability>) {
    let _running = dur.lru_running_guard();
    let mut sleep = SLEEP_MAX;
    loop {
        let Some(woken) = dur.lru_sleep(sleep) else {
            return;
        };
        // At least one batch per instance (a reader that wakes the cleaner is waiting for
        // it), but never over a quarter of an instance's frames, like the plan's target.
        let instances = dur.pool.instance_count() as u64;
        let quarter = dur.pool.frame_count() as u64 / instances.max(1) / 4;
        let per_inst = dur
            .lru_free_target
            .load(Ordering::Relaxed)
            .max((FLUSH_BATCH_PAGES as u64).min(quarter));
        let free = dur.pool.status().pages_free;
        sleep = next_sleep(sleep, free, per_inst * instances);
        // A reader waiting for a frame gets a pass even when the free frames summed over the
        // instances reach the target: its own instance may have none (lru_clean fills each
        // instance to the target, and skips those at it).
        if per_inst == 0 || (free >= per_inst * instances && !woken) {
            continue;
        }
        let (depth, writers) = {
            let k = dur.knobs.read();
            (
                k.lru_scan_depth.max(per_inst) as usize,
                dur.write_concurrency.writers(k.adaptive_write_concurrency),
            )
        };
        let all = |_: usize| true;
        let write =
            |b: &[crate::types::FrameId]| dur.write_concurrency.timed(|| dur.pool.flush_batch(b));
        let written = match dur.pool.lru_clean(
            per_inst as usize,
            depth,
            &all,
            FLUSH_BATCH_PAGES,
            writers,
            &write,
        ) {
            Ok((_, w)) => w as u64,
            Err(e) => {
                dur.poison(&e);
                tracing::error!("LRU cleaner stops: {e}");
                return;
            }
        };
        dur.counters
            .pages_flushed_lru
            .fetch_add(written, Ordering::Relaxed);
        if sleep.is_zero() {
            // below a quarter of the target: go again at once, but let others run
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_adapts_to_the_free_frames() {
        let ms = Duration::from_millis;
        // (previous sleep, free, target, next)
        for (prev, free, target, want) in [
            (ms(40), 0, 1000, Duration::ZERO),
            (ms(40), 249, 1000, Duration::ZERO),
            (ms(40), 250, 1000, ms(20)),
            (ms(1), 999, 1000, ms(1)),
            (Duration::ZERO, 999, 1000, ms(1)),
            (ms(40), 1000, 1000, ms(80)),
            (ms(80), 5000, 1000, ms(100)),
            (Duration::ZERO, 5000, 1000, ms(1)),
            (ms(5), 0, 0, ms(100)),
        ] {
            assert_eq!(
                next_sleep(prev, free, target),
                want,
                "{prev:?} {free} {target}"
            );
        }
    }
}
