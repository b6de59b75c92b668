//! The dump/load line format's fuzz target, CI equivalent: the committed seed corpus
//! (`fuzz/corpus/dump_lines/`, lines as `dump` writes them plus damaged ones) is replayed through
//! `evenkeel_cli::fuzz::lines`, then proptest feeds it mutated seeds and random bytes.
//!
//! `EVENKEEL_FUZZ_CASES=N` sets the proptest cases (default 4096). The long run is
//! `cargo +nightly fuzz run dump_lines` (README.md, "Fuzzing").
//! `EVENKEEL_WRITE_FUZZ_SEEDS=1 cargo nextest run -p evenkeel-cli --test it write_seed_corpus
//! --run-ignored only` rewrites the seed files.

use evenkeel_cli::escape::encode_row;
use evenkeel_cli::fuzz::lines;
use proptest::prelude::*;
use proptest::sample::Index;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/dump_lines")
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the seed corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no seed", dir.display());
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn cases() -> u32 {
    std::env::var("EVENKEEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096)
}

#[test]
fn seed_corpus_replays_cleanly() {
    for seed in corpus() {
        lines(&seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None,
                                        ..ProptestConfig::default() })]

    #[test]
    fn mutated_seeds(seed in any::<Index>(),
                     edits in prop::collection::vec((any::<Index>(), any::<u8>(), 0u8..3), 1..16)) {
        let seeds = corpus();
        let mut v = seeds[seed.index(seeds.len())].clone();
        for (at, byte, op) in edits {
            match op {
                0 if !v.is_empty() => { let i = at.index(v.len()); v[i] = byte; }
                1 => { let i = at.index(v.len() + 1); v.insert(i, byte); }
                _ if !v.is_empty() => { let i = at.index(v.len()); v.remove(i); }
                _ => {}
            }
        }
        lines(&v);
    }

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        lines(&bytes);
    }

    /// Lines made only of the bytes that matter to the format hit the escape paths densely.
    #[test]
    fn escape_heavy_bytes(bytes in prop::collection::vec(
        prop::sample::select(vec![b'\\', b'\t', b'\n', b'x', b't', b'n', b'0', b'f', b'G', 0xc3, 0xa9]),
        0..200)) {
        lines(&bytes);
    }
}

/// Writes the seed files: rows as `dump` encodes them, and lines `load` must refuse.
#[test]
#[ignore]
fn write_seed_corpus() {
    if std::env::var("EVENKEEL_WRITE_FUZZ_SEEDS").is_err() {
        eprintln!("set EVENKEEL_WRITE_FUZZ_SEEDS=1 to rewrite fuzz/corpus/dump_lines");
        return;
    }
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut dump = Vec::new();
    let rows: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"k1".to_vec(), b"v1".to_vec()),
        (b"a\tb".to_vec(), b"c\nd\\e".to_vec()),
        ("h\u{e9}llo w\u{f6}rld".into(), "\u{1F600}".into()),
        ((0..=255u8).collect(), b"".to_vec()),
        (b"".to_vec(), b"\xff\xc3\x00\x7f\r".to_vec()),
        (b"\\x41".to_vec(), b"\\t\\n".to_vec()),
    ];
    for (k, v) in &rows {
        encode_row(&mut dump, k, v);
    }
    std::fs::write(dir.join("dump.txt"), &dump).unwrap();
    std::fs::write(
        dir.join("bad.txt"),
        b"no tab here\nk\tv\tw\nk\\q\tv\nk\tv\\x4\nk\tv\\xzz\nk\\\tv\nk\tv\\\n\\xFf\\x0A\t\\x41\n",
    )
    .unwrap();
}
