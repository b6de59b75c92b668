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
    assert_eq!(st.build_indexes(&d, far, &stop, &rec).expect("l.x"), 1050);
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
