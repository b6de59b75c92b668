//! Tests of the doublewrite area on the simulated disk: the header, the write path's order and
//! fail-stop, and torn-page repair after each kind of crash. Concurrent writers with a crash in
//! flight are in `concurrency.rs`; figures on real files in `figures.rs`. Each test names the
//! invariant (D1..D5, `dwb/mod.rs`) it would catch.

#![allow(clippy::unwrap_used)]

mod concurrency;
mod figures;
mod trace;

use super::*;
use crate::error::Error;
use crate::io::sim::{CrashMode, Fault, FaultKind, FaultOp};
use crate::io::{File, FileKind, SimStorage, Storage};
use crate::page::{self, hdr, PageType};
use crate::types::{Lsn, PageId};
use std::sync::Arc;

pub(super) const PS: usize = 4096;
pub(super) const DATA: &str = "data";

/// A sealed overflow page whose bytes depend on (page, lsn), so a mix-up is visible.
pub(super) fn image(page_no: u32, lsn: u64, ps: usize) -> Vec<u8> {
    let mut b = vec![0u8; ps];
    page::init(&mut b, PageId(page_no), PageType::Overflow, 1);
    let fill: Vec<u8> = (0..page::overflow_capacity(ps) as u64)
        .map(|i| (i.wrapping_mul(31) ^ lsn.wrapping_mul(131) ^ (u64::from(page_no) * 17)) as u8)
        .collect();
    page::overflow::write(&mut b, &fill, PageId::NONE);
    hdr::set_lsn(&mut b, Lsn(lsn));
    page::seal(&mut b);
    b
}

/// Writes `(page, lsn)` images through the doublewrite.
pub(super) fn write(dwb: &Doublewrite, data: &dyn File, items: &[(u32, u64)]) -> Result<(), Error> {
    let images: Vec<(PageId, Vec<u8>)> = items
        .iter()
        .map(|&(p, l)| (PageId(p), image(p, l, dwb.page_size())))
        .collect();
    let refs: Vec<(PageId, &[u8])> = images.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    dwb.write_batch(data, &refs)
}

/// The data file with `pages` valid pages at LSN 1, durable (file and directory entry).
pub(super) fn data_file(sim: &SimStorage, pages: u32) -> Arc<dyn File> {
    let f = sim.open(DATA, FileKind::Data, true).unwrap();
    for p in 0..pages {
        f.write_at(&image(p, 1, PS), u64::from(p) * PS as u64)
            .unwrap();
    }
    f.sync().unwrap();
    sim.sync_dir().unwrap();
    f
}

/// The offsets of the durable copies of page `p` in the doublewrite file, with their LSNs
/// (None: corrupt).
fn copies_of(sim: &SimStorage, p: u32) -> Vec<(u64, Option<u64>)> {
    copies_in(&sim.read_durable(DWB_FILE_NAME), PS)
        .iter()
        .filter(|c| c.page == p)
        .map(|c| (c.offset, c.lsn().map(|l| l.0)))
        .collect()
}

/// Writes `items` through segment 1 of a two-segment `dwb` (segment 0 held busy meanwhile).
fn write_in_second_segment(dwb: &Doublewrite, data: &dyn File, items: &[(u32, u64)]) {
    let busy = dwb.segments[0].lock();
    write(dwb, data, items).unwrap();
    drop(busy);
}

/// After a crash: fresh handles on both files.
fn reopen(sim: &SimStorage, slots: usize) -> (Doublewrite, Arc<dyn File>) {
    let dwb = Doublewrite::open(sim, PS, slots).unwrap();
    (dwb, sim.open(DATA, FileKind::Data, false).unwrap())
}

/// The durable bytes of page `p` (panics if the file is too short).
fn durable_page(sim: &SimStorage, p: u32) -> Vec<u8> {
    let all = sim.read_durable(DATA);
    let start = p as usize * PS;
    all[start..start + PS].to_vec()
}

fn assert_page(sim: &SimStorage, p: u32, lsn: u64) {
    let b = durable_page(sim, p);
    page::verify(&b, PageId(p)).unwrap_or_else(|f| panic!("page {p}: {f}"));
    assert_eq!(hdr::lsn(&b), Lsn(lsn), "page {p}");
    assert_eq!(b, image(p, lsn, PS), "page {p} content");
}

fn fault(file: &str, op: FaultOp) -> Fault {
    Fault {
        file: Some(file.into()),
        op,
        after: 0,
        kind: FaultKind::Eio,
        persistent: false,
    }
}

#[test]
fn open_creates_durably_and_checks_geometry() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    assert_eq!(sim.durable_file_names(), [DWB_FILE_NAME]);
    let data = data_file(&sim, 4);
    write(&dwb, &*data, &[(1, 5)]).unwrap();
    drop(dwb);
    sim.crash();
    Doublewrite::open(&sim, PS, 8).unwrap();
    // Slots were written: another page size would misread them (another slot count would not:
    // `slot_count_change_keeps_every_slot_readable`).
    let e = Doublewrite::open(&sim, 8192, 8).unwrap_err().to_string();
    assert!(e.contains("page_size = 4096"), "{e}");
    for (ps, slots) in [(1000, 8), (PS, 0), (PS, MAX_SLOTS + 1), (65536, 2048)] {
        let e = Doublewrite::open(&sim, ps, slots).unwrap_err();
        assert!(
            matches!(e, Error::InvalidConfig { .. }),
            "{ps} {slots}: {e}"
        );
    }
    for (segments, per) in [(0, 8), (4, 0), (MAX_SLOTS + 1, 1), (64, 65)] {
        let e = Doublewrite::open_segments(&sim, PS, segments, per).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, Error::InvalidConfig { .. }) && text.contains("valid range"),
            "{segments} x {per}: {text}"
        );
    }
}

/// The slot count follows write_io_threads: a file written with 2 segments of 4 slots and
/// reopened with 1 segment of 4 still has its page 5 copy (slot 4, the second segment) used to
/// repair a torn in-place write, and its header is rewritten for the new count.
#[test]
fn slot_count_change_keeps_every_slot_readable() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
    assert_eq!(
        (dwb.slots(), dwb.segment_count(), dwb.slots_per_segment()),
        (8, 2, 4)
    );
    let data = data_file(&sim, 8);
    write(&dwb, &*data, &[(1, 3)]).unwrap(); // segment 0 (slot 0)
    sim.inject(fault(DATA, FaultOp::Sync));
    let busy = dwb.segments[0].lock();
    write(&dwb, &*data, &[(5, 9)]).unwrap_err(); // segment 1 (slot 4), data fsync fails
    drop(busy);
    sim.crash_with(CrashMode::TearLastWrite {
        file: Some(DATA.into()),
        keep_bytes: 300,
    });
    assert!(page::verify(&durable_page(&sim, 5), PageId(5)).is_err());
    let second = (PS + super::format::seg_bytes(PS, 4)) as u64;
    assert_eq!(
        copies_of(&sim, 5),
        [(second + 64, Some(9))],
        "the copy sits in the second segment"
    );

    let (dwb, data) = reopen(&sim, 4);
    assert!(!dwb.header_repaired(), "a resize is not damage");
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [5], "{r:?}");
    assert_eq!(r.slots_valid, 2, "{r:?}");
    sim.crash();
    assert_page(&sim, 5, 9);
    assert_page(&sim, 1, 3);
    // The header now says 4 slots: durable, and a plain reopen with 4 finds it valid.
    super::header::check(&sim.read_durable(DWB_FILE_NAME)[..PS], PS, 4).unwrap();
    Doublewrite::open(&sim, PS, 4).unwrap();
}

/// A damaged header over slots is rewritten and the slots still repair a torn page; a valid
/// header of another version is an error naming the file.
#[test]
fn corrupted_header_is_rewritten_and_slots_still_used() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 4).unwrap();
    let data = data_file(&sim, 4);
    write(&dwb, &*data, &[(2, 5)]).unwrap();
    let f = sim
        .open(DWB_FILE_NAME, FileKind::Doublewrite, false)
        .unwrap();
    f.write_at(&[0xAA; 8], 100).unwrap();
    f.sync().unwrap();
    data.write_at(&[0x66; 16], 2 * PS as u64 + 900).unwrap(); // page 2 damaged in place
    data.sync().unwrap();
    sim.crash();
    let (dwb, data) = reopen(&sim, 4);
    assert!(dwb.header_repaired());
    assert_eq!(dwb.recover(&*data).unwrap().pages_repaired, [2]);
    assert_page(&sim, 2, 5);
    // The header is rewritten before the next write, not before recovery has read the area.
    sim.crash();
    let (dwb, data) = reopen(&sim, 4);
    assert!(dwb.header_repaired(), "not rewritten before a write");
    dwb.recover(&*data).unwrap();
    write(&dwb, &*data, &[(3, 6)]).unwrap();
    sim.crash();
    let (dwb, _) = reopen(&sim, 4);
    assert!(!dwb.header_repaired(), "rewritten durably");

    let mut other = super::header::encode(PS, 4);
    other[4..8].copy_from_slice(&4u32.to_le_bytes());
    let body = PS - 4;
    let crc = crc32c::crc32c(&other[..body]);
    other[body..].copy_from_slice(&crc.to_le_bytes());
    let f = sim
        .open(DWB_FILE_NAME, FileKind::Doublewrite, false)
        .unwrap();
    f.write_at(&other, 0).unwrap();
    f.sync().unwrap();
    let e = Doublewrite::open(&sim, PS, 4).unwrap_err();
    assert!(matches!(e, Error::BadDatabase { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(DWB_FILE_NAME) && text.contains("version 4"),
        "{text}"
    );
}

#[test]
fn interrupted_create_is_redone() {
    // The file exists (directory entry durable) but its header never reached the disk.
    let sim = SimStorage::new();
    sim.open(DWB_FILE_NAME, FileKind::Doublewrite, true)
        .unwrap();
    sim.sync_dir().unwrap();
    sim.crash();
    assert_eq!(sim.durable_len(DWB_FILE_NAME), 0);
    Doublewrite::open(&sim, PS, 4).unwrap();
    sim.crash();
    assert_eq!(
        sim.durable_len(DWB_FILE_NAME),
        PS as u64,
        "header written and fsynced"
    );
    Doublewrite::open(&sim, PS, 4).unwrap();
}

/// D1, D2: after `write_batch` returns, a crash loses nothing; stats count each step.
#[test]
fn write_batch_is_durable_across_a_crash() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8)
        .unwrap()
        .with_compression(Compression::Zstd);
    let data = data_file(&sim, 8);
    write(&dwb, &*data, &[(7, 4), (2, 4), (3, 4)]).unwrap();
    let s = dwb.stats();
    assert_eq!((s.batches, s.pages_written, s.fsyncs), (1, 3, 2));
    assert_eq!(s.bytes_written, s.copy_bytes + 3 * PS as u64);
    assert!(
        s.copy_bytes < 3 * PS as u64 / 2,
        "the copies are compressed: {s:?}"
    );
    assert_eq!(
        s.data_writes, 2,
        "pages 2-3 are one in-place write, 7 another"
    );
    sim.crash();
    for p in [2, 3, 7] {
        assert_page(&sim, p, 4);
    }
    assert_page(&sim, 1, 1);
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.pages_checked), (3, 3));
    assert_eq!((r.slots_empty, r.slots_corrupt), (5, 0));
    assert!(r.pages_repaired.is_empty());
}

/// D3 for each way of storing copies: a torn in-place write is repaired from its copy, and
/// a copy written one way is read whatever the reader is set to write.
#[test]
fn every_compression_repairs_a_torn_page() {
    for (kind, smaller) in [
        (Compression::None, false),
        (Compression::Lz4, true),
        (Compression::Zstd, true),
        // auto writes raw until it has measured that the device is busy and the CPUs idle.
        (Compression::Auto, false),
        // trim leaves out a B+tree page's free space; these are overflow pages.
        (Compression::Trim, false),
    ] {
        let sim = SimStorage::new();
        let dwb = Doublewrite::open(&sim, PS, 8)
            .unwrap()
            .with_compression(kind);
        let data = data_file(&sim, 8);
        write(&dwb, &*data, &[(3, 4)]).unwrap();
        let s = dwb.stats();
        assert_eq!(
            s.copy_bytes <= PS as u64,
            smaller,
            "{kind:?}: {s:?} (a raw copy takes more than a page with its header)"
        );
        assert_eq!(s.copies_compressed, u64::from(smaller), "{kind:?}: {s:?}");
        sim.tear_next_write(DATA, 100);
        write(&dwb, &*data, &[(5, 9), (6, 9)]).unwrap_err();
        sim.crash();
        assert!(page::verify(&durable_page(&sim, 5), PageId(5)).is_err());
        let (dwb, data) = reopen(&sim, 8);
        let dwb = dwb.with_compression(Compression::None);
        let r = dwb.recover(&*data).unwrap();
        assert_eq!(r.pages_repaired, [5, 6], "{kind:?}: {r:?}");
        sim.crash();
        assert_page(&sim, 5, 9);
        assert_page(&sim, 6, 9);
    }
}

/// D3 for trimmed copies: B+tree leaves whose free space holds old bytes, written with trim, one
/// of them torn in place; recovery restores it from a copy without its free space, and the
/// page restored verifies and holds every cell it held.
#[test]
fn a_torn_leaf_is_repaired_from_its_trimmed_copy() {
    let leaf = |p: u32, cells: usize, lsn: u64| {
        super::format::tests::leaf_with_old_free_space(PS, p, cells, lsn)
    };
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8)
        .unwrap()
        .with_compression(Compression::Trim);
    let data = data_file(&sim, 8);
    let first = [leaf(5, 10, 8), leaf(6, 30, 8)];
    let refs: Vec<(PageId, &[u8])> = vec![(PageId(5), &first[0]), (PageId(6), &first[1])];
    dwb.write_batch(&*data, &refs).unwrap();
    let s = dwb.stats();
    assert_eq!((s.copies_trimmed, s.copies_compressed), (2, 0), "{s:?}");
    assert!(s.copy_bytes <= PS as u64, "two copies in one block: {s:?}");
    let images = [leaf(5, 12, 9), leaf(6, 40, 9)];
    let refs: Vec<(PageId, &[u8])> = vec![(PageId(5), &images[0]), (PageId(6), &images[1])];
    sim.tear_next_write(DATA, 100);
    dwb.write_batch(&*data, &refs).unwrap_err();
    sim.crash();
    assert!(page::verify(&durable_page(&sim, 5), PageId(5)).is_err());
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [5, 6], "{r:?}");
    sim.crash();
    for (p, img) in [(5u32, &images[0]), (6, &images[1])] {
        let b = durable_page(&sim, p);
        page::verify(&b, PageId(p)).unwrap_or_else(|f| panic!("page {p}: {f}"));
        assert_eq!(hdr::lsn(&b), Lsn(9));
        let n = page::node::nslots(img);
        assert_eq!(page::node::nslots(&b), n);
        for i in 0..n {
            assert_eq!(
                page::node::key(&b, i),
                page::node::key(img, i),
                "page {p} cell {i}"
            );
            assert_eq!(
                page::node::leaf_value(&b, i),
                page::node::leaf_value(img, i),
                "page {p} cell {i}"
            );
        }
        let gap = page::node::slot_pos(n)..hdr::heap_top(&b);
        assert!(
            b[gap].iter().all(|&x| x == 0),
            "page {p}: zeros where the free space was"
        );
    }
}

/// D3: the in-place write is torn after the slot copy was durable; recover restores the page.
#[test]
fn torn_in_place_write_is_repaired() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    sim.tear_next_write(DATA, 100);
    let e = write(&dwb, &*data, &[(5, 9)]).unwrap_err();
    assert!(e.to_string().contains(DATA), "{e}");
    sim.crash();
    let torn = durable_page(&sim, 5);
    assert!(
        page::verify(&torn, PageId(5)).is_err(),
        "the scenario must tear page 5"
    );

    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [5]);
    assert_eq!(dwb.stats().pages_repaired, 1);
    sim.crash(); // the repair itself was made durable
    assert_page(&sim, 5, 9);
    let (dwb, data) = reopen(&sim, 8);
    assert!(
        dwb.recover(&*data).unwrap().pages_repaired.is_empty(),
        "idempotent"
    );
}

/// D3: a crash between the phases (data fsync failed) with the last in-place write torn and the
/// earlier one lost: the torn page and the older page are restored, the intact one is left.
#[test]
fn crash_between_phases_restores_torn_and_lost_pages() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    sim.inject(fault(DATA, FaultOp::Sync));
    let e = write(&dwb, &*data, &[(1, 5), (3, 5), (4, 5)]).unwrap_err();
    assert!(e.to_string().contains("fsync of data"), "{e}");
    assert_eq!(sim.unsynced_write_count(DATA), 2, "runs [1] and [3, 4]");
    sim.crash_with(CrashMode::TearLastWrite {
        file: Some(DATA.into()),
        keep_bytes: PS + 50,
    });
    assert_page(&sim, 1, 1); // lost: still the old version
    assert_page(&sim, 3, 5); // landed whole
    assert!(page::verify(&durable_page(&sim, 4), PageId(4)).is_err()); // torn

    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [1, 4]);
    assert_eq!(r.pages_checked, 3);
    sim.crash();
    for p in [1, 3, 4] {
        assert_page(&sim, p, 5);
    }
}

/// D1, D3: a torn doublewrite write leaves the data file untouched and is never restored.
#[test]
fn torn_doublewrite_write_is_never_restored() {
    // keep_bytes inside the first copy: nothing new is valid. Past it: the first copy is whole
    // and valid (newer than the data copy, so it is restored: harmless, the WAL rule allowed
    // writing it), the second is torn and ignored.
    let mut coder = super::format::Coder::new(Default::default(), PS);
    let mut entry = vec![0; super::format::max_entry(PS)];
    let first = super::format::encode_entry(PageId(2), &image(2, 7, PS), &mut entry, &mut coder);
    let second_at = super::format::FIRST_ENTRY + first;
    for (keep, page2_after) in [(100, 3), (second_at + 40, 7)] {
        let sim = SimStorage::new();
        let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
        let data = data_file(&sim, 8);
        write(&dwb, &*data, &[(2, 3), (6, 3)]).unwrap();
        let before = sim.read_current(DATA);
        sim.tear_next_write(DWB_FILE_NAME, keep);
        let e = write(&dwb, &*data, &[(2, 7), (6, 7)]).unwrap_err();
        assert!(e.to_string().contains(DWB_FILE_NAME), "{e}");
        assert_eq!(
            sim.unsynced_write_count(DATA),
            0,
            "nothing written in place"
        );
        assert_eq!(sim.read_current(DATA), before);
        sim.crash();

        let (dwb, data) = reopen(&sim, 8);
        let r = dwb.recover(&*data).unwrap();
        // The only valid copy at LSN 7 is the whole first one (an older chunk's second copy,
        // page 6 at LSN 3, may still read where the torn chunk's second copy should be).
        let newest = r.newest_slot.map(|(lsn, p)| (lsn.0, p));
        let expect_newest = if page2_after == 7 {
            Some((7, 2))
        } else {
            Some((3, 6))
        };
        assert_eq!(newest, expect_newest, "keep {keep}: {r:?}");
        assert!(r.slots_corrupt >= 1, "keep {keep}: {r:?}");
        let expect: &[u32] = if page2_after == 7 { &[2] } else { &[] };
        assert_eq!(r.pages_repaired, expect, "keep {keep}");
        sim.crash();
        assert_page(&sim, 2, page2_after);
        assert_page(&sim, 6, 3);
    }
}

/// D3, D5: a data copy newer than every slot copy (and a stale older slot) is left alone.
#[test]
fn newer_in_place_copy_is_not_overwritten() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
    let data = data_file(&sim, 8);
    write_in_second_segment(&dwb, &*data, &[(1, 10), (4, 10)]); // page 4 at 10 (stale later)
    write(&dwb, &*data, &[(4, 20)]).unwrap(); // segment 0: page 4 at 20
                                              // Page 4 written in place without the doublewrite (as with doublewrite off).
    data.write_at(&image(4, 30, PS), 4 * PS as u64).unwrap();
    data.sync().unwrap();
    sim.crash();
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.pages_checked), (3, 2));
    assert!(r.pages_repaired.is_empty(), "{r:?}");
    sim.crash();
    assert_page(&sim, 4, 30);
    assert_page(&sim, 1, 10);
}

/// D1, D2 with chunks: a batch larger than the slot count goes through in slot-sized chunks,
/// each in the full order, and survives a crash.
#[test]
fn batch_larger_than_slots_is_split_into_chunks() {
    let sim = SimStorage::new();
    let traced = trace::traced(&sim, PS);
    let dwb = Doublewrite::open(&traced, PS, 4).unwrap();
    drop(data_file(&sim, 16));
    let data = traced.open(DATA, FileKind::Data, false).unwrap();
    let items: Vec<(u32, u64)> = (0..11).map(|i| ((i * 5) % 16, 8)).collect();
    write(&dwb, &*data, &items).unwrap();
    let s = dwb.stats();
    assert_eq!((s.batches, s.pages_written, s.fsyncs), (3, 11, 6));
    let checked = trace::check_order(&traced.ops.lock(), DATA);
    assert_eq!(checked, 11);
    sim.crash();
    for &(p, lsn) in &items {
        assert_page(&sim, p, lsn);
    }
}

/// D3: a page twice in one batch is written oldest first, and recovery picks the newest slot
/// copy even when an older one sits in an earlier slot.
#[test]
fn duplicate_page_in_a_batch_restores_the_newest_copy() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    sim.inject(fault(DATA, FaultOp::Sync));
    write(&dwb, &*data, &[(4, 20), (2, 20), (4, 10)]).unwrap_err();
    assert_eq!(sim.read_current(DATA)[4 * PS..5 * PS], image(4, 20, PS));
    sim.crash_with(CrashMode::TearLastWrite {
        file: Some(DATA.into()),
        keep_bytes: 100,
    });
    assert!(page::verify(&durable_page(&sim, 4), PageId(4)).is_err());
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.pages_checked), (3, 2));
    assert_eq!(r.pages_repaired, [2, 4]);
    sim.crash();
    assert_page(&sim, 2, 20);
    assert_page(&sim, 4, 20);
}

/// D1, D4: EIO on the doublewrite fsync: an error naming the file, nothing written in place,
/// and every later batch refused.
#[test]
fn eio_on_doublewrite_fsync_writes_nothing_in_place() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    let before = sim.read_current(DATA);
    sim.inject(fault(DWB_FILE_NAME, FaultOp::Sync));
    let e = write(&dwb, &*data, &[(3, 6), (5, 6)]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(DWB_FILE_NAME) && text.contains("fsync"),
        "{text}"
    );
    assert_eq!(sim.unsynced_write_count(DATA), 0);
    assert_eq!(sim.read_current(DATA), before);
    let e = write(&dwb, &*data, &[(3, 6)]).unwrap_err();
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    assert!(e.to_string().contains(DWB_FILE_NAME), "{e}");
    assert_eq!(sim.read_current(DATA), before, "not retried");
    assert_eq!(dwb.stats().batches, 0);
}

/// D4: EIO on an in-place write names the data file and poisons.
#[test]
fn eio_on_in_place_write_names_the_data_file() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    sim.inject(fault(DATA, FaultOp::Write));
    let e = write(&dwb, &*data, &[(3, 6)]).unwrap_err();
    assert!(e.to_string().contains("write of data"), "{e}");
    assert!(matches!(
        write(&dwb, &*data, &[(3, 6)]),
        Err(Error::Poisoned(_))
    ));
}

/// D3: a data file too short for a page counts as torn; recovery extends it.
#[test]
fn short_data_file_counts_as_torn() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 4);
    sim.inject(fault(DATA, FaultOp::Sync));
    write(&dwb, &*data, &[(6, 4)]).unwrap_err();
    sim.crash();
    assert_eq!(sim.durable_len(DATA), 4 * PS as u64);
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [6]);
    sim.crash();
    assert_eq!(sim.durable_len(DATA), 7 * PS as u64);
    assert_page(&sim, 6, 4);
}

/// D3: a corrupted slot is counted and never used, even when the data copy is broken too.
#[test]
fn corrupt_slot_is_counted_and_not_used() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 8);
    write(&dwb, &*data, &[(2, 5), (3, 5)]).unwrap();
    let f = sim
        .open(DWB_FILE_NAME, FileKind::Doublewrite, false)
        .unwrap();
    let [(at, Some(5))] = copies_of(&sim, 3)[..] else {
        panic!("one copy of page 3")
    };
    f.write_at(&[0x55; 16], at + 40).unwrap(); // inside page 3's copy
    f.sync().unwrap();
    data.write_at(&[0x66; 16], 3 * PS as u64 + 900).unwrap();
    data.sync().unwrap();
    let broken = durable_page(&sim, 3);
    sim.crash();
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.slots_corrupt), (1, 1));
    assert!(r.pages_repaired.is_empty());
    assert_eq!(durable_page(&sim, 3), broken, "garbage is not restored");
    assert_eq!(r.pages_unrepairable.len(), 1, "{r:?}");
    assert_eq!(r.pages_unrepairable[0].0, 3);
    assert!(
        r.pages_unrepairable[0].1.contains(&format!("at byte {at}")),
        "{r:?}"
    );
}

/// D1: a page allocated but never written (all zeros in place) whose only copy is corrupt is a
/// page whose first write was cut short in the doublewrite, before its in-place write could
/// begin. Its zeros are its durable state and redo builds it; recovery must not refuse it.
#[test]
fn never_written_page_with_a_torn_copy_is_not_unrepairable() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open(&sim, PS, 8).unwrap();
    let data = data_file(&sim, 4);
    data.write_at(&vec![0u8; 4 * PS], 4 * PS as u64).unwrap(); // pages 4..8: allocated, zeros
    data.sync().unwrap();
    write(&dwb, &*data, &[(2, 5), (6, 5)]).unwrap();
    data.write_at(&vec![0u8; PS], 6 * PS as u64).unwrap(); // as if its in-place write never ran
    data.sync().unwrap();
    let f = sim
        .open(DWB_FILE_NAME, FileKind::Doublewrite, false)
        .unwrap();
    let [(at, Some(5))] = copies_of(&sim, 6)[..] else {
        panic!("one copy of page 6")
    };
    f.write_at(&[0x55; 16], at + 40).unwrap(); // torn inside page 6's copy
    f.sync().unwrap();
    sim.crash();
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.slots_corrupt), (1, 1));
    assert!(r.pages_unrepairable.is_empty(), "{r:?}");
    assert!(r.pages_repaired.is_empty(), "{r:?}");
    assert_eq!(durable_page(&sim, 6), vec![0u8; PS], "the zeros stay");
    // a page damaged in place (not all zeros) with a corrupt copy is still refused
    data.write_at(&[0x66; 16], 6 * PS as u64 + 900).unwrap();
    data.sync().unwrap();
    sim.crash();
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_unrepairable.len(), 1, "{r:?}");
    assert_eq!(r.pages_unrepairable[0].0, 6);
}

/// D3, D5: a damaged data page whose only slot copy is stale (older than the LSN the damaged
/// page still carries) is not "repaired" with that copy, which would silently undo the changes
/// between the two versions; it is reported as unrepairable. A corrupt slot over a damaged
/// page is reported too.
#[test]
fn stale_slot_copy_never_replaces_a_damaged_newer_page() {
    let sim = SimStorage::new();
    let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
    let data = data_file(&sim, 8);
    write_in_second_segment(&dwb, &*data, &[(1, 10), (4, 10)]); // page 4 at 10 (stale later)
    write(&dwb, &*data, &[(2, 20)]).unwrap(); // segment 0
    data.write_at(&image(4, 30, PS), 4 * PS as u64).unwrap(); // written without the dwb
    data.write_at(&[0x66; 16], 4 * PS as u64 + 900).unwrap(); // then damaged
    data.sync().unwrap();
    let damaged = durable_page(&sim, 4);
    sim.crash();
    let (dwb, data) = reopen(&sim, 8);
    let r = dwb.recover(&*data).unwrap();
    assert!(r.pages_repaired.is_empty(), "{r:?}");
    assert_eq!(r.pages_unrepairable.len(), 1, "{r:?}");
    let (page, why) = &r.pages_unrepairable[0];
    assert_eq!(*page, 4);
    assert!(why.contains("LSN 10") && why.contains("LSN 30"), "{why}");
    assert_eq!(durable_page(&sim, 4), damaged, "nothing written over it");
}

/// D3 across segments: the same page in two segments at different LSNs. Whichever segment holds
/// the newer copy (a higher or a lower slot), recovery restores that one over a torn in-place
/// write; and when the newer copy's doublewrite write was the one torn, the data copy (as new as
/// the older slot copy) is left alone.
#[test]
fn same_page_in_two_segments_restores_the_newest_copy() {
    // Batch k goes through segment k % 2 (the other one held busy).
    let in_segment = |dwb: &Doublewrite, data: &dyn File, seg: usize, items: &[(u32, u64)]| {
        let _busy = dwb.segments[1 - seg].lock();
        write(dwb, data, items)
    };
    for (lsns, torn_in_place) in [(&[10u64, 20][..], 20u64), (&[10, 20, 30][..], 30)] {
        let sim = SimStorage::new();
        let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
        let data = data_file(&sim, 8);
        let (last, done) = lsns.split_last().unwrap();
        for (k, &lsn) in done.iter().enumerate() {
            in_segment(&dwb, &*data, k % 2, &[(3, lsn), (6, lsn)]).unwrap();
        }
        sim.inject(fault(DATA, FaultOp::Sync));
        in_segment(&dwb, &*data, done.len() % 2, &[(3, *last)]).unwrap_err();
        assert!(matches!(
            write(&dwb, &*data, &[(6, 99)]),
            Err(Error::Poisoned(_))
        ));
        sim.crash_with(CrashMode::TearLastWrite {
            file: Some(DATA.into()),
            keep_bytes: 700,
        });
        assert!(page::verify(&durable_page(&sim, 3), PageId(3)).is_err());
        let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
        let data = sim.open(DATA, FileKind::Data, false).unwrap();
        let r = dwb.recover(&*data).unwrap();
        assert_eq!(r.pages_repaired, [3], "{lsns:?}: {r:?}");
        sim.crash();
        assert_page(&sim, 3, torn_in_place);
        assert_page(&sim, 6, *done.last().unwrap());
    }

    // Page 3 at 20 done through segment 1; its write at 30 through segment 0 is torn in the
    // doublewrite file: nothing in place, the data copy at 20 stays.
    let sim = SimStorage::new();
    let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
    let data = data_file(&sim, 8);
    in_segment(&dwb, &*data, 0, &[(3, 10)]).unwrap();
    in_segment(&dwb, &*data, 1, &[(3, 20)]).unwrap();
    sim.tear_next_write(DWB_FILE_NAME, 100); // inside the copy of page 3
    in_segment(&dwb, &*data, 0, &[(3, 30)]).unwrap_err();
    sim.crash();
    let dwb = Doublewrite::open_segments(&sim, PS, 2, 4).unwrap();
    let data = sim.open(DATA, FileKind::Data, false).unwrap();
    let r = dwb.recover(&*data).unwrap();
    assert_eq!((r.slots_valid, r.slots_corrupt), (1, 1), "{r:?}");
    assert!(r.pages_repaired.is_empty(), "{r:?}");
    sim.crash();
    assert_page(&sim, 3, 20);
}

/// D4 across segments: a failure in one segment refuses every later batch in every segment,
/// before any byte is written.
#[test]
fn failure_in_one_segment_stops_every_segment() {
    let sim = SimStorage::new();
    let traced = trace::traced(&sim, PS);
    let dwb = Doublewrite::open_segments(&traced, PS, 3, 4).unwrap();
    drop(data_file(&sim, 8));
    let data = traced.open(DATA, FileKind::Data, false).unwrap();
    write(&dwb, &*data, &[(1, 5)]).unwrap(); // segment 0
    sim.inject(fault(DATA, FaultOp::Write));
    let busy = dwb.segments[0].lock();
    let e = write(&dwb, &*data, &[(2, 5)]).unwrap_err(); // segment 1
    drop(busy);
    assert!(e.to_string().contains("write of data"), "{e}");
    let ops = traced.ops.lock().len();
    for seg in 0..3 {
        // through segment `seg`: the lower ones held busy
        let _busy: Vec<_> = dwb.segments[..seg].iter().map(|s| s.lock()).collect();
        let e = write(&dwb, &*data, &[(4, 6)]).unwrap_err();
        assert!(matches!(e, Error::Poisoned(_)), "{e}");
        assert!(
            e.to_string().contains("write of data"),
            "names the first failure: {e}"
        );
    }
    assert_eq!(
        traced.ops.lock().len(),
        ops,
        "nothing written after the failure"
    );
    assert_eq!(dwb.stats().batches, 1);
}

/// A version 1 file (raw page images in slots) is read as version 1: its copy repairs a torn
/// page; the header becomes version 2 only with the first write after that, and the area is
/// then read as version 2.
#[test]
fn a_version_1_file_is_recovered_then_rewritten_as_version_2() {
    let sim = SimStorage::new();
    let data = data_file(&sim, 8);
    let f = sim
        .open(DWB_FILE_NAME, FileKind::Doublewrite, true)
        .unwrap();
    let mut head = super::header::encode(PS, 8);
    head[4..8].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&head[..PS - 4]);
    head[PS - 4..].copy_from_slice(&crc.to_le_bytes());
    f.write_at(&head, 0).unwrap();
    f.write_at(&image(2, 5, PS), PS as u64).unwrap(); // slot 0
    f.sync().unwrap();
    sim.sync_dir().unwrap();
    data.write_at(&[0x66; 16], 2 * PS as u64 + 900).unwrap();
    data.sync().unwrap();
    sim.crash();

    let (dwb, data) = reopen(&sim, 8);
    assert!(!dwb.header_repaired());
    let r = dwb.recover(&*data).unwrap();
    assert_eq!(r.pages_repaired, [2], "{r:?}");
    assert_eq!((r.slots_valid, r.slots_empty), (1, 7), "{r:?}");
    sim.crash();
    assert_page(&sim, 2, 5);
    let raw = sim.read_durable(DWB_FILE_NAME);
    assert_eq!(
        super::header::check_page_size(&raw[..PS], PS),
        Ok(1),
        "not yet rewritten"
    );

    let (dwb, data) = reopen(&sim, 8);
    dwb.recover(&*data).unwrap();
    write(&dwb, &*data, &[(4, 9)]).unwrap();
    sim.crash();
    let raw = sim.read_durable(DWB_FILE_NAME);
    super::header::check(&raw[..PS], PS, 8).unwrap();
    assert_eq!(copies_of(&sim, 4), [(PS as u64 + 64, Some(9))]);
}

proptest::proptest! {
    /// Reading is total: any bytes after a valid header (chunks whose lengths, counts and
    /// checksums say anything) give a list of copies, never a panic, and every copy it calls
    /// valid passes `page::verify`.
    #[test]
    fn any_bytes_read_as_copies_without_a_panic(
        chunks in proptest::collection::vec(
            (0usize..4, proptest::collection::vec(proptest::num::u8::ANY, 0..300), 0u32..200, 0u32..20_000),
            0..6,
        ),
    ) {
        let mut file = super::header::encode(PS, 8);
        for (kind, bytes, entries, end) in chunks {
            let mut block = vec![0u8; super::format::BLOCK];
            if kind > 0 {
                // A chunk header that checks, over whatever follows.
                block[0..4].copy_from_slice(b"EKDB");
                block[4..8].copy_from_slice(&entries.to_le_bytes());
                block[8..12].copy_from_slice(&end.to_le_bytes());
                let crc = crc32c::crc32c(&block[..12]);
                block[12..16].copy_from_slice(&crc.to_le_bytes());
            }
            let n = bytes.len().min(block.len() - 64);
            block[64..64 + n].copy_from_slice(&bytes[..n]);
            file.extend_from_slice(&block);
        }
        for copy in copies_in(&file, PS) {
            if let Ok(image) = &copy.image {
                proptest::prop_assert!(page::verify(image, PageId(copy.page)).is_ok());
            }
        }
    }
}
