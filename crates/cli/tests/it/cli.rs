//! End-to-end tests of the `evenkeel` binary: each runs the built command on a temporary
//! directory and checks its output and exit code (0 ok, 1 failure, 2 usage, 3 damage).
//!
//! The tests encode and decode the line format themselves, independently of the binary's
//! `escape` module, so a bug shared by both directions of the binary cannot hide here.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn evenkeel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_evenkeel"))
}

/// Runs the binary with `args`, feeding `stdin` (shared by the other modules).
pub(crate) fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = evenkeel()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn evenkeel");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for evenkeel");
    feeder.join().expect("stdin feeder");
    out
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the exit code, showing both streams when it differs.
pub(crate) fn expect_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

pub(crate) fn dir_arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The most defensive encoding: every byte as `\xHH`. The binary must accept it.
fn encode_all_hex(out: &mut Vec<u8>, field: &[u8]) {
    for b in field {
        out.extend_from_slice(format!("\\x{b:02X}").as_bytes());
    }
}

/// Decodes a dump into rows, failing on anything but the four documented escapes.
fn decode_dump(dump: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let field = |f: &[u8]| {
        let mut out = Vec::new();
        let mut i = 0;
        while i < f.len() {
            if f[i] != b'\\' {
                out.push(f[i]);
                i += 1;
                continue;
            }
            match f[i + 1] {
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = std::str::from_utf8(&f[i + 2..i + 4]).expect("hex");
                    out.push(u8::from_str_radix(hex, 16).expect("hex"));
                    i += 2;
                }
                other => panic!("unexpected escape \\{}", other as char),
            }
            i += 2;
        }
        out
    };
    assert!(dump.is_empty() || dump.ends_with(b"\n"));
    dump.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|line| {
            let tabs: Vec<usize> = (0..line.len()).filter(|&i| line[i] == b'\t').collect();
            assert_eq!(tabs.len(), 1, "one raw TAB per line: {:?}", text(line));
            (field(&line[..tabs[0]]), field(&line[tabs[0] + 1..]))
        })
        .collect()
}

/// Rows no naive line format survives, plus values spanning several 4 KiB pages.
fn nasty_rows() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rows = BTreeMap::new();
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    rows.insert(b"tab\there".to_vec(), b"value\twith\ttabs".to_vec());
    rows.insert(b"new\nline".to_vec(), b"line1\nline2\n".to_vec());
    rows.insert(b"back\\slash\\".to_vec(), b"\\t is not a tab \\".to_vec());
    rows.insert(vec![0xff, 0xfe, 0x00], vec![0xff; 10]);
    rows.insert(b"empty value".to_vec(), Vec::new());
    rows.insert(Vec::new(), b"empty key".to_vec());
    rows.insert(b"every byte".to_vec(), all_bytes.clone());
    rows.insert("utf-8 \u{e9}\u{1F600}".into(), "\u{fffd} ok".into());
    rows.insert(b"\\x41 literal".to_vec(), b"\\xZZ".to_vec());
    for i in 0..3u8 {
        let big: Vec<u8> = all_bytes
            .iter()
            .cycle()
            .take(5_000 * (i as usize + 2))
            .copied()
            .collect();
        rows.insert(vec![b'b', b'i', b'g', i, b'\n'], big);
    }
    for i in 0..500u32 {
        rows.insert(
            format!("row{i:05}").into_bytes(),
            format!("v{i}\t\\").into_bytes(),
        );
    }
    rows
}

#[test]
fn load_dump_round_trip_is_exact_with_nasty_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let rows = nasty_rows();
    let mut input = Vec::new();
    for (k, v) in &rows {
        encode_all_hex(&mut input, k);
        input.push(b'\t');
        encode_all_hex(&mut input, v);
        input.push(b'\n');
    }
    let set4k = ["--set", "page_size=4K"];
    let load = run(
        &[
            &["load", dir_arg(&a), "--table", "t", "--batch", "7"][..],
            &set4k,
        ]
        .concat(),
        &input,
    );
    expect_code(&load, 0);
    let summary = text(&load.stderr);
    let commits = rows.len().div_ceil(7);
    assert!(
        summary.contains(&format!("loaded {} lines", rows.len())),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("in {commits} commits")),
        "{summary}"
    );
    assert!(summary.contains("rows/s"), "{summary}");

    let dump_a = run(&["dump", dir_arg(&a), "--table", "t"], b"");
    expect_code(&dump_a, 0);
    let decoded: BTreeMap<_, _> = decode_dump(&dump_a.stdout).into_iter().collect();
    assert_eq!(decoded.len(), rows.len());
    assert!(decoded == rows, "dump does not hold the loaded rows");

    // The dump, loaded elsewhere and dumped again, is byte-identical.
    expect_code(
        &run(&["load", dir_arg(&b), "-t", "copy"], &dump_a.stdout),
        0,
    );
    let dump_b = run(&["dump", dir_arg(&b), "-t", "copy"], b"");
    expect_code(&dump_b, 0);
    assert!(dump_a.stdout == dump_b.stdout, "second dump differs");
    // Readable parts stay readable.
    let shown = text(&dump_a.stdout);
    assert!(
        shown.contains("tab\\there\tvalue\\twith\\ttabs\n"),
        "{shown}"
    );
    assert!(shown.contains("\\xff\\xfe\\x00\t"), "{shown}");
}

#[test]
fn load_replaces_existing_keys_and_adds_to_existing_tables() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    expect_code(&run(&["load", d, "-t", "t"], b"a\t1\nb\t2\n"), 0);
    expect_code(&run(&["load", d, "-t", "t"], b"b\t3\nc\t4"), 0);
    let dump = run(&["dump", d, "-t", "t"], b"");
    expect_code(&dump, 0);
    assert_eq!(text(&dump.stdout), "a\t1\nb\t3\nc\t4\n");
}

#[test]
fn check_passes_and_prints_row_and_page_counts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let input: String = (0..3000)
        .map(|i| format!("key{i:06}\tvalue {i}\n"))
        .collect();
    expect_code(&run(&["load", d, "-t", "orders"], input.as_bytes()), 0);
    expect_code(&run(&["load", d, "-t", "items"], b"x\ty\n"), 0);
    let out = run(&["check", d], b"");
    expect_code(&out, 0);
    let report = text(&out.stdout);
    for needle in [
        "rows",
        "depth",
        "leaf",
        "internal",
        "overflow",
        "leaf fill",
        "free pages",
        "ok:",
    ] {
        assert!(report.contains(needle), "{needle}: {report}");
    }
    let orders = report
        .lines()
        .find(|l| l.starts_with("orders"))
        .expect("orders row");
    assert_eq!(orders.split_whitespace().nth(1), Some("3000"), "{report}");
    let items = report
        .lines()
        .find(|l| l.starts_with("items"))
        .expect("items row");
    assert_eq!(items.split_whitespace().nth(1), Some("1"), "{report}");

    let json = run(&["check", d, "--json"], b"");
    expect_code(&json, 0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let tables = v["tables"].as_array().expect("tables");
    assert!(tables
        .iter()
        .any(|t| t["name"] == "orders" && t["rows"] == 3000));
    assert_eq!(v["problems"].as_array().map(Vec::len), Some(0));
}

#[test]
fn check_names_the_corrupted_page_and_exits_3() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let input: String = (0..2000).map(|i| format!("k{i:05}\t{i}\n")).collect();
    expect_code(&run(&["load", d, "-t", "t"], input.as_bytes()), 0);
    let path = tmp.path().join("evenkeel.data");
    let mut data = std::fs::read(&path).expect("read data file");
    let page_size = 16384;
    assert!(data.len() >= 3 * page_size, "page 2 exists");
    let middle = 2 * page_size + page_size / 2;
    for b in &mut data[middle..middle + 8] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &data).expect("write data file");

    let out = run(&["check", d], b"");
    expect_code(&out, 3);
    let report = text(&out.stdout);
    assert!(report.contains("evenkeel.data: page 2: C1"), "{report}");
    assert!(
        text(&out.stderr).contains("problem"),
        "{}",
        text(&out.stderr)
    );

    let json = run(&["check", d, "--json"], b"");
    expect_code(&json, 3);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert!(v["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .any(|p| p["page"] == 2));
}

#[test]
fn commands_on_a_directory_without_a_database_fail_clearly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    for args in [
        vec!["check", d],
        vec!["status", d],
        vec!["dump", d, "-t", "t"],
    ] {
        let out = run(&args, b"");
        expect_code(&out, 1);
        let err = text(&out.stderr);
        assert!(err.contains("no database here"), "{args:?}: {err}");
    }
    let missing = tmp.path().join("missing");
    let out = run(&["check", dir_arg(&missing)], b"");
    expect_code(&out, 1);
    assert!(text(&out.stderr).contains("missing"));
}

#[test]
fn a_garbage_header_is_damage() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("evenkeel.data"), vec![0xabu8; 65536]).expect("write");
    let out = run(&["check", dir_arg(tmp.path())], b"");
    expect_code(&out, 3);
    assert!(
        text(&out.stderr).contains("page 0"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn status_prints_innodb_like_sections_and_json() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    expect_code(&run(&["load", d, "-t", "t"], b"a\t1\n"), 0);
    let out = run(&["status", d, "--set", "buffer_pool_size=8M"], b"");
    expect_code(&out, 0);
    let s = text(&out.stdout);
    for needle in [
        "BUFFER POOL AND MEMORY",
        "Buffer pool size   8388608 bytes, 512 frames",
        "Dirty pages",
        "made young",
        "FILE",
        "per-page overhead",
        "free-list pages",
        "TABLES",
        "Tables 1: t",
        "LOG",
        "Log sequence number",
        "Log flushed up to",
        "Last checkpoint at",
        "of log capacity",
        "Commits per log fsync",
        "FLUSH / DOUBLEWRITE",
        "Doublewrite on",
        "Sync-flush waits",
        "RECOVERY",
        "Nothing to recover at open",
        "TRANSACTIONS",
        "Lock waits",
        "Lock memory",
        "ROW OPERATIONS",
        "Commits",
    ] {
        assert!(s.contains(needle), "{needle}:\n{s}");
    }
    let json = run(&["status", d, "--json"], b"");
    expect_code(&json, 0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["tables"], 1);
    assert_eq!(v["page_size"], 16384);
    assert!(v["buffer"]["frames"].as_u64().is_some());
    assert!(v["lsn"].as_u64() >= v["checkpoint_lsn"].as_u64());
    assert!(v["log"]["fsyncs"].as_u64().is_some());
    assert!(v["recovery"]["redo_bytes_scanned"].as_u64().is_some());
    assert!(v["locks"]["memory_max_bytes"].as_u64().is_some());
    assert!(!s.contains("no redo log yet"), "{s}");
    // --metrics: one line per declared metric, the counter groups' members included.
    let m = run(&["status", d, "--metrics"], b"");
    expect_code(&m, 0);
    let m = String::from_utf8_lossy(&m.stdout);
    assert_eq!(m.lines().count(), evenkeel::metric_infos().len(), "{m}");
    let line = |name: &str| {
        m.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} line:\n{m}"))
            .to_string()
    };
    assert!(line("tables").contains(" 1 "), "{}", line("tables"));
    assert!(
        line("room_waits").contains("counter"),
        "{}",
        line("room_waits")
    );
    assert!(line("checkpoint_age_pct").contains("gauge"));
    assert!(line("log_fsyncs").contains("fsync calls on log files"));
}

#[test]
fn load_acknowledges_each_commit_in_the_ack_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let ack = tmp.path().join("acks");
    let input: String = (0..2500).map(|i| format!("k{i:05}\t{i}\n")).collect();
    let args = ["load", d, "-t", "t", "--batch", "1000", "--ack-file"];
    let out = run(&[&args[..], &[dir_arg(&ack)]].concat(), input.as_bytes());
    expect_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(&ack).expect("ack file"),
        "1000\n2000\n2500\n"
    );
    // A second load appends its own counts, from zero.
    let out = run(&[&args[..], &[dir_arg(&ack)]].concat(), b"z\t1\n");
    expect_code(&out, 0);
    assert!(std::fs::read_to_string(&ack)
        .expect("ack file")
        .ends_with("2500\n1\n"));
    // A bad line acknowledges only the batches before it.
    let bad = tmp.path().join("bad-acks");
    let input = format!("{}no tab here\n", "a\t1\n".repeat(1500));
    let out = run(&[&args[..], &[dir_arg(&bad)]].concat(), input.as_bytes());
    expect_code(&out, 1);
    assert_eq!(std::fs::read_to_string(&bad).expect("ack file"), "1000\n");
}

#[test]
fn bad_options_fail_with_exit_2_naming_the_option_and_range() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--set", "no_such_knob=1"],
            &["no_such_knob", "buffer_pool_size"],
        ),
        (
            &["--set", "old_blocks_pct=200"],
            &["old_blocks_pct", "from 5 to 95"],
        ),
        (
            &["--set", "buffer_pool_size"],
            &["buffer_pool_size", "name=value"],
        ),
        (
            &["--set", "innodb_page_size=3000"],
            &["page_size", "one of 4096"],
        ),
    ];
    for (flags, needles) in cases {
        for cmd in ["load", "status", "dump"] {
            let args = [&[cmd, d, "-t", "t"][..], flags].concat();
            let args: Vec<&str> = if cmd == "status" {
                args.into_iter()
                    .filter(|a| *a != "-t" && *a != "t")
                    .collect()
            } else {
                args
            };
            let out = run(&args, b"a\tb\n");
            expect_code(&out, 2);
            let err = text(&out.stderr);
            for n in needles {
                assert!(err.contains(n), "{args:?}: {n}: {err}");
            }
        }
    }
    assert!(
        !tmp.path().join("evenkeel.data").exists(),
        "nothing was created"
    );

    let config = tmp.path().join("bad.toml");
    std::fs::write(&config, "buffer_pool_instances = 99\n").expect("write config");
    let out = run(&["status", d, "--config", dir_arg(&config)], b"");
    expect_code(&out, 2);
    let err = text(&out.stderr);
    assert!(
        err.contains("buffer_pool_instances") && err.contains("from 1 to 64"),
        "{err}"
    );

    let out = run(&["load", d, "-t", "t", "--batch", "0"], b"");
    expect_code(&out, 2);
    assert!(text(&out.stderr).contains("1..=1000000"));
}

#[test]
fn a_config_file_and_sets_are_applied_in_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("evenkeel.toml");
    std::fs::write(
        &config,
        "innodb_page_size = \"8K\"\nbuffer_pool_size = \"4M\"\n",
    )
    .expect("write");
    let db = tmp.path().join("db");
    let c = dir_arg(&config);
    let load = run(
        &[
            "load",
            dir_arg(&db),
            "-t",
            "t",
            "--config",
            c,
            "--set",
            "page_size=4K",
        ],
        b"a\tb\n",
    );
    expect_code(&load, 0);
    let check = run(&["check", dir_arg(&db)], b"");
    expect_code(&check, 0);
    assert!(
        text(&check.stdout).starts_with("page size 4096 bytes"),
        "{}",
        text(&check.stdout)
    );
    let opts = run(&["options", "--config", c], b"");
    expect_code(&opts, 0);
    assert!(
        text(&opts.stdout).contains("value:   8192"),
        "{}",
        text(&opts.stdout)
    );
}

#[test]
fn a_malformed_line_stops_the_load_naming_its_number() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    for (input, needle) in [
        (
            &b"a\t1\nb\t2\nno tab on this line\nd\t4\n"[..],
            "line 3: no TAB",
        ),
        (b"a\t1\nb\\q\t2\n", "line 2: bad escape `\\q`"),
        (b"a\t1\tx\n", "line 1: more than one TAB"),
        (b"a\t1\n\nb\t2\n", "line 2: no TAB"),
        (b"a\t\\x4g\n", "line 1: bad escape `\\x4g`"),
    ] {
        let out = run(&["load", d, "-t", "t", "--batch", "1"], input);
        expect_code(&out, 1);
        let err = text(&out.stderr);
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // Batches before the bad line are committed; the database is still sound.
    let dump = run(&["dump", d, "-t", "t"], b"");
    expect_code(&dump, 0);
    assert_eq!(text(&dump.stdout), "a\t1\nb\t2\n");
    expect_code(&run(&["check", d], b""), 0);
}

#[test]
fn a_key_over_the_limit_names_the_line_and_limit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let input = format!("ok\t1\n{}\tv\n", "k".repeat(5000));
    let out = run(
        &["load", d, "-t", "t", "--set", "page_size=4K"],
        input.as_bytes(),
    );
    expect_code(&out, 1);
    let err = text(&out.stderr);
    assert!(err.contains("line 2") && err.contains("512"), "{err}");
}

#[test]
fn dump_into_a_closed_pipe_exits_quietly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    let input: String = (0..20_000)
        .map(|i| format!("key{i:08}\t{}\n", "v".repeat(60)))
        .collect();
    expect_code(
        &run(&["load", d, "-t", "t", "--batch", "5000"], input.as_bytes()),
        0,
    );
    let mut child = evenkeel()
        .args(["dump", d, "-t", "t"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dump");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).expect("read the first bytes");
    assert!(first.starts_with(b"key00000000\t"));
    drop(stdout);
    let out = child.wait_with_output().expect("wait for dump");
    expect_code(&out, 0);
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn every_command_has_help_and_only_working_commands_are_listed() {
    let top = run(&["--help"], b"");
    expect_code(&top, 0);
    let listed: Vec<String> = text(&top.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(
        listed,
        [
            "load",
            "dump",
            "check",
            "recover",
            "backup",
            "status",
            "options",
            "bench",
            "sweep",
            "matrix",
            "holes",
            "torture",
            "recovery-bench",
            "soak",
            "help"
        ]
    );
    for cmd in [
        "load",
        "dump",
        "check",
        "recover",
        "backup",
        "status",
        "options",
        "help-options",
        "bench",
        "sweep",
        "matrix",
        "holes",
        "torture",
        "recovery-bench",
        "soak",
    ] {
        let out = run(&[cmd, "--help"], b"");
        expect_code(&out, 0);
        assert!(text(&out.stdout).contains("Usage: evenkeel"), "{cmd}");
        let short = run(&["help", cmd], b"");
        expect_code(&short, 0);
    }
    for cmd in ["load", "dump", "status", "options"] {
        let help = text(&run(&[cmd, "--help"], b"").stdout);
        assert!(
            help.contains("--config <FILE>") && help.contains("--set <NAME=VALUE>"),
            "{cmd}"
        );
    }
    let out = run(&["frobnicate"], b"");
    expect_code(&out, 2);
}

#[test]
fn options_lists_every_knob_with_default_range_and_doc() {
    let out = run(&["options"], b"");
    expect_code(&out, 0);
    let s = text(&out.stdout);
    for knob in [
        "page_size",
        "buffer_pool_size",
        "buffer_pool_instances",
        "flush_method",
    ] {
        assert!(s.lines().any(|l| l == knob), "{knob}: {s}");
    }
    assert!(
        s.contains("default: 128M") && s.contains("valid:   a size from 256K to 1T"),
        "{s}"
    );
    let alias = run(&["help-options"], b"");
    expect_code(&alias, 0);
    assert_eq!(alias.stdout, out.stdout);
}

#[test]
fn a_database_in_use_by_another_process_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    expect_code(&run(&["load", d, "-t", "t"], b"a\t1\n"), 0);

    // This test process holds the command lock as a running `evenkeel` would.
    let path = tmp.path().join("evenkeel.lock");
    let mut lock = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("a command leaves its lock file in place");
    lock.try_lock().expect("a finished command holds no lock");
    lock.set_len(0).expect("truncate");
    writeln!(lock, "{}", std::process::id()).expect("write pid");
    let held = format!("in use by process {}", std::process::id());
    for args in [
        vec!["load", d, "-t", "t"],
        vec!["dump", d, "-t", "t"],
        vec!["status", d],
        vec!["check", d],
    ] {
        let out = run(&args, b"b\t2\n");
        expect_code(&out, 1);
        assert!(
            text(&out.stderr).contains(&held),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }

    // The lock goes with its holder (a killed holder too: see the kill module).
    drop(lock);
    expect_code(&run(&["load", d, "-t", "t"], b"b\t2\n"), 0);
    assert_eq!(
        text(&run(&["dump", d, "-t", "t"], b"").stdout),
        "a\t1\nb\t2\n"
    );
}

#[test]
fn an_existing_database_is_validated_with_its_own_page_size() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = dir_arg(tmp.path());
    // 256K holds 64 frames of 4K but only 16 of the default 16K.
    let small = ["--set", "buffer_pool_size=256K"];
    let create = [&["load", d, "-t", "t", "--set", "page_size=4K"][..], &small].concat();
    expect_code(&run(&create, b"a\t1\n"), 0);
    expect_code(
        &run(&[&["load", d, "-t", "t"][..], &small].concat(), b"b\t2\n"),
        0,
    );
    expect_code(&run(&[&["status", d][..], &small].concat(), b""), 0);
    let other = run(&["dump", d, "-t", "t", "--set", "page_size=8K"], b"");
    expect_code(&other, 0);
    assert!(text(&other.stderr).contains("existing database has page_size 4096"));
    assert_eq!(text(&other.stdout), "a\t1\nb\t2\n");
}

/// `evenkeel matrix --quick` on two cells (one TPC-C, one insert) and two policies: every
/// (cell, policy) gets figures from a real run, the table carries steady's verdict, and
/// matrix.json names each cell's sweep command.
#[test]
fn matrix_runs_each_policy_in_each_cell_and_tables_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let out = tmp.path().join("out");
    let args = [
        "matrix",
        "--quick",
        "--cells",
        "tpcc-log-1/16,insert-log-1/16",
        "--policies",
        "innodb80,steady",
        "--seconds",
        "3",
        "--warmup",
        "1",
        "--dir",
        dir_arg(&data),
        "--out",
        dir_arg(&out),
    ];
    let o = run(&args, b"");
    expect_code(&o, 0);
    let table = std::fs::read_to_string(out.join("matrix.txt")).expect("matrix.txt");
    assert!(text(&o.stdout).ends_with(&format!(
        "{table}matrix: {}\n",
        out.join("matrix.txt").display()
    )));
    for needle in [
        "tpcc-log-1/16",
        "insert-log-1/16",
        "innodb80",
        "steady",
        "evenkeel sweep tpcc",
    ] {
        assert!(table.contains(needle), "{needle}:\n{table}");
    }
    let first = table.lines().nth(2).expect("a cell row");
    assert!(
        first.ends_with("ok") || first.contains("below"),
        "the row carries steady's verdict: {first}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).expect("json"))
            .expect("parse");
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2);
    for c in cells {
        let runs = c["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 2, "{c}");
        for r in runs {
            assert!(r["mean"].as_f64().is_some_and(|m| m > 0.0), "{r}");
            assert!(r["seconds"].as_u64().is_some_and(|s| s >= 2), "{r}");
        }
    }
    // A bad cell is refused with the grid's names, before anything loads.
    let bad = run(&["matrix", "--cells", "nope", "--dir", dir_arg(&data)], b"");
    expect_code(&bad, 2);
    assert!(
        text(&bad.stderr).contains("tpcc-log-1/16"),
        "{}",
        text(&bad.stderr)
    );
}

/// `evenkeel holes --quick` with evenkeel alone on one TPC-C and the insert setup: each setup
/// gets a real run, the table carries the verdict and the chart, the insert template is marked
/// loaded, and a second run on the same --dir loads nothing (its output names no load).
#[test]
fn holes_runs_each_setup_and_tables_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let out = tmp.path().join("out");
    let args = |out: &std::path::Path| {
        vec![
            "holes".to_string(),
            "--quick".into(),
            "--engines".into(),
            "evenkeel".into(),
            "--setups".into(),
            "tpcc-small-log,insert".into(),
            "--seconds".into(),
            "3".into(),
            "--warmup".into(),
            "1".into(),
            "--dir".into(),
            dir_arg(&data).into(),
            "--out".into(),
            dir_arg(out).into(),
        ]
    };
    let a = args(&out);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>(), b"");
    expect_code(&o, 0);
    let table = std::fs::read_to_string(out.join("holes.txt")).expect("holes.txt");
    assert!(text(&o.stdout).ends_with(&format!(
        "{table}holes: {}\n",
        out.join("holes.txt").display()
    )));
    for needle in [
        "tpcc-small-log",
        "insert",
        "evenkeel sweep tpcc",
        "--vary engine=evenkeel",
        "sweep.html",
    ] {
        assert!(table.contains(needle), "{needle}:\n{table}");
    }
    let verdicts: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("verdict:"))
        .skip(1)
        .take(2)
        .collect();
    assert_eq!(verdicts.len(), 2, "{table}");
    for v in verdicts {
        assert!(
            v.ends_with("ok") || v.contains("< 0.9") || v.contains("under half"),
            "{v}"
        );
    }
    assert!(out.join("tpcc-small-log").join("sweep.html").exists());
    assert!(data.join("insert").join("loaded-evenkeel").exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("holes.json")).expect("json"))
            .expect("parse");
    let setups = json["setups"].as_array().expect("setups");
    assert_eq!(setups.len(), 2);
    for s in setups {
        let runs = s["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 1, "{s}");
        assert!(runs[0]["mean"].as_f64().is_some_and(|m| m > 0.0), "{s}");
        assert!(runs[0]["checkpoint_age_max_pct"].as_f64().is_some(), "{s}");
    }
    // the runs' copies are gone, the templates stay
    let left: Vec<String> = std::fs::read_dir(data.join("tpcc"))
        .expect("tpcc data")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["template-evenkeel"], "{left:?}");
    // a second run reuses the insert template: no load line
    let out2 = tmp.path().join("out2");
    let a = args(&out2);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>(), b"");
    expect_code(&o, 0);
    assert!(!out2.join("insert").join("load-evenkeel").exists());
    // A bad setup is refused with the valid names, before anything loads.
    let bad = run(&["holes", "--setups", "nope", "--dir", dir_arg(&data)], b"");
    expect_code(&bad, 2);
    assert!(
        text(&bad.stderr).contains("tpcc-big-pool"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn backup_copies_a_database_and_refuses_a_dest_that_is_not_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dest) = (tmp.path().join("db"), tmp.path().join("copy"));
    let out = run(
        &[
            "load",
            dir_arg(&src),
            "--table",
            "t",
            "--set",
            "log_file_size=1M",
        ],
        b"a\t1\nb\t2\n",
    );
    expect_code(&out, 0);
    let out = run(&["backup", dir_arg(&src), dir_arg(&dest)], b"");
    expect_code(&out, 0);
    assert!(
        text(&out.stdout).contains("backed up"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["dump", dir_arg(&dest), "--table", "t"], b"");
    expect_code(&out, 0);
    assert_eq!(text(&out.stdout), "a\t1\nb\t2\n");
    // a second backup into the same directory is refused, naming why, and changes nothing
    let out = run(&["backup", dir_arg(&src), dir_arg(&dest)], b"");
    expect_code(&out, 1);
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["check", dir_arg(&dest)], b"");
    expect_code(&out, 0);
}
