//! Geometry of the log: which block lives where, how big the stream's blocks are, and the
//! limits a configuration must respect. Pure arithmetic, no I/O.
//!
//! What must stay true: a data block's ring position and file offset are a function of its
//! absolute number only (so the reader and the writer agree), header blocks are never handed
//! out as data blocks, and `capacity()` keeps one block of slack so that a write can never
//! reach the block holding the checkpoint LSN (W4).

use super::LogConfig;
use crate::error::{Error, Result};

/// The format version written in file headers and checkpoint slots.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// Bytes of a group's header (length, flags, ...) and of its end mark, in the stream.
pub(crate) const GROUP_HEADER_SIZE: usize = 12;
pub(crate) const GROUP_END_SIZE: usize = 4;
/// Stream bytes a group takes beyond its payload.
pub(crate) const GROUP_OVERHEAD: usize = GROUP_HEADER_SIZE + GROUP_END_SIZE;

/// Blocks at the start of every file that are not data: file header, two checkpoint slots.
pub(crate) const HEADER_BLOCKS: u64 = 3;
/// Bytes of a data block's header (block number, epoch, data_len, flags).
pub(crate) const BLOCK_HEADER_SIZE: usize = 16;
/// Bytes of a data block's trailer (crc32c).
pub(crate) const BLOCK_TRAILER_SIZE: usize = 4;
/// The first data block of a new log; block 0 is never used, so a zeroed block never matches.
pub(crate) const FIRST_BLOCK: u64 = 1;
/// Fewest data blocks a log may have.
const MIN_RING_BLOCKS: u64 = 8;

/// The file name of log file `index` of the first set (the one every log is created in).
pub(crate) fn file_name(index: usize) -> String {
    LogSet::A.file_name(index)
}

/// Which of the two file sets holds the log. A log is created in set A; an online resize
/// builds the resized log in the other set and switches to it when its first checkpoint slot
/// is durable, so the log alternates between the sets, one resize at a time. The file header's
/// generation says which set is newer when a crash leaves both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogSet {
    /// `ib_logfile0`, `ib_logfile1`, ...
    A,
    /// `ib_redo0`, `ib_redo1`, ...
    B,
}

impl LogSet {
    pub fn file_name(self, index: usize) -> String {
        match self {
            LogSet::A => format!("ib_logfile{index}"),
            LogSet::B => format!("ib_redo{index}"),
        }
    }

    pub fn other(self) -> LogSet {
        match self {
            LogSet::A => LogSet::B,
            LogSet::B => LogSet::A,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub block_size: usize,
    /// Stream bytes per block (`P`).
    pub payload: u64,
    pub files: u32,
    pub file_size: u64,
    /// Data blocks per file.
    pub blocks_per_file: u64,
    /// Data blocks in all files: one lap.
    pub ring_blocks: u64,
}

fn invalid(reason: String) -> Error {
    Error::InvalidConfig {
        origin: "redo log configuration".into(),
        reason,
    }
}

impl Geometry {
    /// Validates `cfg` and derives the geometry.
    pub fn new(cfg: &LogConfig) -> Result<Self> {
        if cfg.block_size != 512 && cfg.block_size != 4096 {
            return Err(invalid(format!(
                "log_block_size = {} (valid: 512 or 4096)",
                cfg.block_size
            )));
        }
        let bs = cfg.block_size as u64;
        if cfg.files == 0 || cfg.files > 100 {
            return Err(invalid(format!(
                "log_files_in_group = {} (valid: 1..=100)",
                cfg.files
            )));
        }
        if cfg.file_size / bs * bs != cfg.file_size || cfg.file_size / bs < HEADER_BLOCKS + 1 {
            return Err(invalid(format!(
                "log_file_size = {} must be a multiple of log_block_size ({bs}) and hold at \
                 least {} blocks",
                cfg.file_size,
                HEADER_BLOCKS + 1
            )));
        }
        let blocks_per_file = cfg.file_size / bs - HEADER_BLOCKS;
        let ring_blocks = blocks_per_file * u64::from(cfg.files);
        if ring_blocks < MIN_RING_BLOCKS {
            return Err(invalid(format!(
                "log_file_size x log_files_in_group leaves {ring_blocks} data blocks of {bs} \
                 bytes; at least {MIN_RING_BLOCKS} are needed"
            )));
        }
        let geom = Geometry {
            block_size: cfg.block_size,
            payload: bs - (BLOCK_HEADER_SIZE + BLOCK_TRAILER_SIZE) as u64,
            files: cfg.files,
            file_size: cfg.file_size,
            blocks_per_file,
            ring_blocks,
        };
        let min_buf = 4 * cfg.block_size;
        if cfg.buffer_size < min_buf || cfg.buffer_size as u64 > geom.capacity() {
            return Err(invalid(format!(
                "log_buffer_size = {} (valid: {min_buf}..={}, from four blocks to the log \
                 capacity)",
                cfg.buffer_size,
                geom.capacity()
            )));
        }
        Ok(geom)
    }

    /// Stream bytes that may lie between the checkpoint LSN and the current LSN.
    pub fn capacity(&self) -> u64 {
        (self.ring_blocks - 1) * self.payload
    }

    pub fn block_of(&self, lsn: u64) -> u64 {
        lsn / self.payload
    }

    pub fn offset_in_block(&self, lsn: u64) -> u64 {
        lsn % self.payload
    }

    pub fn block_start(&self, block: u64) -> u64 {
        block * self.payload
    }

    /// The first block boundary at or after `lsn`.
    pub fn round_up(&self, lsn: u64) -> u64 {
        lsn.div_ceil(self.payload) * self.payload
    }

    /// The LSN of a brand new log.
    pub fn first_lsn(&self) -> u64 {
        self.block_start(FIRST_BLOCK)
    }

    /// File index and byte offset of data block `block`.
    pub fn locate(&self, block: u64) -> (usize, u64) {
        let ring = block % self.ring_blocks;
        let file = (ring / self.blocks_per_file) as usize;
        let slot = HEADER_BLOCKS + ring % self.blocks_per_file;
        (file, slot * self.block_size as u64)
    }

    /// Consecutive blocks `[from, to)` cut into runs that are contiguous in one file:
    /// `(file, offset, first block, block count)`. One write per run.
    pub fn runs(&self, from: u64, to: u64) -> Vec<(usize, u64, u64, u64)> {
        let mut out = Vec::new();
        let mut b = from;
        while b < to {
            let (file, offset) = self.locate(b);
            let left_in_file = self.blocks_per_file - (b % self.ring_blocks) % self.blocks_per_file;
            let n = left_in_file.min(to - b);
            out.push((file, offset, b, n));
            b += n;
        }
        out
    }

    /// Largest payload one group may carry with a log buffer of `buffer_size` bytes: the group
    /// must fit in the buffer beside a partial block that cannot be drained yet.
    pub fn max_payload(&self, buffer_size: usize) -> usize {
        let overhead = GROUP_OVERHEAD as u64 + self.payload;
        (buffer_size as u64).saturating_sub(overhead) as usize
    }
}

/// Byte offset of checkpoint slot `index` (0 or 1) in log file 0: the blocks after the header.
pub(crate) fn slot_offset(geom: &Geometry, index: usize) -> u64 {
    (1 + index as u64) * geom.block_size as u64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cfg(file_size: u64, files: u32, bs: usize) -> LogConfig {
        LogConfig {
            file_size,
            files,
            block_size: bs,
            buffer_size: 4 * bs,
            ..LogConfig::default()
        }
    }

    #[test]
    fn locate_skips_headers_and_wraps() {
        let g = Geometry::new(&cfg(512 * 8, 2, 512)).unwrap();
        assert_eq!((g.blocks_per_file, g.ring_blocks, g.payload), (5, 10, 492));
        assert_eq!(g.locate(0), (0, 3 * 512));
        assert_eq!(g.locate(4), (0, 7 * 512));
        assert_eq!(g.locate(5), (1, 3 * 512));
        assert_eq!(g.locate(10), (0, 3 * 512));
        assert_eq!(
            g.runs(3, 12),
            vec![(0, 6 * 512, 3, 2), (1, 1536, 5, 5), (0, 1536, 10, 2)]
        );
        assert_eq!(g.capacity(), 9 * 492);
        assert_eq!(g.round_up(493), 984);
        assert_eq!(g.round_up(984), 984);
    }

    #[test]
    fn bad_configs_say_the_valid_range() {
        let e = Geometry::new(&cfg(4096, 2, 1024)).unwrap_err().to_string();
        assert!(e.contains("512 or 4096"), "{e}");
        let e = Geometry::new(&cfg(1000, 2, 512)).unwrap_err().to_string();
        assert!(e.contains("multiple"), "{e}");
        let e = Geometry::new(&cfg(512 * 4, 2, 512))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least"), "{e}");
        let mut c = cfg(512 * 64, 2, 512);
        c.buffer_size = 100;
        let e = Geometry::new(&c).unwrap_err().to_string();
        assert!(e.contains("log_buffer_size"), "{e}");
    }
}
