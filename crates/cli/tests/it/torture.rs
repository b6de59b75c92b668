//! torture: `evenkeel torture` end to end — a few kill/recover/verify cycles of each workload
//! pass with nothing lost, and a planted lost acknowledgement (an ack line for a commit that
//! never happened, appended between the kill and the verification by the hidden
//! `--plant-lost-ack N`) is reported with its seeds and exit code 3. The long runs (200 cycles
//! per workload) are commands in README.md's "Durability and crash testing" section.

use std::path::Path;
use std::process::{Command, Output};

/// Small TPC-C so the load takes a moment even in a test build.
const TPCC_SMALL: &[&str] = &["--items", "1000", "--customers", "30"];

/// Runs `evenkeel torture` with 2 threads, kills 50-400 ms in, small TPC-C, and `args`.
fn torture(args: &[&str], report: &Path) -> (Output, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_evenkeel"))
        .arg("torture")
        .args(["--threads", "2", "--kill-after", "50..400"])
        .args(TPCC_SMALL)
        .arg("--report")
        .arg(report)
        .args(args)
        .output()
        .expect("run evenkeel torture");
    let json = std::fs::read(report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (out, json)
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_workload_survives_a_few_kills_with_nothing_lost() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for w in ["kv", "insert", "tpcc"] {
        let report = tmp.path().join(format!("{w}.json"));
        let dir = tmp.path().join(w);
        let dir = dir.to_str().expect("utf-8");
        let (out, r) = torture(&["--workload", w, "--cycles", "3", "--dir", dir], &report);
        assert!(out.status.success(), "{w}: {}", show(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.matches(" seed ").count() >= 3, "{w}: {stdout}");
        assert_eq!(r["cycles"], 3, "{w}: {r}");
        assert_eq!(
            r["recoveries"], 3,
            "{w}: every kill leaves an unclean database: {r}"
        );
        assert_eq!(r["lost_acked_commits"], 0, "{w}: {r}");
        assert_eq!(r["failures"].as_array().map(Vec::len), Some(0), "{w}: {r}");
        assert!(r["redo_bytes_total"].as_u64() > Some(0), "{w}: {r}");
        assert!(
            r["acked_commits_verified"].as_u64() > Some(0),
            "{w}: some commits are acknowledged in 50-400 ms: {r}"
        );
    }
}

#[test]
fn kills_while_the_log_is_resized_online_lose_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let report = tmp.path().join("resize.json");
    let dir = tmp.path().join("kv");
    let (out, r) = torture(
        &[
            "--workload",
            "kv",
            "--cycles",
            "4",
            "--resize-log",
            "2M,4M",
            "--set",
            "log_file_size=512K",
            "--dir",
            dir.to_str().expect("utf-8"),
        ],
        &report,
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["lost_acked_commits"], 0, "{r}");
    assert_eq!(r["failures"].as_array().map(Vec::len), Some(0), "{r}");
    // the children resized: the log is no longer the 2 x 512K it was created with
    let db = dir.join("db");
    let sizes: Vec<u64> = ["ib_logfile0", "ib_redo0"]
        .iter()
        .filter_map(|f| std::fs::metadata(db.join(f)).ok())
        .map(|m| m.len())
        .collect();
    assert_eq!(sizes.len(), 1, "one log file set in use: {sizes:?}");
    assert!(
        sizes[0] == 1024 * 1024 || sizes[0] == 2048 * 1024,
        "log files of {sizes:?} bytes"
    );
}

#[test]
fn a_planted_lost_ack_is_reported_with_its_seed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for w in ["kv", "insert", "tpcc"] {
        let report = tmp.path().join(format!("{w}.json"));
        let dir = tmp.path().join(w);
        let (out, r) = torture(
            &[
                "--workload",
                w,
                "--cycles",
                "3",
                "--seed",
                "77",
                "--plant-lost-ack",
                "1",
                "--dir",
                dir.to_str().expect("utf-8"),
            ],
            &report,
        );
        assert_eq!(out.status.code(), Some(3), "{w}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("failed at cycle 1") && stderr.contains("--seed 77"),
            "{w}: {stderr}"
        );
        assert_eq!(r["cycles"], 1, "{w}: cycle 0 passes, cycle 1 fails: {r}");
        assert!(r["lost_acked_commits"].as_u64() >= Some(1), "{w}: {r}");
        let f = &r["failures"][0];
        assert_eq!(f["cycle"], 1, "{w}: {r}");
        assert!(f["seed"].as_u64().is_some(), "{w}: {r}");
        // The evidence is kept.
        assert!(dir.join("db").join("evenkeel.data").exists(), "{w}");
        assert!(dir.join("ack-1.log").exists(), "{w}");
    }
}

#[test]
fn bad_torture_arguments_are_usage_errors() {
    for (args, needle) in [
        (&["--kill-after", "9..3"][..], "MIN is above MAX"),
        (
            &["--set", "flush_log_at_trx_commit=0"][..],
            "flush_log_at_trx_commit=0",
        ),
        (&["--threads", "0"][..], "--threads"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_evenkeel"))
            .arg("torture")
            .args(args)
            .output()
            .expect("run evenkeel torture");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
