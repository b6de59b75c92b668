//! read_only: a [`Storage`] that serves reads and refuses every change.
//!
//! `Database::open_read_only` runs the engine over it, so a command that only looks at a
//! database (`dump`, `status`) cannot change it, whatever path the open takes: a write, a sync,
//! a resize, a create or a remove is an error naming the file and saying the open is
//! read-only, never a change on disk.

use super::{File, FileKind, IoStats, Storage};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Wraps another storage; reads pass through, changes fail.
pub struct ReadOnlyStorage {
    inner: Arc<dyn Storage>,
}

impl ReadOnlyStorage {
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        ReadOnlyStorage { inner }
    }
}

fn refused(file: &str, op: &'static str) -> Error {
    Error::io(
        file,
        op,
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the database is open read-only",
        ),
    )
}

impl Storage for ReadOnlyStorage {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>> {
        if create && !self.inner.exists(name) {
            return Err(refused(name, "create"));
        }
        Ok(Arc::new(ReadOnlyFile(self.inner.open(name, kind, false)?)))
    }
    fn exists(&self, name: &str) -> bool {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        Err(refused(name, "remove"))
    }
    fn sync_dir(&self) -> Result<()> {
        Ok(()) // nothing was created or removed, so there is nothing to make durable
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn io_stats(&self) -> IoStats {
        self.inner.io_stats()
    }
}

struct ReadOnlyFile(Arc<dyn File>);

impl File for ReadOnlyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> Result<()> {
        Err(refused(self.0.name(), "write"))
    }
    fn sync(&self) -> Result<()> {
        Ok(()) // no write can have happened through this file
    }
    fn len(&self) -> Result<u64> {
        self.0.len()
    }
    fn set_len(&self, _len: u64) -> Result<()> {
        Err(refused(self.0.name(), "resize"))
    }
    fn name(&self) -> &str {
        self.0.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::SimStorage;

    #[test]
    fn reads_pass_and_changes_fail() {
        let sim = SimStorage::new();
        let f = sim.open("a", FileKind::Data, true).expect("create");
        f.write_at(b"hello", 0).expect("write");
        let ro = ReadOnlyStorage::new(Arc::new(sim.clone()));
        let g = ro.open("a", FileKind::Data, false).expect("open");
        let mut buf = [0u8; 5];
        g.read_at(&mut buf, 0).expect("read");
        assert_eq!(&buf, b"hello");
        let e = g.write_at(b"x", 0).expect_err("write refused").to_string();
        assert!(e.contains("read-only"), "{e}");
        assert!(g.set_len(0).is_err());
        assert!(ro.open("b", FileKind::Data, true).is_err());
        assert!(ro.remove("a").is_err());
        f.read_at(&mut buf, 0).expect("read");
        assert_eq!(&buf, b"hello");
    }
}
