//! Concurrent `write_batch` callers with a crash in flight, through one segment and through
//! several (write_io_threads): the recorded I/O order keeps D1 and D2, and after recovery every
//! page verifies and is at least as new as its last acknowledged write, under each crash mode.
//! With several segments a thread's consecutive batches land in different segments, so the
//! doublewrite file holds the same page at different LSNs in different segments.

use super::trace::{check_order, traced};
use super::{data_file, image, write, DATA, PS};
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

/// One run: 4 threads write batches of 1..=6 of their own pages (LSN = round + 2) through
/// `segments` segments of `per_segment` slots until the crash (after `target` batches); then the
/// trace is checked, and after recovery each page must lie between the highest LSN acknowledged
/// for it and the highest attempted.
fn run(mode: CrashMode, segments: usize, per_segment: usize, target: u64) {
    let sim = SimStorage::new();
    let pages = THREADS * PAGES_PER_THREAD;
    drop(data_file(&sim, pages));
    let traced = traced(&sim, PS);
    let dwb = Arc::new(Doublewrite::open_segments(&traced, PS, segments, per_segment).unwrap());
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
    while batches.load(Ordering::Relaxed) < target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    sim.crash_with(mode.clone());
    for h in handles {
        h.join().unwrap();
    }
    assert!(batches.load(Ordering::Relaxed) >= 50, "too few batches");
    let ops = traced.ops.lock().clone();
    assert!(check_order(&ops, DATA) > 0);

    let dwb = Doublewrite::open_segments(&sim, PS, segments, per_segment).unwrap();
    let data = sim.open(DATA, FileKind::Data, false).unwrap();
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
    run(CrashMode::DropUnsynced, 1, 8, 200);
    for keep_bytes in [100, PS + 100, 3 * PS - 8] {
        run(
            CrashMode::TearLastWrite {
                file: None,
                keep_bytes,
            },
            1,
            8,
            200,
        );
    }
    for seed in 0..3 {
        run(CrashMode::KeepRandomSubset { seed }, 1, 8, 200);
    }
}

/// Several segments (3 of 4 slots: a 5- or 6-page batch is two chunks in its segment), crashed
/// after a seeded-random number of batches under each crash mode.
#[test]
fn concurrent_batches_through_segments_with_a_crash_recover_every_page() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5e9);
    let mut target = || rng.gen_range(50..400u64);
    run(CrashMode::DropUnsynced, 3, 4, target());
    for keep_bytes in [100, PS + 100, 3 * PS - 8] {
        run(
            CrashMode::TearLastWrite {
                file: None,
                keep_bytes,
            },
            3,
            4,
            target(),
        );
    }
    for seed in 0..6 {
        run(CrashMode::KeepRandomSubset { seed }, 3, 4, target());
        run(CrashMode::KeepRandomSubset { seed }, 4, 8, target());
    }
}
