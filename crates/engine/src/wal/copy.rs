//! copy: the redo log's side of an online backup (XtraBackup's redo copy). A [`LogCopier`]
//! follows the log of a running database and copies every block from a start LSN (a
//! checkpoint) up to what the log has written, into a linear staging file of the backup (block
//! `b` at byte `(b - first) * block_size`), so the copy keeps the log the source recycles while
//! the data file is being copied. [`LogCopier::build_log`] then lays the staged blocks out as
//! the redo log of the copy, with a checkpoint at the start LSN, for recovery to replay;
//! [`create_log_at`] makes the empty log a prepared copy finally gets, in the source's geometry.
//!
//! What must stay true: a block is staged only when it passed its checks as the block of that
//! number (checksum and absolute block number: a block of a later lap means the source
//! recycled log the copy needed, an error, never a silent gap); blocks before the one holding
//! the log's written LSN are final (the writer rewrites only the block holding `written`, W3);
//! the block holding `written` is staged again on the next pass (it may still grow), and a read
//! of it torn by the writer's rewrite is read again. The caller keeps the checkpoint from
//! passing the copy position (see backup.rs), so the blocks still to copy are never recycled.

use super::block::check_data_block;
use super::block::BlockDefect;
use super::checkpoint::{decode_slot, encode_slot, write_slot, Slot};
use super::header::create_files;
use super::layout::{slot_offset, Geometry, LogSet, HEADER_BLOCKS};
use super::{Log, LogConfig};
use crate::error::{Error, Result};
use crate::io::{File, Storage};
use crate::types::Lsn;
use std::sync::Arc;

/// Largest read of source blocks per step, in bytes.
const COPY_CHUNK_BYTES: u64 = 1 << 20;
/// Reads of a block that fails its checks before the copy gives up on it: the block holding
/// the written LSN may be torn by the writer's rewrite at the moment it is read.
const BLOCK_READ_ATTEMPTS: u32 = 100;

/// Follows a source log and stages its blocks from a start LSN.
pub struct LogCopier {
    geom: Geometry,
    cfg: LogConfig,
    src: Vec<Arc<dyn File>>,
    /// A valid checkpoint slot of the source: the copy's slots are this one with the fields a
    /// copy changes (number, LSN, epoch).
    template: Slot,
    epoch: u32,
    start: u64,
    first_block: u64,
    /// Blocks before this one are staged for good; this one is staged again next pass.
    next_block: u64,
    /// One past the last block staged.
    staged_end: u64,
    /// The written LSN the last pass copied up to.
    copied_lsn: u64,
    staged: Arc<dyn File>,
    /// Blocks read again because a read failed its checks (torn by a concurrent rewrite).
    pub rereads: u64,
    /// Keeps a resize from replacing the files while they are copied.
    _lease: CopyLease,
}

/// A copier's claim on the log's files: while one is held no resize starts.
struct CopyLease(Arc<super::writer::Shared>);

impl Drop for CopyLease {
    fn drop(&mut self) {
        self.0.users.lock().copiers -= 1;
    }
}

impl Log {
    /// A copier of this log from `start` (a checkpoint LSN), staging into `staged` (empty).
    /// Refused while the log is being resized (the files are being replaced).
    pub fn copier(&self, start: Lsn, staged: Arc<dyn File>) -> Result<LogCopier> {
        let sh = &*self.shared;
        let lease = {
            let mut users = sh.users.lock();
            if users.resizing {
                return Err(Error::Backup {
                    target: staged.name().to_string(),
                    reason: "the redo log is being resized (log_capacity); run the backup \
                             when the resize has finished"
                        .into(),
                });
            }
            users.copiers += 1;
            CopyLease(self.shared.clone())
        };
        let ring = sh.ring();
        let file0 = ring.file(0)?;
        let mut best: Option<Slot> = None;
        for index in 0..2 {
            let mut raw = vec![0u8; ring.geom.block_size];
            file0.read_at(&mut raw, slot_offset(&ring.geom, index))?;
            if let Ok(s) = decode_slot(&raw, &ring.geom, index) {
                if best.is_none_or(|b| s.number > b.number) {
                    best = Some(s);
                }
            }
        }
        let template = best.ok_or_else(|| {
            Error::Poisoned(format!(
                "{}: neither redo log checkpoint slot is valid on the running database",
                file0.name()
            ))
        })?;
        let first_block = ring.geom.block_of(start.0);
        let mut cfg = sh.cfg.clone();
        cfg.file_size = ring.geom.file_size;
        cfg.files = ring.geom.files;
        Ok(LogCopier {
            geom: ring.geom.clone(),
            cfg,
            src: ring.files.clone(),
            template,
            epoch: sh.epoch,
            start: start.0,
            first_block,
            next_block: first_block,
            staged_end: first_block,
            copied_lsn: start.0,
            staged,
            rereads: 0,
            _lease: lease,
        })
    }
}

impl LogCopier {
    /// The LSN the staged blocks hold the log up to (the written LSN of the last pass).
    pub fn copied_lsn(&self) -> Lsn {
        Lsn(self.copied_lsn)
    }

    /// The LSN of the first block not staged for good: the log from here on must stay
    /// unrecycled until the next pass.
    pub fn needed_from(&self) -> Lsn {
        Lsn(self.geom.block_start(self.next_block))
    }

    /// Bytes of redo blocks staged.
    pub fn staged_bytes(&self) -> u64 {
        (self.staged_end - self.first_block) * self.geom.block_size as u64
    }

    /// Stages every block from the last pass's position up to `written` (the log's written
    /// LSN, read just before). Returns the bytes staged by this pass.
    pub fn copy_to(&mut self, written: Lsn) -> Result<u64> {
        let g = self.geom.clone();
        let written = written.0.max(self.copied_lsn);
        let last = g.block_of(written);
        let partial = g.offset_in_block(written) > 0;
        let end = if partial { last + 1 } else { last };
        let bs = g.block_size as u64;
        let mut staged = 0;
        let mut b = self.next_block;
        while b < end {
            let n = (end - b).min(COPY_CHUNK_BYTES / bs);
            for (file, offset, first, count) in g.runs(b, b + n) {
                let mut buf = vec![0u8; (count * bs) as usize];
                self.read_blocks(file, offset, first, &mut buf)?;
                self.staged
                    .write_at(&buf, (first - self.first_block) * bs)?;
                staged += buf.len() as u64;
            }
            b += n;
        }
        self.staged_end = self.staged_end.max(end);
        self.next_block = last;
        self.copied_lsn = written;
        Ok(staged)
    }

    /// Reads `count` blocks from `first` at `offset` of source file `file` into `buf`, each
    /// checked; a block that fails is read again, up to `BLOCK_READ_ATTEMPTS` times.
    fn read_blocks(&mut self, file: usize, offset: u64, first: u64, buf: &mut [u8]) -> Result<()> {
        let bs = self.geom.block_size;
        let f = self
            .src
            .get(file)
            .ok_or_else(|| Error::Poisoned(format!("redo log: no log file {file}")))?
            .clone();
        f.read_at(buf, offset)?;
        for (i, block) in buf.chunks_mut(bs).enumerate() {
            let b = first + i as u64;
            let mut attempt = 1;
            loop {
                match check_data_block(block, b) {
                    Ok(_) => break,
                    Err(BlockDefect::Number { found }) if found > b => {
                        return Err(self.recycled(b, found));
                    }
                    Err(d) if attempt >= BLOCK_READ_ATTEMPTS => {
                        return Err(Error::BadDatabase {
                            path: f.name().into(),
                            reason: format!(
                                "redo log block {b} (LSN {}..{}) failed its checks ({d:?}) in \
                                 {BLOCK_READ_ATTEMPTS} reads while the backup copied it",
                                self.geom.block_start(b),
                                self.geom.block_start(b + 1)
                            ),
                        });
                    }
                    Err(_) => {
                        attempt += 1;
                        self.rereads += 1;
                        if attempt > 3 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        f.read_at(block, offset + i as u64 * bs as u64)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn recycled(&self, b: u64, found: u64) -> Error {
        Error::Backup {
            target: self.staged.name().to_string(),
            reason: format!(
                "redo log block {b} (LSN {}) was overwritten by block {found} before the \
                 backup copied it: the source recycled log the copy needs (its capacity is {} \
                 bytes); the source is not affected, run the backup again",
                self.geom.block_start(b),
                self.geom.capacity()
            ),
        }
    }

    /// Creates the redo log of the copy on `target`: the source's file count and block size,
    /// files large enough for the staged blocks plus `room` bytes of new redo (at least the
    /// source's file size), the staged blocks at their places and both checkpoint slots at the
    /// start LSN, in the source's epoch; everything fsynced. Returns the log's file size.
    pub fn build_log(&self, target: &dyn Storage, room: u64) -> Result<u64> {
        let bs = self.geom.block_size as u64;
        let files = u64::from(self.geom.files);
        let blocks = (self.staged_end - self.first_block) + room.div_ceil(self.geom.payload) + 2;
        let per_file = blocks.div_ceil(files).max(self.geom.blocks_per_file);
        let mut cfg = self.cfg.clone();
        cfg.file_size = (HEADER_BLOCKS + per_file) * bs;
        cfg.read_only = false;
        cfg.health = None;
        let geom = Geometry::new(&cfg)?;
        // The slot format may carry more fields than these three: the copy keeps the source's.
        #[allow(clippy::needless_update)]
        let slot = |number| Slot {
            number,
            lsn: self.start,
            epoch: self.epoch,
            ..self.template
        };
        let (s0, s1) = (encode_slot(&geom, &slot(2)), encode_slot(&geom, &slot(3)));
        let out = create_files(target, &geom, LogSet::A, 0, Some([&s0, &s1]))?;
        let mut b = self.first_block;
        while b < self.staged_end {
            let n = (self.staged_end - b).min(COPY_CHUNK_BYTES / bs);
            for (file, offset, first, count) in geom.runs(b, b + n) {
                let mut buf = vec![0u8; (count * bs) as usize];
                self.staged
                    .read_at(&mut buf, (first - self.first_block) * bs)?;
                out[file].write_at(&buf, offset)?;
            }
            b += n;
        }
        for f in &out {
            f.sync()?;
        }
        Ok(cfg.file_size)
    }
}

/// Creates an empty redo log of `cfg`'s geometry on `target` whose checkpoint (and first
/// append) is the block boundary at or after `lsn`: the log of a copy whose data file holds
/// pages up to `lsn` after a clean shutdown. Refuses if a log file exists.
pub fn create_log_at(target: Arc<dyn Storage>, mut cfg: LogConfig, lsn: Lsn) -> Result<()> {
    cfg.read_only = false;
    cfg.health = None;
    let log = Log::create(target, cfg)?;
    let ring = log.shared.ring();
    log.close()?;
    drop(log);
    let file0 = ring.file(0)?;
    let mut raw = vec![0u8; ring.geom.block_size];
    file0.read_at(&mut raw, slot_offset(&ring.geom, 0))?;
    let template = decode_slot(&raw, &ring.geom, 0).map_err(|r| Error::BadDatabase {
        path: file0.name().into(),
        reason: format!("the checkpoint slot just written does not read back: {r}"),
    })?;
    let at = ring.geom.round_up(lsn.0);
    for number in [2, 3] {
        // IMPORTANT: each slot is fsynced by write_slot; both name the new start. Fields
        // besides number and LSN (the epoch, any the format gains) keep the created log's.
        #[allow(clippy::needless_update)]
        write_slot(
            file0.as_ref(),
            &ring.geom,
            &Slot {
                number,
                lsn: at,
                ..template
            },
        )?;
    }
    Ok(())
}

/// Where the log on `storage` ends (its last complete group), read without writing anything:
/// no page of the database can be newer (WAL rule). `cfg` gives the buffer size; the files'
/// geometry is read from them.
pub fn log_end(storage: Arc<dyn Storage>, mut cfg: LogConfig) -> Result<Lsn> {
    if let Some((file_size, files, block_size)) = super::probe_geometry(storage.as_ref()) {
        cfg.file_size = file_size;
        cfg.files = files;
        cfg.block_size = block_size;
    }
    cfg.read_only = true;
    cfg.health = None;
    let (log, recovered) = Log::open(storage, cfg)?;
    drop(log);
    Ok(recovered.end_lsn)
}
