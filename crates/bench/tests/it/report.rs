//! The report renders from a recorded time series (written as timeseries.csv and read back),
//! and its inline SVG parses as XML with the expected charts: this is the SVG-parse variant of
//! the check (no headless browser), counting `<svg>` charts and the points of their
//! polylines.

use evenkeel_bench::report::summary::Summary;
use evenkeel_bench::report::{csv, html, read_results, write_results};
use evenkeel_bench::sampler::{KindInterval, SampleRow};

fn recorded() -> Vec<SampleRow> {
    (1..=60u64)
        .map(|t| SampleRow {
            t_s: t,
            phase: if t <= 5 {
                "warmup".into()
            } else {
                "run".into()
            },
            excluded: t <= 5,
            ops: if (30..33).contains(&t) {
                0
            } else {
                100 + t % 7
            },
            ops_all: 230,
            retries: 0,
            failed: 0,
            lat_p50_ms: 1.0,
            lat_p95_ms: 3.0,
            lat_p99_ms: 5.0 + (t % 3) as f64,
            lat_max_ms: 9.0,
            kinds: vec![KindInterval {
                name: "NEW_ORDER".into(),
                count: 100,
                p95_ms: 3.0,
                p99_ms: 5.0,
                max_ms: 9.0,
            }],
            checkpoint_age_bytes: Some(t * 1_000_000),
            checkpoint_age_pct: Some(t as f64),
            dirty_pct: Some(40.0 + (t % 10) as f64),
            flushed_list_pages: Some(200),
            flushed_lru_pages: Some(20),
            flushed_sync_pages: Some(if t == 31 { 500 } else { 0 }),
            stall_ms: Some(0.0),
            pages_read: Some(10),
            pages_written: Some(220),
            cpu_pct: 150.0,
            rss_bytes: 300_000_000,
            io_read_bytes: 4096 * 10,
            io_write_bytes: 16384 * 220,
            dev_reads: Some(10),
            dev_writes: Some(100),
            dev_read_bytes: Some(40_960),
            dev_write_bytes: Some(3_604_480),
            size_bytes: Some(1_000_000_000),
        })
        .collect()
}

fn svgs(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("<svg") {
        let end = rest[at..]
            .find("</svg>")
            .map(|e| at + e + 6)
            .expect("closed svg");
        out.push(&rest[at..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn report_renders_from_recorded_series_and_svg_parses() {
    let text = csv::render(&recorded(), "0123456789abcdef");
    let (rows, hash) = csv::read(&text).expect("csv parses");
    assert_eq!(hash, "0123456789abcdef");
    let s = Summary::from_rows("tpcc", "model", Default::default(), "New-Order", &rows);
    assert_eq!(s.duration_s, 55.0);
    assert_eq!(s.zero_seconds, 3);
    assert_eq!(s.longest_zero_run, 3);
    assert_eq!(s.checkpoint_age_max_pct, Some(60.0));
    let page = html::render(&s, &rows);
    assert!(page.starts_with("<!DOCTYPE html>"));
    for fetch in ["<script", "<link", "src=", "<img"] {
        assert!(!page.contains(fetch), "self-contained: no {fetch}");
    }
    for col in [
        "ips.av", "ips.99", "wKB/i", "rKB/i", "r/i", "Mcpu/i", "size", "rss", "wMB/s", "cpu",
    ] {
        assert!(page.contains(&format!("<th>{col}</th>")), "column {col}");
    }
    let charts = svgs(&page);
    assert_eq!(charts.len(), 7);
    let mut titles = Vec::new();
    for svg in &charts {
        let doc = roxmltree::Document::parse(svg).expect("svg is well-formed XML");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        titles.push(
            root.children()
                .find(|n| n.has_tag_name("title"))
                .and_then(|n| n.text())
                .unwrap_or("")
                .to_string(),
        );
        let lines: Vec<_> = root
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .collect();
        assert!(
            !lines.is_empty(),
            "chart {} draws series",
            titles.last().map_or("", |t| t.as_str())
        );
        for l in lines {
            let pts = l.attribute("points").expect("points");
            let pairs: Vec<(f64, f64)> = pts
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').expect("x,y");
                    (x.parse().expect("x"), y.parse().expect("y"))
                })
                .collect();
            assert!(pairs.len() >= 6, "{} points", pairs.len());
            assert!(pairs
                .iter()
                .all(|&(x, y)| (0.0..=860.0).contains(&x) && (0.0..=320.0).contains(&y)));
            let stroke = l.attribute("stroke").expect("stroke");
            assert!(
                evenkeel_bench::report::svg::PALETTE.contains(&stroke),
                "Okabe-Ito colour {stroke}"
            );
        }
    }
    assert!(titles
        .iter()
        .any(|t| t.starts_with("Throughput per second")));
    assert!(titles
        .iter()
        .any(|t| t.starts_with("Throughput per 10 seconds")));
    assert!(titles.iter().any(|t| t == "Checkpoint age and dirty pages"));
    assert!(titles
        .iter()
        .any(|t| t == "Pages flushed per second by source"));
    // Two y axes on the checkpoint chart: the dirty series is labelled as the right axis.
    assert!(page.contains("dirty % (right axis)"));
}

#[test]
fn results_dir_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = recorded();
    let s = Summary::from_rows(
        "insert",
        "model",
        Default::default(),
        "rows inserted",
        &rows,
    );
    write_results(dir.path(), &s, &rows).expect("write");
    for f in ["summary.json", "timeseries.csv", "report.html"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("read"),
    )
    .expect("json");
    for field in [
        "workload",
        "engine",
        "config",
        "duration_s",
        "throughput_mean",
        "throughput_p1",
        "throughput_min",
        "throughput_cv",
        "seconds_below_half_mean",
        "zero_seconds",
        "checkpoint_age_max_pct",
        "dirty_pct_mean",
        "write_kb_per_op",
        "read_kb_per_op",
        "cpu_us_per_op",
        "size_bytes",
        "rss_bytes",
    ] {
        assert!(json.get(field).is_some(), "summary.json lacks {field}");
    }
    let (back, rows_back) = read_results(dir.path()).expect("read back");
    assert_eq!(back, s);
    assert_eq!(rows_back, rows);
}
