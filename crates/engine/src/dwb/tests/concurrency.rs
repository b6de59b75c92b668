//! Concurrent `write_batch` callers with a crash in flight: the recorded I/O order keeps D1 and
//! D2, and after recovery every page verifies and is at least as new as its last acknowledged
//! write, under each crash mode.

use super::trace::{check_order, TraceStorage};
use super::{data_file, image, reopen, write, DATA, PS};
use crate::dwb::Doublewrite;
use crate::io::sim::CrashMode;
use crate::io::{FileKind, SimStorage, Storage};
use crate::page::{self, hdr};
use crate::types::PageId;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const THREADS: u32 = 4;
const PAGES_PER_THREAD: u32 = 6;
const SLOTS: usize = 8;

/// One run: 4 threads write batches of 1..=6 of their own pages (LSN = round + 2) until the
/// crash; then the trace is checked, and after recovery each page must lie between the highest
/// LSN acknowledged for it and the highest attempted.
fn run(mode: CrashMode) {
    let sim = SimStorage::new();
    let pages = THREADS * PAGES_PER_THREAD;
    drop(data_file(&sim, pages));
    let traced = TraceStorage::new(&sim, PS);
    let dwb = Arc::new(Doublewrite::open(&traced, PS, SLOTS).unwrap());
    let data = traced.open(DATA, FileKind::Data, false).unwrap();
    // (acked, attempted) LSN per page.
    let lsns = Arc::new(Mutex::new(vec![(1u64, 1u64); pages as usize]));
    let batches = Arc::new(AtomicU64::new(0));

    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dwb, data) = (Arc::clone(&dwb), Arc::clone(&data));
            let (lsns, batches) = (Arc::clone(&lsns), Arc::clone(&batches));
            std::thread::spawn(move || {
                for round in 0u64.. {
                    let n = 1 + (round + u64::from(t)) % u64::from(PAGES_PER_THREAD);
                    let items: Vec<(u32, u64)> = (0..n as u32)
                        .map(|k| t * PAGES_PER_THREAD + (k + round as u32) % PAGES_PER_THREAD)
                        .map(|p| (p, round + 2))
                        .collect();
                    for &(p, l) in &items {
                        lsns.lock()[p as usize].1 = l;
                    }
                    if write(&dwb, &*data, &items).is_err() {
                        return; // the crash: handles are dead
                    }
                    for &(p, l) in &items {
                        lsns.lock()[p as usize].0 = l;
                    }
                    batches.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    while batches.load(Ordering::Relaxed) < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    sim.crash_with(mode.clone());
    for h in handles {
        h.join().unwrap();
    }
    assert!(batches.load(Ordering::Relaxed) >= 50, "too few batches");
    let ops = traced.ops.lock().clone();
    assert!(check_order(&ops, PS, DATA) > 0);

    let (dwb, data) = reopen(&sim, SLOTS);
    let report = dwb.recover(&*data).unwrap();
    let lsns = lsns.lock();
    let all = sim.read_durable(DATA);
    for (p, &(acked, attempted)) in lsns.iter().enumerate() {
        let b = &all[p * PS..(p + 1) * PS];
        page::verify(b, PageId(p as u32))
            .unwrap_or_else(|f| panic!("{mode:?}: page {p}: {f}; {report:?}"));
        let lsn = hdr::lsn(b).0;
        assert!(
            acked <= lsn && lsn <= attempted,
            "{mode:?}: page {p} at LSN {lsn}, acked {acked}, attempted {attempted}"
        );
        assert_eq!(b, image(p as u32, lsn, PS).as_slice(), "page {p}");
    }
}

#[test]
fn concurrent_batches_with_a_crash_in_flight_recover_every_page() {
    run(CrashMode::DropUnsynced);
    for keep_bytes in [100, PS + 100, 3 * PS - 8] {
        run(CrashMode::TearLastWrite {
            file: None,
            keep_bytes,
        });
    }
    for seed in 0..3 {
        run(CrashMode::KeepRandomSubset { seed });
    }
}
