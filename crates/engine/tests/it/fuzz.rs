//! The fuzz targets' CI equivalent: the committed seed corpus (`fuzz/corpus/<target>/`, real
//! data-file pages, real log files and group payloads, real options files) is replayed
//! through the engine's fuzz entry points (`evenkeel::fuzz`), then proptest feeds them mutated
//! seeds and random bytes. Any panic, overflow, out-of-bounds slice or failed property in a
//! decoder fails the test, as it would crash the fuzzer.
//!
//! `EVENKEEL_FUZZ_CASES=N` sets the proptest cases per target (default 4096). The long runs are
//! `cargo +nightly fuzz run <target>` from the repository root (README.md, "Fuzzing").
//! `EVENKEEL_WRITE_FUZZ_SEEDS=1 cargo nextest run -p evenkeel --test it write_seed_corpus
//! --run-ignored only` regenerates the engine's seed files from a small real database.

use super::common::{key16, opts, val};
use evenkeel::io::SimStorage;
use evenkeel::wal::{probe_geometry, Log, LogConfig};
use evenkeel::{fuzz, Database};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("data_file", fuzz::data_file),
    ("log_file", fuzz::log_file),
    ("log_records", fuzz::log_records),
    ("options", fuzz::options),
];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fuzz/corpus/{target}"))
}

/// Every file of a target's committed corpus, read once per test process.
fn corpus(target: &str) -> &'static [Vec<u8>] {
    type Cache = Mutex<HashMap<String, &'static [Vec<u8>]>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Mutex::default).lock().unwrap();
    cache
        .entry(target.to_string())
        .or_insert_with(|| Vec::leak(read_corpus(target)))
}

/// Every file of a target's committed corpus; at least one must exist.
fn read_corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading the seed corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no seed", dir.display());
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn target(name: &str) -> Target {
    TARGETS.iter().find(|t| t.0 == name).unwrap().1
}

fn cases() -> u32 {
    std::env::var("EVENKEEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096)
}

/// A mutation as libFuzzer makes them: overwrite, insert or delete one byte, or cut the tail.
#[derive(Clone, Debug)]
enum Edit {
    Set(Index, u8),
    Insert(Index, u8),
    Remove(Index),
    Truncate(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        6 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        2 => any::<Index>().prop_map(Edit::Remove),
        1 => any::<Index>().prop_map(Edit::Truncate),
    ]
}

/// Applies `edits` to `seed`; the first byte (the targets' flags) is left to `flags` when given.
fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        match e {
            Edit::Set(i, b) if !v.is_empty() => {
                let at = i.index(v.len());
                v[at] = *b;
            }
            Edit::Insert(i, b) => {
                let at = i.index(v.len() + 1);
                v.insert(at, *b);
            }
            Edit::Remove(i) if !v.is_empty() => {
                let at = i.index(v.len());
                v.remove(at);
            }
            Edit::Truncate(i) => {
                let at = i.index(v.len() + 1);
                v.truncate(at);
            }
            _ => {}
        }
    }
    v
}

#[test]
fn seed_corpus_replays_cleanly() {
    for (name, f) in TARGETS {
        for seed in corpus(name) {
            f(seed);
        }
    }
}

/// The data-file seeds written by `write_seed_corpus` (the rest of the corpus is what the
/// fuzzer found) are real: they must pass `check` untouched, so the fuzzer starts from pages
/// the decoders accept, not from noise.
#[test]
fn data_file_seeds_are_valid_databases() {
    for name in ["empty.bin", "rows.bin", "overflow.bin"] {
        let seed = std::fs::read(corpus_dir("data_file").join(name)).unwrap();
        let storage = SimStorage::new();
        let file = evenkeel::io::Storage::open(
            &storage,
            "evenkeel.data",
            evenkeel::io::FileKind::Data,
            true,
        )
        .unwrap();
        file.write_at(&seed[1..], 0).unwrap();
        let report = evenkeel::check::check_file(file.as_ref()).unwrap();
        assert!(report.is_ok(), "seed fails check: {:?}", report.problems);
        assert!(report.page_count >= 3);
    }
}

/// A header whose page count is far past the file's end (checksum valid: a forgery or a bug)
/// is reported as such; `check` reads only the pages the file holds (reserving and reading
/// every page such a header claims would be 96 GiB and four billion reads at u32::MAX).
#[test]
fn check_reads_only_the_pages_the_file_holds() {
    let seed = std::fs::read(corpus_dir("data_file").join("rows.bin")).unwrap();
    let mut image = seed[1..].to_vec();
    let pages = image.len() / 4096;
    // page 0: the 40-byte page header, then magic (8), version (4), page size (4), page count
    image[56..60].copy_from_slice(&1_000_000u32.to_le_bytes());
    evenkeel::page::seal(&mut image[..4096]);
    let storage = SimStorage::new();
    let file = evenkeel::io::Storage::open(
        &storage,
        "evenkeel.data",
        evenkeel::io::FileKind::Data,
        true,
    )
    .unwrap();
    file.write_at(&image, 0).unwrap();
    let report = evenkeel::check::check_file(file.as_ref()).unwrap();
    let rules: Vec<&str> = report.problems.iter().map(|p| p.rule.as_str()).collect();
    assert!(
        rules[0].contains("its header counts 1000000 pages"),
        "{rules:?}"
    );
    assert!(!rules.iter().any(|r| r.contains("unreadable")), "{rules:?}");
    assert!(pages >= 3);
}

fn run_mutated(name: &str, seed_pick: Index, flags: Option<u8>, edits: &[Edit]) {
    let seeds = corpus(name);
    let seed = &seeds[seed_pick.index(seeds.len())];
    let mut input = mutate(seed, edits);
    if let (Some(f), Some(first)) = (flags, input.first_mut()) {
        *first = f;
    }
    target(name)(&input);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None,
                                        ..ProptestConfig::default() })]

    #[test]
    fn data_file_mutated(seed in any::<Index>(), flags in 0u8..2,
                         edits in prop::collection::vec(edit(), 1..24)) {
        run_mutated("data_file", seed, Some(flags), &edits);
    }

    #[test]
    fn log_file_mutated(seed in any::<Index>(), seal in any::<bool>(),
                        edits in prop::collection::vec(edit(), 1..24)) {
        let seeds = corpus("log_file");
        let flags = seeds[seed.index(seeds.len())][0] & 2 | u8::from(seal);
        run_mutated("log_file", seed, Some(flags), &edits);
    }

    #[test]
    fn log_records_mutated(seed in any::<Index>(), edits in prop::collection::vec(edit(), 1..12)) {
        run_mutated("log_records", seed, None, &edits);
    }

    #[test]
    fn options_mutated(seed in any::<Index>(), edits in prop::collection::vec(edit(), 1..12)) {
        run_mutated("options", seed, None, &edits);
    }

    #[test]
    fn random_bytes(target_pick in any::<Index>(),
                    bytes in prop::collection::vec(any::<u8>(), 0..9000)) {
        (TARGETS[target_pick.index(TARGETS.len())].1)(&bytes);
    }
}

/// Writes the engine targets' seed files from a small real database (see the module doc).
#[test]
#[ignore]
fn write_seed_corpus() {
    if std::env::var("EVENKEEL_WRITE_FUZZ_SEEDS").is_err() {
        eprintln!("set EVENKEEL_WRITE_FUZZ_SEEDS=1 to rewrite fuzz/corpus");
        return;
    }
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    // Three databases: empty, small rows over a few leaves, and overflow values plus deletes.
    for (case, rows, vlen, delete_every) in [
        ("empty", 0u64, 0usize, 0u64),
        ("rows", 300, 24, 0),
        ("overflow", 8, 5000, 3),
    ] {
        let mut o = opts(4096, 1 << 20);
        o.set("log_file_size", "256K").unwrap();
        o.set("log_files_in_group", "1").unwrap();
        o.set("log_buffer_size", "256K").unwrap();
        let sim = SimStorage::new();
        let db = Database::create_in(Arc::new(sim.clone()), o).unwrap();
        let t = db.create_table("t").unwrap();
        for chunk in (0..rows).collect::<Vec<_>>().chunks(10) {
            let mut txn = db.begin();
            for &i in chunk {
                txn.put(&t, &key16(i), &val(i, vlen)).unwrap();
            }
            txn.commit().unwrap();
        }
        if delete_every > 0 {
            let mut txn = db.begin();
            for i in (0..rows).step_by(delete_every as usize) {
                txn.delete(&t, &key16(i)).unwrap();
            }
            txn.commit().unwrap();
        }
        // the log before the flush, whose checkpoint would leave recovery nothing to read
        let log = sim.read_current("ib_logfile0");
        db.flush().unwrap();
        let data = sim.read_current("evenkeel.data");
        drop(db); // no clean close: the groups after the checkpoint stay for recovery
        let mut seed = vec![0u8];
        seed.extend_from_slice(&data);
        write("data_file", &format!("{case}.bin"), &seed);
        // the log file: header blocks and the data blocks written so far
        let bs = 512;
        let used = log
            .chunks(bs)
            .rposition(|b| b.iter().any(|&x| x != 0))
            .unwrap_or(3)
            + 1;
        let mut seed = vec![0u8];
        seed.extend_from_slice(&log[..used.clamp(11, 3 + 64) * bs]);
        write("log_file", &format!("{case}.bin"), &seed);
        // group payloads as recovery reads them back
        let copy = SimStorage::new();
        let f =
            evenkeel::io::Storage::open(&copy, "ib_logfile0", evenkeel::io::FileKind::Log, true)
                .unwrap();
        f.write_at(&log, 0).unwrap();
        let (file_size, files, block_size) = probe_geometry(&copy).unwrap();
        let cfg = LogConfig {
            file_size,
            files,
            block_size,
            buffer_size: 64 << 10,
            ..LogConfig::default()
        };
        let (log, recovered) = Log::open(Arc::new(copy), cfg).unwrap();
        drop(log);
        for (i, g) in recovered
            .collect_groups()
            .unwrap()
            .iter()
            .enumerate()
            .take(12)
        {
            let mut seed = vec![0u8]; // page size selector: 4096
            seed.extend_from_slice(&g.payload);
            write("log_records", &format!("{case}-{i}.bin"), &seed);
        }
    }
    let default_pairs: String = evenkeel::Options::default()
        .describe()
        .into_iter()
        .map(|(k, v)| format!("{k} = \"{v}\"\n"))
        .collect();
    write("options", "defaults.toml", default_pairs.as_bytes());
    write(
        "options",
        "mycnf.toml",
        b"innodb_buffer_pool_size = \"64M\"\nInnodb-Page-Size = 8192\nflush_method = \"O_DIRECT\"\n\
          doublewrite = false\nio_capacity = 400\nio_capacity_max = 4000.0\nadaptive_flushing = \"innodb80\"\n",
    );
    write(
        "options",
        "pairs.txt",
        b"page_size=16K\nbuffer_pool_size=1G\nbuffer_pool_instances=4\nlog_file_size=1G\n\
          read_ahead=random\ncheck_max_dirty_foreground=off\nwrite_bandwidth_max=100M\n",
    );
    write(
        "options",
        "bad.toml",
        b"page_size = 5000\n[section]\nx = [1, 2]\nlog_block_size = \"4k\"\n",
    );
}
