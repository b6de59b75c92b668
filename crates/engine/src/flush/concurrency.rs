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
//!   average (each batch weighted by its pages);
//! - B, the base: L measured with one batch in flight (n ≤ [`ALONE`]), else the least L seen
//!   since;
//! - q = n × (1 − B / L), the batches waiting in the device's queue rather than being served;
//! - q > [`QUEUE_HIGH`]: one writer fewer; q < [`QUEUE_LOW`] while the writers were all busy:
//!   one more (up to `write_io_threads`); in between, unchanged;
//! - a base older than [`PROBE_EVERY`] is measured again: one window at a single writer (a
//!   base measured with several in flight already holds their queue, and the limit would creep
//!   up). The probe costs at most one window a period at one writer.
//!
//! With `adaptive_write_concurrency` off the cleaners always use `write_io_threads` writers.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The window over which latency is averaged before the limit may move.
pub const WINDOW: Duration = Duration::from_millis(200);
/// A window with at most this many batches in flight on average measures the base.
pub const ALONE: f64 = 1.2;
/// Batches queued at the device above which the limit falls.
pub const QUEUE_HIGH: f64 = 1.5;
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
}

/// The write concurrency shared by the page cleaner and the LRU cleaner (`Durability`).
#[derive(Debug)]
pub struct WriteConcurrency {
    /// Writers the cleaners may use now.
    limit: AtomicUsize,
    /// `write_io_threads` (fixed at open): the most.
    max: usize,
    in_flight: AtomicUsize,
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
            state: Mutex::new(State {
                start: now,
                busy_s: 0.0,
                pages: 0,
                in_flight_pages: 0.0,
                base: 0.0,
                base_at: now,
                probing: None,
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
    /// in flight meanwhile.
    pub fn timed<E>(&self, write: impl FnOnce() -> Result<usize, E>) -> Result<usize, E> {
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
        let next = step(&mut s, latency, n, limit, self.max, now);
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
            return was.clamp(1, max);
        }
    } else if s.base == 0.0 || latency < s.base {
        s.base = latency;
        s.base_at = now;
    }
    if s.probing.is_some() {
        // the probe's window still had the earlier writers in flight: keep probing
        return 1;
    }
    let mut next = limit;
    if s.base > 0.0 {
        let queued = n * (1.0 - s.base / latency).max(0.0);
        if queued > QUEUE_HIGH && limit > 1 {
            next = limit - 1;
        } else if queued < QUEUE_LOW && n > limit as f64 - 0.5 && limit < max {
            next = limit + 1;
        }
    }
    if next > 1 && now.saturating_duration_since(s.base_at) >= PROBE_EVERY {
        s.probing = Some(next);
        return 1;
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
        // latency per page does not grow with the batches in flight
        let c = WriteConcurrency::new(8, Instant::now());
        let limits = drive(&c, 12, |_| 20e-6);
        assert_eq!(limits[..7], [2, 3, 4, 5, 6, 7, 8], "{limits:?}");
        assert!(limits[7..].iter().all(|&l| l == 8), "{limits:?}");
    }

    #[test]
    fn a_device_that_serves_one_batch_at_a_time_keeps_the_queue_short() {
        // a saturated device: each batch in flight waits for all the others (latency ∝ n)
        let c = WriteConcurrency::new(8, Instant::now());
        c.limit.store(8, Ordering::Relaxed);
        // the base is measured at one writer first
        c.record(
            64,
            64 * Duration::from_micros(30),
            1,
            Instant::now() + WINDOW,
        );
        let limits = drive(&c, 12, |n| 30e-6 * n);
        // q = n (1 - 1/n) = n - 1: falls while n - 1 > 1.5, holds at 2 (q = 1)
        assert_eq!(limits.last(), Some(&2), "{limits:?}");
        assert!(limits.windows(2).all(|w| w[1] <= w[0]), "{limits:?}");
    }

    #[test]
    fn a_stale_base_is_measured_again_at_one_writer() {
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
        // the probe's window, at one writer, measures a slower device and restores the limit
        c.record(64, 64 * 40 * MS / 1000, 1, t1 + WINDOW);
        assert_eq!(c.limit(), 3);
        assert!((c.state.lock().base - 40e-6).abs() < 1e-12);
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
