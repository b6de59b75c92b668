//! Torn-page repair at recovery, before redo: every valid copy in the slot area (a version 1
//! slot or a version 2 entry, `format.rs`) is compared with the data file's copy of its page,
//! and written in place where the data copy is torn, corrupt, missing or older. The newest LSN
//! any valid copy carries is reported: open compares it with the recovered log end (a copy newer
//! than the log means the log lost durable writes).
//!
//! What must stay true: D3 (`dwb/mod.rs`) — a copy is used only if it decodes and passes
//! `page::verify` for the page number stored with it, so a copy torn by a crash during the
//! doublewrite write is never restored; a data copy that verifies and is at least as new as the
//! newest doublewrite copy is never touched. The newest valid copy of a page is taken across all
//! segments (two segments may hold the same page at different LSNs). The data file is fsynced
//! before `recover` returns, so what redo starts from is durable. Bounded: one pass over the
//! file (at most `max_file_len`), one read per distinct page.

use super::format;
use super::writer::Doublewrite;
use super::DwbReport;
use crate::error::Result;
use crate::io::File;
use crate::page::{self, hdr};
use crate::types::{Lsn, PageId};
use std::collections::BTreeMap;

impl Doublewrite {
    /// Repairs `data` from the doublewrite area; run before redo, with no `write_batch` running
    /// (it takes every segment's mutex, so a concurrent batch would simply wait).
    ///
    /// Long because it is one decision per copy (D3, D5: valid, newer than the page in
    /// place, the newest copy) made in sequence, and each decision reads the one before it.
    pub fn recover(&self, data: &dyn File) -> Result<DwbReport> {
        let ps = self.page_size;
        let _segments = self.lock_all();
        let mut report = DwbReport::default();

        // Everything after the header is read, also beyond the configured slots: a file last
        // written with more segments (a larger write_io_threads) may hold the only intact copy
        // there. The file grows as chunks are written; what was never written is not there.
        let base = self.area_offset();
        let file_len = self.file.len()?.min(super::writer::max_file_len(ps));
        let block = format::BLOCK.min(ps);
        let area_len = (file_len.saturating_sub(base) as usize) / block * block;
        let mut area = crate::io::AlignedBuf::new(area_len.max(ps));
        self.file.read_at(&mut area[..area_len], base)?;
        let area = &area[..area_len];
        let version = self
            .area_version
            .unwrap_or_else(|| format::version_of(area));
        let (copies, empty_slots) = format::read_area(area, base, ps, version);
        report.slots_empty = if version == 1 {
            empty_slots + self.slots.saturating_sub(area_len / ps)
        } else {
            self.slots.saturating_sub(copies.len())
        };

        // Newest valid copy of each page: (LSN, index in `copies`). Corrupt copies: (offset,
        // page number the copy claims, what is wrong with it).
        let mut newest: BTreeMap<u32, (Lsn, usize)> = BTreeMap::new();
        let mut corrupt: Vec<(u64, u32, String)> = Vec::new();
        for (i, copy) in copies.iter().enumerate() {
            let Some(lsn) = copy.lsn() else {
                report.slots_corrupt += 1;
                let fault = copy.image.as_ref().err().cloned().unwrap_or_default();
                corrupt.push((copy.offset, copy.page, fault));
                continue;
            };
            report.slots_valid += 1;
            if report.newest_slot.is_none_or(|(n, _)| lsn > n) {
                report.newest_slot = Some((lsn, copy.page));
            }
            let entry = newest.entry(copy.page).or_insert((lsn, i));
            if lsn > entry.0 {
                *entry = (lsn, i);
            }
        }

        let data_len = data.len()?;
        let mut in_place = vec![0u8; ps];
        for (&page_no, &(lsn, i)) in &newest {
            let at = copies[i].offset;
            report.pages_checked += 1;
            let offset = u64::from(page_no) * ps as u64;
            let reason = if offset + ps as u64 > data_len {
                Some(format!("beyond the end of the file ({data_len} bytes)"))
            } else {
                data.read_at(&mut in_place, offset)?;
                match page::verify(&in_place, PageId(page_no)) {
                    Err(fault) => {
                        // The damaged copy still says how new it claims to be (header and
                        // trailer LSN). A slot copy older than that is a stale copy from an
                        // earlier batch (D5): restoring it would silently lose the changes
                        // between the two, which redo cannot bring back if they lie before the
                        // checkpoint. Such a page is not repairable from here.
                        // A copy at the LSN of either of the page's own copies is the same
                        // version (torn write; flipped bit in the other LSN copy).
                        let (head, trail) = page::lsn_copies(&in_place);
                        let claimed = head.max(trail);
                        if lsn.0 < claimed && lsn.0 != head && lsn.0 != trail {
                            report.pages_unrepairable.push((
                                page_no,
                                format!(
                                    "{fault}; its newest doublewrite copy (at byte {at} of {}) \
                                     has LSN {lsn}, older than the LSN {claimed} the damaged \
                                     page carries, so it cannot be used",
                                    self.path
                                ),
                            ));
                            continue;
                        }
                        report.pages_damaged += 1;
                        Some(fault.to_string())
                    }
                    Ok(()) if hdr::lsn(&in_place) < lsn => Some(format!(
                        "in-place LSN {} is older than the doublewrite copy's LSN {lsn}",
                        hdr::lsn(&in_place)
                    )),
                    Ok(()) => None,
                }
            };
            let Some(reason) = reason else { continue };
            tracing::warn!(
                "{}: page {page_no} restored from the doublewrite area ({}): {reason}",
                data.name(),
                self.path
            );
            let image = copies[i].image.as_deref().unwrap_or_default();
            data.write_at(image, offset)?;
            report.pages_repaired.push(page_no);
        }
        // A corrupt slot whose page is damaged in place too (and has no valid slot copy): the
        // torn in-place write and its only other copy are both lost. (A slot torn by a crash
        // during the doublewrite write never has a damaged data copy: D1.) The page number is
        // the one the damaged slot claims; one outside the file is not a page.
        // An all-zero page is not damaged: it was allocated and never written, and the slot
        // is its first write, torn before its in-place write could begin (D1). Its zeros are
        // its durable state, which redo builds on from the page's creation, as for a page
        // with no copy at all.
        for (at, page_no, slot_fault) in corrupt {
            let offset = u64::from(page_no) * ps as u64;
            if newest.contains_key(&page_no) || offset + ps as u64 > data_len {
                continue;
            }
            data.read_at(&mut in_place, offset)?;
            let fault = match page::verify(&in_place, PageId(page_no)) {
                Ok(()) | Err(page::PageFault::AllZero) => None,
                Err(fault) => Some(fault),
            };
            if let Some(fault) = fault {
                report.pages_unrepairable.push((
                    page_no,
                    format!(
                        "{fault}; its doublewrite copy (at byte {at} of {}) is corrupted too: \
                         {slot_fault}",
                        self.path
                    ),
                ));
            }
        }
        // IMPORTANT: the restored pages must be durable before redo builds on them and before a
        // `write_batch` reuses their slots; and after a process crash the copies we checked may
        // still be only in the OS cache, so this fsync is needed even when nothing was restored.
        data.sync()?;
        super::stats::Counters::add(&self.counters.fsyncs, 1);
        super::stats::Counters::add(
            &self.counters.pages_repaired,
            report.pages_repaired.len() as u64,
        );
        Ok(report)
    }
}
