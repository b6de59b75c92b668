//! Group commit under concurrency: many threads appending and flushing durably at once must
//! share fsyncs (one leader, many waiters), and every acknowledged group must be recovered.
//! The simulated disk gets a slow fsync (a wrapper) so that batching is observable without
//! timing assertions; the real-file figures are an ignored test that prints numbers.

use super::{cfg, payload, storage};
use crate::error::Result;
use crate::io::{File, FileKind, FileStorage, FlushMethod, IoStats, SimStorage, Storage};
use crate::types::Lsn;
use crate::wal::{Log, LogConfig};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A storage whose fsync takes `delay` longer, like a real device.
struct SlowSync {
    inner: SimStorage,
    delay: Duration,
}

struct SlowFile {
    inner: Arc<dyn File>,
    delay: Duration,
}

impl Storage for SlowSync {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>> {
        let inner = self.inner.open(name, kind, create)?;
        Ok(Arc::new(SlowFile {
            inner,
            delay: self.delay,
        }))
    }
    fn exists(&self, name: &str) -> bool {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.inner.remove(name)
    }
    fn sync_dir(&self) -> Result<()> {
        self.inner.sync_dir()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn io_stats(&self) -> IoStats {
        self.inner.io_stats()
    }
}

impl File for SlowFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        std::thread::sleep(self.delay);
        self.inner.sync()
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// `threads` threads each commit `per_thread` groups of `len` bytes (append + durable flush).
/// Returns the log and every acknowledged (thread, seq, end LSN).
fn commit_storm(log: &Arc<Log>, threads: u64, per_thread: u64, len: usize) -> Vec<(u64, u64, Lsn)> {
    let barrier = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let log = Arc::clone(log);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut acked = Vec::new();
                for i in 0..per_thread {
                    let end = log.append(&payload(t << 32 | i, len)).unwrap();
                    log.flush_to(end, true).unwrap();
                    assert!(log.flushed_lsn() >= end, "W2: returned before durable");
                    acked.push((t, i, end));
                }
                acked
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

#[test]
fn sixteen_committers_share_fsyncs_and_every_commit_survives() {
    let c = cfg(512, 2000, 2, 64);
    let sim = SimStorage::new();
    let slow: Arc<dyn Storage> = Arc::new(SlowSync {
        inner: sim.clone(),
        delay: Duration::from_micros(300),
    });
    let log = Arc::new(Log::create(Arc::clone(&slow), c.clone()).unwrap());
    let acked = commit_storm(&log, 16, 60, 100);
    let s = log.stats();
    let commits = acked.len() as u64;
    eprintln!(
        "group commit (sim, 300us fsync): {commits} commits, {} fsyncs, {:.1} commits/fsync, \
         {} flushes, max {} callers per flush, {} padding bytes",
        s.fsyncs,
        commits as f64 / s.fsyncs as f64,
        s.flushes,
        s.max_waiters_per_flush,
        s.padding_bytes
    );
    assert_eq!(s.durable_flush_requests, commits);
    assert!(s.fsyncs < commits, "no group commit: {s:?}");
    assert!(
        s.flush_waits > 0,
        "no caller ever waited for a leader: {s:?}"
    );
    sim.crash();
    drop(log);
    let (_, rec) = Log::open(storage(&sim), c).unwrap();
    assert_eq!(rec.groups.len() as u64, commits);
    let by_end: std::collections::HashMap<Lsn, &Vec<u8>> =
        rec.groups.iter().map(|g| (g.end, &g.payload)).collect();
    for (t, i, end) in acked {
        assert_eq!(by_end.get(&end), Some(&&payload(t << 32 | i, 100)));
    }
}

/// Figures on real files: commits/s, fsyncs/s and commits per fsync at 1, 4, 16, 64 threads,
/// beside the device's own fdatasync rate. Run with
/// `cargo test -p evenkeel --lib wal::tests::concurrency -- --ignored --nocapture`.
#[test]
#[ignore]
fn group_commit_figures_on_real_files() {
    let dir = tempfile::Builder::new()
        .prefix("evenkeel-wal")
        .tempdir_in("/var/tmp")
        .unwrap();
    let c = LogConfig {
        file_size: 64 << 20,
        files: 2,
        buffer_size: 8 << 20,
        ..LogConfig::default()
    };
    {
        let fs = FileStorage::new(dir.path().join("raw"), FlushMethod::Fsync).unwrap();
        let f = fs.open("probe", FileKind::Log, true).unwrap();
        f.set_len(64 << 20).unwrap();
        f.sync().unwrap();
        let t = Instant::now();
        let n = 200u64;
        for i in 0..n {
            f.write_at(&[1u8; 512], (i % 1000) * 512).unwrap();
            f.sync().unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        eprintln!("device: {:.0} write+fdatasync/s", n as f64 / secs);
    }
    for threads in [1u64, 4, 16, 64] {
        let path = dir.path().join(format!("t{threads}"));
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new(path, FlushMethod::Fsync).unwrap());
        let log = Arc::new(Log::create(fs, c.clone()).unwrap());
        let per = 3200 / threads;
        let t = Instant::now();
        let acked = commit_storm(&log, threads, per, 100);
        let secs = t.elapsed().as_secs_f64();
        let s = log.stats();
        let commits = acked.len() as f64;
        eprintln!(
            "{threads:>2} threads: {:>7.0} commits/s, {:>6.0} fsyncs/s, {:>5.1} commits/fsync, \
             {:.0} log bytes per 100-byte commit",
            commits / secs,
            s.fsyncs as f64 / secs,
            commits / s.fsyncs as f64,
            s.written_bytes as f64 / commits
        );
    }
}
