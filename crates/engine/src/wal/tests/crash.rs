//! Crash torture on the simulated disk: seeded random runs of appends, flushes (durable or not)
//! and checkpoints over tiny logs that wrap, crashed with every crash mode, recovered, continued
//! and crashed again. After each recovery (W1, W2, W5): the groups returned are exactly a prefix
//! of what was appended after the checkpoint, never a partial or altered group, and include
//! every group that was durably flushed. A failure prints the seed to replay it.

use super::{cfg, payload, storage};
use crate::error::Error;
use crate::io::sim::CrashMode;
use crate::io::SimStorage;
use crate::types::Lsn;
use crate::wal::{Group, Log, LogConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What the test knows the log holds.
struct Model {
    /// Groups appended since the last recovery, plus the recovered ones, in LSN order.
    groups: Vec<Group>,
    /// Highest LSN acknowledged durable by `flush_to(.., true)`.
    durable: Lsn,
    /// Last checkpoint whose `write_checkpoint` returned Ok.
    checkpoint: Lsn,
}

fn random_config(rng: &mut SmallRng) -> LogConfig {
    // Rings of 12+ blocks (512) or 8+ blocks (4096): the buffer must fit in the capacity.
    if rng.gen_bool(0.8) {
        let files: u32 = rng.gen_range(1..4);
        let blocks = rng.gen_range(12u64.div_ceil(u64::from(files))..16);
        let buffer = rng.gen_range(4..8);
        cfg(512, blocks, files, buffer)
    } else {
        cfg(4096, rng.gen_range(4..7), rng.gen_range(2..4), 4)
    }
}

fn random_crash(rng: &mut SmallRng) -> CrashMode {
    match rng.gen_range(0..3) {
        0 => CrashMode::DropUnsynced,
        1 => CrashMode::TearLastWrite {
            file: None,
            keep_bytes: rng.gen_range(0..9000),
        },
        _ => CrashMode::KeepRandomSubset { seed: rng.gen() },
    }
}

/// A checkpoint LSN the engine could choose: a boundary of a durable group.
fn pick_checkpoint(rng: &mut SmallRng, m: &Model) -> Option<Lsn> {
    let durable: Vec<&Group> = m
        .groups
        .iter()
        .filter(|g| g.end <= m.durable && g.start >= m.checkpoint)
        .collect();
    if durable.is_empty() {
        return None;
    }
    // Trail well behind, as a fuzzy checkpoint does: the older half of the candidates.
    let g = durable[rng.gen_range(0..durable.len().div_ceil(2))];
    Some(if rng.gen_bool(0.5) { g.start } else { g.end })
}

fn append_one(rng: &mut SmallRng, log: &Log, m: &mut Model, tag: u64) {
    let len = rng.gen_range(0..log.max_payload().min(1500));
    let p = payload(tag, len);
    let r = match log.append_range(&p) {
        Ok(r) => r,
        Err(Error::LogFull { .. }) => {
            // The engine's flush points would prevent this; here: flush, checkpoint, retry.
            log.flush_to(log.current_lsn(), true).unwrap();
            m.durable = log.flushed_lsn();
            let Some(c) = m.groups.last().map(|g| g.end) else {
                return;
            };
            log.write_checkpoint(c).unwrap();
            m.checkpoint = m.checkpoint.max(c);
            match log.append_range(&p) {
                Ok(r) => r,
                Err(Error::LogFull { .. }) => return,
                Err(e) => panic!("{e}"),
            }
        }
        Err(e) => panic!("{e}"),
    };
    m.groups.push(Group {
        start: r.start,
        end: r.end,
        payload: p,
    });
}

fn run_ops(rng: &mut SmallRng, log: &Log, m: &mut Model, tag: &mut u64) {
    for _ in 0..rng.gen_range(5..80) {
        match rng.gen_range(0..100) {
            0..=54 => {
                *tag += 1;
                append_one(rng, log, m, *tag);
            }
            55..=66 => {
                log.flush_to(log.current_lsn(), true).unwrap();
                m.durable = log.flushed_lsn();
            }
            67..=94 => log.flush_to(log.current_lsn(), false).unwrap(),
            _ => {
                if let Some(c) = pick_checkpoint(rng, m) {
                    log.write_checkpoint(c).unwrap();
                    m.checkpoint = m.checkpoint.max(c);
                }
            }
        }
    }
}

fn check(seed: u64, round: u32, m: &Model, rec: &crate::wal::Recovered) {
    let ctx = format!("seed {seed} round {round}");
    assert_eq!(rec.checkpoint_lsn, m.checkpoint, "{ctx}: checkpoint (W5)");
    let expect: Vec<&Group> = m
        .groups
        .iter()
        .filter(|g| g.start >= m.checkpoint)
        .collect();
    assert!(
        rec.collect_groups().unwrap().len() <= expect.len(),
        "{ctx}: recovered {} groups, only {} appended ({:?})",
        rec.collect_groups().unwrap().len(),
        expect.len(),
        rec.stop
    );
    for (i, (got, want)) in rec
        .collect_groups()
        .unwrap()
        .iter()
        .zip(&expect)
        .enumerate()
    {
        assert!(
            got == *want,
            "{ctx}: group {i} differs from the one appended (W1)"
        );
    }
    let must = expect.iter().filter(|g| g.end <= m.durable).count();
    assert!(
        rec.collect_groups().unwrap().len() >= must,
        "{ctx}: lost a durable group: {} returned, {must} durable ({:?}) (W2)",
        rec.collect_groups().unwrap().len(),
        rec.stop
    );
}

/// What the torture exercised, so that a vacuous run fails.
#[derive(Default, Debug)]
struct Coverage {
    rounds: u64,
    groups_recovered: u64,
    /// Rounds that recovered more than the durable groups (written, not fsynced, survived).
    beyond_durable: u64,
    /// Rounds that lost appended groups.
    lost_some: u64,
    /// Runs whose log wrapped at least twice.
    wrapped_twice: u64,
}

/// One seed: four rounds of work, crash, recover, check.
fn torture(seed: u64, cov: &mut Coverage) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let c = random_config(&mut rng);
    let sim = SimStorage::new();
    let log = Log::create(storage(&sim), c.clone()).unwrap();
    let mut m = Model {
        groups: Vec::new(),
        durable: log.flushed_lsn(),
        checkpoint: log.checkpoint_lsn(),
    };
    let mut tag = seed << 32;
    let mut log = Some(log);
    for round in 0..4 {
        let l = log.take().unwrap();
        run_ops(&mut rng, &l, &mut m, &mut tag);
        sim.crash_with(random_crash(&mut rng));
        drop(l);
        let (l, rec) = Log::open(storage(&sim), c.clone()).unwrap();
        check(seed, round, &m, &rec);
        let expect = m.groups.iter().filter(|g| g.start >= m.checkpoint).count();
        let durable = m
            .groups
            .iter()
            .filter(|g| g.start >= m.checkpoint && g.end <= m.durable)
            .count();
        cov.rounds += 1;
        cov.groups_recovered += rec.group_count;
        cov.beyond_durable += u64::from(rec.collect_groups().unwrap().len() > durable);
        cov.lost_some += u64::from(rec.collect_groups().unwrap().len() < expect);
        assert!(l.current_lsn() >= rec.end_lsn);
        assert!(
            l.current_lsn().0 - l.checkpoint_lsn().0 <= l.capacity(),
            "W4"
        );
        m.groups = rec.collect_groups().unwrap();
        m.durable = rec.end_lsn;
        log = Some(l);
    }
    let l = log.unwrap();
    cov.wrapped_twice += u64::from(l.current_lsn().0 > 2 * l.capacity());
}

#[test]
fn crash_torture_never_returns_partial_groups_and_keeps_durable_ones() {
    let mut cov = Coverage::default();
    for seed in 0..400 {
        torture(seed, &mut cov);
    }
    eprintln!("crash torture: {cov:?}");
    assert!(cov.groups_recovered > 3 * cov.rounds, "{cov:?}");
    assert!(cov.beyond_durable > cov.rounds / 20, "{cov:?}");
    assert!(cov.lost_some > cov.rounds / 10, "{cov:?}");
    assert!(cov.wrapped_twice > 100, "{cov:?}");
}

/// Deterministic companion of the torture: a torn last write at every byte count of a write
/// spanning several blocks.
#[test]
fn torn_last_write_at_every_block_boundary_region() {
    let c = cfg(512, 20, 2, 8);
    for keep in (0..=3 * 512).step_by(37).chain([3 * 512]) {
        let sim = SimStorage::new();
        let log = Log::create(storage(&sim), c.clone()).unwrap();
        let first = log.append(&payload(1, 300)).unwrap();
        log.flush_to(first, true).unwrap();
        let more: Vec<Lsn> = (2..6)
            .map(|i| log.append(&payload(i, 333)).unwrap())
            .collect();
        log.flush_to(*more.last().unwrap(), false).unwrap();
        sim.crash_with(CrashMode::TearLastWrite {
            file: None,
            keep_bytes: keep,
        });
        drop(log);
        let (_, rec) = Log::open(storage(&sim), c.clone()).unwrap();
        assert!(
            !rec.collect_groups().unwrap().is_empty(),
            "keep {keep}: durable group lost"
        );
        assert_eq!(rec.collect_groups().unwrap()[0].payload, payload(1, 300));
        for (i, g) in rec.collect_groups().unwrap().iter().enumerate().skip(1) {
            assert_eq!(g.payload, payload(i as u64 + 1, 333), "keep {keep}");
        }
        // Groups 2..5 (349 stream bytes each) start on block 2 (block 1 was padded by the
        // durable flush) and end at 349, 698, 1047 and 1396 bytes into blocks 2, 3, 4.
        let expect = match keep / 512 {
            0 => 1,
            1 => 2,
            2 => 3,
            _ => 5,
        };
        assert_eq!(rec.collect_groups().unwrap().len(), expect, "keep {keep}");
    }
}
