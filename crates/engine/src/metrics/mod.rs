//! metrics: the engine's counters and gauges, declared once in the table below (name, kind,
//! unit, one-line doc) and sampled every second by whoever holds the [`Metrics`].
//!
//! What must stay true: a metric is added by adding a row here and nowhere else; names are never
//! renamed once published (reports and CSV headers use them); units and qualifiers go last in a
//! name (`free_frame_wait_us`). This module depends on nothing above `types`, so every layer can
//! update it.

mod declare;
mod kinds;

pub use kinds::{Counter, Gauge, Metric, MetricDesc, MetricKind};

use declare::declare_metrics;

declare_metrics! {
    /// Pages read from the data file into the buffer pool.
    pages_read: Counter, "pages";
    /// Pages written back from the buffer pool to the data file.
    pages_written: Counter, "pages";
    /// Logical page requests served from the buffer pool without a read.
    buffer_hits: Counter, "requests";
    /// Logical page requests made to the buffer pool (hits plus reads).
    buffer_read_requests: Counter, "requests";
    /// Pages removed from an LRU list to reuse their frame.
    evictions: Counter, "pages";
    /// Pages moved from the old sublist to the young end of an LRU list.
    made_young: Counter, "pages";
    /// Old-sublist pages accessed again but kept old (within old_blocks_time).
    made_not_young: Counter, "pages";
    /// Frames holding a page.
    pages_data: Gauge, "pages";
    /// Frames on the free lists.
    pages_free: Gauge, "pages";
    /// Frames holding a page modified since it was last written.
    pages_dirty: Gauge, "pages";
    /// Dirty pages written because their frame was needed (LRU tail), not by flush-list flushing.
    page_writes_by_eviction: Counter, "pages";
    /// Bytes read from all files.
    bytes_read: Counter, "bytes";
    /// Bytes written to all files.
    bytes_written: Counter, "bytes";
    /// fsync/fdatasync calls made.
    fsyncs: Counter, "calls";
    /// Times a thread found no free frame and had to wait for one.
    free_frame_waits: Counter, "waits";
    /// Time threads spent waiting for a free frame.
    free_frame_wait_us: Counter, "us";
    /// B+tree page splits.
    page_splits: Counter, "splits";
    /// B+tree page merges.
    page_merges: Counter, "merges";
    /// Pages returned to the file's free space.
    pages_freed: Counter, "pages";
    /// Pages taken from the file's free space or by growing the file.
    pages_allocated: Counter, "pages";
    /// Transactions committed.
    commits: Counter, "txns";
    /// Transactions rolled back.
    rollbacks: Counter, "txns";
    /// Key lock requests that had to wait.
    lock_waits: Counter, "waits";
    /// Time spent waiting for key locks, including waits that timed out.
    lock_wait_us: Counter, "us";
    /// Lock requests refused because they would close a wait-for cycle.
    deadlocks: Counter, "txns";
    /// Lock waits that ended with a lock wait timeout.
    lock_timeouts: Counter, "waits";
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_declared_metric_appears_once_in_iter_with_its_unit() {
        let m = Metrics::default();
        let snap = m.snapshot();
        let listed: Vec<_> = snap.iter().collect();
        assert_eq!(listed.len(), Metrics::DESCRIPTORS.len());
        for ((name, unit, value), desc) in listed.iter().zip(Metrics::DESCRIPTORS) {
            assert_eq!((*name, *unit, *value), (desc.name, desc.unit, 0));
            assert!(!desc.doc.trim().is_empty(), "{name} has no doc");
        }
        let names: HashSet<_> = listed.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names.len(), listed.len(), "duplicate names");
        for expected in [
            "pages_read",
            "pages_dirty",
            "free_frame_wait_us",
            "lock_timeouts",
        ] {
            assert!(names.contains(expected), "{expected}");
        }
    }

    #[test]
    fn snapshot_reads_what_was_recorded() {
        let m = Metrics::default();
        m.pages_read.inc(3);
        m.pages_read.inc(4);
        m.pages_dirty.set(10);
        m.pages_dirty.add(5);
        m.pages_dirty.sub(2);
        m.free_frame_wait_us.inc(1500);
        let s = m.snapshot();
        assert_eq!(s.pages_read, 7);
        assert_eq!(s.pages_dirty, 13);
        assert_eq!(s.free_frame_wait_us, 1500);
        assert_eq!(s.pages_written, 0);
        let by_name: Vec<_> = s.iter().filter(|(_, _, v)| *v != 0).collect();
        assert_eq!(
            by_name,
            [
                ("pages_read", "pages", 7),
                ("pages_dirty", "pages", 13),
                ("free_frame_wait_us", "us", 1500)
            ]
        );
    }

    #[test]
    fn delta_subtracts_counters_and_keeps_later_gauges() {
        let m = Metrics::default();
        m.commits.inc(100);
        m.pages_free.set(500);
        let earlier = m.snapshot();
        m.commits.inc(42);
        m.pages_free.set(300);
        m.bytes_written.inc(8192);
        let later = m.snapshot();
        let d = later.delta(&earlier);
        assert_eq!(d.commits, 42);
        assert_eq!(d.bytes_written, 8192);
        assert_eq!(d.pages_free, 300);
        // Every field follows its kind.
        for ((name, _, dv), desc) in d.iter().zip(Metrics::DESCRIPTORS) {
            let l = later.iter().find(|r| r.0 == name).unwrap().2;
            let e = earlier.iter().find(|r| r.0 == name).unwrap().2;
            match desc.kind {
                MetricKind::Counter => assert_eq!(dv, l - e, "{name}"),
                MetricKind::Gauge => assert_eq!(dv, l, "{name}"),
            }
        }
        // Counters that went backwards (a restart between snapshots) give 0, not a wrap.
        assert_eq!(earlier.delta(&later).commits, 0);
    }

    #[test]
    fn kinds_are_declared_as_in_the_table() {
        let kind = |name: &str| {
            Metrics::DESCRIPTORS
                .iter()
                .find(|d| d.name == name)
                .unwrap()
                .kind
        };
        for gauge in ["pages_data", "pages_free", "pages_dirty"] {
            assert_eq!(kind(gauge), MetricKind::Gauge);
        }
        let gauges = Metrics::DESCRIPTORS
            .iter()
            .filter(|d| d.kind == MetricKind::Gauge)
            .count();
        assert_eq!(gauges, 3);
    }

    #[test]
    fn snapshot_serializes_with_metric_names() {
        let m = Metrics::default();
        m.deadlocks.inc(2);
        let text = toml::to_string(&m.snapshot()).unwrap();
        assert!(text.contains("deadlocks = 2"), "{text}");
    }

    #[test]
    fn counters_are_shared_between_threads() {
        let m = std::sync::Arc::new(Metrics::default());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| m.lock_waits.inc(1)))
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(m.snapshot().lock_waits, 4000);
    }
}
