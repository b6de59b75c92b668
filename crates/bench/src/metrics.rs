//! The engine metrics the workbench samples each second, declared once.
//!
//! [`engine_metrics!`] takes one table — each metric's field in [`EngineStats`] (what a driver
//! reports, cumulative for counters), its column in the per-second sample and timeseries.csv,
//! its kind and unit, the evenkeel metric it is read from, and its meaning — and makes from it
//! `EngineStats`, the sample's [`EngineInterval`] with the per-interval arithmetic (a counter's
//! difference, a microsecond counter's difference in milliseconds, a gauge's value), the CSV
//! columns, summary.json's per-metric figures and the report's metric table. A metric added
//! here reaches all of them; a peer's driver fills the fields its engine exposes.
//!
//! Kinds: `gauge(T)` is a current value of type T; `count` a cumulative count, sampled as its
//! difference per interval; `micros` a cumulative microsecond total, sampled as milliseconds
//! per interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cell::Cell;

/// One engine column of timeseries.csv: its name, how to write it, how to read it back.
pub(crate) struct EngineColumn {
    pub name: &'static str,
    pub get: fn(&EngineInterval) -> String,
    /// False when the text is not a value of the column's type.
    pub put: fn(&mut EngineInterval, &str) -> bool,
}

/// How a metric is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Gauge,
    Count,
    Micros,
}

/// One metric of the table, for the tools that list them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MetricSpec {
    /// The field in [`EngineStats`].
    pub stat: &'static str,
    /// The column in the per-second sample and timeseries.csv.
    pub column: &'static str,
    pub kind: Kind,
    /// The unit of the sampled column.
    pub unit: &'static str,
    /// The evenkeel metric (`evenkeel::metric_infos`) the evenkeel driver reads it from.
    pub evenkeel: &'static str,
    pub meaning: &'static str,
}

impl MetricSpec {
    /// The meaning as one line (the declaration's doc lines joined by single spaces).
    pub fn meaning_line(&self) -> String {
        self.meaning
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before.unwrap_or(0)))
}

/// A microsecond counter's difference in milliseconds.
fn ms(now: Option<u64>, before: Option<u64>) -> Option<f64> {
    delta(now, before).map(|us| us as f64 / 1000.0)
}

macro_rules! stat_ty {
    (gauge $t:ty) => {
        $t
    };
    (count) => {
        u64
    };
    (micros) => {
        u64
    };
}

macro_rules! column_ty {
    (gauge $t:ty) => {
        $t
    };
    (count) => {
        u64
    };
    (micros) => {
        f64
    };
}

macro_rules! sampled {
    (gauge $t:ty; $now:expr, $before:expr) => {
        $now
    };
    (count; $now:expr, $before:expr) => {
        delta($now, $before)
    };
    (micros; $now:expr, $before:expr) => {
        ms($now, $before)
    };
}

macro_rules! kind_of {
    (gauge $t:ty) => {
        Kind::Gauge
    };
    (count) => {
        Kind::Count
    };
    (micros) => {
        Kind::Micros
    };
}

macro_rules! engine_metrics {
    ($(
        $(#[doc = $doc:literal])+
        $stat:ident => $column:ident: $kind:ident $(($t:ty))? $unit:literal from $evenkeel:literal;
    )*) => {
        /// Engine status sampled each second. Counters are cumulative since open (the sampler
        /// takes differences); gauges are current values. `None` means the engine does not
        /// expose it, so a peer fills what it has and the report says "no data" for the rest.
        ///
        /// Pages flushed are split by who wrote them: the background flusher's policy (flush
        /// lists, i.e. checkpoint order), LRU-tail cleaning, and three kinds of foreground
        /// writes done by user threads — at the checkpoint's sync point, past the dirty-page
        /// limit, and a single page written to free a frame. Stall time is split the same way.
        #[derive(Debug, Clone, Default, Serialize)]
        pub struct EngineStats {
            $( $(#[doc = $doc])+ pub $stat: Option<stat_ty!($kind $($t)?)>, )*
            /// The flush policy in force (evenkeel's adaptive_flushing), a gauge.
            pub flush_policy: Option<String>,
            /// Anything else the engine exposes, by its own name.
            pub extra: BTreeMap<String, f64>,
        }

        /// The engine's figures over one sampled interval: counters as differences,
        /// microsecond counters as milliseconds, gauges at the interval's end.
        #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
        pub struct EngineInterval {
            $( $(#[doc = $doc])+ pub $column: Option<column_ty!($kind $($t)?)>, )*
            /// The engine's flush policy at the end of the interval.
            pub flush_policy: Option<String>,
        }

        impl EngineInterval {
            /// The interval from `before` to `now`.
            pub fn between(now: &EngineStats, before: &EngineStats) -> Self {
                EngineInterval {
                    $( $column: sampled!($kind $($t)?; now.$stat, before.$stat), )*
                    flush_policy: now.flush_policy.clone(),
                }
            }

            /// Every sampled column's value as a number, in [`METRICS`]' order.
            pub fn values(&self) -> Vec<Option<f64>> {
                vec![$( self.$column.map(|v| v as f64) ),*]
            }
        }

        /// The table, in declaration order.
        pub const METRICS: &[MetricSpec] = &[$(
            MetricSpec {
                stat: stringify!($stat),
                column: stringify!($column),
                kind: kind_of!($kind $($t)?),
                unit: $unit,
                evenkeel: $evenkeel,
                meaning: concat!($($doc),+),
            },
        )*];

        /// timeseries.csv's engine columns: the flush policy, then the table's, in order.
        pub(crate) const ENGINE_COLUMNS: &[EngineColumn] = &[
            EngineColumn {
                name: "flush_policy",
                get: |e| Cell::to_cell(&e.flush_policy),
                put: |e, s| match Cell::from_cell(s) {
                    Some(v) => {
                        e.flush_policy = v;
                        true
                    }
                    None => false,
                },
            },
            $( EngineColumn {
                name: stringify!($column),
                get: |e| Cell::to_cell(&e.$column),
                put: |e, s| match Cell::from_cell(s) {
                    Some(v) => {
                        e.$column = v;
                        true
                    }
                    None => false,
                },
            }, )*
        ];

        #[cfg(feature = "evenkeel")]
        impl EngineStats {
            /// evenkeel's figures, each read from the engine metric its row names; every engine
            /// metric is in `extra` as well, by its own name.
            pub fn from_evenkeel(s: &evenkeel::Status) -> Self {
                let all: BTreeMap<String, f64> = s
                    .metrics()
                    .into_iter()
                    .map(|(m, v)| (m.name.to_string(), v))
                    .collect();
                EngineStats {
                    $( $stat: all.get($evenkeel).map(|&v| v as stat_ty!($kind $($t)?)), )*
                    flush_policy: Some(s.flush_policy.to_string()),
                    extra: all,
                }
            }
        }
    };
}

engine_metrics! {
    /// Redo bytes between the checkpoint and the log end.
    checkpoint_age_bytes => checkpoint_age_bytes: gauge(u64) "bytes" from "checkpoint_age_bytes";
    /// The checkpoint age as a share of the log's capacity.
    checkpoint_age_pct => checkpoint_age_pct: gauge(f64) "%" from "checkpoint_age_pct";
    /// Dirty pages per 100 pool pages.
    dirty_pct => dirty_pct: gauge(f64) "%" from "dirty_pct";
    /// Pages written by the background flusher's policy from the flush lists.
    pages_flushed_list => flushed_list_pages: count "pages" from "pages_flushed_background";
    /// Pages written by background LRU-tail cleaning.
    pages_flushed_lru => flushed_lru_pages: count "pages" from "pages_flushed_lru";
    /// Pages written by committing threads at the checkpoint's sync point.
    pages_flushed_sync => flushed_sync_pages: count "pages" from "pages_flushed_sync";
    /// Pages written by committing threads below the sync point because the log's free space
    /// was promised to transactions in flight (evenkeel's log-space reservations).
    pages_flushed_log_space => flushed_log_space_pages: count "pages" from "pages_flushed_log_space";
    /// Pages written by transactions evenkeel's steady held back to pace the log near its
    /// room, while they waited.
    pages_flushed_pace => flushed_pace_pages: count "pages" from "pages_flushed_pace";
    /// Pages written by committing threads while the dirty-page limit is exceeded.
    pages_flushed_max_dirty => flushed_max_dirty_pages: count "pages" from "pages_flushed_max_dirty";
    /// Dirty pages a user thread wrote itself to get a free frame ("single page flush").
    pages_flushed_single_page => flushed_single_page_pages: count "pages" from "pages_flushed_single_page";
    /// Time foreground threads spent stalled on flushing of any kind, summed over threads
    /// (the sum of the kinds below when the engine splits it).
    stall_us => stall_ms: micros "ms" from "foreground_stall_us";
    /// Stall at the checkpoint's sync point.
    stall_sync_us => stall_sync_ms: micros "ms" from "sync_flush_wait_us";
    /// Stall waiting for log space promised to others (below the sync point).
    stall_log_space_us => stall_log_space_ms: micros "ms" from "log_space_wait_us";
    /// Stall flushing past the dirty-page limit.
    stall_max_dirty_us => stall_max_dirty_ms: micros "ms" from "max_dirty_wait_us";
    /// Stall waiting for a free frame.
    stall_free_frame_us => stall_free_frame_ms: micros "ms" from "free_frame_wait_us";
    /// Commit admission delay served by all threads.
    admission_delay_us => admission_delay_ms: micros "ms" from "admission_delay_us";
    /// Admission delay currently asked of each commit.
    admission_delay_now_us => admission_delay_now_us: gauge(u64) "us" from "admission_delay_now_us";
    /// Page-write batches the page cleaner and the LRU cleaner may keep in flight (evenkeel's
    /// adaptive write concurrency, at most write_io_threads).
    write_concurrency => write_concurrency: gauge(u64) "batches" from "write_concurrency";
    /// Of the admission delay, the time commits waited for the page cleaner to make room in
    /// the log (evenkeel's room waits, under steady).
    room_wait_us => room_wait_ms: micros "ms" from "room_wait_us";
    /// Pages read from the data files.
    pages_read => pages_read: count "pages" from "pages_read";
    /// Pages written to the data files (every source).
    pages_written => pages_written: count "pages" from "pages_written";
    /// Pages changed while being written (each stays dirty, from the change's LSN).
    pages_redirtied_in_write => pages_redirtied_in_write: count "pages" from "pages_redirtied_in_write";
    /// Pages user threads evicted from the LRU tail themselves to get a frame, each after a
    /// scan of the tail under the pool instance's mutex (the free list was empty).
    evictions_by_user => evictions_by_user: count "pages" from "evictions";
    /// Key lock requests that waited.
    lock_waits => lock_waits: count "waits" from "lock_waits";
    /// Time spent waiting for key locks, summed over threads.
    lock_wait_us => lock_wait_ms: micros "ms" from "lock_wait_us";
    /// Pages read ahead.
    read_ahead_pages => read_ahead_pages: count "pages" from "read_ahead_pages";
    /// Read-ahead pages evicted before any use.
    read_ahead_evicted_unused => read_ahead_evicted_unused: count "pages" from "read_ahead_evicted_unused";
    /// Bytes written to the redo log.
    log_bytes_written => log_write_bytes: count "bytes" from "log_written_bytes";
    /// fsyncs of the redo log.
    log_fsyncs => log_fsyncs: count "fsyncs" from "log_fsyncs";
    /// Time spent in fsyncs of the redo log: what durable commits waited on the device.
    log_fsync_us => log_fsync_ms: micros "ms" from "log_fsync_us";
    /// fsyncs of the redo log that took 20 ms or more (a device stall every committing
    /// thread waited for).
    log_slow_fsyncs => log_slow_fsyncs: count "fsyncs" from "log_slow_fsyncs";
    /// Commits whose old row versions are kept for read views, not yet purged (InnoDB's
    /// history list length).
    purge_lag => purge_lag: gauge(u64) "commits" from "purge_lag";
    /// Inserts into secondary-index leaves recorded in the change buffer instead of reading
    /// the leaf.
    change_buffer_inserts => change_buffer_inserts: count "changes" from "change_buffer_inserts_buffered";
    /// Deletes from secondary-index leaves recorded in the change buffer instead of reading
    /// the leaf.
    change_buffer_deletes => change_buffer_deletes: count "changes" from "change_buffer_deletes_buffered";
    /// Buffered changes merged into their leaves (when the leaf was read, or in the
    /// background).
    change_buffer_merged => change_buffer_merged: count "changes" from "change_buffer_merged";
    /// Changes in the change buffer.
    change_buffer_entries => change_buffer_entries: gauge(u64) "changes" from "change_buffer_entries";
    /// Leaves whose buffered changes were merged because an operation reached the leaf (a
    /// read, or a write the leaf had no room left to buffer).
    change_buffer_merges_by_read => change_buffer_merges_by_read: count "pages" from "change_buffer_merges_by_read";
    /// Leaves whose buffered changes the background merge applied.
    change_buffer_merges_by_background => change_buffer_merges_by_background: count "pages" from "change_buffer_merges_by_background";
    /// Changes applied directly because the change buffer was at or near
    /// change_buffer_max_size (a share rising from none at 9/10 of it to all at it).
    change_buffer_full_skips => change_buffer_full_skips: count "changes" from "change_buffer_full_skips";
    /// Clean cached leaves dropped from the pool near its LRU tail so that a change could be
    /// buffered instead of dirtying them (each is one page write not made for one change).
    change_buffer_cold_drops => change_buffer_cold_drops: count "pages" from "cold_drops";
    /// Pages of the change buffer's tree (its size, bounded by change_buffer_max_size).
    change_buffer_pages => change_buffer_pages: gauge(u64) "pages" from "change_buffer_tree_pages";
    /// Bytes written to the doublewrite file (the page copies, compressed or raw, with their
    /// headers and padding).
    doublewrite_copy_bytes => doublewrite_copy_bytes: count "bytes" from "doublewrite_copy_bytes";
    /// evenkeel's doublewrite copies that left out a B+tree page's free space
    /// (doublewrite_compression trim, and lz4, zstd and auto, which trim first).
    doublewrite_copies_trimmed => doublewrite_copies_trimmed: count "pages" from "doublewrite_copies_trimmed";
    /// The share of evenkeel's doublewrite copies being compressed, 0 to 1
    /// (doublewrite_compression; with auto, its decision at the end of the second).
    doublewrite_compressing => doublewrite_compressing: gauge(f64) "share" from "doublewrite_compressing";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_a_counters_difference_a_micros_difference_in_ms_and_a_gauges_value() {
        let before = EngineStats {
            pages_read: Some(10),
            stall_sync_us: Some(1_000),
            dirty_pct: Some(50.0),
            ..EngineStats::default()
        };
        let now = EngineStats {
            pages_read: Some(25),
            stall_sync_us: Some(3_500),
            dirty_pct: Some(40.0),
            flush_policy: Some("steady".into()),
            ..EngineStats::default()
        };
        let i = EngineInterval::between(&now, &before);
        assert_eq!(i.pages_read, Some(15));
        assert_eq!(i.stall_sync_ms, Some(2.5));
        assert_eq!(i.dirty_pct, Some(40.0));
        assert_eq!(i.pages_written, None, "not exposed stays None");
        assert_eq!(i.flush_policy.as_deref(), Some("steady"));
        assert_eq!(i.values().len(), METRICS.len());
    }

    #[test]
    fn columns_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for m in METRICS {
            assert!(seen.insert(m.column), "column {} twice", m.column);
        }
    }

    #[cfg(feature = "evenkeel")]
    #[test]
    fn every_row_names_an_evenkeel_metric() {
        let names: Vec<&str> = evenkeel::metric_infos().iter().map(|m| m.name).collect();
        for m in METRICS {
            assert!(
                names.contains(&m.evenkeel),
                "{} reads evenkeel metric `{}`, which evenkeel does not declare",
                m.stat,
                m.evenkeel
            );
        }
    }
}
