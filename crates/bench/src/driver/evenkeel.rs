//! The evenkeel driver: the `Driver` adapter over evenkeel's public API. Options come from an
//! optional TOML file then `name=value` pairs (`Options::from_toml_file`, `apply_pairs`), so
//! unknown names and out-of-range values are reported by the engine with the valid range.
//! Deadlocks and lock-wait timeouts are retryable; every other engine error is fatal.
//! The status is mapped onto `EngineStats`: checkpoint age (bytes and % of log capacity),
//! dirty % (InnoDB's formula, computed by the engine), the flush policy in force, pages
//! flushed by source (policy / LRU / sync point / max dirty / single page), stall time by kind
//! (sync-point flushing, max-dirty flushing, free-frame waits), commit admission delay,
//! read-ahead counters and redo bytes and fsyncs. Dynamic options (`--at` schedules) go to
//! `Database::set_option`; `check_option` tries them on a copy of the current options first.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use evenkeel::options::DYNAMIC_KNOBS;
use evenkeel::{Database, Error, Options, Table, Transaction};
use parking_lot::RwLock;

use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};
use crate::error::{BenchError, BenchResult};

fn map_err(e: Error) -> DriverError {
    match e {
        Error::Deadlock { .. } | Error::LockWaitTimeout { .. } => {
            DriverError::retryable(e.to_string())
        }
        e => DriverError::fatal(e.to_string()),
    }
}

/// evenkeel behind the adapter.
pub struct EvenkeelDriver {
    db: Database,
    /// Opened tables by `TableId` (`None` once dropped: ids never move); replaced, never
    /// mutated, so a transaction keeps the snapshot it started with.
    tables: RwLock<Arc<Vec<Option<Table>>>>,
}

impl EvenkeelDriver {
    /// Open or create the database in `dir` with options from `config` then `set`.
    pub fn open(
        dir: &Path,
        config: Option<&Path>,
        set: &[(String, String)],
    ) -> BenchResult<EvenkeelDriver> {
        let mut opts = match config {
            Some(p) => Options::from_toml_file(p)
                .map_err(|e| BenchError::Usage(format!("--config: {e}")))?,
            None => Options::default(),
        };
        let pairs: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        opts.apply_pairs(&pairs)
            .map_err(|e| BenchError::Usage(format!("--set: {e}")))?;
        fit_log_buffer(&mut opts);
        let db = Database::open_or_create(dir, opts).map_err(|e| BenchError::Driver(map_err(e)))?;
        Ok(EvenkeelDriver::from_database(db))
    }

    /// Drive a database the caller opened itself (a crash test that reads what recovery did
    /// from its status before running workload checks through the adapter).
    pub fn from_database(db: Database) -> EvenkeelDriver {
        EvenkeelDriver {
            db,
            tables: RwLock::new(Arc::new(Vec::new())),
        }
    }

    /// The database behind the adapter.
    pub fn database(&self) -> &Database {
        &self.db
    }
}

/// A small redo log for an IO-bound setup (`--set log_file_size=4M`) must not fail on the
/// default 16 MiB log buffer, which the engine only accepts up to the log's capacity: when the
/// buffer was left at its default and is over half the log, it becomes a quarter of the log
/// (the engine's own limit on one transaction's redo), at least 256 KiB. A buffer the user
/// set is left alone. The value used is in the report's configuration.
fn fit_log_buffer(opts: &mut Options) {
    let log_bytes = opts
        .log_file_size
        .saturating_mul(u64::from(opts.log_files_in_group));
    if opts.log_buffer_size == Options::default().log_buffer_size
        && opts.log_buffer_size > log_bytes / 2
    {
        opts.log_buffer_size = (log_bytes / 4).max(256 * 1024);
    }
}

impl EvenkeelDriver {
    /// Opens (creates when `create`) table `name`, an index table when `index` (an existing
    /// table keeps its kind: a database loaded before index tables existed has plain ones).
    fn open_named(&self, name: &str, create: bool, index: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        if let Some(i) = guard
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.name() == name))
        {
            return Ok(i);
        }
        let t = if create && index {
            self.db.create_index_table_if_missing(name)
        } else if create {
            self.db.create_table_if_missing(name)
        } else {
            self.db.table(name)
        }
        .map_err(map_err)?;
        let mut next = Vec::clone(&guard);
        next.push(Some(t));
        *guard = Arc::new(next);
        Ok(guard.len() - 1)
    }
}

impl Driver for EvenkeelDriver {
    fn name(&self) -> &str {
        "evenkeel"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        self.open_named(name, create, false)
    }

    fn open_index_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        self.open_named(name, create, true)
    }
    fn tables(&self) -> DriverResult<Vec<String>> {
        self.db.tables().map_err(map_err)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut guard = self.tables.write();
        self.db.drop_table(name).map_err(map_err)?;
        let next: Vec<Option<Table>> = guard
            .iter()
            .map(|t| t.as_ref().filter(|t| t.name() != name).cloned())
            .collect();
        *guard = Arc::new(next);
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        let tables = self.tables.read().clone();
        Ok(Box::new(EvenkeelTxn {
            txn: self.db.begin(),
            tables,
        }))
    }

    fn stats(&self) -> EngineStats {
        EngineStats::from_evenkeel(&self.db.status())
    }

    fn set_option(&self, name: &str, value: &str) -> DriverResult<()> {
        self.db.set_option(name, value).map_err(map_err)
    }

    fn check_option(&self, name: &str, value: &str) -> DriverResult<()> {
        let lower = name.trim().to_ascii_lowercase().replace('-', "_");
        let canonical = lower.strip_prefix("innodb_").unwrap_or(&lower);
        if !DYNAMIC_KNOBS.contains(&canonical) {
            return Err(DriverError::fatal(format!(
                "{name} cannot change while the database is open; dynamic options: {}",
                DYNAMIC_KNOBS.join(", ")
            )));
        }
        let mut opts = self.db.current_options();
        opts.apply_pairs([format!("{canonical}={value}")])
            .map_err(map_err)
    }

    fn config(&self) -> Vec<(String, String)> {
        self.db
            .options()
            .describe()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn close(&self) -> DriverResult<()> {
        self.db.clone().close().map_err(map_err)
    }
}

struct EvenkeelTxn {
    txn: Transaction,
    tables: Arc<Vec<Option<Table>>>,
}

impl EvenkeelTxn {
    fn table(&self, t: TableId) -> DriverResult<&Table> {
        self.tables
            .get(t)
            .and_then(Option::as_ref)
            .ok_or_else(|| DriverError::fatal(format!("table id {t} not open")))
    }
}

impl DriverTxn for EvenkeelTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let table = self.table(t)?.clone();
        self.txn.get(&table, key).map_err(map_err)
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let table = self.table(t)?.clone();
        self.txn.get_for_update(&table, key).map_err(map_err)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        let table = self.table(t)?.clone();
        self.txn.put(&table, key, value).map_err(map_err)
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        let table = self.table(t)?.clone();
        self.txn.delete(&table, key).map_err(map_err)
    }

    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>> {
        let table = self.table(t)?.clone();
        let scan = self
            .txn
            .scan(&table, lower, upper, reverse)
            .map_err(map_err)?;
        scan.take(limit).map(|r| r.map_err(map_err)).collect()
    }

    fn commit(self: Box<Self>) -> DriverResult<()> {
        self.txn.commit().map_err(map_err)
    }

    fn rollback(self: Box<Self>) {
        self.txn.rollback();
    }
}
