//! timeseries.csv: one row per second, a header naming every column, empty cells for values the
//! engine does not expose, and the run's config hash in every row so rows from several runs can
//! be concatenated and told apart. Per-kind columns follow the fixed ones
//! (`<kind>_count, <kind>_p95_ms, <kind>_p99_ms, <kind>_max_ms`). `read` parses the same format
//! back, so a report can be drawn again from a recorded series.

use std::fmt::Write as _;

use crate::error::{BenchError, BenchResult};
use crate::sampler::{KindInterval, SampleRow};

const FIXED: [&str; 29] = [
    "t_s",
    "phase",
    "excluded",
    "ops",
    "ops_all",
    "retries",
    "failed",
    "lat_p50_ms",
    "lat_p95_ms",
    "lat_p99_ms",
    "lat_max_ms",
    "checkpoint_age_bytes",
    "checkpoint_age_pct",
    "dirty_pct",
    "flushed_list_pages",
    "flushed_lru_pages",
    "flushed_sync_pages",
    "stall_ms",
    "pages_read",
    "pages_written",
    "cpu_pct",
    "rss_bytes",
    "io_read_bytes",
    "io_write_bytes",
    "dev_reads",
    "dev_writes",
    "dev_read_bytes",
    "dev_write_bytes",
    "size_bytes",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn cells(r: &SampleRow) -> [String; 29] {
    [
        r.t_s.to_string(),
        r.phase.clone(),
        u8::from(r.excluded).to_string(),
        r.ops.to_string(),
        r.ops_all.to_string(),
        r.retries.to_string(),
        r.failed.to_string(),
        format!("{:.3}", r.lat_p50_ms),
        format!("{:.3}", r.lat_p95_ms),
        format!("{:.3}", r.lat_p99_ms),
        format!("{:.3}", r.lat_max_ms),
        opt(r.checkpoint_age_bytes),
        opt(r.checkpoint_age_pct.map(|v| format!("{v:.2}"))),
        opt(r.dirty_pct.map(|v| format!("{v:.2}"))),
        opt(r.flushed_list_pages),
        opt(r.flushed_lru_pages),
        opt(r.flushed_sync_pages),
        opt(r.stall_ms.map(|v| format!("{v:.3}"))),
        opt(r.pages_read),
        opt(r.pages_written),
        format!("{:.1}", r.cpu_pct),
        r.rss_bytes.to_string(),
        r.io_read_bytes.to_string(),
        r.io_write_bytes.to_string(),
        opt(r.dev_reads),
        opt(r.dev_writes),
        opt(r.dev_read_bytes),
        opt(r.dev_write_bytes),
        opt(r.size_bytes),
    ]
}

/// The CSV text of `rows`, tagged with `config_hash`.
pub fn render(rows: &[SampleRow], config_hash: &str) -> String {
    let kinds: Vec<String> = rows
        .first()
        .map(|r| r.kinds.iter().map(|k| k.name.to_lowercase()).collect())
        .unwrap_or_default();
    let mut out = FIXED.join(",");
    for k in &kinds {
        let _ = write!(out, ",{k}_count,{k}_p95_ms,{k}_p99_ms,{k}_max_ms");
    }
    out.push_str(",config_hash\n");
    for r in rows {
        out.push_str(&cells(r).join(","));
        for k in &r.kinds {
            let _ = write!(
                out,
                ",{},{:.3},{:.3},{:.3}",
                k.count, k.p95_ms, k.p99_ms, k.max_ms
            );
        }
        let _ = writeln!(out, ",{config_hash}");
    }
    out
}

fn bad(line: usize, what: &str) -> BenchError {
    BenchError::Data(format!("timeseries.csv line {line}: {what}"))
}

/// Parse a timeseries.csv back into rows and the config hash of its first row.
pub fn read(text: &str) -> BenchResult<(Vec<SampleRow>, String)> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad(1, "empty"))?
        .split(',')
        .collect();
    if header.get(..FIXED.len()) != Some(&FIXED[..]) || header.last() != Some(&"config_hash") {
        return Err(bad(1, "not a timeseries.csv header"));
    }
    let kind_names: Vec<String> = header[FIXED.len()..header.len() - 1]
        .chunks(4)
        .map(|c| c[0].trim_end_matches("_count").to_uppercase())
        .collect();
    let mut rows = Vec::new();
    let mut hash = String::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != header.len() {
            return Err(bad(
                n,
                &format!("{} cells, header has {}", f.len(), header.len()),
            ));
        }
        let num = |j: usize| -> BenchResult<f64> {
            f[j].parse::<f64>()
                .map_err(|_| bad(n, &format!("bad number in {}", FIXED[j])))
        };
        let int = |j: usize| -> BenchResult<u64> {
            f[j].parse::<u64>()
                .map_err(|_| bad(n, &format!("bad integer in {}", FIXED[j])))
        };
        let oint = |j: usize| -> Option<u64> { f[j].parse().ok() };
        let onum = |j: usize| -> Option<f64> { f[j].parse().ok() };
        let mut kinds = Vec::new();
        for (k, name) in kind_names.iter().enumerate() {
            let at = FIXED.len() + 4 * k;
            let g = |j: usize| {
                f[at + j]
                    .parse::<f64>()
                    .map_err(|_| bad(n, "bad kind cell"))
            };
            kinds.push(KindInterval {
                name: name.clone(),
                count: g(0)? as u64,
                p95_ms: g(1)?,
                p99_ms: g(2)?,
                max_ms: g(3)?,
            });
        }
        if hash.is_empty() {
            hash = f[f.len() - 1].to_string();
        }
        rows.push(SampleRow {
            t_s: int(0)?,
            phase: f[1].to_string(),
            excluded: f[2] == "1",
            ops: int(3)?,
            ops_all: int(4)?,
            retries: int(5)?,
            failed: int(6)?,
            lat_p50_ms: num(7)?,
            lat_p95_ms: num(8)?,
            lat_p99_ms: num(9)?,
            lat_max_ms: num(10)?,
            kinds,
            checkpoint_age_bytes: oint(11),
            checkpoint_age_pct: onum(12),
            dirty_pct: onum(13),
            flushed_list_pages: oint(14),
            flushed_lru_pages: oint(15),
            flushed_sync_pages: oint(16),
            stall_ms: onum(17),
            pages_read: oint(18),
            pages_written: oint(19),
            cpu_pct: num(20)?,
            rss_bytes: int(21)?,
            io_read_bytes: int(22)?,
            io_write_bytes: int(23)?,
            dev_reads: oint(24),
            dev_writes: oint(25),
            dev_read_bytes: oint(26),
            dev_write_bytes: oint(27),
            size_bytes: oint(28),
        });
    }
    Ok((rows, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let row = SampleRow {
            t_s: 3,
            phase: "run".into(),
            ops: 10,
            ops_all: 22,
            lat_p95_ms: 1.5,
            dirty_pct: Some(12.25),
            kinds: vec![KindInterval {
                name: "NEW_ORDER".into(),
                count: 10,
                p95_ms: 1.5,
                p99_ms: 2.0,
                max_ms: 3.0,
            }],
            rss_bytes: 1000,
            ..SampleRow::default()
        };
        let text = render(&[row.clone(), row.clone()], "abcd");
        assert!(text.starts_with("t_s,phase,"));
        assert!(text.lines().nth(1).is_some_and(|l| l.ends_with(",abcd")));
        let (back, hash) = read(&text).expect("parse");
        assert_eq!(hash, "abcd");
        assert_eq!(back, vec![row.clone(), row]);
        assert!(read("nope\n1,2").is_err());
    }
}
