//! The engine adapter: the one interface between workloads and engines. Workloads (TPC-C, the
//! insert benchmark, the consistency check) are written once against `Driver` and `DriverTxn`;
//! each engine (evenkeel, the in-memory model, later peers such as RocksDB or SQLite) implements
//! them. Tables are opened once by name and then addressed by a small `TableId`, so a driver
//! can keep whatever handle its engine uses. Errors are classified retryable (deadlock,
//! lock-wait timeout: the transaction is gone and may be re-run) or fatal.
//!
//! Must stay true: a driver never retries on its own (the workload counts retries), and a
//! transaction that returned a retryable error is finished; the workload only drops it.

use std::ops::Bound;

pub use crate::error::{DriverError, DriverResult, ErrorClass};

#[cfg(feature = "evenkeel")]
pub mod evenkeel;
#[cfg(feature = "innodb")]
pub mod innodb;
#[cfg(feature = "lmdb")]
pub mod lmdb;
pub mod model;
pub mod peer_options;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// Index of an opened table inside one driver.
pub type TableId = usize;

/// One key/value pair as returned by a scan.
pub type Row = (Vec<u8>, Vec<u8>);

/// An engine as seen by the workloads. Shared by all client threads.
pub trait Driver: Send + Sync {
    /// Short engine name for reports ("evenkeel", "model").
    fn name(&self) -> &str;
    /// Open a table by name; create it when `create` is set and it does not exist.
    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId>;
    /// Open a secondary-index table (every value empty; a put inserts a key the table does
    /// not hold, a delete removes one it holds), creating it as `open_table` does. Engines
    /// that store such tables like any other use `open_table`; evenkeel creates an index table,
    /// whose changes the change buffer can take.
    fn open_index_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        self.open_table(name, create)
    }
    /// Names of all tables.
    fn tables(&self) -> DriverResult<Vec<String>>;
    /// Remove a table and its data.
    fn drop_table(&self, name: &str) -> DriverResult<()>;
    /// Start a transaction.
    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>>;
    /// A sample of whatever the engine exposes; called once per second by the sampler.
    fn stats(&self) -> EngineStats;
    /// The engine's effective configuration, for the report.
    fn config(&self) -> Vec<(String, String)>;
    /// Change an option on the open engine (a `--at TIME:set NAME=VALUE` schedule). Engines
    /// that cannot say so; the error names the engine.
    fn set_option(&self, name: &str, value: &str) -> DriverResult<()> {
        let _ = value;
        Err(unsupported_set(self.name(), name))
    }
    /// Whether `set_option(name, value)` would be accepted, without changing anything, so a
    /// bad schedule fails before a long load. Same default as `set_option`.
    fn check_option(&self, name: &str, value: &str) -> DriverResult<()> {
        let _ = value;
        Err(unsupported_set(self.name(), name))
    }
    /// The pid of a server process the engine runs in besides this one (a peer's database
    /// server), so the sampler counts its CPU, memory and I/O with the client's.
    fn server_pid(&self) -> Option<u32> {
        None
    }
    /// Flush and close. Called once at the end of a run.
    fn close(&self) -> DriverResult<()>;
}

fn unsupported_set(engine: &str, name: &str) -> DriverError {
    DriverError::fatal(format!(
        "the {engine} engine cannot change options while running (asked to set {name})"
    ))
}

/// A transaction with read-your-writes. Dropping it without commit rolls it back.
pub trait DriverTxn: Send {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>>;
    /// A locking read (SELECT ... FOR UPDATE): the row stays X-locked until commit.
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>>;
    /// Insert or replace.
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()>;
    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()>;
    /// Up to `limit` rows in key order (descending when `reverse`) within the bounds.
    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>>;
    fn commit(self: Box<Self>) -> DriverResult<()>;
    fn rollback(self: Box<Self>);
}

pub use crate::metrics::EngineStats;

/// A visitor of scanned rows (key, value).
pub type RowVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> DriverResult<()> + 'a;

/// Run `scan` repeatedly in chunks of `chunk` rows, calling `f` on every row in key order,
/// so a check can walk a large table without holding it all in memory.
pub fn scan_chunked(
    txn: &mut dyn DriverTxn,
    t: TableId,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    chunk: usize,
    f: &mut RowVisitor<'_>,
) -> DriverResult<()> {
    let chunk = chunk.max(1);
    let mut rows = txn.scan(t, lower, upper, false, chunk)?;
    loop {
        for (k, v) in &rows {
            f(k, v)?;
        }
        if rows.len() < chunk {
            return Ok(());
        }
        let Some((last, _)) = rows.last() else {
            return Ok(());
        };
        let last = last.clone();
        rows = txn.scan(t, Bound::Excluded(&last), upper, false, chunk)?;
    }
}

/// The exclusive upper bound of all keys starting with `prefix` (None when there is none).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Scan every row whose key starts with `prefix`, up to `limit`, optionally in reverse.
pub fn scan_prefix(
    txn: &mut dyn DriverTxn,
    t: TableId,
    prefix: &[u8],
    reverse: bool,
    limit: usize,
) -> DriverResult<Vec<Row>> {
    let end = prefix_end(prefix);
    let upper = match &end {
        Some(e) => Bound::Excluded(e.as_slice()),
        None => Bound::Unbounded,
    };
    txn.scan(t, Bound::Included(prefix), upper, reverse, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_carries() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }
}
