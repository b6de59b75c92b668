//! Was a run IO-bound? The figures that answer it, from the measured seconds of a run: the
//! data's size beside the buffer pool's, the pages the engine read (its buffer-pool misses)
//! beside the bytes this process's reads took from storage (/proc/self/io `read_bytes`, which
//! counts only reads that reached the block layer), and the device's reads and writes (all
//! processes on the device holding the data, so a neighbour shows up there and not in the
//! process's figures).
//!
//! The share of page reads served by the OS page cache is `1 - storage bytes / (page reads x
//! page size)`: with `flush_method=o_direct` every page read reaches the device (share 0); with
//! buffered I/O a data set that fits in the machine's memory is read from the page cache after
//! its first read (share near 100%), and the run measures memory copies, not storage.
//!
//! The verdict: IO-bound when the data is larger than the buffer pool and at least
//! [`STORAGE_SHARE_MIN_PCT`] of the engine's page reads reached storage. Nothing here reads
//! /proc: everything comes from the sample rows and the run's configuration.

use serde::{Deserialize, Serialize};

use crate::sampler::SampleRow;

/// The share of page reads that must reach storage for a run to count as IO-bound.
pub const STORAGE_SHARE_MIN_PCT: f64 = 50.0;

const MIB: f64 = 1_048_576.0;

/// The IO figures of a run's measured seconds; rates are per second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IoFigures {
    /// Bytes in the data directory at the end of the run.
    pub data_bytes: Option<u64>,
    /// The engine's buffer pool in bytes (from the run's configuration).
    pub buffer_pool_bytes: Option<u64>,
    /// The engine's page size in bytes (from the run's configuration).
    pub page_size_bytes: Option<u64>,
    /// Pages the engine read (buffer-pool misses and read-ahead).
    pub engine_page_reads_per_s: Option<f64>,
    /// Those pages' bytes.
    pub engine_read_mb_per_s: Option<f64>,
    /// Bytes this process's reads and writes took to or from storage (/proc/self/io).
    pub process_read_mb_per_s: f64,
    pub process_write_mb_per_s: f64,
    /// The device holding the data directory, all processes together (/proc/diskstats).
    pub device_reads_per_s: Option<f64>,
    pub device_read_mb_per_s: Option<f64>,
    pub device_writes_per_s: Option<f64>,
    pub device_write_mb_per_s: Option<f64>,
    /// Share of the engine's page-read bytes served by the OS page cache, %.
    pub os_cache_read_pct: Option<f64>,
    /// The verdict; `None` when the figures for it are missing (an in-memory engine).
    pub io_bound: Option<bool>,
}

/// A size as the engines' options write it: bytes, or a number with K, M, G or T (powers of
/// 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        'T' => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

impl IoFigures {
    /// The figures of `measured` rows; `page_size` and `buffer_pool` from the configuration,
    /// `data_bytes` the data directory's size at the end.
    pub fn from_rows(
        measured: &[&SampleRow],
        page_size: Option<u64>,
        buffer_pool: Option<u64>,
        data_bytes: Option<u64>,
    ) -> IoFigures {
        let secs = measured.len().max(1) as f64;
        let sum_opt = |f: &dyn Fn(&SampleRow) -> Option<u64>| -> Option<f64> {
            let v: Vec<u64> = measured.iter().filter_map(|r| f(r)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64)
        };
        let pages = sum_opt(&|r| r.engine.pages_read);
        let engine_bytes = pages.zip(page_size).map(|(p, s)| p * s as f64);
        let process_read: f64 = measured.iter().map(|r| r.io_read_bytes as f64).sum();
        let process_write: f64 = measured.iter().map(|r| r.io_write_bytes as f64).sum();
        let os_cache_read_pct = engine_bytes
            .filter(|&b| b > 0.0)
            .map(|b| (100.0 * (1.0 - process_read / b)).clamp(0.0, 100.0));
        let io_bound = match (data_bytes, buffer_pool, os_cache_read_pct) {
            (Some(d), Some(p), Some(cached)) => {
                Some(d > p && 100.0 - cached >= STORAGE_SHARE_MIN_PCT)
            }
            // The engine reports page reads but read none: the pool held what the run used.
            (Some(_), Some(_), None) if pages.is_some() => Some(false),
            _ => None,
        };
        IoFigures {
            data_bytes,
            buffer_pool_bytes: buffer_pool,
            page_size_bytes: page_size,
            engine_page_reads_per_s: pages.map(|p| p / secs),
            engine_read_mb_per_s: engine_bytes.map(|b| b / MIB / secs),
            process_read_mb_per_s: process_read / MIB / secs,
            process_write_mb_per_s: process_write / MIB / secs,
            device_reads_per_s: sum_opt(&|r| r.dev_reads).map(|v| v / secs),
            device_read_mb_per_s: sum_opt(&|r| r.dev_read_bytes).map(|v| v / MIB / secs),
            device_writes_per_s: sum_opt(&|r| r.dev_writes).map(|v| v / secs),
            device_write_mb_per_s: sum_opt(&|r| r.dev_write_bytes).map(|v| v / MIB / secs),
            os_cache_read_pct,
            io_bound,
        }
    }

    /// Why the verdict is what it is, in one clause.
    pub fn verdict(&self) -> String {
        let ratio = match (self.data_bytes, self.buffer_pool_bytes) {
            (Some(d), Some(p)) if p > 0 => Some(d as f64 / p as f64),
            _ => None,
        };
        match (self.io_bound, ratio, self.os_cache_read_pct) {
            (None, _, _) => "unknown (the engine reports no page reads or sizes)".into(),
            (Some(true), Some(r), Some(c)) => format!(
                "IO-bound: the data is {r:.1}x the buffer pool and {:.0}% of the engine's page \
                 reads reached storage",
                100.0 - c
            ),
            (Some(false), Some(r), _) if r <= 1.0 => format!(
                "not IO-bound: the data ({}) fits in the buffer pool ({})",
                mib(self.data_bytes),
                mib(self.buffer_pool_bytes)
            ),
            (Some(false), _, Some(c)) => format!(
                "not IO-bound: {c:.0}% of the engine's page reads were served by the OS page \
                 cache (use flush_method=o_direct, or data larger than the machine's memory)"
            ),
            (Some(_), _, _) => "not IO-bound: the engine read no pages".into(),
        }
    }

    /// The terminal's lines: the verdict, then the figures behind it (only the device's when
    /// the engine reports no page reads or sizes).
    pub fn lines(&self) -> String {
        if self.io_bound.is_none() {
            return format!(
                "io: {}\n    the device holding the data (all processes): {} reads/s, {} writes/s",
                self.verdict(),
                self.device_reads_per_s
                    .map_or("-".to_string(), |v| format!("{v:.0}")),
                self.device_writes_per_s
                    .map_or("-".to_string(), |v| format!("{v:.0}")),
            );
        }
        let f1 = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let f0 = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        format!(
            "io: {}\n    data {} in a {} buffer pool ({} pages); the engine read {} pages/s \
             ({} MB/s), {}% of them from the OS page cache\n    this process: read {:.1} \
             MB/s, wrote {:.1} MB/s from/to storage; the device holding the data (all \
             processes): {} reads/s ({} MB/s), {} writes/s ({} MB/s)",
            self.verdict(),
            mib(self.data_bytes),
            mib(self.buffer_pool_bytes),
            self.page_size_bytes
                .map_or("-".to_string(), |p| format!("{} KiB", p / 1024)),
            f0(self.engine_page_reads_per_s),
            f1(self.engine_read_mb_per_s),
            f1(self.os_cache_read_pct),
            self.process_read_mb_per_s,
            self.process_write_mb_per_s,
            f0(self.device_reads_per_s),
            f1(self.device_read_mb_per_s),
            f0(self.device_writes_per_s),
            f1(self.device_write_mb_per_s),
        )
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or("-".to_string(), |b| format!("{:.0} MiB", b as f64 / MIB))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pages_read: u64, io_read_bytes: u64) -> SampleRow {
        SampleRow {
            engine: crate::metrics::EngineInterval {
                pages_read: Some(pages_read),
                ..Default::default()
            },
            io_read_bytes,
            io_write_bytes: 2 * 1_048_576,
            dev_reads: Some(pages_read + 5),
            dev_read_bytes: Some(io_read_bytes + 4096),
            dev_writes: Some(100),
            dev_write_bytes: Some(3 * 1_048_576),
            dev_wait_ms: Some(250),
            device_probe_ms: Some(1.5),
            ..SampleRow::default()
        }
    }

    #[test]
    fn sizes_parse_as_the_options_write_them() {
        assert_eq!(parse_size("128M"), Some(128 << 20));
        assert_eq!(parse_size("16384"), Some(16384));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn reads_that_reach_storage_make_a_run_io_bound() {
        // 100 pages of 16 KiB a second, every byte from storage: o_direct.
        let rows = [row(100, 100 * 16384), row(100, 100 * 16384)];
        let m: Vec<&SampleRow> = rows.iter().collect();
        let f = IoFigures::from_rows(&m, Some(16384), Some(128 << 20), Some(400 << 20));
        assert_eq!(f.engine_page_reads_per_s, Some(100.0));
        assert_eq!(f.os_cache_read_pct, Some(0.0));
        assert_eq!(f.io_bound, Some(true));
        assert_eq!(f.process_write_mb_per_s, 2.0);
        assert_eq!(f.device_write_mb_per_s, Some(3.0));
        assert_eq!(f.device_reads_per_s, Some(105.0));
        assert!(
            f.verdict().starts_with("IO-bound: the data is 3.1x"),
            "{}",
            f.verdict()
        );
        let lines = f.lines();
        assert!(
            lines.contains("0.0% of them from the OS page cache"),
            "{lines}"
        );
        assert!(lines.contains("105 reads/s"), "{lines}");
    }

    #[test]
    fn reads_from_the_page_cache_or_a_pool_that_holds_the_data_are_not() {
        // Buffered I/O with the data in the OS cache: 1 page in 10 reaches storage.
        let rows = [row(100, 10 * 16384)];
        let m: Vec<&SampleRow> = rows.iter().collect();
        let f = IoFigures::from_rows(&m, Some(16384), Some(128 << 20), Some(400 << 20));
        assert_eq!(f.os_cache_read_pct, Some(90.0));
        assert_eq!(f.io_bound, Some(false));
        assert!(f
            .verdict()
            .contains("90% of the engine's page reads were served by the OS"));
        // All reads from storage, but the pool holds the data.
        let rows = [row(100, 100 * 16384)];
        let m: Vec<&SampleRow> = rows.iter().collect();
        let f = IoFigures::from_rows(&m, Some(16384), Some(1 << 30), Some(400 << 20));
        assert_eq!(f.io_bound, Some(false));
        assert!(
            f.verdict().contains("fits in the buffer pool"),
            "{}",
            f.verdict()
        );
        // An engine that reports no page reads: no verdict.
        let rows = [SampleRow::default()];
        let m: Vec<&SampleRow> = rows.iter().collect();
        let f = IoFigures::from_rows(&m, None, None, None);
        assert_eq!(f.io_bound, None);
        assert!(f.verdict().starts_with("unknown"));
    }
}
