//! Random sequences of put/delete/get/scan on random page sizes agree with a BTreeMap model,
//! including after close and reopen and across commit/rollback.

use crate::common::*;
use evenkeel::Database;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Delete(u16),
    Get(u16),
    Scan(u16, u16, bool),
    Commit,
    Rollback,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..400, prop_oneof![8 => 0usize..200, 1 => 0usize..40_000]).prop_map(|(k, l)| Op::Put(k, l)),
        3 => (0u16..400).prop_map(Op::Delete),
        2 => (0u16..400).prop_map(Op::Get),
        1 => (0u16..400, 0u16..400, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a, b, r)),
        2 => Just(Op::Commit),
        1 => Just(Op::Rollback),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u16) -> Vec<u8> {
    // variable-length keys: a prefix that varies in length keeps order interesting
    let mut v = vec![b'a' + (k % 7) as u8; 1 + (k as usize % 13)];
    v.extend_from_slice(&k.to_be_bytes());
    v
}

fn run(page_size: usize, adaptive_hash_index: bool, ops: Vec<Op>) {
    let mut o = opts(page_size, 64 * page_size as u64 * 4);
    o.adaptive_hash_index = adaptive_hash_index;
    let (sim, mut db) = sim_db(o.clone());
    let mut t = db.create_table("t").unwrap();
    let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut pending = committed.clone();
    let mut txn = db.begin();
    for op in ops {
        match op {
            Op::Put(k, len) => {
                let v = val(k as u64 + len as u64, len);
                txn.put(&t, &key(k), &v).unwrap();
                pending.insert(key(k), v);
            }
            Op::Delete(k) => {
                txn.delete(&t, &key(k)).unwrap();
                pending.remove(&key(k));
            }
            Op::Get(k) => {
                assert_eq!(txn.get(&t, &key(k)).unwrap(), pending.get(&key(k)).cloned());
            }
            Op::Scan(a, b, rev) => {
                let (lo, hi) = (key(a), key(b));
                let got: Vec<_> = txn
                    .scan(&t, Bound::Included(&lo[..]), Bound::Excluded(&hi[..]), rev)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let mut want: Vec<_> = if lo < hi {
                    pending
                        .range(lo.clone()..hi.clone())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                if rev {
                    want.reverse();
                }
                assert_eq!(got.len(), want.len());
                assert!(got == want, "scan mismatch");
            }
            Op::Commit => {
                std::mem::replace(&mut txn, db.begin()).commit().unwrap();
                committed = pending.clone();
            }
            Op::Rollback => {
                std::mem::replace(&mut txn, db.begin()).rollback();
                pending = committed.clone();
            }
            Op::Reopen => {
                std::mem::replace(&mut txn, db.begin()).commit().unwrap();
                committed = pending.clone();
                db.close().unwrap();
                db = Database::open_in(Arc::new(sim.clone()), o.clone()).unwrap();
                t = db.table("t").unwrap();
                txn = db.begin();
            }
        }
    }
    txn.commit().unwrap();
    let all: BTreeMap<_, _> = db
        .begin()
        .scan(&t, Bound::Unbounded, Bound::Unbounded, false)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(all == pending, "final contents differ from the model");
    let r = assert_check(&db);
    assert_eq!(r.tables[0].rows, pending.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn agrees_with_btreemap(ps in prop::sample::select(vec![4096usize, 8192, 16384, 32768, 65536]),
                            ahi in any::<bool>(),
                            ops in prop::collection::vec(op(), 1..600)) {
        run(ps, ahi, ops);
    }
}

/// Enough rows for a three-level tree at 4 KiB, then delete all: pages are reused.
#[test]
fn grow_shrink_reuses_space() {
    let (_sim, db) = sim_db(opts(4096, 1 << 20));
    let t = db.create_table("t").unwrap();
    for round in 0..2 {
        let mut txn = db.begin();
        for i in 0..20_000u64 {
            txn.put(&t, &key16(i), &val(i, 100)).unwrap();
        }
        txn.commit().unwrap();
        let r = assert_check(&db);
        assert_eq!(r.tables[0].rows, 20_000);
        assert!(r.tables[0].depth >= 3, "depth {}", r.tables[0].depth);
        let pages_full = r.page_count;
        let mut txn = db.begin();
        for i in 0..20_000u64 {
            txn.delete(&t, &key16(i)).unwrap();
        }
        txn.commit().unwrap();
        let r = assert_check(&db);
        assert_eq!(r.tables[0].rows, 0);
        assert_eq!(r.tables[0].leaf_pages, 1, "emptied leaves are freed");
        // in use: the header, the catalog's root, the change buffer's root, the table's root
        assert_eq!(
            r.free_pages + 4,
            r.page_count,
            "every emptied page is on the free list"
        );
        if round == 1 {
            // the second fill reused the free list instead of growing the file
            assert_eq!(r.page_count, pages_full);
        }
    }
}

#[test]
fn drop_table_frees_pages() {
    let (_sim, db) = sim_db(opts(4096, 1 << 20));
    let t = db.create_table("gone").unwrap();
    let mut txn = db.begin();
    for i in 0..5_000u64 {
        txn.put(&t, &key16(i), &val(i, if i % 100 == 0 { 9000 } else { 50 }))
            .unwrap();
    }
    txn.commit().unwrap();
    let before = assert_check(&db);
    db.drop_table("gone").unwrap();
    assert!(matches!(
        db.begin().get(&t, b"x"),
        Err(evenkeel::Error::TableDropped(_))
    ));
    let after = assert_check(&db);
    assert!(after.tables.is_empty());
    // in use: the header, the catalog's root, the change buffer's root
    assert_eq!(after.free_pages + 3, after.page_count);
    assert_eq!(before.page_count, after.page_count);
}
