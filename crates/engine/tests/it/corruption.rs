//! Corruption campaign on the simulated disk: a database with known content (three tables and
//! an index table, multi-level trees, overflow values, freed pages; the crashed variant leaves
//! index-table changes in the change buffer), closed cleanly or crashed with redo still to
//! replay, then one or more bits flipped at a chosen place of one kind:
//!
//! - a data page: leaf, internal, catalog, overflow, free page; the file header (page 0);
//! - a redo log block inside the range recovery needs, and one behind the checkpoint;
//! - one checkpoint slot, both slots;
//! - a doublewrite slot whose data page is fine; a torn data page with a good doublewrite
//!   copy; a torn data page whose doublewrite copy is bad too; the doublewrite file's header.
//!
//! Then the database is opened and every row of the model is read back (point reads and full
//! scans), and `check` runs. Each run must end in one of: refused at open (the error names the
//! file, and the page or block/LSN, and says what is wrong), repaired at open (counted in
//! `Status.recovery`), detected at read time (an `Error::CorruptPage` naming the file and the
//! page for the reads that touch the damage, and `check` reporting that page), or harmless
//! where the kind says so (a log block the checkpoint no longer needs). Never: a row read
//! successfully with a wrong value, a model row missing from a read that succeeded, or damage
//! that goes unnoticed.
//!
//! Prints a table: kind, injected, refused, repaired, detected at read, harmless, wrong data.
//! `EVENKEEL_CORRUPT_RUNS=N` sets the seeds per kind and variant (default 2); a failure prints
//! the seed, kind and variant, and `EVENKEEL_CORRUPT_SEED=S` replays one seed.

use crate::common::*;
use evenkeel::io::{FileKind, SimStorage, Storage};
use evenkeel::page::{self, PageType};
use evenkeel::{Database, Error, Options};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

const PS: usize = 4096;
const DATA: &str = "evenkeel.data";
const DWB: &str = "evenkeel.dblwr";
const TABLES: [&str; 4] = ["alpha", "beta", "gamma", INDEX];
/// The index table (empty values; its changes go through the change buffer).
const INDEX: &str = "delta";
/// Keys of the index table at build: the even numbers below twice this, in a scrambled order.
const INDEX_KEYS: u64 = 2000;

type Model = BTreeMap<&'static str, BTreeMap<Vec<u8>, Vec<u8>>>;

fn campaign_opts() -> Options {
    let mut o = opts(PS, 96 * PS as u64);
    o.set("log_file_size", "512K").unwrap();
    o.set("log_files_in_group", "2").unwrap();
    o.set("log_buffer_size", "256K").unwrap();
    o.set("doublewrite", "on").unwrap();
    o
}

fn value(rng: &mut SmallRng, i: u64) -> Vec<u8> {
    let len = if i % 97 == 5 {
        rng.gen_range(5000..12000) // overflow pages
    } else {
        rng.gen_range(20..160)
    };
    val(i + rng.gen_range(0..1u64 << 20), len)
}

/// Builds the database; `crashed`: after a clean close, reopen, commit more (acknowledged,
/// flush_log_at_trx_commit = 1) and crash without writing pages back, so redo is needed.
fn build(seed: u64, crashed: bool) -> (SimStorage, Model) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let o = campaign_opts();
    let (sim, db) = sim_db(o.clone());
    let mut model: Model = BTreeMap::new();
    for (n, name) in TABLES.iter().enumerate() {
        if *name == INDEX {
            let t = db.create_index_table(name).unwrap();
            let m = model.entry(name).or_default();
            let order: Vec<u64> = (0..INDEX_KEYS).map(|i| (i * 7919) % INDEX_KEYS).collect();
            for chunk in order.chunks(250) {
                let mut txn = db.begin();
                for &i in chunk {
                    txn.put(&t, &key16(2 * i), &[]).unwrap();
                    m.insert(key16(2 * i), Vec::new());
                }
                txn.commit().unwrap();
            }
            continue;
        }
        let t = db.create_table(name).unwrap();
        let m = model.entry(name).or_default();
        let rows = 1500 + 500 * n as u64;
        for chunk in (0..rows).collect::<Vec<_>>().chunks(250) {
            let mut txn = db.begin();
            for &i in chunk {
                let v = value(&mut rng, i);
                txn.put(&t, &key16(i), &v).unwrap();
                m.insert(key16(i), v);
            }
            txn.commit().unwrap();
        }
    }
    // free some pages: delete a contiguous range of beta
    let beta = db.table("beta").unwrap();
    let mut txn = db.begin();
    for i in 300..1200 {
        txn.delete(&beta, &key16(i)).unwrap();
        model.get_mut("beta").unwrap().remove(&key16(i));
    }
    txn.commit().unwrap();
    db.close().unwrap();
    if crashed {
        let db = Database::open_in(Arc::new(sim.clone()), o).unwrap();
        // a scan of the index notes each leaf's free space (an insert is buffered only into a
        // leaf known to have room), the other tables' pages push its leaves out (the pool is
        // 96 pages), then its changes (odd keys in, even keys out) are buffered, and the crash
        // keeps them
        let idx = db.table(INDEX).unwrap();
        let n = db
            .begin()
            .scan(&idx, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .count();
        assert_eq!(n as u64, INDEX_KEYS);
        for name in TABLES {
            let t = db.table(name).unwrap();
            let mut txn = db.begin();
            if name == INDEX {
                let m = model.get_mut(name).unwrap();
                for _ in 0..60 {
                    let i = rng.gen_range(0..INDEX_KEYS);
                    if m.insert(key16(2 * i + 1), Vec::new()).is_none() {
                        txn.put(&t, &key16(2 * i + 1), &[]).unwrap();
                    }
                    if m.remove(&key16(2 * i)).is_some() {
                        txn.delete(&t, &key16(2 * i)).unwrap();
                    }
                }
                txn.commit().unwrap();
                assert!(
                    db.status().change_buffer.entries > 0,
                    "the crashed variant must leave changes in the change buffer"
                );
                continue;
            }
            for _ in 0..60 {
                let i = rng.gen_range(0..2600u64);
                let v = value(&mut rng, i + 7);
                txn.put(&t, &key16(i), &v).unwrap();
                model.get_mut(name).unwrap().insert(key16(i), v);
            }
            txn.commit().unwrap();
        }
        sim.crash();
        drop(db);
    }
    (sim, model)
}

/// A fresh simulated disk holding the durable image of every file of `src`.
fn copy(src: &SimStorage) -> SimStorage {
    let dst = SimStorage::new();
    for name in src.durable_file_names() {
        let kind = if name == DATA {
            FileKind::Data
        } else if name == DWB {
            FileKind::Doublewrite
        } else {
            FileKind::Log
        };
        let f = dst.open(&name, kind, true).unwrap();
        f.write_at(&src.read_durable(&name), 0).unwrap();
        f.sync().unwrap();
    }
    dst.sync_dir().unwrap();
    dst
}

fn flip_bit(sim: &SimStorage, file: &str, byte: u64, bit: u8) {
    let f = sim.open(file, FileKind::Data, false).unwrap();
    let mut b = [0u8; 1];
    f.read_at(&mut b, byte).unwrap();
    b[0] ^= 1 << bit;
    f.write_at(&b, byte).unwrap();
    f.sync().unwrap();
}

/// Flips one random bit in `[from, to)` of `file`; returns the byte offset.
fn flip_in(rng: &mut SmallRng, sim: &SimStorage, file: &str, from: u64, to: u64) -> u64 {
    let at = rng.gen_range(from..to);
    flip_bit(sim, file, at, rng.gen_range(0..8));
    at
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Leaf,
    Internal,
    Catalog,
    Overflow,
    FreePage,
    FileHeader,
    LogNeeded,
    LogBehindCheckpoint,
    CheckpointSlotOne,
    CheckpointSlotsBoth,
    DwbCopyBadPageFine,
    DwbHeader,
    TornPageGoodDwb,
    TornPageBadDwb,
}

const KINDS: [Kind; 14] = [
    Kind::Leaf,
    Kind::Internal,
    Kind::Catalog,
    Kind::Overflow,
    Kind::FreePage,
    Kind::FileHeader,
    Kind::LogNeeded,
    Kind::LogBehindCheckpoint,
    Kind::CheckpointSlotOne,
    Kind::CheckpointSlotsBoth,
    Kind::DwbCopyBadPageFine,
    Kind::DwbHeader,
    Kind::TornPageGoodDwb,
    Kind::TornPageBadDwb,
];

/// What the damage was: where, so that messages can be checked.
#[derive(Debug)]
enum Target {
    Page(u32),
    LogBlock {
        file: String,
        block: u64,
    },
    LogFile0,
    /// A doublewrite slot only (the data page is fine).
    DwbSlot,
    DwbHeader,
}

fn page_of(image: &[u8], p: usize) -> &[u8] {
    &image[p * PS..(p + 1) * PS]
}

/// Data pages of `ty` (optionally: at a level above 0, or owned by the catalog).
fn pages_where(image: &[u8], pred: impl Fn(&[u8]) -> bool) -> Vec<u32> {
    (1..image.len() / PS)
        .filter(|&p| {
            let b = page_of(image, p);
            page::verify(b, evenkeel::types::PageId(p as u32)).is_ok() && pred(b)
        })
        .map(|p| p as u32)
        .collect()
}

/// Valid doublewrite copies: (byte offset in the file, page number, LSN).
fn dwb_slots(sim: &SimStorage) -> Vec<(u64, u32, u64)> {
    evenkeel::dwb::copies_in(&sim.read_durable(DWB), PS)
        .iter()
        .filter_map(|c| Some((c.offset, c.page, c.lsn()?.0)))
        .collect()
}

/// Slots whose copy is the same version as the data page (the ones a repair would use).
fn current_dwb_slots(sim: &SimStorage) -> Vec<(u64, u32)> {
    let data = sim.read_durable(DATA);
    let slots = dwb_slots(sim);
    slots
        .iter()
        .filter(|&&(_, p, lsn)| {
            (p as usize + 1) * PS <= data.len()
                && page::hdr::lsn(page_of(&data, p as usize)).0 == lsn
                && slots.iter().filter(|s| s.1 == p).count() == 1
        })
        .map(|&(s, p, _)| (s, p))
        .collect()
}

struct LogView {
    bs: usize,
    payload: u64,
    blocks_per_file: u64,
    ring: u64,
    files: Vec<Vec<u8>>,
    checkpoint_lsn: u64,
    max_epoch: u32,
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

impl LogView {
    fn read(sim: &SimStorage) -> LogView {
        let mut files = Vec::new();
        while sim
            .durable_file_names()
            .contains(&format!("ib_logfile{}", files.len()))
        {
            files.push(sim.read_durable(&format!("ib_logfile{}", files.len())));
        }
        let bs = le32(&files[0], 8) as usize;
        let blocks_per_file = files[0].len() as u64 / bs as u64 - 3;
        let slot = |i: usize| {
            let b = &files[0][(1 + i) * bs..(2 + i) * bs];
            let ok = le32(b, bs - 4) == crc32c::crc32c(&b[..bs - 4]);
            ok.then(|| (le64(b, 8), le64(b, 16), le32(b, 24)))
        };
        let slots: Vec<_> = (0..2).filter_map(slot).collect();
        let newest = slots.iter().max_by_key(|s| s.0).unwrap();
        LogView {
            bs,
            payload: bs as u64 - 20,
            blocks_per_file,
            ring: blocks_per_file * files.len() as u64,
            checkpoint_lsn: newest.1,
            max_epoch: slots.iter().map(|s| s.2).max().unwrap(),
            files,
        }
    }

    fn locate(&self, block: u64) -> (usize, u64) {
        let r = block % self.ring;
        (
            (r / self.blocks_per_file) as usize,
            (3 + r % self.blocks_per_file) * self.bs as u64,
        )
    }

    /// (block number, epoch) if the block at ring position of `block` is valid as `block`.
    fn valid(&self, block: u64) -> Option<u32> {
        let (f, off) = self.locate(block);
        let b = &self.files[f][off as usize..off as usize + self.bs];
        let ok = le32(b, self.bs - 4) == crc32c::crc32c(&b[..self.bs - 4]);
        (ok && le64(b, 0) == block).then(|| le32(b, 8))
    }
}

/// Injects damage of `kind`; None when this database has nothing of that kind.
fn inject(rng: &mut SmallRng, sim: &SimStorage, kind: Kind) -> Option<Target> {
    let data = sim.read_durable(DATA);
    let ty = |b: &[u8]| page::hdr::page_type(b);
    let pick =
        |rng: &mut SmallRng, v: Vec<u32>| (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())]);
    let flip_page = |rng: &mut SmallRng, p: u32| {
        let base = p as u64 * PS as u64;
        for _ in 0..rng.gen_range(1..=3) {
            flip_in(rng, sim, DATA, base, base + PS as u64);
        }
        Target::Page(p)
    };
    match kind {
        Kind::Leaf => {
            let v = pages_where(&data, |b| {
                ty(b) == Some(PageType::Leaf) && page::hdr::owner(b) != 0
            });
            pick(rng, v).map(|p| flip_page(rng, p))
        }
        Kind::Internal => {
            let v = pages_where(&data, |b| ty(b) == Some(PageType::Internal));
            pick(rng, v).map(|p| flip_page(rng, p))
        }
        Kind::Catalog => {
            let v = pages_where(&data, |b| {
                matches!(ty(b), Some(PageType::Leaf | PageType::Internal))
                    && page::hdr::owner(b) == evenkeel::catalog::CATALOG_TABLE_ID
            });
            pick(rng, v).map(|p| flip_page(rng, p))
        }
        Kind::Overflow => {
            let v = pages_where(&data, |b| ty(b) == Some(PageType::Overflow));
            pick(rng, v).map(|p| flip_page(rng, p))
        }
        Kind::FreePage => {
            let v = pages_where(&data, |b| ty(b) == Some(PageType::Free));
            pick(rng, v).map(|p| flip_page(rng, p))
        }
        Kind::FileHeader => Some(flip_page(rng, 0)),
        Kind::LogNeeded | Kind::LogBehindCheckpoint => {
            let log = LogView::read(sim);
            let ckpt_block = log.checkpoint_lsn / log.payload;
            let candidates: Vec<u64> = if kind == Kind::LogNeeded {
                // blocks of the last run after the checkpoint with a later intact block of
                // the last run in the same file (not the last block written: see the module
                // notes of wal/reader.rs)
                (ckpt_block..ckpt_block + log.ring)
                    .take_while(|&b| log.valid(b).is_some())
                    .filter(|&b| {
                        log.valid(b) == Some(log.max_epoch)
                            && log.valid(b + 1) == Some(log.max_epoch)
                            && log.locate(b).0 == log.locate(b + 1).0
                    })
                    .collect()
            } else {
                // valid blocks wholly before the checkpoint's block
                (ckpt_block.saturating_sub(log.ring - 1)..ckpt_block)
                    .filter(|&b| log.valid(b).is_some())
                    .collect()
            };
            let b = *candidates.get(rng.gen_range(0..candidates.len().max(1)))?;
            let (f, off) = log.locate(b);
            let name = format!("ib_logfile{f}");
            // past the 16-byte block header: damage there is taken for a torn end (documented)
            flip_in(rng, sim, &name, off + 16, off + log.bs as u64);
            Some(Target::LogBlock {
                file: name,
                block: b,
            })
        }
        Kind::CheckpointSlotOne | Kind::CheckpointSlotsBoth => {
            let log = LogView::read(sim);
            let bs = log.bs as u64;
            let slots: Vec<u64> = if kind == Kind::CheckpointSlotOne {
                vec![rng.gen_range(1..=2)]
            } else {
                vec![1, 2]
            };
            for s in slots {
                flip_in(rng, sim, "ib_logfile0", s * bs, (s + 1) * bs);
            }
            Some(Target::LogFile0)
        }
        Kind::DwbCopyBadPageFine => {
            let slots = dwb_slots(sim);
            let (at, _, _) = *slots.get(rng.gen_range(0..slots.len().max(1)))?;
            // inside the copy (its header and the first of its stored bytes)
            flip_in(rng, sim, DWB, at, at + 64);
            Some(Target::DwbSlot)
        }
        Kind::DwbHeader => {
            flip_in(rng, sim, DWB, 0, PS as u64);
            Some(Target::DwbHeader)
        }
        Kind::TornPageGoodDwb | Kind::TornPageBadDwb => {
            let slots = current_dwb_slots(sim);
            let (s, p) = *slots.get(rng.gen_range(0..slots.len().max(1)))?;
            // a torn write: the second part of the page keeps bytes of no version of it
            let base = p as u64 * PS as u64;
            let cut = rng.gen_range(512..PS as u64 - 512);
            let f = sim.open(DATA, FileKind::Data, false).unwrap();
            f.write_at(&vec![0xA5; PS - cut as usize], base + cut)
                .unwrap();
            f.sync().unwrap();
            if kind == Kind::TornPageBadDwb {
                flip_in(rng, sim, DWB, s, s + 64);
            }
            Some(Target::Page(p))
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    injected: u64,
    refused: u64,
    repaired: u64,
    at_read: u64,
    harmless: u64,
    wrong: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Refused,
    Repaired,
    AtRead,
    Harmless,
}

/// The error names the damaged thing and what is wrong with it.
fn check_message(e: &Error, target: &Target, ctx: &str) {
    let text = e.to_string();
    match target {
        Target::Page(p) => match e {
            Error::CorruptPage { file, page, reason } => {
                assert!(file.ends_with(DATA), "{ctx}: {text}");
                assert_eq!(*page, *p, "{ctx}: {text}");
                assert!(
                    reason.contains("checksum") || reason.contains("beyond the end"),
                    "{ctx}: {text}"
                );
            }
            Error::BadDatabase { path, reason } => {
                assert_eq!(*p, 0, "{ctx}: {text}");
                assert!(path.ends_with(DATA), "{ctx}: {text}");
                assert!(reason.contains("file header"), "{ctx}: {text}");
            }
            _ => panic!("{ctx}: unexpected error {text}"),
        },
        Target::LogBlock { file, block } => match e {
            Error::BadDatabase { path, reason } => {
                assert!(path.ends_with(file), "{ctx}: {text}");
                assert!(reason.contains(&format!("block {block} ")), "{ctx}: {text}");
                assert!(
                    reason.contains("LSN") && reason.contains("checksum mismatch"),
                    "{ctx}: {text}"
                );
            }
            // a data page newer than the readable log end names that page and both LSNs
            Error::CorruptPage { reason, .. } => {
                assert!(reason.contains("beyond the end"), "{ctx}: {text}")
            }
            _ => panic!("{ctx}: unexpected error {text}"),
        },
        Target::LogFile0 => match e {
            Error::BadDatabase { path, reason } => {
                assert!(path.ends_with("ib_logfile0"), "{ctx}: {text}");
                assert!(reason.contains("checkpoint slot"), "{ctx}: {text}");
                assert!(reason.contains("offset"), "{ctx}: {text}");
            }
            Error::CorruptPage { reason, .. } => {
                assert!(reason.contains("beyond the end"), "{ctx}: {text}")
            }
            _ => panic!("{ctx}: unexpected error {text}"),
        },
        Target::DwbSlot => panic!("{ctx}: a bad doublewrite copy of a good page refused: {text}"),
        // only a flip in the format version field leaves a header that is not plainly damaged
        Target::DwbHeader => match e {
            Error::BadDatabase { path, reason } => {
                assert!(path.ends_with(DWB), "{ctx}: {text}");
                assert!(reason.contains("format version"), "{ctx}: {text}");
            }
            _ => panic!("{ctx}: unexpected error {text}"),
        },
    }
}

/// Opens the damaged database and classifies what happened; panics on wrong data or on damage
/// that went unnoticed.
/// Pages recovery restores from the doublewrite area on the undamaged copy: in-place writes
/// the crash dropped after their slot copies were durable (the crash's normal outcome, not
/// damage). Recovery is deterministic over the files, so the damaged copies restore these too.
fn crash_restores(base: &SimStorage) -> u64 {
    let db = Database::open_in(Arc::new(copy(base)), campaign_opts()).unwrap();
    let n = db.status().recovery.pages_repaired_from_doublewrite;
    db.close().unwrap();
    n
}

fn run_one(
    base: &SimStorage,
    crash_restored: u64,
    model: &Model,
    seed: u64,
    kind: Kind,
    ctx: &str,
    wrong: &mut Vec<String>,
) -> Option<Outcome> {
    let sim = copy(base);
    let mut rng = SmallRng::seed_from_u64(seed ^ (kind as u64) << 40);
    let target = inject(&mut rng, &sim, kind)?;
    let ctx = format!("{ctx} target {target:?}");
    let db = match Database::open_in(Arc::new(sim.clone()), campaign_opts()) {
        Err(e) => {
            check_message(&e, &target, &ctx);
            assert!(
                kind != Kind::LogBehindCheckpoint && kind != Kind::DwbCopyBadPageFine,
                "{ctx}: damage that recovery does not need refused the open: {e}"
            );
            return Some(Outcome::Refused);
        }
        Ok(db) => db,
    };
    let r = db.status().recovery;
    // every row: point reads and scans; a row read successfully must be the model's
    let mut read_errors = 0u64;
    for name in TABLES {
        let t = match db.table(name) {
            Ok(t) => t,
            Err(e) => panic!("{ctx}: table {name} lost: {e}"),
        };
        let m = &model[name];
        for (k, v) in m {
            match db.begin().get(&t, k) {
                Ok(Some(got)) if got == *v => {}
                Ok(Some(_)) => wrong.push(format!("{ctx}: {name} {k:?}: wrong value")),
                Ok(None) => wrong.push(format!("{ctx}: {name} {k:?}: row missing")),
                Err(e) => {
                    check_message(&e, &target, &ctx);
                    read_errors += 1;
                }
            }
        }
        let txn = db.begin();
        let mut seen = 0usize;
        let mut scan_failed = false;
        match txn.scan(&t, Bound::Unbounded, Bound::Unbounded, false) {
            Ok(it) => {
                for row in it {
                    match row {
                        Ok((k, v)) => {
                            if m.get(&k) != Some(&v) {
                                wrong.push(format!("{ctx}: {name} scan: wrong row {k:?}"));
                            }
                            seen += 1;
                        }
                        Err(e) => {
                            check_message(&e, &target, &ctx);
                            scan_failed = true;
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                check_message(&e, &target, &ctx);
                scan_failed = true;
            }
        }
        if !scan_failed && seen != m.len() {
            wrong.push(format!(
                "{ctx}: {name}: scan returned {seen} rows of {} without an error",
                m.len()
            ));
        }
        read_errors += u64::from(scan_failed);
    }
    let corrupt_reads = db.status().buffer.pages_read_corrupt;
    assert!(
        read_errors == 0 || corrupt_reads > 0,
        "{ctx}: {read_errors} failed reads, none counted in pages_read_corrupt"
    );
    let report = db.check().unwrap();
    let repaired = r
        .pages_repaired_from_doublewrite
        .saturating_sub(crash_restored)
        + r.checkpoint_slots_repaired
        + u64::from(r.doublewrite_header_repaired);
    let outcome = if read_errors > 0 || !report.is_ok() {
        let Target::Page(p) = target else {
            panic!(
                "{ctx}: reads failed after open for damage outside the data file: {:?}",
                report.problems
            )
        };
        assert!(
            report
                .problems
                .iter()
                .any(|q| q.page == p && q.file.ends_with(DATA)),
            "{ctx}: check does not report page {p}: {:?}",
            report.problems
        );
        Outcome::AtRead
    } else if repaired > 0 || r.doublewrite_slots_corrupt > 0 || r.corruptions_detected > 0 {
        assert!(
            r.corruptions_detected > 0,
            "{ctx}: repair not counted: {r:?}"
        );
        Outcome::Repaired
    } else {
        Outcome::Harmless
    };
    match kind {
        Kind::LogBehindCheckpoint => {
            assert_eq!(outcome, Outcome::Harmless, "{ctx}: {r:?}")
        }
        Kind::CheckpointSlotOne => {
            assert_eq!(r.checkpoint_slots_repaired, 1, "{ctx}: {r:?}");
        }
        Kind::DwbCopyBadPageFine => {
            assert!(r.doublewrite_slots_corrupt >= 1, "{ctx}: {r:?}");
        }
        Kind::DwbHeader => {
            assert!(r.doublewrite_header_repaired, "{ctx}: {r:?}");
        }
        Kind::TornPageGoodDwb => {
            assert!(r.pages_repaired_from_doublewrite >= 1, "{ctx}: {r:?}");
            assert_eq!(outcome, Outcome::Repaired, "{ctx}");
        }
        Kind::FileHeader if outcome == Outcome::Repaired => {
            assert!(r.file_header_repaired, "{ctx}: {r:?}")
        }
        // A page flip must be noticed: repaired, or reported when read. (A page that no read
        // reaches, like a free page, is still reported by check.)
        _ => assert!(
            outcome != Outcome::Harmless,
            "{ctx}: damage went unnoticed: {r:?}"
        ),
    }
    db.close().unwrap();
    Some(outcome)
}

fn runs() -> u64 {
    std::env::var("EVENKEEL_CORRUPT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[test]
fn corruption_campaign() {
    let seeds: Vec<u64> = match std::env::var("EVENKEEL_CORRUPT_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (0..runs()).collect(),
    };
    let mut tally: BTreeMap<(Kind, &str), Tally> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    for &seed in &seeds {
        for crashed in [false, true] {
            let variant = if crashed { "crashed" } else { "clean" };
            let (base, model) = build(seed, crashed);
            let crash_restored = crash_restores(&base);
            for kind in KINDS {
                if kind == Kind::LogNeeded && !crashed {
                    continue; // after a clean close recovery needs no log
                }
                let ctx = format!("seed {seed} {variant} {kind:?}");
                let mut wrong = Vec::new();
                let Some(outcome) =
                    run_one(&base, crash_restored, &model, seed, kind, &ctx, &mut wrong)
                else {
                    continue;
                };
                let t = tally.entry((kind, variant)).or_default();
                t.injected += 1;
                t.wrong += u64::from(!wrong.is_empty());
                failures.extend(wrong.into_iter().take(5));
                match outcome {
                    Outcome::Refused => t.refused += 1,
                    Outcome::Repaired => t.repaired += 1,
                    Outcome::AtRead => t.at_read += 1,
                    Outcome::Harmless => t.harmless += 1,
                }
            }
        }
    }
    eprintln!(
        "{:<22} {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}",
        "kind", "variant", "injected", "refused", "repaired", "at read", "harmless", "wrong"
    );
    for ((kind, variant), t) in &tally {
        eprintln!(
            "{:<22} {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}",
            format!("{kind:?}"),
            variant,
            t.injected,
            t.refused,
            t.repaired,
            t.at_read,
            t.harmless,
            t.wrong
        );
    }
    assert!(
        failures.is_empty(),
        "wrong data served:\n{}",
        failures.join("\n")
    );
    // every kind was exercised in both variants (LogNeeded: crashed only)
    for kind in KINDS {
        for variant in ["clean", "crashed"] {
            if kind == Kind::LogNeeded && variant == "clean" {
                continue;
            }
            assert!(
                tally.get(&(kind, variant)).is_some_and(|t| t.injected > 0),
                "{kind:?} {variant}: nothing of this kind to damage"
            );
        }
    }
}
