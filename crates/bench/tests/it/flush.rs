//! Flushing figures and `--at` schedules on a tiny evenkeel database: the driver maps the
//! engine's status, a schedule changes the flush policy at the second asked for (seen in the
//! engine's own status, sampled into timeseries.csv), the new columns and charts are written,
//! a loaded directory is reused without reloading, and a sweep over a flush policy loads once.

use std::path::Path;

use clap::Parser;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::Driver;
use evenkeel_bench::report::csv;
use evenkeel_bench::{run_bench, run_sweep, BenchCommand, BenchError, SweepCommand};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

#[derive(Parser)]
struct Sweep {
    #[command(subcommand)]
    cmd: SweepCommand,
}

/// A small IO-bound-shaped TPC-C: tiny pool and log, small tables.
fn tpcc_args<'a>(dir: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "tpcc",
        "--warehouses",
        "1",
        "--items",
        "500",
        "--customers",
        "30",
        "--connections",
        "2",
        "--interval",
        "1",
        "--set",
        "buffer_pool_size=8M",
        "--set",
        "log_file_size=4M",
        "--quiet",
        "--json",
        "--dir",
        dir,
        "--out",
        out,
    ];
    v.extend_from_slice(extra);
    v
}

fn bench(args: &[&str]) -> BenchCommand {
    Bench::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .expect("parses")
        .cmd
}

#[test]
fn driver_maps_status_and_changes_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = EvenkeelDriver::open(dir.path(), None, &[]).expect("open");
    let s = d.stats();
    assert_eq!(s.flush_policy.as_deref(), Some("steady"));
    for v in [
        s.pages_flushed_list,
        s.pages_flushed_lru,
        s.pages_flushed_sync,
        s.pages_flushed_max_dirty,
        s.pages_flushed_single_page,
        s.stall_sync_us,
        s.stall_max_dirty_us,
        s.stall_free_frame_us,
        s.admission_delay_us,
        s.room_wait_us,
        s.pages_redirtied_in_write,
        s.read_ahead_pages,
        s.read_ahead_evicted_unused,
        s.log_bytes_written,
        s.log_fsyncs,
    ] {
        assert!(v.is_some());
    }
    assert!(s.checkpoint_age_pct.is_some() && s.dirty_pct.is_some());
    d.check_option("adaptive_flushing", "innodb80")
        .expect("dynamic");
    let e = d
        .check_option("buffer_pool_size", "1G")
        .expect_err("not dynamic");
    assert!(
        e.message.contains("adaptive_flushing"),
        "lists dynamic: {e}"
    );
    let e = d
        .check_option("adaptive_flushing", "fastest")
        .expect_err("bad value");
    assert!(e.message.contains("fastest"), "{e}");
    assert_eq!(
        d.stats().flush_policy.as_deref(),
        Some("steady"),
        "checks change nothing"
    );
    d.set_option("adaptive_flushing", "keep_average")
        .expect("set");
    assert_eq!(d.stats().flush_policy.as_deref(), Some("keep_average"));
    d.close().expect("close");
}

fn header(out: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(out.join("timeseries.csv")).expect("csv");
    text.lines()
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect()
}

#[test]
fn schedule_applies_at_its_second_and_dir_is_reused() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data").to_string_lossy().to_string();
    let out1 = root.path().join("r1");
    let o1 = out1.to_string_lossy().to_string();
    let args = tpcc_args(
        &dir,
        &o1,
        &[
            "--warmup",
            "1",
            "--duration",
            "4",
            "--at",
            "1s:set adaptive_flushing=fixed",
        ],
    );
    let r = run_bench(&bench(&args)).expect("run");
    // Second 1 is warmup; the change is due 1 s into the measured phase: after row t_s = 2.
    let policy: Vec<(u64, Option<&str>)> = r
        .rows
        .iter()
        .map(|x| (x.t_s, x.engine.flush_policy.as_deref()))
        .collect();
    assert_eq!(
        policy,
        [
            (1, Some("steady")),
            (2, Some("steady")),
            (3, Some("fixed")),
            (4, Some("fixed")),
            (5, Some("fixed"))
        ]
    );
    assert_eq!(
        r.rows[1].event.as_deref(),
        Some("set adaptive_flushing=fixed")
    );
    let s = &r.summary;
    assert_eq!(s.events.len(), 1);
    assert_eq!((s.events[0].t_s, s.events[0].at_s), (2, 1));
    assert!(s.events[0].error.is_none());
    assert_eq!(s.flush_policy.as_deref(), Some("steady -> fixed"));
    assert!(s.checkpoint_age_max_pct.is_some());
    assert!(s.foreground_stall_s.is_some() && s.sync_point_seconds.is_some());
    let h = header(&out1);
    for col in [
        "checkpoint_age_bytes",
        "checkpoint_age_pct",
        "dirty_pct",
        "flush_policy",
        "flushed_list_pages",
        "flushed_lru_pages",
        "flushed_sync_pages",
        "flushed_max_dirty_pages",
        "flushed_single_page_pages",
        "stall_ms",
        "stall_sync_ms",
        "stall_max_dirty_ms",
        "stall_free_frame_ms",
        "admission_delay_ms",
        "admission_delay_now_us",
        "write_concurrency",
        "room_wait_ms",
        "pages_redirtied_in_write",
        "read_ahead_pages",
        "read_ahead_evicted_unused",
        "log_write_bytes",
        "log_fsyncs",
        "event",
    ] {
        assert!(h.iter().any(|c| c == col), "timeseries.csv lacks {col}");
    }
    let text = std::fs::read_to_string(out1.join("timeseries.csv")).expect("csv");
    let (rows, _) = csv::read(&text).expect("reads back");
    let key = |x: &evenkeel_bench::sampler::SampleRow| {
        (
            x.t_s,
            x.engine.flush_policy.clone(),
            x.event.clone(),
            x.engine.flushed_sync_pages,
        )
    };
    assert_eq!(
        rows.iter().map(key).collect::<Vec<_>>(),
        r.rows.iter().map(key).collect::<Vec<_>>()
    );
    assert!(rows
        .iter()
        .all(|x| x.engine.flushed_max_dirty_pages.is_some()
            && x.engine.stall_free_frame_ms.is_some()
            && x.engine.log_write_bytes.is_some()));
    assert!(
        rows.iter().any(|x| x.engine.log_write_bytes > Some(0)),
        "redo was written"
    );
    let page = std::fs::read_to_string(out1.join("report.html")).expect("html");
    assert!(page.contains("async point 88%") && page.contains("sync point 94%"));
    assert!(page.contains("class=\"marker\""));

    // The same directory again: no reload, the earlier load's time is reported.
    let out2 = root.path().join("r2");
    let o2 = out2.to_string_lossy().to_string();
    let args = tpcc_args(&dir, &o2, &["--warmup", "0", "--duration", "1"]);
    let r2 = run_bench(&bench(&args)).expect("rerun");
    assert_eq!(r2.summary.load_seconds, r.summary.load_seconds);
    assert_eq!(r2.summary.flush_policy.as_deref(), Some("steady"));
}

#[test]
fn bad_schedules_fail_before_loading() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data");
    let d = dir.to_string_lossy().to_string();
    let o = root.path().join("out").to_string_lossy().to_string();
    for (at, expect) in [
        (
            "1s:set buffer_pool_size=1G",
            "cannot change while the database is open",
        ),
        ("1s:set adaptive_flushing=fastest", "fastest"),
        ("5s:set io_capacity=400", "not before the end"),
        ("5s:put io_capacity=400", "unknown action"),
    ] {
        let args = tpcc_args(&d, &o, &["--duration", "5", "--at", at]);
        match run_bench(&bench(&args)) {
            Err(BenchError::Usage(m)) => {
                assert!(m.contains(expect) && m.contains(at), "{at}: {m}")
            }
            Err(e) => panic!("{at}: expected a usage error, got {e}"),
            Ok(_) => panic!("{at}: accepted"),
        }
    }
    assert!(
        !root.path().join("out").exists(),
        "no results for a refused run"
    );
    let m = match run_bench(&bench(&["tpcc", "--engine", "model", "--at", "1s:set x=1"])) {
        Err(BenchError::Usage(m)) => m,
        other => panic!("expected a usage error, got {:?}", other.map(|_| ())),
    };
    assert!(m.contains("model engine cannot change options"), "{m}");
}

#[test]
fn sweep_over_a_policy_loads_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data");
    let d = dir.to_string_lossy().to_string();
    let out = root.path().join("sweep");
    let o = out.to_string_lossy().to_string();
    let mut args = vec!["sweep"];
    args.extend(tpcc_args(
        &d,
        &o,
        &[
            "--warmup",
            "0",
            "--duration",
            "1",
            "--vary",
            "adaptive_flushing=fixed,steady",
        ],
    ));
    let s = Sweep::try_parse_from(args).expect("parses");
    let r = run_sweep(&s.cmd).expect("sweep");
    assert_eq!(r.runs.len(), 2);
    assert!(
        dir.join("template").join("evenkeel.data").is_file(),
        "template kept"
    );
    for v in ["fixed", "steady"] {
        assert!(dir.join(format!("adaptive_flushing={v}")).is_dir());
    }
    let loads: Vec<_> = r.runs.iter().map(|x| x.summary.load_seconds).collect();
    assert_eq!(loads[0], loads[1], "both runs start from the one load");
    let policies: Vec<_> = r
        .runs
        .iter()
        .map(|x| x.summary.flush_policy.clone())
        .collect();
    assert_eq!(
        policies,
        [Some("fixed".to_string()), Some("steady".to_string())]
    );
    let page = std::fs::read_to_string(out.join("sweep.html")).expect("html");
    assert!(page.contains("max ckpt age %"));
}

#[test]
fn insert_applies_a_schedule_and_reuses_its_load() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data").to_string_lossy().to_string();
    let out = root.path().join("out").to_string_lossy().to_string();
    let run = |steps: &str, at: &str| {
        run_bench(&bench(&[
            "insert",
            "--clients",
            "2",
            "--rows",
            "3000",
            "--rows-i1",
            "100000",
            "--max-step-seconds",
            "3",
            "--steps",
            steps,
            "--set",
            "buffer_pool_size=8M",
            "--set",
            "log_file_size=4M",
            "--at",
            at,
            "--quiet",
            "--json",
            "--dir",
            &dir,
            "--out",
            &out,
        ]))
        .expect("insert run")
    };
    let r = run("l.i0,l.x,l.i1", "1s:set io_capacity=400");
    assert_eq!(r.summary.events.len(), 1);
    assert_eq!(r.summary.events[0].at_s, 1);
    assert!(r.summary.events[0].error.is_none());
    let marked: Vec<u64> = r
        .rows
        .iter()
        .filter(|x| x.event.is_some())
        .map(|x| x.t_s)
        .collect();
    // Insert steps tick on their own seconds: the change lands on the first tick at or after
    // 1 s, which is row 1 or 2.
    assert!(marked == [1] || marked == [2], "{marked:?}");
    // l.i1 alone on the same directory: the loaded rows are there, nothing is reloaded.
    let r2 = run("l.i1", "1s:set adaptive_flushing=innodb80");
    assert_eq!(r2.summary.steps.len(), 1);
    assert!(r2.summary.steps[0].rows > 0);
    assert_eq!(
        r2.rows
            .last()
            .and_then(|x| x.engine.flush_policy.as_deref()),
        Some("innodb80")
    );
}
