//! `evenkeel check --salvage --out DIR`: on an intact database it exports exactly what `dump`
//! prints; on a database whose leaf page is damaged and whose checkpoint slots are both
//! damaged (so a normal open refuses), it exports every row except those of the damaged page,
//! reports that page, exits 3, and `load` rebuilds the tables from its files.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evenkeel"))
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

fn expect(out: &Output, code: i32) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const PS: usize = 4096;

fn rows(table: &str, n: usize, big: bool) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let len = if big { 5000 + i % 3000 } else { 20 + i % 60 };
            let v: String = (0..len)
                .map(|j| char::from(b'a' + ((i * 7 + j) % 26) as u8))
                .collect();
            (format!("{table}-{i:06}"), v)
        })
        .collect()
}

fn lines(rows: &[(String, String)]) -> Vec<u8> {
    rows.iter()
        .flat_map(|(k, v)| format!("{k}\t{v}\n").into_bytes())
        .collect()
}

fn flip(path: &Path, off: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= 0x08;
    f.write_all_at(&b, off).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn salvage_exports_every_readable_row_when_open_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let dbs = db.to_str().unwrap();
    let small = rows("small", 6000, false);
    let big = rows("big", 40, true);
    for (t, r) in [("small", &small), ("big", &big)] {
        let out = run(
            &["load", dbs, "--table", t, "--set", "page_size=4K"],
            &lines(r),
        );
        expect(&out, 0);
    }

    // intact: salvage = dump, exit 0
    let clean_out = tmp.path().join("clean");
    let report = expect(
        &run(
            &[
                "check",
                dbs,
                "--salvage",
                "--out",
                clean_out.to_str().unwrap(),
            ],
            b"",
        ),
        0,
    );
    assert!(report.contains("0 unreadable"), "{report}");
    for t in ["small", "big"] {
        let dump = expect(&run(&["dump", dbs, "--table", t], b""), 0);
        let file = std::fs::read_to_string(clean_out.join(format!("{t}.tsv"))).unwrap();
        assert!(file == dump, "table {t}: salvage differs from dump");
    }

    // damage: a leaf of `small` that has no doublewrite copy, and both checkpoint slots
    let data = std::fs::read(db.join("evenkeel.data")).unwrap();
    let dwb = std::fs::read(db.join("evenkeel.dblwr")).unwrap_or_default();
    let in_dwb: Vec<u32> = dwb
        .chunks_exact(PS)
        .skip(1)
        .map(|s| u32::from_le_bytes(s[4..8].try_into().unwrap()))
        .collect();
    let small_id = {
        // the table whose leaves hold keys starting with "small-"
        let leaf = data
            .chunks_exact(PS)
            .find(|p| {
                p[16] == 2 && u32::from_le_bytes(p[36..40].try_into().unwrap()) != 0 && {
                    let n = u16::from_le_bytes([p[18], p[19]]);
                    n > 0 && {
                        let off = u16::from_le_bytes([p[40], p[41]]) as usize;
                        p[off + 6..].starts_with(b"small-")
                    }
                }
            })
            .expect("a leaf of small");
        u32::from_le_bytes(leaf[36..40].try_into().unwrap())
    };
    let (victim, victim_rows) = data
        .chunks_exact(PS)
        .enumerate()
        .find(|(p, b)| {
            b[16] == 2
                && u32::from_le_bytes(b[36..40].try_into().unwrap()) == small_id
                && !in_dwb.contains(&(*p as u32))
        })
        .map(|(p, b)| (p as u32, u16::from_le_bytes([b[18], b[19]]) as usize))
        .expect("a leaf of small without a doublewrite copy");
    assert!(victim_rows > 0);
    flip(&db.join("evenkeel.data"), victim as u64 * PS as u64 + 1000);
    flip(&db.join("ib_logfile0"), 512 + 20);
    flip(&db.join("ib_logfile0"), 1024 + 20);

    let refused = run(&["dump", dbs, "--table", "small"], b"");
    assert_ne!(refused.status.code(), Some(0));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("checkpoint slots") && err.contains("ib_logfile0"),
        "{err}"
    );

    let out_dir = tmp.path().join("salvaged");
    let out = run(
        &[
            "check",
            dbs,
            "--salvage",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        b"",
    );
    let report = expect(&out, 3);
    assert!(
        report.contains(&format!("unreadable pages (skipped): {victim}\n")),
        "{report}"
    );
    assert!(report.contains("checksum mismatch"), "{report}");
    let got_small = std::fs::read_to_string(out_dir.join("small.tsv")).unwrap();
    let got_big = std::fs::read_to_string(out_dir.join("big.tsv")).unwrap();
    assert_eq!(got_big.as_bytes(), lines(&big), "big is whole");
    let exported: Vec<&str> = got_small.lines().collect();
    assert_eq!(exported.len(), small.len() - victim_rows, "{report}");
    let want: std::collections::HashSet<String> =
        small.iter().map(|(k, v)| format!("{k}\t{v}")).collect();
    assert!(
        exported.iter().all(|l| want.contains(*l)),
        "a salvaged row differs from what was loaded"
    );

    // load rebuilds the tables from the salvage files
    let new = tmp.path().join("new");
    let news = new.to_str().unwrap();
    for t in ["small", "big"] {
        let file = std::fs::read(out_dir.join(format!("{t}.tsv"))).unwrap();
        expect(&run(&["load", news, "--table", t], &file), 0);
        let dump = expect(&run(&["dump", news, "--table", t], b""), 0);
        assert!(dump.as_bytes() == file, "table {t} rebuilt differs");
    }
}
