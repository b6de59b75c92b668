//! The peers from the command line: an engine sweep loads one template per engine and puts
//! the engines in one table and one throughput chart; options are scoped with ENGINE:name and
//! checked for every engine before anything loads; the innodb server's life (a stale pid file
//! from a killed run, a second server on one datadir refused, a failed start showing its log).

use clap::Parser;
use evenkeel_bench::run::engine::EngineSpec;
use evenkeel_bench::{run_sweep, BenchError, SweepCommand};

#[derive(Parser)]
struct Sweep {
    #[command(subcommand)]
    cmd: SweepCommand,
}

fn sweep(args: &[&str]) -> SweepCommand {
    Sweep::try_parse_from(std::iter::once("sweep").chain(args.iter().copied()))
        .expect("parses")
        .cmd
}

/// The engines of this build's sweep test: evenkeel and every peer built in.
fn engines() -> Vec<&'static str> {
    let mut e = vec!["evenkeel"];
    if cfg!(feature = "innodb") {
        e.push("innodb");
    }
    if cfg!(feature = "rocksdb") {
        e.push("rocksdb");
    }
    if cfg!(feature = "sqlite") {
        e.push("sqlite");
    }
    if cfg!(feature = "lmdb") {
        e.push("lmdb");
    }
    e
}

#[test]
fn engine_sweep_puts_engines_side_by_side() {
    let out = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (o, d) = (
        out.path().to_string_lossy().to_string(),
        dir.path().to_string_lossy().to_string(),
    );
    let vary = format!("engine={}", engines().join(","));
    let cmd = sweep(&[
        "tpcc",
        "--vary",
        &vary,
        "-w",
        "1",
        "--items",
        "500",
        "--customers",
        "30",
        "-c",
        "2",
        "--duration",
        "2",
        "--warmup",
        "0",
        "--interval",
        "1",
        "--set",
        "buffer_pool_size=32M",
        "--set",
        "log_file_size=4M",
        "--set",
        "evenkeel:adaptive_flushing=steady",
        "--quiet",
        "--json",
        "--out",
        &o,
        "--dir",
        &d,
    ]);
    let r = run_sweep(&cmd).expect("engine sweep");
    assert_eq!(r.runs.len(), engines().len());
    for (run, engine) in r.runs.iter().zip(engines()) {
        assert_eq!(run.summary.engine, engine);
        assert!(run.summary.ops > 0, "{engine} ran no New-Order");
        assert!(
            dir.path().join(format!("template-{engine}")).is_dir(),
            "{engine} has no template of its own"
        );
    }
    let evenkeel = &r.runs[0].summary.config;
    assert_eq!(
        evenkeel
            .get("evenkeel.adaptive_flushing")
            .map(String::as_str),
        Some("steady"),
        "{evenkeel:?}"
    );
    let table = std::fs::read_to_string(out.path().join("sweep.txt")).expect("sweep.txt");
    for e in engines() {
        assert!(table.contains(&format!("{e}.engine={e}")), "{table}");
    }
    let page = std::fs::read_to_string(out.path().join("sweep.html")).expect("sweep.html");
    assert!(page.contains("Throughput per second"));
    assert!(page.contains("Checkpoint age"), "no stall-reason chart");
}

#[test]
fn insert_engine_sweep_runs_every_engine() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let vary = format!("engine={}", engines().join(","));
    let cmd = sweep(&[
        "insert",
        "--vary",
        &vary,
        "-c",
        "2",
        "--rows",
        "400",
        "--rows-i1",
        "200",
        "--steps",
        "l.i0,l.x,l.i1",
        "--set",
        "buffer_pool_size=32M",
        "--quiet",
        "--json",
        "--out",
        &o,
    ]);
    let r = run_sweep(&cmd).expect("insert engine sweep");
    assert_eq!(r.runs.len(), engines().len());
    for (run, engine) in r.runs.iter().zip(engines()) {
        assert_eq!(run.summary.engine, engine);
        // A step this short may fit in one partial second: count every sampled row.
        let rows: u64 = run.rows.iter().map(|r| r.ops_all).sum();
        assert!(rows > 0, "{engine} inserted nothing");
        assert!(
            out.path().join(format!("load-{engine}")).is_dir(),
            "{engine} did not load its own template"
        );
    }
}

#[test]
fn engine_options_are_checked_before_loading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_string_lossy().to_string();
    let cmd = sweep(&[
        "tpcc",
        "--vary",
        "engine=evenkeel,nosuch",
        "--dir",
        &d,
        "--quiet",
    ]);
    match run_sweep(&cmd) {
        Err(BenchError::Usage(m)) => assert!(m.contains("nosuch"), "{m}"),
        other => panic!("expected a usage error, got {:?}", other.err()),
    }
    assert!(
        !dir.path().join("template-evenkeel").exists(),
        "loaded first"
    );
    let spec = EngineSpec {
        engine: "evenkeel".into(),
        config: None,
        set: vec!["nosuch:x=1".into()],
    };
    let e = spec.pairs().expect_err("unknown scope").to_string();
    assert!(e.contains("nosuch"), "{e}");
}

#[cfg(feature = "innodb")]
mod innodb {
    use super::*;
    use evenkeel_bench::run::engine::open_driver;

    fn spec(set: &[&str]) -> EngineSpec {
        EngineSpec {
            engine: "innodb".into(),
            config: None,
            set: set.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn message(r: Result<Box<dyn evenkeel_bench::driver::Driver>, BenchError>) -> String {
        match r {
            Ok(_) => panic!("opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn refuses_what_innodb_cannot_mean_before_starting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = message(open_driver(
            &spec(&["adaptive_flushing=steady"]),
            dir.path(),
        ));
        assert!(m.contains("innodb") && m.contains("steady"), "{m}");
        let m = message(open_driver(
            &spec(&["checkpoint_sync_point_pct=90"]),
            dir.path(),
        ));
        assert!(m.contains("innodb engine has no equivalent"), "{m}");
        assert!(!dir.path().join("mariadb").exists(), "started anyway");
    }

    #[test]
    fn server_life_stale_pid_second_server_failed_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let set = ["buffer_pool_size=16M", "log_file_size=2M"];
        let d = open_driver(&spec(&set), dir.path()).expect("start");
        let t = d.open_table("t", true).expect("table");
        let mut x = d.begin().expect("begin");
        x.put(t, b"k", b"v").expect("put");
        x.commit().expect("commit");
        // A second server on the same datadir is refused while the first runs.
        let m = message(open_driver(&spec(&set), dir.path()));
        assert!(m.contains("already running"), "{m}");
        let pid = d.server_pid().expect("pid");
        let cnf = std::fs::read_to_string(dir.path().join("mariadb/my.cnf")).expect("my.cnf");
        assert!(cnf.contains("innodb_buffer_pool_size = 16777216"), "{cnf}");
        // Redo capacity: 2 files of 2 MiB, as evenkeel counts it, in MariaDB's one file.
        assert!(cnf.contains("innodb_log_file_size = 4194304"), "{cnf}");
        assert!(cnf.contains("innodb_log_buffer_size = 1048576"), "{cnf}");
        assert!(cnf.contains("skip-networking"), "{cnf}");
        d.close().expect("clean shutdown");
        drop(d);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "server still running after close"
        );
        // A killed run leaves a pid file naming a dead process and a socket file.
        let root = dir.path().join("mariadb");
        std::fs::write(root.join("mariadbd.pid"), "999999\n").expect("stale pid");
        std::fs::write(root.join("mariadbd.sock"), "").expect("stale socket");
        let d = open_driver(&spec(&set), dir.path()).expect("start over a stale pid file");
        let t = d.open_table("t", false).expect("table");
        let mut x = d.begin().expect("begin");
        assert_eq!(x.get(t, b"k").expect("get"), Some(b"v".to_vec()));
        drop(x);
        d.close().expect("close");
        drop(d);
        // The page size is fixed at create: a different one fails to start, with the log.
        let m = message(open_driver(&spec(&["page_size=4K"]), dir.path()));
        assert!(m.contains("last lines of"), "{m}");
        assert!(m.to_ascii_lowercase().contains("page"), "{m}");
    }
}
