//! The host probe: a thread that measures how fast this machine's memory answers, every
//! [`PROBE_EVERY`], by a chain of dependent loads over an array larger than the last-level
//! cache (each load's address is the previous load's value, so nothing overlaps them), and
//! reports each sampled second's median time per load.
//!
//! Why: an engine whose rate the CPU sets spends most of its time in cache misses (B-tree
//! searches, page lookups, lock tables), so it runs at the speed of the memory it misses to.
//! On a virtual machine that speed is the host's, shared with its other tenants, and it moves:
//! on the 2-core machine the workbench was built on, such a chain over 256 MiB ran 0.76-1.27
//! times its mean from one second to the next, in waves of 10-50 seconds, with nothing else
//! running (docs/measurements.md, "The host's memory speed, and stalls counted from the
//! queue"). A throughput line that follows such a wave is the host's, not the engine's; this
//! probe shows which seconds those were, on every engine alike, as the device probe does for
//! the storage.
//!
//! Each sample is the fastest of [`CHUNKS`] chunks of [`LOADS`] loads, so a chunk the
//! scheduler preempted does not count as slow memory; the probe costs about 1% of one CPU and
//! [`ARRAY_BYTES`] of memory (which the sampler leaves out of the process's RSS).

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the probe samples.
pub const PROBE_EVERY: Duration = Duration::from_millis(100);
/// The chain's array: twice a large server's last-level cache share, so almost every load
/// misses to memory.
pub const ARRAY_BYTES: usize = 64 << 20;
/// Dependent loads per chunk, and chunks per sample.
const LOADS: usize = 2_000;
const CHUNKS: usize = 3;
/// A second whose median load took this much longer than the run's rolling median is a second
/// in which the host's memory ran slow (the summary's figure leaves such seconds out).
pub const HOST_SLOW_FRAC: f64 = 1.1;

struct Shared {
    stop: AtomicBool,
    /// Samples since the last [`HostProbe::take_ns`], ns per load.
    samples: Mutex<Vec<f64>>,
}

/// A running host probe; stops when dropped.
pub struct HostProbe {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl HostProbe {
    /// Starts probing; `None` if the thread cannot be started.
    pub fn start() -> Option<HostProbe> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            samples: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("host-probe".into())
            .spawn(move || run(&s))
            .ok()?;
        Some(HostProbe {
            shared,
            thread: Some(thread),
        })
    }

    /// The median time per load of the samples since the last call, ns; `None` when there
    /// were none (the probe builds its chain in its first half second or so).
    pub fn take_ns(&self) -> Option<f64> {
        let mut v = std::mem::take(&mut *self.shared.samples.lock());
        median(&mut v)
    }
}

impl Drop for HostProbe {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One random cycle through `n` slots: Sattolo's algorithm makes a random cyclic
/// permutation, so following `a[i]` from any slot visits every slot before it returns and
/// the chain never settles into a cached loop. Built in place, in one array.
fn cycle(n: usize, seed: u64) -> Vec<u32> {
    let mut a: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for i in (1..n).rev() {
        let j = rng.gen_range(0..i);
        a.swap(i, j);
    }
    a
}

/// Follows the chain `loads` times from `at`; returns where it ended.
fn chase(a: &[u32], mut at: u32, loads: usize) -> u32 {
    for _ in 0..loads {
        at = a[at as usize];
    }
    at
}

fn run(s: &Shared) {
    let a = cycle(ARRAY_BYTES / 4, 0x5eed);
    let mut at = 0u32;
    let mut next = Instant::now();
    while !s.stop.load(Ordering::Acquire) {
        let mut best = f64::INFINITY;
        for _ in 0..CHUNKS {
            let t = Instant::now();
            at = std::hint::black_box(chase(&a, at, LOADS));
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / LOADS as f64);
        }
        s.samples.lock().push(best);
        super::sleep_to_next(&mut next, PROBE_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_visits_every_slot_before_it_returns() {
        let a = cycle(1_000, 7);
        let mut seen = vec![false; a.len()];
        let mut at = 0u32;
        for _ in 0..a.len() {
            assert!(!seen[at as usize], "slot {at} visited twice");
            seen[at as usize] = true;
            at = a[at as usize];
        }
        assert_eq!(at, 0, "the chain returns to its start after every slot");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn the_median_of_a_second_and_none_without_samples() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn a_running_probe_reports_loads_and_stops_when_dropped() {
        let p = HostProbe::start().expect("a thread");
        let t = Instant::now();
        let mut got = None;
        while got.is_none() && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(200));
            got = p.take_ns();
        }
        let ns = got.expect("a sample within 30 s");
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
        drop(p);
    }
}
