//! The adaptive hash index: point gets by a guessed leaf answer what a descent answers, when
//! the guess is stale (the key moved by a split, its page freed and reused by another
//! table) and under concurrent puts, deletes, splits and merges.

use crate::common::*;
use evenkeel::btree::AdaptiveHashCounts;
use evenkeel::Database;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

fn ahi_opts(on: bool) -> evenkeel::Options {
    let mut o = opts(4096, 4 << 20);
    o.set("adaptive_hash_index", if on { "true" } else { "false" })
        .unwrap();
    o
}

fn counts(db: &Database) -> AdaptiveHashCounts {
    db.status().adaptive_hash
}

fn put_all(db: &Database, t: &evenkeel::Table, rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    let mut txn = db.begin();
    for (k, v) in rows {
        txn.put(t, &k, &v).unwrap();
    }
    txn.commit().unwrap();
}

fn get(db: &Database, t: &evenkeel::Table, k: &[u8]) -> Option<Vec<u8>> {
    db.begin().get(t, k).unwrap()
}

#[test]
fn a_get_records_a_guess_and_the_next_get_of_the_key_uses_it() {
    let (_sim, db) = sim_db(ahi_opts(true));
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    let c0 = counts(&db);
    assert_eq!(get(&db, &t, &key16(1234)), Some(val(1234, 100)));
    let c1 = counts(&db);
    assert_eq!((c1.misses - c0.misses, c1.hits - c0.hits), (1, 0));
    assert_eq!(get(&db, &t, &key16(1234)), Some(val(1234, 100)));
    let c2 = counts(&db);
    assert_eq!((c2.misses - c1.misses, c2.hits - c1.hits), (0, 1));
    assert_eq!(c2.failed_guesses, 0);
    assert!(db.status().adaptive_hash_entries_max > 0);
}

#[test]
fn off_records_nothing() {
    let (_sim, db) = sim_db(ahi_opts(false));
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    for _ in 0..3 {
        assert_eq!(get(&db, &t, &key16(77)), Some(val(77, 100)));
    }
    assert_eq!(counts(&db), AdaptiveHashCounts::default());
    assert_eq!(db.status().adaptive_hash_entries_max, 0);
}

/// A key right after `k` in key order (longer, same prefix).
fn after(k: &[u8], j: u16) -> Vec<u8> {
    let mut v = k.to_vec();
    v.extend_from_slice(&j.to_be_bytes());
    v
}

#[test]
fn a_key_moved_by_splits_is_found_where_it_went() {
    let (_sim, db) = sim_db(ahi_opts(true));
    let t = db.create_table("t").unwrap();
    put_all(&db, &t, (0..3000u64).map(|i| (key16(i * 2), val(i, 100))));
    let k = key16(2000);
    assert_eq!(get(&db, &t, &k), Some(val(1000, 100)));
    assert_eq!(get(&db, &t, &k), Some(val(1000, 100)));
    let before = counts(&db);
    assert_eq!(before.hits, 1);
    // fill the gaps on both sides of the key until its leaf has split many times over
    let splits = db.status().tree.page_splits;
    put_all(
        &db,
        &t,
        (0..400u16).flat_map(|j| {
            [
                (after(&key16(1999), j), val(j as u64, 120)),
                (after(&k, j), val(j as u64, 120)),
            ]
        }),
    );
    assert!(db.status().tree.page_splits >= splits + 10);
    assert_eq!(get(&db, &t, &k), Some(val(1000, 100)));
    let after_splits = counts(&db);
    assert_eq!(
        after_splits.failed_guesses - before.failed_guesses,
        1,
        "the guess should have gone stale: the key's leaf split 10+ times around it"
    );
    // the descent recorded where the key is now
    assert_eq!(get(&db, &t, &k), Some(val(1000, 100)));
    assert_eq!(counts(&db).hits, after_splits.hits + 1);
    assert_check(&db);
}

#[test]
fn a_guess_into_a_page_freed_and_reused_by_another_table_is_refused() {
    let (_sim, db) = sim_db(ahi_opts(true));
    let a = db.create_table("a").unwrap();
    let keys: Vec<u64> = (0..3000).collect();
    put_all(&db, &a, keys.iter().map(|&i| (key16(i), val(i, 100))));
    // guesses for every 10th key of a
    for &i in keys.iter().step_by(10) {
        assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)));
    }
    // a's leaves are emptied and freed; b takes the freed pages for the same keys
    let mut txn = db.begin();
    for &i in &keys {
        txn.delete(&a, &key16(i)).unwrap();
    }
    txn.commit().unwrap();
    let b = db.create_table("b").unwrap();
    let file_pages = db.status().file_pages;
    put_all(&db, &b, keys.iter().map(|&i| (key16(i), val(i + 1, 100))));
    // (a keeps its root, so b takes one page more than a freed)
    assert!(
        db.status().file_pages <= file_pages + 1,
        "b reused a's pages"
    );
    let c0 = counts(&db);
    for &i in keys.iter().step_by(10) {
        assert_eq!(get(&db, &a, &key16(i)), None, "key {i} of a");
        assert_eq!(
            get(&db, &b, &key16(i)),
            Some(val(i + 1, 100)),
            "key {i} of b"
        );
    }
    let c1 = counts(&db);
    assert_eq!(
        c1.failed_guesses - c0.failed_guesses,
        300,
        "every guess for a pointed at a page a no longer has"
    );
    // a again: the same keys land in its own new leaves, and guesses follow them
    put_all(&db, &a, keys.iter().map(|&i| (key16(i), val(i + 2, 100))));
    for _ in 0..2 {
        for &i in keys.iter().step_by(10) {
            assert_eq!(get(&db, &a, &key16(i)), Some(val(i + 2, 100)));
        }
    }
    assert!(counts(&db).hits >= c1.hits + 300);
    assert_check(&db);
}

#[test]
fn a_guess_into_a_dropped_table_page_reused_by_a_new_one_is_refused() {
    let (_sim, db) = sim_db(ahi_opts(true));
    let a = db.create_table("a").unwrap();
    put_all(&db, &a, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    for i in (0..3000u64).step_by(7) {
        assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)));
    }
    db.drop_table("a").unwrap();
    // a new table under the same name and keys takes the dropped table's pages
    let a2 = db.create_table("a").unwrap();
    put_all(&db, &a2, (0..3000u64).map(|i| (key16(i), val(i + 5, 100))));
    for _ in 0..2 {
        for i in (0..3000u64).step_by(7) {
            assert_eq!(get(&db, &a2, &key16(i)), Some(val(i + 5, 100)));
        }
    }
    assert!(counts(&db).hits > 0);
    assert_check(&db);
}

/// A key's states: (round, value, None for deleted), in round order.
type States = Vec<(u64, Option<Vec<u8>>)>;

/// One writer changes a few of 200 keys per transaction (values from 10 bytes to 1.5 KiB on
/// 4 KiB pages, a third of the changes deletes: leaves split, empty, merge and are reused)
/// while readers get random keys twice in one transaction. Each answer must be a state of
/// the key some commit between the get's start and end left (the history below), and the
/// second get of a transaction must repeat the first.
#[test]
fn gets_under_concurrent_writes_agree_with_the_history() {
    const KEYS: usize = 200;
    const ROUNDS: u64 = 10_000;
    let (_sim, db) = sim_db(ahi_opts(true));
    let t = db.create_table("t").unwrap();
    // per key: (round, value) in round order, pushed before the round's commit starts
    let history: Mutex<Vec<States>> = Mutex::new(vec![Vec::new(); KEYS]);
    let started = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    let value = |k: usize, round: u64, len: usize| {
        let mut v = key16(k as u64);
        v.extend_from_slice(&round.to_be_bytes());
        v.extend_from_slice(&val(round * 31 + k as u64, len));
        v
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = SmallRng::seed_from_u64(15);
            for round in 1..=ROUNDS {
                let mut txn = db.begin();
                let mut changes = Vec::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = rng.gen_range(0..KEYS);
                    let v = (rng.gen_range(0..3) != 0)
                        .then(|| value(k, round, rng.gen_range(10..1500)));
                    match &v {
                        Some(v) => txn.put(&t, &key16(k as u64), v).unwrap(),
                        None => txn.delete(&t, &key16(k as u64)).unwrap(),
                    }
                    changes.retain(|(c, _)| *c != k);
                    changes.push((k, v));
                }
                {
                    let mut h = history.lock().unwrap();
                    for (k, v) in changes {
                        h[k].push((round, v));
                    }
                }
                started.store(round, Ordering::SeqCst);
                txn.commit().unwrap();
                done.store(round, Ordering::SeqCst);
            }
            stop.store(true, Ordering::SeqCst);
        });
        for r in 0..2u64 {
            let (db, t, history, started, done, stop, checked) =
                (&db, &t, &history, &started, &done, &stop, &checked);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r);
                // a few hot keys, read again and again, and the rest
                while !stop.load(Ordering::SeqCst) {
                    let k = if rng.gen_bool(0.7) {
                        rng.gen_range(0..20)
                    } else {
                        rng.gen_range(0..KEYS)
                    };
                    let lo = done.load(Ordering::SeqCst);
                    let txn = db.begin();
                    let got = txn.get(t, &key16(k as u64)).unwrap();
                    let hi = started.load(Ordering::SeqCst);
                    let again = txn.get(t, &key16(k as u64)).unwrap();
                    assert_eq!(got, again, "key {k}: a read view's second get differs");
                    let h = history.lock().unwrap()[k].clone();
                    let at_lo = h
                        .iter()
                        .rev()
                        .find(|(round, _)| *round <= lo)
                        .map_or(&None, |(_, v)| v);
                    let allowed = std::iter::once(at_lo).chain(
                        h.iter()
                            .filter(|(round, _)| *round > lo && *round <= hi)
                            .map(|(_, v)| v),
                    );
                    let ok = allowed.into_iter().any(|v| *v == got);
                    assert!(
                        ok,
                        "key {k}: got {:?} (len {:?}), not a state between rounds {lo} and {hi}",
                        got.as_ref().map(|v| &v[..24]),
                        got.as_ref().map(Vec::len)
                    );
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let c = counts(&db);
    assert!(
        checked.load(Ordering::Relaxed) > 1000,
        "readers checked too few gets"
    );
    assert!(c.hits > 0, "no get used a guess: {c:?}");
    assert!(c.failed_guesses > 0, "no guess went stale: {c:?}");
    assert!(db.status().tree.page_splits > 0 && db.status().tree.pages_freed > 0);
    // the end state, through guesses and descents alike
    let h = history.into_inner().unwrap();
    for _ in 0..2 {
        for (k, states) in h.iter().enumerate() {
            let want = states.last().and_then(|(_, v)| v.clone());
            assert_eq!(get(&db, &t, &key16(k as u64)), want, "key {k} at the end");
        }
    }
    assert_check(&db);
}

/// Guesses name frames: a's leaves are evicted by a larger table read through a small pool,
/// their frames are taken by b's pages, then a's leaves come back in other frames (some of
/// them frames that held other leaves of a). Every get still answers a's own value, the
/// guesses into frames that now hold other pages (or none) fail and are replaced, and the
/// next get of each key uses its new guess.
#[test]
fn a_guess_into_a_frame_reused_by_another_page_is_refused() {
    let mut o = opts(4096, 1 << 20); // 256 frames
    o.set("adaptive_hash_index", "true").unwrap();
    let (_sim, db) = sim_db(o);
    let a = db.create_table("a").unwrap();
    put_all(&db, &a, (0..3000u64).map(|i| (key16(i), val(i, 100))));
    let b = db.create_table("b").unwrap();
    for chunk in (0..20_000u64).collect::<Vec<_>>().chunks(2000) {
        put_all(&db, &b, chunk.iter().map(|&i| (key16(i), val(i + 7, 100))));
    }
    let probe: Vec<u64> = (0..3000).step_by(10).collect();
    for &i in &probe {
        assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)));
    }
    let read_all = |t: &evenkeel::Table| {
        let txn = db.begin();
        let mut n = 0;
        for row in t.range(&txn, ..).unwrap() {
            row.unwrap();
            n += 1;
        }
        txn.commit().unwrap();
        n
    };
    // b's 700 pages through 256 frames: a's leaves are evicted, their frames reused, and a's
    // leaves come back in whatever frames the pool hands out. Should they all come back into
    // the frames they had (the free list's order can repeat), no guess goes stale and the
    // round shows nothing: the cycle runs again, a few times at most.
    let mut c0;
    let mut c1;
    let mut rounds = 0;
    loop {
        rounds += 1;
        let evicted = db.status().buffer.evictions + db.status().buffer.lru_evictions;
        assert_eq!(read_all(&b), 20_000);
        assert!(db.status().buffer.evictions + db.status().buffer.lru_evictions > evicted + 200);
        assert_eq!(read_all(&a), 3000);
        c0 = counts(&db);
        for &i in &probe {
            assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)), "key {i} of a");
            assert_eq!(
                get(&db, &a, &after(&key16(i), 1)),
                None,
                "absent key after {i}"
            );
        }
        c1 = counts(&db);
        if c1.failed_guesses > c0.failed_guesses || rounds == 5 {
            break;
        }
    }
    assert!(
        c1.failed_guesses > c0.failed_guesses,
        "no guess went stale in {rounds} rounds: {c0:?} -> {c1:?}"
    );
    // Each key again, twice in a row: the first get replaced the key's guess (or used it),
    // the second uses the guess the first left. (Not a pass over all the keys and then
    // another: in this small pool a pass that reads some of a's leaves back can evict the
    // others, and on a busy machine the pool can keep doing so pass after pass, every
    // guess failing as it should. Between two gets of one key nothing reads a page.)
    let mut repeat_hits = 0;
    for &i in &probe {
        assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)), "key {i} of a");
        let before = counts(&db).hits;
        assert_eq!(get(&db, &a, &key16(i)), Some(val(i, 100)), "key {i} of a");
        repeat_hits += counts(&db).hits - before;
    }
    let c2 = counts(&db);
    // (the LRU cleaner can still take a leaf between the two gets: most, not all)
    assert!(
        repeat_hits * 2 >= probe.len() as u64,
        "{repeat_hits} of {} repeated gets used the guess the get before left: {c1:?} -> {c2:?}",
        probe.len()
    );
    assert_eq!(c2.misses, c1.misses, "every key of a had an entry");
    for &i in &probe {
        assert_eq!(
            get(&db, &b, &key16(i)),
            Some(val(i + 7, 100)),
            "key {i} of b"
        );
    }
    assert_check(&db);
}
