//! timeseries.csv: one row per second, a header naming every column, empty cells for values the
//! engine does not expose, and the run's config hash in every row so rows from several runs can
//! be concatenated and told apart. Per-kind columns follow the fixed ones
//! (`<kind>_count, <kind>_p95_ms, <kind>_p99_ms, <kind>_max_ms`). `read` parses the same format
//! back by column name, so a report can be drawn again from a recorded series, files written
//! before a column was added still read (the cell stays empty), and unknown columns are skipped.
//! Text cells (phase, flush policy, event) never hold a comma: commas become `;`.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::cell::Cell;
use crate::error::{BenchError, BenchResult};
use crate::metrics::{EngineColumn, ENGINE_COLUMNS};
use crate::sampler::{KindInterval, SampleRow};

/// One column of the row itself: its name, how to write it, how to read it into a row.
struct RowColumn {
    name: &'static str,
    get: fn(&SampleRow) -> String,
    put: fn(&mut SampleRow, &str) -> bool,
}

macro_rules! columns {
    ($list:ident: $($field:ident),* $(,)?) => {
        const $list: &[RowColumn] = &[$(
            RowColumn {
                name: stringify!($field),
                get: |r| Cell::to_cell(&r.$field),
                put: |r, s| match Cell::from_cell(s) {
                    Some(v) => {
                        r.$field = v;
                        true
                    }
                    None => false,
                },
            },
        )*];
    };
}

columns!(
    HEAD: t_s,
    phase,
    excluded,
    ops,
    ops_all,
    retries,
    failed,
    lat_p50_ms,
    lat_p95_ms,
    lat_p99_ms,
    lat_max_ms,
);

columns!(
    TAIL: interval_ms,
    cpu_pct,
    rss_bytes,
    io_read_bytes,
    io_write_bytes,
    dev_reads,
    dev_writes,
    dev_read_bytes,
    dev_write_bytes,
    dev_wait_ms,
    device_probe_ms,
    host_mem_ns,
    size_bytes,
    load_avg_1m,
    other_cpu_pct,
    steal_pct,
    event,
);

/// A fixed column: one of the row's own, or one of the engine's (crate::metrics' table).
#[derive(Clone, Copy)]
enum Column {
    Row(&'static RowColumn),
    Engine(&'static EngineColumn),
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Row(c) => c.name,
            Column::Engine(c) => c.name,
        }
    }

    fn get(self, r: &SampleRow) -> String {
        match self {
            Column::Row(c) => (c.get)(r),
            Column::Engine(c) => (c.get)(&r.engine),
        }
    }

    fn put(self, r: &mut SampleRow, s: &str) -> bool {
        match self {
            Column::Row(c) => (c.put)(r, s),
            Column::Engine(c) => (c.put)(&mut r.engine, s),
        }
    }
}

/// Every fixed column in file order: the row's head, the engine's, the row's tail.
fn columns() -> Vec<Column> {
    HEAD.iter()
        .map(Column::Row)
        .chain(ENGINE_COLUMNS.iter().map(Column::Engine))
        .chain(TAIL.iter().map(Column::Row))
        .collect()
}

/// The names of the fixed columns, in file order (the per-kind columns and config_hash follow).
pub fn column_names() -> Vec<&'static str> {
    columns().into_iter().map(Column::name).collect()
}

/// The CSV text of `rows`, tagged with `config_hash`.
pub fn render(rows: &[SampleRow], config_hash: &str) -> String {
    let kinds: Vec<String> = rows
        .first()
        .map(|r| r.kinds.iter().map(|k| k.name.to_lowercase()).collect())
        .unwrap_or_default();
    let columns = columns();
    let mut out = column_names().join(",");
    for k in &kinds {
        let _ = write!(out, ",{k}_count,{k}_p95_ms,{k}_p99_ms,{k}_max_ms");
    }
    out.push_str(",config_hash\n");
    for r in rows {
        let cells: Vec<String> = columns.iter().map(|c| c.get(r)).collect();
        out.push_str(&cells.join(","));
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

/// Where each known column sits in a header.
struct Layout {
    fixed: Vec<(usize, Column)>,
    /// Kind name (upper case) and the index of its `_count` column.
    kinds: Vec<(String, usize)>,
    hash: usize,
    width: usize,
}

fn layout(header: &[&str]) -> BenchResult<Layout> {
    let by_name: HashMap<&str, Column> = columns().into_iter().map(|c| (c.name(), c)).collect();
    let mut fixed = Vec::new();
    let mut kinds = Vec::new();
    let mut hash = None;
    let mut i = 0;
    while i < header.len() {
        let h = header[i];
        if let Some(c) = by_name.get(h) {
            fixed.push((i, *c));
        } else if h == "config_hash" {
            hash = Some(i);
        } else if let Some(k) = h.strip_suffix("_count") {
            let rest = ["_p95_ms", "_p99_ms", "_max_ms"].map(|s| format!("{k}{s}"));
            if header.get(i + 1..i + 4)
                == Some(&rest.iter().map(String::as_str).collect::<Vec<_>>()[..])
            {
                kinds.push((k.to_uppercase(), i));
                i += 3;
            }
        }
        i += 1;
    }
    let has = |n: &str| fixed.iter().any(|(_, c)| c.name() == n);
    match hash {
        Some(hash) if has("t_s") && has("ops") => Ok(Layout {
            fixed,
            kinds,
            hash,
            width: header.len(),
        }),
        _ => Err(bad(
            1,
            "not a timeseries.csv header (needs t_s, ops and config_hash)",
        )),
    }
}

/// Parse a timeseries.csv back into rows and the config hash of its first row.
pub fn read(text: &str) -> BenchResult<(Vec<SampleRow>, String)> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| bad(1, "empty"))?
        .split(',')
        .collect();
    let l = layout(&header)?;
    let mut rows = Vec::new();
    let mut hash = String::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != l.width {
            return Err(bad(
                n,
                &format!("{} cells, header has {}", f.len(), l.width),
            ));
        }
        let mut row = SampleRow::default();
        for &(j, c) in &l.fixed {
            if !c.put(&mut row, f[j]) {
                return Err(bad(n, &format!("bad value {:?} in {}", f[j], c.name())));
            }
        }
        for (name, at) in &l.kinds {
            let g = |j: usize| {
                f[at + j]
                    .parse::<f64>()
                    .map_err(|_| bad(n, &format!("bad cell in {}", header[at + j])))
            };
            row.kinds.push(KindInterval {
                name: name.clone(),
                count: g(0)? as u64,
                p95_ms: g(1)?,
                p99_ms: g(2)?,
                max_ms: g(3)?,
            });
        }
        if hash.is_empty() {
            hash = f[l.hash].to_string();
        }
        rows.push(row);
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
            engine: crate::metrics::EngineInterval {
                dirty_pct: Some(12.25),
                flush_policy: Some("steady".into()),
                flushed_max_dirty_pages: Some(7),
                stall_sync_ms: Some(0.5),
                ..Default::default()
            },
            event: Some("set io_capacity=400".into()),
            kinds: vec![KindInterval {
                name: "NEW_ORDER".into(),
                count: 10,
                p95_ms: 1.5,
                p99_ms: 2.0,
                max_ms: 3.0,
            }],
            rss_bytes: 1000,
            load_avg_1m: Some(1.25),
            other_cpu_pct: Some(37.5),
            steal_pct: Some(12.5),
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

    #[test]
    fn reads_older_layouts_and_escapes_commas() {
        // A file from before the flush-source columns: missing columns stay empty.
        let text = "t_s,phase,ops,dirty_pct,new_order_count,new_order_p95_ms,new_order_p99_ms,new_order_max_ms,config_hash\n1,run,5,3.5,5,1,2,3,h\n";
        let (rows, hash) = read(text).expect("parse");
        assert_eq!(hash, "h");
        assert_eq!(rows[0].ops, 5);
        assert_eq!(rows[0].engine.dirty_pct, Some(3.5));
        assert_eq!(rows[0].engine.flushed_max_dirty_pages, None);
        assert_eq!(rows[0].kinds[0].name, "NEW_ORDER");
        let row = SampleRow {
            event: Some("set a=1, set b=2".into()),
            ..SampleRow::default()
        };
        let (back, _) = read(&render(&[row], "h")).expect("parse");
        assert_eq!(back[0].event.as_deref(), Some("set a=1; set b=2"));
        let e = read("t_s,ops,config_hash\n1,x,h\n").expect_err("bad ops");
        assert!(e.to_string().contains("in ops"), "{e}");
    }
}
