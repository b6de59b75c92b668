//! The innodb driver: real InnoDB, in a MariaDB server the workbench starts for the run
//! (`server`), configured from evenkeel's option names (`config`), sampled each second from
//! `SHOW GLOBAL STATUS` and `INFORMATION_SCHEMA.INNODB_METRICS` (`stats`).
//!
//! Each driver table is an InnoDB table `(k VARBINARY(512) PRIMARY KEY, v LONGBLOB)` in the
//! database `evenkeel`; every driver call is one prepared statement (cached per connection):
//! `get` a plain SELECT (a consistent read from the transaction's read view), `get_for_update`
//! SELECT ... FOR UPDATE, `put` INSERT ... ON DUPLICATE KEY UPDATE, `delete` DELETE, `scan` a
//! bounded SELECT ... ORDER BY k [DESC] LIMIT n. Isolation is REPEATABLE READ (InnoDB's
//! default) plus locking reads, as evenkeel's default is. Deadlock (1213) and lock-wait timeout
//! (1205, which rolls back the whole transaction: `innodb_rollback_on_timeout`) are retryable;
//! after any error the transaction is rolled back and finished.
//!
//! Must never: send SQL built from a key or value (they only travel as parameters), or hand
//! a connection with an open transaction to the next `begin`.

pub mod config;
pub mod server;
mod stats;

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use mysql::prelude::Queryable;
use mysql::{Conn, Value};
use parking_lot::{Mutex, RwLock};

use super::peer_options::PeerOptions;
use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};
use crate::error::{BenchError, BenchResult};
use server::{running_as_root, Server, ServerPaths};

/// The schema every driver table lives in.
const SCHEMA: &str = "evenkeel";
/// Longest key, in bytes: the key column's size. The workloads' longest keys (the insert
/// benchmark's secondary index entries) are well under it, and it fits InnoDB's limit on an
/// index key with 4 KiB pages (768 bytes).
pub const KEY_BYTES_MAX: usize = 512;
/// MariaDB's limit on a table name.
const TABLE_NAME_MAX: usize = 64;

/// MariaDB error codes the driver tells apart.
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
const ER_LOCK_DEADLOCK: u16 = 1213;

fn map_err(e: mysql::Error) -> DriverError {
    match &e {
        mysql::Error::MySqlError(m)
            if [ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT].contains(&m.code) =>
        {
            DriverError::retryable(format!("innodb: {m}"))
        }
        _ => DriverError::fatal(format!("innodb: {e}")),
    }
}

fn bench_err(e: mysql::Error) -> BenchError {
    BenchError::Driver(map_err(e))
}

/// The statements of one table.
struct TableSql {
    name: String,
    quoted: String,
    get: String,
    get_for_update: String,
    put: String,
    delete: String,
}

impl TableSql {
    fn new(name: &str) -> DriverResult<TableSql> {
        if name.is_empty() || name.len() > TABLE_NAME_MAX || name.contains(['`', '/', '\\', '\0']) {
            return Err(DriverError::fatal(format!(
                "innodb: table name {name:?} is not usable: 1 to {TABLE_NAME_MAX} bytes without \
                 backquotes, slashes or NUL"
            )));
        }
        let q = format!("`{SCHEMA}`.`{name}`");
        Ok(TableSql {
            name: name.to_string(),
            get: format!("SELECT v FROM {q} WHERE k = ?"),
            get_for_update: format!("SELECT v FROM {q} WHERE k = ? FOR UPDATE"),
            put: format!(
                "INSERT INTO {q} (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)"
            ),
            delete: format!("DELETE FROM {q} WHERE k = ?"),
            quoted: q,
        })
    }

    /// The bounded range SELECT and its parameters.
    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> (String, Vec<Value>) {
        let mut conds = Vec::new();
        let mut params = Vec::new();
        match lower {
            Bound::Included(k) => {
                conds.push("k >= ?");
                params.push(Value::from(k));
            }
            Bound::Excluded(k) => {
                conds.push("k > ?");
                params.push(Value::from(k));
            }
            Bound::Unbounded => {}
        }
        match upper {
            Bound::Included(k) => {
                conds.push("k <= ?");
                params.push(Value::from(k));
            }
            Bound::Excluded(k) => {
                conds.push("k < ?");
                params.push(Value::from(k));
            }
            Bound::Unbounded => {}
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let order = if reverse { "DESC" } else { "ASC" };
        params.push(Value::from(limit as u64));
        (
            format!(
                "SELECT k, v FROM {}{filter} ORDER BY k {order} LIMIT ?",
                self.quoted
            ),
            params,
        )
    }
}

type Tables = Arc<Vec<Option<Arc<TableSql>>>>;

/// Idle connections, each with no open transaction.
type Pool = Arc<Mutex<Vec<Conn>>>;

/// Check options as `open` would, without starting anything.
pub fn check_options(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<()> {
    let opts = PeerOptions::parse("innodb", config, set, config::MAPPED)?;
    config::settings(&opts).map(|_| ())
}

/// InnoDB behind the adapter.
pub struct InnodbDriver {
    server: Server,
    tables: RwLock<Tables>,
    pool: Pool,
    stats: stats::StatsReader,
    settings: Vec<(String, String)>,
}

impl InnodbDriver {
    /// Start (creating on first use) the server for `dir` with options from `config` then `set`.
    pub fn open(
        dir: &Path,
        config: Option<&Path>,
        set: &[(String, String)],
    ) -> BenchResult<InnodbDriver> {
        let opts = PeerOptions::parse("innodb", config, set, config::MAPPED)?;
        let settings = config::settings(&opts)?;
        let paths = ServerPaths::new(dir)?;
        let user = if running_as_root() { "root" } else { "" };
        let cnf = config::my_cnf(
            &settings,
            &config::Paths {
                datadir: &paths.datadir,
                socket: &paths.socket,
                pid_file: &paths.pid_file,
                error_log: &paths.error_log,
                tmpdir: &paths.tmpdir,
            },
            user,
        );
        let server = Server::start(paths, &cnf)?;
        let mut conn = server.connect().map_err(bench_err)?;
        conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS `{SCHEMA}`"))
            .map_err(bench_err)?;
        let stats = stats::StatsReader::new(server.connect().map_err(bench_err)?);
        let mut settings = settings;
        settings.insert(0, ("version".into(), stats.version()));
        Ok(InnodbDriver {
            server,
            tables: RwLock::new(Arc::new(Vec::new())),
            pool: Arc::new(Mutex::new(vec![conn])),
            stats,
            settings,
        })
    }

    fn conn(&self) -> DriverResult<Conn> {
        if let Some(c) = self.pool.lock().pop() {
            return Ok(c);
        }
        self.server.connect().map_err(map_err)
    }

    /// Run `f` on a pooled connection outside any transaction.
    fn with_conn<R>(&self, f: impl FnOnce(&mut Conn) -> mysql::Result<R>) -> DriverResult<R> {
        let mut c = self.conn()?;
        let r = f(&mut c).map_err(map_err)?;
        self.pool.lock().push(c);
        Ok(r)
    }

    fn table_exists(&self, name: &str) -> DriverResult<bool> {
        let n: Option<u64> = self.with_conn(|c| {
            c.exec_first(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                (SCHEMA, name),
            )
        })?;
        Ok(n.unwrap_or(0) > 0)
    }
}

impl Driver for InnodbDriver {
    fn name(&self) -> &str {
        "innodb"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        if let Some(i) = guard
            .iter()
            .position(|t| t.as_ref().is_some_and(|t| t.name == name))
        {
            return Ok(i);
        }
        let sql = TableSql::new(name)?;
        if create {
            let ddl = format!(
                "CREATE TABLE IF NOT EXISTS {} (k VARBINARY({KEY_BYTES_MAX}) NOT NULL PRIMARY KEY, \
                 v LONGBLOB NOT NULL) ENGINE=InnoDB",
                sql.quoted
            );
            self.with_conn(|c| c.query_drop(&ddl))?;
        } else if !self.table_exists(name)? {
            return Err(DriverError::fatal(format!(
                "innodb: table {name} not found"
            )));
        }
        let mut next = Vec::clone(&guard);
        next.push(Some(Arc::new(sql)));
        *guard = Arc::new(next);
        Ok(guard.len() - 1)
    }

    fn tables(&self) -> DriverResult<Vec<String>> {
        let mut names: Vec<String> = self.with_conn(|c| {
            c.exec(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                (SCHEMA,),
            )
        })?;
        names.sort();
        Ok(names)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut guard = self.tables.write();
        let sql = TableSql::new(name)?;
        if !self.table_exists(name)? {
            return Err(DriverError::fatal(format!(
                "innodb: table {name} not found"
            )));
        }
        self.with_conn(|c| c.query_drop(format!("DROP TABLE {}", sql.quoted)))?;
        let next: Vec<_> = guard
            .iter()
            .map(|t| t.as_ref().filter(|t| t.name != name).cloned())
            .collect();
        *guard = Arc::new(next);
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        let mut conn = self.conn()?;
        conn.query_drop("START TRANSACTION").map_err(map_err)?;
        Ok(Box::new(InnodbTxn {
            conn: Some(conn),
            pool: self.pool.clone(),
            tables: self.tables.read().clone(),
        }))
    }

    fn stats(&self) -> EngineStats {
        self.stats.read()
    }

    fn config(&self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .map(|(k, v)| {
                let key = if k == "version" {
                    k.clone()
                } else {
                    format!("innodb_{k}")
                };
                (key, v.clone())
            })
            .collect()
    }

    fn server_pid(&self) -> Option<u32> {
        Some(self.server.pid())
    }

    fn close(&self) -> DriverResult<()> {
        self.pool.lock().clear();
        self.stats.close();
        self.server
            .stop()
            .map_err(|e| DriverError::fatal(e.to_string()))
    }
}

/// A transaction on one connection; rolled back when dropped unfinished.
struct InnodbTxn {
    /// `None` once finished (committed, rolled back, or ended by an error).
    conn: Option<Conn>,
    pool: Pool,
    tables: Tables,
}

impl InnodbTxn {
    fn table(&self, t: TableId) -> DriverResult<Arc<TableSql>> {
        self.tables
            .get(t)
            .and_then(Option::clone)
            .ok_or_else(|| DriverError::fatal(format!("innodb: table id {t} not open")))
    }

    /// Run one statement; on an error the transaction is rolled back and finished.
    fn run<R>(&mut self, f: impl FnOnce(&mut Conn) -> mysql::Result<R>) -> DriverResult<R> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(DriverError::fatal(
                "innodb: the transaction already ended (an earlier statement failed)",
            ));
        };
        match f(conn) {
            Ok(r) => Ok(r),
            Err(e) => {
                let server_side = matches!(e, mysql::Error::MySqlError(_));
                let err = map_err(e);
                self.finish(server_side, "ROLLBACK");
                Err(err)
            }
        }
    }

    /// End the transaction with `sql`; the connection goes back to the pool when it is
    /// healthy (`reuse`) and the statement succeeded.
    fn finish(&mut self, reuse: bool, sql: &str) -> Option<mysql::Error> {
        let mut conn = self.conn.take()?;
        match conn.query_drop(sql) {
            Ok(()) => {
                if reuse {
                    self.pool.lock().push(conn);
                }
                None
            }
            Err(e) => Some(e),
        }
    }

    fn check_key(key: &[u8]) -> DriverResult<()> {
        if key.len() > KEY_BYTES_MAX {
            return Err(DriverError::fatal(format!(
                "innodb: a key of {} bytes is longer than the key column (VARBINARY({KEY_BYTES_MAX}))",
                key.len()
            )));
        }
        Ok(())
    }
}

impl DriverTxn for InnodbTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let sql = self.table(t)?;
        self.run(|c| c.exec_first(&sql.get, (key,)))
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let sql = self.table(t)?;
        self.run(|c| c.exec_first(&sql.get_for_update, (key,)))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        Self::check_key(key)?;
        let sql = self.table(t)?;
        self.run(|c| c.exec_drop(&sql.put, (key, value)))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        let sql = self.table(t)?;
        self.run(|c| c.exec_drop(&sql.delete, (key,)))
    }

    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<Row>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let sql = self.table(t)?;
        let (text, params) = sql.scan(lower, upper, reverse, limit);
        self.run(|c| c.exec(&text, params))
    }

    fn commit(mut self: Box<Self>) -> DriverResult<()> {
        if self.conn.is_none() {
            return Err(DriverError::fatal(
                "innodb: commit of a transaction that already ended",
            ));
        }
        match self.finish(true, "COMMIT") {
            None => Ok(()),
            Some(e) => Err(map_err(e)),
        }
    }

    fn rollback(mut self: Box<Self>) {
        self.finish(true, "ROLLBACK");
    }
}

impl Drop for InnodbTxn {
    fn drop(&mut self) {
        self.finish(true, "ROLLBACK");
    }
}
