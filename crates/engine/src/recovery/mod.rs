//! recovery: brings the data file back to the state of the last durable redo record.
//!
//! Steps, in order, each safe to crash in and re-run:
//! 1. (before this module) the log finds the newest valid checkpoint and scans the log once to
//!    its end, checking every group and keeping none (so a corrupted log is refused before any
//!    page changes, and the end LSN is known before redo reads a page); the doublewrite area
//!    repairs torn pages.
//! 2. Redo, streamed: the groups are read again from the checkpoint ([`crate::wal::RedoSource`])
//!    and their page records gathered into a batch of at most `recovery_memory` bytes (the
//!    records' bytes, and their index: page, group, place). A full batch (and the last) is
//!    sorted by page in place and applied page by page in page-number order: each page is
//!    fetched once and gets its records in LSN order, each one unless the page LSN already
//!    covers its group (page LSN >= group end); fresh pages start from zeros. So memory is the
//!    buffer pool, one read chunk and one group of the log, and the batch, whatever the log's
//!    size; and a page changed many times in a batch is read once (InnoDB's recv_sys hash and
//!    multi-batch apply, with a budget of its own instead of a share of the pool). Dirty pages are written back in
//!    batches of the oldest while redo runs, so a pool full of redone pages does not fall back
//!    to single-page writes for every frame it needs.
//! 3. COMMIT records without a later ApplyDone are re-applied, in commit (LSN) order, through
//!    the normal B+tree path (logging new mtrs and an ApplyDone each); puts and deletes are
//!    idempotent, and key locks guaranteed that no later transaction touched those keys. Redo
//!    keeps only their LSNs (the set of COMMITs whose ApplyDone it has not seen yet: at any
//!    point of the log, the transactions applying at that moment, which is at most the number
//!    of threads committing at once, 8 bytes each); the re-apply reads each COMMIT back from
//!    the log when its turn comes, so one write set is in memory at a time.
//!
//! Never: apply a group that is not complete (the log reader returns only whole groups), or
//! use a page that failed verification (a torn page without a doublewrite copy stops recovery
//! with an error naming the page), or go on when a page is newer than the end of the readable
//! log (the WAL rule makes that proof that durable log was lost: refused, naming the page).

use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::page::{hdr, node};
use crate::types::{Lsn, PageId};
use crate::wal::record::{self, RecordRef, WriteOp};
use crate::wal::{GroupRef, Recovered, ScanStop};
use std::collections::BTreeSet;
use std::time::Instant;

/// Share of `recovery_memory`, in percent, for the records' bytes; the rest holds their index.
const ARENA_PCT: usize = 75;
/// Pages of a batch applied between two looks at the pool's dirty share.
const DIRTY_CHECK_EVERY: usize = 64;
/// Share of the pool, in percent, that redo lets be dirty before it writes the oldest back.
const REDO_DIRTY_MAX_PCT: f64 = 50.0;
/// Pages redo writes back at a time (the doublewrite area takes them in segment-sized chunks).
const WRITE_BACK_PAGES: usize = 256;

/// What recovery did (reported by `status`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryReport {
    pub checkpoint_lsn: u64,
    pub end_lsn: u64,
    pub redo_bytes_scanned: u64,
    pub groups: u64,
    pub page_records_applied: u64,
    pub page_records_skipped: u64,
    /// Of the page records applied, those that compacted their page first (mtr.rs).
    pub page_compactions_replayed: u64,
    /// Batches redo applied, and the most bytes one held (see `recovery_memory`).
    pub redo_batches: u64,
    pub redo_batch_peak_bytes: u64,
    /// The most COMMITs awaiting their ApplyDone at any point of the log.
    pub pending_commits_peak: u64,
    /// Seconds of the open's scan of the log (finding its end), of redo (second read and
    /// apply), and of the re-apply of cut transactions.
    pub scan_seconds: f64,
    pub redo_seconds: f64,
    pub reapply_seconds: f64,
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
    /// and were restored from the doublewrite area or rebuilt whole by redo (a page the redo
    /// formats from zeros), corrupt doublewrite slots, invalid checkpoint slots. (Damage that makes open refuse is an error instead.)
    pub corruptions_detected: u64,
    pub transactions_reapplied: u64,
    /// Wall time of the whole open, recovery included.
    pub seconds: f64,
}

impl RecoveryReport {
    /// Redo bytes between the checkpoint and the end of the log.
    pub fn redo_bytes(&self) -> u64 {
        self.end_lsn.saturating_sub(self.checkpoint_lsn)
    }
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

/// One page record of a batch: its page, its group, and where its ranges lie in the arena.
#[derive(Clone, Copy)]
struct Entry {
    start: Lsn,
    end: Lsn,
    at: usize,
    len: u32,
    page: PageId,
    fresh: bool,
    compacted: bool,
    /// The record's ranges may start with moves.
    moves: bool,
}

/// Page records gathered from the log until the budget is reached. Two buffers, each allocated
/// once at its share of the budget and reused by every batch: the records' ranges back to
/// back, and their index in log order. Neither grows by copying and nothing else is allocated
/// per record, so what the batch keeps resident is its budget however the records fall (many
/// small ones fill the index, few large ones the arena). A group larger than the room is taken
/// alone, in a batch that grows to hold it.
struct Batch {
    arena: Vec<u8>,
    entries: Vec<Entry>,
}

impl Batch {
    fn new(budget: usize) -> Batch {
        let arena = budget / 100 * ARENA_PCT;
        let index = (budget - arena) / std::mem::size_of::<Entry>();
        Batch {
            arena: Vec::with_capacity(arena.max(1)),
            entries: Vec::with_capacity(index.max(1)),
        }
    }

    /// Bytes the batch holds now.
    fn bytes(&self) -> usize {
        self.arena.len() + self.entries.len() * std::mem::size_of::<Entry>()
    }

    /// Whether `records` (of one group) fit the room left.
    fn fits(&self, records: &[RecordRef<'_>]) -> bool {
        let (mut n, mut bytes) = (0, 0);
        for r in records {
            if let RecordRef::PageDiff { ranges, .. } = r {
                n += 1;
                bytes += ranges.len();
            }
        }
        self.entries.len() + n <= self.entries.capacity()
            && self.arena.len() + bytes <= self.arena.capacity()
    }

    fn push(
        &mut self,
        g: &GroupRef<'_>,
        page: PageId,
        fresh: bool,
        compacted: bool,
        moves: bool,
        ranges: &[u8],
    ) {
        let at = self.arena.len();
        self.arena.extend_from_slice(ranges);
        self.entries.push(Entry {
            start: g.start,
            end: g.end,
            at,
            // a range list lies inside one group, whose length is a u32
            len: u32::try_from(ranges.len()).unwrap_or(u32::MAX),
            page,
            fresh,
            compacted,
            moves,
        });
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Applies every page's records, pages in ascending order, each page's in log order (the
    /// arena offset grows with the log), then empties the batch.
    fn apply(
        &mut self,
        pool: &BufferPool,
        rec: &Recovered,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        report.redo_batches += 1;
        report.redo_batch_peak_bytes = report.redo_batch_peak_bytes.max(self.bytes() as u64);
        // in place: the index allocates nothing more
        self.entries.sort_unstable_by_key(|e| (e.page, e.at));
        let mut pages = 0usize;
        let mut i = 0;
        while i < self.entries.len() {
            let page = self.entries[i].page;
            let run = self.entries[i..]
                .iter()
                .take_while(|e| e.page == page)
                .count();
            if pages.is_multiple_of(DIRTY_CHECK_EVERY) {
                write_back_oldest(pool)?;
            }
            pages += 1;
            self.apply_page(pool, rec, report, &self.entries[i..i + run])?;
            i += run;
        }
        self.arena.clear();
        self.entries.clear();
        Ok(())
    }

    /// Applies one page's records (`entries`, in log order).
    fn apply_page(
        &self,
        pool: &BufferPool,
        rec: &Recovered,
        report: &mut RecoveryReport,
        entries: &[Entry],
    ) -> Result<()> {
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let page = first.page;
        let mut w = match pool.write(page) {
            Ok(w) => w,
            // A page whose first record formats it whole (created, allocated or freed) is
            // rebuilt from zeros: one that never reached the file, or one whose image on disk
            // failed its checks, which redo repairs (counted: the damage was there).
            Err(e) if first.fresh => {
                if matches!(e, Error::CorruptPage { .. }) {
                    report.corruptions_detected += 1;
                }
                pool.create(page)?
            }
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
        // A group may hold several records of one page (the changes before and after a
        // compaction): a page stamped with the group's end holds all of them when it came so
        // from the file, and only the ones applied so far when this loop stamped it.
        let mut applied_group = None;
        for e in entries {
            if hdr::lsn(&w) >= e.end && applied_group != Some(e.end) {
                report.page_records_skipped += 1;
                continue;
            }
            if e.compacted && !node::try_compact(&mut w) {
                return Err(Error::corrupt(
                    pool.file().name(),
                    page.0,
                    format!(
                        "redo at LSN {} compacts this page, but its cells do not lay out as a \
                         B+tree node's",
                        e.start.0
                    ),
                ));
            }
            report.page_compactions_replayed += u64::from(e.compacted);
            let ranges = &self.arena[e.at..e.at + e.len as usize];
            record::apply_page_diff_ranges(&mut w, e.fresh, e.moves, ranges);
            w.stamp(e.start, e.end);
            applied_group = Some(e.end);
            report.page_records_applied += 1;
        }
        Ok(())
    }
}

/// Writes the oldest dirty pages back, a doublewrite batch at a time, while more than
/// [`REDO_DIRTY_MAX_PCT`] of the pool is dirty: redo dirties pages faster than anything else
/// cleans them (the page cleaner starts after recovery).
fn write_back_oldest(pool: &BufferPool) -> Result<()> {
    while pool.dirty_pct() > REDO_DIRTY_MAX_PCT {
        let fids: Vec<_> = pool
            .oldest_dirty(WRITE_BACK_PAGES)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        if fids.is_empty() || pool.flush_batch(&fids)? == 0 {
            break;
        }
    }
    Ok(())
}

/// Redo pass: streams the recovered groups through batches of at most `budget` bytes (a
/// group larger than a batch's room is taken alone). Returns the LSNs of the COMMITs
/// still to re-apply, in commit order.
pub fn redo(
    pool: &BufferPool,
    rec: &Recovered,
    budget: usize,
    report: &mut RecoveryReport,
) -> Result<Vec<Lsn>> {
    let started = Instant::now();
    let ps = pool.page_size();
    let mut pending = BTreeSet::new();
    report.checkpoint_lsn = rec.checkpoint_lsn.0;
    report.end_lsn = rec.end_lsn.0;
    report.redo_bytes_scanned = rec.bytes_scanned;
    if rec.checkpoint_slot_repaired {
        report.checkpoint_slots_repaired = 1;
        report.corruptions_detected += 1;
    }
    let mut batch = Batch::new(budget);
    rec.source.for_each(&mut |g| {
        report.groups += 1;
        let recs = record::walk_group(g.payload, ps).ok_or_else(|| Error::Recovery {
            lsn: g.start.0,
            reason: "a complete, checksummed log group holds malformed records".into(),
        })?;
        if !batch.is_empty() && !batch.fits(&recs) {
            batch.apply(pool, rec, report)?;
        }
        for r in recs {
            match r {
                RecordRef::PageDiff {
                    page,
                    fresh,
                    compacted,
                    moves,
                    ranges,
                } => batch.push(&g, page, fresh, compacted, moves, ranges),
                RecordRef::Commit { .. } => {
                    pending.insert(g.start.0);
                    report.pending_commits_peak =
                        report.pending_commits_peak.max(pending.len() as u64);
                }
                RecordRef::ApplyDone { commit_lsn } => {
                    pending.remove(&commit_lsn);
                }
                // the writes left of the COMMIT at `prev` (absent when the checkpoint passed
                // it): this record is now the one to re-apply
                RecordRef::CommitContinued { prev, .. } => {
                    pending.remove(&prev);
                    pending.insert(g.start.0);
                }
            }
        }
        Ok(())
    })?;
    if !batch.is_empty() {
        batch.apply(pool, rec, report)?;
    }
    report.redo_seconds = started.elapsed().as_secs_f64();
    Ok(pending.into_iter().map(Lsn).collect())
}

/// The transaction and write set of the COMMIT (or CommitContinued) record in the group that
/// starts at `commit_lsn`, read back from the log (re-apply).
pub fn commit_writes(
    rec: &Recovered,
    commit_lsn: Lsn,
    page_size: usize,
) -> Result<(u64, Vec<WriteOp>)> {
    let payload = rec.source.group_at(commit_lsn)?;
    let recs = record::decode_group(&payload, page_size).ok_or_else(|| Error::Recovery {
        lsn: commit_lsn.0,
        reason: "a complete, checksummed log group holds malformed records".into(),
    })?;
    recs.into_iter()
        .find_map(|r| match r {
            record::Record::Commit { txn, writes }
            | record::Record::CommitContinued { txn, writes, .. } => Some((txn, writes)),
            _ => None,
        })
        .ok_or_else(|| Error::Recovery {
            lsn: commit_lsn.0,
            reason: "the group redo took for a COMMIT holds none".into(),
        })
}
