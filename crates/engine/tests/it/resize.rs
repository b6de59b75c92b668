//! Online redo log resize (`log_capacity`, `Database::resize_log`): growing and shrinking
//! while writers commit, the log in use after each step (file sets, capacity), the resize at
//! open, bad sizes and a held-back checkpoint refused with the limit named, and a power cut at
//! every write of a resize leaving every acknowledged commit and one whole log. The crash
//! campaign (crash.rs) also resizes while it crashes.

use crate::common::{
    assert_check, crash_after_cut_and_reopen, disk_from, durable_image, key16, opts, val,
};
use evenkeel::io::{FileKind, SimStorage, Storage};
use evenkeel::{Database, Error, Options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const K: u64 = 1024;

fn resize_opts() -> Options {
    let mut o = opts(4096, 256 * 4096);
    o.set("log_file_size", "512K").unwrap();
    o.set("log_files_in_group", "2").unwrap();
    o.set("log_buffer_size", "256K").unwrap();
    o
}

fn log_files(sim: &SimStorage) -> Vec<String> {
    let mut v: Vec<String> = sim
        .durable_file_names()
        .into_iter()
        .filter(|n| n.starts_with("ib_logfile") || n.starts_with("ib_redo"))
        .collect();
    v.sort();
    v
}

/// Commits `n` rows of `len` bytes from `from`, one transaction each.
fn commit_rows(db: &Database, from: u64, n: u64, len: usize) {
    let t = db.table("t").unwrap();
    for i in from..from + n {
        let mut txn = db.begin();
        txn.put(&t, &key16(i), &val(i, len)).unwrap();
        txn.commit().unwrap();
    }
}

fn assert_rows(db: &Database, n: u64, len: usize, ctx: &str) {
    let t = db.table("t").unwrap();
    let txn = db.begin();
    for i in 0..n {
        assert_eq!(
            txn.get(&t, &key16(i)).unwrap(),
            Some(val(i, len)),
            "{ctx}: row {i}"
        );
    }
}

#[test]
fn grow_and_shrink_while_writers_commit_and_the_log_reopens_in_its_new_size() {
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    db.create_table("t").unwrap();
    assert_eq!(log_files(&sim), ["ib_logfile0", "ib_logfile1"]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, stop, acked) = (db.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut txn = db.begin();
                txn.put(&t, &key16(i), &val(i, 300)).unwrap();
                txn.commit().unwrap();
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    let mut capacities = vec![db.status().log_capacity_bytes];
    // grow, shrink below the start, grow again: each while the writer commits
    for size in [4096 * K, 512 * K, 2048 * K, 1024 * K] {
        let before = acked.load(Ordering::SeqCst);
        while acked.load(Ordering::SeqCst) < before + 200 {
            std::thread::yield_now();
        }
        let out = db.resize_log(size).unwrap();
        assert_eq!(out.new_capacity, db.status().log_capacity_bytes);
        assert!(out.age_at_switch <= out.new_capacity, "{out:?}");
        capacities.push(out.new_capacity);
        assert_eq!(db.current_options().log_capacity, size);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // each size is its own capacity, in the order asked
    assert!(capacities[1] > capacities[0] && capacities[2] < capacities[0]);
    assert!(capacities[3] > capacities[2] && capacities[4] < capacities[3]);
    // four resizes: back in the first set, 512K per file, the other set gone
    assert_eq!(log_files(&sim), ["ib_logfile0", "ib_logfile1"]);
    assert_eq!(sim.durable_len("ib_logfile0"), 512 * K);
    // set_option does the same; an odd number of resizes leaves the other set
    db.set_option("innodb_redo_log_capacity", "3M").unwrap();
    assert_eq!(log_files(&sim), ["ib_redo0", "ib_redo1"]);
    let n = acked.load(Ordering::SeqCst);
    assert_rows(&db, n, 300, "before reopen");
    assert_check(&db);
    let cap = db.status().log_capacity_bytes;
    db.close().unwrap();
    // the files' size wins at open, in whichever set the log is
    let db = Database::open_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    assert_eq!(db.status().log_capacity_bytes, cap);
    assert_rows(&db, n, 300, "after reopen");
    commit_rows(&db, n, 500, 300);
    // and a crash after the resize recovers from the new set
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    assert_rows(&db, n + 500, 300, "after a crash");
    assert_check(&db);
}

#[test]
fn a_log_capacity_that_differs_from_the_files_resizes_the_log_at_open() {
    let sim = SimStorage::new();
    let mut o = resize_opts();
    o.set("log_capacity", "2M").unwrap();
    let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
    db.create_table("t").unwrap();
    // at create, log_capacity sets the files' size
    assert_eq!(sim.durable_len("ib_logfile0"), 1024 * K);
    commit_rows(&db, 0, 300, 200);
    sim.crash();
    drop(db);
    // a restart with another capacity recovers, then resizes
    o.set("log_capacity", "1M").unwrap();
    let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
    assert_eq!(log_files(&sim), ["ib_redo0", "ib_redo1"]);
    assert_eq!(sim.durable_len("ib_redo0"), 512 * K);
    assert_rows(&db, 300, 200, "after the resize at open");
    db.close().unwrap();
    // a stray file of the set not in use (a removal that reached the disk in part) is removed
    // at open, whatever its index
    let f = sim.open("ib_logfile1", FileKind::Other, true).unwrap();
    f.write_at(b"stray", 0).unwrap();
    f.sync().unwrap();
    sim.sync_dir().unwrap();
    let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
    assert_eq!(log_files(&sim), ["ib_redo0", "ib_redo1"]);
    assert_rows(&db, 300, 200, "after a stray file");
    db.resize_log(2048 * K).unwrap();
    assert_eq!(log_files(&sim), ["ib_logfile0", "ib_logfile1"]);
    db.close().unwrap();
    o.set("log_capacity", "1M").unwrap();
    // the same capacity again: nothing to do
    let db = Database::open_in(Arc::new(sim.clone()), o).unwrap();
    assert_eq!(log_files(&sim), ["ib_redo0", "ib_redo1"]);
    db.close().unwrap();
}

#[test]
fn bad_sizes_and_a_held_back_checkpoint_are_refused_naming_the_limit() {
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    db.create_table("t").unwrap();
    let cap = db.status().log_capacity_bytes;
    // below 256K per file
    let e = db
        .set_option("log_capacity", "300K")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("log_capacity") && e.contains("at least 512K"),
        "{e}"
    );
    // 0 is not a size to resize to
    let e = db.set_option("log_capacity", "0").unwrap_err().to_string();
    assert!(e.contains("log_capacity"), "{e}");
    // not a size
    assert!(db.set_option("log_capacity", "lots").is_err());
    // a held-back checkpoint: the age cannot come under the new log's async point
    commit_rows(&db, 0, 400, 1000);
    db.flush().unwrap();
    let hold = db.hold_checkpoint();
    // past what a 512K log may start with, short of this log's async point
    let mut rows = 400;
    while db.status().checkpoint_age_pct < 60.0 {
        commit_rows(&db, rows, 1, 1000);
        rows += 1;
    }
    let e = db
        .resize_log_within(512 * K, Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(e, Error::LogResize { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("checkpoint age") && text.contains("log_capacity must hold"),
        "{text}"
    );
    // the log kept its size, and the new files are gone
    assert_eq!(db.status().log_capacity_bytes, cap);
    assert_eq!(log_files(&sim), ["ib_logfile0", "ib_logfile1"]);
    drop(hold);
    // released, the shrink goes through
    db.resize_log(512 * K).unwrap();
    assert!(db.status().log_capacity_bytes < cap);
    assert_rows(&db, rows, 1000, "after the refused and the done resize");
    assert_check(&db);
    db.close().unwrap();

    // the log buffer must fit in the new log: refused naming log_buffer_size
    let sim = SimStorage::new();
    let mut o = resize_opts();
    o.set("log_file_size", "2M").unwrap();
    o.set("log_buffer_size", "1M").unwrap();
    let db = Database::create_in(Arc::new(sim.clone()), o).unwrap();
    let e = db.resize_log(512 * K).unwrap_err().to_string();
    assert!(
        e.contains("log_capacity") && e.contains("log_buffer_size"),
        "{e}"
    );
    db.resize_log(3 * 1024 * K).unwrap();
}

/// A backup racing resizes: whichever way the race goes, the backup is whole or refused
/// naming the resize, and every resize is done or refused naming the backup. (Which way each
/// refusal goes is checked deterministically in wal's `a_copier_and_a_resize_exclude_each_other`.)
#[test]
fn a_backup_and_a_resize_exclude_each_other() {
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    db.create_table("t").unwrap();
    commit_rows(&db, 0, 2000, 200);
    let target = SimStorage::new();
    let started = Arc::new(AtomicBool::new(false));
    let resizer = {
        let (db, started) = (db.clone(), started.clone());
        std::thread::spawn(move || {
            let mut refused = 0;
            let mut done = 0;
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            for size in [2048 * K, 1024 * K, 2048 * K, 1024 * K] {
                match db.resize_log(size) {
                    Ok(_) => done += 1,
                    Err(Error::LogResize { reason, .. }) if reason.contains("backup") => {
                        refused += 1
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            (done, refused)
        })
    };
    started.store(true, Ordering::SeqCst);
    // a backup either runs whole or is refused while a resize replaces the files
    let backup = db.backup_to_storage(Arc::new(target.clone()));
    let (done, refused) = resizer.join().unwrap();
    assert_eq!(done + refused, 4);
    match backup {
        Ok(_) => {
            let copy = Database::open_in(Arc::new(target), resize_opts()).unwrap();
            assert_rows(&copy, 2000, 200, "the backup");
        }
        Err(e) => assert!(e.to_string().contains("resized"), "{e}"),
    }
    assert_rows(&db, 2000, 200, "the source");
}

/// A power cut at each mutating operation of a resize (file creation, copy writes, fsyncs, the
/// slot writes, the removal of the old set), with writers committing: the reopened database
/// has every acknowledged commit, passes check, and its log is the old size or the new one.
#[test]
fn a_power_cut_at_any_write_of_a_resize_keeps_every_commit_and_one_whole_log() {
    let base = SimStorage::new();
    {
        let db = Database::create_in(Arc::new(base.clone()), resize_opts()).unwrap();
        db.create_table("t").unwrap();
        commit_rows(&db, 0, 500, 400);
        // leave redo to recover: no clean shutdown
        base.crash();
    }
    let image = durable_image(&base);
    let mut new_cap = 0u64;
    let (mut outcomes_old, mut outcomes_new, mut runs) = (0, 0, 0);
    let mut n = 0u64;
    loop {
        let sim = disk_from(&image);
        let db = Database::open_in(Arc::new(sim.clone()), resize_opts()).unwrap();
        let before = db.status().log_capacity_bytes;
        // redo since the checkpoint for the resize to copy
        commit_rows(&db, 500, 300, 400);
        let acked = Arc::new(AtomicU64::new(800));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(t) = db.table("t") else { return };
                for i in 800u64.. {
                    let mut txn = db.begin();
                    if stop.load(Ordering::Relaxed)
                        || txn
                            .put(&t, &key16(i), &val(i, 400))
                            .and_then(|()| txn.commit())
                            .is_err()
                    {
                        return;
                    }
                    acked.store(i + 1, Ordering::SeqCst);
                }
            })
        };
        sim.power_cut_after(n);
        // shrink: blocks to copy, pages to write back first
        let resized = db.resize_log(640 * K);
        let cut = sim.is_power_cut();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let acked = acked.load(Ordering::SeqCst);
        drop(db);
        let db = crash_after_cut_and_reopen(&sim, n, resize_opts());
        assert_rows(&db, acked, 400, &format!("cut at write {n}"));
        assert_check(&db);
        let cap = db.status().log_capacity_bytes;
        let files = log_files(&sim);
        if cap == before {
            outcomes_old += 1;
            assert!(
                resized.is_err(),
                "cut at write {n}: a finished resize undone"
            );
            assert_eq!(files, ["ib_logfile0", "ib_logfile1"], "cut at write {n}");
        } else {
            new_cap = cap;
            outcomes_new += 1;
            assert_eq!(files, ["ib_redo0", "ib_redo1"], "cut at write {n}");
        }
        drop(db);
        runs += 1;
        if !cut {
            assert!(resized.is_ok());
            break;
        }
        assert!(runs < 600, "the resize never completed before the cut");
        n += 1 + n / 24;
    }
    eprintln!(
        "resize power cuts: {runs} runs; old log in use {outcomes_old}, new log ({new_cap} \
         bytes) {outcomes_new}"
    );
    assert!(outcomes_old > 0 && outcomes_new > 0);
}

/// A write or fsync of the new files that fails (EIO, a full disk) abandons the resize before
/// the switch: the error names the file, the old log stays in use, the new files are removed,
/// writes go on, and a later resize succeeds.
#[test]
fn a_failed_write_of_the_new_files_abandons_the_resize_and_the_old_log_goes_on() {
    use evenkeel::io::sim::{Fault, FaultKind, FaultOp};
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    db.create_table("t").unwrap();
    commit_rows(&db, 0, 300, 400);
    let cap = db.status().log_capacity_bytes;
    let mut rows = 300;
    // a full disk at the second file's header, EIO at the first's, and EIO at the fsync that
    // makes the copied blocks durable before the switch (each file's second fsync)
    for (file, op, kind, after) in [
        ("ib_redo1", FaultOp::Write, FaultKind::Enospc, 0),
        ("ib_redo0", FaultOp::Write, FaultKind::Eio, 0),
        ("ib_redo1", FaultOp::Sync, FaultKind::Eio, 1),
    ] {
        sim.inject(Fault {
            file: Some(file.into()),
            op,
            after,
            kind,
            persistent: false,
        });
        let e = db.resize_log(2048 * K).unwrap_err().to_string();
        assert!(e.contains(file), "{op:?} {kind:?}: {e}");
        sim.clear_faults();
        assert_eq!(db.status().log_capacity_bytes, cap);
        assert_eq!(log_files(&sim), ["ib_logfile0", "ib_logfile1"]);
        commit_rows(&db, rows, 100, 400);
        rows += 100;
    }
    db.resize_log(2048 * K).unwrap();
    assert!(db.status().log_capacity_bytes > cap);
    commit_rows(&db, rows, 100, 400);
    rows += 100;
    sim.crash();
    drop(db);
    let db = Database::open_in(Arc::new(sim.clone()), resize_opts()).unwrap();
    assert_rows(
        &db,
        rows,
        400,
        "after the failed resizes, one done, and a crash",
    );
    assert_check(&db);
}
