//! Group commit under concurrency: many threads appending and flushing durably at once must
//! share fsyncs (one leader, many waiters), and every acknowledged group must be recovered.
//! The simulated disk gets a slow fsync (a wrapper) so that batching is observable without
//! timing assertions; real-file figures are ignored tests in `figures.rs`.

use super::{cfg, payload, storage};
use crate::error::Result;
use crate::io::{File, FileKind, IoStats, SimStorage, Storage};
use crate::types::Lsn;
use crate::wal::Log;
use std::sync::{Arc, Barrier};
use std::time::Duration;

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
pub(super) fn commit_storm(
    log: &Arc<Log>,
    threads: u64,
    per_thread: u64,
    len: usize,
) -> Vec<(u64, u64, Lsn)> {
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
