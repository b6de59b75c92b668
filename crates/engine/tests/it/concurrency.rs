//! Many threads reading and writing disjoint and overlapping keys; scans while writers split.

use crate::common::*;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn disjoint_writers_and_readers() {
    let (_sim, db) = sim_db(opts(4096, 2 << 20));
    let t = db.create_table("t").unwrap();
    let threads = 4;
    let per = 5_000u64;
    std::thread::scope(|s| {
        for w in 0..threads {
            let (db, t) = (db.clone(), t.clone());
            s.spawn(move || {
                for i in 0..per {
                    let k = key16(i * threads + w);
                    let mut txn = db.begin();
                    txn.put(&t, &k, &val(i, 40 + (i % 60) as usize)).unwrap();
                    txn.commit().unwrap();
                    if i % 7 == 0 {
                        // read back something this thread wrote earlier
                        let j = i / 2;
                        let got = db.begin().get(&t, &key16(j * threads + w)).unwrap();
                        assert_eq!(got, Some(val(j, 40 + (j % 60) as usize)));
                    }
                }
            });
        }
    });
    let r = assert_check(&db);
    assert_eq!(r.tables[0].rows, threads * per);
}

#[test]
fn overlapping_writers_last_write_wins_per_key() {
    let (_sim, db) = sim_db(opts(4096, 2 << 20));
    let t = db.create_table("t").unwrap();
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (db, t) = (db.clone(), t.clone());
            s.spawn(move || {
                for i in 0..4_000u64 {
                    let k = key16(i % 500);
                    let mut txn = db.begin();
                    if (i + w) % 5 == 0 {
                        txn.delete(&t, &k).unwrap();
                    } else {
                        // value encodes the key so a torn mix-up would be visible
                        let mut v = k.clone();
                        v.extend_from_slice(&val(w, (i % 300) as usize));
                        txn.put(&t, &k, &v).unwrap();
                    }
                    txn.commit().unwrap();
                }
            });
        }
    });
    for (k, v) in db
        .begin()
        .scan(&t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .map(|r| r.unwrap())
    {
        assert_eq!(&v[..16], &k[..], "value belongs to its key");
    }
    assert_check(&db);
}

/// Scans run while writers insert keys between existing ones (forcing splits); every scan
/// must see each of the stable keys exactly once, in order.
#[test]
fn scans_while_writers_split() {
    let (_sim, db) = sim_db(opts(4096, 4 << 20));
    let t = db.create_table("t").unwrap();
    let stable = 3_000u64;
    let mut txn = db.begin();
    for i in 0..stable {
        txn.put(&t, &key16(i * 1000), &val(i, 60)).unwrap();
    }
    txn.commit().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = key16((i * 7919 % stable) * 1000 + 1 + (i / stable) * 2 + w);
                    let mut txn = db.begin();
                    txn.put(&t, &k, &val(i, 120)).unwrap();
                    txn.commit().unwrap();
                    if i.is_multiple_of(3) {
                        let mut txn = db.begin();
                        txn.delete(&t, &k).unwrap();
                        txn.commit().unwrap();
                    }
                    i += 1;
                }
            });
        }
        for round in 0..12 {
            let rev = round % 2 == 1;
            let keys: Vec<Vec<u8>> = db
                .begin()
                .scan(&t, Bound::Unbounded, Bound::Unbounded, rev)
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            if rev {
                sorted.reverse();
            }
            assert!(keys == sorted, "scan out of order");
            let stable_seen = keys
                .iter()
                .filter(|k| u64::from_be_bytes(k[8..].try_into().unwrap()) % 1000 == 0)
                .count() as u64;
            assert_eq!(stable_seen, stable, "every stable key exactly once");
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_check(&db);
}
