//! A checker of D1 and D2 over the order of writes and fsyncs recorded by
//! [`TraceStorage`](crate::io::test_support::TraceStorage) (with the page numbers and LSNs each
//! write carried).

use crate::dwb::DWB_FILE_NAME;
use crate::io::test_support::{Key, Op, TraceStorage};
use crate::io::SimStorage;
use crate::page::hdr;

/// A [`TraceStorage`] over `sim` whose data and doublewrite writes record the (page number,
/// LSN) of each `page_size` page.
pub(super) fn traced(sim: &SimStorage, page_size: usize) -> TraceStorage {
    TraceStorage::new(sim).with_pages(page_size, |p| (hdr::page_no(p).0, hdr::lsn(p).0))
}

/// Replays `ops` and panics at the first violation of D1 (a page written in place without a
/// durable slot copy of that very image) or D2 (a slot overwritten while the in-place copy of
/// its page is not yet durable). Returns the number of in-place page writes checked.
pub(super) fn check_order(ops: &[Op], page_size: usize, data: &str) -> usize {
    // Per slot: the image it holds and whether that slot write has been fsynced.
    let mut slots: Vec<Option<(Key, bool)>> = Vec::new();
    let mut in_place_unsynced: Vec<Key> = Vec::new();
    let mut checked = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write {
                file,
                offset,
                pages,
            } if file == DWB_FILE_NAME => {
                let first = (*offset as usize / page_size).saturating_sub(1);
                for (k, key) in pages.iter().enumerate() {
                    if *offset == 0 && k == 0 {
                        continue; // the header block
                    }
                    let slot = if *offset == 0 { k - 1 } else { first + k };
                    if slots.len() <= slot {
                        slots.resize(slot + 1, None);
                    }
                    if let Some((old, _)) = slots[slot] {
                        assert!(
                            !in_place_unsynced.contains(&old),
                            "D2 broken at op {i}: slot {slot} overwritten while page {old:?} \
                             is not yet durable in place"
                        );
                    }
                    slots[slot] = Some((*key, false));
                }
            }
            Op::Sync { file } if file == DWB_FILE_NAME => {
                for (_, durable) in slots.iter_mut().flatten() {
                    *durable = true;
                }
            }
            Op::Write { file, pages, .. } if file == data => {
                for key in pages {
                    assert!(
                        slots.contains(&Some((*key, true))),
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
