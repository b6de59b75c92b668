//! A commit reads each written key's before-image, then puts the key: the put starts at the
//! leaf the read found, unless a structure change ran in between (btree/mod.rs, `LeafHint`).
//! These check both sides: a quiet tree takes every put at its hint, and puts whose leaves
//! were split since their read (by the same commit's earlier puts, or by other threads) still
//! land where the key belongs.

use crate::common::*;
use evenkeel::Database;
use std::sync::Arc;

fn put_all(db: &Database, t: &evenkeel::Table, rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    let mut txn = db.begin();
    for (k, v) in rows {
        txn.put(t, &k, &v).unwrap();
    }
    txn.commit().unwrap();
}

/// That a scan of `t` returns exactly the keys of `want` (ascending), in order.
fn assert_keys(db: &Database, t: &evenkeel::Table, want: &[u64]) {
    let got = rows(db, t);
    assert_eq!(got.len(), want.len());
    for (&k, (gk, _)) in want.iter().zip(&got) {
        assert_eq!(gk, &key16(k), "key {k}");
    }
}

/// That `check` finds nothing wrong.
fn assert_check_ok(db: &Database) {
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Every row of `t`, in key order, read by a scan.
fn rows(db: &Database, t: &evenkeel::Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.begin()
        .range(t, ..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn overwrites_in_a_quiet_tree_take_every_put_at_its_hint() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    let before = db.status().tree;
    // same-length values: no leaf splits, so no structure change between read and put
    put_all(
        &db,
        &t,
        (0..40u64).map(|i| (key16(i * 70), val(i + 7, 100))),
    );
    let after = db.status().tree;
    assert_eq!(after.page_splits, before.page_splits);
    assert_eq!(after.leaf_hint_puts - before.leaf_hint_puts, 40);
    for i in 0..40u64 {
        let got = db.begin().get(&t, &key16(i * 70)).unwrap();
        assert_eq!(got, Some(val(i + 7, 100)), "key {}", i * 70);
    }
    assert!(db.check().unwrap().is_ok());
}

/// Full leaves (loaded in key order), then one commit of the keys between them: its first
/// puts split the leaves whose later keys' hints were taken before any split. Those puts must
/// descend again; a put that trusted its old leaf would put the key into a page whose range no
/// longer holds it, and the scan order, the gets and `check` would show it.
#[test]
fn puts_whose_leaves_split_since_their_read_land_where_the_key_belongs() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    put_all(
        &db,
        &t,
        (0..3000u64).map(|i| (key16(i * 2), val(i * 2, 100))),
    );
    let before = db.status().tree;
    let odd: Vec<u64> = (500..2500u64).map(|i| i * 2 + 1).collect();
    put_all(&db, &t, odd.iter().map(|&k| (key16(k), val(k, 100))));
    let after = db.status().tree;
    assert!(
        after.page_splits - before.page_splits > 50,
        "the commit must split the leaves it writes to: {} splits",
        after.page_splits - before.page_splits
    );
    let hinted = after.leaf_hint_puts - before.leaf_hint_puts;
    let odd_count = odd.len() as u64;
    let mut want: Vec<u64> = (0..3000u64).map(|i| i * 2).chain(odd).collect();
    want.sort_unstable();
    let got = rows(&db, &t);
    assert_eq!(got.len(), want.len());
    for (&k, (gk, gv)) in want.iter().zip(&got) {
        assert_eq!((gk, gv), (&key16(k), &val(k, 100)), "key {k}");
    }
    for &k in want.iter().step_by(7) {
        assert_eq!(db.begin().get(&t, &key16(k)).unwrap(), Some(val(k, 100)));
    }
    assert_check_ok(&db);
    assert!(
        hinted < odd_count,
        "puts after a split must not use their hint: {hinted} of {odd_count} hinted"
    );
}

/// Four threads commit interleaved new keys into the same leaves at once, so other threads'
/// splits fall between many commits' reads and puts.
#[test]
fn concurrent_commits_splitting_each_others_leaves_lose_no_key() {
    let (_sim, db) = sim_db(opts(4096, 8 << 20));
    let db = Arc::new(db);
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..2000u64).map(|i| (key16(i * 8), val(i, 60))));
    let threads = 4u64;
    let per_txn = 10u64;
    let txns = 50u64;
    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                for n in 0..txns {
                    let mut txn = db.begin();
                    for j in 0..per_txn {
                        // thread th writes residue th+1 (mod 8) keys, spread over the table
                        let i = (n * per_txn + j) * 4 % 2000;
                        let k = i * 8 + th + 1;
                        txn.put(t, &key16(k), &val(k, 60)).unwrap();
                    }
                    txn.commit().unwrap();
                }
            });
        }
    });
    let got = rows(&db, &t);
    let keys: Vec<&Vec<u8>> = got.iter().map(|(k, _)| k).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan out of order");
    let mut want: Vec<u64> = (0..2000u64).map(|i| i * 8).collect();
    for th in 0..threads {
        for n in 0..txns {
            for j in 0..per_txn {
                let i = (n * per_txn + j) * 4 % 2000;
                want.push(i * 8 + th + 1);
            }
        }
    }
    want.sort_unstable();
    want.dedup();
    assert_keys(&db, &t, &want);
    assert!(db.status().tree.page_splits > 0);
    assert_check_ok(&db);
}

/// A commit whose new keys all fall in one leaf with room applies them in one mtr: one log
/// group for the run, where a put each appended a group of its own (`Tree::put_run_hinted`).
#[test]
fn new_keys_in_one_leaf_with_room_are_applied_in_one_group() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    // 40 rows of 62 bytes: one leaf (the root), with room for 9 more
    put_all(&db, &t, (0..40u64).map(|i| (key16(i * 10), val(i, 40))));
    // the log groups of a commit of one put into that leaf
    let groups = || db.status().log.groups;
    let g = groups();
    put_all(&db, &t, [(key16(201), val(1, 40))]);
    let one_put = groups() - g;
    let before_tree = db.status().tree;
    // eight more keys between two loaded ones
    let g = groups();
    put_all(&db, &t, (2..10u64).map(|k| (key16(200 + k), val(k, 40))));
    let run = groups() - g;
    let after_tree = db.status().tree;
    assert_eq!(after_tree.page_splits, before_tree.page_splits);
    assert_eq!(after_tree.leaf_hint_puts - before_tree.leaf_hint_puts, 8);
    // one mtr for the eight puts, as for the one: not a group per put
    assert_eq!(
        run, one_put,
        "log groups: {run} for 8 puts in one leaf, {one_put} for one"
    );
    for k in 1..10u64 {
        assert_eq!(
            db.begin().get(&t, &key16(200 + k)).unwrap(),
            Some(val(k, 40))
        );
    }
    assert_check_ok(&db);
}

/// A run that fills its leaf part way: the puts that fit go in the run's mtr, the first that
/// does not ends it, and the rest split the leaf one by one and land where they belong.
#[test]
fn a_run_that_fills_its_leaf_ends_there_and_the_rest_split_it() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    // 20 rows of 124 bytes: one leaf (the root), with room for about 12 more
    put_all(&db, &t, (0..20u64).map(|i| (key16(i * 1000), val(i, 100))));
    let before = db.status().tree;
    // 60 more between two loaded keys: the run fills the leaf, the rest split it
    put_all(
        &db,
        &t,
        (1..61u64).map(|k| (key16(10_000 + k), val(k, 100))),
    );
    let after = db.status().tree;
    assert!(
        after.page_splits > before.page_splits,
        "the run must overflow its leaf"
    );
    let mut want: Vec<u64> = (0..20u64).map(|i| i * 1000).chain(10_001..10_061).collect();
    want.sort_unstable();
    assert_keys(&db, &t, &want);
    for k in 1..61u64 {
        assert_eq!(
            db.begin().get(&t, &key16(10_000 + k)).unwrap(),
            Some(val(k, 100))
        );
    }
    assert_check_ok(&db);
}

/// A read-modify-write (`get_for_update`, then `put`): the commit takes the key's before-image
/// from the locking read, and its put starts at the leaf that read found, without a second
/// descent.
#[test]
fn a_locking_read_gives_its_put_the_leaf_it_found() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    let before = db.status().tree;
    let mut txn = db.begin();
    for i in 0..40u64 {
        let k = key16(i * 70);
        assert_eq!(txn.get_for_update(&t, &k).unwrap(), Some(val(i * 70, 100)));
        txn.put(&t, &k, &val(i + 9, 100)).unwrap();
    }
    txn.commit().unwrap();
    let after = db.status().tree;
    assert_eq!(after.page_splits, before.page_splits);
    assert_eq!(after.leaf_hint_puts - before.leaf_hint_puts, 40);
    for i in 0..40u64 {
        assert_eq!(
            db.begin().get(&t, &key16(i * 70)).unwrap(),
            Some(val(i + 9, 100))
        );
    }
    assert!(db.check().unwrap().is_ok());
}
