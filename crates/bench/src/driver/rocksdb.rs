//! The rocksdb driver: RocksDB's pessimistic `TransactionDB` (row locks, deadlock detection
//! on, `get_for_update` an exclusive lock) in `<dir>/rocksdb/`, one column family per driver
//! table. The build links Debian's librocksdb (ROCKSDB_LIB_DIR, set by .ci/run) instead of
//! compiling RocksDB's C++.
//!
//! Mapping of evenkeel's options: `buffer_pool_size` → the LRU block cache, with index and
//! filter blocks charged to it so it bounds the memory the way a buffer pool does; the redo
//! capacity R (`log_file_size` x `log_files_in_group`) → `max_total_wal_size` = R (the WAL may
//! hold no more than evenkeel's log before memtables are flushed), memtables of R/4 each with
//! `db_write_buffer_size` = R/2; `flush_log_at_trx_commit` 1 → the WAL synced at every commit,
//! 2 and 0 → written to the OS at commit and synced in the background every 1 MiB
//! (`wal_bytes_per_sync`); `page_size` → the block size; `flush_method` o_direct and
//! o_direct_no_fsync → direct reads and direct flush/compaction writes; `lock_wait_timeout` →
//! the transaction lock timeout; `doublewrite` on only (files are written once, never
//! overwritten in place).
//!
//! Set beyond the mapped options, from RocksDB's own tuning guide: no compression (InnoDB and
//! evenkeel do not compress here), a 10-bit bloom filter per key, dynamic level sizes,
//! `max_background_jobs` = 2 (the machine's cores), `bytes_per_sync` = 1 MiB.
//!
//! Per-second stats from RocksDB's statistics: write-stall time, WAL bytes and syncs, bytes
//! written by flushes and by compactions, block reads. L0 file counts and pending compaction
//! bytes are properties the `rocksdb` crate (0.20) does not expose on a TransactionDB.
//!
//! Must never: let a transaction outlive the database handle it borrows (see `RocksTxn`).

#![allow(unsafe_code)]

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, ErrorKind, MultiThreaded,
    Options, ReadOptions, Transaction, TransactionDB, TransactionDBOptions, TransactionOptions,
    WriteOptions,
};

use super::peer_options::{PeerOptions, DEFAULT_BUFFER_POOL_BYTES, DEFAULT_LOCK_WAIT_TIMEOUT_S};
use super::{Driver, DriverError, DriverResult, DriverTxn, EngineStats, Row, TableId};
use crate::error::{BenchError, BenchResult};

/// evenkeel options the rocksdb engine takes.
pub const MAPPED: &[&str] = &[
    "buffer_pool_size",
    "log_file_size",
    "log_files_in_group",
    "flush_log_at_trx_commit",
    "page_size",
    "flush_method",
    "lock_wait_timeout",
    "doublewrite",
];

type Db = TransactionDB<MultiThreaded>;

const MIB: u64 = 1 << 20;

fn map_err(e: rocksdb::Error) -> DriverError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain => {
            DriverError::retryable(format!("rocksdb: {e}"))
        }
        _ => DriverError::fatal(format!("rocksdb: {e}")),
    }
}

/// The effective settings.
#[derive(Debug, Clone)]
struct Settings {
    cache_bytes: u64,
    redo_bytes: u64,
    durability: u64,
    block_bytes: u64,
    direct_io: bool,
    lock_wait_ms: i64,
}

impl Settings {
    fn from(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<Settings> {
        let o = PeerOptions::parse("rocksdb", config, set, MAPPED)?;
        if !o.bool("doublewrite", true)? {
            return Err(BenchError::Usage(
                "rocksdb engine: doublewrite=off has no equivalent: RocksDB writes each file \
                 once and never overwrites a page in place"
                    .into(),
            ));
        }
        let direct_io = match o
            .choice(
                "flush_method",
                &["fsync", "o_dsync", "o_direct", "o_direct_no_fsync"],
            )?
            .as_deref()
        {
            None | Some("fsync") => false,
            Some("o_direct" | "o_direct_no_fsync") => true,
            Some(other) => {
                return Err(BenchError::Usage(format!(
                    "rocksdb engine: flush_method={other} has no equivalent: RocksDB takes fsync \
                     or o_direct (direct reads and direct flush and compaction writes)"
                )))
            }
        };
        let lock_wait_s = o.int("lock_wait_timeout", DEFAULT_LOCK_WAIT_TIMEOUT_S, 1, 1 << 30)?;
        Ok(Settings {
            cache_bytes: o.size("buffer_pool_size", DEFAULT_BUFFER_POOL_BYTES, MIB, 1 << 40)?,
            redo_bytes: o.redo_capacity()?,
            durability: o.durability()?,
            block_bytes: o.size("page_size", 16 << 10, 1 << 10, 1 << 20)?,
            direct_io,
            lock_wait_ms: i64::try_from(lock_wait_s * 1000).unwrap_or(i64::MAX),
        })
    }

    /// Options for the database and every column family.
    fn options(&self, cache: &Cache) -> Options {
        let mut o = Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        o.enable_statistics();
        let mut t = BlockBasedOptions::default();
        t.set_block_cache(cache);
        t.set_block_size(self.block_bytes as usize);
        t.set_cache_index_and_filter_blocks(true);
        t.set_pin_l0_filter_and_index_blocks_in_cache(true);
        t.set_bloom_filter(10.0, false);
        o.set_block_based_table_factory(&t);
        o.set_compression_type(DBCompressionType::None);
        o.set_level_compaction_dynamic_level_bytes(true);
        o.set_max_background_jobs(2);
        o.set_bytes_per_sync(MIB);
        o.set_max_total_wal_size(self.redo_bytes);
        o.set_write_buffer_size((self.redo_bytes / 4).max(MIB) as usize);
        o.set_db_write_buffer_size((self.redo_bytes / 2).max(2 * MIB) as usize);
        if self.durability != 1 {
            o.set_wal_bytes_per_sync(MIB);
        }
        if self.direct_io {
            o.set_use_direct_reads(true);
            o.set_use_direct_io_for_flush_and_compaction(true);
        }
        o
    }
}

/// Check options as `open` would, without opening anything.
pub fn check_options(config: Option<&Path>, set: &[(String, String)]) -> BenchResult<()> {
    Settings::from(config, set).map(|_| ())
}

/// RocksDB behind the adapter.
pub struct RocksDriver {
    db: Arc<Db>,
    opts: Options,
    settings: Settings,
    path: PathBuf,
    /// Opened tables' column family names (`cf_name`) by `TableId`; `None` once dropped.
    tables: RwLock<Arc<Vec<Option<String>>>>,
}

impl RocksDriver {
    pub fn open(
        dir: &Path,
        config: Option<&Path>,
        set: &[(String, String)],
    ) -> BenchResult<RocksDriver> {
        let settings = Settings::from(config, set)?;
        let cache = Cache::new_lru_cache(settings.cache_bytes as usize)
            .map_err(|e| BenchError::Driver(map_err(e)))?;
        let opts = settings.options(&cache);
        let path = dir.join("rocksdb");
        std::fs::create_dir_all(&path)
            .map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
        // Every column family already there is opened with the same options.
        let existing = if path.join("CURRENT").exists() {
            Db::list_cf(&opts, &path).map_err(|e| BenchError::Driver(map_err(e)))?
        } else {
            Vec::new()
        };
        let mut txn_db = TransactionDBOptions::default();
        txn_db.set_txn_lock_timeout(settings.lock_wait_ms);
        // With descriptors, not names: `open_cf` by name opens each column family with
        // RocksDB's default options (an 8 MiB block cache, 4 KiB blocks, no bloom filter).
        let cfs = existing
            .into_iter()
            .map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
        let db: Db = Db::open_cf_descriptors(&opts, &txn_db, &path, cfs)
            .map_err(|e| BenchError::Driver(map_err(e)))?;
        Ok(RocksDriver {
            db: Arc::new(db),
            opts,
            settings,
            path,
            tables: RwLock::new(Arc::new(Vec::new())),
        })
    }
}

/// Column family names of the driver's tables: RocksDB's own "default" is not one.
fn cf_name(table: &str) -> String {
    format!("t.{table}")
}

impl Driver for RocksDriver {
    fn name(&self) -> &str {
        "rocksdb"
    }

    fn open_table(&self, name: &str, create: bool) -> DriverResult<TableId> {
        let mut guard = self.tables.write();
        let cf = cf_name(name);
        if let Some(i) = guard.iter().position(|t| t.as_deref() == Some(cf.as_str())) {
            return Ok(i);
        }
        if self.db.cf_handle(&cf).is_none() {
            if !create {
                return Err(DriverError::fatal(format!(
                    "rocksdb: table {name} not found"
                )));
            }
            self.db.create_cf(&cf, &self.opts).map_err(map_err)?;
        }
        let mut next = Vec::clone(&guard);
        next.push(Some(cf));
        *guard = Arc::new(next);
        Ok(guard.len() - 1)
    }

    fn tables(&self) -> DriverResult<Vec<String>> {
        let mut names: Vec<String> = Db::list_cf(&self.opts, &self.path)
            .map_err(map_err)?
            .into_iter()
            .filter_map(|n| n.strip_prefix("t.").map(str::to_string))
            .filter(|n| self.db.cf_handle(&cf_name(n)).is_some())
            .collect();
        names.sort();
        Ok(names)
    }

    fn drop_table(&self, name: &str) -> DriverResult<()> {
        let mut guard = self.tables.write();
        let cf = cf_name(name);
        if self.db.cf_handle(&cf).is_none() {
            return Err(DriverError::fatal(format!(
                "rocksdb: table {name} not found"
            )));
        }
        self.db.drop_cf(&cf).map_err(map_err)?;
        let next: Vec<_> = guard
            .iter()
            .map(|t| t.clone().filter(|n| *n != cf))
            .collect();
        *guard = Arc::new(next);
        Ok(())
    }

    fn begin(&self) -> DriverResult<Box<dyn DriverTxn>> {
        let mut wo = WriteOptions::default();
        wo.set_sync(self.settings.durability == 1);
        let mut to = TransactionOptions::default();
        to.set_deadlock_detect(true);
        to.set_lock_timeout(self.settings.lock_wait_ms);
        let txn = self.db.transaction_opt(&wo, &to);
        // SAFETY: the transaction borrows the database; `RocksTxn` owns an `Arc` of that same
        // database and drops the transaction first (its `Drop` takes `txn` before the fields
        // drop, and `txn` is declared before `db`), so the borrow never outlives the handle.
        let txn: Transaction<'static, Db> = unsafe { std::mem::transmute(txn) };
        Ok(Box::new(RocksTxn {
            txn: Some(txn),
            db: self.db.clone(),
            tables: self.tables.read().clone(),
            wrote: false,
        }))
    }

    fn stats(&self) -> EngineStats {
        let text = self.opts.get_statistics().unwrap_or_default();
        let t = |name: &str| ticker(&text, name);
        let mut e = EngineStats {
            stall_us: t("rocksdb.stall.micros"),
            log_bytes_written: t("rocksdb.wal.bytes"),
            log_fsyncs: t("rocksdb.wal.synced"),
            pages_read: t("rocksdb.block.cache.miss"),
            ..EngineStats::default()
        };
        let extra = [
            ("flush_write_bytes", "rocksdb.flush.write.bytes"),
            ("compaction_write_bytes", "rocksdb.compact.write.bytes"),
            ("compaction_read_bytes", "rocksdb.compact.read.bytes"),
            ("block_cache_hits", "rocksdb.block.cache.hit"),
            ("block_cache_misses", "rocksdb.block.cache.miss"),
            ("bytes_written", "rocksdb.bytes.written"),
            ("memtable_hits", "rocksdb.memtable.hit"),
        ];
        e.extra = extra
            .iter()
            .filter_map(|(k, n)| t(n).map(|v| (k.to_string(), v as f64)))
            .collect();
        e
    }

    fn config(&self) -> Vec<(String, String)> {
        let s = &self.settings;
        vec![
            ("block_cache".into(), s.cache_bytes.to_string()),
            ("max_total_wal_size".into(), s.redo_bytes.to_string()),
            (
                "write_buffer_size".into(),
                (s.redo_bytes / 4).max(MIB).to_string(),
            ),
            (
                "db_write_buffer_size".into(),
                (s.redo_bytes / 2).max(2 * MIB).to_string(),
            ),
            (
                "wal_sync".into(),
                if s.durability == 1 {
                    "at every commit".into()
                } else {
                    format!(
                        "every 1 MiB in the background (flush_log_at_trx_commit={})",
                        s.durability
                    )
                },
            ),
            ("block_size".into(), s.block_bytes.to_string()),
            ("direct_io".into(), s.direct_io.to_string()),
            ("lock_timeout_ms".into(), s.lock_wait_ms.to_string()),
            ("deadlock_detect".into(), "true".into()),
            ("compression".into(), "none".into()),
            ("bloom_bits_per_key".into(), "10".into()),
            ("max_background_jobs".into(), "2".into()),
        ]
    }

    fn close(&self) -> DriverResult<()> {
        // The files are closed when the last handle (transactions included) drops; the WAL is
        // synced at every commit or in the background, as configured.
        Ok(())
    }
}

/// A ticker's count from RocksDB's statistics text ("rocksdb.stall.micros COUNT : 12").
fn ticker(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.trim_start();
        rest.strip_prefix("COUNT :")?.trim().parse().ok()
    })
}

struct RocksTxn {
    /// Declared before `db` and taken in `Drop`: it borrows `*db`. `None` once finished.
    txn: Option<Transaction<'static, Db>>,
    db: Arc<Db>,
    tables: Arc<Vec<Option<String>>>,
    /// Whether a put or delete ran: a transaction without one ends by rollback, not commit.
    wrote: bool,
}

impl RocksTxn {
    /// Run `f` with the transaction and the table's column family; an error ends the
    /// transaction (dropping it rolls back and releases its locks). Per call: one lookup of
    /// the column family's handle by its stored name, nothing allocated.
    fn run<R>(
        &mut self,
        t: TableId,
        f: impl FnOnce(
            &Transaction<'static, Db>,
            &Arc<rocksdb::BoundColumnFamily<'_>>,
        ) -> Result<R, rocksdb::Error>,
    ) -> DriverResult<R> {
        let r = {
            let cf = self
                .tables
                .get(t)
                .and_then(|n| n.as_deref())
                .ok_or_else(|| DriverError::fatal(format!("rocksdb: table id {t} not open")))?;
            let txn = self.txn.as_ref().ok_or_else(|| {
                DriverError::fatal(
                    "rocksdb: the transaction already ended (an earlier call failed)",
                )
            })?;
            let handle = self.db.cf_handle(cf).ok_or_else(|| {
                DriverError::fatal(format!("rocksdb: column family {cf} is gone"))
            })?;
            f(txn, &handle)
        };
        r.map_err(|e| {
            self.txn = None;
            map_err(e)
        })
    }
}

impl DriverTxn for RocksTxn {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        self.run(t, |x, cf| x.get_cf(cf, key))
    }

    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        self.run(t, |x, cf| x.get_for_update_cf(cf, key, true))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        self.wrote = true;
        self.run(t, |x, cf| x.put_cf(cf, key, value))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        self.wrote = true;
        self.run(t, |x, cf| x.delete_cf(cf, key))
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
        self.run(t, |x, cf| {
            let mut it = x.raw_iterator_cf_opt(cf, ReadOptions::default());
            match (reverse, lower, upper) {
                (false, Bound::Included(k) | Bound::Excluded(k), _) => it.seek(k),
                (false, Bound::Unbounded, _) => it.seek_to_first(),
                (true, _, Bound::Included(k) | Bound::Excluded(k)) => it.seek_for_prev(k),
                (true, _, Bound::Unbounded) => it.seek_to_last(),
            }
            let mut out = Vec::new();
            while it.valid() && out.len() < limit {
                let (Some(k), Some(v)) = (it.key(), it.value()) else {
                    break;
                };
                if RangeBounds::<[u8]>::contains(&(lower, upper), k) {
                    out.push((k.to_vec(), v.to_vec()));
                } else {
                    // Only the excluded seek key itself may be skipped; past it the range ends.
                    let at_excluded_start = match (reverse, lower, upper) {
                        (false, Bound::Excluded(l), _) => k == l,
                        (true, _, Bound::Excluded(u)) => k == u,
                        _ => false,
                    };
                    if !at_excluded_start {
                        break;
                    }
                }
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
            it.status()?;
            Ok(out)
        })
    }

    fn commit(mut self: Box<Self>) -> DriverResult<()> {
        let txn = self.txn.take().ok_or_else(|| {
            DriverError::fatal("rocksdb: commit of a transaction that already ended")
        })?;
        if !self.wrote {
            // RocksDB's commit writes (and, with sync, fsyncs) a WAL record even for an empty
            // write batch; a read-only transaction has nothing to make durable, so it ends as
            // MyRocks ends one: by rollback, which releases its locks and writes nothing.
            txn.rollback().map_err(map_err)?;
            return Ok(());
        }
        txn.commit().map_err(map_err)
    }

    fn rollback(mut self: Box<Self>) {
        if let Some(txn) = self.txn.take() {
            let _ = txn.rollback();
        }
    }
}

impl Drop for RocksTxn {
    fn drop(&mut self) {
        // The transaction goes before the database handle it borrows.
        self.txn = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block-size line of `cf`'s table options in the newest OPTIONS file RocksDB wrote.
    fn block_size_in_options_file(dir: &Path, cf: &str) -> Option<String> {
        let newest = std::fs::read_dir(dir.join("rocksdb"))
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("OPTIONS-"))
            .max_by_key(|n| n[8..].parse::<u64>().unwrap_or(0))?;
        let text = std::fs::read_to_string(dir.join("rocksdb").join(newest)).ok()?;
        let section = format!("[TableOptions/BlockBasedTable \"{cf}\"]");
        let body = &text[text.find(&section)? + section.len()..];
        let body = &body[..body.find("\n[").unwrap_or(body.len())];
        body.lines()
            .map(str::trim)
            .find(|l| l.starts_with("block_size="))
            .map(str::to_string)
    }

    /// A reopened database gets the configured table options on every column family, not
    /// RocksDB's defaults (which `open_cf` by name would give it).
    #[test]
    fn a_reopened_database_keeps_its_options() {
        let dir = tempfile::tempdir().unwrap();
        let set = [("page_size".to_string(), "8K".to_string())];
        {
            let d = RocksDriver::open(dir.path(), None, &set).unwrap();
            d.open_table("kv", true).unwrap();
        }
        let created = block_size_in_options_file(dir.path(), "t.kv");
        assert_eq!(created.as_deref(), Some("block_size=8192"));
        {
            let d = RocksDriver::open(dir.path(), None, &set).unwrap();
            d.open_table("kv", false).unwrap();
        }
        let reopened = block_size_in_options_file(dir.path(), "t.kv");
        assert_eq!(reopened.as_deref(), Some("block_size=8192"));
    }

    #[test]
    fn reads_tickers() {
        let text = "rocksdb.stall.micros COUNT : 42\nrocksdb.wal.bytes COUNT : 7\n";
        assert_eq!(ticker(text, "rocksdb.stall.micros"), Some(42));
        assert_eq!(ticker(text, "rocksdb.wal.bytes"), Some(7));
        assert_eq!(ticker(text, "rocksdb.wal.synced"), None);
    }
}
