//! The evenkeel driver: the `Driver` adapter over evenkeel's public API. Options come from an
//! optional TOML file then `name=value` pairs (`Options::from_toml_file`, `apply_pairs`), so
//! unknown names and out-of-range values are reported by the engine with the valid range.
//! Deadlocks and lock-wait timeouts are retryable; every other engine error is fatal.
//! The status is mapped onto `EngineStats`: dirty % (seed 000's formula, computed by the
//! engine), pages read and written, pages written by LRU eviction, free-frame wait time as
//! stall time; checkpoint age appears once the engine reports it.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

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
        let db = Database::open_or_create(dir, opts).map_err(|e| BenchError::Driver(map_err(e)))?;
        Ok(EvenkeelDriver {
            db,
            tables: RwLock::new(Arc::new(Vec::new())),
        })
    }
}

impl Driver for EvenkeelDriver {
    fn name(&self) -> &str {
        "evenkeel"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        if let Some(i) = guard
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.name() == name))
        {
            return Ok(i);
        }
        let t = if create {
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
        let s = self.db.status();
        let b = &s.buffer;
        let mut e = EngineStats {
            dirty_pct: Some(s.dirty_pct),
            pages_read: Some(b.pages_read),
            pages_written: Some(b.pages_written),
            pages_flushed_lru: Some(b.eviction_writes),
            pages_flushed_list: Some(b.pages_written.saturating_sub(b.eviction_writes)),
            stall_us: Some(b.free_frame_wait_us),
            ..EngineStats::default()
        };
        let extra = [
            ("lsn", s.lsn),
            ("commits", s.commits),
            ("rollbacks", s.rollbacks),
            ("rows_written", s.rows_written),
            ("rows_deleted", s.rows_deleted),
            ("page_splits", s.page_splits),
            ("pages_data", b.pages_data),
            ("pages_free", b.pages_free),
            ("pages_dirty", b.pages_dirty),
            ("evictions", b.evictions),
            ("hits", b.hits),
            ("page_requests", b.page_requests),
            ("file_bytes", s.file_bytes),
            ("io_reads", s.io.reads),
            ("io_writes", s.io.writes),
            ("io_syncs", s.io.syncs),
        ];
        e.extra = extra
            .iter()
            .map(|(k, v)| (k.to_string(), *v as f64))
            .collect();
        e
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
