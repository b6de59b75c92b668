//! `bench kv` end to end on a tiny evenkeel database: the report has a row per (workload,
//! threads) with non-zero figures, an IO-bound pool reads pages, a loaded `--dir` is reused,
//! and bad arguments are usage errors naming the argument.

use clap::Parser;
use evenkeel_bench::{run_bench, run_kv, BenchCommand, BenchError, KvArgs, KvReport};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn kv_args(args: &[&str]) -> KvArgs {
    let argv = ["bench", "kv"].into_iter().chain(args.iter().copied());
    match Bench::try_parse_from(argv).expect("parses").cmd {
        BenchCommand::Kv(a) => a,
        _ => panic!("not kv"),
    }
}

fn run(args: &[&str]) -> KvReport {
    let o = kv_args(args).options().expect("valid options");
    run_kv(&o).expect("kv runs")
}

#[test]
fn small_run_reports_every_point() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "--rows",
        "3000",
        "--threads",
        "1,2",
        "--seconds",
        "0.15",
        "--dir",
        d,
        "--set",
        "buffer_pool_size=4M",
        "--quiet",
    ];
    let r = run(&args);
    assert!(r.loaded);
    let names: Vec<(String, usize)> = r
        .rows
        .iter()
        .map(|x| (x.workload.clone(), x.threads))
        .collect();
    let want: Vec<(String, usize)> = [
        ("load", 1),
        ("get", 1),
        ("get", 2),
        ("put", 1),
        ("put", 2),
        ("scan", 1),
        ("scan", 2),
    ]
    .iter()
    .map(|(w, t)| (w.to_string(), *t))
    .collect();
    assert_eq!(names, want);
    for row in &r.rows {
        assert!(row.ops > 0 && row.ops_per_s > 0.0, "{row:?}");
        assert!(
            row.latency_us_p50 > 0.0 && row.latency_us_p99 >= row.latency_us_p50,
            "{row:?}"
        );
        assert!(row.rss_bytes > 0, "{row:?}");
        if row.workload == "put" || row.workload == "load" {
            // The flush after the loop writes what the puts dirtied.
            assert!(
                row.write_bytes_per_op > 0.0 && row.pages_written_per_op > 0.0,
                "{row:?}"
            );
        }
        if row.workload == "scan" {
            assert!(
                row.rows_per_s > row.ops_per_s,
                "scans return many rows: {row:?}"
            );
        }
        if row.workload == "get" {
            assert_eq!(row.write_bytes_per_op, 0.0, "gets write nothing: {row:?}");
        }
    }
    assert_eq!(r.memory.buffer_pool_bytes, 4 << 20);
    assert!(r.memory.rss_bytes > 0);

    // The same directory is reused without a load; another row count is refused.
    let again = run(&[
        "--rows",
        "3000",
        "--threads",
        "1",
        "--seconds",
        "0.05",
        "--dir",
        d,
        "--workloads",
        "get",
        "--quiet",
    ]);
    assert!(!again.loaded);
    assert_eq!(again.rows.len(), 1);
    let o = kv_args(&["--rows", "10", "--dir", d, "--quiet"])
        .options()
        .unwrap();
    match run_kv(&o) {
        Err(BenchError::Usage(m)) => assert!(m.contains("3000 rows"), "{m}"),
        other => panic!(
            "expected a usage error, got {:?}",
            other.map(|r| r.rows.len())
        ),
    }
}

/// The same points through the driver adapter: the model engine, which every build has.
#[test]
fn another_engine_runs_the_same_points_through_its_driver() {
    let r = run(&[
        "--engine",
        "model",
        "--rows",
        "2000",
        "--threads",
        "1,2",
        "--seconds",
        "0.1",
        "--quiet",
    ]);
    assert_eq!(r.engine, "model");
    assert!(r.loaded);
    let names: Vec<(&str, usize)> = r
        .rows
        .iter()
        .map(|x| (x.workload.as_str(), x.threads))
        .collect();
    assert_eq!(
        names,
        [
            ("load", 1),
            ("get", 1),
            ("get", 2),
            ("put", 1),
            ("put", 2),
            ("scan", 1),
            ("scan", 2)
        ]
    );
    for row in &r.rows {
        assert!(row.ops > 0 && row.ops_per_s > 0.0, "{row:?}");
        assert!(
            row.latency_us_p50 > 0.0 && row.latency_us_p99 >= row.latency_us_p50,
            "{row:?}"
        );
        assert_eq!(row.flush_seconds, 0.0, "no flush brackets a driver's point");
    }
    let scan = r.rows.iter().find(|x| x.workload == "scan").unwrap();
    assert!(scan.rows_per_s > scan.ops_per_s, "{scan:?}");
}

/// A peer keeps its table in --dir: the second run reuses it without a load.
#[cfg(feature = "sqlite")]
#[test]
fn a_peer_reuses_its_loaded_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = |w: &'static str| {
        [
            "--engine",
            "sqlite",
            "--rows",
            "2000",
            "--threads",
            "1",
            "--seconds",
            "0.05",
            "--workloads",
            w,
            "--dir",
            d,
            "--quiet",
        ]
    };
    let first = run(&args("put"));
    assert!(first.loaded);
    assert_eq!(first.engine, "sqlite");
    let again = run(&args("get"));
    assert!(!again.loaded);
    let get = &again.rows[0];
    assert!(get.workload == "get" && get.ops > 0, "{get:?}");
}

#[test]
fn small_pool_reads_pages_per_get() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // 64 frames of 4 KiB against ~20,000 rows: most gets miss the pool.
    let r = run(&[
        "--rows",
        "20000",
        "--threads",
        "1",
        "--seconds",
        "0.1",
        "--dir",
        d,
        "--workloads",
        "get",
        "--set",
        "page_size=4K",
        "--set",
        "buffer_pool_size=256K",
        "--quiet",
    ]);
    let get = r.rows.iter().find(|x| x.workload == "get").unwrap();
    assert!(get.pages_read_per_op > 0.3, "{get:?}");
}

fn usage(args: &[&str]) -> String {
    let argv = ["bench", "kv"].into_iter().chain(args.iter().copied());
    let cmd = Bench::try_parse_from(argv).expect("parses").cmd;
    match run_bench(&cmd) {
        Err(BenchError::Usage(m)) => m,
        Err(e) => panic!("expected a usage error for {args:?}, got {e}"),
        Ok(_) => panic!("expected a usage error for {args:?}"),
    }
}

#[test]
fn bad_arguments_are_named() {
    for (args, needle) in [
        (&["--threads", "0"][..], "--threads"),
        (&["--threads", "1,two"][..], "--threads"),
        (&["--workloads", "get,load"][..], "--workloads"),
        (&["--seconds", "0"][..], "--seconds"),
        (&["--seconds=-1"][..], "--seconds"),
        (&["--rows", "0"][..], "--rows"),
        (&["--batch", "0"][..], "--batch"),
        (&["--scan-len", "0"][..], "--scan-len"),
        (&["--preset", "disk"][..], "memory or io"),
        (&["--engine", "nosuch"][..], "unknown engine"),
        (
            &["--engine", "model", "--set", "page_size=4K"][..],
            "model engine",
        ),
        (
            &["--set", "buffer_pool_size"][..],
            "--set expects name=value",
        ),
        (
            &["--set", "buffer_pool_size=1K", "--rows", "10"][..],
            "buffer_pool_size",
        ),
        (
            &["--set", "no_such_knob=1", "--rows", "10"][..],
            "no_such_knob",
        ),
    ] {
        let m = usage(args);
        assert!(m.contains(needle), "{args:?}: {m}");
    }
}

#[test]
fn presets_set_rows_and_pool() {
    let o = kv_args(&["--preset", "io"]).options().unwrap();
    assert_eq!(o.rows, 9_000_000);
    assert_eq!(o.set, vec!["buffer_pool_size=16M".to_string()]);
    let o = kv_args(&[
        "--preset",
        "memory",
        "--rows",
        "5",
        "--set",
        "buffer_pool_size=64M",
    ])
    .options()
    .unwrap();
    assert_eq!(o.rows, 5);
    assert_eq!(
        o.set.last().map(String::as_str),
        Some("buffer_pool_size=64M")
    );
}
