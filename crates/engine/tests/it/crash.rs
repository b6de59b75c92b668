//! Crash tests on the simulated disk: concurrent transactions, a crash at a random point
//! (unsynced writes dropped, the last write torn, or a random subset of unsynced writes kept,
//! in order or reordered),
//! recovery, sometimes a second crash during or right after recovery, then verification:
//! - `check` passes (every page checksum and B+tree invariant, no page LSN past the log end);
//! - every acknowledged commit is present (flush_log_at_trx_commit=1);
//! - nothing unacknowledged is half-present: each transaction inserts one row of its own and
//!   increments a shared counter (read with get_for_update), so after recovery the counter must
//!   equal the number of rows present, and each thread's rows must be exactly the state after
//!   some prefix of its transactions that includes every acknowledged one.
//!
//! Some runs resize the redo log online all along (a thread growing and shrinking it while the
//! writers commit, so crashes land in every step of a resize), and some reopen with another
//! `log_capacity` (a resize right after recovery, which the second crash may interrupt).
//!
//! The workload and its verification are `common::workload`, shared with the fault campaign.
//! `EVENKEEL_CRASH_RUNS=N` sets the number of seeded runs (default 150); a failure prints the
//! seed, and `EVENKEEL_CRASH_SEED=S` replays one. Named regressions found by crashes are here too.

use crate::common::workload::{self, crash_opts, Progress};
use crate::common::{assert_check, opts, sim_db};
use evenkeel::io::sim::CrashMode;
use evenkeel::io::SimStorage;
use evenkeel::Database;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn worker(db: Database, t: u64, seed: u64, p: Arc<Progress>, stop: Arc<AtomicBool>) {
    let mut rng = SmallRng::seed_from_u64(seed ^ (t << 32));
    // the crash may come before this thread starts
    let (Ok(own), Ok(meta), Ok(idx)) = (db.table("own"), db.table("meta"), db.table("idx")) else {
        return;
    };
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut txn = db.begin();
        let r = (|| -> evenkeel::Result<()> {
            workload::txn_writes(&mut txn, &own, &meta, &idx, t, i, &mut rng)?;
            p.attempted[t as usize].store(i + 1, Ordering::SeqCst);
            std::mem::replace(&mut txn, db.begin()).commit()
        })();
        match r {
            Ok(()) => p.acked[t as usize].store(i + 1, Ordering::SeqCst),
            Err(e) if e.is_retryable() => panic!("no conflicts expected beyond waits: {e}"),
            Err(_) => return, // the disk crashed under us
        }
    }
}

#[derive(Default)]
struct Coverage {
    runs: u64,
    acked: u64,
    redo_applied_runs: u64,
    records_applied: u64,
    /// Page records recovery applied that compacted their page first.
    compactions_replayed: u64,
    reapplied_txns: u64,
    wrapped_runs: u64,
    /// Pages changed while being written before the crash (each moved up its flush list, so
    /// the checkpoint passed its old place: recovery must not need the redo before it).
    redirtied: u64,
    /// Online resizes that finished before the crash, and crashes that hit one under way.
    resizes: u64,
    crashes_mid_resize: u64,
    /// Runs whose recovered database held buffered changes (index table "idx"), and how many.
    change_buffer_runs: u64,
    change_buffer_entries: u64,
}

/// Grows and shrinks the log between 512K and 2M until the disk crashes or `stop`.
fn resizer(db: Database, seed: u64, stop: Arc<AtomicBool>, busy: Arc<AtomicBool>) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5e5e);
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let size = [512u64, 768, 1024, 2048][rng.gen_range(0..4)] * 1024;
        busy.store(true, Ordering::SeqCst);
        let r = db.resize_log_within(size, std::time::Duration::from_secs(2));
        busy.store(false, Ordering::SeqCst);
        match r {
            Ok(_) => done += 1,
            Err(evenkeel::Error::LogResize { .. }) => {}
            Err(_) => return done, // the disk crashed under us
        }
        std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..3000)));
    }
    done
}

fn one_run(seed: u64) -> Coverage {
    let mut rng = SmallRng::seed_from_u64(seed);
    let o = crash_opts(&mut rng);
    let sim = SimStorage::new();
    // Some runs on a disk whose fsyncs take a real device's time, so that pages change while
    // being written (instant syncs leave no window: 0 such pages in 1,000 runs).
    if rng.gen_bool(0.3) {
        sim.set_sync_latency(std::time::Duration::from_micros(rng.gen_range(100..1500)));
    }
    let db = workload::create_db(&sim, &o);
    let p = Arc::new(Progress::default());
    let stop = Arc::new(AtomicBool::new(false));
    let target = rng.gen_range(5..250u64);
    let handles: Vec<_> = (0..workload::THREADS)
        .map(|t| {
            let (db, p, stop) = (db.clone(), p.clone(), stop.clone());
            std::thread::spawn(move || worker(db, t, seed, p, stop))
        })
        .collect();
    let resizing = Arc::new(AtomicBool::new(false));
    let resize_thread = rng.gen_bool(0.3).then(|| {
        let (db, stop, busy) = (db.clone(), stop.clone(), resizing.clone());
        std::thread::spawn(move || resizer(db, seed, stop, busy))
    });
    while p.total_acked() < target {
        std::thread::yield_now();
    }
    let mode = match rng.gen_range(0..4) {
        0 => CrashMode::DropUnsynced,
        1 => CrashMode::TearLastWrite {
            file: None,
            keep_bytes: rng.gen_range(0..4096),
        },
        2 => CrashMode::KeepRandomSubset { seed },
        _ => CrashMode::Reorder { seed },
    };
    if std::env::var("EVENKEEL_CRASH_DEBUG").is_ok() {
        eprintln!("seed {seed}: crash {mode:?} after {target} acks");
    }
    let redirtied = db.status().buffer.pages_redirtied_in_write;
    sim.crash_with(mode);
    let mid_resize = resizing.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let resizes = resize_thread.map_or(0, |h| h.join().unwrap());
    drop(db);
    // sometimes reopen with another log_capacity: a resize right after recovery
    let mut o = o;
    if rng.gen_bool(0.15) {
        let size = [512u64, 1024, 2048][rng.gen_range(0..3)];
        o.set("log_capacity", &format!("{size}K")).unwrap();
    }
    // sometimes crash again right after recovery began writing
    if rng.gen_bool(0.25) {
        if let Ok(db) = Database::open_in(Arc::new(sim.clone()), o.clone()) {
            let extra = db.begin();
            drop(extra);
            if std::env::var("EVENKEEL_CRASH_DEBUG").is_ok() {
                eprintln!("seed {seed}: second crash after reopening");
            }
            sim.crash_with(CrashMode::KeepRandomSubset { seed: seed + 1 });
            drop(db);
        }
    }
    // Recovery sometimes runs with another write_io_threads: the doublewrite file's slot count
    // changes, and every slot written before the crash must still be read.
    if rng.gen_bool(0.3) {
        let wio = rng.gen_range(1..=8u64);
        o.set("write_io_threads", &wio.to_string()).unwrap();
    }
    let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap_or_else(|e| {
        panic!(
            "seed {seed}: recovery failed: {e}; files: {:?}",
            sim.durable_file_names()
        )
    });
    // buffered changes recovered, before the reads of verify merge them
    let ibuf_entries = db.status().change_buffer.entries;
    // every acknowledged commit present: the lower bound of each thread's prefix is its acks
    let lost = workload::verify(&db, &p, &p.acked()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(lost, 0, "seed {seed}");
    let st = db.status();
    let cov = Coverage {
        runs: 1,
        acked: p.total_acked(),
        redo_applied_runs: (st.recovery.page_records_applied > 0) as u64,
        records_applied: st.recovery.page_records_applied,
        compactions_replayed: st.recovery.page_compactions_replayed,
        reapplied_txns: st.recovery.transactions_reapplied,
        wrapped_runs: (st.recovery.end_lsn > st.log_capacity_bytes) as u64,
        redirtied,
        resizes,
        crashes_mid_resize: u64::from(mid_resize),
        change_buffer_runs: u64::from(ibuf_entries > 0),
        change_buffer_entries: ibuf_entries,
    };
    db.close().unwrap();
    cov
}

#[test]
fn crash_recover_verify_seeded() {
    let runs: u64 = std::env::var("EVENKEEL_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    if let Some(seed) = std::env::var("EVENKEEL_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        one_run(seed);
        return;
    }
    let failures = Mutex::new(Vec::new());
    let mut cov = Coverage::default();
    for seed in 0..runs {
        match std::panic::catch_unwind(|| one_run(seed)) {
            Ok(c) => {
                cov.runs += c.runs;
                cov.acked += c.acked;
                cov.redo_applied_runs += c.redo_applied_runs;
                cov.records_applied += c.records_applied;
                cov.compactions_replayed += c.compactions_replayed;
                cov.reapplied_txns += c.reapplied_txns;
                cov.wrapped_runs += c.wrapped_runs;
                cov.redirtied += c.redirtied;
                cov.resizes += c.resizes;
                cov.crashes_mid_resize += c.crashes_mid_resize;
                cov.change_buffer_runs += c.change_buffer_runs;
                cov.change_buffer_entries += c.change_buffer_entries;
            }
            Err(e) => {
                let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
                failures.lock().unwrap().push((seed, msg));
            }
        }
    }
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} of {runs} crash runs failed (replay with EVENKEEL_CRASH_SEED): {f:?}",
        f.len()
    );
    println!(
        "crash runs: {} passed; acknowledged commits checked: {}; runs whose recovery applied \
         redo: {} ({} page records, {} of them compactions); transactions re-applied: {}; runs past one log lap: {}; \
         pages changed while being written: {}; online log resizes: {} (crashes during one: \
         {}); runs that recovered buffered changes: {} ({} changes)",
        cov.runs,
        cov.acked,
        cov.redo_applied_runs,
        cov.records_applied,
        cov.compactions_replayed,
        cov.reapplied_txns,
        cov.wrapped_runs,
        cov.redirtied,
        cov.resizes,
        cov.crashes_mid_resize,
        cov.change_buffer_runs,
        cov.change_buffer_entries
    );
    // and the crashes must hit resizes under way, not only logs resized before
    assert!(
        runs < 100 || (cov.resizes > 0 && cov.crashes_mid_resize > 0),
        "resizes {}, crashes during one {}",
        cov.resizes,
        cov.crashes_mid_resize
    );
    // and the flush list's move of a page changed while being written (the fsync latency of
    // some runs makes it happen: 111 pages in 300 runs)
    assert!(
        runs < 100 || cov.redirtied > 0,
        "no page changed while being written in {runs} runs"
    );
    // and the change buffer must be in the crashes: changes buffered at the crash recovered
    assert!(
        runs < 100 || cov.change_buffer_runs > 0,
        "no run recovered buffered changes in {runs} runs"
    );
    // and redo must replay logged compactions (the workload's values change length)
    assert!(
        runs < 100 || cov.compactions_replayed > 0,
        "no run replayed a compaction in {runs} runs"
    );
    // the campaign must exercise recovery, not just reopen clean databases
    assert!(
        cov.redo_applied_runs * 2 >= cov.runs,
        "too few runs needed redo"
    );
}

/// Named regression for DDL acknowledged before its redo was durable (invariant 3: DDL returns
/// only after its redo is fsynced). Fixed in commit 7836920 ("DDL is durable before it
/// returns"), which also added the transaction tests that crash soon after creating their
/// tables; the commit names no run or seed. Before it, `create_table` and `drop_table` returned
/// with their redo still in the log buffer, so a crash right after the call undid them. The
/// minimal case: create a table, crash at once (every unsynced write dropped), reopen: the table
/// is there; drop it, crash at once, reopen: it is gone.
#[test]
fn regression_acknowledged_create_table_survives_a_crash() {
    let o = opts(4096, 64 * 4096);
    let (sim, db) = sim_db(o.clone());
    db.create_table("t").unwrap();
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
    assert_eq!(
        db.tables().unwrap(),
        ["t"],
        "an acknowledged create_table was lost in a crash"
    );
    db.drop_table("t").unwrap();
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert!(
        db.tables().unwrap().is_empty(),
        "an acknowledged drop_table was undone by a crash"
    );
    assert_check(&db);
}
