//! The insert benchmark on the model engine: step sizes, the constant table size of l.i1 and
//! l.i2, index entries kept in step with rows, and the figures of each step.

use evenkeel_bench::driver::model::ModelDriver;
use evenkeel_bench::insert::client::ClientState;
use evenkeel_bench::insert::schema::table_names;
use evenkeel_bench::insert::step::Step;
use evenkeel_bench::recorder::Recorder;
use evenkeel_bench::tpcc::random::rng_for;
use parking_lot::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[test]
fn steps_keep_rows_and_indexes_in_step() {
    let d = ModelDriver::new();
    let mut st = ClientState::open(&d, 0).expect("open");
    let rec = Mutex::new(Recorder::new(3));
    let stop = AtomicBool::new(false);
    let far = Instant::now() + Duration::from_secs(60);
    let mut rng = rng_for(1, 1);
    let n = st
        .insert_step(&d, Step::LoadI0, 1050, far, &stop, &rec, &mut rng)
        .expect("l.i0");
    assert_eq!(n, 1050);
    let names = table_names(0);
    assert_eq!(d.len(&names[0]), 1050);
    assert_eq!(d.len(&names[1]), 0, "l.i0 loads without secondary indexes");
    // 11 commits of 100 rows, the last one 50: ops count rows, latency counts commits.
    assert_eq!(rec.lock().kinds[0].ok, 1050);
    assert_eq!(rec.lock().kinds[0].latency_us.len(), 11);
    assert_eq!(st.build_indexes(&d, &stop, &rec).expect("l.x"), 1050);
    for n in &names[1..] {
        assert_eq!(d.len(n), 1050, "{n}");
    }
    let n = st
        .insert_step(&d, Step::InsertI1, 500, far, &stop, &rec, &mut rng)
        .expect("l.i1");
    assert_eq!(n, 500);
    let n = st
        .insert_step(&d, Step::InsertI2, 52, far, &stop, &rec, &mut rng)
        .expect("l.i2");
    assert_eq!(n, 52);
    for n in &names {
        assert_eq!(d.len(n), 1050, "{n}: l.i1 and l.i2 keep the size constant");
    }
    assert_eq!(st.oldest_pk, 553);
    assert_eq!(st.next_pk, 1603);
    // Reopening finds the same positions.
    let again = ClientState::open(&d, 0).expect("reopen");
    assert_eq!((again.oldest_pk, again.next_pk), (553, 1603));
}

#[test]
fn insert_run_reports_steps() {
    use clap::Parser;
    #[derive(Parser)]
    struct B {
        #[command(subcommand)]
        cmd: evenkeel_bench::BenchCommand,
    }
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let b = B::try_parse_from([
        "b",
        "insert",
        "--engine",
        "model",
        "--clients",
        "2",
        "--rows",
        "2000",
        "--rows-i1",
        "500",
        "--rows-i2",
        "50",
        "--query-seconds",
        "1",
        "--quiet",
        "--json",
        "--out",
        &o,
    ])
    .expect("parses");
    let r = evenkeel_bench::run_bench(&b.cmd).expect("run");
    let steps: Vec<(&str, u64)> = r
        .summary
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.rows))
        .collect();
    assert_eq!(
        &steps[..4],
        &[("l.i0", 4000), ("l.x", 4000), ("l.i1", 1000), ("l.i2", 100)]
    );
    assert_eq!(steps[4].0, "qr");
    assert!(steps[4].1 > 0, "queries ran");
    assert!(r.summary.ips_av.is_some_and(|v| v > 0.0));
    assert_eq!(r.summary.op, "rows inserted");
    assert!(r.rows.iter().any(|x| x.phase == "qr"));
}

fn insert_args(extra: &[&str], out: &str) -> evenkeel_bench::BenchCommand {
    use clap::Parser;
    #[derive(Parser)]
    struct B {
        #[command(subcommand)]
        cmd: evenkeel_bench::BenchCommand,
    }
    let base = [
        "b",
        "insert",
        "--engine",
        "model",
        "--clients",
        "2",
        "--rows",
        "2000",
        "--quiet",
        "--json",
        "--out",
        out,
    ];
    B::try_parse_from(base.iter().chain(extra))
        .expect("parses")
        .cmd
}

/// l.i1 without l.i0 on tables that hold no row would insert and delete around an empty
/// table, a benchmark of nothing: the run is refused with the step list and what to do.
#[test]
fn l_i1_on_unloaded_tables_is_refused() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    for steps in ["l.i1", "l.x,l.i1", "qr"] {
        let cmd = insert_args(&["--steps", steps, "--rows-i1", "100"], &o);
        let e = evenkeel_bench::run_bench(&cmd)
            .map(|_| ())
            .expect_err(steps)
            .to_string();
        assert!(e.contains(&format!("--steps {steps}")), "{e}");
        assert!(
            e.contains("client 0's table") && e.contains("holds none"),
            "{e}"
        );
        assert!(e.contains("start --steps with l.i0"), "{e}");
    }
}

/// `--warmup 2` on a 3-second l.i1: its first two seconds are sampled under the step's phase
/// but excluded, and the step's figures and the summary count only what came after.
#[test]
fn insert_warmup_excludes_the_first_seconds_of_l_i1() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let cmd = insert_args(
        &[
            "--steps",
            "l.i0,l.x,l.i1",
            "--rows-i1",
            "100000000",
            "--max-step-seconds",
            "3",
            "--warmup",
            "2",
        ],
        &o,
    );
    let r = evenkeel_bench::run_bench(&cmd).expect("run");
    let li1: Vec<_> = r.rows.iter().filter(|x| x.phase == "l.i1").collect();
    let excluded: Vec<bool> = li1.iter().map(|x| x.excluded).collect();
    // 2 warmup seconds, 2 or 3 measured ones (the workers' deadline and the sampler's third
    // measured second race), then the partial last second, excluded as in every step
    assert!(
        excluded == [true, true, false, false, true]
            || excluded == [true, true, false, false, false, true],
        "{excluded:?}"
    );
    assert!(li1[0].ops > 0, "the warmup seconds ran");
    let s = &r.summary;
    let measured = excluded.iter().filter(|e| !**e).count();
    assert_eq!(s.duration_s, measured as f64);
    assert_eq!(s.warmup_s, (li1.len() - measured) as f64);
    let measured_ops: u64 = li1.iter().filter(|x| !x.excluded).map(|x| x.ops).sum();
    assert_eq!(s.ops, measured_ops);
    assert_eq!(
        s.config.get("bench.warmup_s").map(String::as_str),
        Some("2")
    );
    let step = s.steps.iter().find(|x| x.step == "l.i1").expect("l.i1");
    assert!(
        (2.5..3.5).contains(&step.seconds),
        "measured seconds: about --max-step-seconds, not with the warmup: {step:?}"
    );
    assert!((1.9..2.5).contains(&step.warmup_s), "{step:?}");
    // the step's rows are those after the warmup: every row of the step but the first two
    // seconds' (the partial last second's included)
    let warm_ops: u64 = li1[..2].iter().map(|x| x.ops).sum();
    let all_ops: u64 = li1.iter().map(|x| x.ops).sum();
    assert_eq!(step.warmup_rows, warm_ops);
    assert_eq!(step.rows, all_ops - warm_ops);
    assert!((step.ips_av - step.rows as f64 / step.seconds).abs() < 1e-6);
    assert_eq!(s.ips_av, Some(step.ips_av));
    for x in &s.steps {
        if x.step != "l.i1" {
            assert_eq!((x.warmup_s, x.warmup_rows), (0.0, 0), "{x:?}");
        }
    }
    // the report and the CSV: the warmup's rows are there, marked excluded
    let page = std::fs::read_to_string(out.path().join("report.html")).expect("report");
    assert!(page.contains("warm-up (not measured)"), "a warm-up band");
    assert!(
        page.contains("after a 2."),
        "the steps table notes the warmup"
    );
    let csv = std::fs::read_to_string(out.path().join("timeseries.csv")).expect("csv");
    let (back, _) = evenkeel_bench::report::csv::read(&csv).expect("reads back");
    let back: Vec<bool> = back
        .iter()
        .filter(|x| x.phase == "l.i1")
        .map(|x| x.excluded)
        .collect();
    assert_eq!(back, excluded);
}

/// A step whose rows are all done inside its warmup measures nothing, and says so, without
/// failing the run.
#[test]
fn insert_step_ending_inside_its_warmup_measures_nothing() {
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let cmd = insert_args(
        &[
            "--steps",
            "l.i0,l.x,l.i1",
            "--rows-i1",
            "500",
            "--warmup",
            "5",
        ],
        &o,
    );
    let r = evenkeel_bench::run_bench(&cmd).expect("run");
    let step = r
        .summary
        .steps
        .iter()
        .find(|x| x.step == "l.i1")
        .expect("l.i1");
    assert_eq!((step.rows, step.seconds), (0, 0.0), "{step:?}");
    assert_eq!(
        step.warmup_rows, 1000,
        "both clients' rows, all in the warmup"
    );
    assert!(step.ended_in_warmup());
    assert_eq!((step.ips_av, step.ips_99), (0.0, 0.0));
    assert!(step.warmup_note().contains("nothing measured"));
    assert!(r
        .rows
        .iter()
        .filter(|x| x.phase == "l.i1")
        .all(|x| x.excluded));
    assert_eq!(r.summary.duration_s, 0.0);
    assert_eq!(r.summary.ips_av, Some(0.0));
}

/// A sweep passes `--warmup` to each of its insert runs like any other insert argument.
#[test]
fn insert_sweep_passes_the_warmup_to_each_run() {
    use clap::Parser;
    #[derive(Parser)]
    struct S {
        #[command(subcommand)]
        cmd: evenkeel_bench::SweepCommand,
    }
    let out = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let s = S::try_parse_from([
        "s",
        "insert",
        "--engine",
        "model",
        "-c",
        "1",
        "--rows",
        "1000",
        "--rows-i1",
        "100000000",
        "--steps",
        "l.i0,l.x,l.i1",
        "--max-step-seconds",
        "1",
        "--warmup",
        "1",
        "--vary",
        "clients=1",
        "--quiet",
        "--json",
        "--out",
        &o,
    ])
    .expect("parses");
    let r = evenkeel_bench::run_sweep(&s.cmd).expect("sweep");
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(
        run.summary.config.get("bench.warmup_s").map(String::as_str),
        Some("1")
    );
    let first = run.rows.iter().find(|x| x.phase == "l.i1").expect("l.i1");
    assert!(first.excluded && first.ops > 0, "{first:?}");
    let step = run
        .summary
        .steps
        .iter()
        .find(|x| x.step == "l.i1")
        .expect("l.i1");
    assert!((0.9..1.5).contains(&step.warmup_s), "{step:?}");
    assert!(step.rows > 0 && step.seconds > 0.5, "{step:?}");
}

/// A sweep with l.i1 but not l.i0 loads nothing: on a `--dir` whose template was never loaded
/// it is refused before any run, naming the template and how to load it.
#[test]
fn insert_sweep_without_a_loaded_template_is_refused() {
    use clap::Parser;
    #[derive(Parser)]
    struct S {
        #[command(subcommand)]
        cmd: evenkeel_bench::SweepCommand,
    }
    let out = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let o = out.path().to_string_lossy().to_string();
    let d = data.path().to_string_lossy().to_string();
    let s = S::try_parse_from([
        "s",
        "insert",
        "--engine",
        "evenkeel",
        "--dir",
        &d,
        "-c",
        "1",
        "--rows",
        "1000",
        "--steps",
        "l.i1",
        "--vary",
        "adaptive_flushing=steady,innodb80",
        "--quiet",
        "--json",
        "--out",
        &o,
    ])
    .expect("parses");
    let e = evenkeel_bench::run_sweep(&s.cmd)
        .map(|_| ())
        .expect_err("an unloaded template")
        .to_string();
    let template = data.path().join("template");
    assert!(
        e.contains(&format!(
            "template {} holds no loaded data",
            template.display()
        )),
        "{e}"
    );
    assert!(e.contains("add l.i0,l.x to --steps"), "{e}");
    assert!(
        !data.path().join("adaptive_flushing=steady").exists(),
        "a run started"
    );
}
