//! The device probe: a thread that makes one small write durable beside the engine's data every
//! [`PROBE_EVERY`] (4 KiB written at offset 0 of a file of its own, then `fdatasync`) and keeps
//! the slowest such write of each sampled second. A commit with durability 1 waits for exactly
//! this on any engine, so a second in which the probe took [`DEVICE_STALL_MS`] or longer is a
//! second in which the device, not the engine, held every durable commit back. It tells a
//! throughput hole the engine made from one the storage made, on every engine alike; the
//! engine's own counters cannot (a peer does not expose its fsync times, and an engine that
//! stalls itself issues less I/O, so the device's counters fall with it).
//!
//! The probe adds about 100 small writes and flushes a second, against the thousands a
//! benchmark's engine issues. A probe that cannot create or write its file stops probing
//! (`None` in the samples); it never fails the run.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the probe writes.
pub const PROBE_EVERY: Duration = Duration::from_millis(10);
/// A second whose slowest probe took this long or longer is a device stall: a tenth of the
/// second during which no durable commit could complete.
pub const DEVICE_STALL_MS: f64 = 100.0;

/// State shared with the probe thread; times in µs since `epoch`.
struct Shared {
    epoch: Instant,
    stop: AtomicBool,
    /// The slowest probe completed since the last [`DeviceProbe::take_max_ms`], µs.
    max_us: AtomicU64,
    /// When the probe now in flight started, µs after `epoch` plus 1 (0: none in flight).
    in_flight_since: AtomicU64,
    /// Set when a write or fdatasync failed: probing stopped.
    failed: AtomicBool,
    /// Probes completed.
    probes: AtomicU64,
}

impl Shared {
    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }
}

/// A running probe; stops and removes its file when dropped.
pub struct DeviceProbe {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl DeviceProbe {
    /// Starts probing with a temporary file in `dir` (the directory holding the engine's data
    /// directory, so the same file system and device); `None` if the file cannot be created.
    pub fn start(dir: &Path) -> Option<DeviceProbe> {
        let mut file = tempfile::Builder::new()
            .prefix(".evenkeel-device-probe-")
            .tempfile_in(dir)
            .ok()?;
        let block = vec![0x5a_u8; 4096];
        file.write_all(&block).ok()?;
        file.as_file().sync_all().ok()?;
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            stop: AtomicBool::new(false),
            max_us: AtomicU64::new(0),
            in_flight_since: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            probes: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("device-probe".into())
            .spawn(move || run(&s, file.as_file(), &block))
            .ok()?;
        Some(DeviceProbe {
            shared,
            thread: Some(thread),
        })
    }

    /// The slowest probe of the interval since the last call, ms, counting a probe still in
    /// flight for as long as it has been (a stall that spans two seconds shows in both); `None`
    /// once probing failed.
    pub fn take_max_ms(&self) -> Option<f64> {
        let s = &self.shared;
        if s.failed.load(Ordering::Acquire) {
            return None;
        }
        let done = s.max_us.swap(0, Ordering::AcqRel);
        let since = s.in_flight_since.load(Ordering::Acquire);
        let running = if since > 0 {
            s.now_us().saturating_sub(since - 1)
        } else {
            0
        };
        Some(done.max(running) as f64 / 1000.0)
    }

    /// Probes completed so far.
    pub fn probes(&self) -> u64 {
        self.shared.probes.load(Ordering::Acquire)
    }
}

impl Drop for DeviceProbe {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(s: &Shared, file: &File, block: &[u8]) {
    let mut next = Instant::now();
    while !s.stop.load(Ordering::Acquire) {
        let start = s.now_us();
        s.in_flight_since.store(start + 1, Ordering::Release);
        let ok = file.write_all_at(block, 0).is_ok() && file.sync_data().is_ok();
        let took = s.now_us().saturating_sub(start);
        s.in_flight_since.store(0, Ordering::Release);
        if !ok {
            s.failed.store(true, Ordering::Release);
            return;
        }
        s.max_us.fetch_max(took, Ordering::AcqRel);
        s.probes.fetch_add(1, Ordering::AcqRel);
        super::sleep_to_next(&mut next, PROBE_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_times_durable_writes_and_stops_cleanly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let probe = DeviceProbe::start(dir.path()).expect("probe starts");
        let t = Instant::now();
        while probe.probes() < 3 {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the probe never wrote"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let ms = probe.take_max_ms().expect("probing");
        assert!(ms >= 0.0 && ms.is_finite(), "{ms}");
        assert_eq!(probe.take_max_ms().map(|m| m < 1e6), Some(true));
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with(".evenkeel-device-probe-"), "{names:?}");
        drop(probe);
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("list").count(),
            0,
            "the probe file is removed with the probe"
        );
    }

    #[test]
    fn a_directory_that_cannot_hold_the_file_gives_no_probe() {
        assert!(DeviceProbe::start(Path::new("/nonexistent/evenkeel")).is_none());
    }
}
