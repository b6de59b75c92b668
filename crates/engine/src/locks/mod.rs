//! The key lock table: shared (S) and exclusive (X) locks on (table, key), held by
//! transactions until [`LockTable::release_all`].
//!
//! What must stay true:
//! - S is compatible with S only. A holder asking again for a mode it covers is granted at once;
//!   S -> X is granted at once when the asker is the only holder, otherwise it waits ahead of
//!   the other waiters (it already holds S, so nobody behind it could be granted first anyway).
//! - Waiting is FIFO: a new request waits whenever anybody is already waiting on that key, so an
//!   X request is never starved by a stream of S requests.
//! - The wait-for graph (waiter -> the holders and earlier waiters it is incompatible with) is
//!   updated under the shard mutex of the key whose queue changed, so at every moment it is the
//!   true graph. Only a new wait (or an upgrade) adds edges, so the request that would close a
//!   cycle is refused with `Error::Deadlock` before it sleeps; nobody else is ever chosen.
//! - Every lock a transaction holds or waits for is charged `key.len() + LOCK_OVERHEAD_BYTES`
//!   before anything is inserted, from the transaction's credit: bytes taken from
//!   `memory_max_bytes` in chunks ([`LockTable::credit_chunk`]), so the limit's shared counter
//!   is written once per chunk and once at `release_all`, not twice per lock (its cache line
//!   moving between cores was most of a lock's cost under four writers). A request for which
//!   neither a chunk nor its own bytes fit under the limit fails with
//!   `Error::LockMemoryExhausted` and changes nothing. Every charge goes back to the limit
//!   exactly once (on a timeout or deadlock, with the credit too when the transaction holds no
//!   lock; the rest with the credit at `release_all`), so after `release_all` the total is back
//!   where it was. `memory_used_bytes` counts charges, not credit; the limit counts both, so
//!   a request may fail while up to a chunk per transaction is credit nobody uses yet.
//! - Lock order: a shard mutex, then the wait-graph mutex or a per-transaction index mutex
//!   (never the other way round), and no thread holds two shard mutexes.
//!
//! A transaction is used by one thread at a time: it waits for at most one lock, and
//! `release_all` is not called while one of its requests is waiting.

use crate::error::{Error, Result};
use crate::types::{TableId, TxnId};
use hashbrown::hash_table::{Entry, HashTable};
use parking_lot::{Condvar, Mutex, MutexGuard};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes charged per lock held or waited for, on top of the key bytes: an estimate of the
/// key's queue in its shard's table (~130 with its control byte and load-factor slack), the
/// shared key allocation's header (16) and the transaction's index entry (32), rounded up
/// for allocator slack.
pub const LOCK_OVERHEAD_BYTES: usize = 200;

/// The hasher of the shards and the queues' maps: keys are hashed several times per lock and
/// release, and SipHash was a visible share of a commit's CPU; foldhash is seeded per process.
type FastHash = foldhash::fast::RandomState;

/// What one transaction holds: its keys (for `release_all`), each with its hash ([`Spot`]),
/// and the lock memory taken from the limit for it and not charged yet.
#[derive(Default)]
struct Held {
    locks: Vec<(TableId, Arc<[u8]>, u64)>,
    credit: usize,
}

/// Per transaction, what it holds.
type HeldIndex = HashMap<TxnId, Held, FastHash>;

/// The queues a shard's table keeps room for however few keys are locked, within a factor
/// of two ([`Queues::shrink_if_sparse`]).
const QUEUES_KEPT: usize = 256;

/// The most lock memory a transaction takes from the limit at once ([`LockTable::credit_chunk`]).
const CREDIT_CHUNK_MAX: usize = 16 * 1024;

/// Mutex shards over hash(table, key); also the shard count of the per-transaction index.
const SHARDS: usize = 64;

/// The memory one (transaction, key) lock entry is charged.
pub fn lock_cost_bytes(key_len: usize) -> usize {
    key_len.saturating_add(LOCK_OVERHEAD_BYTES)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    Shared,
    Exclusive,
}

impl LockMode {
    /// Whether two different transactions may hold these modes on one key at once.
    pub fn compatible(self, other: LockMode) -> bool {
        self == LockMode::Shared && other == LockMode::Shared
    }

    /// Whether holding `self` already gives what `wanted` asks for.
    pub fn covers(self, wanted: LockMode) -> bool {
        self == LockMode::Exclusive || wanted == LockMode::Shared
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockLimits {
    /// Upper bound on the bytes charged for all locks held and waited for.
    pub memory_max_bytes: usize,
}

/// Counters since the table was created, and the memory in use now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LockStats {
    /// Requests that had to wait (not counting those refused as deadlocks).
    pub lock_waits: u64,
    /// Time spent waiting, including waits that timed out.
    pub lock_wait_us: u64,
    /// Requests refused because they would have closed a wait-for cycle.
    pub deadlocks: u64,
    /// Waits that ended in `Error::LockWaitTimeout`.
    pub lock_timeouts: u64,
    pub memory_used_bytes: usize,
    pub memory_max_bytes: usize,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    txn: TxnId,
    mode: LockMode,
}

/// Where a (table, key) lives: its hash, computed once per request or release and used for
/// both the shard (bits 40-45) and the shard's table (hashbrown probes with the low bits and
/// tags with the top 7, so the shard's bits are neither).
#[derive(Clone, Copy)]
struct Spot<'k> {
    table: TableId,
    key: &'k [u8],
    hash: u64,
}

impl Spot<'_> {
    fn shard(&self) -> usize {
        (self.hash >> 40) as usize % SHARDS
    }

    fn is(&self, q: &LockQueue) -> bool {
        q.table == self.table && *q.key == *self.key
    }
}

/// Holders and waiters of one key. At most one granted entry and one waiting entry per txn.
struct LockQueue {
    table: TableId,
    /// The hash of (table, key) ([`Spot`]): the shard's table rehashes from it when it grows.
    hash: u64,
    /// Shared with the holders' entries in the per-transaction index.
    key: Arc<[u8]>,
    /// Inline for the usual one or two holders: a key's first grant allocates nothing.
    granted: SmallVec<[Request; 2]>,
    /// Upgrades first (in arrival order), then new requests in arrival order.
    waiting: VecDeque<Request>,
    /// What each sleeping waiter sleeps on, so a grant wakes only the waiters it granted (a
    /// waiter that found itself granted by then, or timed out, has taken its entry out).
    wakers: Vec<(TxnId, Arc<Condvar>)>,
}

impl LockQueue {
    /// Nobody holds or waits for the key: the queue can go.
    fn is_unused(&self) -> bool {
        self.granted.is_empty() && self.waiting.is_empty()
    }

    fn held_mode(&self, txn: TxnId) -> Option<LockMode> {
        self.granted.iter().find(|r| r.txn == txn).map(|r| r.mode)
    }

    fn holds(&self, txn: TxnId, mode: LockMode) -> bool {
        self.held_mode(txn).is_some_and(|h| h.covers(mode))
    }

    /// Compatible with every holder other than the requester itself (which may hold S).
    fn compatible_with_holders(&self, req: Request) -> bool {
        self.granted
            .iter()
            .all(|g| g.txn == req.txn || g.mode.compatible(req.mode))
    }

    fn grant(&mut self, req: Request) {
        match self.granted.iter_mut().find(|g| g.txn == req.txn) {
            Some(held) => held.mode = req.mode,
            None => self.granted.push(req),
        }
    }

    /// Grants waiters from the front while they fit (strict FIFO); returns who was granted.
    fn grant_waiters(&mut self) -> Vec<TxnId> {
        let mut granted = Vec::new();
        while let Some(&front) = self.waiting.front() {
            if !self.compatible_with_holders(front) {
                break;
            }
            self.waiting.pop_front();
            self.grant(front);
            granted.push(front.txn);
        }
        granted
    }

    fn enqueue(&mut self, req: Request, upgrade: bool) {
        if upgrade {
            let holders = &self.granted;
            let upgrades = self
                .waiting
                .iter()
                .take_while(|w| holders.iter().any(|g| g.txn == w.txn))
                .count();
            self.waiting.insert(upgrades, req);
        } else {
            self.waiting.push_back(req);
        }
    }

    fn remove_waiter(&mut self, txn: TxnId) {
        self.waiting.retain(|w| w.txn != txn);
    }

    fn remove_waker(&mut self, txn: TxnId) {
        self.wakers.retain(|(t, _)| *t != txn);
    }

    /// Wakes the sleeping waiters among `granted` (and forgets their wakers).
    fn wake(&mut self, granted: &[TxnId]) {
        self.wakers.retain(|(t, waker)| {
            let wake = granted.contains(t);
            if wake {
                waker.notify_one();
            }
            !wake
        });
    }

    /// Rewrites the wait-for edges of every waiter of this key.
    fn refresh_edges(&self, graph: &mut WaitGraph) {
        for (i, w) in self.waiting.iter().enumerate() {
            let ahead = self.waiting.iter().take(i);
            let blockers = self
                .granted
                .iter()
                .chain(ahead)
                .filter(|o| o.txn != w.txn && !o.mode.compatible(w.mode))
                .map(|o| o.txn);
            let mut edges: Vec<TxnId> = Vec::new();
            for b in blockers {
                if !edges.contains(&b) {
                    edges.push(b);
                }
            }
            graph.insert(w.txn, edges);
        }
    }
}

/// Waiting txn -> the txns it waits for. Only txns that are waiting have an entry.
type WaitGraph = HashMap<TxnId, Vec<TxnId>>;

/// A path from `start` back to `start`, if one exists: `[start, a, b]` means start waits for a,
/// a for b and b for start. Visits each waiting txn at most once.
fn find_cycle(graph: &WaitGraph, start: TxnId) -> Option<Vec<TxnId>> {
    let mut path = vec![start];
    let mut next_edge = vec![0usize];
    let mut visited = HashSet::from([start]);
    while let (Some(&node), Some(edge)) = (path.last(), next_edge.last_mut()) {
        let next = graph.get(&node).and_then(|b| b.get(*edge)).copied();
        *edge += 1;
        match next {
            None => {
                path.pop();
                next_edge.pop();
            }
            Some(n) if n == start => return Some(path),
            Some(n) => {
                if visited.insert(n) {
                    path.push(n);
                    next_edge.push(0);
                }
            }
        }
    }
    None
}

/// The queues of one shard, found by the hash of (table, key) ([`Spot`]).
#[derive(Default)]
struct Queues(HashTable<LockQueue>);

impl Queues {
    fn get_or_insert(&mut self, at: Spot<'_>) -> &mut LockQueue {
        match self.0.entry(at.hash, |q| at.is(q), |q| q.hash) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e
                .insert(LockQueue {
                    table: at.table,
                    hash: at.hash,
                    key: Arc::from(at.key),
                    granted: SmallVec::new(),
                    waiting: VecDeque::new(),
                    wakers: Vec::new(),
                })
                .into_mut(),
        }
    }

    /// The queue of a key someone holds or waits for; its absence is a bookkeeping bug.
    fn get(&mut self, at: Spot<'_>) -> &mut LockQueue {
        self.0
            .find_mut(at.hash, |q| at.is(q))
            .expect("a held or waited-for key has a queue")
    }

    /// Gives back the memory of a table left mostly empty (a large transaction's locks
    /// released): shrinks it to twice its keys once they fill under 1/8 of it, so it costs
    /// a rehash per seven in eight of its keys released and holds at most 8x what is locked.
    fn shrink_if_sparse(&mut self) {
        let (len, capacity) = (self.0.len(), self.0.capacity());
        if capacity > 2 * QUEUES_KEPT && len * 8 < capacity {
            self.0.shrink_to((len * 2).max(QUEUES_KEPT), |q| q.hash);
        }
    }

    fn remove_if_unused(&mut self, at: Spot<'_>) {
        if let Ok(e) = self.0.find_entry(at.hash, |q| at.is(q)) {
            if e.get().is_unused() {
                e.remove();
            }
        }
    }
}

#[derive(Default)]
struct Shard {
    queues: Mutex<Queues>,
}

thread_local! {
    /// What this thread sleeps on while it waits for a lock (with the shard mutex of the key,
    /// one wait at a time): the grant notifies it alone, not every waiter of the shard.
    static WAKER: Arc<Condvar> = Arc::new(Condvar::new());
}

#[derive(Default)]
struct Counters {
    lock_waits: AtomicU64,
    lock_wait_us: AtomicU64,
    deadlocks: AtomicU64,
    lock_timeouts: AtomicU64,
}

/// One lock request being served: who wants what, and what it costs.
#[derive(Clone, Copy)]
struct Ask<'k> {
    txn: TxnId,
    at: Spot<'k>,
    mode: LockMode,
    /// Not yet a holder of the key: the entry is charged and, once granted, indexed.
    is_new: bool,
}

pub struct LockTable {
    shards: Box<[Shard]>,
    /// Sharded by txn id.
    held: Box<[Mutex<HeldIndex>]>,
    waits_for: Mutex<WaitGraph>,
    hasher: FastHash,
    limits: LockLimits,
    used_bytes: AtomicUsize,
    counters: Counters,
}

impl LockTable {
    pub fn new(limits: LockLimits) -> LockTable {
        LockTable {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            held: (0..SHARDS).map(|_| Mutex::default()).collect(),
            waits_for: Mutex::default(),
            hasher: FastHash::default(),
            limits,
            used_bytes: AtomicUsize::new(0),
            counters: Counters::default(),
        }
    }

    /// Acquires `mode` on (table, key) for `txn`, waiting at most `timeout`.
    ///
    /// Errors: `Deadlock` at once if waiting would close a wait-for cycle; `LockWaitTimeout`
    /// when the wait outlasts `timeout`; `LockMemoryExhausted` when the new entry would exceed
    /// the memory limit. After any error the transaction holds exactly what it held before;
    /// the caller is expected to roll it back (`release_all`).
    pub fn lock(
        &self,
        txn: TxnId,
        table: TableId,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        let at = self.spot(table, key);
        let mut queues = self.shards[at.shard()].queues.lock();
        let queue = queues.get_or_insert(at);
        let held = queue.held_mode(txn);
        if held.is_some_and(|h| h.covers(mode)) {
            return Ok(());
        }
        let ask = Ask {
            txn,
            at,
            mode,
            is_new: held.is_none(),
        };
        let req = Request { txn, mode };
        let grant_now = if ask.is_new {
            queue.waiting.is_empty() && queue.compatible_with_holders(req)
        } else {
            queue.compatible_with_holders(req)
        };
        if ask.is_new {
            // charged, and indexed at once when it is granted now: one visit to the index
            let index_now = grant_now.then(|| queue.key.clone());
            if let Err(e) = self.charge(ask, index_now) {
                queues.remove_if_unused(at);
                return Err(e);
            }
        }
        if grant_now {
            queue.grant(req);
            if !queue.waiting.is_empty() {
                // An upgrade changes what the waiters behind it wait for.
                queue.refresh_edges(&mut self.waits_for.lock());
            }
            return Ok(());
        }
        queue.enqueue(req, !ask.is_new);
        self.refuse_if_deadlock(&mut queues, ask)?;
        self.wait_for_grant(queues, ask, timeout)
    }

    /// Releases every lock `txn` holds and grants whoever can go next.
    pub fn release_all(&self, txn: TxnId) {
        let held = self.held_index(txn).lock().remove(&txn).unwrap_or_default();
        let mut returned = held.credit;
        for (table, key, hash) in held.locks {
            let at = Spot {
                table,
                key: &key,
                hash,
            };
            let mut queues = self.shards[at.shard()].queues.lock();
            let Ok(mut entry) = queues.0.find_entry(hash, |q| at.is(q)) else {
                unreachable!("a held key has a queue");
            };
            let queue = entry.get_mut();
            queue.granted.retain(|g| g.txn != txn);
            self.settle(queue, None);
            if queue.is_unused() {
                entry.remove();
                queues.shrink_if_sparse();
            }
            drop(queues);
            returned += lock_cost_bytes(key.len());
        }
        if returned > 0 {
            self.give_back(returned);
        }
    }

    pub fn stats(&self) -> LockStats {
        LockStats {
            lock_waits: self.counters.lock_waits.load(Relaxed),
            lock_wait_us: self.counters.lock_wait_us.load(Relaxed),
            deadlocks: self.counters.deadlocks.load(Relaxed),
            lock_timeouts: self.counters.lock_timeouts.load(Relaxed),
            memory_used_bytes: self.charged_bytes(),
            memory_max_bytes: self.limits.memory_max_bytes,
        }
    }

    fn spot<'k>(&self, table: TableId, key: &'k [u8]) -> Spot<'k> {
        Spot {
            table,
            key,
            hash: self.hasher.hash_one((table, key)),
        }
    }

    fn held_index(&self, txn: TxnId) -> &Mutex<HeldIndex> {
        &self.held[(txn.0 % SHARDS as u64) as usize]
    }

    /// Indexes a new lock granted after a wait (one granted at once is indexed by `charge`).
    fn remember(&self, ask: Ask<'_>, key: Arc<[u8]>) {
        if ask.is_new {
            let mut index = self.held_index(ask.txn).lock();
            index
                .entry(ask.txn)
                .or_default()
                .locks
                .push((ask.at.table, key, ask.at.hash));
        }
    }

    /// The lock memory a transaction takes from the limit at once: 1/1024 of the limit, at
    /// least one lock's overhead and at most [`CREDIT_CHUNK_MAX`], so what transactions hold
    /// as credit stays a small share of the limit.
    fn credit_chunk(&self) -> usize {
        (self.limits.memory_max_bytes / 1024).clamp(LOCK_OVERHEAD_BYTES, CREDIT_CHUNK_MAX)
    }

    /// Charges `ask`'s lock to its transaction's credit, taking a chunk from the limit when
    /// the credit is short (or only what is missing, when a chunk does not fit), and indexes
    /// `index_now` as held. On an error nothing changed.
    fn charge(&self, ask: Ask<'_>, index_now: Option<Arc<[u8]>>) -> Result<()> {
        let bytes = lock_cost_bytes(ask.at.key.len());
        let mut index = self.held_index(ask.txn).lock();
        let held = index.entry(ask.txn).or_default();
        if held.credit < bytes {
            let need = bytes - held.credit;
            let taken = self
                .take(need.max(self.credit_chunk()))
                .or_else(|_| self.take(need));
            match taken {
                Ok(taken) => held.credit += taken,
                Err(used) => {
                    if held.locks.is_empty() && held.credit == 0 {
                        index.remove(&ask.txn);
                    }
                    return Err(Error::LockMemoryExhausted {
                        used,
                        requested: bytes,
                        limit: self.limits.memory_max_bytes,
                    });
                }
            }
        }
        held.credit -= bytes;
        if let Some(key) = index_now {
            held.locks.push((ask.at.table, key, ask.at.hash));
        }
        Ok(())
    }

    /// Takes `bytes` from the limit; on failure returns what is taken already.
    fn take(&self, bytes: usize) -> std::result::Result<usize, usize> {
        let limit = self.limits.memory_max_bytes;
        self.used_bytes
            .fetch_update(Relaxed, Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= limit)
            })
            .map(|_| bytes)
    }

    /// Gives back the charge of `ask`'s lock, which was never granted, to the limit, with the
    /// transaction's credit when it holds no lock: after a refused request a transaction that
    /// holds nothing has taken nothing (an error is rare; the counter's cost does not matter).
    fn refund(&self, ask: Ask<'_>) {
        let mut returned = lock_cost_bytes(ask.at.key.len());
        let mut index = self.held_index(ask.txn).lock();
        if index.get(&ask.txn).is_some_and(|h| h.locks.is_empty()) {
            returned += index.remove(&ask.txn).map_or(0, |h| h.credit);
        }
        self.give_back(returned);
    }

    /// Returns `bytes` taken by [`Self::take`] to the limit.
    fn give_back(&self, bytes: usize) {
        let before = self.used_bytes.fetch_sub(bytes, Relaxed);
        debug_assert!(
            before >= bytes,
            "lock memory returned {bytes} > {before} taken"
        );
    }

    /// The lock memory charged to locks held or waited for: what is taken from the limit
    /// less the transactions' credit.
    fn charged_bytes(&self) -> usize {
        let credit: usize = self
            .held
            .iter()
            .map(|h| h.lock().values().map(|t| t.credit).sum::<usize>())
            .sum();
        self.used_bytes.load(Relaxed).saturating_sub(credit)
    }

    /// After holders or waiters of `queue` changed: forget `gone`'s edges, grant whoever fits,
    /// rewrite the remaining waiters' edges and wake the waiters granted.
    fn settle(&self, queue: &mut LockQueue, gone: Option<TxnId>) {
        if queue.waiting.is_empty() && gone.is_none() {
            return;
        }
        let mut graph = self.waits_for.lock();
        if let Some(txn) = gone {
            graph.remove(&txn);
        }
        let granted = queue.grant_waiters();
        for txn in &granted {
            graph.remove(txn);
        }
        queue.refresh_edges(&mut graph);
        drop(graph);
        if !granted.is_empty() {
            queue.wake(&granted);
        }
    }

    /// Called with `ask` just enqueued: refuses it if the graph now has a cycle through it.
    fn refuse_if_deadlock(&self, queues: &mut MutexGuard<'_, Queues>, ask: Ask<'_>) -> Result<()> {
        let queue = queues.get(ask.at);
        let cycle = {
            let mut graph = self.waits_for.lock();
            debug_assert!(
                !graph.contains_key(&ask.txn),
                "txn {} waits for two locks at once",
                ask.txn
            );
            queue.refresh_edges(&mut graph);
            find_cycle(&graph, ask.txn)
        };
        let Some(cycle) = cycle else {
            return Ok(());
        };
        queue.remove_waiter(ask.txn);
        self.settle(queue, Some(ask.txn));
        queues.remove_if_unused(ask.at);
        if ask.is_new {
            self.refund(ask);
        }
        self.counters.deadlocks.fetch_add(1, Relaxed);
        Err(Error::Deadlock {
            victim: ask.txn,
            cycle,
        })
    }

    /// Sleeps until `ask` is granted (by whoever releases or gives up ahead of it) or the
    /// timeout passes; on timeout takes the request back out of the queue.
    fn wait_for_grant(
        &self,
        mut queues: MutexGuard<'_, Queues>,
        ask: Ask<'_>,
        timeout: Duration,
    ) -> Result<()> {
        self.counters.lock_waits.fetch_add(1, Relaxed);
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let waker = WAKER.with(Arc::clone);
        let queue = queues.get(ask.at);
        let mut granted = queue.holds(ask.txn, ask.mode);
        if !granted {
            queue.wakers.push((ask.txn, waker.clone()));
        }
        while !granted {
            let timed_out = match deadline {
                Some(deadline) => waker.wait_until(&mut queues, deadline).timed_out(),
                None => {
                    waker.wait(&mut queues);
                    false
                }
            };
            let queue = queues.get(ask.at);
            granted = queue.holds(ask.txn, ask.mode);
            if granted {
                // a wakeup that was not the grant's may find it granted: the entry goes too
                queue.remove_waker(ask.txn);
            } else if timed_out {
                queue.remove_waiter(ask.txn);
                queue.remove_waker(ask.txn);
                self.settle(queue, Some(ask.txn));
                queues.remove_if_unused(ask.at);
                break;
            }
        }
        let key = granted.then(|| queues.get(ask.at).key.clone());
        drop(queues);
        let waited = start.elapsed();
        let waited_us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        self.counters.lock_wait_us.fetch_add(waited_us, Relaxed);
        if let Some(key) = key {
            self.remember(ask, key);
            return Ok(());
        }
        if ask.is_new {
            self.refund(ask);
        }
        self.counters.lock_timeouts.fetch_add(1, Relaxed);
        Err(Error::LockWaitTimeout {
            txn: ask.txn,
            table: ask.at.table,
            waited,
            limit: timeout,
        })
    }

    /// True when no lock is held or waited for and no memory is charged.
    #[cfg(test)]
    fn is_idle(&self) -> bool {
        self.shards.iter().all(|s| s.queues.lock().0.is_empty())
            && self.held.iter().all(|h| h.lock().is_empty())
            && self.waits_for.lock().is_empty()
            && self.used_bytes.load(Relaxed) == 0
    }
}

#[cfg(test)]
#[path = "locks_tests.rs"]
mod tests;
