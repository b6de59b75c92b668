//! The change buffer (btree/ibuf.rs) through the API: puts and deletes to an index table whose
//! leaves are not in the buffer pool are recorded without reading the leaf; gets, scans and
//! `check` see them; a crash keeps them (they are pages through redo); a clean close merges
//! them all; the background merge empties the buffer; the options do what they say. A model
//! property test runs random puts, deletes, gets and scans of an index table while a second
//! table keeps pushing its leaves out of a small pool.

use crate::common::*;
use evenkeel::{Database, Error, Options, Table};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

/// Rows of the churn table (1,000 bytes each: about 100 pages).
const CHURN_ROWS: u64 = 400;

/// 4 KiB pages and a 64-page pool (the least): the tables below do not fit, so leaves leave
/// the pool.
fn small_opts() -> Options {
    let mut o = opts(4096, 64 * 4096);
    o.set("change_buffer_max_size", "50").unwrap();
    // no background merge while the buffer is under half of change_buffer_max_size (past it
    // the merge runs whatever this says): the tests decide when changes are merged
    o.set("change_buffer_merge_pct", "0").unwrap();
    // a page read twice is made young at once, so reading each churn row twice pushes the
    // index table's leaves out
    o.set("old_blocks_time", "0").unwrap();
    // the whole file is a few extents: read-ahead would bring every leaf back at the first
    // read of one
    o.set("read_ahead", "none").unwrap();
    o
}

/// The key of `i` in the index table: keys spread in a non-sequential order fill leaves about
/// half (sequential keys fill them, and a full leaf takes no buffered insert).
fn ikey(i: u64) -> Vec<u8> {
    key16(i)
}

/// `n` even keys of the index table, committed in a scrambled order, and a plain table
/// "churn" of about 100 pages.
fn fill(db: &Database, idx: &Table, n: u64) -> BTreeSet<Vec<u8>> {
    let mut model = BTreeSet::new();
    let order: Vec<u64> = (0..n).map(|i| (i * 7919) % n).collect();
    for chunk in order.chunks(500) {
        let mut txn = db.begin();
        for &i in chunk {
            txn.put(idx, &ikey(2 * i), &[]).unwrap();
            model.insert(ikey(2 * i));
        }
        txn.commit().unwrap();
    }
    let churn = db.create_table_if_missing("churn").unwrap();
    // in commits of 50 rows, which a 2 x 256 KiB log takes
    for chunk in (0..CHURN_ROWS).collect::<Vec<_>>().chunks(50) {
        let mut txn = db.begin();
        for &i in chunk {
            txn.put(&churn, &key16(i), &val(i, 1000)).unwrap();
        }
        txn.commit().unwrap();
    }
    model
}

/// A database over a simulated disk with index table "idx" holding 3,000 keys: the disk, the
/// database, the table, the key count and the model of its keys.
fn filled(
    o: Options,
) -> (
    evenkeel::io::SimStorage,
    Database,
    Table,
    u64,
    BTreeSet<Vec<u8>>,
) {
    let (sim, db) = sim_db(o);
    let idx = db.create_index_table("idx").unwrap();
    let n = 3000;
    let model = fill(&db, &idx, n);
    (sim, db, idx, n, model)
}

/// Writes every dirty page, then reads every row of the churn table twice (made young at once:
/// old_blocks_time 0): the index table's leaves leave the pool.
fn churn(db: &Database) {
    // dirty pages stay until written: write them all, so the leaves can leave
    db.flush().unwrap();
    let churn = db.table("churn").unwrap();
    let txn = db.begin();
    for i in 0..CHURN_ROWS {
        for _ in 0..2 {
            assert!(txn.get(&churn, &key16(i)).unwrap().is_some());
        }
    }
}

fn all_keys(db: &Database, idx: &Table) -> BTreeSet<Vec<u8>> {
    db.begin()
        .scan(idx, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            assert!(v.is_empty(), "an index table's value is empty");
            k
        })
        .collect()
}

/// Puts odd keys and deletes even ones (every 5th) after the leaves left the pool.
fn change(db: &Database, idx: &Table, n: u64, model: &mut BTreeSet<Vec<u8>>, salt: u64) {
    change_some(db, idx, n, model, salt, true, true)
}

/// As `change`, only the puts or only the deletes (a change applied directly reads its leaf
/// in, and the other kind to that leaf then finds it resident).
fn change_some(
    db: &Database,
    idx: &Table,
    n: u64,
    model: &mut BTreeSet<Vec<u8>>,
    salt: u64,
    puts: bool,
    deletes: bool,
) {
    let mut txn = db.begin();
    for i in (salt % 5..n).step_by(5) {
        let odd = ikey(2 * i + 1);
        if puts && model.insert(odd.clone()) {
            txn.put(idx, &odd, &[]).unwrap();
        }
        let even = ikey(2 * ((i + salt) % n));
        if deletes && model.remove(&even) {
            txn.delete(idx, &even).unwrap();
        }
    }
    txn.commit().unwrap();
}

#[test]
fn changes_to_leaves_not_in_the_pool_are_buffered_and_reads_see_them() {
    let (_sim, db, idx, n, mut model) = filled(small_opts());
    churn(&db);
    change(&db, &idx, n, &mut model, 0);
    let st = db.status().change_buffer;
    assert!(st.inserts_buffered > 0, "no insert buffered: {st:?}");
    assert!(st.deletes_buffered > 0, "no delete buffered: {st:?}");
    assert!(st.entries > 0 && st.pages_with_changes > 0, "{st:?}");
    assert!(st.tree_pages >= 1);
    // check sees the buffered changes against their leaves (C9) without merging them
    let r = assert_check(&db);
    assert!(r.change_buffer.as_ref().unwrap().rows > 0);
    // check merged nothing (a merge it made would be one by read; the background merge may
    // run meanwhile where the buffer is past half its max, and counts as background)
    assert_eq!(db.status().change_buffer.merges_by_read, st.merges_by_read);
    // point reads merge the leaves they reach
    for i in 0..2 * n {
        let got = db.begin().get(&idx, &ikey(i)).unwrap();
        assert_eq!(got.is_some(), model.contains(&ikey(i)), "key {i}");
    }
    let after = db.status().change_buffer;
    assert!(after.merges_by_read > 0 && after.merged > 0, "{after:?}");
    assert_eq!(after.contract_violations, 0);
    assert_eq!(all_keys(&db, &idx), model);
    // again, read back by scans only (reverse ones too)
    churn(&db);
    change(&db, &idx, n, &mut model, 3);
    assert!(db.status().change_buffer.entries > 0);
    let rev: Vec<Vec<u8>> = db
        .begin()
        .scan(&idx, Bound::Unbounded, Bound::Unbounded, true)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert!(rev.iter().rev().eq(model.iter()));
    assert_eq!(all_keys(&db, &idx), model);
    assert_check(&db);
}

#[test]
fn a_clean_close_merges_everything_and_a_crash_keeps_the_buffered_changes() {
    let o = small_opts();
    let (sim, db, idx, n, mut model) = filled(o.clone());
    churn(&db);
    change(&db, &idx, n, &mut model, 1);
    assert!(db.status().change_buffer.entries > 0);
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
    assert_eq!(db.status().change_buffer.entries, 0, "close merged them");
    let idx = db.table("idx").unwrap();
    assert!(idx.is_index());
    assert_eq!(all_keys(&db, &idx), model);
    // buffered changes at a crash: redo brings them back, reads merge them
    churn(&db);
    change(&db, &idx, n, &mut model, 2);
    churn(&db);
    change(&db, &idx, n, &mut model, 4);
    let pending = db.status().change_buffer.entries;
    assert!(pending > 0);
    // A commit is durable up to its COMMIT record; its apply's redo (the change buffer's
    // entries) is covered by the next flush of the log. Without one, recovery re-applies the
    // commit instead, and a re-apply after an open (free space not known yet) applies the
    // inserts directly. One more commit makes the entries durable, so the crash keeps them.
    let churn_t = db.table("churn").unwrap();
    let mut txn = db.begin();
    txn.put(&churn_t, b"last", b"1").unwrap();
    txn.commit().unwrap();
    sim.crash();
    drop(db);
    sim.restart();
    let db = Database::open_in(Arc::new(sim.clone()), o).unwrap();
    let st = db.status().change_buffer;
    assert!(st.entries > 0, "the buffered changes survive the crash");
    assert_check(&db);
    let idx = db.table("idx").unwrap();
    assert_eq!(all_keys(&db, &idx), model);
    assert_eq!(db.status().change_buffer.contract_violations, 0);
}

#[test]
fn a_clean_close_merges_into_a_log_at_its_sync_point() {
    // The close's merges need more log than is left, and each group of them reserves its
    // room before it latches a page. This checks that such a close completes and merges
    // everything; the failure it guards against (an unreserved merge that found the log full
    // while it held the change buffer's leaf, the oldest dirty page, until the engine gave up
    // after 30 s) needed more merging at close than a log's whole capacity, and was seen in
    // the workbench (docs/measurements.md, "A writer that waits for log room"), not here.
    let mut o = small_opts();
    o.set("log_file_size", "256K").unwrap();
    o.set("log_files_in_group", "2").unwrap();
    // a pool of 128 pages, whose change buffer (half of it) holds more than the log has left
    // at 90% to merge at close
    o.set("buffer_pool_size", "512K").unwrap();
    // a page cleaner that leaves the log near its sync point
    o.set("adaptive_flushing", "fixed").unwrap();
    o.set("io_capacity", "100").unwrap();
    // three times the keys of `filled`, so the index table does not fit the larger pool and
    // has the leaves to take that many buffered changes (a leaf takes buffered inserts only up
    // to its free space)
    let (sim, db) = sim_db(o.clone());
    let idx = db.create_index_table("idx").unwrap();
    let n = 9000;
    let mut model = fill(&db, &idx, n);
    for salt in 1..=6 {
        churn(&db);
        // in commits a 2 x 256 KiB log takes
        let mut i = salt % 5;
        while i < n {
            let mut txn = db.begin();
            for _ in 0..40 {
                let odd = ikey(2 * i + 1);
                if model.insert(odd.clone()) {
                    txn.put(&idx, &odd, &[]).unwrap();
                }
                let even = ikey(2 * ((i + salt) % n));
                if model.remove(&even) {
                    txn.delete(&idx, &even).unwrap();
                }
                i += 5;
            }
            txn.commit().unwrap();
        }
    }
    let entries = db.status().change_buffer.entries;
    assert!(entries > 1000, "{entries} changes buffered");
    // rewrite churn rows until the log is past 90% of its capacity
    let churn_t = db.table("churn").unwrap();
    let mut k = 0;
    while db.status().checkpoint_age_pct < 90.0 {
        let mut txn = db.begin();
        for _ in 0..10 {
            txn.put(&churn_t, &key16(k % CHURN_ROWS), &val(k, 1000))
                .unwrap();
            k += 1;
        }
        txn.commit().unwrap();
        assert!(k < 100_000, "the log never filled");
    }
    let st = db.status();
    let lsn = st.lsn;
    let left = st.log_capacity_bytes - st.checkpoint_age_bytes;
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let st = db.status();
    assert_eq!(st.change_buffer.entries, 0, "close merged them");
    assert!(
        st.lsn - lsn > left,
        "the close logged {} bytes, not more than the {left} left in the log",
        st.lsn - lsn
    );
    let idx = db.table("idx").unwrap();
    assert_eq!(all_keys(&db, &idx), model);
    assert_check(&db);
}

#[test]
fn the_background_merge_empties_the_buffer() {
    let (_sim, db, idx, n, mut model) = filled(small_opts());
    churn(&db);
    change(&db, &idx, n, &mut model, 0);
    assert!(db.status().change_buffer.entries > 0);
    // 100% of io_capacity (100 pages/s): a few dozen leaves take well under the wait
    db.set_option("change_buffer_merge_pct", "100").unwrap();
    let start = std::time::Instant::now();
    while db.status().change_buffer.entries > 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the background merge did not empty the buffer: {:?}",
            db.status().change_buffer
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let st = db.status().change_buffer;
    assert!(st.merges_by_background > 0, "{st:?}");
    assert_eq!(st.pages_with_changes, 0);
    assert_eq!(all_keys(&db, &idx), model);
    assert_check(&db);
}

/// The background merge takes its log space in line with the transactions: with four writers
/// keeping a 2 x 1 MiB log full (commits wait for room again and again), it empties the
/// buffer, and a merge waiting at the head of the admission queue neither deadlocks with the
/// writers queued behind it nor stops them.
#[test]
fn the_background_merge_gets_log_space_while_writers_wait_for_it() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let mut o = small_opts();
    o.set("log_buffer_size", "512K").unwrap();
    let (_sim, db, idx, n, mut model) = filled(o);
    churn(&db);
    change(&db, &idx, n, &mut model, 0);
    // the fill's churn commit needs a larger log than the writers below should find
    db.resize_log(2 << 20).unwrap();
    let buffered = db.status().change_buffer.entries;
    assert!(buffered > 0);
    let plain = db.create_table("plain").unwrap();
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    /// Stops the writers when the checks end, failed ones too (the scope joins them).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let _stop_writers = StopOnDrop(&stop);
        for th in 0..4u64 {
            let (db, plain, stop, commits) = (&db, &plain, &stop, &commits);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut txn = db.begin();
                    for j in 0..100 {
                        let k = (th * 1_000_003 + i * 7_919 + j * 104_729) % 3_000;
                        // a new value each time: an unchanged one logs next to nothing
                        txn.put(plain, &key16(k), &val(k + i + 1, 400)).unwrap();
                    }
                    txn.commit().unwrap();
                    commits.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        let waits = || db.status().flush.room_waits + db.status().flush.log_space_waits;
        let secs = std::time::Duration::from_secs;
        // The premise: the writers have filled the log and wait for room. How many commits
        // that takes depends on how fast the page cleaner runs beside them (on a busy machine
        // it can be many), so wait for the first wait, not for a number of commits.
        let start = std::time::Instant::now();
        while commits.load(Ordering::Relaxed) < 20 || waits() == 0 {
            assert!(
                start.elapsed() < secs(30),
                "the writers did not fill the log in 30 s: {:?}",
                db.status().flush
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let waits_before = waits();
        db.set_option("change_buffer_merge_pct", "100").unwrap();
        let start = std::time::Instant::now();
        while db.status().change_buffer.entries > 0 {
            assert!(
                start.elapsed() < secs(30),
                "the background merge did not empty the buffer while writers waited: {:?}",
                db.status().change_buffer
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The writers are not stopped by the merge: they still find the log full and wait
        // for room after it (a merge that held the admission queue would stop them here).
        let start = std::time::Instant::now();
        while waits() == waits_before {
            assert!(
                start.elapsed() < secs(30),
                "the writers did not find the log full again in 30 s after the merge: {:?}",
                db.status().flush
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    let st = db.status().change_buffer;
    assert!(st.merges_by_background > 0, "{st:?}");
    assert_eq!(all_keys(&db, &idx), model);
    assert_check(&db);
}

#[test]
fn options_turn_buffering_off_by_kind_and_by_size() {
    let (_sim, db, idx, n, mut model) = filled(small_opts());
    // none: everything applied directly
    db.set_option("change_buffering", "none").unwrap();
    churn(&db);
    change(&db, &idx, n, &mut model, 0);
    let st = db.status().change_buffer;
    assert_eq!((st.inserts_buffered, st.deletes_buffered), (0, 0));
    // deletes only
    db.set_option("change_buffering", "deletes").unwrap();
    churn(&db);
    change_some(&db, &idx, n, &mut model, 1, false, true);
    let st = db.status().change_buffer;
    assert_eq!(st.inserts_buffered, 0);
    assert!(st.deletes_buffered > 0, "{st:?}");
    // inserts only
    db.set_option("change_buffering", "inserts").unwrap();
    churn(&db);
    change_some(&db, &idx, n, &mut model, 2, true, false);
    let st2 = db.status().change_buffer;
    assert!(st2.inserts_buffered > 0, "{st2:?}");
    assert_eq!(st2.deletes_buffered, st.deletes_buffered);
    // a max size of 0: full from the start, nothing more buffered
    db.set_option("change_buffering", "all").unwrap();
    db.set_option("change_buffer_max_size", "0").unwrap();
    churn(&db);
    change(&db, &idx, n, &mut model, 3);
    let st3 = db.status().change_buffer;
    assert_eq!(
        st3.inserts_buffered + st3.deletes_buffered,
        st2.inserts_buffered + st2.deletes_buffered
    );
    assert!(st3.full_skips > 0);
    assert_eq!(db.status().change_buffer_max_pages, 0);
    assert_eq!(all_keys(&db, &idx), model);
    assert!(matches!(
        db.set_option("change_buffering", "some"),
        Err(Error::InvalidOption { .. })
    ));
    assert!(matches!(
        db.set_option("change_buffer_max_size", "51"),
        Err(Error::InvalidOption { .. })
    ));
    assert_check(&db);
}

#[test]
fn an_index_table_takes_empty_values_only_and_keeps_its_kind() {
    let o = small_opts();
    let (sim, db) = sim_db(o.clone());
    let idx = db.create_index_table("idx").unwrap();
    let plain = db.create_table("plain").unwrap();
    assert!(idx.is_index() && !plain.is_index());
    let mut txn = db.begin();
    let e = txn.put(&idx, b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::IndexValueNotEmpty { len: 1, .. }), "{e}");
    assert!(e.to_string().contains("idx"), "{e}");
    txn.put(&idx, b"k", &[]).unwrap();
    txn.commit().unwrap();
    assert_eq!(db.begin().get(&idx, b"k").unwrap(), Some(Vec::new()));
    // create_index_table_if_missing returns the existing table
    assert_eq!(
        db.create_index_table_if_missing("idx").unwrap().id(),
        idx.id()
    );
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert!(db.table("idx").unwrap().is_index());
    assert!(!db.table("plain").unwrap().is_index());
    assert_eq!(db.tables().unwrap(), vec!["idx", "plain"]);
}

#[test]
fn a_broken_contract_is_counted_and_the_leaf_ends_as_the_change_says() {
    let (_sim, db, idx, n, mut model) = filled(small_opts());
    churn(&db);
    // put keys the table holds, delete keys it does not hold
    let mut txn = db.begin();
    for i in (0..n).step_by(3) {
        txn.put(&idx, &ikey(2 * i), &[]).unwrap();
        txn.delete(&idx, &ikey(2 * i + 1)).unwrap();
    }
    txn.commit().unwrap();
    let buffered = {
        let st = db.status().change_buffer;
        st.inserts_buffered + st.deletes_buffered
    };
    assert!(buffered > 0);
    model.extend((0..n).step_by(3).map(|i| ikey(2 * i)));
    assert_eq!(all_keys(&db, &idx), model);
    assert!(db.status().change_buffer.contract_violations > 0);
    assert_check(&db);
}

/// A dropped index table's buffered changes go with it.
#[test]
fn dropping_an_index_table_discards_its_buffered_changes() {
    let (_sim, db, idx, n, mut model) = filled(small_opts());
    churn(&db);
    change(&db, &idx, n, &mut model, 0);
    assert!(db.status().change_buffer.entries > 0);
    db.drop_table("idx").unwrap();
    let st = db.status().change_buffer;
    assert_eq!((st.entries, st.pages_with_changes), (0, 0));
    let r = assert_check(&db);
    assert_eq!(r.change_buffer.unwrap().rows, 0);
}

#[derive(Debug, Clone)]
enum Op {
    /// Put the key if the committed table lacks it, else delete it (once per transaction).
    Toggle(u16),
    Get(u16),
    Scan(u16, u16, bool),
    /// Read the churn table: the index table's leaves leave the pool.
    Churn,
    Commit,
    Rollback,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u16..3000).prop_map(Op::Toggle),
        3 => (0u16..3000).prop_map(Op::Get),
        1 => (0u16..3000, 0u16..3000, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a, b, r)),
        2 => Just(Op::Churn),
        3 => Just(Op::Commit),
        1 => Just(Op::Rollback),
        1 => Just(Op::Reopen),
    ]
}

/// Runs `ops` against the model; returns the change buffer's counters since the last open.
fn run_model(ops: Vec<Op>) -> evenkeel::btree::ChangeBufferCounts {
    let o = small_opts();
    let (sim, mut db) = sim_db(o.clone());
    let mut idx = db.create_index_table("idx").unwrap();
    let mut committed = fill(&db, &idx, 1500);
    let mut pending = committed.clone();
    let mut touched = BTreeSet::new();
    let mut txn = db.begin();
    churn(&db);
    for op in ops {
        match op {
            Op::Toggle(k) => {
                let k = ikey(u64::from(k));
                // the contract: a put of an absent key, a delete of a present one, as the
                // committed table stands (a key once per transaction)
                if touched.insert(k.clone()) {
                    if committed.contains(&k) {
                        txn.delete(&idx, &k).unwrap();
                        pending.remove(&k);
                    } else {
                        txn.put(&idx, &k, &[]).unwrap();
                        pending.insert(k);
                    }
                }
            }
            Op::Get(k) => {
                let k = ikey(u64::from(k));
                let want = pending.contains(&k).then(Vec::new);
                assert_eq!(txn.get(&idx, &k).unwrap(), want);
            }
            Op::Scan(a, b, rev) => {
                let (lo, hi) = (ikey(u64::from(a)), ikey(u64::from(b)));
                let got: Vec<Vec<u8>> = txn
                    .scan(
                        &idx,
                        Bound::Included(&lo[..]),
                        Bound::Excluded(&hi[..]),
                        rev,
                    )
                    .unwrap()
                    .map(|r| r.unwrap().0)
                    .collect();
                let mut want: Vec<Vec<u8>> = if lo < hi {
                    pending.range(lo..hi).cloned().collect()
                } else {
                    Vec::new()
                };
                if rev {
                    want.reverse();
                }
                assert!(got == want, "scan mismatch");
            }
            Op::Churn => churn(&db),
            Op::Commit => {
                std::mem::replace(&mut txn, db.begin()).commit().unwrap();
                committed = pending.clone();
                touched.clear();
            }
            Op::Rollback => {
                std::mem::replace(&mut txn, db.begin()).rollback();
                pending = committed.clone();
                touched.clear();
            }
            Op::Reopen => {
                std::mem::replace(&mut txn, db.begin()).commit().unwrap();
                committed = pending.clone();
                touched.clear();
                db.close().unwrap();
                db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
                idx = db.table("idx").unwrap();
                txn = db.begin();
            }
        }
    }
    txn.commit().unwrap();
    assert_check(&db);
    assert!(
        all_keys(&db, &idx) == pending,
        "final contents differ from the model"
    );
    let st = db.status().change_buffer;
    assert_eq!(st.contract_violations, 0);
    st
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn an_index_table_agrees_with_a_set_model(ops in prop::collection::vec(op(), 1..400)) {
        run_model(ops);
    }
}

/// The model with a fixed sequence long enough that changes are buffered and merged by reads,
/// so the property test above is known to exercise the change buffer.
#[test]
fn the_model_sequence_buffers_and_merges() {
    let mut ops = Vec::new();
    for round in 0..6u16 {
        ops.push(Op::Churn);
        for k in 0..200u16 {
            ops.push(Op::Toggle((k * 13 + round * 7) % 3000));
        }
        ops.push(Op::Commit);
        ops.push(Op::Get(round * 11));
        ops.push(Op::Scan(0, 3000, round % 2 == 0));
    }
    let st = run_model(ops);
    assert!(
        st.inserts_buffered > 0 && st.deletes_buffered > 0 && st.merges_by_read > 0,
        "{st:?}"
    );
}

/// A power cut at every n-th write or fsync from the start of a commit whose changes are
/// buffered, through the reads that merge them and the write-back of every page: after
/// recovery (which re-applies the commit when its COMMIT is durable and its ApplyDone is not,
/// buffering again what it buffers) the index table is the state before the commit or after
/// it, after it when the commit returned, and `check` passes.
#[test]
fn a_power_cut_at_any_write_of_a_buffered_commit_and_its_merges_leaves_all_or_nothing() {
    let o = small_opts();
    let n_keys = 1500;
    let (mut before_runs, mut after_runs, mut runs, mut buffered_runs) = (0, 0, 0, 0);
    let mut reapplied = 0;
    let mut n = 0u64;
    loop {
        let (sim, db) = sim_db(o.clone());
        let idx = db.create_index_table("idx").unwrap();
        let before = fill(&db, &idx, n_keys);
        churn(&db);
        let mut after = before.clone();
        sim.power_cut_after(n);
        let mut txn = db.begin();
        for i in (0..n_keys).step_by(7) {
            let odd = ikey(2 * i + 1);
            after.insert(odd.clone());
            txn.put(&idx, &odd, &[]).unwrap();
            let even = ikey(2 * ((i + 3) % n_keys));
            if after.remove(&even) {
                txn.delete(&idx, &even).unwrap();
            }
        }
        let acked = txn.commit().is_ok();
        buffered_runs += u64::from(db.status().change_buffer.entries > 0);
        // the merges (reads) and the write-back of every page, under the same cut
        let _ = db.begin().get(&idx, &ikey(1));
        let _ = db
            .begin()
            .scan(&idx, Bound::Unbounded, Bound::Unbounded, false)
            .map(|s| s.count());
        let _ = db.flush();
        let cut = sim.is_power_cut();
        drop(db);
        let db = crash_after_cut_and_reopen(&sim, n, o.clone());
        reapplied += db.status().recovery.transactions_reapplied;
        let r = db.check().unwrap();
        assert!(r.is_ok(), "cut at write {n}: {:?}", r.problems);
        let idx = db.table("idx").unwrap();
        let got = all_keys(&db, &idx);
        if got == after {
            after_runs += 1;
        } else {
            assert!(
                !acked && got == before,
                "cut at write {n}: the index is neither the state before the commit nor after \
                 it (commit acknowledged: {acked}; {} keys, before {}, after {})",
                got.len(),
                before.len(),
                after.len()
            );
            before_runs += 1;
        }
        assert_eq!(db.status().change_buffer.contract_violations, 0);
        runs += 1;
        drop(db);
        if !cut {
            break;
        }
        assert!(
            runs < 400,
            "the commit and its merges never completed before the cut"
        );
        n += 1 + n / 8;
    }
    eprintln!(
        "buffered commit cut: {runs} cuts: before {before_runs}, after {after_runs}, changes \
         buffered in {buffered_runs}, transactions re-applied {reapplied}"
    );
    assert!(before_runs > 0 && after_runs > 0 && buffered_runs > 0);
}

/// What the change buffer is for: the same commit of index changes to leaves that left the
/// pool reads far fewer pages with it than without it (the reads come later, merged, or not
/// at all when the background merge or a close gets there first).
#[test]
fn buffered_changes_read_fewer_pages_at_commit() {
    let reads_at_commit = |mode: &str| {
        let mut o = small_opts();
        o.set("change_buffering", mode).unwrap();
        let (_sim, db, idx, n, mut model) = filled(o);
        churn(&db);
        let before = db.status().buffer.pages_read;
        change(&db, &idx, n, &mut model, 0);
        let reads = db.status().buffer.pages_read - before;
        assert_eq!(all_keys(&db, &idx), model);
        reads
    };
    let (with, without) = (reads_at_commit("all"), reads_at_commit("none"));
    eprintln!("pages read by the commit: change_buffering=all {with}, none {without}");
    assert!(with * 2 < without, "all {with}, none {without}");
}

/// Writers buffering, readers merging, a thread churning the pool and the background merge
/// at full rate, all at once on one index table: every writer's keys end as it left them,
/// every key a writer committed is seen by its own reads, and `check` passes.
#[test]
fn concurrent_buffering_reads_and_background_merges_agree() {
    let mut o = small_opts();
    o.set("change_buffer_merge_pct", "100").unwrap();
    o.set("io_capacity", "2000").unwrap();
    o.set("io_capacity_max", "4000").unwrap();
    let (_sim, db) = sim_db(o);
    let idx = db.create_index_table("idx").unwrap();
    fill(&db, &idx, 2000);
    const WRITERS: u64 = 3;
    // writer w owns the odd keys 2i+1 with i % WRITERS == w, so writers never conflict
    let stop = std::sync::atomic::AtomicBool::new(false);
    let models: Vec<BTreeSet<Vec<u8>>> = std::thread::scope(|s| {
        let churner = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                churn(&db);
            }
        });
        let reader = s.spawn(|| {
            let mut seen = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                seen += all_keys(&db, &idx).len();
            }
            seen
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, idx) = (&db, &idx);
                s.spawn(move || {
                    let mut mine = BTreeSet::new();
                    for round in 0..30u64 {
                        let mut txn = db.begin();
                        for i in (w..2000)
                            .step_by(WRITERS as usize)
                            .skip((round % 5) as usize)
                            .step_by(5)
                        {
                            let k = ikey(2 * i + 1);
                            if mine.remove(&k) {
                                txn.delete(idx, &k).unwrap();
                            } else {
                                mine.insert(k.clone());
                                txn.put(idx, &k, &[]).unwrap();
                            }
                        }
                        txn.commit().unwrap();
                        // read back a few of its own keys
                        for k in mine.iter().step_by(17) {
                            assert_eq!(db.begin().get(idx, k).unwrap(), Some(Vec::new()));
                        }
                    }
                    mine
                })
            })
            .collect();
        let models = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churner.join().unwrap();
        assert!(reader.join().unwrap() > 0);
        models
    });
    let st = db.status().change_buffer;
    assert!(st.inserts_buffered + st.deletes_buffered > 0, "{st:?}");
    let got = all_keys(&db, &idx);
    let odd: BTreeSet<Vec<u8>> = got
        .iter()
        .filter(|k| u64::from_be_bytes(k[8..16].try_into().unwrap()) % 2 == 1)
        .cloned()
        .collect();
    let want: BTreeSet<Vec<u8>> = models.into_iter().flatten().collect();
    assert!(
        odd == want,
        "{} odd keys, the writers left {}",
        odd.len(),
        want.len()
    );
    assert_eq!(got.len() - odd.len(), 2000, "the even keys are untouched");
    assert_eq!(db.status().change_buffer.contract_violations, 0);
    assert_check(&db);
}

/// A crash right after a commit that buffered its changes: its COMMIT record is durable, the
/// redo of its apply (the change buffer's entries) may not be, so recovery may re-apply the
/// commit (reading each key, which merges what survived, and buffering or applying again what
/// did not). Either way the index is the committed state and `check` passes.
#[test]
fn a_crash_right_after_a_buffered_commit_recovers_it_whole() {
    let o = small_opts();
    let mut reapplied = 0;
    for salt in 0..4 {
        let (sim, db) = sim_db(o.clone());
        let idx = db.create_index_table("idx").unwrap();
        let n = 2000;
        let mut model = fill(&db, &idx, n);
        churn(&db);
        change(&db, &idx, n, &mut model, salt);
        assert!(db.status().change_buffer.entries > 0);
        sim.crash();
        drop(db);
        sim.restart();
        let db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
        let st = db.status();
        reapplied += st.recovery.transactions_reapplied;
        // not re-applied: the entries came back with the redo of the apply
        assert!(
            st.recovery.transactions_reapplied > 0 || st.change_buffer.entries > 0,
            "salt {salt}: {:?}",
            st.change_buffer
        );
        assert_check(&db);
        let idx = db.table("idx").unwrap();
        assert_eq!(all_keys(&db, &idx), model, "salt {salt}");
        assert_eq!(db.status().change_buffer.contract_violations, 0);
    }
    eprintln!("crash right after a buffered commit: {reapplied} of 4 recoveries re-applied it");
}

/// Merges that thin change-buffer leaves join them to a neighbour (`Tree::merge_thin_leaf`);
/// a crash anywhere among them, with their redo and pages durable or not, recovers to the
/// same keys and a tree `check` passes. Runs `EVENKEEL_THIN_CRASH_RUNS` seeds (default 12).
#[test]
fn leaves_joined_after_merges_survive_a_crash_anywhere_among_them() {
    use evenkeel::io::sim::CrashMode;
    use rand::{Rng, SeedableRng};
    let runs: u64 = std::env::var("EVENKEEL_THIN_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let (mut joined_runs, mut joined) = (0u64, 0u64);
    for seed in 0..runs {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let o = small_opts();
        let (sim, db, idx, n, mut model) = filled(o.clone());
        churn(&db);
        // a third of the keys deleted, in small transactions: buffered (a delete needs no
        // room), and under 9/10 of the buffer's size, so none is applied directly; the
        // background merge may merge some meanwhile (past half the max it runs even at
        // change_buffer_merge_pct=0)
        let merged_before = db.status().change_buffer.merged;
        for chunk in (0..n).step_by(3).collect::<Vec<_>>().chunks(100) {
            let mut txn = db.begin();
            for &i in chunk {
                if model.remove(&ikey(2 * i)) {
                    txn.delete(&idx, &ikey(2 * i)).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let cb = db.status().change_buffer;
        let buffered = cb.entries + (cb.merged - merged_before);
        assert_eq!(
            buffered,
            n / 3,
            "seed {seed}: {:?}",
            db.status().change_buffer
        );
        // reads of three blocks of keys in every four merge most leaves' changes and leave
        // the change buffer's leaves thin; a commit now and then makes the redo so far durable,
        // a flush the pages
        let cut = rng.gen_range(0..2 * n);
        let txn = db.begin();
        for i in 0..cut.min(2 * n) {
            if (i / 60) % 4 != 0 {
                txn.get(&idx, &ikey(i)).unwrap();
            }
            if i % 500 == 499 && rng.gen_bool(0.5) {
                let churn_t = db.table("churn").unwrap();
                let mut w = db.begin();
                w.put(&churn_t, b"mark", &i.to_be_bytes()).unwrap();
                w.commit().unwrap();
            }
            if i % 1500 == 1499 && rng.gen_bool(0.3) {
                db.flush().unwrap();
            }
        }
        drop(txn);
        let j = db.status().change_buffer.thin_leaves_joined;
        joined += j;
        joined_runs += u64::from(j > 0);
        let mode = match rng.gen_range(0..3) {
            0 => CrashMode::DropUnsynced,
            1 => CrashMode::KeepRandomSubset { seed },
            _ => CrashMode::Reorder { seed },
        };
        sim.crash_with(mode);
        drop(db);
        sim.restart();
        let db = Database::open_in(Arc::new(sim.clone()), o)
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        assert_check(&db);
        let idx = db.table("idx").unwrap();
        assert_eq!(all_keys(&db, &idx), model, "seed {seed}");
        assert_eq!(
            db.status().change_buffer.contract_violations,
            0,
            "seed {seed}"
        );
        db.close().unwrap();
    }
    println!(
        "thin-leaf crash runs: {runs}, runs with leaves joined: {joined_runs}, joined: {joined}"
    );
    assert!(
        runs < 4 || joined_runs > 0,
        "no run joined a leaf: the test no longer reaches merge_thin_leaf"
    );
}
