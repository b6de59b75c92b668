//! Transactions: deadlock, lock wait timeout, too-large transactions, rollback, each with its
//! error and no leak; the redo log wrapping many times with checkpoints keeping up; and a
//! COMMIT made durable by another thread's group commit but not yet applied at a crash,
//! re-applied by recovery.

use crate::common::*;
use evenkeel::io::sim::CrashMode;
use evenkeel::{Database, Error};
use std::ops::Bound;
use std::sync::{Arc, Barrier};

fn small_log_opts() -> evenkeel::Options {
    let mut o = opts(4096, 64 * 4096);
    o.set("log_file_size", "256K").unwrap();
    o.set("log_buffer_size", "256K").unwrap();
    o.set("lock_wait_timeout", "1").unwrap();
    o
}

#[test]
fn deadlock_aborts_one_and_the_other_commits() {
    let (_sim, db) = sim_db(small_log_opts());
    let t = db.create_table("t").unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = [(b"a", b"b"), (b"b", b"a")]
            .into_iter()
            .map(|(first, second)| {
                let (db, t, barrier) = (db.clone(), t.clone(), barrier.clone());
                s.spawn(move || {
                    let mut txn = db.begin();
                    txn.put(&t, first, b"1")?;
                    barrier.wait();
                    txn.put(&t, second, b"2")?;
                    txn.commit()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let deadlocks = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Deadlock { .. })))
        .count();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!((deadlocks, ok), (1, 1), "{results:?}");
    assert!(results
        .iter()
        .any(|r| r.as_ref().is_err_and(|e| e.is_retryable())));
    let st = db.status();
    assert_eq!(st.locks.deadlocks, 1);
    assert_eq!(st.locks.memory_used_bytes, 0, "locks leaked");
    // the winner's writes are both there
    let txn = db.begin();
    assert_eq!(txn.get(&t, b"b").unwrap().map(|v| v.len()), Some(1));
}

#[test]
fn lock_wait_timeout_names_the_limit() {
    let (_sim, db) = sim_db(small_log_opts());
    let t = db.create_table("t").unwrap();
    let mut holder = db.begin();
    holder.get_for_update(&t, b"k").unwrap();
    let mut waiter = db.begin();
    let err = waiter.put(&t, b"k", b"v").unwrap_err();
    assert!(matches!(err, Error::LockWaitTimeout { .. }), "{err}");
    assert!(err.to_string().contains('1'), "{err}");
    drop(waiter);
    holder.rollback();
    assert_eq!(db.status().locks.memory_used_bytes, 0);
    // after the holder is gone the key is free
    let mut txn = db.begin();
    txn.put(&t, b"k", b"v").unwrap();
    txn.commit().unwrap();
}

#[test]
fn too_large_transactions_are_refused_and_leave_nothing() {
    let mut o = small_log_opts();
    o.set("max_write_set_size", "64K").unwrap();
    let (_sim, db) = sim_db(o);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    let mut err = None;
    for i in 0..10_000u64 {
        if let Err(e) = txn.put(&t, &key16(i), &[7u8; 100]) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the write set limit must stop the transaction");
    assert!(
        matches!(err, Error::TransactionTooLarge { limit: 65536, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_write_set_size"));
    txn.rollback();
    // a write set under max_write_set_size but whose COMMIT exceeds a quarter of the log
    let mut o = small_log_opts();
    o.set("max_write_set_size", "1G").unwrap();
    let (_sim, db) = sim_db(o);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..2_000u64 {
        txn.put(&t, &key16(i), &[7u8; 200]).unwrap();
    }
    let err = txn.commit().unwrap_err();
    assert!(matches!(err, Error::TransactionTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("quarter of the redo log"), "{err}");
    let st = db.status();
    assert_eq!(st.locks.memory_used_bytes, 0, "locks leaked");
    assert_eq!(
        db.begin()
            .scan(&t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .count(),
        0,
        "nothing of a refused transaction is visible"
    );
}

#[test]
fn rollback_discards_writes_and_locks() {
    let (_sim, db) = sim_db(small_log_opts());
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.put(&t, b"x", b"1").unwrap();
    assert_eq!(txn.get(&t, b"x").unwrap(), Some(b"1".to_vec()));
    txn.rollback();
    assert_eq!(db.begin().get(&t, b"x").unwrap(), None);
    // an abandoned (dropped) transaction releases its locks too
    {
        let mut txn = db.begin();
        txn.put(&t, b"y", b"1").unwrap();
    }
    assert_eq!(db.status().locks.memory_used_bytes, 0);
    assert_eq!(db.status().txns.rollbacks, 1);
}

/// A 512 KiB log wraps dozens of times; the checkpoint keeps up and nothing stalls forever.
#[test]
fn log_wraps_many_times_with_checkpoints() {
    let o = small_log_opts();
    let (sim, db) = sim_db(o.clone());
    let t = db.create_table("t").unwrap();
    for round in 0..80u64 {
        let mut txn = db.begin();
        for i in 0..200u64 {
            // lengths change every round, so each update moves its cell (not an in-place
            // overwrite) and the log laps many times
            txn.put(&t, &key16(i), &val(round + i, 150 + (round % 5) as usize))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let st = db.status();
    assert!(
        st.lsn > 10 * st.log_capacity_bytes,
        "lsn {} capacity {}",
        st.lsn,
        st.log_capacity_bytes
    );
    assert!(st.checkpoints > 10, "{}", st.checkpoints);
    assert!(st.checkpoint_age_bytes <= st.log_capacity_bytes);
    drop(db);
    sim.crash();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let t = db.table("t").unwrap();
    // recovery replays the compactions the updates logged (each lengthened row moves its cell)
    let txn = db.begin();
    for i in 0..200u64 {
        assert_eq!(
            txn.get(&t, &key16(i)).unwrap(),
            Some(val(79 + i, 154)),
            "key {i}"
        );
    }
    assert_check(&db);
}

/// An update that lengthens a row moves its cell; in a full leaf that compacts the page every
/// few updates. The compaction is logged as such (a flag redo re-runs), not as the bytes of
/// every cell it moved: a round of such updates logs little more than the rows themselves.
#[test]
fn lengthening_updates_log_compactions_not_moved_cells() {
    let (_sim, db) = sim_db(opts(4096, 256 * 4096));
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..200u64 {
        txn.put(&t, &key16(i), &val(i, 150)).unwrap();
    }
    txn.commit().unwrap();
    for round in 1..=3u64 {
        let before = db.status().lsn;
        let mut txn = db.begin();
        for i in 0..200u64 {
            txn.put(&t, &key16(i), &val(i + round, 150 + round as usize))
                .unwrap();
        }
        txn.commit().unwrap();
        let per_update = (db.status().lsn - before) / 200;
        // the COMMIT record holds the row (~180 bytes), the apply the new cell and the slots
        // it shifts; a compaction logged as moved bytes added about half a page per update
        assert!(
            per_update < 900,
            "round {round}: {per_update} bytes of redo per update"
        );
    }
    assert_check(&db);
}

/// Transaction A applies a big write set slowly while B commits small ones: B's group commit
/// makes A's COMMIT durable before A has applied it. Crash then: recovery re-applies A whole.
#[test]
fn durable_commit_not_yet_applied_is_reapplied() {
    let mut reapplied = 0;
    for attempt in 0..40u64 {
        let o = small_log_opts();
        let (sim, db) = sim_db(o.clone());
        let t = db.create_table("t").unwrap();
        let c = db.create_table("c").unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        std::thread::scope(|s| {
            let (db2, c2, stop2) = (db.clone(), c.clone(), stop.clone());
            s.spawn(move || {
                let mut i = 0u64;
                while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut txn = db2.begin();
                    if txn.put(&c2, &key16(i), b"small").is_err() || txn.commit().is_err() {
                        return;
                    }
                    i += 1;
                }
            });
            let mut big = db.begin();
            for i in 0..300u64 {
                big.put(&t, &key16(i), &val(i, 80)).unwrap();
            }
            let (db3, sim3) = (db.clone(), sim.clone());
            let crasher = s.spawn(move || {
                // crash once the big transaction is part-way applied
                let target = 20 + attempt * 7;
                while db3.status().txns.rows_written < target {
                    std::thread::yield_now();
                }
                sim3.crash_with(CrashMode::DropUnsynced);
            });
            let _ = big.commit();
            crasher.join().unwrap();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        drop(db);
        let db = Database::open_in(Arc::new(sim), o).unwrap();
        let t = db.table("t").unwrap();
        let n = db
            .begin()
            .scan(&t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .count();
        assert!(
            n == 0 || n == 300,
            "attempt {attempt}: {n} of 300 rows: a half-applied transaction"
        );
        reapplied += db.status().recovery.transactions_reapplied;
        assert_check(&db);
        if reapplied > 0 {
            break;
        }
    }
    assert!(
        reapplied > 0,
        "no attempt produced a durable-but-unapplied COMMIT"
    );
}

/// The log's recorded geometry wins on open, as the page size does: a database created with
/// a 1 MiB log opens with default options.
#[test]
fn log_geometry_from_the_files_wins_on_open() {
    let mut o = opts(4096, 64 * 4096);
    o.set("log_file_size", "1M").unwrap();
    o.set("log_block_size", "4096").unwrap();
    let (sim, db) = sim_db(o);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.put(&t, b"k", b"v").unwrap();
    txn.commit().unwrap();
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim), opts(4096, 64 * 4096)).unwrap();
    assert_eq!(db.current_options().log_file_size, 1 << 20);
    assert_eq!(db.current_options().log_block_size, 4096);
    let t = db.table("t").unwrap();
    assert_eq!(db.begin().get(&t, b"k").unwrap(), Some(b"v".to_vec()));
}

/// The table of the outgrowing-apply tests: 40,000 rows of 8-byte keys (even numbers) loaded
/// in key order, so every 4 KiB leaf is full (about 110 rows), and the 350 odd keys of the
/// transaction that inserts one row into each of 350 leaves.
const LOADED_ROWS: u64 = 40_000;

fn outgrow_row(k: u64) -> ([u8; 8], [u8; 20]) {
    (k.to_be_bytes(), [7u8; 20])
}

fn outgrow_keys() -> Vec<u64> {
    (0..350u64).map(|j| 2 * (110 * j + 50) + 1).collect()
}

fn load_full_leaves(db: &Database) -> evenkeel::Table {
    load_full_leaves_into(db, "t")
}

fn load_full_leaves_into(db: &Database, name: &str) -> evenkeel::Table {
    let t = db.create_table(name).unwrap();
    for c in 0..100 {
        let mut txn = db.begin();
        for i in c * LOADED_ROWS / 100..(c + 1) * LOADED_ROWS / 100 {
            let (k, v) = outgrow_row(2 * i);
            txn.put(&t, &k, &v).unwrap();
        }
        txn.commit().unwrap();
    }
    t
}

fn commit_one_row_per_leaf(db: &Database, t: &evenkeel::Table) -> evenkeel::Result<()> {
    let mut txn = db.begin();
    for &k in &outgrow_keys() {
        let (k, v) = outgrow_row(k);
        txn.put(t, &k, &v)?;
    }
    txn.commit()
}

/// Rows of `t` from the outgrowing transaction's keys, and all rows.
fn outgrow_counts(db: &Database, t: &evenkeel::Table) -> (usize, usize) {
    let txn = db.begin();
    let new = outgrow_keys()
        .iter()
        .filter(|k| txn.get(t, &k.to_be_bytes()).unwrap().is_some())
        .count();
    let all = txn
        .scan(t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .count();
    (new, all)
}

/// A transaction whose apply logs far more than its commit estimated: one insert into each
/// full leaf of a table loaded in key order splits every leaf it touches (each split logs the
/// half page it moves). The estimate assumes amortized splits, and an applying transaction
/// pins the checkpoint at its COMMIT, so this apply alone needs more than the whole 512 KiB
/// log. The commit re-logs its remaining writes when its apply has spent its reservation
/// (a continuation of its COMMIT), so the checkpoint can move on: it commits, and a crash
/// right after recovers every row.
#[test]
fn an_apply_that_outgrows_its_estimate_continues_its_commit() {
    let o = small_log_opts();
    let (sim, db) = sim_db(o.clone());
    let t = load_full_leaves(&db);
    let splits = db.status().tree.page_splits;
    let lsn = db.status().lsn;
    commit_one_row_per_leaf(&db, &t).unwrap();
    let st = db.status();
    assert!(
        st.tree.page_splits - splits > 200,
        "the apply must split most leaves it touches: {} splits",
        st.tree.page_splits - splits
    );
    assert!(
        st.lsn - lsn > st.log_capacity_bytes,
        "the apply must log more than the log holds: {} bytes, capacity {}",
        st.lsn - lsn,
        st.log_capacity_bytes
    );
    assert!(st.txns.commit_continuations > 0, "{:?}", st.txns);
    drop(db);
    sim.crash();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(outgrow_counts(&db, &t), (350, LOADED_ROWS as usize + 350));
    assert_check(&db);
}

/// A power cut at every few writes or fsyncs of a commit that continues itself several times:
/// after recovery (which re-applies from the newest continuation whose ApplyDone is missing,
/// continuing it again where the log it re-applies into runs short)
/// the table holds all of the transaction's rows or none, all when the commit returned, and
/// `check` passes.
#[test]
fn a_power_cut_during_a_continued_commit_leaves_all_or_nothing() {
    let o = small_log_opts();
    let image = {
        let (sim, db) = sim_db(o.clone());
        load_full_leaves(&db);
        db.close().unwrap();
        durable_image(&sim)
    };
    let (mut runs, mut none, mut all, mut reapplied) = (0u64, 0u64, 0u64, 0u64);
    let mut continued_in_recovery = 0u64;
    let mut n = 0u64;
    loop {
        let sim = disk_from(&image);
        let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
        let t = db.table("t").unwrap();
        sim.power_cut_after(n);
        let acked = commit_one_row_per_leaf(&db, &t).is_ok();
        let _ = db.flush();
        let cut = sim.is_power_cut();
        drop(db);
        let db = crash_after_cut_and_reopen(&sim, n, o.clone());
        reapplied += db.status().recovery.transactions_reapplied;
        continued_in_recovery += u64::from(db.status().txns.commit_continuations > 0);
        let r = db.check().unwrap();
        assert!(r.is_ok(), "cut at write {n}: {:?}", r.problems);
        let t = db.table("t").unwrap();
        match outgrow_counts(&db, &t) {
            (350, c) if c == LOADED_ROWS as usize + 350 => all += 1,
            (0, c) if c == LOADED_ROWS as usize && !acked => none += 1,
            got => {
                panic!("cut at write {n}: (new rows, rows) {got:?}, commit acknowledged: {acked}")
            }
        }
        runs += 1;
        drop(db);
        if !cut {
            break;
        }
        assert!(runs < 300, "the commit never completed before the cut");
        n += 1 + n / 12;
    }
    eprintln!(
        "continued commit cut: {runs} cuts: none {none}, all {all}, re-applied {reapplied}, \
         continued by recovery {continued_in_recovery}"
    );
    assert!(none > 0 && all > 1, "none {none} all {all}");
    assert!(reapplied > 0, "no cut left a commit to re-apply");
    assert!(
        continued_in_recovery > 0,
        "no recovery had to continue the commit it re-applied"
    );
}

/// Several transactions that each outgrow their estimate, at once, in a log smaller than their
/// writes: each continues its commit (moving its pin) and takes a new reservation while the
/// others' pins hold the checkpoint. Every commit must go through; none may wait for room
/// that only a transaction queued behind it can free (`Durability::admit_continuation`).
#[test]
fn concurrent_commits_that_outgrow_their_estimates_all_go_through() {
    let o = small_log_opts();
    let (_sim, db) = sim_db(o);
    let tables: Vec<evenkeel::Table> = (0..4)
        .map(|i| load_full_leaves_into(&db, &format!("t{i}")))
        .collect();
    let results: Vec<evenkeel::Result<()>> = std::thread::scope(|s| {
        let hs: Vec<_> = tables
            .iter()
            .map(|t| {
                let db = db.clone();
                s.spawn(move || commit_one_row_per_leaf(&db, t))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        assert!(r.is_ok(), "a commit failed: {r:?}");
    }
    assert!(db.status().txns.commit_continuations >= 4);
    for t in &tables {
        assert_eq!(outgrow_counts(&db, t), (350, LOADED_ROWS as usize + 350));
    }
    assert_check(&db);
}
