//! recovery: brings the data file back to the state of the last durable redo record.
//!
//! Steps, in order, each safe to crash in and re-run:
//! 1. (before this module) the log finds the newest valid checkpoint and returns every complete
//!    group after it; the doublewrite area repairs torn pages.
//! 2. Redo: every PageDiff of every group is applied to its page unless the page LSN already
//!    covers the group (page LSN >= group end); fresh pages start from zeros.
//! 3. COMMIT records without a later ApplyDone are re-applied, in commit (LSN) order, through
//!    the normal B+tree path (logging new mtrs and an ApplyDone each); puts and deletes are
//!    idempotent, and key locks guaranteed that no later transaction touched those keys.
//!
//! Never: apply a group that is not complete (the log reader returns only whole groups), or
//! use a page that failed verification (a torn page without a doublewrite copy stops recovery
//! with an error naming the page), or go on when a page is newer than the end of the readable
//! log (the WAL rule makes that proof that durable log was lost: refused, naming the page).

use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::page::hdr;
use crate::types::Lsn;
use crate::wal::record::{self, Record, WriteOp};
use crate::wal::{Recovered, ScanStop};
use std::collections::BTreeMap;

/// What recovery did (reported by `status`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryReport {
    pub checkpoint_lsn: u64,
    pub end_lsn: u64,
    pub redo_bytes_scanned: u64,
    pub groups: u64,
    pub page_records_applied: u64,
    pub page_records_skipped: u64,
    pub pages_repaired_from_doublewrite: u64,
    /// Doublewrite slots holding a damaged image (torn by a crash or corrupted): ignored.
    pub doublewrite_slots_corrupt: u64,
    /// Redo log checkpoint slots found invalid and rewritten from the other one (0 or 1).
    pub checkpoint_slots_repaired: u64,
    /// The data file header (page 0) failed its checks and was restored from the doublewrite.
    pub file_header_repaired: bool,
    /// The doublewrite file's header was damaged and has been rewritten (its slots are
    /// self-verifying page images and were still used).
    pub doublewrite_header_repaired: bool,
    /// Damaged images found at open, repaired or ignored: data pages that failed verification
    /// and were restored from the doublewrite area, corrupt doublewrite slots, invalid
    /// checkpoint slots. (Damage that makes open refuse is an error instead.)
    pub corruptions_detected: u64,
    pub transactions_reapplied: u64,
    pub seconds: f64,
}

/// A page on disk newer than the end of the readable log: the WAL rule (a page is written only
/// after the log up to its LSN is durable) says the log had durable records past where the scan
/// stopped, so they were lost (damaged log, or a data file from another database).
pub fn log_behind_page(
    file: &str,
    page: u32,
    page_lsn: u64,
    end_lsn: Lsn,
    stop: &ScanStop,
) -> Error {
    Error::CorruptPage {
        file: file.to_string(),
        page,
        reason: format!(
            "page LSN {page_lsn} is beyond the end of the readable redo log at LSN {} (scan \
             stopped: {:?}): the log lost durable records this page depends on, or the data \
             file does not belong to this log. Refusing to recover; `evenkeel check --salvage \
             --out DIR` exports every readable row",
            end_lsn, stop
        ),
    }
}

/// Redo pass. Returns the write sets still to re-apply, keyed by COMMIT LSN.
pub fn redo(
    pool: &BufferPool,
    rec: &Recovered,
    report: &mut RecoveryReport,
) -> Result<BTreeMap<u64, Vec<WriteOp>>> {
    let ps = pool.page_size();
    let mut pending = BTreeMap::new();
    report.checkpoint_lsn = rec.checkpoint_lsn.0;
    report.end_lsn = rec.end_lsn.0;
    report.redo_bytes_scanned = rec.bytes_scanned;
    if rec.checkpoint_slot_repaired {
        report.checkpoint_slots_repaired = 1;
        report.corruptions_detected += 1;
    }
    for g in &rec.groups {
        report.groups += 1;
        let recs = record::decode_group(&g.payload, ps).ok_or_else(|| Error::Recovery {
            lsn: g.start.0,
            reason: "a complete, checksummed log group holds malformed records".into(),
        })?;
        for r in recs {
            match r {
                Record::PageDiff {
                    page,
                    fresh,
                    ranges,
                } => {
                    let mut w = match pool.write(page) {
                        Ok(w) => w,
                        // a page that never reached the file: its content before was zeros
                        Err(_) if fresh => pool.create(page)?,
                        Err(e) => return Err(e),
                    };
                    if hdr::lsn(&w) > rec.end_lsn {
                        return Err(log_behind_page(
                            pool.file().name(),
                            page.0,
                            hdr::lsn(&w).0,
                            rec.end_lsn,
                            &rec.stop,
                        ));
                    }
                    if hdr::lsn(&w) >= g.end {
                        report.page_records_skipped += 1;
                        continue;
                    }
                    record::apply_page_diff(&mut w, fresh, &ranges);
                    w.stamp(g.start, g.end);
                    report.page_records_applied += 1;
                }
                Record::Commit { writes, .. } => {
                    pending.insert(g.start.0, writes);
                }
                Record::ApplyDone { commit_lsn } => {
                    pending.remove(&commit_lsn);
                }
            }
        }
    }
    Ok(pending)
}
