//! Recovery scan: reads blocks forward from the checkpoint LSN and hands every complete group to
//! a visitor, stopping at the first block or group that cannot belong to the log's durable
//! history (or at a given LSN). Groups are passed borrowed from the scan's own buffer, so the
//! scan holds one read chunk and at most one group however long the log is.
//!
//! What must stay true (W1): a group is returned only if every byte of it came from blocks that
//! passed their checksum, carry the expected absolute block number, and continue the stream
//! without a hole; blocks never go back in epoch; within an epoch nothing is read past a partial
//! (unpadded) block; a block opening a newer epoch starts a fresh stream at its first byte (the
//! run that wrote it began there, W6), discarding an incomplete group before it. The scan reads
//! at most one lap and never panics on any bytes.

use super::block::{check_data_block, parse_group, BlockDefect, GroupParse};
use super::layout::{Geometry, BLOCK_HEADER_SIZE};
use super::layout::{GROUP_END_SIZE, GROUP_HEADER_SIZE};
use crate::error::Result;
use crate::io::File;
use crate::types::Lsn;
use std::sync::Arc;

/// Largest read the scan issues, in bytes.
const READ_CHUNK_BYTES: u64 = 1 << 20;

/// Why the scan stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanStop {
    /// Block failed its checksum: torn, never written, or corrupted.
    Checksum { block: u64 },
    /// Block is from another lap (its number is `found`).
    StaleBlock { block: u64, found: u64 },
    /// Block fields out of range despite a valid checksum.
    BadBlockHeader { block: u64 },
    /// Block's epoch is lower than the previous block's: left behind a hole by an older run.
    EpochWentBack { block: u64 },
    /// The previous block was the partial end of its run and this one does not start a new run.
    EndOfRun { block: u64 },
    /// A group failed its checks at `lsn`.
    BadGroup { lsn: Lsn, reason: &'static str },
    /// Read a whole lap (the log is full up to the checkpoint).
    FullLap,
    /// Reached the LSN the caller asked to stop at (a re-read of a stretch already scanned).
    Limit,
    /// Block failed its checksum although it is not blank and a later block (`valid_after`)
    /// of the same run is intact: the damage is inside the written stream, not a torn or lost
    /// tail. Recovery must not stop here (it would drop durable groups after it) and refuses.
    Corrupt {
        block: u64,
        stored: u32,
        computed: u32,
        valid_after: u64,
    },
}

/// How far past a block that failed its checksum the scan looks for an intact block of the
/// same run (a damaged sector of 4 KiB spans 8 blocks of 512 bytes).
const LOOKAHEAD_BLOCKS: u64 = 64;

/// One complete group as the scan found it: `[start, end)` in the stream, its payload borrowed
/// from the scan's buffer.
#[derive(Clone, Copy, Debug)]
pub struct GroupRef<'a> {
    pub start: Lsn,
    pub end: Lsn,
    pub payload: &'a [u8],
}

/// What a scan does with each group: an error from it ends the scan with that error.
pub(crate) type Visit<'v> = &'v mut dyn FnMut(GroupRef<'_>) -> Result<()>;

pub(crate) struct ScanOutcome {
    /// Complete groups visited.
    pub groups: u64,
    /// End of the last complete group, or the start LSN.
    pub end_lsn: u64,
    pub bytes_scanned: u64,
    /// Highest epoch of any accepted block.
    pub max_epoch: u32,
    pub stop: ScanStop,
}

/// Reads consecutive blocks in chunks of up to `READ_CHUNK_BYTES` within one file.
struct BlockReader<'a> {
    geom: &'a Geometry,
    files: &'a [Arc<dyn File>],
    first: u64,
    chunk: Vec<u8>,
}

impl BlockReader<'_> {
    fn block(&mut self, b: u64) -> Result<&[u8]> {
        let bs = self.geom.block_size;
        let n = (self.chunk.len() / bs) as u64;
        if b < self.first || b >= self.first + n {
            let (file, offset) = self.geom.locate(b);
            let left =
                self.geom.blocks_per_file - (b % self.geom.ring_blocks) % self.geom.blocks_per_file;
            let count = left.min(READ_CHUNK_BYTES / bs as u64).max(1);
            self.chunk.resize(count as usize * bs, 0);
            let f = self.files.get(file).ok_or_else(|| {
                crate::error::Error::Poisoned(format!("redo log: no log file {file}"))
            })?;
            f.read_at(&mut self.chunk, offset)?;
            self.first = b;
        }
        let at = (b - self.first) as usize * bs;
        Ok(&self.chunk[at..at + bs])
    }
}

/// Groups being assembled from the stream: `tail[pos..]` are bytes from `tail_lsn` on.
struct Assembler {
    tail: Vec<u8>,
    pos: usize,
    tail_lsn: u64,
    max_len: u64,
    /// Groups visited, and the end of the last one (the start LSN before any).
    groups: u64,
    end_lsn: u64,
    /// No group starting at or after this LSN is taken.
    stop_at: u64,
}

impl Assembler {
    /// Forgets an incomplete group and restarts the stream at `lsn`.
    fn restart(&mut self, lsn: u64) {
        self.tail.clear();
        self.pos = 0;
        self.tail_lsn = lsn;
    }

    /// Hands every complete group now in the tail to `visit`; an invalid one, or reaching
    /// `stop_at`, ends the scan (`Some`). An error of `visit` is returned as it is.
    fn take_groups(&mut self, visit: Visit<'_>) -> Result<Option<ScanStop>> {
        let stop = loop {
            if self.tail_lsn >= self.stop_at {
                break Some(ScanStop::Limit);
            }
            let bytes = &self.tail[self.pos..];
            match parse_group(bytes, self.tail_lsn, self.max_len) {
                GroupParse::NeedMore => break None,
                GroupParse::Invalid(reason) => {
                    break Some(ScanStop::BadGroup {
                        lsn: Lsn(self.tail_lsn),
                        reason,
                    })
                }
                GroupParse::Complete { total } => {
                    let start = self.tail_lsn;
                    self.tail_lsn += total as u64;
                    self.pos += total;
                    self.groups += 1;
                    self.end_lsn = self.tail_lsn;
                    visit(GroupRef {
                        start: Lsn(start),
                        end: Lsn(self.tail_lsn),
                        payload: &bytes[GROUP_HEADER_SIZE..total - GROUP_END_SIZE],
                    })?;
                }
            }
        };
        if self.pos > 0 && self.pos * 2 >= self.tail.len() {
            self.tail.drain(..self.pos);
            self.pos = 0;
        }
        Ok(stop)
    }

    fn pending(&self) -> bool {
        self.pos < self.tail.len()
    }
}

/// The checksum a block stores in its trailer and the one its bytes give.
fn block_checksums(raw: &[u8]) -> (u32, u32) {
    let n = raw.len().saturating_sub(super::layout::BLOCK_TRAILER_SIZE);
    let stored = super::block::le_u32(raw, n).unwrap_or(0);
    (stored, crc32c::crc32c(&raw[..n]))
}

/// The first block in `(bad, last]` (same file) that passes its checks as the block of that
/// number written by the last run (`epoch`, the highest in the checkpoint slots): proof that the
/// last run wrote the stream past `bad`, whose header says the last run wrote it too. Within one
/// run blocks are written in order, so a crash does not leave that: an unsynced write that was
/// lost leaves the block's old bytes (blank, an older lap's or run's block, or an older valid
/// version), and a torn write keeps a prefix, so what follows its cut is old bytes too. So the
/// block at `bad` was damaged after it was written. Limits: a device that tears a 4 KiB log
/// block (log_block_size = 4096) while landing later sectors of the same write would be
/// mistaken for damage (512-byte blocks are one sector and cannot tear); damage to the header
/// fields of the block, to a block of an earlier run, or to the last block written is taken
/// for a torn end (then only a data page newer than the log end shows it).
fn intact_block_after(
    reader: &mut BlockReader<'_>,
    bad: u64,
    last: u64,
    epoch: u32,
) -> Result<Option<u64>> {
    for b in bad + 1..=last {
        if let Ok(h) = check_data_block(reader.block(b)?, b) {
            if h.epoch == epoch {
                return Ok(Some(b));
            }
        }
    }
    Ok(None)
}

/// Scans from `start_lsn` (a group boundary) to the end of the durable stream, or until the
/// next group would start at or after `stop_at` ([`ScanStop::Limit`]), handing each complete
/// group to `visit`; `last_run_epoch` is the highest epoch in the checkpoint slots (the run
/// that wrote last).
///
/// Long because it is the one loop that decides where the log ends (W1, W4, W6: checksum,
/// lap, epoch, torn tail), and every stop condition must be read beside the others.
pub(crate) fn scan(
    geom: &Geometry,
    files: &[Arc<dyn File>],
    start_lsn: u64,
    last_run_epoch: u32,
    stop_at: u64,
    visit: Visit<'_>,
) -> Result<ScanOutcome> {
    let mut reader = BlockReader {
        geom,
        files,
        first: 0,
        chunk: Vec::new(),
    };
    let mut asm = Assembler {
        tail: Vec::new(),
        pos: 0,
        tail_lsn: start_lsn,
        max_len: geom.capacity(),
        groups: 0,
        end_lsn: start_lsn,
        stop_at,
    };
    let first_block = geom.block_of(start_lsn);
    let mut skip = geom.offset_in_block(start_lsn) as usize;
    let mut prev: Option<(u32, bool)> = None; // (epoch, was partial)
    let mut bytes_scanned = 0u64;
    let mut max_epoch = 0u32;
    let mut stop = ScanStop::FullLap;
    // A limit on the loop: one lap at most.
    for b in first_block..first_block + geom.ring_blocks {
        let raw = reader.block(b)?;
        bytes_scanned += geom.block_size as u64;
        let h = match check_data_block(raw, b) {
            Ok(h) => h,
            Err(d) => {
                stop = match d {
                    BlockDefect::Checksum if raw.iter().any(|&x| x != 0) => {
                        let (stored, computed) = block_checksums(raw);
                        // What the damaged block's own header claims: written as block `b` by
                        // the last run. (A block torn by an earlier crash claims an older
                        // epoch, and a later run's lost rewrite of it leaves it so.)
                        let claims_last_run = super::block::le_u64(raw, 0) == Some(b)
                            && super::block::le_u32(raw, 8) == Some(last_run_epoch);
                        // Only blocks of the same file: writes to different files may land
                        // in any order (a crash can tear the last write of each file).
                        let left_in_file = geom.blocks_per_file
                            - (b % geom.ring_blocks) % geom.blocks_per_file
                            - 1;
                        let last = (b + LOOKAHEAD_BLOCKS.min(left_in_file))
                            .min(first_block + geom.ring_blocks - 1);
                        let after = if claims_last_run {
                            intact_block_after(&mut reader, b, last, last_run_epoch)?
                        } else {
                            None
                        };
                        match after {
                            Some(valid_after) => ScanStop::Corrupt {
                                block: b,
                                stored,
                                computed,
                                valid_after,
                            },
                            None => ScanStop::Checksum { block: b },
                        }
                    }
                    BlockDefect::Checksum => ScanStop::Checksum { block: b },
                    BlockDefect::Number { found } => ScanStop::StaleBlock { block: b, found },
                    BlockDefect::Header => ScanStop::BadBlockHeader { block: b },
                };
                break;
            }
        };
        if let Some((epoch, partial)) = prev {
            if h.epoch < epoch {
                stop = ScanStop::EpochWentBack { block: b };
                break;
            }
            if h.epoch > epoch {
                asm.restart(geom.block_start(b));
            } else if partial {
                stop = ScanStop::EndOfRun { block: b };
                break;
            }
        }
        max_epoch = max_epoch.max(h.epoch);
        let data_len = usize::from(h.data_len);
        let data = &raw[BLOCK_HEADER_SIZE..BLOCK_HEADER_SIZE + data_len];
        if skip <= data_len {
            asm.tail.extend_from_slice(&data[skip..]);
        }
        skip = 0;
        if let Some(s) = asm.take_groups(visit)? {
            stop = s;
            break;
        }
        if h.padded {
            if asm.pending() {
                // Padding is only ever added at a group boundary.
                stop = ScanStop::BadGroup {
                    lsn: Lsn(asm.tail_lsn),
                    reason: "group cut by block padding",
                };
                break;
            }
            asm.restart(geom.block_start(b + 1));
        }
        prev = Some((h.epoch, !h.padded && data_len < geom.payload as usize));
    }
    Ok(ScanOutcome {
        groups: asm.groups,
        end_lsn: asm.end_lsn,
        bytes_scanned,
        max_epoch,
        stop,
    })
}
