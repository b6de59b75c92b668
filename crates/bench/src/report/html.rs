//! report.html: one self-contained page (inline SVG and CSS, no scripts, no network) with the
//! seeds' graphs for one run — throughput per 1 s and per 10 s, checkpoint age and dirty % on two
//! axes (seed 000), pages flushed per second by source, MB/s read and written, latency
//! percentiles — followed by seed 002's summary columns, the stability figures, per-transaction
//! or per-step tables, and the full configuration.

use std::fmt::Write as _;

use super::summary::{seed002_columns, Summary};
use super::svg::{esc, Chart, Series};
use crate::sampler::SampleRow;
use crate::stability::windows;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}h2{margin-top:28px}.charts svg{display:block;margin:8px 0}";

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

/// The charts of one run, in page order.
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
    let ckpt = if rows.iter().any(|r| r.checkpoint_age_pct.is_some()) {
        Series::new("checkpoint age %", pts(rows, |r| r.checkpoint_age_pct))
    } else {
        Series::new(
            "checkpoint age MB",
            pts(rows, |r| {
                r.checkpoint_age_bytes.map(|b| b as f64 / 1_048_576.0)
            }),
        )
    };
    let age = Chart::new(
        "Checkpoint age and dirty pages",
        "seconds",
        "checkpoint age",
    )
    .y2("dirty pages %")
    .with(ckpt)
    .with(Series::new("dirty %", pts(rows, |r| r.dirty_pct)).right());
    let flushed = Chart::new("Pages flushed per second by source", "seconds", "pages / s")
        .with(Series::new(
            "flush list",
            pts(rows, |r| r.flushed_list_pages.map(|v| v as f64)),
        ))
        .with(Series::new(
            "LRU",
            pts(rows, |r| r.flushed_lru_pages.map(|v| v as f64)),
        ))
        .with(Series::new(
            "sync (foreground)",
            pts(rows, |r| r.flushed_sync_pages.map(|v| v as f64)),
        ));
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
    let lat = Chart::new(&format!("Latency per second ({op})"), "seconds", "ms")
        .with(Series::new("p50", pts(rows, |r| Some(r.lat_p50_ms))))
        .with(Series::new("p95", pts(rows, |r| Some(r.lat_p95_ms))))
        .with(Series::new("p99", pts(rows, |r| Some(r.lat_p99_ms))))
        .with(Series::new("max", pts(rows, |r| Some(r.lat_max_ms))));
    let cpu = Chart::new("CPU and stalls", "seconds", "CPU %")
        .y2("stall ms / s")
        .with(Series::new("cpu %", pts(rows, |r| Some(r.cpu_pct))))
        .with(Series::new("stall ms", pts(rows, |r| r.stall_ms)).right());
    vec![tput, tput10, age, flushed, io, lat, cpu]
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
    ];
    table(&head, &[row], &[])
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
        let rows: Vec<Vec<String>> = s
            .steps
            .iter()
            .map(|st| {
                vec![
                    st.step.clone(),
                    st.rows.to_string(),
                    f2(st.seconds),
                    format!("{:.0}", st.ips_av),
                    format!("{:.0}", st.ips_99),
                ]
            })
            .collect();
        o.push_str(&table(
            &["step", "rows", "seconds", "ips.av", "ips.99"],
            &rows,
            &[0],
        ));
    }
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
    o.push_str("<h2>Summary (seed 002's columns)</h2>");
    let cols = seed002_columns(s);
    let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
    o.push_str(&table(
        &head,
        &[cols.iter().map(|c| c.1.clone()).collect()],
        &[cols.len() - 1],
    ));
    o.push_str("<h2>Stability of per-second throughput</h2>");
    o.push_str(&stability_table(s));
    o.push_str(&workload_tables(s));
    o.push_str("<h2>Charts</h2><div class=\"charts\">");
    for c in charts(s, rows) {
        o.push_str(&c.render());
    }
    o.push_str("</div><h2>Configuration</h2>");
    let cfg: Vec<Vec<String>> = s
        .config
        .iter()
        .map(|(k, v)| vec![k.clone(), v.clone()])
        .collect();
    o.push_str(&table(&["name", "value"], &cfg, &[0, 1]));
    o.push_str("</body></html>\n");
    o
}
