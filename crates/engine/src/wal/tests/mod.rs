//! Tests of the redo log on the simulated disk: round trips, reopen, capacity and wrap-around,
//! checkpoint slots, stale and hole blocks, faults, modes. Crash torture is in `crash.rs`, group
//! commit under concurrency in `concurrency.rs`. Each test names the invariant it would catch.

#![allow(clippy::unwrap_used)]

mod concurrency;
mod crash;
mod figures;

use super::*;
use crate::error::Error;
use crate::io::sim::{Fault, FaultKind, FaultOp};
use crate::io::{FileKind, SimStorage, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) fn cfg(
    block_size: usize,
    blocks_per_file: u64,
    files: u32,
    buffer_blocks: usize,
) -> LogConfig {
    LogConfig {
        file_size: block_size as u64 * (blocks_per_file + 3),
        files,
        buffer_size: block_size * buffer_blocks,
        block_size,
        flush_at_commit: FlushAtCommit::One,
        background_interval: Duration::from_millis(20),
        read_only: false,
        health: None,
    }
}

pub(super) fn small() -> LogConfig {
    cfg(512, 40, 2, 8)
}

pub(super) fn storage(sim: &SimStorage) -> Arc<dyn Storage> {
    Arc::new(sim.clone())
}

/// A payload that encodes its own identity, so a mix-up is visible.
pub(super) fn payload(tag: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

fn open(sim: &SimStorage, c: &LogConfig) -> (Log, Recovered) {
    Log::open(storage(sim), c.clone()).unwrap()
}

fn append_all(log: &Log, sizes: &[usize], tag0: u64) -> Vec<Group> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = payload(tag0 + i as u64, n);
            let r = log.append_range(&p).unwrap();
            Group {
                start: r.start,
                end: r.end,
                payload: p,
            }
        })
        .collect()
}

#[test]
fn log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
}

#[test]
fn append_flush_reopen_returns_exactly_the_groups() {
    for c in [small(), cfg(4096, 12, 2, 4)] {
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let p = c.block_size - 36; // fills a block's stream exactly with its framing
        let sizes = [0, 1, 5, 100, p, p + 1, p - 1, 1000, log.max_payload(), 7];
        let mut expect = append_all(&log, &sizes[..4], 0);
        log.flush_to(expect[3].end, true).unwrap();
        expect.extend(append_all(&log, &sizes[4..], 10));
        let end = expect.last().unwrap().end;
        log.flush_to(end, false).unwrap();
        assert_eq!(log.written_lsn(), end);
        log.flush_to(end, true).unwrap();
        assert!(log.flushed_lsn() >= end);
        assert_eq!(
            log.flushed_lsn().0 % (c.block_size as u64 - 20),
            0,
            "padded (W3)"
        );
        for w in expect.windows(2) {
            assert!(w[0].end <= w[1].start);
        }
        sim.crash(); // only fsynced bytes count
        drop(log);
        let (log2, rec) = open(&sim, &c);
        assert_eq!(
            rec.collect_groups().unwrap(),
            expect,
            "block size {}",
            c.block_size
        );
        assert_eq!(rec.end_lsn, end);
        assert!(!rec.checkpoint_slot_repaired);
        assert_eq!(log2.current_lsn(), log2.flushed_lsn());
        let stats = log2.stats();
        assert_eq!(stats.checkpoints, 1, "open writes its epoch slot");
    }
}

#[test]
fn reopen_continues_the_stream_after_the_last_group() {
    let c = small();
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let mut expect = append_all(&log, &[10, 20, 30], 0);
    let r = log.append_with(5, |b| b.copy_from_slice(b"hello")).unwrap();
    expect.push(Group {
        start: r.start,
        end: r.end,
        payload: b"hello".to_vec(),
    });
    log.close().unwrap();
    assert!(matches!(log.append(b"x"), Err(Error::LogClosed)));
    drop(log);
    for round in 1..4u64 {
        let (log, rec) = open(&sim, &c);
        assert_eq!(rec.collect_groups().unwrap(), expect, "round {round}");
        let next = log.current_lsn();
        assert!(next >= rec.end_lsn);
        assert_eq!(
            next.0 % (c.block_size as u64 - 20),
            0,
            "W6: a run starts on a block"
        );
        let more = append_all(&log, &[round as usize * 7, 300], round * 100);
        assert_eq!(more[0].start, next);
        expect.extend(more);
        drop(log); // drop closes: flushes durably
        sim.crash();
    }
}

#[test]
fn crash_keeps_what_was_fsynced_and_drops_what_was_only_written() {
    let c = small();
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let durable = append_all(&log, &[50, 600, 3], 0);
    log.flush_to(durable[2].end, true).unwrap();
    let written = append_all(&log, &[40], 10);
    log.flush_to(written[0].end, false).unwrap();
    append_all(&log, &[30], 20); // only buffered
    sim.crash();
    drop(log);
    let (_log, rec) = open(&sim, &c);
    assert_eq!(rec.collect_groups().unwrap(), durable);
}

#[test]
fn log_full_is_refused_and_a_checkpoint_releases_space() {
    let c = cfg(512, 10, 2, 8);
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let mut last = Lsn(0);
    let err = loop {
        match log.append(&payload(1, 200)) {
            Ok(end) => {
                log.flush_to(end, true).unwrap();
                last = end;
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::LogFull { .. }), "{err}");
    assert!(err.to_string().contains("checkpoint"), "{err}");
    let before = log.current_lsn();
    assert!(log.append(b"").is_err(), "still full");
    assert_eq!(
        log.current_lsn(),
        before,
        "a refused append changes nothing"
    );
    assert!(
        log.current_lsn().0 - log.checkpoint_lsn().0 <= log.capacity(),
        "W4"
    );
    assert_eq!(log.stats().log_full_refusals, 2);
    log.write_checkpoint(last).unwrap();
    log.append(&payload(2, 200)).unwrap();
}

/// Wraps the log many times with checkpoints trailing a few groups behind; then checks reopen
/// returns exactly the groups after the last checkpoint and stops at a previous lap's block.
#[test]
fn wrap_around_many_laps_with_trailing_checkpoints() {
    let c = cfg(512, 6, 2, 6);
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let mut all: Vec<Group> = Vec::new();
    let mut i = 0u64;
    while log.current_lsn().0 < 50 * log.capacity() {
        let g = append_all(&log, &[(i as usize * 37) % 700], i);
        all.extend(g);
        if i % 3 == 1 {
            log.flush_to(log.current_lsn(), i % 2 == 1).unwrap();
            log.flush_to(log.current_lsn(), true).unwrap();
            // Trail by up to two groups, all durable.
            let k = all.len().saturating_sub(2);
            log.write_checkpoint(all[k].start).unwrap();
        }
        i += 1;
    }
    let ckpt = log.checkpoint_lsn();
    drop(log);
    sim.crash();
    let (log, rec) = open(&sim, &c);
    let expect: Vec<Group> = all.into_iter().filter(|g| g.start >= ckpt).collect();
    assert_eq!(rec.checkpoint_lsn, ckpt);
    assert_eq!(rec.collect_groups().unwrap(), expect);
    let ring = 12;
    match rec.stop {
        ScanStop::StaleBlock { block, found } => assert_eq!(found + ring, block, "previous lap"),
        other => panic!("expected a stale block from the previous lap, got {other:?}"),
    }
    assert!(log.stats().checkpoints >= 1);
}

#[test]
fn checkpoint_slots_newest_wins_one_bad_is_repaired_both_bad_is_an_error() {
    let c = small();
    let bs = c.block_size as u64;
    let setup = || {
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let a = append_all(&log, &[100, 100], 0);
        log.flush_to(a[1].end, true).unwrap();
        log.write_checkpoint(a[1].start).unwrap(); // number 2, slot 0
        let b = append_all(&log, &[100, 100], 10);
        log.flush_to(b[1].end, true).unwrap();
        log.write_checkpoint(b[0].end).unwrap(); // number 3, slot 1
        drop(log);
        (sim, a[1].start, b[0].end)
    };
    let corrupt = |sim: &SimStorage, slot: u64| {
        let f = sim.open("ib_logfile0", FileKind::Log, false).unwrap();
        f.write_at(&[0xA5; 8], (1 + slot) * bs + 16).unwrap();
        f.sync().unwrap();
    };

    let (sim, _old, new) = setup();
    let (_, rec) = open(&sim, &c);
    assert_eq!(
        (rec.checkpoint_lsn, rec.checkpoint_slot_repaired),
        (new, false)
    );
    assert_eq!(rec.collect_groups().unwrap().len(), 1);

    let (sim, _old, new) = setup();
    corrupt(&sim, 0);
    let (log, rec) = open(&sim, &c);
    assert_eq!(
        (rec.checkpoint_lsn, rec.checkpoint_slot_repaired),
        (new, true)
    );
    drop(log);
    let (_, rec) = open(&sim, &c);
    assert!(!rec.checkpoint_slot_repaired, "the bad slot was rewritten");

    let (sim, old, _new) = setup();
    corrupt(&sim, 1); // the newest: fall back to the older checkpoint, scan from there
    let (log, rec) = open(&sim, &c);
    assert_eq!(
        (rec.checkpoint_lsn, rec.checkpoint_slot_repaired),
        (old, true)
    );
    assert_eq!(rec.collect_groups().unwrap().len(), 3);
    drop(log);

    let (sim, _, _) = setup();
    corrupt(&sim, 0);
    corrupt(&sim, 1);
    let e = Log::open(storage(&sim), c.clone()).err().unwrap();
    let text = e.to_string();
    assert!(matches!(e, Error::BadDatabase { .. }), "{text}");
    assert!(
        text.contains("ib_logfile0") && text.contains("checkpoint slots"),
        "{text}"
    );
}

/// W6: a block of the current lap left behind a hole by a lost write must not be read as the
/// continuation of a later run's stream.
#[test]
fn block_left_behind_a_hole_by_an_older_run_is_never_returned() {
    let c = small();
    let fill = c.block_size - 36; // one group fills one block exactly
    let bs = c.block_size;
    let mut found = false;
    for seed in 0..64 {
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let kept = append_all(&log, &[fill, fill], 0); // blocks 1-2
        log.flush_to(kept[1].end, true).unwrap();
        let g3 = append_all(&log, &[fill], 10); // block 3, own write
        log.flush_to(g3[0].end, false).unwrap();
        let g4 = append_all(&log, &[fill], 20); // block 4, own write
        log.flush_to(g4[0].end, false).unwrap();
        sim.crash_with(crate::io::sim::CrashMode::KeepRandomSubset { seed });
        drop(log);
        let img = sim.read_durable("ib_logfile0");
        let block = |b: usize| &img[(3 + b) * bs..(4 + b) * bs];
        if block(3).iter().any(|&x| x != 0) || block(4).iter().all(|&x| x == 0) {
            continue; // want: write of block 3 lost, write of block 4 kept
        }
        found = true;
        let (log, rec) = open(&sim, &c);
        assert_eq!(rec.collect_groups().unwrap(), kept);
        let new = append_all(&log, &[10], 30); // block 3 in epoch 2, padded
        log.flush_to(new[0].end, true).unwrap();
        sim.crash();
        drop(log);
        let (_, rec) = open(&sim, &c);
        let mut expect = kept.clone();
        expect.extend(new);
        assert_eq!(rec.collect_groups().unwrap(), expect, "seed {seed}");
        assert_eq!(rec.stop, ScanStop::EpochWentBack { block: 4 });
        break;
    }
    assert!(found, "no seed dropped block 3 and kept block 4");
}

/// W1/W6: an old partial version of a block (its rewrite was lost) followed by a newer block of
/// the same run ends the scan there: the stream has a hole.
#[test]
fn partial_block_followed_by_a_block_of_the_same_run_ends_the_scan() {
    let c = small();
    let bs = c.block_size;
    let fill = bs - 36;
    let mut found = false;
    for seed in 0..64 {
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let g1 = append_all(&log, &[100], 0); // write A: block 1, partial
        log.flush_to(g1[0].end, false).unwrap();
        let g2 = append_all(&log, &[fill], 1); // write B: blocks 1-2
        log.flush_to(g2[0].end, false).unwrap();
        let g3 = append_all(&log, &[fill], 2); // write C: blocks 2-3
        log.flush_to(g3[0].end, false).unwrap();
        sim.crash_with(crate::io::sim::CrashMode::KeepRandomSubset { seed });
        drop(log);
        let img = sim.read_durable("ib_logfile0");
        let block = |b: usize| &img[(3 + b) * bs..(4 + b) * bs];
        let b1 = super::block::check_data_block(block(1), 1);
        let b2_ok = super::block::check_data_block(block(2), 2).is_ok();
        if !(matches!(b1, Ok(h) if h.data_len == 116) && b2_ok) {
            continue; // want: A and C kept, B lost
        }
        found = true;
        let (_, rec) = open(&sim, &c);
        assert_eq!(rec.collect_groups().unwrap(), g1, "seed {seed}");
        assert_eq!(rec.stop, ScanStop::EndOfRun { block: 2 }, "seed {seed}");
        break;
    }
    assert!(found, "no seed kept writes A and C and lost B");
}

#[test]
fn injected_write_error_poisons_the_log_and_names_the_file() {
    for op in [FaultOp::Write, FaultOp::Sync] {
        let c = small();
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let ok = append_all(&log, &[10], 0);
        log.flush_to(ok[0].end, true).unwrap();
        let fsyncs = log.stats().fsyncs;
        sim.inject(Fault {
            file: Some("ib_logfile0".into()),
            op,
            after: 0,
            kind: FaultKind::Eio,
            persistent: false,
        });
        let end = log.append(b"doomed").unwrap();
        let e = log.flush_to(end, true).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        assert!(e.to_string().contains("ib_logfile0"), "{e}");
        for later in [
            log.append(b"more").map(|_| ()),
            log.flush_to(end, true),
            log.flush_to(end, false),
            log.write_checkpoint(ok[0].end),
            log.close(),
        ] {
            let e = later.unwrap_err();
            assert!(matches!(e, Error::Poisoned(_)), "{e}");
            assert!(e.to_string().contains("ib_logfile0"), "{e}");
        }
        assert_eq!(
            log.stats().fsyncs,
            fsyncs,
            "{op:?}: no fsync after the failure"
        );
        assert_eq!(sim.fault_counts().eio, 1, "{op:?}: nothing retried");
    }
}

#[test]
fn full_buffer_makes_appenders_drain_it_and_nothing_is_lost() {
    let c = cfg(512, 60, 2, 4);
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let groups = append_all(&log, &[300; 60], 0);
    let s = log.stats();
    assert!(s.buffer_full_waits > 0 && s.writes > 0, "{s:?}");
    assert!(s.partial_block_rewrites > 0, "{s:?}");
    let big = log.max_payload() + 1;
    assert!(matches!(
        log.append(&vec![0; big]),
        Err(Error::LogGroupTooLarge { .. })
    ));
    drop(log);
    let (_, rec) = open(&sim, &c);
    assert_eq!(rec.collect_groups().unwrap(), groups);
}

#[test]
fn config_that_differs_from_the_files_is_an_error_naming_the_file() {
    let c = small();
    let sim = SimStorage::new();
    drop(Log::create(storage(&sim), c.clone()).unwrap());
    let e = Log::create(storage(&sim), c.clone()).err().unwrap();
    assert!(e.to_string().contains("already exists"), "{e}");
    let mut other = c.clone();
    other.file_size += 512;
    let e = Log::open(storage(&sim), other).err().unwrap().to_string();
    assert!(
        e.contains("ib_logfile0") && e.contains("log_file_size"),
        "{e}"
    );
    let mut other = c.clone();
    other.block_size = 4096;
    other.file_size = 4096 * 12;
    other.buffer_size = 4 * 4096;
    let e = Log::open(storage(&sim), other).err().unwrap().to_string();
    assert!(e.contains("ib_logfile0"), "{e}");
    let mut other = c.clone();
    other.files = 3;
    let e = Log::open(storage(&sim), other).err().unwrap().to_string();
    assert!(e.contains("ib_logfile0") && e.contains("of 2"), "{e}");
    let mut other = c.clone();
    other.files = 1;
    let e = Log::open(storage(&sim), other).err().unwrap().to_string();
    assert!(e.contains("ib_logfile0"), "{e}");
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn modes_zero_and_two_become_durable_through_the_background_thread() {
    for mode in [FlushAtCommit::Zero, FlushAtCommit::Two] {
        let mut c = small();
        c.flush_at_commit = mode;
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let end = log.append(b"commit").unwrap();
        log.flush_for_commit(end).unwrap();
        match mode {
            FlushAtCommit::Two => assert!(log.written_lsn() >= end),
            _ => assert!(log.written_lsn() < end),
        }
        assert!(log.flushed_lsn() < end, "{mode:?}: not fsynced at commit");
        log.start_background().unwrap();
        wait_until("the background flush", || log.flushed_lsn() >= end);
        sim.crash();
        drop(log);
        let (_, rec) = open(&sim, &c);
        assert_eq!(rec.collect_groups().unwrap().len(), 1, "{mode:?}");
    }
}

#[test]
fn close_stops_the_background_thread_and_loses_nothing() {
    let mut c = small();
    c.background_interval = Duration::from_secs(3600);
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    log.start_background().unwrap();
    let groups = append_all(&log, &[100, 2000, 5], 0);
    let t = Instant::now();
    log.close().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "close did not wait out the interval"
    );
    sim.crash();
    drop(log);
    let (_, rec) = open(&sim, &c);
    assert_eq!(rec.collect_groups().unwrap(), groups);
}

#[test]
fn garbage_in_the_data_area_never_panics_and_returns_nothing_invalid() {
    use rand::{Rng, SeedableRng};
    let c = small();
    for seed in 0..20u64 {
        let sim = SimStorage::new();
        drop(Log::create(storage(&sim), c.clone()).unwrap());
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        for name in ["ib_logfile0", "ib_logfile1"] {
            let f = sim.open(name, FileKind::Log, false).unwrap();
            let junk: Vec<u8> = (0..c.file_size - 3 * 512).map(|_| rng.gen()).collect();
            f.write_at(&junk, 3 * 512).unwrap();
            f.sync().unwrap();
        }
        let (_, rec) = open(&sim, &c);
        assert!(rec.collect_groups().unwrap().is_empty(), "seed {seed}");
    }
}

/// Invariant 2: a checkpoint that passes the COMMIT of a transaction which has finished
/// applying makes the redo of that apply durable before it is written. Regression: the reapply
/// campaign under load lost an acknowledged transaction. Its thread was descheduled between
/// its COMMIT (durable, so the commit returned) and its apply, which then landed far ahead of
/// the durable log; the next checkpoint passed the COMMIT, flushing only up to its own LSN, and
/// the crash took the apply's redo.
#[test]
fn a_checkpoint_past_an_applied_commit_makes_its_apply_durable() {
    let sim = SimStorage::new();
    let log = Arc::new(Log::create(storage(&sim), small()).unwrap());
    let space = super::space::LogSpace::new(log.clone());
    // the COMMIT, durable as a commit leaves it
    let (commit, fence) = space.append_fenced(&payload(1, 100)).unwrap();
    space.begin_applying(commit.start, 0);
    drop(fence);
    log.flush_to(commit.end, true).unwrap();
    // other work dirties a page after the COMMIT; then the apply and its ApplyDone
    let (other, fence) = space.append_fenced(&payload(2, 100)).unwrap();
    drop(fence);
    let (apply, fence) = space.append_fenced(&payload(3, 100)).unwrap();
    drop(fence);
    let (done, fence) = space.append_fenced(&payload(4, 16)).unwrap();
    drop(fence);
    space.end_applying(commit.start);
    // the oldest dirty page is the other work's: the checkpoint lands between COMMIT and apply
    let cp = space.checkpoint(|| Some(other.start)).unwrap();
    assert_eq!(cp, other.start);
    assert!(cp > commit.start, "the checkpoint passed the COMMIT");
    assert!(
        log.flushed_lsn() >= done.end,
        "checkpoint at {cp} written with the log durable only to {}: the apply at {} is not",
        log.flushed_lsn(),
        apply.start
    );
    // and a crash now keeps the apply: recovery from the checkpoint finds it
    sim.crash();
    drop(space);
    drop(log);
    let (_log, rec) = open(&sim, &small());
    assert_eq!(rec.checkpoint_lsn, cp);
    assert!(rec
        .collect_groups()
        .unwrap()
        .iter()
        .any(|g| g.start == apply.start));
}

/// A backup's copier and a resize exclude each other, whichever comes first; each refusal
/// says why, and once the other is gone the refused one goes through (resize.rs, copy.rs).
#[test]
fn a_copier_and_a_resize_exclude_each_other() {
    let sim = SimStorage::new();
    let c = small();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    append_all(&log, &[300, 700, 1200], 1);
    log.flush_to(log.current_lsn(), true).unwrap();
    let staged = || sim.open("staged", FileKind::Other, true).unwrap();
    let resize = log.resize_begin(c.file_size * 2, c.files).unwrap();
    let e = log.copier(log.checkpoint_lsn(), staged()).err().unwrap();
    assert!(e.to_string().contains("being resized"), "{e}");
    drop(resize); // abandoned: the new files go, and a copier may start
    assert!(!sim.exists("ib_redo0"));
    let copier = log.copier(log.checkpoint_lsn(), staged()).unwrap();
    let e = log.resize_begin(c.file_size * 2, c.files).err().unwrap();
    assert!(e.to_string().contains("a backup is copying"), "{e}");
    drop(copier);
    let mut r = log.resize_begin(c.file_size * 2, c.files).unwrap();
    assert!(log.resize_commit(&mut r, 0).unwrap().is_some());
    log.resize_cleanup(&mut r);
    assert!(!sim.exists("ib_logfile0") && sim.exists("ib_redo1"));
}
