//! The two kinds of metric cell, [`Counter`] and [`Gauge`], and the descriptor each table row
//! becomes.
//!
//! What must stay true: a counter only grows (its per-interval delta is its rate); a gauge is a
//! level whose delta is simply its later value. Updates are `Relaxed`: a metric is a statistic
//! read once a second, never a synchronisation point, so no code may rely on its ordering.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counter or gauge; decides what [`crate::metrics::MetricsSnapshot::delta`] does with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MetricKind {
    /// Only grows; a delta between two snapshots is the amount in the interval.
    Counter,
    /// A current level (pages dirty, pages free); a delta keeps the later value.
    Gauge,
}

/// One row of the metrics table, for listings and report headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDesc {
    pub name: &'static str,
    pub unit: &'static str,
    pub kind: MetricKind,
    pub doc: &'static str,
}

/// What both cells share; the table macro uses it to read a cell and to take deltas.
pub trait Metric {
    const KIND: MetricKind;
    fn get(&self) -> u64;
    /// The value a delta snapshot holds, given this metric's `later` and `earlier` readings.
    fn delta(later: u64, earlier: u64) -> u64;
}

/// A monotonically growing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
}

impl Metric for Counter {
    const KIND: MetricKind = MetricKind::Counter;
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    /// Saturating: snapshots taken across a restart (counters back at zero) give 0, not garbage.
    fn delta(later: u64, earlier: u64) -> u64 {
        later.saturating_sub(earlier)
    }
}

/// A level that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// Saturates at zero; going below zero is a bookkeeping bug, caught in debug builds.
    pub fn sub(&self, n: u64) {
        let before = self
            .0
            .fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)))
            .unwrap_or_else(|v| v);
        debug_assert!(before >= n, "gauge would go below zero: {before} - {n}");
    }
}

impl Metric for Gauge {
    const KIND: MetricKind = MetricKind::Gauge;
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    fn delta(later: u64, _earlier: u64) -> u64 {
        later
    }
}
