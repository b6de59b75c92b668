//! concurrency: how many page-write batches the page cleaner and the LRU cleaner keep in flight
//! at once — as few as keep the device busy, up to `write_io_threads`.
//!
//! Why: a commit's log write and fsync go to the same device as the page writes, and wait
//! behind every page write queued there. More batches in flight than the device serves at once
//! add no throughput, only queue, and each commit waits it out while holding its key locks,
//! so the transactions queued on hot rows wait it again: on a device that serves one batch at
//! a time, four in flight wrote no more pages than two but made every second's commit rate
//! swing (docs/measurements.md, "Write concurrency"). Nor can the number be fixed low: on a
//! device that serves batches in parallel (an SSD whose fsyncs overlap) the doublewrite
//! area's two fsyncs per batch bound a single writer (about 2,000 pages/s on this machine's
//! virtual disk).
//!
//! The law is TCP Vegas' estimate of the queue (Brakmo & Peterson, "TCP Vegas: End to End
//! Congestion Avoidance on a Global Internet", IEEE JSAC 1995), with BBR's periodic probe of
//! the base latency (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue
//! 2016). Over a window of [`WINDOW`]:
//! - L, the write time per page of the window's batches, and n, the batches in flight on
//!   average (each batch weighted by its pages), both cleaners' together;
//! - B, the base: L measured with one batch in flight (n ≤ [`ALONE`]), else the least L seen
//!   since;
//! - q = n × (1 − B / L), the batches waiting in the device's queue rather than being served
//!   (n − q = n × B / L is the device's rate in single-batch units: the batches it serves at
//!   once);
//! - the limit moves when the last two windows run at the same limit agree, so one window's
//!   noise does not move it: both above [`QUEUE_HIGH`], one writer fewer; both below
//!   [`QUEUE_LOW`] while the writers were all busy, one more (up to `write_io_threads`);
//!   else unchanged;
//! - a limit that fell does not rise back for [`PROBE_EVERY`] (TCP's slow-start threshold,
//!   kept for a while): the writer it dropped had queued more than one batch, and on a device
//!   whose queue wavers about the bound a limit free to rise again at once flapped between
//!   two and three every few windows, swinging the commits' fsync time with it;
//! - a base older than [`PROBE_EVERY`] is measured again: one window in which batches run one
//!   at a time, both cleaners' included (a base measured with several in flight already holds
//!   their queue, and the limit would creep up; one measured never would go stale, and a
//!   stale low base holds the limit down). The probe costs at most one window a period at one
//!   writer.
//!
//! Why at most one batch queued: one waiting batch is enough to keep the device busy (it is
//! ready when the batch being served ends); every further one adds no pages per second, only
//! waiting — for the page writers and for every commit's log fsync queued behind it. On a
//! device limited by bandwidth this is what the estimate sees: from one to two to three
//! writers the pages per second grew 9% and then 2%, q went from 0 to about 0.7 to 1.2-1.5,
//! and the commits' log fsyncs went from about 5 to 6.5 to 8.5 ms (docs/measurements.md,
//! "Write concurrency: one batch queued"). The fsyncs are not an input of their own: they
//! wait in the same queue the estimate measures.
//!
//! With `adaptive_write_concurrency` off the cleaners always use `write_io_threads` writers.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The window over which latency is averaged before the limit may move.
pub const WINDOW: Duration = Duration::from_millis(200);
/// A window with at most this many batches in flight on average measures the base.
pub const ALONE: f64 = 1.2;
/// Batches queued at the device above which the limit falls: more than the one that keeps
/// the device busy.
pub const QUEUE_HIGH: f64 = 1.0;
/// Batches queued below which the limit may rise.
pub const QUEUE_LOW: f64 = 0.5;
/// How old the base may grow before a window at one writer measures it again.
pub const PROBE_EVERY: Duration = Duration::from_secs(10);

/// What the current window has seen, and the controller's state.
#[derive(Debug)]
struct State {
    start: Instant,
    /// Seconds of batch writes, pages written, and the in-flight count summed per page.
    busy_s: f64,
    pages: u64,
    in_flight_pages: f64,
    /// Seconds per page with one batch in flight (0: not measured yet), and when measured.
    base: f64,
    base_at: Instant,
    /// A probe is running: the limit it interrupted.
    probing: Option<usize>,
    /// The previous window's queue estimate, if it ran at the current limit.
    last_queue: Option<f64>,
    /// The most writers allowed since one more proved too many (the limit fell from above
    /// it), and when that was: it holds for [`PROBE_EVERY`].
    ceiling: Option<(usize, Instant)>,
}

/// The write concurrency shared by the page cleaner and the LRU cleaner (`Durability`).
#[derive(Debug)]
pub struct WriteConcurrency {
    /// Writers the cleaners may use now.
    limit: AtomicUsize,
    /// `write_io_threads` (fixed at open): the most.
    max: usize,
    in_flight: AtomicUsize,
    /// Set while a probe runs: every batch then holds `alone` while it writes.
    probing: AtomicBool,
    alone: Mutex<()>,
    state: Mutex<State>,
}

impl WriteConcurrency {
    /// At most `max` writers (`write_io_threads`). Starts at one: the limit rises in a few
    /// windows where the device serves batches in parallel, and never queues what it does not
    /// have to.
    pub fn new(max: usize, now: Instant) -> Self {
        WriteConcurrency {
            limit: AtomicUsize::new(1),
            max: max.max(1),
            in_flight: AtomicUsize::new(0),
            probing: AtomicBool::new(false),
            alone: Mutex::new(()),
            state: Mutex::new(State {
                start: now,
                busy_s: 0.0,
                pages: 0,
                in_flight_pages: 0.0,
                base: 0.0,
                base_at: now,
                probing: None,
                last_queue: None,
                ceiling: None,
            }),
        }
    }

    /// The writers a cleaner uses for its next pass: `write_io_threads` when not `adaptive`
    /// (`adaptive_write_concurrency`), else the controller's limit.
    pub fn writers(&self, adaptive: bool) -> usize {
        if adaptive {
            self.limit.load(Ordering::Relaxed).clamp(1, self.max)
        } else {
            self.max
        }
    }

    /// The controller's limit now (what [`Self::writers`] gives when adaptive).
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Runs one batch write `write` (returning the pages it wrote), timing it and counting it
    /// in flight meanwhile. While a probe runs, batches (the page cleaner's and the LRU
    /// cleaner's alike) write one at a time.
    pub fn timed<E>(&self, write: impl FnOnce() -> Result<usize, E>) -> Result<usize, E> {
        let _alone = self
            .probing
            .load(Ordering::Acquire)
            .then(|| self.alone.lock());
        let n = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        let t = Instant::now();
        let r = write();
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if let Ok(pages) = &r {
            self.record(*pages, t.elapsed(), n, Instant::now());
        }
        r
    }

    /// Records a batch of `pages` written in `took` with `n` batches in flight when it
    /// started (itself included); at the end of a window, moves the limit.
    pub fn record(&self, pages: usize, took: Duration, n: usize, now: Instant) {
        if pages == 0 {
            return;
        }
        let mut s = self.state.lock();
        s.busy_s += took.as_secs_f64();
        s.pages += pages as u64;
        s.in_flight_pages += (n * pages) as f64;
        if now.saturating_duration_since(s.start) < WINDOW {
            return;
        }
        let latency = s.busy_s / s.pages as f64;
        let n = s.in_flight_pages / s.pages as f64;
        s.start = now;
        s.busy_s = 0.0;
        s.pages = 0;
        s.in_flight_pages = 0.0;
        let limit = self.limit.load(Ordering::Relaxed);
        let base = s.base;
        let next = step(&mut s, latency, n, limit, self.max, now);
        tracing::debug!(
            latency_us = latency * 1e6,
            in_flight = n,
            base_us = base * 1e6,
            limit,
            next,
            probing = s.probing.is_some(),
            "write concurrency window"
        );
        self.probing.store(s.probing.is_some(), Ordering::Release);
        self.limit.store(next, Ordering::Relaxed);
    }
}

/// One window's decision: the new limit, from the window's latency per page and mean batches
/// in flight, the limit it ran under and `max`.
fn step(s: &mut State, latency: f64, n: f64, limit: usize, max: usize, now: Instant) -> usize {
    if !(latency.is_finite() && latency > 0.0) {
        return limit;
    }
    if n <= ALONE {
        s.base = latency;
        s.base_at = now;
        if let Some(was) = s.probing.take() {
            // the windows before the probe ran under `was`: decide on fresh ones
            s.last_queue = None;
            return was.clamp(1, max);
        }
    } else if s.base == 0.0 || latency < s.base {
        s.base = latency;
        s.base_at = now;
    }
    if s.probing.is_some() {
        // the probe's window still had the earlier batches in flight: keep probing
        return 1;
    }
    if now.saturating_duration_since(s.base_at) >= PROBE_EVERY {
        s.probing = Some(limit);
        return 1;
    }
    let mut next = limit;
    if s.base > 0.0 {
        let queued = n * (1.0 - s.base / latency).max(0.0);
        let Some(last) = s.last_queue.replace(queued) else {
            return limit;
        };
        if s.ceiling
            .is_some_and(|(_, at)| now.saturating_duration_since(at) >= PROBE_EVERY)
        {
            s.ceiling = None;
        }
        let ceiling = s.ceiling.map_or(max, |(c, _)| c);
        if queued.min(last) > QUEUE_HIGH && limit > 1 {
            next = limit - 1;
            s.ceiling = Some((next, now));
        } else if queued.max(last) < QUEUE_LOW && n > limit as f64 - 0.5 && limit < ceiling {
            next = limit + 1;
        }
    }
    if next != limit {
        s.last_queue = None;
    }
    next.clamp(1, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Runs `windows` windows against a device model: `latency(n)` is the time per page with n
    /// batches in flight; the writers use all of the limit. Returns the limit after each.
    fn drive(c: &WriteConcurrency, windows: usize, latency: impl Fn(f64) -> f64) -> Vec<usize> {
        let mut now = Instant::now();
        let mut out = Vec::new();
        for _ in 0..windows {
            let n = c.writers(true);
            let per_page = latency(n as f64);
            let took = Duration::from_secs_f64(per_page * 64.0);
            // n batches inside the window, then one that closes it
            for i in 0..n {
                c.record(64, took, n, now + WINDOW * i as u32 / (2 * n as u32));
            }
            now += WINDOW;
            c.record(64, took, n, now);
            out.push(c.limit());
        }
        out
    }

    #[test]
    fn a_device_that_serves_batches_in_parallel_gets_every_writer() {
        // latency per page does not grow with the batches in flight: one writer more every
        // second window (a window to measure the new limit, one to confirm it)
        let c = WriteConcurrency::new(8, Instant::now());
        let limits = drive(&c, 16, |_| 20e-6);
        assert_eq!(
            limits[..14],
            [1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8],
            "{limits:?}"
        );
        assert!(limits[13..].iter().all(|&l| l == 8), "{limits:?}");
    }

    #[test]
    fn a_device_limited_by_bandwidth_keeps_one_batch_queued() {
        // each batch in flight waits for the others, save the fifth of its time spent off the
        // device: q(2) = 0.89 holds, q(3) = 1.85 falls
        let latency = |n: f64| 30e-6 * (0.2 + 0.8 * n);
        let c = WriteConcurrency::new(8, Instant::now());
        c.limit.store(8, Ordering::Relaxed);
        // the base is measured at one writer first
        c.record(
            64,
            64 * Duration::from_micros(30),
            1,
            Instant::now() + WINDOW,
        );
        let limits = drive(&c, 16, latency);
        assert_eq!(limits.last(), Some(&2), "{limits:?}");
        assert!(limits.windows(2).all(|w| w[1] <= w[0]), "{limits:?}");
        // and from one writer it rises to two and stays
        let c = WriteConcurrency::new(8, Instant::now());
        let limits = drive(&c, 12, latency);
        assert!(limits[3..].iter().all(|&l| l == 2), "{limits:?}");
    }

    #[test]
    fn one_noisy_window_does_not_move_the_limit() {
        let t0 = Instant::now();
        let c = WriteConcurrency::new(4, t0);
        c.limit.store(2, Ordering::Relaxed);
        c.state.lock().base = 200e-6;
        let us = Duration::from_micros(1);
        let window = |w: u32, latency_us: u32| {
            c.record(64, 64 * latency_us * us, 2, t0 + w * WINDOW);
            c.limit()
        };
        // two writers at q = 2 (1 - 200/330) = 0.79: between the bounds
        assert_eq!(window(1, 330), 2);
        assert_eq!(window(2, 330), 2);
        // q = 2 (1 - 200/1000) = 1.6 once, between usual windows: nothing moves
        assert_eq!(window(3, 1000), 2);
        assert_eq!(window(4, 330), 2);
        // q = 2 (1 - 200/210) = 0.1 once: nor does it rise
        assert_eq!(window(5, 210), 2);
        assert_eq!(window(6, 330), 2);
        // 1.6 twice running: one writer fewer
        assert_eq!(window(7, 1000), 2);
        assert_eq!(window(8, 1000), 1);
    }

    #[test]
    fn a_limit_that_fell_does_not_rise_back_for_a_probe_period() {
        let t0 = Instant::now();
        let c = WriteConcurrency::new(4, t0);
        c.limit.store(3, Ordering::Relaxed);
        c.state.lock().base = 200e-6;
        let us = Duration::from_micros(1);
        let window = |at: Instant, n: usize, latency_us: u32| {
            c.state.lock().base_at = at; // the base stays fresh: no probe in this test
            c.record(64, 64 * latency_us * us, n, at + WINDOW);
            c.limit()
        };
        // three writers queue q = 3 (1 - 200/450) = 1.67 twice: down to two
        assert_eq!(window(t0, 3, 450), 3);
        assert_eq!(window(t0 + WINDOW, 3, 450), 2);
        // at two, q = 2 (1 - 200/220) = 0.18, all busy, windows on end: it stays at two
        let mut t = t0 + 2 * WINDOW;
        while t < t0 + PROBE_EVERY {
            assert_eq!(window(t, 2, 220), 2);
            t += WINDOW;
        }
        // a probe period after the fall, the third writer is tried again
        t += WINDOW;
        window(t, 2, 220);
        assert_eq!(window(t + WINDOW, 2, 220), 3);
    }

    #[test]
    fn a_stale_base_is_measured_again_with_batches_one_at_a_time() {
        let t0 = Instant::now();
        let c = WriteConcurrency::new(4, t0);
        c.limit.store(3, Ordering::Relaxed);
        // a base measured long ago, at one writer
        c.record(64, 64 * 10 * MS / 1000, 1, t0 + WINDOW);
        assert_eq!(c.limit(), 3);
        // past PROBE_EVERY, a window at several writers starts a probe
        let t1 = t0 + PROBE_EVERY + 2 * WINDOW;
        c.record(64, 64 * 15 * MS / 1000, 3, t1);
        assert_eq!(c.limit(), 1, "a probe runs at one writer");
        assert!(
            c.probing.load(Ordering::Relaxed),
            "batches write one at a time"
        );
        // the probe's window, at one writer, measures a slower device and restores the limit
        c.record(64, 64 * 40 * MS / 1000, 1, t1 + WINDOW);
        assert_eq!(c.limit(), 3);
        assert!(!c.probing.load(Ordering::Relaxed));
        assert!((c.state.lock().base - 40e-6).abs() < 1e-12);
    }

    #[test]
    fn two_cleaners_at_one_writer_each_still_probe_the_base() {
        // the page cleaner and the LRU cleaner at one writer each keep two batches in flight:
        // without the probe a base seen once, lower than any since, would hold the limit at
        // one for good
        let t0 = Instant::now();
        let c = WriteConcurrency::new(4, t0);
        let us = Duration::from_micros(1);
        c.record(64, 64 * 100 * us, 1, t0 + WINDOW); // an early, idle device
        for w in 2..40 {
            // two batches in flight, 400 µs a page: q = 2 (1 - 100/400) = 1.5
            c.record(64, 64 * 400 * us, 2, t0 + w * WINDOW);
            assert_eq!(c.limit(), 1);
        }
        let t1 = t0 + PROBE_EVERY + WINDOW;
        c.record(64, 64 * 400 * us, 2, t1);
        assert!(
            c.probing.load(Ordering::Relaxed),
            "a probe starts at one writer too"
        );
        // with batches one at a time the device serves a page in 250 µs
        c.record(64, 64 * 250 * us, 1, t1 + WINDOW);
        assert!((c.state.lock().base - 250e-6).abs() < 1e-12);
        // now q = 2 (1 - 250/400) = 0.75: no longer held down, though not raised either
        c.record(64, 64 * 400 * us, 2, t1 + 2 * WINDOW);
        c.record(64, 64 * 260 * us, 2, t1 + 3 * WINDOW);
        c.record(64, 64 * 260 * us, 2, t1 + 4 * WINDOW);
        assert_eq!(
            c.limit(),
            2,
            "q = 2 (1 - 250/260) = 0.08 twice: both busy, one more"
        );
    }

    #[test]
    fn while_probing_batches_write_one_at_a_time() {
        // The window starts an hour ahead, so no window ends (and no step ends the probe)
        // however slowly a busy machine runs the 200 batches.
        let c = WriteConcurrency::new(4, Instant::now() + Duration::from_secs(3600));
        c.probing.store(true, Ordering::Relaxed);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let _: Result<usize, ()> = c.timed(|| {
                            most.fetch_max(c.in_flight.load(Ordering::Relaxed), Ordering::Relaxed);
                            std::thread::yield_now();
                            Ok(1)
                        });
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::Relaxed), 1);
        // and without a probe they overlap (not asserted: the scheduler decides)
    }

    #[test]
    fn off_it_gives_write_io_threads_and_timed_counts_the_batch() {
        let c = WriteConcurrency::new(4, Instant::now());
        assert_eq!(c.writers(false), 4);
        assert_eq!(c.writers(true), 1);
        let r: Result<usize, ()> = c.timed(|| {
            assert_eq!(c.in_flight.load(Ordering::Relaxed), 1);
            Ok(64)
        });
        assert_eq!(r, Ok(64));
        assert_eq!(c.in_flight.load(Ordering::Relaxed), 0);
        assert_eq!(c.state.lock().pages, 64);
    }
}
