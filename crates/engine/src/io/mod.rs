//! io: every byte the engine reads or writes goes through the [`Storage`] and [`File`] traits.
//!
//! Two backends: [`file::FileStorage`] (real files: positioned I/O, `flush_method`, O_DIRECT with
//! aligned buffers, fdatasync) and [`sim::SimStorage`] (in memory, for tests: tracks which bytes
//! are synced, `crash()` drops unsynced writes, tears writes, injects EIO/ENOSPC).
//!
//! Invariant 5 (docs/invariants.md) starts here: an error from `write_at` or `sync` is returned,
//! never retried or swallowed; the caller poisons the engine.

mod aligned;
pub mod busy;
pub mod file;
pub mod read_only;
pub mod sim;
#[cfg(test)]
pub(crate) mod test_support;

pub use aligned::AlignedBuf;
pub use file::{FileStorage, IoStats};
pub use read_only::ReadOnlyStorage;
pub use sim::SimStorage;

use crate::error::Result;
use std::sync::Arc;

/// What a file is for; `flush_method` treats data and log files differently, as InnoDB does
/// (O_DSYNC applies to log files, O_DIRECT to data and doublewrite files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Data,
    Log,
    Doublewrite,
    Other,
}

/// `flush_method`: how writes are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushMethod {
    /// Buffered I/O; `sync` is fsync() on data files and fdatasync() on log files.
    #[default]
    Fsync,
    /// Log files opened with O_DSYNC (each write durable, `sync` a no-op for them); data as Fsync.
    ODsync,
    /// Data and doublewrite files opened with O_DIRECT (bypass the page cache), still fsynced.
    ODirect,
    /// As ODirect, but data files are not fsynced after writes (only after they grow).
    ODirectNoFsync,
}

impl FlushMethod {
    pub const NAMES: &'static [&'static str] =
        &["fsync", "o_dsync", "o_direct", "o_direct_no_fsync"];

    pub fn name(self) -> &'static str {
        match self {
            FlushMethod::Fsync => "fsync",
            FlushMethod::ODsync => "o_dsync",
            FlushMethod::ODirect => "o_direct",
            FlushMethod::ODirectNoFsync => "o_direct_no_fsync",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "fsync" => FlushMethod::Fsync,
            "o_dsync" => FlushMethod::ODsync,
            "o_direct" => FlushMethod::ODirect,
            "o_direct_no_fsync" => FlushMethod::ODirectNoFsync,
            _ => return None,
        })
    }
}

/// A directory of files. Names are plain file names (no separators).
pub trait Storage: Send + Sync + 'static {
    /// Opens `name`, creating it (empty) when `create` is set and it does not exist.
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>>;
    fn exists(&self, name: &str) -> bool;
    fn remove(&self, name: &str) -> Result<()>;
    /// Makes file creations, removals and renames in the directory durable.
    // IMPORTANT: a new file is not durable until its directory is synced.
    fn sync_dir(&self) -> Result<()>;
    /// A human-readable location, used in error messages.
    fn describe(&self) -> String;
    /// I/O counters since the storage was created.
    fn io_stats(&self) -> IoStats;
}

/// One open file. All I/O is positioned; implementations are safe to share between threads.
pub trait File: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; a short read is an error (UnexpectedEof).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Writes all of `buf` at `offset`, growing the file when needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes every completed write durable (fsync/fdatasync as `flush_method` says).
    fn sync(&self) -> Result<()>;
    fn len(&self) -> Result<u64>;
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    fn set_len(&self, len: u64) -> Result<()>;
    /// The file's name, for error messages.
    fn name(&self) -> &str;
}
