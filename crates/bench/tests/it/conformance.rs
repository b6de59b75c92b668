//! The driver conformance suite, written once against `Driver` and `DriverTxn` and run for
//! every engine this build has: read your own writes, rollback (explicit and by drop), bounded
//! scans both ways with limits (own uncommitted writes included), table catalog, a locking
//! read that conflicts (retryable, and the loser's earlier writes are gone), two transactions
//! locking in opposite orders (a deadlock where the engine has row locks, a wait where it has
//! one writer), and a short TPC-C from several threads whose consistency conditions are
//! checked through the same driver.
//!
//! The innodb tests start a real MariaDB server: without Debian's mariadb-server installed
//! they fail with the driver's message naming the package (CI installs it).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

use evenkeel_bench::driver::{Driver, DriverResult, TableId};
use evenkeel_bench::run::engine::{open_driver, EngineSpec};
use evenkeel_bench::tpcc::check::check;
use evenkeel_bench::tpcc::load::load;
use evenkeel_bench::tpcc::scale::{Meta, Scale};

/// How an engine's transactions meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Locking {
    /// One transaction at a time (the model): no conflicts to test.
    Serial,
    /// One writer at a time (SQLite, LMDB): a second writer waits, then fails retryably.
    #[cfg_attr(not(any(feature = "sqlite", feature = "lmdb")), allow(dead_code))]
    SingleWriter,
    /// Row locks with deadlock detection or lock-wait timeouts (evenkeel, InnoDB).
    RowLocks,
}

struct Engine {
    name: &'static str,
    locking: Locking,
    /// A writer's uncommitted writes can be checked invisible from a concurrent reader.
    readers_beside_writer: bool,
}

fn open(e: &Engine, dir: &Path, set: &[&str]) -> Box<dyn Driver> {
    let spec = EngineSpec {
        engine: e.name.into(),
        config: None,
        set: set.iter().map(|s| s.to_string()).collect(),
    };
    match open_driver(&spec, dir) {
        Ok(d) => d,
        Err(err) => panic!("open the {} engine: {err}", e.name),
    }
}

/// Options every conformance run uses, scoped per engine (the model takes none).
fn options(e: &Engine) -> Vec<&'static str> {
    match e.name {
        "model" => vec![],
        "innodb" => vec![
            "lock_wait_timeout=1",
            "buffer_pool_size=32M",
            "log_file_size=8M",
        ],
        _ => vec!["lock_wait_timeout=1"],
    }
}

fn key(i: u8) -> Vec<u8> {
    vec![b'k', i]
}

fn committed(d: &dyn Driver, t: TableId, k: &[u8]) -> Option<Vec<u8>> {
    let mut x = d.begin().expect("begin");
    let v = x.get(t, k).expect("get");
    x.commit().expect("commit a read");
    v
}

fn reads_own_writes_and_rolls_back(e: &Engine, d: &dyn Driver) {
    let t = d.open_table("rw", true).expect("open rw");
    let mut x = d.begin().expect("begin");
    assert_eq!(x.get(t, b"a").expect("get"), None);
    x.put(t, b"a", b"1").expect("put");
    x.put(t, b"b", b"2").expect("put");
    assert_eq!(x.get(t, b"a").expect("get"), Some(b"1".to_vec()));
    x.put(t, b"a", b"3").expect("overwrite");
    assert_eq!(x.get(t, b"a").expect("get"), Some(b"3".to_vec()));
    if e.readers_beside_writer {
        let mut y = d.begin().expect("begin a reader");
        assert_eq!(y.get(t, b"a").expect("get"), None, "uncommitted write seen");
        y.rollback();
    }
    x.commit().expect("commit");
    assert_eq!(committed(d, t, b"a"), Some(b"3".to_vec()));
    // Rollback undoes puts, overwrites and deletes.
    let mut x = d.begin().expect("begin");
    x.delete(t, b"a").expect("delete");
    assert_eq!(x.get(t, b"a").expect("get"), None);
    x.put(t, b"b", b"changed").expect("put");
    x.put(t, b"c", b"new").expect("put");
    x.rollback();
    assert_eq!(committed(d, t, b"a"), Some(b"3".to_vec()));
    assert_eq!(committed(d, t, b"b"), Some(b"2".to_vec()));
    assert_eq!(committed(d, t, b"c"), None);
    // Dropping without commit is a rollback.
    {
        let mut x = d.begin().expect("begin");
        x.put(t, b"d", b"dropped").expect("put");
    }
    assert_eq!(committed(d, t, b"d"), None);
    let mut x = d.begin().expect("begin");
    x.delete(t, b"b").expect("delete");
    x.commit().expect("commit");
    assert_eq!(committed(d, t, b"b"), None);
    // A large value round-trips.
    let big = vec![7u8; 300_000];
    let mut x = d.begin().expect("begin");
    x.put(t, b"big", &big).expect("put big");
    x.commit().expect("commit");
    assert_eq!(committed(d, t, b"big"), Some(big));
}

fn model_scan(
    m: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let valid = match (lo, hi) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l < u || (l == u && matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
        }
        _ => true,
    };
    if !valid {
        return Vec::new();
    }
    let r = m
        .range::<[u8], _>((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        r.rev().take(limit).collect()
    } else {
        r.take(limit).collect()
    }
}

fn scans_are_bounded_both_ways(d: &dyn Driver) {
    let t = d.open_table("scan", true).expect("open scan");
    let other = d.open_table("scan_other", true).expect("open scan_other");
    let mut m = BTreeMap::new();
    let mut x = d.begin().expect("begin");
    for i in (0..40u8).step_by(2) {
        x.put(t, &key(i), &[i]).expect("put");
        m.insert(key(i), vec![i]);
    }
    // Rows of another table never show in this one's scans.
    x.put(other, &key(5), b"other").expect("put");
    x.commit().expect("commit");
    // Own uncommitted writes are part of the scans: an insert, a delete, an overwrite.
    let mut x = d.begin().expect("begin");
    x.put(t, &key(7), b"own").expect("put");
    m.insert(key(7), b"own".to_vec());
    x.delete(t, &key(10)).expect("delete");
    m.remove(&key(10));
    x.put(t, &key(12), b"over").expect("put");
    m.insert(key(12), b"over".to_vec());
    let (k4, k5, k12, k30) = (key(4), key(5), key(12), key(30));
    type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
    let bounds: Vec<Range<'_>> = vec![
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(&k4), Bound::Excluded(&k30)),
        (Bound::Excluded(&k4), Bound::Included(&k30)),
        (Bound::Included(&k5), Bound::Unbounded),
        (Bound::Unbounded, Bound::Excluded(&k12)),
        (Bound::Included(&k12), Bound::Included(&k12)),
        (Bound::Excluded(&k12), Bound::Excluded(&k12)),
        (Bound::Included(&k30), Bound::Included(&k4)),
    ];
    for (lo, hi) in bounds {
        for reverse in [false, true] {
            for limit in [0, 1, 3, 100, usize::MAX] {
                let got = x.scan(t, lo, hi, reverse, limit).expect("scan");
                let want = model_scan(&m, lo, hi, reverse, limit);
                assert_eq!(
                    got, want,
                    "scan {lo:?}..{hi:?} reverse={reverse} limit={limit}"
                );
            }
        }
    }
    x.rollback();
}

fn tables_are_listed_and_dropped(d: &dyn Driver) {
    let t = d.open_table("listed", true).expect("create");
    assert_eq!(d.open_table("listed", false).expect("reopen"), t);
    assert!(d.tables().expect("tables").contains(&"listed".to_string()));
    let mut x = d.begin().expect("begin");
    x.put(t, b"x", b"y").expect("put");
    x.commit().expect("commit");
    d.drop_table("listed").expect("drop");
    assert!(!d.tables().expect("tables").contains(&"listed".to_string()));
    assert!(
        d.open_table("missing", false).is_err(),
        "opened a missing table"
    );
    assert!(d.drop_table("missing").is_err(), "dropped a missing table");
}

/// A locking read held by one transaction makes another's fail retryably (after the lock
/// wait), and that failure ends the loser: its earlier writes are gone.
fn locking_read_conflicts(d: &dyn Driver) {
    let t = d.open_table("lock", true).expect("open lock");
    let mut x = d.begin().expect("begin");
    x.put(t, b"row", b"0").expect("put");
    x.commit().expect("commit");
    let mut a = d.begin().expect("begin a");
    assert_eq!(
        a.get_for_update(t, b"row").expect("a locks"),
        Some(b"0".to_vec())
    );
    let mut b = d.begin().expect("begin b");
    let started = Instant::now();
    let r = b
        .put(t, b"loser", b"1")
        .and_then(|()| b.get_for_update(t, b"row").map(|_| ()));
    let err = r.expect_err("b got a row a holds");
    assert!(err.is_retryable(), "conflict not retryable: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the lock wait ignored lock_wait_timeout=1"
    );
    drop(b);
    a.put(t, b"row", b"a").expect("a writes");
    a.commit().expect("a commits");
    assert_eq!(committed(d, t, b"row"), Some(b"a".to_vec()));
    assert_eq!(
        committed(d, t, b"loser"),
        None,
        "a failed transaction's write stayed"
    );
}

/// Two transactions lock two rows in opposite orders from two threads.
fn opposite_orders(e: &Engine, d: &dyn Driver) {
    let t = d.open_table("dl", true).expect("open dl");
    let mut x = d.begin().expect("begin");
    x.put(t, b"k1", b"-").expect("put");
    x.put(t, b"k2", b"-").expect("put");
    x.commit().expect("commit");
    let run =
        |first: &'static [u8], second: &'static [u8], me: &'static [u8]| -> DriverResult<()> {
            let mut x = d.begin()?;
            x.get_for_update(t, first)?;
            std::thread::sleep(Duration::from_millis(300));
            x.get_for_update(t, second)?;
            x.put(t, b"k1", me)?;
            x.put(t, b"k2", me)?;
            x.commit()
        };
    let (ra, rb) = std::thread::scope(|s| {
        let a = s.spawn(|| run(b"k1", b"k2", b"A"));
        std::thread::sleep(Duration::from_millis(50));
        let b = s.spawn(|| run(b"k2", b"k1", b"B"));
        (a.join().expect("thread a"), b.join().expect("thread b"))
    });
    for r in [&ra, &rb] {
        if let Err(err) = r {
            assert!(err.is_retryable(), "not retryable: {err}");
        }
    }
    let failed = [&ra, &rb].iter().filter(|r| r.is_err()).count();
    match e.locking {
        Locking::RowLocks => assert!(failed >= 1, "a lock cycle ended with no victim"),
        // One writer at a time: the second waits for the first (no cycle), or times out.
        Locking::SingleWriter | Locking::Serial => assert!(failed <= 1, "both failed"),
    }
    let (v1, v2) = (committed(d, t, b"k1"), committed(d, t, b"k2"));
    assert_eq!(v1, v2, "rows written by different transactions");
    assert_ne!(v1, Some(b"-".to_vec()), "no transaction committed");
}

fn conformance(e: &Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = open(e, dir.path(), &options(e));
    reads_own_writes_and_rolls_back(e, &*d);
    scans_are_bounded_both_ways(&*d);
    tables_are_listed_and_dropped(&*d);
    if e.locking != Locking::Serial {
        locking_read_conflicts(&*d);
    }
    opposite_orders(e, &*d);
    d.close().expect("close");
    drop(d);
    // Data survives a close and reopen.
    if e.name != "model" {
        let d = open(e, dir.path(), &options(e));
        let t = d.open_table("rw", false).expect("reopen rw");
        assert_eq!(committed(&*d, t, b"a"), Some(b"3".to_vec()));
        d.close().expect("close");
    }
}

/// A short TPC-C from 4 threads, then the consistency conditions through the driver.
fn tpcc_stays_consistent(e: &Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut set = options(e);
    set.retain(|s| !s.starts_with("lock_wait_timeout"));
    if e.name != "model" {
        set.push("lock_wait_timeout=10");
    }
    let d = open(e, dir.path(), &set);
    let scale = Scale {
        warehouses: 2,
        items: 1000,
        customers: 60,
    };
    let meta = load(&*d, scale, 2, 7, &|_| {}).expect("load");
    let fresh = check(&*d, None).expect("check");
    assert!(fresh.ok(), "{}: after load: {:?}", e.name, fresh.failures);
    let shared = crate::tpcc::clients_on(&*d, &meta);
    let total = crate::tpcc::run_clients(&shared, 4, 100);
    let done: u64 = total.kinds.iter().map(|k| k.ok).sum();
    assert_eq!(done, 400);
    let mut meta = Meta::read(&*d).expect("meta").expect("present");
    meta.fresh = false;
    meta.write(&*d).expect("write meta");
    let acked = shared.acked.to_file();
    let after = check(&*d, Some(&acked)).expect("check");
    assert!(
        after.ok(),
        "{}: after the run: {:?}",
        e.name,
        after.failures
    );
    assert!(after.acked_checked);
    d.close().expect("close");
}

const MODEL: Engine = Engine {
    name: "model",
    locking: Locking::Serial,
    readers_beside_writer: false,
};

#[test]
fn model_conforms() {
    conformance(&MODEL);
}

#[test]
fn model_tpcc_consistent() {
    tpcc_stays_consistent(&MODEL);
}

const EVENKEEL: Engine = Engine {
    name: "evenkeel",
    locking: Locking::RowLocks,
    readers_beside_writer: true,
};

#[test]
fn evenkeel_conforms() {
    conformance(&EVENKEEL);
}

#[test]
fn evenkeel_tpcc_consistent() {
    tpcc_stays_consistent(&EVENKEEL);
}

#[cfg(feature = "innodb")]
mod innodb {
    use super::*;

    const INNODB: Engine = Engine {
        name: "innodb",
        locking: Locking::RowLocks,
        readers_beside_writer: true,
    };

    #[test]
    fn innodb_conforms() {
        conformance(&INNODB);
    }

    #[test]
    fn innodb_tpcc_consistent() {
        tpcc_stays_consistent(&INNODB);
    }
}

#[cfg(feature = "rocksdb")]
mod rocksdb {
    use super::*;

    const ROCKSDB: Engine = Engine {
        name: "rocksdb",
        locking: Locking::RowLocks,
        readers_beside_writer: true,
    };

    #[test]
    fn rocksdb_conforms() {
        conformance(&ROCKSDB);
    }

    #[test]
    fn rocksdb_tpcc_consistent() {
        tpcc_stays_consistent(&ROCKSDB);
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;

    const SQLITE: Engine = Engine {
        name: "sqlite",
        locking: Locking::SingleWriter,
        readers_beside_writer: false,
    };

    #[test]
    fn sqlite_conforms() {
        conformance(&SQLITE);
    }

    #[test]
    fn sqlite_tpcc_consistent() {
        tpcc_stays_consistent(&SQLITE);
    }
}

#[cfg(feature = "lmdb")]
mod lmdb {
    use super::*;

    const LMDB: Engine = Engine {
        name: "lmdb",
        locking: Locking::SingleWriter,
        readers_beside_writer: true,
    };

    #[test]
    fn lmdb_conforms() {
        conformance(&LMDB);
    }

    #[test]
    fn lmdb_tpcc_consistent() {
        tpcc_stays_consistent(&LMDB);
    }
}
