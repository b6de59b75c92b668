//! Per-operation-kind outcome counters and latency histograms. Each client thread owns one
//! `Recorder` behind its own mutex and records into it after every operation; the sampler
//! drains all of them once a second (merge, then reset, so nothing is allocated per second)
//! and merges each second into the longer aggregates it keeps (reporting interval, whole run).
//! Latencies are microseconds; anything above an hour is clamped into the top bucket.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency tracked exactly, in microseconds.
const LATENCY_MAX_US: u64 = 3_600_000_000;

fn new_histogram() -> Histogram<u64> {
    // Bounds and precision are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).unwrap_or_else(|_| unreachable!())
}

/// Counters and latencies of one operation kind.
#[derive(Clone)]
pub struct KindStats {
    /// Completed operations (a New-Order rolled back by its input counts here too).
    pub ok: u64,
    /// Completed operations that ended in a user rollback (subset of `ok`).
    pub rolled_back: u64,
    /// Retries after deadlocks or lock-wait timeouts.
    pub retries: u64,
    /// Operations abandoned after too many retries.
    pub failed: u64,
    pub latency_us: Histogram<u64>,
}

impl Default for KindStats {
    fn default() -> Self {
        KindStats {
            ok: 0,
            rolled_back: 0,
            retries: 0,
            failed: 0,
            latency_us: new_histogram(),
        }
    }
}

impl KindStats {
    pub fn merge(&mut self, o: &KindStats) {
        self.ok += o.ok;
        self.rolled_back += o.rolled_back;
        self.retries += o.retries;
        self.failed += o.failed;
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency_us.add(&o.latency_us);
    }

    pub fn reset(&mut self) {
        self.ok = 0;
        self.rolled_back = 0;
        self.retries = 0;
        self.failed = 0;
        self.latency_us.reset();
    }

    /// Latency at quantile `q` (0..=1) in milliseconds; 0 when nothing was recorded.
    pub fn ms(&self, q: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        self.latency_us.max() as f64 / 1000.0
    }

    pub fn mean_ms(&self) -> f64 {
        self.latency_us.mean() / 1000.0
    }

    pub fn summary(&self, name: &str) -> KindSummary {
        KindSummary {
            name: name.to_string(),
            count: self.ok,
            rolled_back: self.rolled_back,
            retries: self.retries,
            failed: self.failed,
            mean_ms: self.mean_ms(),
            p50_ms: self.ms(0.50),
            p90_ms: self.ms(0.90),
            p95_ms: self.ms(0.95),
            p99_ms: self.ms(0.99),
            p999_ms: self.ms(0.999),
            max_ms: self.max_ms(),
        }
    }
}

/// A serializable digest of one kind's statistics.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct KindSummary {
    pub name: String,
    pub count: u64,
    pub rolled_back: u64,
    pub retries: u64,
    pub failed: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// All kinds of one client (or an aggregate).
#[derive(Clone)]
pub struct Recorder {
    pub kinds: Vec<KindStats>,
}

impl Recorder {
    pub fn new(kinds: usize) -> Self {
        Recorder {
            kinds: vec![KindStats::default(); kinds],
        }
    }

    pub fn record_ok(&mut self, kind: usize, latency_us: u64, rolled_back: bool) {
        if let Some(k) = self.kinds.get_mut(kind) {
            k.ok += 1;
            k.rolled_back += u64::from(rolled_back);
            k.latency_us.saturating_record(latency_us.max(1));
        }
    }

    pub fn record_retry(&mut self, kind: usize) {
        if let Some(k) = self.kinds.get_mut(kind) {
            k.retries += 1;
        }
    }

    pub fn record_failed(&mut self, kind: usize) {
        if let Some(k) = self.kinds.get_mut(kind) {
            k.failed += 1;
        }
    }

    pub fn merge(&mut self, o: &Recorder) {
        for (a, b) in self.kinds.iter_mut().zip(&o.kinds) {
            a.merge(b);
        }
    }

    pub fn reset(&mut self) {
        self.kinds.iter_mut().for_each(KindStats::reset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_percentiles() {
        let mut a = Recorder::new(2);
        let mut b = Recorder::new(2);
        for us in 1..=100 {
            a.record_ok(0, us * 1000, false);
        }
        b.record_ok(0, 500_000, true);
        b.record_retry(1);
        a.merge(&b);
        assert_eq!(a.kinds[0].ok, 101);
        assert_eq!(a.kinds[0].rolled_back, 1);
        assert_eq!(a.kinds[1].retries, 1);
        assert!((a.kinds[0].ms(0.5) - 51.0).abs() < 0.5);
        assert!((a.kinds[0].max_ms() - 500.0).abs() < 1.0);
        a.reset();
        assert_eq!(a.kinds[0].ok, 0);
        assert_eq!(a.kinds[0].ms(0.99), 0.0);
    }
}
