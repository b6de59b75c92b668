//! The log buffer and the LSN bookkeeping behind the log's mutex: stream bytes not yet written
//! (plus the last partial block, which a later flush rewrites whole), the current, written,
//! flushed and checkpoint LSNs, and the sticky failure.
//!
//! What must stay true: `checkpoint <= flushed <= written <= current`; `buf` holds exactly the
//! stream bytes `[buf_base, current)` and `buf_base` is the block start of `written`; padding
//! (W3) is added only right before a durable write, so the block it closes is never rewritten.
//! Must never format a block past `current`, nor drop bytes from `buf` before they are written.

use super::block::{seal_data_block, BlockHeader, GROUP_END_MARK};
use super::layout::GROUP_HEADER_SIZE;
use super::layout::{Geometry, BLOCK_HEADER_SIZE};
use crate::error::{Error, Result};

/// Why the log refuses work.
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    /// An earlier write or fsync failed; the text names the file and the error.
    Poisoned(String),
    Closed,
}

pub(crate) struct State {
    /// The files and geometry appends and flushes use (replaced by an online resize).
    pub ring: std::sync::Arc<super::ring::Ring>,
    pub current: u64,
    pub written: u64,
    pub flushed: u64,
    pub checkpoint: u64,
    /// Stream bytes `[buf_base, current)`.
    pub buf: Vec<u8>,
    pub buf_base: u64,
    /// A flush is doing I/O (only one at a time: its thread is the leader).
    pub writer_active: bool,
    /// Threads waiting in `flush_to` for the leader.
    pub flush_waiters: u64,
    /// Those threads, each with the LSN it waits for and what it sleeps on: a flush wakes
    /// the ones it covered and one more to lead the next flush, not all of them.
    pub sleepers: Vec<Sleeper>,
    /// Files written since their last fsync.
    pub unsynced: Vec<bool>,
    pub failure: Option<Failure>,
}

/// A thread sleeping in `flush_to` until `target` is written (and fsynced, when `durable`).
pub(crate) struct Sleeper {
    pub target: u64,
    pub durable: bool,
    pub waker: std::sync::Arc<parking_lot::Condvar>,
}

/// What one flush writes: blocks `[first_block, first_block + n)` formatted in `image`.
pub(crate) struct BlockImage {
    pub first_block: u64,
    pub image: Vec<u8>,
}

impl State {
    /// A log positioned at `lsn` (a block boundary) with everything before it durable.
    pub fn new(
        lsn: u64,
        checkpoint: u64,
        ring: std::sync::Arc<super::ring::Ring>,
        buffer_size: usize,
    ) -> Self {
        let files = ring.files.len();
        State {
            ring,
            current: lsn,
            written: lsn,
            flushed: lsn,
            checkpoint,
            buf: Vec::with_capacity(buffer_size + 4096),
            buf_base: lsn,
            writer_active: false,
            flush_waiters: 0,
            sleepers: Vec::new(),
            unsynced: vec![false; files],
            failure: None,
        }
    }

    /// Wakes the sleepers whose LSN is now reached, and, while no flush runs, the first one
    /// still waiting, to lead the next; after a failure, all of them (they return its error).
    pub fn wake_sleepers(&mut self) {
        let (written, flushed, failed) = (self.written, self.flushed, self.failure.is_some());
        let mut leader_woken = self.writer_active;
        self.sleepers.retain(|s| {
            let reached = if s.durable { flushed } else { written };
            let wake = failed || reached >= s.target || !leader_woken;
            if reached < s.target {
                leader_woken = true;
            }
            if wake {
                s.waker.notify_one();
            }
            !wake
        });
    }

    pub fn usable(&self) -> Result<()> {
        match &self.failure {
            None => Ok(()),
            Some(Failure::Poisoned(why)) => Err(Error::Poisoned(format!("redo log: {why}"))),
            Some(Failure::Closed) => Err(Error::LogClosed),
        }
    }

    /// Appends one framed group at `current`: header, `len` payload bytes filled by `fill`
    /// (which returns the payload's crc32c), end marker. Returns the group's start LSN.
    pub fn push_group(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> u32) -> u64 {
        let start = self.current;
        let at = self.buf.len();
        self.buf.resize(at + GROUP_HEADER_SIZE + len, 0);
        let crc = fill(&mut self.buf[at + GROUP_HEADER_SIZE..]);
        let header = super::block::group_header(len as u32, start, crc);
        self.buf[at..at + GROUP_HEADER_SIZE].copy_from_slice(&header);
        self.buf.extend_from_slice(&GROUP_END_MARK.to_le_bytes());
        self.current = self.buf_base + self.buf.len() as u64;
        start
    }

    /// Closes the last partial block with padding before a durable write (W3). Returns the
    /// padded block and its data length, or `None` when `current` is on a block boundary.
    pub fn pad(&mut self, geom: &Geometry) -> Option<(u64, u16)> {
        let off = geom.offset_in_block(self.current);
        if off == 0 {
            return None;
        }
        let block = geom.block_of(self.current);
        let pad = (geom.payload - off) as usize;
        self.buf.resize(self.buf.len() + pad, 0);
        self.current += pad as u64;
        Some((block, off as u16))
    }

    /// Formats every block from the one holding `written` up to `current`, with headers and
    /// checksums; `pad` names the block closed by [`State::pad`], if any.
    pub fn format(&self, geom: &Geometry, epoch: u32, pad: Option<(u64, u16)>) -> BlockImage {
        let first_block = geom.block_of(self.written);
        let end_block = geom.block_of(self.current.saturating_sub(1)) + 1;
        let bs = geom.block_size;
        let p = geom.payload as usize;
        let mut image = vec![0u8; (end_block - first_block) as usize * bs];
        for (i, block) in image.chunks_exact_mut(bs).enumerate() {
            let b = first_block + i as u64;
            let from = (geom.block_start(b) - self.buf_base) as usize;
            let avail = p.min(self.buf.len() - from);
            block[BLOCK_HEADER_SIZE..BLOCK_HEADER_SIZE + avail]
                .copy_from_slice(&self.buf[from..from + avail]);
            let (data_len, padded) = match pad {
                Some((pb, len)) if pb == b => (len, true),
                _ => (avail as u16, false),
            };
            let h = BlockHeader {
                block_no: b,
                epoch,
                data_len,
                padded,
            };
            seal_data_block(block, &h);
        }
        BlockImage { first_block, image }
    }

    /// After a successful write of everything up to `end`: forgets the bytes of whole blocks
    /// before `end`, keeping the partial block (a later flush rewrites it whole).
    pub fn drain(&mut self, geom: &Geometry, end: u64) {
        let keep_from = geom.block_start(geom.block_of(end));
        let n = (keep_from - self.buf_base) as usize;
        self.buf.drain(..n);
        self.buf_base = keep_from;
        debug_assert_eq!(self.buf_base + self.buf.len() as u64, self.current);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wal::block::{check_data_block, parse_group, GroupParse};
    use crate::wal::LogConfig;

    #[test]
    fn format_pad_drain_keep_the_stream_and_lsns_aligned() {
        let cfg = LogConfig {
            file_size: 512 * 32,
            buffer_size: 4096,
            ..LogConfig::default()
        };
        let g = Geometry::new(&cfg).unwrap();
        let start = g.first_lsn();
        let ring = crate::wal::ring::Ring {
            geom: g.clone(),
            files: Vec::new(),
            set: crate::wal::layout::LogSet::A,
            generation: 0,
        };
        let mut st = State::new(start, start, std::sync::Arc::new(ring), cfg.buffer_size);
        let payload = vec![9u8; 600];
        let s = st.push_group(600, |b| {
            b.copy_from_slice(&payload);
            crc32c::crc32c(&payload)
        });
        assert_eq!((s, st.current), (start, start + 616));
        let pad = st.pad(&g).unwrap();
        assert_eq!(pad, (2, (616 - g.payload) as u16));
        assert_eq!(st.current, g.block_start(3));
        let img = st.format(&g, 1, Some(pad));
        assert_eq!((img.first_block, img.image.len()), (1, 1024));
        let b1 = check_data_block(&img.image[..512], 1).unwrap();
        let b2 = check_data_block(&img.image[512..], 2).unwrap();
        assert_eq!((b1.data_len, b1.padded), (g.payload as u16, false));
        assert_eq!((b2.data_len, b2.padded), (pad.1, true));
        let mut stream = img.image[16..508].to_vec();
        stream.extend_from_slice(&img.image[528..528 + usize::from(pad.1)]);
        assert_eq!(
            parse_group(&stream, start, 1 << 20),
            GroupParse::Complete { total: 616 }
        );
        st.written = st.current;
        st.drain(&g, st.current);
        assert!(st.buf.is_empty());
        assert_eq!(st.buf_base, g.block_start(3));
    }
}
