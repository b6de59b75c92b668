//! A buffer pool much smaller than the data: 64 pages over 100k rows.

use crate::common::*;
use evenkeel::Database;
use std::ops::Bound;
use std::sync::Arc;

#[test]
fn pool_of_64_pages_over_100k_rows() {
    let o = opts(4096, 64 * 4096);
    let (sim, db) = sim_db(o.clone());
    let t = db.create_table("t").unwrap();
    let n = 100_000u64;
    // random-ish order so every part of the tree is dirtied repeatedly
    for chunk in 0..100u64 {
        let mut txn = db.begin();
        for j in 0..n / 100 {
            let i = (j * 100 + chunk) * 48271 % n;
            txn.put(&t, &key16(i), &val(i, 16 + (i % 100) as usize))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let st = db.status();
    assert!(
        st.buffer.evictions > 0 && st.buffer.pages_read > 0,
        "{st:?}"
    );
    // threads reading and writing through the tiny pool at once
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let (db, t) = (db.clone(), t.clone());
            s.spawn(move || {
                for j in 0..3_000u64 {
                    let i = (j * 7 + w * 1_000_003) % n;
                    let got = db.begin().get(&t, &key16(i)).unwrap();
                    assert_eq!(got, Some(val(i, 16 + (i % 100) as usize)));
                    if j % 10 == w {
                        let mut txn = db.begin();
                        txn.put(&t, &key16(i), &val(i, 16 + (i % 100) as usize))
                            .unwrap();
                        txn.commit().unwrap();
                    }
                }
            });
        }
    });
    let count = db
        .begin()
        .scan(&t, Bound::Unbounded, Bound::Unbounded, true)
        .unwrap()
        .count() as u64;
    assert_eq!(count, n);
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let t = db.table("t").unwrap();
    for i in (0..n).step_by(997) {
        assert_eq!(
            db.begin().get(&t, &key16(i)).unwrap(),
            Some(val(i, 16 + (i % 100) as usize))
        );
    }
    let r = assert_check(&db);
    assert_eq!(r.tables[0].rows, n);
}

/// Dropping a table frees each page in an mtr that also latches the file header (page 0).
/// With a log many times smaller than the redo of freeing the table, page 0 becomes the oldest
/// dirty page again and again: each mtr must find log room before it latches anything, or it
/// waits for room holding the very page the checkpoint needs, until the engine gives up after
/// 30 s ("the redo log stayed full"). A freed page logs its new header (about 75 bytes), so
/// the table here has about 14,000 pages: their freeing logs over twice the log.
#[test]
fn dropping_a_table_many_times_the_size_of_the_log() {
    let mut o = opts(4096, 64 * 4096);
    o.set("log_file_size", "256K").unwrap();
    o.set("log_files_in_group", "2").unwrap();
    let (sim, db) = sim_db(o.clone());
    let keep = db.create_table("keep").unwrap();
    let big = db.create_table("big").unwrap();
    let n = 64_000u64;
    for chunk in 0..2560u64 {
        let mut txn = db.begin();
        for i in chunk * 25..(chunk + 1) * 25 {
            txn.put(&big, &key16(i), &val(i, 800)).unwrap();
            if i % 100 == 0 {
                txn.put(&keep, &key16(i), &val(i, 40)).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let before = db.status();
    db.drop_table("big").unwrap();
    let after = db.status();
    let redo = after.lsn - before.lsn;
    assert!(
        redo > 2 * after.log_capacity_bytes,
        "the drop logged {redo} bytes, not over twice the log's {}",
        after.log_capacity_bytes
    );
    assert!(db.table("big").is_err());
    assert_check(&db);
    db.close().unwrap();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let keep = db.table("keep").unwrap();
    for i in (0..n).step_by(100) {
        assert_eq!(db.begin().get(&keep, &key16(i)).unwrap(), Some(val(i, 40)));
    }
    assert_check(&db);
}
