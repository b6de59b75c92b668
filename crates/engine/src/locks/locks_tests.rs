//! Tests of the key lock table, with real threads. Waits are observed through `stats()` (a
//! thread is known to be waiting once `lock_waits` counts it), never through elapsed time.
#![allow(clippy::unwrap_used)]

use super::*;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Barrier};
use std::thread;

const LONG: Duration = Duration::from_secs(60);
const T: TableId = TableId(7);
const S: LockMode = LockMode::Shared;
const X: LockMode = LockMode::Exclusive;

fn txn(n: u64) -> TxnId {
    TxnId(n)
}

fn new_table() -> Arc<LockTable> {
    Arc::new(LockTable::new(LockLimits {
        memory_max_bytes: 1 << 20,
    }))
}

/// Blocks until `cond` holds; panics (instead of hanging the suite) after a generous bound.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LONG, "gave up waiting for: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

fn spawn_lock(
    lt: &Arc<LockTable>,
    t: u64,
    key: &'static [u8],
    mode: LockMode,
    timeout: Duration,
) -> thread::JoinHandle<Result<()>> {
    let lt = lt.clone();
    thread::spawn(move || lt.lock(txn(t), T, key, mode, timeout))
}

fn waits(lt: &LockTable) -> u64 {
    lt.stats().lock_waits
}

#[test]
fn shared_locks_are_shared_between_threads() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", S, LONG).unwrap();
    // A zero timeout proves the second S was granted without waiting.
    spawn_lock(&lt, 2, b"k", S, Duration::ZERO)
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(waits(&lt), 0);
    assert_eq!(lt.stats().memory_used_bytes, 2 * lock_cost_bytes(1));
    lt.release_all(txn(1));
    lt.release_all(txn(2));
    assert!(lt.is_idle());
}

#[test]
fn exclusive_blocks_until_the_holder_releases() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", X, LONG).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (lt, done) = (lt.clone(), done.clone());
        thread::spawn(move || {
            let result = lt.lock(txn(2), T, b"k", S, LONG);
            done.store(true, Relaxed);
            result
        })
    };
    eventually("txn 2 waits", || waits(&lt) == 1);
    assert!(!done.load(Relaxed), "S granted while X is held");
    // Other keys and other tables are not blocked.
    lt.lock(txn(3), T, b"other", X, Duration::ZERO).unwrap();
    lt.lock(txn(3), TableId(8), b"k", X, Duration::ZERO)
        .unwrap();
    lt.release_all(txn(1));
    waiter.join().unwrap().unwrap();
    for t in 1..=3 {
        lt.release_all(txn(t));
    }
    assert!(lt.is_idle());
}

#[test]
fn a_wait_past_the_timeout_returns_lock_wait_timeout() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", X, LONG).unwrap();
    let limit = Duration::from_millis(20);
    let err = spawn_lock(&lt, 2, b"k", S, limit)
        .join()
        .unwrap()
        .unwrap_err();
    let text = err.to_string();
    match err {
        Error::LockWaitTimeout {
            txn: t,
            table,
            limit: l,
            ..
        } => assert_eq!((t, table, l), (txn(2), T, limit)),
        other => panic!("expected LockWaitTimeout, got {other:?}"),
    }
    assert!(
        text.contains("table 7") && text.contains("limit of 20ms"),
        "{text}"
    );
    let stats = lt.stats();
    assert_eq!((stats.lock_waits, stats.lock_timeouts), (1, 1));
    assert_eq!(stats.memory_used_bytes, lock_cost_bytes(1), "refunded");
    lt.release_all(txn(2));
    lt.release_all(txn(1));
    assert!(lt.is_idle());
}

#[test]
fn a_timed_out_waiter_lets_the_waiters_behind_it_through() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", S, LONG).unwrap();
    let x = spawn_lock(&lt, 2, b"k", X, Duration::from_millis(300));
    eventually("txn 2 waits", || waits(&lt) == 1);
    // Behind the waiting X, this S waits (FIFO) until the X gives up, then joins txn 1's S.
    let s = spawn_lock(&lt, 3, b"k", S, LONG);
    assert!(matches!(
        x.join().unwrap(),
        Err(Error::LockWaitTimeout { .. })
    ));
    s.join().unwrap().unwrap();
    lt.release_all(txn(1));
    lt.release_all(txn(3));
    assert!(lt.is_idle());
}

#[test]
fn a_new_shared_request_waits_behind_a_waiting_exclusive() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", S, LONG).unwrap();
    let (tx, rx) = mpsc::channel();
    let spawn_reporting = |t: u64, mode: LockMode| {
        let (lt, tx) = (lt.clone(), tx.clone());
        thread::spawn(move || {
            lt.lock(txn(t), T, b"k", mode, LONG).unwrap();
            tx.send(t).unwrap();
        })
    };
    let x = spawn_reporting(2, X);
    eventually("txn 2 waits", || waits(&lt) == 1);
    let s = spawn_reporting(3, S);
    // Compatible with the held S, yet it waits: nobody jumps the queue.
    eventually("txn 3 waits", || waits(&lt) == 2);
    lt.release_all(txn(1));
    assert_eq!(rx.recv().unwrap(), 2);
    x.join().unwrap();
    assert!(rx.try_recv().is_err(), "S granted while X is held");
    lt.release_all(txn(2));
    assert_eq!(rx.recv().unwrap(), 3);
    s.join().unwrap();
    lt.release_all(txn(3));
    assert!(lt.is_idle());
}

#[test]
fn repeated_requests_are_immediate_and_charged_once() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", X, LONG).unwrap();
    lt.lock(txn(1), T, b"k", S, Duration::ZERO).unwrap();
    lt.lock(txn(1), T, b"k", X, Duration::ZERO).unwrap();
    assert_eq!(lt.stats().memory_used_bytes, lock_cost_bytes(1));
    // S -> X for the only holder is immediate and costs nothing more.
    lt.lock(txn(1), T, b"k2", S, Duration::ZERO).unwrap();
    lt.lock(txn(1), T, b"k2", X, Duration::ZERO).unwrap();
    assert_eq!(lt.stats().memory_used_bytes, 2 * lock_cost_bytes(1) + 1);
    assert_eq!(waits(&lt), 0);
    assert!(lt.lock(txn(2), T, b"k2", S, Duration::ZERO).is_err());
    lt.release_all(txn(1));
    assert!(lt.is_idle());
}

#[test]
fn an_upgrade_waits_for_other_holders_and_goes_first() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", S, LONG).unwrap();
    lt.lock(txn(2), T, b"k", S, LONG).unwrap();
    let upgrade = spawn_lock(&lt, 1, b"k", X, LONG);
    eventually("the upgrade waits", || waits(&lt) == 1);
    let later_x = spawn_lock(&lt, 3, b"k", X, LONG);
    eventually("txn 3 waits", || waits(&lt) == 2);
    assert_eq!(lt.stats().memory_used_bytes, 3 * lock_cost_bytes(1));
    lt.release_all(txn(2));
    upgrade.join().unwrap().unwrap();
    assert!(
        !later_x.is_finished(),
        "X granted while the upgrade holds X"
    );
    lt.release_all(txn(1));
    later_x.join().unwrap().unwrap();
    lt.release_all(txn(3));
    assert!(lt.is_idle());
}

#[test]
fn two_upgraders_deadlock_and_the_second_is_refused() {
    let lt = new_table();
    lt.lock(txn(1), T, b"k", S, LONG).unwrap();
    lt.lock(txn(2), T, b"k", S, LONG).unwrap();
    let first = spawn_lock(&lt, 1, b"k", X, LONG);
    eventually("txn 1 waits", || waits(&lt) == 1);
    let err = lt.lock(txn(2), T, b"k", X, LONG).unwrap_err();
    match &err {
        Error::Deadlock { victim, cycle } => {
            assert_eq!(*victim, txn(2));
            assert_eq!(cycle, &[txn(2), txn(1)]);
        }
        other => panic!("expected Deadlock, got {other:?}"),
    }
    lt.release_all(txn(2));
    first.join().unwrap().unwrap();
    lt.release_all(txn(1));
    assert_eq!(lt.stats().deadlocks, 1);
    assert!(lt.is_idle());
}

#[test]
fn the_request_closing_a_cycle_gets_deadlock_and_the_other_proceeds() {
    let lt = new_table();
    lt.lock(txn(1), T, b"a", X, LONG).unwrap();
    lt.lock(txn(2), T, b"b", X, LONG).unwrap();
    let first = spawn_lock(&lt, 1, b"b", X, LONG);
    eventually("txn 1 waits", || waits(&lt) == 1);
    let err = lt.lock(txn(2), T, b"a", X, LONG).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Deadlock { victim, .. } if victim == txn(2)));
    assert!(text.contains("txn 2 -> txn 1 -> txn 2"), "{text}");
    assert!(
        !first.is_finished(),
        "txn 1 is granted only after the victim releases"
    );
    lt.release_all(txn(2));
    first.join().unwrap().unwrap();
    lt.release_all(txn(1));
    let stats = lt.stats();
    assert_eq!((stats.deadlocks, stats.lock_waits), (1, 1));
    assert!(lt.is_idle());
}

#[test]
fn racing_two_txn_deadlocks_have_exactly_one_victim() {
    for round in 0..20 {
        let lt = new_table();
        let barrier = Arc::new(Barrier::new(2));
        let run = |me: u64, mine: &'static [u8], theirs: &'static [u8]| {
            let (lt, barrier) = (lt.clone(), barrier.clone());
            thread::spawn(move || {
                lt.lock(txn(me), T, mine, X, LONG).unwrap();
                barrier.wait();
                let result = lt.lock(txn(me), T, theirs, X, LONG);
                if result.is_err() {
                    lt.release_all(txn(me));
                }
                result
            })
        };
        let one = run(1, b"a", b"b");
        let two = run(2, b"b", b"a");
        let results = [one.join().unwrap(), two.join().unwrap()];
        let victims = results
            .iter()
            .filter(|r| matches!(r, Err(Error::Deadlock { .. })))
            .count();
        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!((victims, winners), (1, 1), "round {round}: {results:?}");
        lt.release_all(txn(1));
        lt.release_all(txn(2));
        assert!(lt.is_idle(), "round {round}");
    }
}

#[test]
fn memory_limit_refuses_instead_of_growing() {
    let cost = lock_cost_bytes(3);
    let limit = 2 * cost + 10;
    let lt = Arc::new(LockTable::new(LockLimits {
        memory_max_bytes: limit,
    }));
    lt.lock(txn(1), T, b"aaa", X, LONG).unwrap();
    lt.lock(txn(1), T, b"bbb", S, LONG).unwrap();
    let err = lt.lock(txn(1), T, b"ccc", S, LONG).unwrap_err();
    assert!(err.to_string().contains(&format!("limit of {limit} bytes")));
    match err {
        Error::LockMemoryExhausted {
            used,
            requested,
            limit: l,
        } => assert_eq!((used, requested, l), (2 * cost, cost, limit)),
        other => panic!("expected LockMemoryExhausted, got {other:?}"),
    }
    // A request that would have to wait is refused up front too, without waiting.
    let err = spawn_lock(&lt, 2, b"aaa", S, LONG).join().unwrap();
    assert!(matches!(err, Err(Error::LockMemoryExhausted { .. })));
    assert_eq!(waits(&lt), 0);
    // Re-entrant requests and upgrades cost nothing, so they still succeed at the limit.
    lt.lock(txn(1), T, b"bbb", X, LONG).unwrap();
    assert_eq!(lt.stats().memory_used_bytes, 2 * cost);
    lt.release_all(txn(1));
    lt.release_all(txn(2));
    assert!(lt.is_idle());
}

#[test]
fn release_all_returns_accounted_memory_exactly() {
    let lt = new_table();
    lt.lock(txn(9), T, b"held-by-9", X, LONG).unwrap();
    lt.lock(txn(9), T, b"shared", S, LONG).unwrap();
    let baseline = lt.stats().memory_used_bytes;
    lt.lock(txn(1), T, b"shared", S, LONG).unwrap();
    lt.lock(txn(1), T, b"a", S, LONG).unwrap();
    lt.lock(txn(1), T, b"a", X, LONG).unwrap();
    lt.lock(txn(1), TableId(3), b"a-much-longer-key", X, LONG)
        .unwrap();
    let timeout = lt.lock(txn(1), T, b"held-by-9", S, Duration::from_millis(1));
    assert!(matches!(timeout, Err(Error::LockWaitTimeout { .. })));
    let upgrade = lt.lock(txn(1), T, b"shared", X, Duration::from_millis(1));
    assert!(matches!(upgrade, Err(Error::LockWaitTimeout { .. })));
    assert!(lt.stats().memory_used_bytes > baseline);
    lt.release_all(txn(1));
    assert_eq!(lt.stats().memory_used_bytes, baseline);
    lt.release_all(txn(9));
    assert!(lt.is_idle());
}

#[test]
fn find_cycle_reports_the_path_back_to_the_start() {
    let mut graph = WaitGraph::new();
    graph.insert(txn(1), vec![txn(2), txn(5)]);
    graph.insert(txn(2), vec![txn(3)]);
    graph.insert(txn(5), vec![txn(6)]);
    graph.insert(txn(6), vec![txn(1)]);
    assert_eq!(
        find_cycle(&graph, txn(1)),
        Some(vec![txn(1), txn(5), txn(6)])
    );
    assert_eq!(find_cycle(&graph, txn(2)), None);
    graph.insert(txn(3), vec![txn(2)]);
    assert_eq!(find_cycle(&graph, txn(1)).map(|c| c.len()), Some(3));
}

/// Many threads, few keys, random modes: every txn either commits or is refused (deadlock or
/// timeout) and rolls back; at the end nothing is held, waited for or charged.
#[test]
fn random_contention_leaves_the_table_idle() {
    let lt = new_table();
    let workers: Vec<_> = (0..4u64)
        .map(|worker| {
            let lt = lt.clone();
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(worker);
                for i in 0..150u64 {
                    let me = txn(worker * 1000 + i);
                    for _ in 0..3 {
                        let key = [rng.gen_range(0..6u8)];
                        let mode = if rng.gen_bool(0.5) { S } else { X };
                        if lt.lock(me, T, &key, mode, Duration::from_secs(5)).is_err() {
                            break;
                        }
                    }
                    lt.release_all(me);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(lt.is_idle());
}

#[test]
fn a_transaction_charges_locks_from_chunks_and_may_use_the_whole_limit() {
    // 1/1024 of this limit is a chunk of 1,000 bytes (about five locks of 2-byte keys), and
    // the last 500 bytes are no whole chunk.
    let limit = 1_024_500;
    let cost = lock_cost_bytes(2);
    let lt = Arc::new(LockTable::new(LockLimits {
        memory_max_bytes: limit,
    }));
    lt.lock(txn(1), T, b"k0", X, LONG).unwrap();
    lt.lock(txn(1), T, b"k1", X, LONG).unwrap();
    // the stats count what the locks are charged, not the credit taken with them
    assert_eq!(lt.stats().memory_used_bytes, 2 * cost);
    // the last chunk does not fit whole: the transaction still gets up to the limit
    let mut granted = 2;
    let err = loop {
        let key = format!("{:02}", granted % 100);
        match lt.lock(txn(1), TableId(granted / 100), key.as_bytes(), X, LONG) {
            Ok(()) => granted += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::LockMemoryExhausted { .. }), "{err}");
    let granted = granted as usize;
    assert!(
        granted * cost <= limit && limit < (granted + 1) * cost,
        "{granted} locks of {cost} bytes under a limit of {limit}"
    );
    assert_eq!(lt.stats().memory_used_bytes, granted * cost);
    // another transaction finds nothing left, and its refusal leaves nothing behind
    let err = lt.lock(txn(2), T, b"zz", X, LONG).unwrap_err();
    assert!(matches!(err, Error::LockMemoryExhausted { .. }), "{err}");
    lt.release_all(txn(1));
    assert!(lt.is_idle());
    lt.lock(txn(2), T, b"zz", X, LONG).unwrap();
    lt.release_all(txn(2));
    assert!(lt.is_idle());
}

#[test]
fn the_shards_give_back_the_memory_of_a_large_transaction() {
    let lt = LockTable::new(LockLimits {
        memory_max_bytes: 1 << 30,
    });
    let room =
        |lt: &LockTable| -> usize { lt.shards.iter().map(|s| s.queues.lock().0.capacity()).sum() };
    let before = room(&lt);
    for i in 0..200_000u32 {
        lt.lock(txn(1), T, &i.to_be_bytes(), X, LONG).unwrap();
    }
    let grown = room(&lt);
    assert!(grown >= 200_000, "{grown} queues of room for 200,000 keys");
    lt.release_all(txn(1));
    assert!(lt.is_idle());
    let after = room(&lt);
    assert!(
        after <= 2 * SHARDS * QUEUES_KEPT && after * 4 < grown,
        "room for {after} queues kept of {grown} (it was {before} before)"
    );
}
