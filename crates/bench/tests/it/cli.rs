//! The command-line surface: arguments parse as the `evenkeel` binary will mount them, bad
//! values give errors that name the argument, and small end-to-end runs on the model engine
//! write the results directory.

use clap::Parser;
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

fn bench(args: &[&str]) -> BenchCommand {
    Bench::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .expect("parses")
        .cmd
}

fn usage_error(args: &[&str]) -> String {
    match run_bench(&bench(args)) {
        Err(BenchError::Usage(m)) => m,
        Err(e) => panic!("expected a usage error, got {e}"),
        Ok(_) => panic!("expected a usage error for {args:?}"),
    }
}

#[test]
fn bad_arguments_are_named() {
    let m = usage_error(&["tpcc", "--engine", "model", "--mix", "fast"]);
    assert!(
        m.contains("--mix") && m.contains("tpcc-mysql or spec"),
        "{m}"
    );
    let m = usage_error(&["tpcc", "--engine", "model", "--warehouses", "0"]);
    assert!(m.contains("--warehouses"), "{m}");
    let m = usage_error(&["tpcc", "--engine", "model", "--connections", "0"]);
    assert!(m.contains("--connections"), "{m}");
    let m = usage_error(&["tpcc", "--engine", "nosuch"]);
    assert!(
        m.contains("unknown engine") && m.contains("evenkeel"),
        "{m}"
    );
    let m = usage_error(&["tpcc", "--engine", "model", "--set", "buffer_pool_size"]);
    assert!(m.contains("--set expects name=value"), "{m}");
    let m = usage_error(&[
        "tpcc",
        "--engine",
        "model",
        "--config",
        "/nonexistent/evenkeel.toml",
    ]);
    assert!(m.contains("--config"), "{m}");
    let m = usage_error(&["insert", "--engine", "model", "--steps", "l.i0,l.i9"]);
    assert!(m.contains("--steps") && m.contains("l.i9"), "{m}");
    let m = usage_error(&["insert", "--engine", "model", "--clients", "0"]);
    assert!(m.contains("--clients"), "{m}");
    // clap itself rejects non-numbers, naming the argument.
    let e = Bench::try_parse_from(["bench", "tpcc", "--warehouses", "many"])
        .err()
        .expect("error");
    assert!(e.to_string().contains("--warehouses"), "{e}");
    let s = Sweep::try_parse_from(["sweep", "tpcc", "--engine", "model", "--vary", "nothing"])
        .expect("parses");
    match run_sweep(&s.cmd) {
        Err(BenchError::Usage(m)) => assert!(m.contains("--vary expects name=v1,v2"), "{m}"),
        _ => panic!("expected a usage error for --vary"),
    }
}

#[test]
fn tpcc_end_to_end_on_the_model() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().join("run");
    let o_s = o.to_string_lossy().to_string();
    let args = [
        "tpcc",
        "--engine",
        "model",
        "--warehouses",
        "1",
        "--connections",
        "2",
        "--duration",
        "2",
        "--warmup",
        "1",
        "--interval",
        "1",
        "--items",
        "500",
        "--customers",
        "30",
        "--quiet",
        "--json",
        "--out",
        &o_s,
    ];
    let r = run_bench(&bench(&args)).expect("run");
    assert_eq!(r.summary.workload, "tpcc");
    assert!(r.summary.tpmc.is_some_and(|t| t > 0.0));
    assert_eq!(r.summary.transactions.len(), 5);
    assert_eq!(r.rows.len(), 3);
    assert_eq!(r.rows.iter().filter(|x| x.excluded).count(), 1);
    for f in ["summary.json", "timeseries.csv", "report.html"] {
        assert!(o.join(f).is_file(), "{f}");
    }
}

#[test]
fn sweep_writes_one_table() {
    let out = tempfile::tempdir().expect("tempdir");
    let o_s = out.path().to_string_lossy().to_string();
    let s = Sweep::try_parse_from([
        "sweep",
        "insert",
        "--engine",
        "model",
        "--vary",
        "clients=1,2",
        "--rows",
        "300",
        "--rows-i1",
        "100",
        "--rows-i2",
        "20",
        "--steps",
        "l.i0,l.i1",
        "--quiet",
        "--json",
        "--out",
        &o_s,
    ])
    .expect("parses");
    let r = run_sweep(&s.cmd).expect("sweep");
    assert_eq!(r.runs.len(), 2);
    let table = std::fs::read_to_string(out.path().join("sweep.txt")).expect("sweep.txt");
    assert!(table.starts_with("ips.av ips.99"), "{table}");
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.contains(" other% steal% ")),
        "{table}"
    );
    assert_eq!(table.lines().count(), 3);
    assert!(table.contains("model.clients=2"));
    let page = std::fs::read_to_string(out.path().join("sweep.html")).expect("sweep.html");
    assert_eq!(page.matches("<svg").count(), 2);
    assert!(
        page.contains("<dt>Mcpu/i</dt><dd>CPU microseconds"),
        "columns explained"
    );
    assert!(page.contains("<dt>steal%</dt><dd>"), "steal explained");
    assert!(out.path().join("clients=1").join("report.html").is_file());
}
