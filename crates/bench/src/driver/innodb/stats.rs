//! InnoDB's status mapped onto `EngineStats`, read once a second on a connection of its own:
//! `SHOW GLOBAL STATUS` for the buffer pool, checkpoint age, pages and redo, and
//! `INFORMATION_SCHEMA.INNODB_METRICS` (all enabled by my.cnf's `innodb_monitor_enable = all`)
//! for pages flushed by kind. What InnoDB does not expose stays `None`: it times no stalls
//! (the counts of waits go to `extra`), and MariaDB has no single-page flush and no separate
//! log fsync counter (`fsyncs_all` counts every fsync).
//!
//! Checkpoint age in % is of `innodb_log_file_size`, the redo capacity, as evenkeel's is of its
//! log capacity; dirty % is dirty pages over data + free pages, the base InnoDB compares
//! `innodb_max_dirty_pages_pct` with.

use std::collections::HashMap;

use mysql::prelude::Queryable;
use mysql::Conn;
use parking_lot::Mutex;

use crate::driver::EngineStats;

const STATUS: &[&str] = &[
    "Innodb_buffer_pool_pages_data",
    "Innodb_buffer_pool_pages_dirty",
    "Innodb_buffer_pool_pages_free",
    "Innodb_buffer_pool_pages_total",
    "Innodb_buffer_pool_pages_flushed",
    "Innodb_buffer_pool_pages_lru_flushed",
    "Innodb_buffer_pool_pages_lru_freed",
    "Innodb_buffer_pool_read_ahead",
    "Innodb_buffer_pool_read_ahead_evicted",
    "Innodb_buffer_pool_wait_free",
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_read_requests",
    "Innodb_checkpoint_age",
    "Innodb_checkpoint_max_age",
    "Innodb_data_fsyncs",
    "Innodb_data_read",
    "Innodb_data_written",
    "Innodb_dblwr_pages_written",
    "Innodb_deadlocks",
    "Innodb_history_list_length",
    "Innodb_log_waits",
    "Innodb_log_writes",
    "Innodb_lsn_current",
    "Innodb_lsn_last_checkpoint",
    "Innodb_os_log_written",
    "Innodb_pages_read",
    "Innodb_pages_written",
    "Innodb_row_lock_time",
    "Innodb_row_lock_waits",
];

const METRICS: &[&str] = &[
    "buffer_flush_adaptive_total_pages",
    "buffer_flush_background_total_pages",
    "buffer_flush_sync_total_pages",
    "buffer_flush_sync_waits",
    "buffer_flush_neighbor_total_pages",
    "log_checkpoints",
];

/// Reads the status on its own connection.
pub struct StatsReader {
    conn: Mutex<Option<Conn>>,
    log_capacity_bytes: u64,
}

fn in_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(",")
}

impl StatsReader {
    pub fn new(mut conn: Conn) -> StatsReader {
        let log_capacity_bytes = conn
            .query_first::<u64, _>("SELECT @@innodb_log_file_size")
            .ok()
            .flatten()
            .unwrap_or(0);
        StatsReader {
            conn: Mutex::new(Some(conn)),
            log_capacity_bytes,
        }
    }

    /// The server's version string.
    pub fn version(&self) -> String {
        self.conn
            .lock()
            .as_mut()
            .and_then(|c| {
                c.query_first::<String, _>("SELECT VERSION()")
                    .ok()
                    .flatten()
            })
            .unwrap_or_default()
    }

    pub fn close(&self) {
        self.conn.lock().take();
    }

    /// Every counter by name (status variables and metrics), empty when the server cannot
    /// be asked.
    fn counters(&self) -> HashMap<String, u64> {
        let mut guard = self.conn.lock();
        let Some(conn) = guard.as_mut() else {
            return HashMap::new();
        };
        let mut m = HashMap::new();
        let status: Vec<(String, String)> = conn
            .query(format!(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ({})",
                in_list(STATUS)
            ))
            .unwrap_or_default();
        for (k, v) in status {
            if let Ok(n) = v.trim().parse::<u64>() {
                m.insert(k, n);
            }
        }
        let metrics: Vec<(String, i64)> = conn
            .query(format!(
                "SELECT name, count FROM information_schema.innodb_metrics WHERE name IN ({})",
                in_list(METRICS)
            ))
            .unwrap_or_default();
        for (k, v) in metrics {
            m.insert(k, u64::try_from(v).unwrap_or(0));
        }
        m
    }

    pub fn read(&self) -> EngineStats {
        let c = self.counters();
        if c.is_empty() {
            return EngineStats::default();
        }
        let g = |k: &str| c.get(k).copied();
        let age = g("Innodb_checkpoint_age");
        let (data, free, dirty) = (
            g("Innodb_buffer_pool_pages_data").unwrap_or(0),
            g("Innodb_buffer_pool_pages_free").unwrap_or(0),
            g("Innodb_buffer_pool_pages_dirty").unwrap_or(0),
        );
        let flushed = g("Innodb_buffer_pool_pages_flushed");
        let lru = g("Innodb_buffer_pool_pages_lru_flushed");
        let sync = g("buffer_flush_sync_total_pages");
        // Pages the page cleaner wrote from the flush list: all flushed pages less the LRU
        // tail's and the ones written for a sync flush.
        let list = flushed.map(|f| {
            f.saturating_sub(lru.unwrap_or(0))
                .saturating_sub(sync.unwrap_or(0))
        });
        let capacity = self.log_capacity_bytes;
        let mut e = EngineStats {
            checkpoint_age_bytes: age,
            checkpoint_age_pct: age
                .filter(|_| capacity > 0)
                .map(|a| 100.0 * a as f64 / capacity as f64),
            dirty_pct: (data + free > 0).then(|| 100.0 * dirty as f64 / (data + free) as f64),
            flush_policy: None,
            pages_flushed_list: list,
            pages_flushed_lru: lru,
            pages_flushed_sync: sync,
            pages_read: g("Innodb_pages_read"),
            pages_written: g("Innodb_pages_written"),
            read_ahead_pages: g("Innodb_buffer_pool_read_ahead"),
            read_ahead_evicted_unused: g("Innodb_buffer_pool_read_ahead_evicted"),
            log_bytes_written: g("Innodb_os_log_written"),
            purge_lag: g("Innodb_history_list_length"),
            ..EngineStats::default()
        };
        let extra = [
            ("log_capacity_bytes", Some(capacity)),
            ("checkpoint_max_age_bytes", g("Innodb_checkpoint_max_age")),
            ("lsn", g("Innodb_lsn_current")),
            ("checkpoint_lsn", g("Innodb_lsn_last_checkpoint")),
            ("checkpoints", g("log_checkpoints")),
            ("pages_dirty", Some(dirty)),
            ("pages_data", Some(data)),
            ("pages_free", Some(free)),
            (
                "pages_flushed_adaptive",
                g("buffer_flush_adaptive_total_pages"),
            ),
            (
                "pages_flushed_background",
                g("buffer_flush_background_total_pages"),
            ),
            (
                "pages_flushed_neighbors",
                g("buffer_flush_neighbor_total_pages"),
            ),
            ("pages_lru_freed", g("Innodb_buffer_pool_pages_lru_freed")),
            ("sync_flush_waits", g("buffer_flush_sync_waits")),
            ("free_page_waits", g("Innodb_buffer_pool_wait_free")),
            ("log_waits", g("Innodb_log_waits")),
            ("log_writes", g("Innodb_log_writes")),
            ("fsyncs_all", g("Innodb_data_fsyncs")),
            ("doublewrite_pages", g("Innodb_dblwr_pages_written")),
            ("data_read_bytes", g("Innodb_data_read")),
            ("data_written_bytes", g("Innodb_data_written")),
            ("deadlocks", g("Innodb_deadlocks")),
            ("row_lock_waits", g("Innodb_row_lock_waits")),
            ("row_lock_time_ms", g("Innodb_row_lock_time")),
            ("history_list_length", g("Innodb_history_list_length")),
            ("page_requests", g("Innodb_buffer_pool_read_requests")),
            ("page_misses", g("Innodb_buffer_pool_reads")),
        ];
        e.extra = extra
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v as f64)))
            .collect();
        e
    }
}
