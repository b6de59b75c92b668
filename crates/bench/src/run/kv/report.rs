//! What `bench kv` reports: one [`KvRow`] per (workload, threads), the load, and the memory
//! figure, as a text table or as JSON. The text spells out how the derived figures are
//! computed, since "bytes written per put" means little without it. Pure formatting: no
//! engine, no clock.

use serde::Serialize;

/// One measured point.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KvRow {
    /// load, get, put or scan.
    pub workload: String,
    pub threads: usize,
    /// Seconds of the timed loop (the final flush of put is not included).
    pub seconds: f64,
    /// Operations: rows loaded, gets, puts or scans.
    pub ops: u64,
    pub ops_per_s: f64,
    /// Rows returned or written per second (scans: rows returned).
    pub rows_per_s: f64,
    /// Latency of one timed unit: a get, a scan, or a commit (of `--batch` puts, of 1000 loaded rows).
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    /// Data-file bytes written per op, final flush included (`Status.io.write_bytes` delta / ops).
    pub write_bytes_per_op: f64,
    /// Pages written per op, final flush included (`Status.buffer.pages_written` delta / ops).
    pub pages_written_per_op: f64,
    /// Pages read from the data file per op (`Status.buffer.pages_read` delta / ops).
    pub pages_read_per_op: f64,
    /// Seconds of the flush after the loop (puts and load; 0 otherwise).
    pub flush_seconds: f64,
    /// VmRSS at the end of the point.
    pub rss_bytes: u64,
    /// Units timed into the latency figures: one in this many (gets are sampled).
    pub latency_sample_every: u64,
    /// evenkeel's adaptive hash index over a get point (None for other workloads, for a
    /// peer, or when `adaptive_hash_index` is off).
    pub adaptive_hash: Option<AdaptiveHashRow>,
}

/// The engine counters `adaptive_hash_hits`, `_misses` and `_failed_guesses` over one point
/// (deltas): every get is exactly one of them.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct AdaptiveHashRow {
    pub hits: u64,
    pub misses: u64,
    pub failed_guesses: u64,
}

impl AdaptiveHashRow {
    /// Hits over all gets the index was asked about, in percent (0 when none was).
    pub fn hit_pct(&self) -> f64 {
        let all = self.hits + self.misses + self.failed_guesses;
        100.0 * self.hits as f64 / all.max(1) as f64
    }
}

impl KvRow {
    /// A point's timing figures: `ops` and `rows` over `seconds`, latency quantiles from
    /// `latency_ns`; the I/O figures, the flush time and RSS are the caller's to fill.
    pub fn timed(
        workload: &str,
        threads: usize,
        seconds: f64,
        ops: u64,
        rows: u64,
        latency_ns: &hdrhistogram::Histogram<u64>,
    ) -> KvRow {
        let us = |q: f64| latency_ns.value_at_quantile(q) as f64 / 1000.0;
        KvRow {
            workload: workload.to_string(),
            threads,
            seconds,
            ops,
            ops_per_s: ops as f64 / seconds.max(1e-9),
            rows_per_s: rows as f64 / seconds.max(1e-9),
            latency_us_p50: us(0.5),
            latency_us_p99: us(0.99),
            write_bytes_per_op: 0.0,
            pages_written_per_op: 0.0,
            pages_read_per_op: 0.0,
            flush_seconds: 0.0,
            rss_bytes: 0,
            latency_sample_every: 1,
            adaptive_hash: None,
        }
    }
}

/// Process memory against the buffer pool.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Memory {
    /// Highest VmRSS seen at the end of a point.
    pub rss_bytes: u64,
    /// VmHWM (peak resident set) at the end of the run.
    pub rss_peak_bytes: u64,
    /// Bytes of buffer-pool frames (frames × page size, as the engine reports it).
    pub buffer_pool_bytes: u64,
    /// (rss_bytes − buffer_pool_bytes) / buffer_pool_bytes.
    pub beyond_pool_ratio: f64,
}

impl Memory {
    pub fn new(rss_bytes: u64, rss_peak_bytes: u64, buffer_pool_bytes: u64) -> Memory {
        let pool = buffer_pool_bytes.max(1) as f64;
        Memory {
            rss_bytes,
            rss_peak_bytes,
            buffer_pool_bytes,
            beyond_pool_ratio: (rss_bytes as f64 - buffer_pool_bytes as f64) / pool,
        }
    }
}

/// Everything a run found.
#[derive(Debug, Clone, Serialize)]
pub struct KvReport {
    /// The engine measured ("evenkeel" through its own API, or a peer through its driver).
    pub engine: String,
    pub rows_in_table: u64,
    pub data_file_bytes: u64,
    pub page_size: usize,
    pub scan_len: usize,
    pub put_batch: usize,
    /// True when the table was loaded by this run (false when `--dir` already held it).
    pub loaded: bool,
    pub rows: Vec<KvRow>,
    pub memory: Memory,
    /// Engine settings in effect.
    pub config: Vec<(String, String)>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The text table and its notes.
pub fn render(r: &KvReport) -> String {
    let mut s = format!(
        "kv on {}: {} rows of 16-byte keys and 100-byte values, page size {}, data {:.1} MiB\n\n",
        r.engine,
        r.rows_in_table,
        r.page_size,
        r.data_file_bytes as f64 / MIB
    );
    s.push_str(&format!(
        "{:<8}{:>4}{:>7}{:>13}{:>13}{:>10}{:>10}{:>12}{:>10}{:>10}{:>9}\n",
        "workload",
        "thr",
        "secs",
        "ops/s",
        "rows/s",
        "p50 us",
        "p99 us",
        "wbytes/op",
        "wpages/op",
        "rpages/op",
        "RSS MiB"
    ));
    for row in &r.rows {
        s.push_str(&format!(
            "{:<8}{:>4}{:>7.1}{:>13.0}{:>13.0}{:>10.2}{:>10.2}{:>12.1}{:>10.4}{:>10.4}{:>9.1}\n",
            row.workload,
            row.threads,
            row.seconds,
            row.ops_per_s,
            row.rows_per_s,
            row.latency_us_p50,
            row.latency_us_p99,
            row.write_bytes_per_op,
            row.pages_written_per_op,
            row.pages_read_per_op,
            row.rss_bytes as f64 / MIB,
        ));
    }
    s.push_str(&format!(
        "\nop = a loaded row, a get, a put, or a scan of up to {} rows (rows/s counts the rows \
         returned); latency is per get, per scan, per commit of {} put(s), per commit of 1000 \
         loaded rows.\n",
        r.scan_len, r.put_batch
    ));
    for row in r.rows.iter().filter(|row| row.latency_sample_every > 1) {
        s.push_str(&format!(
            "{} x{}: latency sampled, one {} in {} timed alone (every one counted in ops/s).\n",
            row.workload, row.threads, row.workload, row.latency_sample_every
        ));
    }
    for row in &r.rows {
        if let Some(a) = &row.adaptive_hash {
            s.push_str(&format!(
                "{} x{}: adaptive hash index: {} hits ({:.1}%), {} misses, {} failed guesses \
                 (adaptive_hash_hits / _misses / _failed_guesses over the point).\n",
                row.workload,
                row.threads,
                a.hits,
                a.hit_pct(),
                a.misses,
                a.failed_guesses
            ));
        }
    }
    if r.engine == "evenkeel" {
        s.push_str(
            "wbytes/op = data-file bytes written (Status.io.write_bytes) from a flush before the \
             loop to a flush after it, divided by ops, so write-back of every dirty page is \
             included; wpages/op likewise from Status.buffer.pages_written; rpages/op = \
             Status.buffer.pages_read delta / ops.\n",
        );
    } else {
        s.push_str(
            "wbytes/op = bytes the processes wrote to storage (/proc io, a server's included) \
             during the loop, divided by ops; no flush brackets a point, so write-back the \
             engine defers past the loop is not charged to it. wpages/op and rpages/op = the \
             engine's own page counters per op (0 where it exposes none).\n",
        );
    }
    let m = &r.memory;
    s.push_str(&format!(
        "memory: VmRSS {:.1} MiB (peak VmHWM {:.1} MiB), buffer_pool_size {:.1} MiB, \
         (RSS - pool) / pool = {:.1}%\n",
        m.rss_bytes as f64 / MIB,
        m.rss_peak_bytes as f64 / MIB,
        m.buffer_pool_bytes as f64 / MIB,
        100.0 * m.beyond_pool_ratio
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_pct_counts_every_get_once() {
        let a = AdaptiveHashRow {
            hits: 75,
            misses: 20,
            failed_guesses: 5,
        };
        assert!((a.hit_pct() - 75.0).abs() < 1e-9);
        assert_eq!(AdaptiveHashRow::default().hit_pct(), 0.0);
    }

    #[test]
    fn memory_ratio() {
        let m = Memory::new(110, 120, 100);
        assert!((m.beyond_pool_ratio - 0.1).abs() < 1e-9);
    }
}
