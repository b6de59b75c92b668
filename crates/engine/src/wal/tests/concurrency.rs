//! Group commit under concurrency: many threads appending and flushing durably at once must
//! share fsyncs (one leader, many waiters), and every acknowledged group must be recovered.
//! The simulated disk gets a slow fsync (`TraceStorage`'s sync delay) so that batching is
//! observable without timing assertions; real-file figures are ignored tests in `figures.rs`.

use super::{cfg, payload, storage};
use crate::io::test_support::TraceStorage;
use crate::io::{SimStorage, Storage};
use crate::types::Lsn;
use crate::wal::Log;
use std::sync::{Arc, Barrier};
use std::time::Duration;

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
    let slow: Arc<dyn Storage> =
        Arc::new(TraceStorage::new(&sim).with_sync_delay(Duration::from_micros(300)));
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
    assert_eq!(rec.group_count, commits);
    let groups = rec.collect_groups().unwrap();
    let by_end: std::collections::HashMap<Lsn, &Vec<u8>> =
        groups.iter().map(|g| (g.end, &g.payload)).collect();
    for (t, i, end) in acked {
        assert_eq!(by_end.get(&end), Some(&&payload(t << 32 | i, 100)));
    }
}
