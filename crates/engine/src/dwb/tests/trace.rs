//! A checker of D1 and D2 over the order of writes and fsyncs recorded by
//! [`TraceStorage`](crate::io::test_support::TraceStorage) (with the page numbers and LSNs each
//! write carried).

use crate::dwb::DWB_FILE_NAME;
use crate::io::test_support::{Key, Op, TraceStorage};
use crate::io::SimStorage;
use crate::page::hdr;

/// A [`TraceStorage`] over `sim` whose data writes record the (page number, LSN) of each
/// `page_size` page, and doublewrite writes those of each copy in the chunk.
pub(super) fn traced(sim: &SimStorage, page_size: usize) -> TraceStorage {
    TraceStorage::new(sim)
        .with_pages(page_size, |p| (hdr::page_no(p).0, hdr::lsn(p).0))
        .with_chunks(chunk_keys)
}

fn chunk_keys(chunk: &[u8], page_size: usize) -> Vec<Key> {
    crate::dwb::format::read_area(chunk, 0, page_size, 2)
        .0
        .iter()
        .map(|c| (c.page, c.lsn().expect("a copy as written decodes").0))
        .collect()
}

/// Replays `ops` and panics at the first violation of D1 (a page written in place without a
/// durable doublewrite copy of that very image) or D2 (a copy overwritten while the in-place
/// copy of its page is not yet durable). Returns the number of in-place page writes checked.
pub(super) fn check_order(ops: &[Op], data: &str) -> usize {
    // The copies in the doublewrite file: the byte range of the chunk that wrote each, its
    // key, and whether that write has been fsynced.
    let mut copies: Vec<(u64, u64, Key, bool)> = Vec::new();
    let mut in_place_unsynced: Vec<Key> = Vec::new();
    let mut checked = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write {
                file,
                offset,
                len,
                pages,
            } if file == DWB_FILE_NAME && *offset > 0 => {
                let end = offset + *len as u64;
                copies.retain(|&(s, e, old, _)| {
                    let overwritten = s < end && *offset < e;
                    assert!(
                        !overwritten || !in_place_unsynced.contains(&old),
                        "D2 broken at op {i}: the copy of {old:?} overwritten while that page \
                         is not yet durable in place"
                    );
                    !overwritten
                });
                copies.extend(pages.iter().map(|&k| (*offset, end, k, false)));
            }
            Op::Sync { file } if file == DWB_FILE_NAME => {
                for c in copies.iter_mut() {
                    c.3 = true;
                }
            }
            Op::Write { file, pages, .. } if file == data => {
                for key in pages {
                    assert!(
                        copies.iter().any(|c| c.2 == *key && c.3),
                        "D1 broken at op {i}: page {key:?} written in place without a durable \
                         doublewrite copy"
                    );
                    in_place_unsynced.push(*key);
                    checked += 1;
                }
            }
            Op::Sync { file } if file == data => in_place_unsynced.clear(),
            _ => {}
        }
    }
    checked
}
