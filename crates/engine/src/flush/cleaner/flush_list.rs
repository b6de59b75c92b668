//! flush_list: the page cleaner's writes from the flush lists, the `write` step's work: the
//! plan's pages, oldest first, by `page_cleaners` threads of `write_io_threads` writers in
//! all, with checkpoints while a long plan is being written.

use crate::error::Result;
use crate::flush::policy::FlushPlan;
use crate::flush::{Durability, FLUSH_BATCH_PAGES};
use crate::options::Options;
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How often the cleaner writes a checkpoint while it is still writing a long plan. A loop's
/// plan can take most of a second to write; a log the workload fills in a third of a second
/// (TPC-C at 23 MB/s of redo into 8 MiB) reached the sync point before the checkpoint at the
/// end of the loop could release what the loop had already written.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(20);

/// Writes what the plan asks from the flush lists (oldest first, with neighbours), spread over
/// `page_cleaners` threads by buffer-pool instance, each share written by
/// `writers / page_cleaners` (at least one) concurrent writers — `writers` is what
/// `Durability::write_concurrency` allows now, at most `write_io_threads` — advancing the
/// checkpoint as it goes. A writer takes the oldest pages nobody is writing and prepares its
/// batch (marks the pages `io_busy`, copies them) under its share's lock, then writes it outside
/// the lock, through whichever doublewrite segment is free: batches are taken in flush-list
/// order, are disjoint, and up to `writers` are in flight at once.
/// LRU cleaning is the LRU cleaner's (lru.rs).
pub(super) fn carry_out(dur: &Durability, plan: &FlushPlan, knobs: &Options) -> Result<u64> {
    let threads = (knobs.page_cleaners as usize).clamp(1, dur.pool.instance_count());
    if plan.flush_list_pages == 0 {
        return Ok(0);
    }
    let writers = dur
        .write_concurrency
        .writers(knobs.adaptive_write_concurrency)
        .div_ceil(threads)
        .max(1);
    let last_cp = Mutex::new(Instant::now());
    let work = |idx: usize| -> Result<u64> {
        let pick = move |k: usize| k % threads == idx;
        // Pages of this share not yet taken by a writer.
        let left = Mutex::new(plan.flush_list_pages.div_ceil(threads as u64) as usize);
        let writer = || -> Result<u64> {
            let mut flushed = 0u64;
            loop {
                let batch = {
                    let mut left = left.lock();
                    if *left == 0 {
                        break;
                    }
                    let fids = dur.pool.oldest_dirty_in(
                        (*left).min(FLUSH_BATCH_PAGES),
                        crate::types::Lsn(plan.lsn_limit),
                        &pick,
                    );
                    if fids.is_empty() {
                        *left = 0;
                        break;
                    }
                    let fids = dur.pool.with_neighbors(&fids, knobs.flush_neighbors);
                    let batch = dur
                        .pool
                        .prepare_batch(&fids)
                        .inspect_err(|e| dur.poison(e))?;
                    if batch.is_empty() {
                        *left = 0;
                        break;
                    }
                    *left = left.saturating_sub(batch.len());
                    batch
                };
                flushed += dur
                    .write_concurrency
                    .timed(|| batch.write())
                    .inspect_err(|e| dur.poison(e))? as u64;
                if *left.lock() > 0 {
                    let mut last = last_cp.lock();
                    if last.elapsed() >= CHECKPOINT_EVERY {
                        *last = Instant::now();
                        drop(last);
                        dur.checkpoint()?;
                    }
                }
            }
            Ok(flushed)
        };
        if writers == 1 {
            return writer();
        }
        join_sum(writers, &writer)
    };
    if threads == 1 {
        return work(0);
    }
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|i| s.spawn(move || work(i))).collect();
        let mut total = 0;
        for h in hs {
            total += h.join().unwrap_or(Ok(0))?;
        }
        Ok(total)
    })
}

/// Runs `n` copies of `f` on scoped threads; the sum of their results, or the first error.
fn join_sum(n: usize, f: &(dyn Fn() -> Result<u64> + Sync)) -> Result<u64> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n).map(|_| s.spawn(f)).collect();
        let mut total = 0;
        for h in hs {
            total += h.join().unwrap_or(Ok(0))?;
        }
        Ok(total)
    })
}
