//! What a user hits on a damaged or crashed database, end to end: the read-only commands
//! (`dump`, `status`, `check`) never change it, a truncated file is named with its size, page
//! size and what is missing, `check` and open agree, salvage counts missing pages, a closed
//! stdout ends a command quietly, and `load --batch` is checked against the log at start.

use crate::cli::{dir_arg as arg, expect_code as code, run, text};
use std::path::Path;
use std::process::{Command, Stdio};

/// A database of `rows` rows in table `t`, page size 4K, shut down cleanly.
fn loaded(dir: &Path, rows: usize) {
    let input: String = (0..rows)
        .map(|i| format!("key{i:06}\tvalue-{i}-{}\n", "x".repeat(60)))
        .collect();
    let out = run(
        &[
            "load",
            arg(dir),
            "-t",
            "t",
            "--set",
            "page_size=4K",
            "--set",
            "buffer_pool_size=1M",
        ],
        input.as_bytes(),
    );
    code(&out, 0);
}

/// Every byte of every file in `dir` but the command lock file, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name() != "evenkeel.lock")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    v.sort();
    v
}

fn set_len(dir: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("evenkeel.data"))
        .expect("open data file");
    f.set_len(len).expect("set_len");
}

#[test]
fn read_only_commands_leave_a_truncated_database_as_it_is() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    loaded(d, 2000);
    set_len(d, 12_345);
    let before = files(d);
    let check = run(&["check", arg(d)], b"");
    code(&check, 3);
    let said = format!("{}{}", text(&check.stdout), text(&check.stderr));
    for needle in ["evenkeel.data", "12345 bytes", "4096 bytes", "truncated"] {
        assert!(said.contains(needle), "check: {needle}: {said}");
    }
    for cmd in [
        vec!["dump", arg(d), "-t", "t"],
        vec!["status", arg(d)],
        vec!["status", arg(d), "--json"],
    ] {
        let out = run(&cmd, b"");
        code(&out, 1);
        let err = text(&out.stderr);
        assert!(
            err.contains("12345 bytes") && err.contains("4096 bytes"),
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("\x1b["), "{cmd:?}: colour codes: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "{cmd:?}: one error line, no warnings: {err}"
        );
    }
    assert!(
        files(d) == before,
        "a read-only command changed the database"
    );
}

#[test]
fn check_and_open_agree_on_extra_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    loaded(d, 500);
    let len = std::fs::metadata(d.join("evenkeel.data"))
        .expect("meta")
        .len();
    set_len(d, len + 777);
    let check = run(&["check", arg(d)], b"");
    code(&check, 3);
    assert!(
        text(&check.stdout).contains("777 bytes past the last whole page"),
        "{}",
        text(&check.stdout)
    );
    let dump = run(&["dump", arg(d), "-t", "t"], b"");
    code(&dump, 1);
    assert!(
        text(&dump.stderr).contains("777 bytes past the last whole page"),
        "{}",
        text(&dump.stderr)
    );
}

#[test]
fn a_crashed_database_is_refused_by_the_read_only_commands_until_recovered() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    loaded(d, 300);
    // mark the header unclean, as a killed process leaves it: the shutdown flag is what the
    // commands read, and `recover` must then run recovery
    // the kill comes once the load has acknowledged the row's commit (its --ack-file, kept
    // outside the database's directory), however long the process takes to start
    let acks = tempfile::tempdir().expect("tempdir");
    let ack = acks.path().join("ack");
    let mut torture = Command::new(env!("CARGO_BIN_EXE_evenkeel"))
        .args(["load", arg(d), "-t", "t", "--batch", "1", "--ack-file"])
        .arg(&ack)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn load");
    {
        use std::io::Write;
        let mut stdin = torture.stdin.take().expect("stdin");
        stdin.write_all(b"crash\tme\n").expect("feed");
        stdin.flush().expect("flush");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !std::fs::read_to_string(&ack).is_ok_and(|a| a.lines().any(|l| l.trim() == "1")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the load did not acknowledge its commit in 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = torture.kill();
        let _ = torture.wait();
    }
    let before = files(d);
    for cmd in [
        vec!["dump", arg(d), "-t", "t"],
        vec!["status", arg(d)],
        vec!["check", arg(d)],
    ] {
        let out = run(&cmd, b"");
        code(&out, 1);
        let err = text(&out.stderr);
        assert!(
            err.contains("not shut down cleanly") && err.contains("evenkeel recover"),
            "{cmd:?}: {err}"
        );
    }
    assert!(
        files(d) == before,
        "a read-only command changed a database that needs recovery"
    );
    let recover = run(&["recover", arg(d)], b"");
    code(&recover, 0);
    assert!(
        text(&recover.stderr).contains("crash recovery ran"),
        "{}",
        text(&recover.stderr)
    );
    code(&run(&["check", arg(d)], b""), 0);
    let dump = run(&["dump", arg(d), "-t", "t"], b"");
    code(&dump, 0);
    assert_eq!(text(&dump.stdout).lines().count(), 301);
    let again = run(&["recover", arg(d)], b"");
    code(&again, 0);
    assert!(text(&again.stderr).contains("nothing to recover"));
}

#[test]
fn salvage_counts_pages_cut_off_the_end_as_unreadable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    loaded(d, 5000);
    let len = std::fs::metadata(d.join("evenkeel.data"))
        .expect("meta")
        .len();
    set_len(d, len - 10 * 4096);
    let out_dir = tmp.path().join("salvaged");
    let out = run(&["check", arg(d), "--salvage", "--out", arg(&out_dir)], b"");
    code(&out, 3);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("10 unreadable"), "{stdout}");
    assert!(stdout.contains("missing from the file"), "{stdout}");
}

#[test]
fn a_closed_stdout_ends_json_output_quietly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    loaded(d, 100);
    for cmd in [["status", arg(d), "--json"], ["check", arg(d), "--json"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_evenkeel"))
            .args(cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // close the read end at once, as `| head -0` does
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        code(&out, 0);
        assert!(
            !text(&out.stderr).contains("panicked"),
            "{cmd:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_batch_the_redo_log_cannot_hold_fails_before_loading() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    let out = run(&["load", arg(d), "-t", "t", "--batch", "100000"], b"a\tb\n");
    code(&out, 2);
    let err = text(&out.stderr);
    assert!(
        err.contains("--batch 100000") && err.contains("raise log_file_size"),
        "{err}"
    );
    // with a larger log the same batch is accepted
    let big = tmp.path().join("big");
    let out = run(
        &[
            "load",
            arg(&big),
            "-t",
            "t",
            "--batch",
            "100000",
            "--set",
            "log_file_size=128M",
        ],
        b"a\tb\n",
    );
    code(&out, 0);
}
