//! The report renders from a recorded time series (written as timeseries.csv and read back),
//! and its inline SVG parses as XML with the expected charts, counting `<svg>` charts and the
//! points of their polylines, and checking the layout rules: every chart's plot area spans the
//! same x range, the x axis ends at the run's last second, the warm-up is a labelled band,
//! legends stay inside the chart. `report_lays_out_in_headless_chromium` checks the same
//! rules on what a real browser draws (text widths measured, not estimated).

use evenkeel_bench::metrics::EngineInterval;
use evenkeel_bench::report::summary::Summary;
use evenkeel_bench::report::{csv, html, read_results, svg, write_results};
use evenkeel_bench::sampler::{KindInterval, SampleRow};

pub(crate) fn recorded() -> Vec<SampleRow> {
    (1..=60u64)
        .map(|t| SampleRow {
            t_s: t,
            interval_ms: 1_000.0,
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
            engine: EngineInterval {
                checkpoint_age_bytes: Some(t * 1_000_000),
                checkpoint_age_pct: Some(t as f64),
                dirty_pct: Some(40.0 + (t % 10) as f64),
                flush_policy: Some(if t <= 20 { "innodb55" } else { "steady" }.into()),
                flushed_list_pages: Some(200),
                flushed_lru_pages: Some(20),
                flushed_sync_pages: Some(if t == 31 || t == 32 { 500 } else { 0 }),
                flushed_log_space_pages: Some(if t == 50 { 64 } else { 0 }),
                flushed_pace_pages: Some(0),
                flushed_max_dirty_pages: Some(if t == 40 { 50 } else { 0 }),
                flushed_single_page_pages: Some(t % 2),
                stall_ms: Some(if t == 31 { 750.0 } else { 0.0 }),
                stall_sync_ms: Some(if t == 31 { 700.0 } else { 0.0 }),
                stall_log_space_ms: Some(0.0),
                stall_max_dirty_ms: Some(if t == 31 { 50.0 } else { 0.0 }),
                stall_free_frame_ms: Some(0.0),
                admission_delay_ms: Some(if t > 20 { 4.0 } else { 0.0 }),
                admission_delay_now_us: Some(if t > 20 { 100 } else { 0 }),
                write_concurrency: Some(2),
                room_wait_ms: Some(if t > 50 { 1.0 } else { 0.0 }),
                pages_read: Some(10),
                pages_written: Some(220),
                pages_redirtied_in_write: Some(3),
                evictions_by_user: Some(0),
                lock_waits: Some(12),
                lock_wait_ms: Some(1.5),
                read_ahead_pages: Some(64),
                read_ahead_evicted_unused: Some(t % 3),
                log_write_bytes: Some(2_000_000),
                log_fsyncs: Some(300),
                log_fsync_ms: Some(if t == 31 { 95.0 } else { 20.0 }),
                log_slow_fsyncs: Some(u64::from(t == 31)),
                purge_lag: Some(t % 5),
                change_buffer_inserts: Some(30),
                change_buffer_deletes: Some(t % 4),
                change_buffer_merged: Some(25),
                change_buffer_entries: Some(1000 + t),
                change_buffer_merges_by_read: Some(t % 7),
                change_buffer_merges_by_background: Some(2),
                change_buffer_full_skips: Some(if t > 20 { 40 } else { 0 }),
                change_buffer_cold_drops: Some(t % 3),
                change_buffer_pages: Some(100 + t / 2),
                doublewrite_copy_bytes: Some(1_200_000),
                doublewrite_copies_trimmed: Some(50),
                doublewrite_compressing: Some(if t > 10 { 1.0 } else { 0.0 }),
            },
            cpu_pct: 150.0,
            rss_bytes: 300_000_000,
            io_read_bytes: 4096 * 10,
            io_write_bytes: 16384 * 220,
            dev_reads: Some(10),
            dev_writes: Some(100),
            dev_read_bytes: Some(40_960),
            dev_write_bytes: Some(3_604_480),
            dev_wait_ms: Some(if t == 31 { 9_000 } else { 300 }),
            device_probe_ms: Some(if t == 31 { 400.0 } else { 2.0 }),
            host_mem_ns: Some(180.0 + (t % 4) as f64),
            size_bytes: Some(1_000_000_000),
            load_avg_1m: Some(1.5 + (t % 3) as f64),
            other_cpu_pct: Some(if (40..45).contains(&t) { 150.0 } else { 10.0 }),
            steal_pct: Some(if (40..45).contains(&t) { 100.0 } else { 0.0 }),
            event: (t == 20).then(|| "set adaptive_flushing=steady".into()),
        })
        .collect()
}

pub(crate) fn svgs(page: &str) -> Vec<&str> {
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
    let config = [
        ("evenkeel.checkpoint_async_point_pct", "88"),
        ("evenkeel.checkpoint_sync_point_pct", "94"),
        ("evenkeel.page_size", "4096"),
        ("evenkeel.buffer_pool_size", "64M"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let s = Summary::from_rows("tpcc", "evenkeel", config, "New-Order", &rows);
    assert_eq!(s.duration_s, 55.0);
    assert_eq!(s.sync_point_seconds, Some(2));
    assert_eq!(s.log_space_seconds, Some(1));
    assert_eq!(s.foreground_stall_s, Some(0.75));
    assert_eq!(s.flush_policy.as_deref(), Some("innodb55 -> steady"));
    assert!(s.admission_delay_s.is_some_and(|a| (a - 0.16).abs() < 1e-9));
    assert!(s.room_wait_s.is_some_and(|a| (a - 0.01).abs() < 1e-9));
    assert_eq!(s.zero_seconds, 3);
    assert_eq!(s.longest_zero_run, 3);
    assert_eq!(s.checkpoint_age_max_pct, Some(60.0));
    // the 3 zero seconds are holes against the 30 s rolling median too
    assert_eq!(s.detrended_seconds_below_half, 3);
    assert_eq!(s.detrended_min_over_mean, 0.0);
    let page = html::render(&s, &rows);
    assert!(page.contains("<th>p1/mean (30 s median)</th>"));
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
    // eleven, and the change buffer's (the rows have one)
    assert_eq!(charts.len(), 12);
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
            let height: f64 = root
                .attribute("height")
                .expect("height")
                .parse()
                .expect("h");
            assert!(pairs
                .iter()
                .all(|&(x, y)| (0.0..=860.0).contains(&x) && (0.0..=height).contains(&y)));
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
    assert!(titles.iter().any(|t| t == "Change buffer"));
    // without change-buffer figures (another engine) there is no such chart
    let mut bare = rows.clone();
    for r in &mut bare {
        r.engine.change_buffer_entries = None;
    }
    assert_eq!(svgs(&html::render(&s, &bare)).len(), 11);
    let chart = |title: &str| -> roxmltree::Document<'_> {
        let svg = charts
            .iter()
            .zip(&titles)
            .find(|(_, t)| t.as_str() == title)
            .map(|(svg, _)| *svg)
            .unwrap_or_else(|| panic!("no chart {title}"));
        roxmltree::Document::parse(svg).expect("parses")
    };
    let names = |doc: &roxmltree::Document<'_>| -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .filter_map(|n| n.children().find(|c| c.has_tag_name("title")))
            .filter_map(|n| n.text().map(str::to_string))
            .collect()
    };
    let texts = |doc: &roxmltree::Document<'_>| -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect()
    };
    let flushed = chart("Pages flushed per second by source");
    assert_eq!(
        names(&flushed),
        [
            "policy (flush list)",
            "LRU cleaning",
            "sync point (foreground)",
            "log space promised (foreground)",
            "paced commits (foreground)",
            "max dirty (foreground)",
            "single page (foreground)"
        ]
    );
    // The async and sync points as horizontal lines on the left (percent) axis.
    let age = chart("Checkpoint age and dirty pages");
    let refs: Vec<_> = age
        .descendants()
        .filter(|n| n.attribute("class") == Some("ref"))
        .collect();
    assert_eq!(refs.len(), 2, "async and sync point lines");
    for r in &refs {
        assert_eq!(r.attribute("y1"), r.attribute("y2"), "horizontal");
    }
    let t = texts(&age);
    assert!(t.iter().any(|x| x == "async point 88%"), "{t:?}");
    assert!(t.iter().any(|x| x == "sync point 94%"), "{t:?}");
    assert!(t.iter().any(|x| x == "checkpoint age, % of log capacity"));
    let stalls = chart("Foreground stalls and admission delay");
    assert_eq!(
        names(&stalls),
        [
            "stall: sync point",
            "stall: log space promised",
            "stall: max dirty",
            "stall: free frame",
            "admission delay",
            "of which room waits"
        ]
    );
    // The --at change is a vertical marker on the throughput chart, at second 20.
    let tput = chart("Throughput per second (New-Order)");
    let markers: Vec<_> = tput
        .descendants()
        .filter(|n| n.attribute("class") == Some("marker"))
        .collect();
    assert_eq!(markers.len(), 1);
    assert_eq!(
        markers[0].attribute("x1"),
        markers[0].attribute("x2"),
        "vertical"
    );
    assert!(texts(&tput)
        .iter()
        .any(|x| x == "set adaptive_flushing=steady"));
    assert!(page.contains("<h2>Flushing</h2>"));
    layout_rules_hold(&charts, &titles);
    // The machine beside the run: the CPU chart has the other processes and the load average.
    let cpu = chart("CPU: this process, other processes, the machine's load and the host's memory");
    assert_eq!(
        names(&cpu),
        [
            "this process",
            "other processes",
            "of it, hypervisor steal",
            "load average",
            "host memory: ns per dependent load"
        ]
    );
    assert!(texts(&cpu).iter().any(|x| x == "load average (right axis)"));
    assert!(texts(&cpu)
        .iter()
        .any(|x| x == "host memory: ns per dependent load (right axis)"));
    assert_eq!(s.other_cpu_pct_max, Some(150.0));
    assert_eq!(s.steal_pct_max, Some(100.0));
    // 5 of the 55 measured seconds at 100%: a mean (9.1%) under the warning threshold.
    let line = evenkeel_bench::report::summary::machine_line(&s);
    assert!(line.contains("stolen by the hypervisor mean"), "{line}");
    assert!(!line.contains("WARNING"), "{line}");
    let mut stolen = s.clone();
    stolen.steal_pct_mean = Some(25.0);
    let line = evenkeel_bench::report::summary::machine_line(&stolen);
    assert!(line.contains("WARNING: the hypervisor took 25%"), "{line}");
    assert!(s.load_avg_1m_mean.is_some_and(|l| (2.0..3.0).contains(&l)));
    // Every summary column is explained under the table.
    for (col, _) in evenkeel_bench::report::summary::seed002_columns(&s) {
        let note = evenkeel_bench::report::summary::column_note(col);
        assert!(note.is_some(), "column {col} has no note");
    }
    for (col, meaning) in [
        ("ips.av", "operations per second, mean"),
        ("r/i", "storage reads per operation"),
        ("Mcpu/i", "CPU microseconds of this process per operation"),
    ] {
        assert!(
            page.contains(&format!("<dt>{col}</dt><dd>{meaning}")),
            "note for {col}"
        );
    }
    // 10 pages of 4 KiB a second, all 40,960 bytes from storage, 1 GB of data in a 64 MiB pool.
    let io = s.io.as_ref().expect("io figures");
    assert_eq!(io.os_cache_read_pct, Some(0.0));
    assert_eq!(io.io_bound, Some(true));
    assert!(page.contains("<h2>IO and the machine</h2>"));
    assert!(
        page.contains(&svg::esc(&io.verdict())),
        "the verdict is on the page"
    );
}

/// The numbers of an element's attribute.
fn num(n: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("{attr} on {:?}", n.tag_name()))
        .parse()
        .unwrap_or_else(|_| panic!("{attr} is a number"))
}

/// The layout rules of every chart, read from the SVG: the same plot x range everywhere, the
/// x axis ends at the run's last second (60), the warm-up (seconds 0 to 5) is a labelled band,
/// and each legend entry's estimated width stays inside the chart.
fn layout_rules_hold(charts: &[&str], titles: &[String]) {
    let mut plots = Vec::new();
    for (svg, title) in charts.iter().zip(titles) {
        let doc = roxmltree::Document::parse(svg).expect("parses");
        let root = doc.root_element();
        let width = num(&root, "width");
        let plot = doc
            .descendants()
            .find(|n| n.attribute("class") == Some("plot"))
            .expect("plot area");
        let (px, pw) = (num(&plot, "x"), num(&plot, "width"));
        plots.push((px, pw));
        let right_edge = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .flat_map(|l| {
                l.attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|p| p.split_once(',')?.0.parse::<f64>().ok())
                    .collect::<Vec<_>>()
            })
            .fold(f64::MIN, f64::max);
        assert!(
            (right_edge - (px + pw)).abs() < 0.11,
            "{title}: the last second is the right edge of the plot ({right_edge} vs {})",
            px + pw
        );
        let band = doc
            .descendants()
            .find(|n| n.attribute("class") == Some("band"))
            .unwrap_or_else(|| panic!("{title}: a warm-up band"));
        assert!(
            (num(&band, "x") - px).abs() < 0.11,
            "{title}: band starts at 0"
        );
        let band_w = num(&band, "width");
        assert!(
            (band_w - pw * 5.0 / 60.0).abs() < 0.2,
            "{title}: band ends at second 5: {band_w}"
        );
        assert!(doc
            .descendants()
            .any(|n| n.attribute("class") == Some("band-label")
                && n.text() == Some("warm-up (not measured)")));
        for g in doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("legend"))
        {
            let t = g.children().find(|c| c.has_tag_name("text")).expect("text");
            let end = num(&t, "x") + svg::text_width(t.text().unwrap_or(""));
            assert!(
                end <= width,
                "{title}: legend {:?} ends at {end} > {width}",
                t.text()
            );
            assert!(
                num(&t, "y") <= num(&root, "height"),
                "{title}: legend below the chart"
            );
        }
    }
    assert!(
        plots.windows(2).all(|w| w[0] == w[1]),
        "every chart's plot area has the same x range: {plots:?}"
    );
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
        "foreground_stall_s",
        "admission_delay_s",
        "room_wait_s",
        "sync_point_seconds",
        "log_space_seconds",
        "flush_policy",
        "load_avg_1m_mean",
        "other_cpu_pct_mean",
        "steal_pct_mean",
        "io",
    ] {
        assert!(json.get(field).is_some(), "summary.json lacks {field}");
    }
    let (back, rows_back) = read_results(dir.path()).expect("read back");
    assert_eq!(back, s);
    assert_eq!(rows_back, rows);
}

/// Seconds in which the device probe took 100 ms or more are counted as device stalls, and the
/// device-ok figure leaves them out: a hole the storage made does not count against the engine
/// there, while the plain and detrended figures still show it.
#[test]
fn device_stalls_are_counted_and_set_apart() {
    let mut rows = recorded();
    for r in &mut rows {
        r.device_probe_ms = Some(if (30..33).contains(&r.t_s) {
            250.0
        } else {
            3.0
        });
    }
    let s = Summary::from_rows("tpcc", "evenkeel", Default::default(), "New-Order", &rows);
    assert_eq!(s.device_stall_seconds, Some(3));
    assert_eq!(s.detrended_p1_over_mean, 0.0, "the hole still shows");
    let ok = s.detrended_p1_over_mean_device_ok.expect("probed");
    assert!(
        ok > 0.9,
        "without the device's seconds the run is level: {ok}"
    );
    let line = evenkeel_bench::report::summary::stability_line("New-Order/s", &s);
    assert!(line.contains("the device stalled"), "{line}");
    // no probe, no figure
    for r in &mut rows {
        r.device_probe_ms = None;
    }
    let s = Summary::from_rows("tpcc", "evenkeel", Default::default(), "New-Order", &rows);
    assert_eq!(s.device_stall_seconds, None);
    assert_eq!(s.detrended_p1_over_mean_device_ok, None);
}

/// Seconds in which the host probe's loads ran 10% or more over their rolling median are the
/// host's slow seconds: the host-ok figure leaves them out, and the correlation says the
/// throughput followed the host. An engine whose line does not follow the host shows a low
/// correlation; a run without the probe's figures has none.
#[test]
fn the_hosts_slow_seconds_are_counted_and_set_apart() {
    let mut rows = recorded();
    let slow = |t: u64| (20..28).contains(&t);
    for r in &mut rows {
        r.ops = if slow(r.t_s) { 80 } else { 100 + r.t_s % 7 };
        r.host_mem_ns = Some(if slow(r.t_s) {
            300.0
        } else {
            200.0 + (r.t_s % 5) as f64
        });
    }
    let s = Summary::from_rows("insert", "evenkeel", Default::default(), "insert", &rows);
    assert_eq!(s.host_slow_seconds, Some(8));
    assert!(
        s.detrended_p1_over_mean < 0.85,
        "the dip shows: {}",
        s.detrended_p1_over_mean
    );
    let ok = s.detrended_p1_over_mean_host_ok.expect("probed");
    assert!(
        ok > 0.9,
        "without the host's slow seconds the run is level: {ok}"
    );
    let c = s.host_speed_correlation.expect("a correlation");
    assert!(c > 0.8, "the throughput followed the host: {c}");
    let line = evenkeel_bench::report::summary::stability_line("rows/s", &s);
    assert!(line.contains("the host's memory ran slow"), "{line}");
    // the same host under a line of its own
    for r in &mut rows {
        r.ops = 100 + r.t_s % 7;
    }
    let s = Summary::from_rows("insert", "evenkeel", Default::default(), "insert", &rows);
    let c = s.host_speed_correlation.expect("a correlation");
    assert!(c.abs() < 0.5, "a line of its own: {c}");
    // no probe, no figures
    for r in &mut rows {
        r.host_mem_ns = None;
    }
    let s = Summary::from_rows("insert", "evenkeel", Default::default(), "insert", &rows);
    assert_eq!(s.host_slow_seconds, None);
    assert_eq!(s.detrended_p1_over_mean_host_ok, None);
    assert_eq!(s.host_speed_correlation, None);
}
