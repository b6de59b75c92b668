//! The log-file fuzz entry point (called by `crate::fuzz`): it lives here because the block, slot
//! and scan decoders are private to `wal`.

use super::block::seal;
use super::checkpoint::{decode_slot, Slot};
use super::header::check;
use super::layout::{Geometry, HEADER_BLOCKS};
use super::reader::scan;
use super::record::{self, Record};
use super::LogConfig;
use crate::io::{FileKind, SimStorage, Storage};

/// Most data blocks of an image the entry point uses.
const MAX_DATA_BLOCKS: u64 = 64;
/// Fewest data blocks a geometry may have (smaller images are padded with zeros).
const MIN_DATA_BLOCKS: u64 = 8;

/// `flags u8 | image of ib_logfile0`; see `crate::fuzz` for the flags.
pub(crate) fn log_file(data: &[u8]) {
    let Some((&flags, image)) = data.split_first() else {
        return;
    };
    let bs: usize = if flags & 2 != 0 { 4096 } else { 512 };
    let blocks = (image.len().div_ceil(bs) as u64).clamp(
        HEADER_BLOCKS + MIN_DATA_BLOCKS,
        HEADER_BLOCKS + MAX_DATA_BLOCKS,
    );
    let len = blocks as usize * bs;
    let mut img = image[..image.len().min(len)].to_vec();
    img.resize(len, 0);
    if flags & 1 != 0 {
        for b in img.chunks_mut(bs) {
            seal(b);
        }
    }
    let cfg = LogConfig {
        file_size: len as u64,
        files: 1,
        buffer_size: 4 * bs,
        block_size: bs,
        ..LogConfig::default()
    };
    let geom = match Geometry::new(&cfg) {
        Ok(g) => g,
        Err(e) => panic!("a geometry of {blocks} blocks of {bs} bytes was refused: {e}"),
    };
    if let Err(reason) = check(&img[..bs], &geom, 0) {
        assert!(!reason.is_empty());
    }
    let mut newest: Option<Slot> = None;
    let mut max_epoch = 0u32;
    for index in 0..2 {
        let at = (1 + index) * bs;
        match decode_slot(&img[at..at + bs], &geom, index) {
            Ok(s) => {
                assert!(s.number % 2 == index as u64 && s.lsn >= geom.first_lsn());
                max_epoch = max_epoch.max(s.epoch);
                let better = match newest {
                    None => true,
                    Some(n) => s.number > n.number,
                };
                if better {
                    newest = Some(s);
                }
            }
            Err(reason) => assert!(!reason.is_empty()),
        }
    }
    let start = newest.map_or(geom.first_lsn(), |s| s.lsn);
    let storage = SimStorage::new();
    let file = match storage.open("ib_logfile0", FileKind::Log, true) {
        Ok(f) => f,
        Err(e) => panic!("the simulated storage refused to create a file: {e}"),
    };
    if let Err(e) = file.write_at(&img, 0) {
        panic!("the simulated storage refused a write: {e}");
    }
    let mut at = start;
    let mut visit = |g: super::GroupRef<'_>| {
        assert!(g.start.0 >= at, "groups out of order");
        assert!(g.end.0 == g.start.0 + g.payload.len() as u64 + 16);
        at = g.end.0;
        if let Some(recs) = record::decode_group(g.payload, 4096) {
            check_records(&recs, 4096);
        }
        Ok(())
    };
    let out = match scan(&geom, &[file], start, max_epoch, u64::MAX, &mut visit) {
        Ok(o) => o,
        Err(e) => panic!("the scan of a whole log image failed: {e}"),
    };
    assert!(out.bytes_scanned <= geom.ring_blocks * bs as u64);
    assert!(
        out.end_lsn == at,
        "end LSN is not the end of the last group"
    );
}

/// Applies page diffs to a page image and re-encodes the logical records; every decoded
/// record must survive a round trip through its encoder.
pub(crate) fn check_records(recs: &[Record], ps: usize) {
    let mut img = vec![0u8; ps];
    for r in recs {
        match r {
            // a compacted diff's compaction is the page layer's (recovery runs it): the ranges
            // apply the same either way
            Record::PageDiff {
                fresh,
                moves,
                ranges,
                ..
            } => {
                record::apply_page_diff(&mut img, *fresh, moves, ranges);
                for (off, bytes) in ranges.iter().rev().take(1) {
                    assert!(img[*off..*off + bytes.len()] == bytes[..]);
                }
            }
            Record::Commit { txn, writes } | Record::CommitContinued { txn, writes, .. } => {
                let prev = match r {
                    Record::CommitContinued { prev, .. } => Some(*prev),
                    _ => None,
                };
                let mut out = Vec::new();
                record::encode_ops(&mut out, prev, *txn, writes);
                // a record without patches is what encode_commit writes, at commit_size
                let full: Option<Vec<record::WriteRef<'_>>> = writes
                    .iter()
                    .map(|w| match &w.value {
                        record::WriteValue::Delete => Some((w.table, &w.key[..], None)),
                        record::WriteValue::Put(v) => Some((w.table, &w.key[..], Some(&v[..]))),
                        record::WriteValue::Patch { .. } => None,
                    })
                    .collect();
                if let Some(refs) = full {
                    let mut plain = Vec::new();
                    match prev {
                        Some(p) => record::encode_commit_continued(&mut plain, p, *txn, &refs),
                        None => record::encode_commit(&mut plain, *txn, &refs),
                    }
                    assert!(plain == out, "encode_ops disagrees with encode_commit");
                    let size = prev.map_or(0, |_| record::CONTINUED_EXTRA_SIZE)
                        + record::commit_size(
                            refs.iter().map(|w| (w.1.len(), w.2.map_or(0, <[u8]>::len))),
                        );
                    assert!(
                        out.len() == size,
                        "commit_size disagrees with encode_commit"
                    );
                }
                let back = record::decode_group(&out, ps);
                assert!(back.as_deref() == Some(std::slice::from_ref(r)));
            }
            Record::ApplyDone { commit_lsn } => {
                let mut out = Vec::new();
                record::encode_apply_done(&mut out, *commit_lsn);
                let back = record::decode_group(&out, ps);
                assert!(back.as_deref() == Some(std::slice::from_ref(r)));
            }
        }
    }
}
