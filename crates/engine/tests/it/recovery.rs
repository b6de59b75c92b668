//! Recovery that scales: a log many times `recovery_memory` is recovered in batches, on the
//! simulated disk, to exactly the committed state (also when the power is cut during that
//! recovery, which writes pages back while it runs); the recovery options' bad values; and
//! `recovery_time_target` holding the checkpoint age under what the replay rate allows.

use crate::common::{assert_check, key16, opts, val};
use evenkeel::io::SimStorage;
use evenkeel::{Database, Options};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

const BUDGET: u64 = 1 << 20;

/// A 16 MiB log, a pool that holds the table, the flush policy that leaves the checkpoint
/// where it is (`fixed`, below max_dirty_pages_pct), and the smallest recovery budget.
fn big_log_opts() -> Options {
    let mut o = opts(4096, 4 << 20);
    o.apply_pairs([
        "log_file_size=8M",
        "log_files_in_group=2",
        "log_buffer_size=1M",
        "adaptive_flushing=fixed",
        "recovery_memory=1M",
    ])
    .unwrap();
    o
}

/// Commits random puts and deletes over `keys` keys until the checkpoint age passes `age`;
/// returns the committed state.
fn fill(db: &Database, keys: u64, age: u64, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.create_table("t").unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for i in 0.. {
        let mut txn = db.begin();
        let mut writes = Vec::new();
        for _ in 0..4 {
            let k = key16(rng.gen_range(0..keys));
            if rng.gen_bool(0.1) {
                txn.delete(&t, &k).unwrap();
                writes.push((k, None));
            } else {
                let v = val(i, rng.gen_range(20..200));
                txn.put(&t, &k, &v).unwrap();
                writes.push((k, Some(v)));
            }
        }
        txn.commit().unwrap();
        for (k, v) in writes {
            match v {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
        if i % 64 == 0 && db.status().checkpoint_age_bytes > age {
            break;
        }
    }
    model
}

fn assert_state(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let t = db.table("t").unwrap();
    let txn = db.begin();
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = txn.range(&t, ..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), model.len(), "row count after recovery");
    assert!(
        rows == *model,
        "the recovered rows differ from the committed ones"
    );
    assert_check(db);
}

#[test]
fn a_log_many_times_the_budget_recovers_in_batches_to_the_committed_state() {
    let o = big_log_opts();
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
    let model = fill(&db, 3000, 10 * BUDGET, 1);
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim.clone()), o).unwrap();
    let r = db.status().recovery;
    assert!(
        r.redo_bytes() > 8 * BUDGET,
        "the test needs redo well past the budget: {r:?}"
    );
    assert!(
        r.redo_batches >= 3,
        "one batch for {} redo bytes: {r:?}",
        r.redo_bytes()
    );
    assert!(
        r.redo_batch_peak_bytes <= BUDGET,
        "a batch of {} bytes over recovery_memory {BUDGET}",
        r.redo_batch_peak_bytes
    );
    assert!(r.page_records_applied > 0);
    assert_state(&db, &model);
    // the open measured a replay rate and status shows it (recorded with the next checkpoint)
    assert!(db.status().replay_rate_bytes_per_s > 0);
}

#[test]
fn a_power_cut_during_a_batched_recovery_then_recovery_again_gives_the_committed_state() {
    let o = big_log_opts();
    // a pool of 64 pages, so redo writes pages back while it runs
    let mut small = o.clone();
    small.buffer_pool_size = 256 << 10;
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
    let model = fill(&db, 3000, 6 * BUDGET, 2);
    sim.crash();
    drop(db);
    // cut the power ever later into the recovery, recovering again each time, until one
    // recovery runs through
    let steps = [2u64, 10, 40, 100, 200, 400, 800, 1600, 3200, u64::MAX];
    for (cuts, n) in steps.into_iter().enumerate() {
        if n < u64::MAX {
            sim.power_cut_after(n);
        }
        let opened = Database::open_in(Arc::new(sim.clone()), small.clone());
        let cut = sim.is_power_cut();
        sim.restart();
        match opened {
            Ok(db) if !cut => {
                assert!(cuts >= 3, "only {cuts} recoveries were cut");
                assert_state(&db, &model);
                return;
            }
            Ok(db) => drop(db),
            Err(e) => assert!(cut, "cut after {n}: recovery failed without a cut: {e}"),
        }
        sim.crash();
    }
    panic!("no recovery ran through");
}

#[test]
fn recovery_options_refuse_bad_values_naming_the_option_and_range() {
    for (pair, range) in [
        ("recovery_memory=512K", "1M"),
        ("recovery_memory=65G", "64G"),
        ("recovery_memory=lots", "1M"),
        ("recovery_time_target=-1", "0"),
        ("recovery_time_target=86401", "86400"),
        ("recovery_time_target=5s", "seconds"),
        ("recovery_time_target=2.5", "86400"),
    ] {
        let e = Options::default()
            .apply_pairs([pair])
            .unwrap_err()
            .to_string();
        let name = pair.split('=').next().unwrap();
        assert!(e.contains(name), "{pair}: {e}");
        assert!(
            e.contains(range),
            "{pair}: the error does not give the range: {e}"
        );
    }
    let mut o = Options::default();
    o.apply_pairs(["recovery_memory=2G", "recovery_time_target=5"])
        .unwrap();
    assert_eq!((o.recovery_memory, o.recovery_time_target), (2 << 30, 5));
}

#[test]
fn recovery_time_target_is_dynamic_and_shown_in_status() {
    let (_sim, db) = crate::common::sim_db(opts(4096, 4 << 20));
    assert!(db.status().recovery_target.is_none());
    db.set_option("recovery_time_target", "3").unwrap();
    let t = db.status().recovery_target.unwrap();
    assert_eq!(t.seconds, 3);
    // no recovery measured yet: the assumed rate, planned with its margin, and no more than
    // the log holds
    assert!(!t.measured);
    assert_eq!(t.replay_rate, evenkeel::flush::ASSUMED_REPLAY_RATE);
    assert_eq!(
        t.planned_rate,
        t.replay_rate / evenkeel::flush::RECOVERY_TARGET_RATE_MARGIN
    );
    assert_eq!(
        t.max_age,
        (3 * t.planned_rate).min(db.status().log_capacity_bytes)
    );
    let e = db.set_option("recovery_time_target", "100000").unwrap_err();
    assert!(e.to_string().contains("recovery_time_target"), "{e}");
    db.set_option("recovery_time_target", "0").unwrap();
    assert!(db.status().recovery_target.is_none());
}

#[test]
fn recovery_time_target_holds_the_checkpoint_age_under_its_limit() {
    // A 16 MiB log with a recorded replay rate of 2 MiB/s, planned at half: a 2 s target
    // allows 2 MiB of age.
    let o = big_log_opts();
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
    db.set_option("recovery_time_target", "2").unwrap();
    db.record_replay_rate(2 << 20);
    let limit = db.status().recovery_target.unwrap().max_age;
    assert_eq!(limit, 2 << 20);
    let t = db.create_table("t").unwrap();
    let mut max_age = 0;
    for i in 0..100_000u64 {
        if db.status().lsn > 5 * limit {
            break;
        }
        let mut txn = db.begin();
        for j in 0..4 {
            txn.put(&t, &key16((i * 4 + j) % 4000), &val(i, 150))
                .unwrap();
        }
        txn.commit().unwrap();
        max_age = max_age.max(db.status().checkpoint_age_bytes);
    }
    // the sync point (94% of the limit) stops commits, and every reservation counts against
    // the limit
    assert!(
        max_age <= limit,
        "checkpoint age reached {max_age} over the target's limit {limit}"
    );
    assert!(
        db.status().lsn > 4 * limit,
        "the test must write several limits' worth"
    );
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert!(db.status().recovery.redo_bytes() <= limit);
}

/// A log fsync that reported success but lost its writes, then pages written back through the
/// doublewrite area at LSNs past what the log still holds (a pool of 64 pages evicts them; no
/// checkpoint passes the lost writes): open refuses, naming the page, its doublewrite copy and
/// the log end, before recovery appends anything (after that, the new log end could pass the
/// stale pages' LSNs and `check` could no longer tell).
#[test]
fn a_lost_log_fsync_under_pages_already_written_is_refused_at_open() {
    use evenkeel::io::sim::{Fault, FaultKind, FaultOp};
    let mut o = big_log_opts();
    o.buffer_pool_size = 256 << 10;
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let commit = |from: u64, to: u64| {
        let mut txn = db.begin();
        for i in from..to {
            txn.put(&t, &key16(i), &val(i, 100)).unwrap();
        }
        txn.commit().unwrap();
    };
    commit(0, 100);
    db.flush().unwrap();
    sim.inject(Fault {
        file: Some("ib_logfile0".into()),
        op: FaultOp::Sync,
        after: 0,
        kind: FaultKind::LostSync,
        persistent: false,
    });
    commit(100, 200);
    assert_eq!(
        sim.fault_counts().lost_syncs,
        1,
        "the lost fsync did not fire"
    );
    let written = db.status().buffer.pages_written;
    for i in 2..40 {
        commit(i * 100, (i + 1) * 100);
    }
    assert!(
        db.status().buffer.pages_written > written + 64,
        "the test needs pages written back after the lost fsync"
    );
    sim.crash();
    drop(db);
    let e = match Database::open_in(Arc::new(sim.clone()), o) {
        Ok(_) => panic!("open accepted a log that lost writes the data file reflects"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("evenkeel.dblwr") && e.contains("beyond the end of the readable redo log"),
        "the refusal must name the doublewrite copy and the log end: {e}"
    );
}
