//! The sweep page: one row per run in iibench's columns plus the stability and flushing
//! figures (policy, max checkpoint age, mean dirty %, foreground stall, admission delay,
//! sync-point seconds: issue 4's per-policy table), and the runs' throughput overlaid per 1 s
//! and per 10 s, one colour per run, so a reader sees which setting keeps the line level (the search for a magic max_dirty_pages_pct, done in one page).
//! Below them, checkpoint age, dirty % and stall per second of every run that exposes them:
//! in an engine sweep, each engine's own reasons for its dips side by side.

use std::fmt::Write as _;

use super::html::{column_notes, table};
use super::summary::{seed002_columns, Summary};
use super::svg::{esc, Chart, Series};
use crate::sampler::SampleRow;
use crate::stability::windows;

/// One run of a sweep: its label (the varied setting) and results.
pub struct SweepRun {
    pub label: String,
    pub summary: Summary,
    pub rows: Vec<SampleRow>,
}

/// Plain-text table in iibench's layout (space-separated, engine column last).
pub fn text_table(runs: &[SweepRun]) -> String {
    let mut o = String::new();
    for (i, r) in runs.iter().enumerate() {
        let mut cols = seed002_columns(&r.summary);
        if let Some(last) = cols.last_mut() {
            last.1 = format!("{}.{}", r.summary.engine, r.label);
        }
        cols.insert(
            cols.len() - 1,
            ("cv", format!("{:.3}", r.summary.throughput_cv)),
        );
        cols.insert(
            cols.len() - 1,
            ("zero_s", r.summary.zero_seconds.to_string()),
        );
        let one = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        cols.insert(
            cols.len() - 1,
            ("ckpt%", one(r.summary.checkpoint_age_max_pct)),
        );
        cols.insert(
            cols.len() - 1,
            ("stall_s", one(r.summary.foreground_stall_s)),
        );
        // What else took the CPU: a run beside a busy neighbour (or a busy host) is not
        // comparable to its quiet neighbours in the table.
        cols.insert(
            cols.len() - 1,
            ("other%", one(r.summary.other_cpu_pct_mean)),
        );
        cols.insert(cols.len() - 1, ("steal%", one(r.summary.steal_pct_mean)));
        if i == 0 {
            let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
            let _ = writeln!(o, "{}", head.join(" "));
        }
        let vals: Vec<&str> = cols.iter().map(|c| c.1.as_str()).collect();
        let _ = writeln!(o, "{}", vals.join(" "));
    }
    o
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.2}"))
}

pub fn render(workload: &str, vary: &str, runs: &[SweepRun]) -> String {
    let mut o = String::new();
    let title = format!("evenkeel sweep {workload}: {vary}");
    let _ = write!(o, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{0}</title><style>body{{font-family:sans-serif;margin:24px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f3f3f3}}</style></head><body><h1>{0}</h1>", esc(&title));
    let mut head: Vec<&str> = vec!["run"];
    let mut rows = Vec::new();
    for r in runs {
        let cols = seed002_columns(&r.summary);
        if head.len() == 1 {
            head.extend(cols.iter().map(|c| c.0));
            head.extend([
                "mean/s",
                "p1/s",
                "min/s",
                "cv",
                "s < mean/2",
                "zero s",
                "p1/mean",
                "p1/mean (30 s median)",
                "s < 1/2 (30 s median)",
                "device stall s",
                "p1/mean (30 s median, device ok)",
                "host slow s",
                "p1/mean (30 s median, host ok)",
                "corr. with host memory",
                "tpmC",
                "flush policy",
                "max ckpt age %",
                "mean dirty %",
                "fg stall s",
                "admission s",
                "room wait s",
                "sync-point s",
                "log-space s",
                "other%",
                "steal%",
            ]);
        }
        let mut row = vec![r.label.clone()];
        row.extend(cols.into_iter().map(|c| c.1));
        let s = &r.summary;
        row.extend([
            format!("{:.1}", s.throughput_mean),
            format!("{:.1}", s.throughput_p1),
            format!("{:.1}", s.throughput_min),
            format!("{:.3}", s.throughput_cv),
            s.seconds_below_half_mean.to_string(),
            s.zero_seconds.to_string(),
            format!(
                "{:.2}",
                if s.throughput_mean > 0.0 {
                    s.throughput_p1 / s.throughput_mean
                } else {
                    0.0
                }
            ),
            format!("{:.2}", s.detrended_p1_over_mean),
            s.detrended_seconds_below_half.to_string(),
            s.device_stall_seconds
                .map_or("-".to_string(), |v| v.to_string()),
            s.detrended_p1_over_mean_device_ok
                .map_or("-".to_string(), |v| format!("{v:.2}")),
            s.host_slow_seconds
                .map_or("-".to_string(), |v| v.to_string()),
            opt(s.detrended_p1_over_mean_host_ok),
            opt(s.host_speed_correlation),
            s.tpmc.map_or("-".into(), |t| format!("{t:.0}")),
            s.flush_policy.clone().unwrap_or_else(|| "-".into()),
            opt(s.checkpoint_age_max_pct),
            opt(s.dirty_pct_mean),
            opt(s.foreground_stall_s),
            opt(s.admission_delay_s),
            opt(s.room_wait_s),
            s.sync_point_seconds
                .map_or("-".to_string(), |v| v.to_string()),
            s.log_space_seconds
                .map_or("-".to_string(), |v| v.to_string()),
            s.other_cpu_pct_mean
                .map_or("-".to_string(), |v| format!("{v:.1}")),
            s.steal_pct_mean
                .map_or("-".to_string(), |v| format!("{v:.1}")),
        ]);
        rows.push(row);
    }
    o.push_str(&table(&head, &rows, &[0]));
    o.push_str(&column_notes(&head));
    let op = runs
        .first()
        .map_or("ops".to_string(), |r| r.summary.op.clone());
    let mut c1 = Chart::new(
        &format!("Throughput per second ({op})"),
        "seconds",
        &format!("{op} / s"),
    );
    let mut c10 = Chart::new(
        &format!("Throughput per 10 seconds ({op})"),
        "seconds",
        &format!("{op} / 10 s"),
    );
    for r in runs {
        let s: Vec<f64> = r.rows.iter().map(|x| x.ops as f64).collect();
        c1 = c1.with(Series::new(
            &r.label,
            r.rows
                .iter()
                .map(|x| (x.t_s as f64, x.ops as f64))
                .collect(),
        ));
        let w = windows(&s, 10)
            .into_iter()
            .enumerate()
            .map(|(i, v)| ((i as f64 + 1.0) * 10.0, v))
            .collect();
        c10 = c10.with(Series::new(&r.label, w));
    }
    o.push_str(&c1.render());
    o.push_str(&c10.render());
    // Why each run stalled, in the terms its engine has: checkpoint age (evenkeel and InnoDB:
    // % of the redo capacity; SQLite: the WAL not yet checkpointed, % of wal_autocheckpoint),
    // dirty pages and stall. A run whose engine does not expose a series is marked "no data"
    // in that chart's legend.
    for (title, unit, pick) in [
        (
            "Checkpoint age (SQLite: WAL not yet checkpointed) % of log capacity",
            "%",
            (|x: &SampleRow| x.engine.checkpoint_age_pct) as fn(&SampleRow) -> Option<f64>,
        ),
        ("Dirty pages % of the pool", "%", |x: &SampleRow| {
            x.engine.dirty_pct
        }),
        ("Foreground stall ms per second", "ms", |x: &SampleRow| {
            x.engine.stall_ms
        }),
        (
            "Device probe: the slowest durable 4 KiB write of each second (100 ms or more: a device stall)",
            "ms",
            |x: &SampleRow| x.device_probe_ms,
        ),
        (
            "Host probe: the host's memory, ns per dependent load (a CPU-bound engine slows with it)",
            "ns",
            |x: &SampleRow| x.host_mem_ns,
        ),
    ] {
        let mut c = Chart::new(title, "seconds", unit);
        let mut any = false;
        for r in runs {
            let pts: Vec<(f64, f64)> = r
                .rows
                .iter()
                .filter_map(|x| pick(x).map(|v| (x.t_s as f64, v)))
                .collect();
            // Every run keeps its colour from the throughput charts; one without the series
            // says so in the legend.
            let name = if pts.is_empty() {
                format!("{} (no data)", r.label)
            } else {
                any = true;
                r.label.clone()
            };
            c = c.with(Series::new(&name, pts));
        }
        if any {
            o.push_str(&c.render());
        }
    }
    let _ = writeln!(
        o,
        "<h2>Table</h2><pre>{}</pre></body></html>",
        esc(&text_table(runs))
    );
    o
}
