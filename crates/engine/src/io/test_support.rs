//! Test support for the unit tests of the layers above io (`wal`, `dwb`, `buffer`):
//! [`TraceStorage`], a `Storage` over a [`SimStorage`] that records every completed write and
//! fsync in the order they took effect, and can make each fsync take longer, as a real device's
//! does.

use crate::error::Result;
use crate::io::{File, FileKind, IoStats, SimStorage, Storage};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// A page image identity: (page number, LSN).
pub(crate) type Key = (u32, u64);

/// Reads a page image's [`Key`] (the caller's, so io needs no knowledge of page headers).
pub(crate) type KeyOf = fn(&[u8]) -> Key;

/// Reads the [`Key`]s of the page copies in a doublewrite chunk as written (its bytes, the page
/// size).
pub(crate) type ChunkKeys = fn(&[u8], usize) -> Vec<Key>;

/// One completed operation on a file opened through a [`TraceStorage`].
#[derive(Clone, Debug)]
pub(crate) enum Op {
    Write {
        file: String,
        offset: u64,
        /// Bytes written.
        len: usize,
        /// For a data file when pages are read ([`TraceStorage::with_pages`]): the key of each
        /// page-sized piece of the bytes written; for a doublewrite file
        /// ([`TraceStorage::with_chunks`]), of each copy in the chunk written (none for the
        /// header). Empty otherwise.
        pages: Vec<Key>,
    },
    Sync {
        file: String,
    },
}

/// A `Storage` over a [`SimStorage`] (clones share the disk and the trace) whose files record
/// their writes and fsyncs in `ops`.
#[derive(Clone)]
pub(crate) struct TraceStorage {
    pub sim: SimStorage,
    pub ops: Arc<Mutex<Vec<Op>>>,
    /// The page size and the reader of a page's key; None: writes record no page keys.
    pages: Option<(usize, KeyOf)>,
    chunks: Option<ChunkKeys>,
    sync_delay: Duration,
}

struct TraceFile {
    inner: Arc<dyn File>,
    ops: Arc<Mutex<Vec<Op>>>,
    /// None for files other than data and doublewrite files.
    pages: Option<(usize, KeyOf)>,
    /// Set for a doublewrite file with [`TraceStorage::with_chunks`].
    chunks: Option<ChunkKeys>,
    sync_delay: Duration,
}

impl TraceStorage {
    /// Records every write (file and offset) and fsync; nothing is slowed.
    pub fn new(sim: &SimStorage) -> Self {
        TraceStorage {
            sim: sim.clone(),
            ops: Arc::default(),
            pages: None,
            chunks: None,
            sync_delay: Duration::ZERO,
        }
    }

    /// Writes to the doublewrite file record the keys of the copies in each chunk, read by
    /// `keys` (with [`TraceStorage::with_pages`]'s page size).
    pub fn with_chunks(mut self, keys: ChunkKeys) -> Self {
        self.chunks = Some(keys);
        self
    }

    /// Writes to data and doublewrite files also record `key_of` of each `page_size` page they
    /// carry.
    pub fn with_pages(mut self, page_size: usize, key_of: KeyOf) -> Self {
        self.pages = Some((page_size, key_of));
        self
    }

    /// Every fsync of a file sleeps `delay` first (outside the trace's lock, so other threads'
    /// I/O goes on), like a real device's.
    pub fn with_sync_delay(mut self, delay: Duration) -> Self {
        self.sync_delay = delay;
        self
    }

    /// The LSNs of the images of page `page_no` written to `file`, in the order they landed
    /// (with [`TraceStorage::with_pages`]).
    pub fn page_lsns(&self, file: &str, page_no: u32) -> Vec<u64> {
        self.ops
            .lock()
            .iter()
            .filter_map(|op| match op {
                Op::Write { file: f, pages, .. } if f == file => Some(pages.clone()),
                _ => None,
            })
            .flatten()
            .filter(|&(p, _)| p == page_no)
            .map(|(_, lsn)| lsn)
            .collect()
    }
}

impl Storage for TraceStorage {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>> {
        let paged = matches!(kind, FileKind::Data | FileKind::Doublewrite);
        Ok(Arc::new(TraceFile {
            inner: self.sim.open(name, kind, create)?,
            ops: Arc::clone(&self.ops),
            pages: if paged { self.pages } else { None },
            chunks: if kind == FileKind::Doublewrite {
                self.chunks
            } else {
                None
            },
            sync_delay: self.sync_delay,
        }))
    }
    fn exists(&self, name: &str) -> bool {
        self.sim.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.sim.remove(name)
    }
    fn sync_dir(&self) -> Result<()> {
        self.sim.sync_dir()
    }
    fn describe(&self) -> String {
        self.sim.describe()
    }
    fn io_stats(&self) -> IoStats {
        self.sim.io_stats()
    }
}

impl File for TraceFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    // The trace lock is held across the operation, so the recorded order is the order the
    // operations took effect in, also with concurrent writers (doublewrite segments).
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut ops = self.ops.lock();
        self.inner.write_at(buf, offset)?;
        let pages = match (self.pages, self.chunks) {
            (None, _) => Vec::new(),
            (Some(_), Some(_)) if offset == 0 => Vec::new(),
            (Some((page_size, _)), Some(keys)) => keys(buf, page_size),
            (Some((page_size, key_of)), None) => buf.chunks(page_size).map(key_of).collect(),
        };
        ops.push(Op::Write {
            file: self.name().to_string(),
            offset,
            len: buf.len(),
            pages,
        });
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
        let mut ops = self.ops.lock();
        self.inner.sync()?;
        ops.push(Op::Sync {
            file: self.name().to_string(),
        });
        Ok(())
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}
