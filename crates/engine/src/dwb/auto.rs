//! auto: `doublewrite_compression = auto`. A share of the copies, moved a step at a time, is
//! compressed (zstd): it grows while the device is the limit of page writes and the machine's
//! CPUs have room, and shrinks while the CPUs have none.
//!
//! A compressed copy saves device bytes and costs CPU time on the writing thread; which one is
//! scarce depends on the machine and the load, so two figures decide, each a moving average of
//! one-second windows (weight 0.3 for the newest):
//!
//! - **The device is busy**: the share of wall time with at least one chunk's IO in flight,
//!   from its copies' write to its in-place fsync, over every segment (`io/busy.rs`'s clock,
//!   as the pool keeps for pages). Compression starts at 0.85 or more, and that is all this
//!   figure does: compressed copies take the device less time, so as more of them are
//!   compressed the busy share falls whether or not the device is still the limit (insert
//!   l.i1 on a device held to 200 MiB/s: the device wrote its 200 MiB/s in every second while
//!   this share fell under 0.85 with 0.8 of the copies compressed).
//! - **The CPUs have room**: the share of the whole machine's CPU time that was busy
//!   (`/proc/stat`). The share of copies compressed grows only under 0.80 and shrinks over
//!   0.92; between the two it holds, and the gap is there because compressing raises the
//!   CPUs' share itself. Where `/proc/stat` cannot be read, the copies stay raw.
//!
//! Both must agree: the CPUs alone dip for single seconds while a CPU-bound load waits on
//! something else, and the device alone cannot say whether the CPU compression takes is
//! scarce.
//!
//! Why a share and not a switch: compressing every copy at once changes the bytes a page write
//! costs by a third or more, so a switch is a step of 15-40% in the throughput, and a step in
//! the measured seconds is what a run's 1-second figures count against it. A tenth of the
//! copies a second ([`STEP`]) moves the throughput by a few percent a second, under the
//! second-to-second noise of the loads measured, and reaches all of them in ten seconds. The
//! figures behind these thresholds, and the switch's, are in docs/measurements.md ("The
//! doublewrite copies compressed when the device is the limit").
//!
//! The decision is taken at most once every [`DECIDE_EVERY`], by the writer that finishes a
//! chunk after it is due; each segment's coder compresses that share of the copies it writes,
//! spread evenly over them. Every encoding is readable whatever this chooses: each copy names
//! its own.

use crate::io::busy::BusyClock;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the decision is taken again: the window of each figure.
pub(super) const DECIDE_EVERY: Duration = Duration::from_secs(1);
/// The machine's CPU share under which the compressed share may grow, and over which it
/// shrinks.
const CPU_GROW_BELOW: f64 = 0.80;
const CPU_STOP_ABOVE: f64 = 0.92;
/// The device's busy share at or over which compression may start (from none).
const BUSY_START_AT: f64 = 0.85;
/// The weight of the newest window in the moving averages.
const ALPHA: f64 = 0.3;
/// How far the compressed share moves in one decision, either way.
const STEP: f64 = 0.1;

/// (busy, total) CPU time of the whole machine, in any unit, since any origin.
pub(super) type CpuClock = fn() -> Option<(u64, u64)>;

#[derive(Debug)]
struct State {
    cpu: CpuClock,
    decided: Instant,
    last_cpu: Option<(u64, u64)>,
    /// The device's busy seconds at the last decision.
    last_busy: f64,
    /// Moving averages of the device's busy share and the CPUs' (None until measured).
    device: Option<f64>,
    cpus: Option<f64>,
}

/// The decision and what it rests on, shared by every segment.
#[derive(Debug)]
pub(super) struct Auto {
    /// The share of copies compressed now, 0 to 1 (an `f64`'s bits).
    share: AtomicU64,
    /// Time with at least one chunk's IO in flight.
    clock: BusyClock,
    state: Mutex<State>,
}

fn ewma(old: Option<f64>, x: f64) -> Option<f64> {
    Some(old.map_or(x, |o| o + ALPHA * (x - o)))
}

impl Auto {
    pub fn new(cpu: CpuClock, now: Instant) -> Auto {
        Auto {
            share: AtomicU64::new(0f64.to_bits()),
            clock: BusyClock::default(),
            state: Mutex::new(State {
                cpu,
                decided: now,
                last_cpu: cpu(),
                last_busy: 0.0,
                device: None,
                cpus: None,
            }),
        }
    }

    /// The share of copies compressed now (the last decision), 0 to 1.
    pub fn share(&self) -> f64 {
        f64::from_bits(self.share.load(Ordering::Relaxed))
    }

    /// A chunk's IO starts (its copies' write).
    pub fn io_begin(&self, now: Instant) {
        self.clock.begin(now);
    }

    /// A chunk's IO ended (its in-place fsync, or a failure); decides again when due.
    pub fn io_end(&self, now: Instant) {
        self.clock.end(0, now);
        let mut s = self.state.lock();
        let window = now.saturating_duration_since(s.decided);
        if window < DECIDE_EVERY {
            return;
        }
        s.decided = now;
        let (busy, _) = self.clock.read(now);
        let share = (busy - s.last_busy) / window.as_secs_f64();
        s.last_busy = busy;
        s.device = ewma(s.device, share.clamp(0.0, 1.0));
        let cpu = (s.cpu)();
        if let (Some((b0, t0)), Some((b1, t1))) = (s.last_cpu, cpu) {
            if t1 > t0 {
                s.cpus = ewma(s.cpus, b1.saturating_sub(b0) as f64 / (t1 - t0) as f64);
            }
        }
        s.last_cpu = cpu;
        let was = self.share();
        let (device, cpus) = (s.device.unwrap_or(0.0), s.cpus.unwrap_or(1.0));
        // The device's busy share starts it and nothing more: it falls as the copies shrink
        // (they take the device less time) whether or not the device is still the limit, so
        // once started only the CPUs say how far to go.
        let share = if cpus > CPU_STOP_ABOVE {
            was - STEP
        } else if cpus < CPU_GROW_BELOW && (was > 0.0 || device >= BUSY_START_AT) {
            was + STEP
        } else {
            was
        };
        // Rounded to the step, so that repeated steps land on 0 and 1 exactly.
        let share = ((share / STEP).round() * STEP).clamp(0.0, 1.0);
        tracing::trace!(
            device_busy = device,
            cpus_busy = cpus,
            share,
            "doublewrite auto"
        );
        if share != was {
            tracing::debug!(
                device_busy = device,
                cpus_busy = cpus,
                share,
                "doublewrite copies compressed"
            );
        }
        self.share.store(share.to_bits(), Ordering::Relaxed);
    }
}

/// The machine's CPU time from `/proc/stat`'s first line: busy (everything but idle and
/// iowait; steal counts as busy, as time this machine could not use) and total, in ticks.
pub(super) fn proc_stat_cpu() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let v: Vec<u64> = it.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    Some((total - v[3] - v[4], total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    // The fake machine's clock: each reading, BUSY busy ticks of 100 pass.
    static BUSY: AtomicU64 = AtomicU64::new(0);
    static BUSY_TICKS: AtomicU64 = AtomicU64::new(0);
    static TICKS: AtomicU64 = AtomicU64::new(0);

    fn fake_cpu() -> Option<(u64, u64)> {
        let b = BUSY.load(Ordering::SeqCst);
        let busy = BUSY_TICKS.fetch_add(b, Ordering::SeqCst) + b;
        Some((busy, TICKS.fetch_add(100, Ordering::SeqCst) + 100))
    }

    fn no_cpu() -> Option<(u64, u64)> {
        None
    }

    /// Runs `secs` seconds of 64 chunks a second from `*t`, one at a time, each with its IO in
    /// flight for `busy` of its 1/64 s; leaves `*t` at the end.
    fn run(a: &Auto, t: &mut Instant, secs: u64, busy: f64) {
        let slot = 15_625u64; // µs
        let t0 = *t;
        *t += Duration::from_secs(secs);
        for s in 0..secs {
            for k in 0..64u64 {
                let start = t0 + Duration::from_secs(s) + Duration::from_micros(k * slot);
                a.io_begin(start);
                a.io_end(start + Duration::from_micros((slot as f64 * busy) as u64));
            }
        }
    }

    /// Runs `secs` seconds one at a time; returns the share after each.
    fn shares(a: &Auto, t: &mut Instant, secs: u64, busy: f64) -> Vec<f64> {
        (0..secs)
            .map(|_| {
                run(a, t, 1, busy);
                a.share()
            })
            .collect()
    }

    // One test drives the shared fake clock, so the cases run in order in it.
    #[test]
    fn the_compressed_share_grows_a_step_a_second_while_the_device_is_busy_and_the_cpus_have_room_and_shrinks_when_they_do_not(
    ) {
        let mut t = Instant::now();
        BUSY.store(30, Ordering::SeqCst);
        let a = Auto::new(fake_cpu, t);
        assert_eq!(a.share(), 0.0, "raw until measured");
        let mut last = 0.0;
        // Never more than a step from one second to the next, whatever the figures do.
        let mut phase = |cpus: u64, secs: u64, device: f64| {
            BUSY.store(cpus, Ordering::SeqCst);
            let v = shares(&a, &mut t, secs, device);
            for &x in &v {
                assert!((x - last).abs() <= STEP + 1e-9, "{last} -> {x} in a second");
                assert!((0.0..=1.0).contains(&x));
                last = x;
            }
            v
        };

        // The device busy, the CPUs 30%: a step a second, all copies within 11 seconds.
        let v = phase(30, 12, 0.95);
        assert!(v.windows(2).all(|w| w[1] >= w[0]), "{v:?}");
        assert!(v[2] > 0.0 && v[2] < 0.5, "{v:?}");
        assert_eq!(v[v.len() - 1], 1.0, "{v:?}");
        // The CPUs busy 95%: it holds while their average passes the band, then shrinks to 0.
        let v = phase(95, 25, 0.95);
        assert!(v.windows(2).all(|w| w[1] <= w[0]), "{v:?}");
        assert_eq!(v[0], 1.0, "{v:?}");
        assert_eq!(v[v.len() - 1], 0.0, "{v:?}");
        // CPUs at 86%, between the thresholds: holds at none ...
        let v = phase(86, 10, 0.95);
        assert!(v.iter().all(|&x| x == 0.0), "{v:?}");
        // ... and at 50%: grows, a part of the copies after a few seconds ...
        let v = phase(50, 4, 0.95);
        assert!(v[v.len() - 1] > 0.0 && v[v.len() - 1] < 0.7, "{v:?}");
        // ... and, once the CPUs' average has passed its threshold (a few seconds), holds there
        // while they are between the thresholds, whatever the device's busy share does ...
        let v = phase(86, 10, 0.70);
        let held = v[4];
        assert!(held > 0.0 && held < 1.0, "{v:?}");
        assert!(v[4..].iter().all(|&x| x == held), "{v:?}");
        // ... and, started, grows again with the CPUs idle though the device's busy share is
        // low (it falls because the copies shrank).
        let v = phase(10, 12, 0.30);
        assert!(v.windows(2).all(|w| w[1] >= w[0]), "{v:?}");
        assert_eq!(v[v.len() - 1], 1.0, "{v:?}");
        // Shrunk by the CPUs, then the device busy 80% of the time, under the start: none.
        let v = phase(95, 20, 0.80);
        assert_eq!(v[v.len() - 1], 0.0, "{v:?}");
        let v = phase(10, 10, 0.80);
        assert!(v.iter().all(|&x| x == 0.0), "{v:?}");
        // A dip of the CPUs does not start it while the device is idle (the main command's
        // load).
        let v = phase(40, 10, 0.05);
        assert!(v.iter().all(|&x| x == 0.0), "{v:?}");

        // No CPU clock (not Linux): raw.
        let b = Auto::new(no_cpu, t);
        run(&b, &mut t, 8, 0.95);
        assert_eq!(b.share(), 0.0);
    }

    #[test]
    fn proc_stat_lines_parse_busy_and_total() {
        assert_eq!(
            parse_cpu_line("cpu  100 5 50 800 40 3 2 0 0 0"),
            Some((160, 1000))
        );
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("cpu 1 x 3 4 5"), None);
        if cfg!(target_os = "linux") {
            let (busy, total) = proc_stat_cpu().expect("/proc/stat on Linux");
            assert!(busy <= total && total > 0);
        }
    }
}
