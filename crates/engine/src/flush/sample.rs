//! sample: the per-second status row the page cleaner records (the last hour is kept), so a
//! user can see each second what the InnoDB flushing studies graph: checkpoint age, dirty %, pages flushed by
//! source, and what user threads paid for it (admission delay, foreground stalls).

/// One second of the engine's life. Counters are deltas over the second; gauges are values at
/// its end.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Sample {
    /// Seconds since the database was opened.
    pub t_s: f64,
    pub lsn: u64,
    pub checkpoint_lsn: u64,
    pub checkpoint_age_bytes: u64,
    pub checkpoint_age_pct: f64,
    /// 100 * dirty / (1 + data + free).
    pub dirty_pct: f64,
    pub pages_dirty: u64,
    pub pages_free: u64,
    pub redo_bytes: u64,
    /// Pages written by source: the policy (flush lists), LRU cleaning, committing threads at
    /// the sync point, committing threads that found the log's free space promised to
    /// transactions in flight (below the sync point), transactions the pace held back near the
    /// log's room (steady), committing threads past max_dirty_pages_pct, and user threads that
    /// had to write a dirty page to get a free frame.
    pub flushed_policy: u64,
    pub flushed_lru: u64,
    pub flushed_sync: u64,
    pub flushed_log_space: u64,
    pub flushed_pace: u64,
    pub flushed_max_dirty: u64,
    pub flushed_single_page: u64,
    /// The device's page-write throughput as the cleaner measures it (pages/s every writer
    /// sustained while the cleaner wrote), at the end of the second.
    pub device_pages_per_s: f64,
    /// What the policy planned for this second.
    pub planned_flush_list: u64,
    pub planned_lru: u64,
    /// Admission delay asked of each commit at the end of the second (µs) and the total
    /// delay served during it.
    pub admission_delay_us: u64,
    pub admission_delay_total_us: u64,
    /// Time user threads spent stalled: sync-point flushing, flushing for log space promised
    /// to others, max-dirty flushing, waiting for a free frame (µs).
    pub stall_sync_us: u64,
    pub stall_log_space_us: u64,
    pub stall_max_dirty_us: u64,
    pub stall_free_frame_us: u64,
    pub pages_read: u64,
    pub read_ahead_pages: u64,
    pub read_ahead_evicted_unused: u64,
    pub log_bytes_written: u64,
    pub log_fsyncs: u64,
    pub data_fsyncs: u64,
    pub commits: u64,
    /// Old row versions kept for read views, the commits they belong to (InnoDB's history
    /// list length) and the oldest open view's age, at the end of the second.
    pub history_versions: u64,
    pub purge_lag: u64,
    pub oldest_view_age_ms: u64,
}
