//! wal: the redo log. It stores *mtr groups* — opaque byte payloads, each committed atomically —
//! in a fixed-capacity circular set of log files, with group commit, fuzzy-checkpoint slots and
//! a scan that finds every complete group after the checkpoint (and streams them again to
//! recovery, [`RedoSource`], without holding them in memory). It is record-agnostic: the
//! layers above decide what a payload means; this module never looks inside one.
//!
//! # Invariants (numbered W1..W7; DESIGN.md invariants 2, 3 and 5 rest on them)
//!
//! - W1 (prefix): recovery returns groups in LSN order, each complete and checksummed, and stops
//!   at the first block or group that is torn, stale, out of sequence or invalid; it never skips
//!   a hole to return a later group.
//! - W2 (durability): every group whose end is `<= flushed_lsn` when `flush_to(.., true)`
//!   returned is returned by recovery, whatever a crash does to unsynced writes.
//! - W3 (no in-place rewrite of durable blocks): every fsync happens right after a write that
//!   ends on a block boundary (a durable flush pads the last partial block), so a block that
//!   holds fsynced data is never written again until the log laps it. A torn write can only hit
//!   data that was never acknowledged durable. Cost: on average half a block per durable flush
//!   (`LogStats::padding_bytes`); at 512-byte blocks about 256 bytes per fsync.
//! - W4 (capacity): a block is written only if the block it overwrites (one lap back) lies
//!   wholly before the checkpoint block; `append` refuses with `Error::LogFull` rather than wait
//!   or overwrite. `current_lsn - checkpoint_lsn <= capacity()` always, padding included (an
//!   append leaves room for the padding that may follow it, so the last group of a full log
//!   gets up to one block less).
//! - W5 (checkpoint): a checkpoint slot is written only for `lsn <= flushed_lsn`, fsynced before
//!   its space is released; slots alternate, so a torn slot write leaves the other one valid.
//! - W6 (epochs): each open of the log runs in a new epoch, recorded durably in a checkpoint slot
//!   before any block of that epoch is written, and starts on a fresh block. Blocks in stream
//!   order never go back in epoch; within one epoch nothing follows a partial (unpadded) block.
//!   This is what rejects blocks of this lap left behind a hole by an earlier crash.
//! - W7 (fail-stop): a failed write or fsync is returned once with the file's name and poisons
//!   the log: every later append, flush and checkpoint is refused. Nothing is retried.
//!
//! # LSNs
//!
//! An LSN counts bytes of the *stream*: the payload area of consecutive blocks (block headers and
//! trailers excluded, padding included). Block `b` holds stream bytes `[b*P, (b+1)*P)` where
//! `P = block_size - 20`. The first block is 1, so the first LSN is `P`. Capacity, in LSN units,
//! is `(ring_blocks - 1) * P` (one block of slack covers the checkpoint's partial block).
//!
//! # Files
//!
//! `ib_logfile0 .. ib_logfile{files-1}` (set A), each `file_size` bytes; after an odd number of
//! online resizes, `ib_redo0 ..` (set B) instead (resize.rs: the resized log is built in the
//! other set, whose first checkpoint slot is the switch). Per file, blocks 0..3 are the
//! header area; data blocks follow. Data block `b` lives at ring position `r = b % ring_blocks`:
//! file `r / blocks_per_file`, offset `(3 + r % blocks_per_file) * block_size`.
//!
//! File header (block 0 of every file; written once at create; integers little-endian):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `EKLG` |
//! | 4 | 4 | format version (1) |
//! | 8 | 4 | block_size |
//! | 12 | 4 | this file's index |
//! | 16 | 4 | number of files |
//! | 20 | 8 | file_size |
//! | 28 | 8 | capacity (LSN units) |
//! | 36 | 8 | generation: 0 at create, one more per online resize (zero in logs made before \
//! resizing existed) |
//! | bs-4 | 4 | crc32c of bytes `0..bs-4` |
//!
//! Checkpoint slots (blocks 1 and 2 of `ib_logfile0`; blocks 1 and 2 of other files unused):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `EKCP` |
//! | 4 | 4 | format version (1) |
//! | 8 | 8 | checkpoint number (slot = number % 2; the highest valid number wins) |
//! | 16 | 8 | checkpoint LSN (a group boundary) |
//! | 24 | 4 | epoch of the run that wrote it |
//! | 28 | 4 | zero |
//! | 32 | 8 | capacity (LSN units) |
//! | 40 | 8 | redo replay rate, bytes/s, of the last measured recovery (0: none; what slots of \
//! logs made before the field hold, as unused bytes were zero) |
//! | bs-4 | 4 | crc32c of bytes `0..bs-4` |
//!
//! Data block (`block_size` bytes, written only whole and at its aligned offset):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | absolute block number (stale laps are recognised by it) |
//! | 8 | 4 | epoch |
//! | 12 | 2 | data_len: stream bytes of groups in this block (`<= P`) |
//! | 14 | 2 | flags: bit 0 = PADDED (bytes after data_len are padding; the stream goes on) |
//! | 16 | P | stream bytes; after data_len: zeros |
//! | bs-4 | 4 | crc32c of bytes `0..bs-4` |
//!
//! A block with `data_len < P` and no PADDED flag is the end of its epoch's stream.
//!
//! Group (in the stream; spans blocks freely; never cut by padding):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | payload length `n` |
//! | 4 | 4 | low 32 bits of the group's start LSN |
//! | 8 | 4 | crc32c of the payload followed by bytes `0..8` of this header |
//! | 12 | n | payload |
//! | 12+n | 4 | end marker `0x454B_4E44` |
//!
//! Overhead: 16 bytes per group, 20 bytes per block, half a block per durable flush.

mod background;
mod block;
mod buffer;
mod checkpoint;
pub mod copy;
pub(crate) mod fuzz;
mod header;
pub(crate) mod layout;
mod reader;
pub mod record;
mod resize;
mod ring;
pub mod space;
mod stats;
mod writer;

#[cfg(test)]
mod tests;

pub use header::log_exists;
pub use header::probe_geometry;
pub use reader::{GroupRef, ScanStop};
pub use resize::{LogResize, ResizeOutcome};
pub use space::{LogSpace, MakeRoom};
pub use stats::LogStats;
pub use writer::Log;

use crate::types::Lsn;
use std::time::Duration;

/// `flush_log_at_trx_commit`: what a commit waits for (see [`Log::flush_for_commit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushAtCommit {
    /// Nothing: the background thread writes and fsyncs about once per interval.
    Zero,
    /// Written and fsynced before the commit returns.
    #[default]
    One,
    /// Written to the OS before the commit returns; fsynced about once per interval.
    Two,
}

/// Shape of the log. `file_size`, `files` and `block_size` are recorded in the files and must
/// match at open; `buffer_size`, `flush_at_commit` and `background_interval` may change freely.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Bytes per log file, a multiple of `block_size` (`log_file_size`).
    pub file_size: u64,
    /// Number of log files (`log_files_in_group`).
    pub files: u32,
    /// Bytes of the in-memory log buffer (`log_buffer_size`); bounds the largest group.
    pub buffer_size: usize,
    /// 512 or 4096 (`log_block_size`).
    pub block_size: usize,
    pub flush_at_commit: FlushAtCommit,
    /// How often the background thread writes and fsyncs (InnoDB: one second).
    pub background_interval: Duration,
    /// Open for reading only: `Log::open` writes no checkpoint slot (the caller appends
    /// nothing, so no block carries a new epoch).
    pub read_only: bool,
    /// The engine's fail-stop state, shared with the other writers of one open: the log's own
    /// failed write or fsync is recorded there (W7), and once anything failed the log takes
    /// no more appends. `None`: a state of the log's own, fresh at each open or create.
    pub health: Option<std::sync::Arc<crate::error::Health>>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            file_size: 48 << 20,
            files: 2,
            buffer_size: 16 << 20,
            block_size: 512,
            flush_at_commit: FlushAtCommit::One,
            background_interval: Duration::from_secs(1),
            read_only: false,
            health: None,
        }
    }
}

/// Where an appended group lies in the stream: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LsnRange {
    pub start: Lsn,
    pub end: Lsn,
}

/// One complete group read back by recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub start: Lsn,
    pub end: Lsn,
    pub payload: Vec<u8>,
}

/// What [`Log::open`] found. Open scans the log once to find where it ends (and refuses a
/// corrupted one) without keeping any group; [`Recovered::source`] streams the groups again.
#[derive(Debug)]
pub struct Recovered {
    /// The checkpoint recovery started from.
    pub checkpoint_lsn: Lsn,
    /// Complete groups after the checkpoint.
    pub group_count: u64,
    /// Reads the groups in `[checkpoint_lsn, end_lsn)` back, in LSN order.
    pub source: RedoSource,
    /// Bytes of blocks read by the scan (including the block that ended it).
    pub bytes_scanned: u64,
    /// One checkpoint slot was invalid and has been rewritten.
    pub checkpoint_slot_repaired: bool,
    /// End of the last complete group (the checkpoint LSN if there is none). The log appends
    /// from the next block boundary at or after it.
    pub end_lsn: Lsn,
    /// Why the scan stopped, for diagnostics.
    pub stop: ScanStop,
    /// Redo bytes per second the last measured recovery of this log replayed (whole open,
    /// recovery included), as recorded in the checkpoint slot; 0 if none was measured.
    pub replay_rate: u64,
}

impl Recovered {
    /// Every complete group after the checkpoint, in memory (tests and tools; recovery
    /// streams them with [`RedoSource::for_each`]).
    pub fn collect_groups(&self) -> crate::error::Result<Vec<Group>> {
        let mut out = Vec::new();
        self.source.for_each(&mut |g| {
            out.push(Group {
                start: g.start,
                end: g.end,
                payload: g.payload.to_vec(),
            });
            Ok(())
        })?;
        Ok(out)
    }
}

/// The stretch of log that recovery replays, `[start, end)`, as the open's scan found it: the
/// groups can be read again, in order and checked as the first time, as often as needed. The
/// log appends only from the block boundary at or after `end`, and never overwrites a block
/// before the checkpoint (W4), so these groups stay readable while recovery runs as long as the
/// checkpoint does not pass them.
#[derive(Clone)]
pub struct RedoSource {
    geom: layout::Geometry,
    files: Vec<std::sync::Arc<dyn crate::io::File>>,
    start: u64,
    end: u64,
    last_run_epoch: u32,
}

impl std::fmt::Debug for RedoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedoSource({}..{})", self.start, self.end)
    }
}

impl RedoSource {
    /// Where the stretch starts and ends.
    pub fn range(&self) -> (Lsn, Lsn) {
        (Lsn(self.start), Lsn(self.end))
    }

    /// Hands every group of the stretch to `visit`, in LSN order, reading one chunk of the log
    /// at a time. An error of `visit` stops the read and is returned. A stretch that no longer
    /// reads back whole (the files changed since open) is an error.
    pub fn for_each(
        &self,
        visit: &mut dyn FnMut(GroupRef<'_>) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        if self.start >= self.end {
            return Ok(());
        }
        let out = reader::scan(
            &self.geom,
            &self.files,
            self.start,
            self.last_run_epoch,
            self.end,
            visit,
        )?;
        if out.end_lsn != self.end {
            return Err(crate::error::Error::Recovery {
                lsn: out.end_lsn,
                reason: format!(
                    "the redo log no longer reads back to LSN {} as it did when it was opened \
                     (the second read stopped: {:?}); were the log files changed while the \
                     database was opening?",
                    self.end, out.stop
                ),
            });
        }
        Ok(())
    }

    /// The payload of the group that starts at `lsn` (a group start inside the stretch).
    pub fn group_at(&self, lsn: Lsn) -> crate::error::Result<Vec<u8>> {
        let mut found = None;
        if (self.start..self.end).contains(&lsn.0) {
            reader::scan(
                &self.geom,
                &self.files,
                lsn.0,
                self.last_run_epoch,
                lsn.0 + 1,
                &mut |g| {
                    found = Some(g.payload.to_vec());
                    Ok(())
                },
            )?;
        }
        found.ok_or_else(|| crate::error::Error::Recovery {
            lsn: lsn.0,
            reason: "no complete group starts here in the recovered redo log".into(),
        })
    }
}
