//! What a user meets at the shell before any data moves: Windows line ends on `load`'s input,
//! directories that hold no database (no lock file may be left in them), a file given where a
//! directory is expected, and plain text (no ANSI colour codes) when the output is not a
//! terminal.

use super::cli::run;
use std::path::Path;
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[test]
fn crlf_input_is_refused_naming_the_line_and_loaded_with_crlf() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let d = arg(&db);
    let input = b"a\t1\r\nb\t2\r\nc\t3\r\n";
    let out = run(&["load", d, "-t", "t"], input);
    assert_eq!(code(&out), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 1 ends with a carriage return") && err.contains("--crlf"),
        "{err}"
    );
    let out = run(&["load", d, "-t", "t", "--crlf"], input);
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    let dump = run(&["dump", d, "-t", "t"], b"");
    assert_eq!(
        text(&dump.stdout),
        "a\t1\nb\t2\nc\t3\n",
        "no \\r kept in values"
    );
    // --crlf drops one carriage return; a second one is part of the value, written as \x0d.
    let out = run(&["load", d, "-t", "u", "--crlf"], b"k\tv\r\r\n");
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    let dump = run(&["dump", d, "-t", "u"], b"");
    assert_eq!(text(&dump.stdout), "k\tv\\x0d\n");
    // A last line without a line feed is judged the same way.
    let out = run(&["load", d, "-t", "w"], b"x\t1\ny\t2\r");
    assert_eq!(code(&out), Some(1));
    assert!(text(&out.stderr).contains("line 2 ends with a carriage return"));
}

#[test]
fn commands_that_find_no_database_leave_no_lock_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = arg(tmp.path());
    for args in [
        vec!["check", d],
        vec!["check", d, "--json"],
        vec!["status", d],
        vec!["status", d, "--json"],
        vec!["dump", d, "-t", "t"],
        vec!["recover", d],
    ] {
        let out = run(&args, b"");
        assert_eq!(code(&out), Some(1), "{args:?}: {}", text(&out.stderr));
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .expect("read dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?} behind");
    }
    // Where a database is, the lock file is part of it and stays.
    let db = tmp.path().join("db");
    let out = run(&["load", arg(&db), "-t", "t"], b"k\tv\n");
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    assert!(db.join("evenkeel.lock").is_file());
    let out = run(&["status", arg(&db)], b"");
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_file_where_a_directory_belongs_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("rows.tsv");
    std::fs::write(&file, b"k\tv\n").expect("write");
    let f = arg(&file);
    let other = tmp.path().join("other");
    let o = arg(&other);
    for args in [
        vec!["load", f, "-t", "t"],
        vec!["dump", f, "-t", "t"],
        vec!["status", f],
        vec!["check", f],
        vec!["recover", f],
        vec!["check", o, "--salvage", "--out", f],
        vec!["bench", "tpcc", "--dir", f],
        vec!["bench", "tpcc", "--out", f, "--engine", "model"],
        vec!["bench", "insert", "--dir", f],
        vec!["bench", "kv", "--dir", f],
        vec!["sweep", "tpcc", "--dir", f, "--vary", "connections=1,2"],
        vec!["torture", "--dir", f],
        vec!["soak", "--dir", f],
    ] {
        let out = run(&args, b"");
        let err = text(&out.stderr);
        assert_eq!(code(&out), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{f} is a file, not a directory")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(&file).expect("read"),
        b"k\tv\n",
        "file untouched"
    );
    assert!(!other.exists());
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let d = arg(&db);
    let out = run(&["load", d, "-t", "t"], b"k\tv\n");
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    // A damaged doublewrite header makes the next open log a warning through tracing.
    let dblwr = db.join("evenkeel.dblwr");
    let mut bytes = std::fs::read(&dblwr).expect("read dblwr");
    bytes[..4].copy_from_slice(b"XXXX");
    std::fs::write(&dblwr, &bytes).expect("write dblwr");
    let out = run(&["load", d, "-t", "t"], b"k2\tv\n");
    let err = text(&out.stderr);
    assert!(err.contains("WARN"), "a warning was logged: {err}");
    assert!(
        !err.contains('\x1b'),
        "plain text without ANSI codes: {err:?}"
    );
}

#[test]
fn a_bench_run_into_pipes_prints_plain_lines_without_a_progress_bar() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out_dir = tmp.path().join("results");
    let out = run(
        &[
            "bench",
            "tpcc",
            "--engine",
            "model",
            "-w",
            "1",
            "--items",
            "1000",
            "--customers",
            "300",
            "--duration",
            "3",
            "--warmup",
            "1",
            "--interval",
            "1",
            "--out",
            arg(&out_dir),
        ],
        b"",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("trx:") && stdout.contains("tpmC"),
        "{stdout}"
    );
    assert!(stdout.contains("\nmachine: load average"), "{stdout}");
    for (name, s) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(!s.contains('\x1b'), "{name} has ANSI codes: {s:?}");
        assert!(
            !s.contains('\r'),
            "{name} has a progress bar's carriage returns: {s:?}"
        );
    }
}
