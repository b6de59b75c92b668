//! status: what [`crate::Database::status`] reports, and the metrics table over it.
//!
//! Every figure a reader may chart is declared once, here or in its counter group (`crate::counter::counter_group!`):
//! name, unit, kind (counter or gauge) and meaning. [`Status::metrics`] walks that table, and
//! `evenkeel status --metrics`, the workbench's per-second engine extras and its reports read
//! it, so a counter added to a group reaches all of them without being listed again.

use crate::btree::{AdaptiveHashCounts, ChangeBufferCounts, TreeCounts};
use crate::buffer::PoolStatus;
use crate::counter::{MetricInfo, MetricKind};
use crate::flush::FlushCounts;
use crate::io::IoStats;
use crate::locks::LockStats;
use crate::mvcc::HistoryStats;
use crate::recovery::RecoveryReport;
use crate::shared::DbCounts;
use crate::wal::LogStats;

/// What `status()` reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Status {
    pub location: String,
    pub page_size: usize,
    /// Current LSN (end of the redo stream), flushed LSN and checkpoint LSN.
    pub lsn: u64,
    pub flushed_lsn: u64,
    pub checkpoint_lsn: u64,
    pub checkpoint_age_bytes: u64,
    pub checkpoint_age_pct: f64,
    pub log_capacity_bytes: u64,
    pub log: LogStats,
    pub flush_policy: crate::options::FlushPolicy,
    /// Who wrote pages back (page cleaner or committing threads) and what commits waited for.
    pub flush: FlushCounts,
    /// The admission delay the last commit waited (or the policy asked at its last loop), µs.
    pub admission_delay_now_us: u64,
    /// Page-write batches the cleaners may keep in flight now (adaptive_write_concurrency).
    pub write_concurrency: u64,
    /// Appends that found the log full and waited for the page cleaner to free space.
    pub log_full_waits: u64,
    /// Checkpoints written by the page cleaner, a sharp checkpoint or a log-full wait.
    pub checkpoints: u64,
    pub recovery: RecoveryReport,
    /// The redo replay rate recorded from this database's recoveries (bytes per second over
    /// the whole open; a slower recovery lowers it at once, a faster one raises it slowly:
    /// [`crate::flush::next_replay_rate`]), as the checkpoint slots carry it; 0: none measured
    /// yet.
    pub replay_rate_bytes_per_s: u64,
    /// What `recovery_time_target` asks of the page cleaner (None: the option is off).
    pub recovery_target: Option<crate::flush::RecoveryTarget>,
    /// Seconds a recovery would take now: the checkpoint age at the replay rate (the recorded
    /// one, else the assumed one).
    pub recovery_time_estimate_s: f64,
    pub locks: LockStats,
    pub page_overhead_bytes: usize,
    pub buffer_pool_size: u64,
    pub buffer_pool_instances: usize,
    pub file_pages: u32,
    pub free_list_pages: u32,
    pub file_bytes: u64,
    pub tables: usize,
    /// 100 * dirty / (1 + data + free), InnoDB's formula for its dirty-page percentage.
    pub dirty_pct: f64,
    pub buffer: PoolStatus,
    /// B+tree structure modifications.
    pub tree: TreeCounts,
    /// Point gets and the adaptive hash index (all 0 when `adaptive_hash_index` is off).
    pub adaptive_hash: AdaptiveHashCounts,
    /// Entries the adaptive hash index holds at most (0: off).
    pub adaptive_hash_entries_max: u64,
    /// The change buffer (btree/ibuf.rs): changes buffered and merged, its size now.
    pub change_buffer: ChangeBufferCounts,
    /// The most pages the change buffer's tree may take (change_buffer_max_size of the pool).
    pub change_buffer_max_pages: u64,
    /// The doublewrite area's writes (all 0 without one).
    pub doublewrite: crate::dwb::DwbStats,
    /// The share of the doublewrite copies being compressed now, 0 to 1
    /// (`doublewrite_compression`: 1 with lz4 or zstd; with auto, its last decision).
    pub doublewrite_compressing: f64,
    /// Transactions and rows.
    pub txns: DbCounts,
    /// Old row versions kept for read views, purge and the views.
    pub history: HistoryStats,
    pub io: IoStats,
}

/// A metric read from a [`Status`].
type Getter = fn(&Status) -> f64;

/// Declares the metrics that are not members of a counter group: each one's name, kind, unit,
/// meaning and how to read it from a [`Status`].
macro_rules! metrics {
    ($( $name:ident : $kind:ident $unit:literal, $meaning:literal, |$s:ident| $get:expr; )*) => {
        const DECLARED: &[(MetricInfo, Getter)] = &[$(
            (
                MetricInfo {
                    name: stringify!($name),
                    unit: $unit,
                    kind: MetricKind::$kind,
                    meaning: $meaning,
                },
                |$s: &Status| $get as f64,
            ),
        )*];
    };
}

metrics! {
    change_buffer_max_pages: Gauge "pages", "The most pages the change buffer's tree may take (change_buffer_max_size of the buffer pool).", |s| s.change_buffer_max_pages;
    lsn: Gauge "bytes", "The end of the redo stream (an LSN is a byte offset in it).", |s| s.lsn;
    flushed_lsn: Gauge "bytes", "How far the redo log is durable.", |s| s.flushed_lsn;
    checkpoint_lsn: Gauge "bytes", "The last checkpoint's LSN: recovery starts there.",
        |s| s.checkpoint_lsn;
    checkpoint_age_bytes: Gauge "bytes", "Redo bytes between the checkpoint and the log end.",
        |s| s.checkpoint_age_bytes;
    checkpoint_age_pct: Gauge "%", "The checkpoint age as a share of the log's capacity.",
        |s| s.checkpoint_age_pct;
    log_capacity_bytes: Gauge "bytes", "Redo the log holds: its files' size less headers.",
        |s| s.log_capacity_bytes;
    dirty_pct: Gauge "%", "Dirty pages per 100 pool pages (InnoDB's formula).", |s| s.dirty_pct;
    admission_delay_now_us: Gauge "us", "The admission delay the last commit was asked to wait.",
        |s| s.admission_delay_now_us;
    doublewrite_pages: Counter "pages", "Pages written in place through the doublewrite area.",
        |s| s.doublewrite.pages_written;
    doublewrite_copy_bytes: Counter "bytes",
        "Bytes written to the doublewrite file: the page copies (compressed or raw), their headers and padding.",
        |s| s.doublewrite.copy_bytes;
    doublewrite_copies_compressed: Counter "pages",
        "Page copies the doublewrite area stored compressed (doublewrite_compression).",
        |s| s.doublewrite.copies_compressed;
    doublewrite_copies_trimmed: Counter "pages",
        "Page copies the doublewrite area stored without their free space (B+tree pages; every doublewrite_compression but none).",
        |s| s.doublewrite.copies_trimmed;
    doublewrite_compressing: Gauge "share",
        "The share of the doublewrite copies being compressed now, 0 to 1 (1 with doublewrite_compression=lz4 or zstd; with auto, its last decision).",
        |s| s.doublewrite_compressing;
    write_concurrency: Gauge "batches",
        "Page-write batches the cleaners may keep in flight now (at most write_io_threads).",
        |s| s.write_concurrency;
    log_full_waits: Counter "waits", "Appends that found the log full and waited for room.",
        |s| s.log_full_waits;
    checkpoints: Counter "checkpoints", "Checkpoints written.", |s| s.checkpoints;
    replay_rate_bytes_per_s: Gauge "bytes/s",
        "Redo replay rate recorded from recoveries (whole open; follows the slowest recent \
        one); 0: none yet.",
        |s| s.replay_rate_bytes_per_s;
    recovery_time_estimate_s: Gauge "s",
        "Seconds a recovery would take now: the checkpoint age at the replay rate.",
        |s| s.recovery_time_estimate_s;
    recovery_age_limit_bytes: Gauge "bytes",
        "The checkpoint age recovery_time_target holds the log under; 0: the option is off.",
        |s| s.recovery_target.map_or(0, |t| t.max_age);
    foreground_stall_us: Counter "us",
        "Time user threads spent flushing or waiting for flushing: the sync point, promised log \
         space, the dirty-page limit and free frames together.",
        |s| s.flush.sync_flush_wait_us
            + s.flush.log_space_wait_us
            + s.flush.max_dirty_wait_us
            + s.buffer.free_frame_wait_us;
    pool_frames: Gauge "pages", "Frames in the buffer pool.", |s| s.buffer.frames;
    pages_data: Gauge "pages", "Frames holding a page.", |s| s.buffer.pages_data;
    pages_free: Gauge "pages", "Frames on the free lists.", |s| s.buffer.pages_free;
    pages_dirty: Gauge "pages", "Frames whose page is newer than its image on disk.",
        |s| s.buffer.pages_dirty;
    page_requests: Counter "requests", "Page lookups in the buffer pool.",
        |s| s.buffer.page_requests;
    page_hits: Counter "requests", "Page lookups that found the page in the pool.",
        |s| s.buffer.hits;
    pages_read: Counter "pages", "Pages read from the data file.", |s| s.buffer.pages_read;
    pages_read_corrupt: Counter "pages", "Page reads that failed verification.",
        |s| s.buffer.pages_read_corrupt;
    pages_written: Counter "pages", "Pages written to the data file (every source).",
        |s| s.buffer.pages_written;
    pages_created: Counter "pages", "Pages allocated and formatted in the pool.",
        |s| s.buffer.pages_created;
    pages_dirtied: Counter "pages", "Clean pages made dirty.", |s| s.buffer.pages_dirtied;
    evictions: Counter "pages", "Pages evicted to free a frame.", |s| s.buffer.evictions;
    lru_evictions: Counter "pages", "Pages the LRU cleaner evicted to the free lists.",
        |s| s.buffer.lru_evictions;
    cold_drops: Counter "pages",
        "Clean pages near the LRU tail dropped so a change could be buffered instead.",
        |s| s.buffer.cold_drops;
    made_young: Counter "pages", "Pages moved to the young part of the LRU.",
        |s| s.buffer.made_young;
    made_not_young: Counter "pages", "Touches of old pages left in the old part.",
        |s| s.buffer.made_not_young;
    pages_flushed_single_page: Counter "pages",
        "Dirty pages a user thread wrote itself to get a free frame.",
        |s| s.buffer.eviction_writes;
    free_frame_waits: Counter "waits", "User threads that waited for a free frame.",
        |s| s.buffer.free_frame_waits;
    free_frame_wait_us: Counter "us", "Time user threads waited for a free frame.",
        |s| s.buffer.free_frame_wait_us;
    read_ahead_pages: Counter "pages", "Pages read ahead.", |s| s.buffer.read_ahead_pages;
    read_ahead_evicted_unused: Counter "pages", "Read-ahead pages evicted before any use.",
        |s| s.buffer.read_ahead_evicted_unused;
    pages_redirtied_in_write: Counter "pages",
        "Pages changed while being written (still dirty after the write).",
        |s| s.buffer.pages_redirtied_in_write;
    io_reads: Counter "reads", "Read calls on every file.", |s| s.io.reads;
    io_read_bytes: Counter "bytes", "Bytes read from every file.", |s| s.io.read_bytes;
    io_writes: Counter "writes", "Write calls on every file.", |s| s.io.writes;
    io_write_bytes: Counter "bytes", "Bytes written to every file.", |s| s.io.write_bytes;
    io_syncs: Counter "syncs", "fsync/fdatasync calls on every file.", |s| s.io.syncs;
    lock_waits: Counter "waits", "Key lock requests that waited.", |s| s.locks.lock_waits;
    lock_wait_us: Counter "us", "Time spent waiting for key locks.", |s| s.locks.lock_wait_us;
    deadlocks: Counter "deadlocks", "Lock requests refused as deadlocks.", |s| s.locks.deadlocks;
    lock_timeouts: Counter "timeouts", "Lock waits that timed out.", |s| s.locks.lock_timeouts;
    lock_memory_bytes: Gauge "bytes", "Memory charged to the key locks held and waited for (not what transactions took from max_lock_memory and have not charged yet).",
        |s| s.locks.memory_used_bytes;
    file_bytes: Gauge "bytes", "The data file's size.", |s| s.file_bytes;
    file_pages: Gauge "pages", "Pages in the data file.", |s| s.file_pages;
    free_list_pages: Gauge "pages", "Data file pages on the free list.", |s| s.free_list_pages;
    tables: Gauge "tables", "Tables in the catalog.", |s| s.tables;
    adaptive_hash_entries_max: Gauge "entries",
        "Entries the adaptive hash index holds at most (0: adaptive_hash_index is off).",
        |s| s.adaptive_hash_entries_max;
}

/// Every metric, in the order [`Status::metrics`] gives values: the declared ones above, then
/// the flush, redo log (named `log_...`), B+tree, adaptive hash index (`adaptive_hash_...`),
/// change buffer (`change_buffer_...`),
/// transaction and history counter groups.
pub fn metric_infos() -> Vec<MetricInfo> {
    DECLARED
        .iter()
        .map(|(m, _)| *m)
        .chain(FlushCounts::INFO.iter().copied())
        .chain(LogStats::INFO.iter().copied())
        .chain(TreeCounts::INFO.iter().copied())
        .chain(AdaptiveHashCounts::INFO.iter().copied())
        .chain(ChangeBufferCounts::INFO.iter().copied())
        .chain(DbCounts::INFO.iter().copied())
        .chain(HistoryStats::INFO.iter().copied())
        .collect()
}

impl Status {
    /// Every metric with its value, in [`metric_infos`]'s order.
    pub fn metrics(&self) -> Vec<(MetricInfo, f64)> {
        let values = DECLARED
            .iter()
            .map(|(_, get)| get(self))
            .chain(self.flush.values().into_iter().map(|v| v as f64))
            .chain(self.log.values().into_iter().map(|v| v as f64))
            .chain(self.tree.values().into_iter().map(|v| v as f64))
            .chain(self.adaptive_hash.values().into_iter().map(|v| v as f64))
            .chain(self.change_buffer.values().into_iter().map(|v| v as f64))
            .chain(self.txns.values().into_iter().map(|v| v as f64))
            .chain(self.history.values().into_iter().map(|v| v as f64));
        metric_infos().into_iter().zip(values).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_unique_and_every_metric_has_a_unit_and_a_meaning() {
        let infos = metric_infos();
        let mut seen = std::collections::BTreeSet::new();
        for m in &infos {
            assert!(seen.insert(m.name), "metric `{}` declared twice", m.name);
            assert!(!m.unit.is_empty(), "metric `{}` has no unit", m.name);
            assert!(
                m.meaning_line().len() > 10,
                "metric `{}` has no meaning",
                m.name
            );
        }
        let expected = DECLARED.len()
            + FlushCounts::INFO.len()
            + LogStats::INFO.len()
            + TreeCounts::INFO.len()
            + AdaptiveHashCounts::INFO.len()
            + ChangeBufferCounts::INFO.len()
            + DbCounts::INFO.len()
            + HistoryStats::INFO.len();
        assert_eq!(infos.len(), expected);
    }
}
