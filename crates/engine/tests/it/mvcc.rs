//! Read views: what each isolation level sees while others commit, snapshots that stay
//! consistent under concurrent writers, first-committer-wins, the history's bound and purge.

use super::common::{key16, opts, sim_db};
use evenkeel::{Database, Error, Isolation, Table};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn db() -> Database {
    sim_db(opts(4096, 4 << 20)).1
}

fn put(db: &Database, t: &Table, k: &[u8], v: &[u8]) {
    let mut txn = db.begin();
    txn.put(t, k, v).unwrap();
    txn.commit().unwrap();
}

fn del(db: &Database, t: &Table, k: &[u8]) {
    let mut txn = db.begin();
    txn.delete(t, k).unwrap();
    txn.commit().unwrap();
}

fn rows(
    scan: impl Iterator<Item = evenkeel::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.collect::<evenkeel::Result<_>>().unwrap()
}

#[test]
fn repeatable_read_is_the_default_and_sees_its_first_read_view() {
    let db = db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, b"k", b"1");
    let mut reader = db.begin();
    assert_eq!(reader.isolation(), Isolation::RepeatableRead);
    assert_eq!(reader.read_view(), None, "no view before the first read");
    assert_eq!(reader.get(&t, b"k").unwrap(), Some(b"1".to_vec()));
    assert!(reader.read_view().is_some());
    put(&db, &t, b"k", b"2");
    put(&db, &t, b"new", b"x");
    del(&db, &t, b"k");
    assert_eq!(reader.get(&t, b"k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(reader.get(&t, b"new").unwrap(), None);
    assert_eq!(
        rows(reader.range(&t, ..).unwrap()),
        vec![(b"k".to_vec(), b"1".to_vec())]
    );
    // a locking read reads the newest committed value, as InnoDB's do
    assert_eq!(
        reader.get_for_update(&t, b"new").unwrap(),
        Some(b"x".to_vec())
    );
    reader.commit().unwrap();
    let fresh = db.begin();
    assert_eq!(fresh.get(&t, b"k").unwrap(), None);
    assert_eq!(fresh.get(&t, b"new").unwrap(), Some(b"x".to_vec()));
}

#[test]
fn read_committed_sees_each_commit_and_a_scan_sees_one_view() {
    let db = db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, b"a", b"1");
    let mut reader = db.begin();
    reader.set_isolation(Isolation::ReadCommitted);
    assert_eq!(reader.get(&t, b"a").unwrap(), Some(b"1".to_vec()));
    put(&db, &t, b"a", b"2");
    assert_eq!(reader.get(&t, b"a").unwrap(), Some(b"2".to_vec()));
    let scan = reader.range(&t, ..).unwrap();
    put(&db, &t, b"b", b"x"); // after the scan began: not in it
    assert_eq!(rows(scan), vec![(b"a".to_vec(), b"2".to_vec())]);
    assert_eq!(reader.range(&t, ..).unwrap().count(), 2);
    // the database's default is an option that can change while open
    db.set_option("transaction_isolation", "read-committed")
        .unwrap();
    assert_eq!(db.begin().isolation(), Isolation::ReadCommitted);
    let err = db
        .set_option("transaction_isolation", "serializable")
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("read_committed, repeatable_read, snapshot"),
        "{text}"
    );
}

/// A view over many rows and many leaves, while rows are deleted, inserted and changed on
/// both sides of every batch boundary: forward and backward scans, and a scan from both ends
/// at once, see exactly the rows as of the view.
#[test]
fn scans_through_a_view_see_deleted_rows_and_not_new_ones() {
    let db = db();
    let t = db.create_table("t").unwrap();
    let n = 3000u64;
    let mut txn = db.begin();
    for i in (0..n).step_by(2) {
        txn.put(&t, &key16(i), format!("v{i}").as_bytes()).unwrap();
    }
    txn.commit().unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
        .step_by(2)
        .map(|i| (key16(i), format!("v{i}").into_bytes()))
        .collect();
    let snap = db.snapshot();
    let reader = db.begin();
    assert_eq!(reader.range(&t, ..).unwrap().count(), expected.len()); // takes its view
                                                                       // change everything: delete a third, insert the odd keys, rewrite the rest
    let mut txn = db.begin();
    for i in 0..n {
        match i % 6 {
            0 => txn.delete(&t, &key16(i)).unwrap(),
            _ if i % 2 == 1 => txn.put(&t, &key16(i), b"new").unwrap(),
            _ => txn.put(&t, &key16(i), b"changed").unwrap(),
        }
    }
    txn.commit().unwrap();
    assert_eq!(rows(snap.range(&t, ..).unwrap()), expected);
    assert_eq!(rows(reader.range(&t, ..).unwrap()), expected);
    let mut back = rows(snap.range(&t, ..).unwrap().rev());
    back.reverse();
    assert_eq!(back, expected);
    // both ends at once meet without repeating or skipping a row
    let mut scan = snap.range(&t, ..).unwrap();
    let (mut front, mut tail) = (Vec::new(), Vec::new());
    while let Some(r) = scan.next() {
        front.push(r.unwrap());
        match scan.next_back() {
            Some(r) => tail.push(r.unwrap()),
            None => break,
        }
    }
    tail.reverse();
    front.extend(tail);
    assert_eq!(front, expected);
    // a bounded range, and point gets
    let lo = key16(1001);
    let hi = key16(2001);
    let want: Vec<_> = expected
        .iter()
        .filter(|(k, _)| *k >= lo && *k < hi)
        .cloned()
        .collect();
    assert_eq!(rows(snap.range(&t, lo.clone()..hi.clone()).unwrap()), want);
    assert_eq!(snap.get(&t, &key16(0)).unwrap(), Some(b"v0".to_vec()));
    assert_eq!(snap.get(&t, &key16(1)).unwrap(), None);
    // the newest state, for a new reader
    let now = db.snapshot();
    assert_eq!(now.get(&t, &key16(0)).unwrap(), None);
    assert_eq!(now.get(&t, &key16(1)).unwrap(), Some(b"new".to_vec()));
}

/// The bank: transfers between accounts keep the total; every snapshot, scanned or read key by
/// key while transfers commit, sums to it (a fractured read would not).
#[test]
fn snapshots_see_whole_transactions_under_concurrent_writers() {
    let db = db();
    let t = db.create_table("accounts").unwrap();
    const ACCOUNTS: u64 = 200;
    const START: u64 = 1000;
    let mut txn = db.begin();
    for i in 0..ACCOUNTS {
        txn.put(&t, &key16(i), &START.to_le_bytes()).unwrap();
    }
    txn.commit().unwrap();
    let total = ACCOUNTS * START;
    let stop = AtomicBool::new(false);
    let transfers = AtomicU64::new(0);
    let checks = AtomicU64::new(0);
    let amount = |v: Option<Vec<u8>>| u64::from_le_bytes(v.unwrap().try_into().unwrap());
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let (db, t, stop, transfers) = (&db, &t, &stop, &transfers);
            s.spawn(move || {
                let mut x = w * 7919 + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (a, b) = ((x >> 33) % ACCOUNTS, (x >> 13) % ACCOUNTS);
                    if a == b {
                        continue;
                    }
                    let mut txn = db.begin();
                    let r = (|| {
                        let va = amount(txn.get_for_update(t, &key16(a))?);
                        let vb = amount(txn.get_for_update(t, &key16(b))?);
                        let m = va.min(x % 50);
                        txn.put(t, &key16(a), &(va - m).to_le_bytes())?;
                        txn.put(t, &key16(b), &(vb + m).to_le_bytes())?;
                        txn.commit()
                    })();
                    match r {
                        Ok(()) => {
                            transfers.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.is_retryable() => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        for r in 0..2 {
            let (db, t, checks) = (&db, &t, &checks);
            s.spawn(move || {
                for round in 0..150 {
                    let sum: u64 = if (round + r) % 2 == 0 {
                        let snap = db.snapshot();
                        snap.range(t, ..)
                            .unwrap()
                            .map(|row| u64::from_le_bytes(row.unwrap().1.try_into().unwrap()))
                            .sum()
                    } else {
                        // a repeatable-read transaction, key by key, with pauses
                        let txn = db.begin();
                        (0..ACCOUNTS)
                            .map(|i| {
                                if i % 50 == 0 {
                                    std::thread::yield_now();
                                }
                                amount(txn.get(t, &key16(i)).unwrap())
                            })
                            .sum()
                    };
                    assert_eq!(sum, total, "a read view saw part of a transfer");
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while checks.load(Ordering::Relaxed) < 300 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(transfers.load(Ordering::Relaxed) > 0);
    eprintln!(
        "{} transfers, {} consistent views",
        transfers.load(Ordering::Relaxed),
        checks.load(Ordering::Relaxed)
    );
    let h = db.status().history;
    assert_eq!(h.views_open, 0, "{h:?}");
    assert_eq!(
        h.history_versions, 0,
        "no view open: purge kept nothing {h:?}"
    );
    assert!(h.versions_purged > 0, "{h:?}");
}

#[test]
fn snapshot_isolation_refuses_a_key_changed_since_the_view_and_allows_write_skew() {
    let db = db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, b"x", b"1");
    put(&db, &t, b"y", b"1");
    // first committer wins
    let mut a = db.begin();
    a.set_isolation(Isolation::Snapshot);
    assert_eq!(a.get(&t, b"x").unwrap(), Some(b"1".to_vec()));
    put(&db, &t, b"x", b"2");
    let err = a.put(&t, b"x", b"3").unwrap_err();
    assert!(matches!(err, Error::SerializationFailure { .. }), "{err}");
    assert!(err.is_retryable());
    assert!(a.is_aborted());
    assert!(err.to_string().contains("first committer wins"), "{err}");
    drop(a);
    // repeatable read does not refuse it: the write acts on the newest value under its lock
    let mut rr = db.begin();
    rr.get(&t, b"x").unwrap();
    put(&db, &t, b"x", b"4");
    rr.put(&t, b"x", b"5").unwrap();
    rr.commit().unwrap();
    // write skew: each reads both keys and writes the other one; both commit
    let mut p = db.begin();
    let mut q = db.begin();
    p.set_isolation(Isolation::Snapshot);
    q.set_isolation(Isolation::Snapshot);
    for txn in [&p, &q] {
        assert!(txn.get(&t, b"x").unwrap().is_some());
        assert!(txn.get(&t, b"y").unwrap().is_some());
    }
    p.put(&t, b"x", b"p").unwrap();
    q.put(&t, b"y", b"q").unwrap();
    p.commit().unwrap();
    q.commit().unwrap();
}

#[test]
fn a_view_held_past_max_history_size_expires_and_says_why() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    db.set_option("max_history_size", "64K").unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, b"k", b"old");
    for i in 0..200u64 {
        put(&db, &t, &key16(i), &[1u8; 500]);
    }
    let snap = db.snapshot();
    let reader = db.begin();
    reader.get(&t, b"k").unwrap();
    for i in 0..200u64 {
        put(&db, &t, &key16(i), &[7u8; 500]); // each keeps a 500-byte before-image
    }
    let h = db.status().history;
    assert!(h.history_bytes <= 64 << 10, "{h:?}");
    assert_eq!(h.views_expired, 2, "{h:?}");
    let err = snap.get(&t, b"k").unwrap_err();
    assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err}");
    assert!(err.to_string().contains("max_history_size"), "{err}");
    let err = reader.get(&t, b"k").unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(reader.is_aborted());
    assert!(snap.range(&t, ..).unwrap().next().unwrap().is_err());
    // a new view reads fine, and writers never waited
    assert_eq!(db.snapshot().get(&t, b"k").unwrap(), Some(b"old".to_vec()));
    let err = db.set_option("max_history_size", "1K").unwrap_err();
    assert!(err.to_string().contains("64K"), "{err}");
}

#[test]
fn history_is_kept_for_the_oldest_view_and_purged_when_it_closes() {
    let db = db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, b"k", b"0");
    assert_eq!(db.status().history.history_versions, 0);
    let snap = db.snapshot();
    for i in 1..=50u32 {
        put(&db, &t, b"k", &i.to_le_bytes());
    }
    let h = db.status().history;
    assert_eq!(
        (h.history_versions, h.purge_lag, h.views_open),
        (50, 50, 1),
        "{h:?}"
    );
    assert_eq!(snap.get(&t, b"k").unwrap(), Some(b"0".to_vec()));
    let m: std::collections::HashMap<_, _> = db
        .status()
        .metrics()
        .into_iter()
        .map(|(i, v)| (i.name, v))
        .collect();
    assert_eq!(m["purge_lag"], 50.0);
    drop(snap);
    let h = db.status().history;
    assert_eq!(
        (h.history_versions, h.purge_lag, h.views_open),
        (0, 0, 0),
        "{h:?}"
    );
    assert_eq!(h.history_bytes, 0);
}
