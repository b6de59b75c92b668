//! report.html: one self-contained page (inline SVG and CSS, no scripts, no network) with the
//! seeds' graphs for one run — throughput per 1 s and per 10 s, checkpoint age (with the async
//! and sync points) and dirty % on two axes (as the InnoDB flushing studies draw them), pages flushed per second by source
//! (policy, LRU, sync point, max dirty, single page), foreground stalls by kind and admission
//! delay, MB/s read and written, page reads and read-ahead, redo written, latency percentiles,
//! CPU of this process beside the other processes' and the machine's load average — with the
//! warm-up shaded and labelled and a marker wherever a `--at` schedule changed an option —
//! followed by iibench's summary columns with what each means, whether the run was IO-bound
//! (and the reads and writes that say so), the machine beside the run, the stability and
//! flushing figures, the changes made while running, per-transaction or per-step tables, and
//! the full configuration.

use std::fmt::Write as _;

use super::summary::{column_note, seed002_columns, Summary};
use super::svg::{esc, Axis, Chart, Series};
use crate::sampler::SampleRow;
use crate::stability::windows;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}h2{margin-top:28px}.charts svg{display:block;margin:8px 0}dl.notes{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:90%}dl.notes dt{font-weight:bold}dl.notes dd{margin:0}";

fn pts(rows: &[SampleRow], f: impl Fn(&SampleRow) -> Option<f64>) -> Vec<(f64, f64)> {
    rows.iter()
        .filter_map(|r| f(r).map(|v| (r.t_s as f64, v)))
        .collect()
}

/// A table with a header row; `left` columns are left-aligned.
pub fn table(head: &[&str], rows: &[Vec<String>], left: &[usize]) -> String {
    let mut o = String::from("<table><tr>");
    for (i, h) in head.iter().enumerate() {
        let c = if left.contains(&i) {
            " class=\"l\""
        } else {
            ""
        };
        let _ = write!(o, "<th{c}>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for r in rows {
        o.push_str("<tr>");
        for (i, v) in r.iter().enumerate() {
            let c = if left.contains(&i) {
                " class=\"l\""
            } else {
                ""
            };
            let _ = write!(o, "<td{c}>{}</td>", esc(v));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    o
}

/// An engine option from the run's configuration (`<engine>.<name>`), as a number.
fn engine_option(s: &Summary, name: &str) -> Option<f64> {
    s.config
        .get(&format!("{}.{name}", s.engine))
        .and_then(|v| v.trim().parse().ok())
}

fn count(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// The charts of one run, in page order. Every time chart's x axis runs from 0 to the run's
/// last second, and carries the warm-up bands and a vertical marker for each `--at` change, at
/// the second after which it applied.
pub fn charts(s: &Summary, rows: &[SampleRow]) -> Vec<Chart> {
    let op = &s.op;
    let tput = Chart::new(
        &format!("Throughput per second ({op})"),
        "seconds",
        &format!("{op} / s"),
    )
    .with(Series::new(
        format!("{op}/s"),
        pts(rows, |r| Some(r.ops as f64)),
    ));
    let per10: Vec<f64> = rows.iter().map(|r| r.ops as f64).collect();
    let w10 = windows(&per10, 10)
        .into_iter()
        .enumerate()
        .map(|(i, v)| ((i as f64 + 1.0) * 10.0, v))
        .collect();
    let tput10 = Chart::new(
        &format!("Throughput per 10 seconds ({op})"),
        "seconds",
        &format!("{op} / 10 s"),
    )
    .with(Series::new(format!("{op} per 10 s"), w10));
    let age = checkpoint_chart(s, rows);
    let flushed = Chart::new("Pages flushed per second by source", "seconds", "pages / s")
        .with(Series::new(
            "policy (flush list)",
            pts(rows, |r| count(r.engine.flushed_list_pages)),
        ))
        .with(Series::new(
            "LRU cleaning",
            pts(rows, |r| count(r.engine.flushed_lru_pages)),
        ))
        .with(Series::new(
            "sync point (foreground)",
            pts(rows, |r| count(r.engine.flushed_sync_pages)),
        ))
        .with(Series::new(
            "log space promised (foreground)",
            pts(rows, |r| count(r.engine.flushed_log_space_pages)),
        ))
        .with(Series::new(
            "paced commits (foreground)",
            pts(rows, |r| count(r.engine.flushed_pace_pages)),
        ))
        .with(Series::new(
            "max dirty (foreground)",
            pts(rows, |r| count(r.engine.flushed_max_dirty_pages)),
        ))
        .with(Series::new(
            "single page (foreground)",
            pts(rows, |r| count(r.engine.flushed_single_page_pages)),
        ));
    let stalls = stall_chart(rows);
    let mb = |b: u64| b as f64 / 1_048_576.0;
    let io = Chart::new("Storage read and written", "seconds", "MB / s")
        .with(Series::new(
            "device write",
            pts(rows, |r| r.dev_write_bytes.map(mb)),
        ))
        .with(Series::new(
            "device read",
            pts(rows, |r| r.dev_read_bytes.map(mb)),
        ))
        .with(Series::new(
            "process write",
            pts(rows, |r| Some(mb(r.io_write_bytes))),
        ))
        .with(Series::new(
            "process read",
            pts(rows, |r| Some(mb(r.io_read_bytes))),
        ));
    let reads = Chart::new("Page reads and read-ahead", "seconds", "pages / s")
        .with(Series::new(
            "pages read",
            pts(rows, |r| count(r.engine.pages_read)),
        ))
        .with(Series::new(
            "read ahead",
            pts(rows, |r| count(r.engine.read_ahead_pages)),
        ))
        .with(Series::new(
            "read ahead, evicted unused",
            pts(rows, |r| count(r.engine.read_ahead_evicted_unused)),
        ));
    let redo = Chart::new("Redo log written", "seconds", "MB / s")
        .y2("fsyncs / s")
        .with(Series::new(
            "redo MB/s",
            pts(rows, |r| r.engine.log_write_bytes.map(mb)),
        ))
        .with(Series::new("fsyncs", pts(rows, |r| count(r.engine.log_fsyncs))).right());
    // A second whose throughput fell with these up was the device's, not the engine's: the
    // device's queue time counts every process's requests, the log fsync time what durable
    // commits waited.
    let device = Chart::new(
        "Waiting on the device",
        "seconds",
        "ms (per second for sums)",
    )
    .y2("slow log fsyncs / s")
    .with(Series::new(
        "probe: slowest durable 4 KiB write",
        pts(rows, |r| r.device_probe_ms),
    ))
    .with(Series::new(
        "device queue and service, all requests",
        pts(rows, |r| r.dev_wait_ms.map(|v| v as f64)),
    ))
    .with(Series::new(
        "log fsync",
        pts(rows, |r| r.engine.log_fsync_ms),
    ))
    .with(
        Series::new(
            "log fsyncs of 20 ms or more",
            pts(rows, |r| count(r.engine.log_slow_fsyncs)),
        )
        .right(),
    );
    let lat = Chart::new(&format!("Latency per second ({op})"), "seconds", "ms")
        .with(Series::new("p50", pts(rows, |r| Some(r.lat_p50_ms))))
        .with(Series::new("p95", pts(rows, |r| Some(r.lat_p95_ms))))
        .with(Series::new("p99", pts(rows, |r| Some(r.lat_p99_ms))))
        .with(Series::new("max", pts(rows, |r| Some(r.lat_max_ms))));
    // A CPU-bound engine runs at the speed of the memory it misses to: where the host's
    // memory slows (its load time up), such an engine's throughput falls with it.
    let mut cpu = Chart::new(
        "CPU: this process, other processes, the machine's load and the host's memory",
        "seconds",
        "CPU, % of one CPU",
    )
    .y2("load average (1 min); host memory, ns per load")
    .with(Series::new("this process", pts(rows, |r| Some(r.cpu_pct))))
    .with(Series::new(
        "other processes",
        pts(rows, |r| r.other_cpu_pct),
    ))
    .with(Series::new(
        "of it, hypervisor steal",
        pts(rows, |r| r.steal_pct),
    ))
    .with(Series::new("load average", pts(rows, |r| r.load_avg_1m)).right());
    if rows.iter().any(|r| r.host_mem_ns.is_some()) {
        cpu = cpu.with(
            Series::new(
                "host memory: ns per dependent load",
                pts(rows, |r| r.host_mem_ns),
            )
            .right(),
        );
    }
    let ibuf = change_buffer_chart(rows);
    let events: Vec<(f64, String)> = rows
        .iter()
        .filter_map(|r| r.event.as_ref().map(|e| (r.t_s as f64, e.clone())))
        .collect();
    let warmups = warmup_bands(s, rows);
    [
        tput, tput10, age, flushed, stalls, io, reads, redo, device, lat, cpu,
    ]
    .into_iter()
    .chain(ibuf)
    .map(|mut c| {
        if let Some(last) = rows.last() {
            c = c.x_end(last.t_s as f64);
        }
        for &(from, to) in &warmups {
            c = c.band(from, to, "warm-up (not measured)");
        }
        for (t, e) in &events {
            c = c.vline(*t, e.clone());
        }
        c
    })
    .collect()
}

/// The warm-up spans of the x axis: TPC-C's "warmup" phase at the start, and the first
/// `--warmup` seconds of each insert step that had one (its leading excluded rows).
fn warmup_bands(s: &Summary, rows: &[SampleRow]) -> Vec<(f64, f64)> {
    let mut bands: Vec<(f64, f64)> = rows
        .iter()
        .take_while(|r| r.phase == "warmup")
        .last()
        .map(|r| (0.0, r.t_s as f64))
        .into_iter()
        .collect();
    let warmup: Option<usize> = s.config.get("bench.warmup_s").and_then(|v| v.parse().ok());
    for st in s.steps.iter().filter(|st| st.warmup_s > 0.0) {
        let warmup_rows = warmup.unwrap_or(st.warmup_s.round() as usize);
        let Some(first) = rows.iter().position(|r| r.phase == st.step) else {
            continue;
        };
        // a row's t_s is the end of its second: the step starts where the row before ends
        let from = first.checked_sub(1).map_or(0.0, |i| rows[i].t_s as f64);
        let end = rows[first..]
            .iter()
            .take_while(|r| r.phase == st.step && r.excluded)
            .take(warmup_rows)
            .last()
            .map(|r| r.t_s as f64);
        if let Some(to) = end {
            bands.push((from, to));
        }
    }
    bands
}

/// Checkpoint age (% of log capacity, or MB when the engine has no capacity) with the async
/// and sync points from the engine's options, and dirty % on the right axis.
fn checkpoint_chart(s: &Summary, rows: &[SampleRow]) -> Chart {
    let pct = rows.iter().any(|r| r.engine.checkpoint_age_pct.is_some());
    let (series, label) = if pct {
        (
            Series::new(
                "checkpoint age %",
                pts(rows, |r| r.engine.checkpoint_age_pct),
            ),
            "checkpoint age, % of log capacity",
        )
    } else {
        (
            Series::new(
                "checkpoint age MB",
                pts(rows, |r| {
                    r.engine
                        .checkpoint_age_bytes
                        .map(|b| b as f64 / 1_048_576.0)
                }),
            ),
            "checkpoint age, MB",
        )
    };
    let mut c = Chart::new("Checkpoint age and dirty pages", "seconds", label)
        .y2("dirty pages %")
        .with(series)
        .with(Series::new("dirty %", pts(rows, |r| r.engine.dirty_pct)).right());
    if pct {
        for (name, label) in [
            ("checkpoint_async_point_pct", "async point"),
            ("checkpoint_sync_point_pct", "sync point"),
        ] {
            if let Some(v) = engine_option(s, name) {
                c = c.hline(v, Axis::Left, format!("{label} {v}%"));
            }
        }
    }
    c
}

/// Foreground stall by kind (or in total when the engine does not split it) and commit
/// admission delay, in milliseconds per second summed over threads.
fn stall_chart(rows: &[SampleRow]) -> Chart {
    let mut c = Chart::new(
        "Foreground stalls and admission delay",
        "seconds",
        "ms / s (summed over threads)",
    );
    let kinds = [
        ("stall: sync point", pts(rows, |r| r.engine.stall_sync_ms)),
        (
            "stall: log space promised",
            pts(rows, |r| r.engine.stall_log_space_ms),
        ),
        (
            "stall: max dirty",
            pts(rows, |r| r.engine.stall_max_dirty_ms),
        ),
        (
            "stall: free frame",
            pts(rows, |r| r.engine.stall_free_frame_ms),
        ),
    ];
    if kinds.iter().all(|(_, p)| p.is_empty()) {
        c = c.with(Series::new(
            "stall (all kinds)",
            pts(rows, |r| r.engine.stall_ms),
        ));
    } else {
        for (name, p) in kinds {
            c = c.with(Series::new(name, p));
        }
    }
    c.with(Series::new(
        "admission delay",
        pts(rows, |r| r.engine.admission_delay_ms),
    ))
    .with(Series::new(
        "of which room waits",
        pts(rows, |r| r.engine.room_wait_ms),
    ))
}

/// The change buffer, when the engine has one: changes buffered, merged and applied directly
/// per second, leaves merged by reads and by the background merge, and the tree's pages (its
/// size, bounded by change_buffer_max_size). An insert workload's throughput follows the mix
/// of buffered and direct changes, so this is where a wave in it is explained.
fn change_buffer_chart(rows: &[SampleRow]) -> Option<Chart> {
    if rows
        .iter()
        .all(|r| r.engine.change_buffer_entries.is_none())
    {
        return None;
    }
    Some(
        Chart::new("Change buffer", "seconds", "per second")
            .y2("pages of its tree")
            .with(Series::new(
                "changes buffered",
                pts(rows, |r| {
                    let (i, d) = (
                        r.engine.change_buffer_inserts?,
                        r.engine.change_buffer_deletes?,
                    );
                    Some((i + d) as f64)
                }),
            ))
            .with(Series::new(
                "changes merged",
                pts(rows, |r| count(r.engine.change_buffer_merged)),
            ))
            .with(Series::new(
                "changes applied directly (buffer near its limit)",
                pts(rows, |r| count(r.engine.change_buffer_full_skips)),
            ))
            .with(Series::new(
                "cold cached leaves dropped to buffer a change",
                pts(rows, |r| count(r.engine.change_buffer_cold_drops)),
            ))
            .with(Series::new(
                "leaves merged by reads",
                pts(rows, |r| count(r.engine.change_buffer_merges_by_read)),
            ))
            .with(Series::new(
                "leaves merged in the background",
                pts(rows, |r| count(r.engine.change_buffer_merges_by_background)),
            ))
            .with(
                Series::new(
                    "pages of its tree",
                    pts(rows, |r| count(r.engine.change_buffer_pages)),
                )
                .right(),
            ),
    )
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn stability_table(s: &Summary) -> String {
    let st = s.stability();
    let head = [
        "mean/s",
        "p1/s",
        "min/s",
        "max/s",
        "cv",
        "s < mean/2",
        "zero s",
        "longest zero run",
        "seconds",
        "p1/mean",
        "p1/mean (30 s median)",
        "min (30 s median)",
        "s < 1/2 (30 s median)",
    ];
    let row = vec![
        f2(st.mean),
        f2(st.p1),
        f2(st.min),
        f2(st.max),
        format!("{:.3}", st.cv),
        st.seconds_below_half_mean.to_string(),
        st.zero_seconds.to_string(),
        st.longest_zero_run.to_string(),
        st.seconds.to_string(),
        f2(if st.mean > 0.0 { st.p1 / st.mean } else { 0.0 }),
        f2(s.detrended_p1_over_mean),
        f2(s.detrended_min_over_mean),
        s.detrended_seconds_below_half.to_string(),
    ];
    table(&head, &[row], &[])
}

/// What the flushing cost: the per-policy flushing figures.
fn flushing_table(s: &Summary) -> String {
    let o = |v: Option<f64>| v.map_or("-".to_string(), f2);
    let head = [
        "flush policy",
        "max checkpoint age %",
        "mean dirty %",
        "foreground stall s",
        "admission delay s",
        "of which room waits s",
        "sync-point seconds",
        "log-space seconds",
    ];
    let row = vec![
        s.flush_policy.clone().unwrap_or_else(|| "-".into()),
        o(s.checkpoint_age_max_pct),
        o(s.dirty_pct_mean),
        o(s.foreground_stall_s),
        o(s.admission_delay_s),
        o(s.room_wait_s),
        s.sync_point_seconds
            .map_or("-".to_string(), |v| v.to_string()),
        s.log_space_seconds
            .map_or("-".to_string(), |v| v.to_string()),
    ];
    table(&head, &[row], &[0])
}

fn workload_tables(s: &Summary) -> String {
    let mut o = String::new();
    if let Some(tpmc) = s.tpmc {
        let _ = write!(
            o,
            "<h2>TPC-C</h2><p>tpmC {tpmc:.1} &middot; tpmTotal {:.1}</p>",
            s.tpm_total.unwrap_or(0.0)
        );
        let head = [
            "transaction",
            "count",
            "rolled back",
            "retries",
            "failed",
            "avg ms",
            "p50",
            "p90",
            "p95",
            "p99",
            "p99.9",
            "max",
        ];
        let rows: Vec<Vec<String>> = s
            .transactions
            .iter()
            .map(|k| {
                vec![
                    k.name.clone(),
                    k.count.to_string(),
                    k.rolled_back.to_string(),
                    k.retries.to_string(),
                    k.failed.to_string(),
                    f2(k.mean_ms),
                    f2(k.p50_ms),
                    f2(k.p90_ms),
                    f2(k.p95_ms),
                    f2(k.p99_ms),
                    f2(k.p999_ms),
                    f2(k.max_ms),
                ]
            })
            .collect();
        o.push_str(&table(&head, &rows, &[0]));
    }
    if !s.steps.is_empty() {
        o.push_str("<h2>Insert benchmark steps</h2>");
        let warmed = s.steps.iter().any(|st| st.warmup_s > 0.0);
        let rows: Vec<Vec<String>> = s
            .steps
            .iter()
            .map(|st| {
                let mut row = vec![
                    st.step.clone(),
                    st.rows.to_string(),
                    f2(st.seconds),
                    format!("{:.0}", st.ips_av),
                    format!("{:.0}", st.ips_99),
                ];
                if warmed {
                    row.push(st.warmup_note());
                }
                row
            })
            .collect();
        let mut head = vec!["step", "rows", "seconds", "ips.av", "ips.99"];
        if warmed {
            head.push("warmup (--warmup: run, not measured)");
        }
        o.push_str(&table(&head, &rows, &[0, 5]));
    }
    o
}

/// What each summary column means, as a definition list under the table.
pub fn column_notes(names: &[&str]) -> String {
    let mut o = String::from("<dl class=\"notes\">");
    for n in names {
        if let Some(d) = column_note(n) {
            let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", esc(n), esc(d));
        }
    }
    o.push_str("</dl>");
    o
}

/// Whether the run was IO-bound, the reads and writes behind it, and the machine beside it.
fn io_section(s: &Summary) -> String {
    let mut o = String::from("<h2>IO and the machine</h2>");
    let f1 = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    if let Some(io) = &s.io {
        let _ = write!(o, "<p class=\"verdict\">{}</p>", esc(&io.verdict()));
        let mib = |b: Option<u64>| {
            b.map_or("-".to_string(), |b| {
                format!("{:.0}", b as f64 / 1_048_576.0)
            })
        };
        let head = [
            "data MiB",
            "buffer pool MiB",
            "engine page reads/s",
            "engine read MB/s",
            "% of page reads from the OS cache",
            "process read MB/s",
            "process write MB/s",
            "device reads/s",
            "device read MB/s",
            "device writes/s",
            "device write MB/s",
        ];
        let row = vec![
            mib(io.data_bytes),
            mib(io.buffer_pool_bytes),
            io.engine_page_reads_per_s
                .map_or("-".into(), |v| format!("{v:.0}")),
            f1(io.engine_read_mb_per_s),
            f1(io.os_cache_read_pct),
            f1(Some(io.process_read_mb_per_s)),
            f1(Some(io.process_write_mb_per_s)),
            io.device_reads_per_s
                .map_or("-".into(), |v| format!("{v:.0}")),
            f1(io.device_read_mb_per_s),
            io.device_writes_per_s
                .map_or("-".into(), |v| format!("{v:.0}")),
            f1(io.device_write_mb_per_s),
        ];
        o.push_str(&table(&head, &[row], &[]));
        o.push_str(
            "<p>The process's figures count only its own reads and writes that reached storage \
             (/proc/self/io); the device's count every process on the device holding the data \
             and the file system's own writes (/proc/diskstats): device figures well above the \
             process's are someone else's I/O.</p>",
        );
    }
    let head = [
        "load average mean",
        "load average max",
        "other processes' CPU % mean",
        "other processes' CPU % max",
        "of it, hypervisor steal % mean",
        "hypervisor steal % max",
        "this process's CPU %",
    ];
    let row = vec![
        f1(s.load_avg_1m_mean),
        f1(s.load_avg_1m_max),
        f1(s.other_cpu_pct_mean),
        f1(s.other_cpu_pct_max),
        f1(s.steal_pct_mean),
        f1(s.steal_pct_max),
        f1(Some(s.cpu_pct)),
    ];
    o.push_str(&table(&head, &[row], &[]));
    o
}

/// Every engine metric of the sampled table the engine exposed, over the measured seconds.
fn engine_metrics_section(s: &Summary) -> String {
    if s.engine_metrics.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>Engine metrics</h2>");
    let num = |v: f64| {
        if v.abs() >= 100.0 || v == v.trunc() {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let rows: Vec<Vec<String>> = crate::metrics::METRICS
        .iter()
        .filter_map(|spec| {
            let f = s.engine_metrics.get(spec.column)?;
            Some(vec![
                spec.column.to_string(),
                f.unit.clone(),
                f.total.map_or("-".into(), num),
                num(f.mean),
                num(f.max),
                spec.meaning_line(),
            ])
        })
        .collect();
    o.push_str(&table(
        &[
            "metric",
            "unit",
            "total",
            "mean per s (gauge: mean)",
            "max",
            "meaning",
        ],
        &rows,
        &[0, 5],
    ));
    o
}

/// The whole page.
pub fn render(s: &Summary, rows: &[SampleRow]) -> String {
    let mut o = String::new();
    let title = format!("evenkeel bench {} on {}", s.workload, s.engine);
    let _ = write!(o, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>", esc(&title));
    let _ = write!(
        o,
        "<h1>{}</h1><p>config hash <code>{}</code> &middot; {:.0} s measured, {:.0} s excluded (warmup, partial seconds) &middot; {} {}</p>",
        esc(&title),
        esc(&s.config_hash),
        s.duration_s,
        s.warmup_s,
        s.ops,
        esc(&s.op)
    );
    o.push_str("<h2>Summary (iibench's columns)</h2>");
    let cols = seed002_columns(s);
    let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
    o.push_str(&table(
        &head,
        &[cols.iter().map(|c| c.1.clone()).collect()],
        &[cols.len() - 1],
    ));
    o.push_str(&column_notes(&head));
    o.push_str(&io_section(s));
    o.push_str("<h2>Stability of per-second throughput</h2>");
    o.push_str(&stability_table(s));
    o.push_str("<h2>Flushing</h2>");
    o.push_str(&flushing_table(s));
    if !s.events.is_empty() {
        o.push_str("<h2>Changes while running</h2>");
        let rows: Vec<Vec<String>> = s
            .events
            .iter()
            .map(|e| {
                vec![
                    e.t_s.to_string(),
                    format!("{} s", e.at_s),
                    e.action.clone(),
                    e.error.clone().unwrap_or_else(|| "applied".into()),
                ]
            })
            .collect();
        o.push_str(&table(
            &["run second", "measured", "change", "result"],
            &rows,
            &[2, 3],
        ));
    }
    o.push_str(&workload_tables(s));
    o.push_str("<h2>Charts</h2><div class=\"charts\">");
    for c in charts(s, rows) {
        o.push_str(&c.render());
    }
    o.push_str("</div>");
    o.push_str(&engine_metrics_section(s));
    o.push_str("<h2>Configuration</h2>");
    let cfg: Vec<Vec<String>> = s
        .config
        .iter()
        .map(|(k, v)| vec![k.clone(), v.clone()])
        .collect();
    o.push_str(&table(&["name", "value"], &cfg, &[0, 1]));
    o.push_str("</body></html>\n");
    o
}
