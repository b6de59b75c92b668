//! The in-memory model engine: one `BTreeMap` per table, and a single transaction lock (a
//! flag and a condition variable) that a transaction holds from `begin` to commit or rollback. That is strict two-phase locking at
//! the coarsest grain, so every schedule is serial and the TPC-C consistency conditions hold
//! under any number of client threads; writes go straight into the maps with an undo list
//! that rollback replays. It exists so workload logic can be tested without an engine, and it
//! can inject retryable errors at commit to exercise the workloads' retry accounting.
//!
//! Must never: let two transactions interleave, or leave a rolled-back write behind.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use rand::Rng;

use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default)]
struct State {
    maps: Vec<Option<Map>>,
    names: HashMap<String, TableId>,
}

/// The transaction lock: at most one transaction exists at a time.
#[derive(Default)]
struct TxnLock {
    held: Mutex<bool>,
    freed: Condvar,
}

impl TxnLock {
    fn acquire(&self) {
        let mut held = self.held.lock();
        while *held {
            self.freed.wait(&mut held);
        }
        *held = true;
    }

    fn release(&self) {
        *self.held.lock() = false;
        self.freed.notify_one();
    }
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    rollbacks: AtomicU64,
    injected: AtomicU64,
}

/// The model engine. Cheap to clone; clones share data.
#[derive(Clone, Default)]
pub struct ModelDriver {
    state: Arc<Mutex<State>>,
    txn_lock: Arc<TxnLock>,
    counters: Arc<Counters>,
    /// Probability that a commit fails with a retryable error (its writes are undone), as
    /// `f64` bits so tests can change it after loading.
    retryable_commit_failure: Arc<AtomicU64>,
}

impl ModelDriver {
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on, commits that wrote something fail with a retryable "deadlock" with
    /// probability `p`.
    pub fn set_retryable_failures(&self, p: f64) {
        self.retryable_commit_failure
            .store(p.to_bits(), Ordering::Relaxed);
    }

    fn failure_p(&self) -> f64 {
        f64::from_bits(self.retryable_commit_failure.load(Ordering::Relaxed))
    }

    /// Number of rows in a table (for tests).
    pub fn len(&self, name: &str) -> usize {
        let st = self.state.lock();
        st.names
            .get(name)
            .and_then(|&id| st.maps.get(id))
            .and_then(|m| m.as_ref())
            .map_or(0, |m| m.len())
    }

    /// True when no table holds a row.
    pub fn is_empty(&self) -> bool {
        self.state
            .lock()
            .maps
            .iter()
            .flatten()
            .all(|m| m.is_empty())
    }
}

impl Driver for ModelDriver {
    fn name(&self) -> &str {
        "model"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut st = self.state.lock();
        if let Some(&id) = st.names.get(name) {
            return Ok(id);
        }
        if !create {
            return Err(DriverError::fatal(format!("table {name} not found")));
        }
        let id = st.maps.len();
        st.maps.push(Some(Map::new()));
        st.names.insert(name.to_string(), id);
        Ok(id)
    }

    fn tables(&self) -> DriverResult<Vec<String>> {
        let mut names: Vec<String> = self.state.lock().names.keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut st = self.state.lock();
        let id = st
            .names
            .remove(name)
            .ok_or_else(|| DriverError::fatal(format!("table {name} not found")))?;
        if let Some(slot) = st.maps.get_mut(id) {
            *slot = None;
        }
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        self.txn_lock.acquire();
        Ok(Box::new(ModelTxn {
            state: self.state.clone(),
            txn_lock: self.txn_lock.clone(),
            undo: Vec::new(),
            counters: self.counters.clone(),
            fail_p: self.failure_p(),
        }))
    }

    fn stats(&self) -> EngineStats {
        let mut s = EngineStats::default();
        s.extra.insert(
            "commits".into(),
            self.counters.commits.load(Ordering::Relaxed) as f64,
        );
        s.extra.insert(
            "rollbacks".into(),
            self.counters.rollbacks.load(Ordering::Relaxed) as f64,
        );
        s.extra.insert(
            "injected_failures".into(),
            self.counters.injected.load(Ordering::Relaxed) as f64,
        );
        s
    }

    fn config(&self) -> Vec<(String, String)> {
        vec![(
            "retryable_commit_failure".into(),
            self.failure_p().to_string(),
        )]
    }

    fn close(&self) -> DriverResult<()> {
        Ok(())
    }
}

/// A model transaction: holds the transaction lock until dropped; `undo` holds prior values in
/// write order.
struct ModelTxn {
    state: Arc<Mutex<State>>,
    txn_lock: Arc<TxnLock>,
    undo: Vec<(TableId, Vec<u8>, Option<Vec<u8>>)>,
    counters: Arc<Counters>,
    fail_p: f64,
}

impl ModelTxn {
    /// Run `f` on table `t`'s map.
    fn with_map<R>(&self, t: TableId, f: impl FnOnce(&mut Map) -> R) -> DriverResult<R> {
        let mut st = self.state.lock();
        let map = st
            .maps
            .get_mut(t)
            .and_then(|m| m.as_mut())
            .ok_or_else(|| DriverError::fatal(format!("table id {t} not open")))?;
        Ok(f(map))
    }

    fn undo_all(&mut self) {
        let mut st = self.state.lock();
        while let Some((t, key, old)) = self.undo.pop() {
            if let Some(Some(map)) = st.maps.get_mut(t) {
                match old {
                    Some(v) => map.insert(key, v),
                    None => map.remove(&key),
                };
            }
        }
    }
}

impl DriverTxn for ModelTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        self.with_map(t, |m| m.get(key).cloned())
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        self.get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        let old = self.with_map(t, |m| m.insert(key.to_vec(), value.to_vec()))?;
        self.undo.push((t, key.to_vec(), old));
        Ok(())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        if let Some(old) = self.with_map(t, |m| m.remove(key))? {
            self.undo.push((t, key.to_vec(), Some(old)));
        }
        Ok(())
    }

    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>> {
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
            (lower, upper)
        {
            // BTreeMap::range panics on an inverted range or on Excluded(a)..Excluded(a).
            let both_excluded = matches!((lower, upper), (Bound::Excluded(_), Bound::Excluded(_)));
            if l > u || (l == u && both_excluded) {
                return Ok(Vec::new());
            }
        }
        self.with_map(t, |map| {
            let range = map.range::<[u8], _>((lower, upper));
            let clone = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
            if reverse {
                range.rev().take(limit).map(clone).collect()
            } else {
                range.take(limit).map(clone).collect()
            }
        })
    }

    fn commit(mut self: Box<Self>) -> DriverResult<()> {
        if self.fail_p > 0.0 && !self.undo.is_empty() && rand::thread_rng().gen_bool(self.fail_p) {
            self.undo_all();
            self.counters.injected.fetch_add(1, Ordering::Relaxed);
            return Err(DriverError::retryable("injected deadlock"));
        }
        self.undo.clear();
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn rollback(mut self: Box<Self>) {
        self.undo_all();
        self.counters.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for ModelTxn {
    fn drop(&mut self) {
        // A transaction dropped without commit or rollback rolls back.
        self.undo_all();
        self.txn_lock.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_restores_and_scan_orders() {
        let d = ModelDriver::new();
        let t = d.open_table("t", true).unwrap();
        let mut x = d.begin().unwrap();
        for k in [b"a", b"b", b"c"] {
            x.put(t, k, k).unwrap();
        }
        x.commit().unwrap();
        let mut x = d.begin().unwrap();
        x.delete(t, b"b").unwrap();
        x.put(t, b"a", b"z").unwrap();
        assert_eq!(x.get(t, b"a").unwrap(), Some(b"z".to_vec()));
        x.rollback();
        let mut x = d.begin().unwrap();
        let rows = x
            .scan(t, Bound::Unbounded, Bound::Unbounded, true, 10)
            .unwrap();
        let keys: Vec<_> = rows.iter().map(|r| r.0.clone()).collect();
        assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
        assert_eq!(x.get(t, b"a").unwrap(), Some(b"a".to_vec()));
        let empty = x
            .scan(t, Bound::Excluded(b"b"), Bound::Excluded(b"b"), false, 10)
            .unwrap();
        assert!(empty.is_empty());
    }
}
