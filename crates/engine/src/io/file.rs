//! The real backend: [`FileStorage`] is a directory of files, [`DiskFile`] one open file.
//!
//! It owns positioned I/O (pread/pwrite through `FileExt`), the `flush_method` policy (which
//! files get O_DIRECT or O_DSYNC, and whether `sync` is fsync, fdatasync or nothing), the
//! aligned bounce buffers that let callers use O_DIRECT with any buffer, offset and length, and
//! the I/O counters behind [`IoStats`]. Invariant 5 starts here: every failure is returned as
//! `Error::Io` naming the full path and the operation; this file must never retry a failed write
//! or fsync, never swallow an error, and never skip a sync that `flush_method` promises.

use super::{AlignedBuf, File, FileKind, FlushMethod, Storage};
use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Alignment of buffer address, offset and length for O_DIRECT. 4096 covers every logical block
/// size in use (512 and 4096).
pub const DIRECT_IO_ALIGN: usize = 4096;
const ALIGN_U64: u64 = DIRECT_IO_ALIGN as u64;
const _: () = assert!(DIRECT_IO_ALIGN.is_power_of_two());

#[cfg(target_os = "linux")]
const O_DIRECT_FLAG: i32 = libc::O_DIRECT;
/// Platforms without O_DIRECT run buffered, and report `direct_io_active() == false`.
#[cfg(not(target_os = "linux"))]
const O_DIRECT_FLAG: i32 = 0;

/// Counters of completed I/O, for metrics. `syncs` counts fsync/fdatasync calls actually issued
/// (a sync that `flush_method` makes a no-op is not counted). Failed calls are not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoStats {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub syncs: u64,
}

/// The atomic side of [`IoStats`], shared by a storage and all its files (also used by sim).
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    syncs: AtomicU64,
}

impl IoCounters {
    pub(crate) fn read(&self, bytes: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    pub(crate) fn write(&self, bytes: usize) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    pub(crate) fn sync(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> IoStats {
        IoStats {
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
        }
    }
}

/// Rejects names that would escape the directory or are not plain file names.
pub(crate) fn check_name(name: &str) -> std::io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a plain file name",
        ));
    }
    Ok(())
}

/// A directory of real files.
#[derive(Debug)]
pub struct FileStorage {
    dir: PathBuf,
    flush_method: FlushMethod,
    stats: Arc<IoCounters>,
    /// Set (and warned about, once) when the file system refused O_DIRECT.
    direct_fallback: AtomicBool,
    /// Tests: act as if the file system refused O_DIRECT, to exercise the fallback.
    #[cfg(test)]
    refuse_o_direct: bool,
}

impl FileStorage {
    /// Uses `dir`, creating it (and its parents) when missing.
    pub fn new(dir: impl Into<PathBuf>, flush_method: FlushMethod) -> Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(dir.display().to_string(), "create_dir", e))?;
        Ok(FileStorage {
            dir,
            flush_method,
            stats: Arc::new(IoCounters::default()),
            direct_fallback: AtomicBool::new(false),
            #[cfg(test)]
            refuse_o_direct: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn flush_method(&self) -> FlushMethod {
        self.flush_method
    }

    /// Counters over every file opened through this storage.
    pub fn stats(&self) -> IoStats {
        self.stats.snapshot()
    }

    /// True when `flush_method` asks for O_DIRECT and no open has had to fall back to buffered
    /// I/O (the file system refused O_DIRECT with EINVAL). For the status report.
    pub fn direct_io_active(&self) -> bool {
        wants_direct(self.flush_method) && !self.direct_fallback.load(Ordering::Relaxed)
    }

    /// As [`Storage::open`], typed: the caller can ask the file whether O_DIRECT is in effect.
    pub fn open_file(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<DiskFile>> {
        let path = self.dir.join(name);
        let path_str = path.display().to_string();
        check_name(name).map_err(|e| Error::io(path_str.clone(), "open", e))?;
        let direct = wants_direct(self.flush_method)
            && O_DIRECT_FLAG != 0
            && matches!(kind, FileKind::Data | FileKind::Doublewrite);
        let dsync = self.flush_method == FlushMethod::ODsync && kind == FileKind::Log;
        let mut flags = if dsync { libc::O_DSYNC } else { 0 };
        if direct {
            flags |= O_DIRECT_FLAG;
        }
        let open = |flags: i32| {
            #[cfg(test)]
            if self.refuse_o_direct && flags & O_DIRECT_FLAG != 0 {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .custom_flags(flags)
                .open(&path)
        };
        let (file, direct) = match open(flags) {
            Ok(f) => (f, direct),
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                if !self.direct_fallback.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        path = %path_str,
                        "O_DIRECT refused by the file system (EINVAL); using buffered I/O"
                    );
                }
                let f = open(flags & !O_DIRECT_FLAG)
                    .map_err(|e| Error::io(path_str.clone(), "open", e))?;
                (f, false)
            }
            Err(e) => return Err(Error::io(path_str, "open", e)),
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(path_str.clone(), "stat", e))?
            .len();
        let sync_mode = match (kind, self.flush_method) {
            (FileKind::Log, FlushMethod::ODsync) => SyncMode::Skip,
            (FileKind::Log, _) => SyncMode::Fdatasync,
            (FileKind::Data, FlushMethod::ODirectNoFsync) if direct => SyncMode::FsyncIfResized,
            _ => SyncMode::Fsync,
        };
        Ok(Arc::new(DiskFile {
            name: name.to_string(),
            path: path_str,
            file,
            kind,
            direct,
            sync_mode,
            synced_len: AtomicU64::new(len),
            block_lock: RwLock::new(()),
            stats: Arc::clone(&self.stats),
        }))
    }
}

fn wants_direct(m: FlushMethod) -> bool {
    matches!(m, FlushMethod::ODirect | FlushMethod::ODirectNoFsync)
}

impl Storage for FileStorage {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>> {
        let f: Arc<dyn File> = self.open_file(name, kind, create)?;
        Ok(f)
    }

    fn exists(&self, name: &str) -> bool {
        check_name(name).is_ok() && self.dir.join(name).exists()
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = self.dir.join(name);
        let path_str = path.display().to_string();
        check_name(name).map_err(|e| Error::io(path_str.clone(), "remove", e))?;
        std::fs::remove_file(&path).map_err(|e| Error::io(path_str, "remove", e))
    }

    fn sync_dir(&self) -> Result<()> {
        let name = self.dir.display().to_string();
        let dir = std::fs::File::open(&self.dir).map_err(|e| Error::io(name.clone(), "open", e))?;
        // IMPORTANT: this fsync is what makes creations and removals in the directory durable.
        dir.sync_all().map_err(|e| Error::io(name, "sync_dir", e))?;
        self.stats.sync();
        Ok(())
    }

    fn io_stats(&self) -> IoStats {
        self.stats()
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

/// What `sync` does for one file, fixed at open from `flush_method` and the file kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncMode {
    /// fsync(): data and metadata.
    Fsync,
    /// fdatasync(): data and the metadata needed to read it back (log files).
    Fdatasync,
    /// Opened with O_DSYNC: every write is already durable.
    Skip,
    /// O_DIRECT_NO_FSYNC: the writes reached the device; fsync only when the size changed.
    FsyncIfResized,
}

/// One open real file.
#[derive(Debug)]
pub struct DiskFile {
    name: String,
    /// Full path, for error messages.
    path: String,
    file: std::fs::File,
    kind: FileKind,
    direct: bool,
    sync_mode: SyncMode,
    /// File length at the last issued fsync (or at open), for `SyncMode::FsyncIfResized`.
    synced_len: AtomicU64,
    /// O_DIRECT only: writes that read-modify-write partial blocks (and `set_len`) take it
    /// exclusively, aligned writes shared, so two partial writes to one block cannot lose each
    /// other's bytes.
    block_lock: RwLock<()>,
    stats: Arc<IoCounters>,
}

impl DiskFile {
    /// True when this file was opened with O_DIRECT.
    pub fn direct_io_active(&self) -> bool {
        self.direct
    }

    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// The full path, as used in error messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn err(&self, op: &'static str, e: std::io::Error) -> Error {
        Error::io(self.path.clone(), op, e)
    }

    fn read_direct(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if is_aligned(buf.as_ptr(), offset, buf.len()) {
            return self.file.read_exact_at(buf, offset);
        }
        let (start, end) = covering(offset, buf.len())?;
        let mut bounce = AlignedBuf::new(bounce_len(start, end)?);
        let filled = self.read_blocks(&mut bounce, start)?;
        let skip = usize::try_from(offset - start).map_err(too_large)?;
        let have = filled.saturating_sub(skip).min(buf.len());
        buf[..have].copy_from_slice(&bounce[skip..skip + have]);
        if have < buf.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "failed to fill whole buffer",
            ));
        }
        Ok(())
    }

    /// Fills `bounce` (aligned) from the aligned offset `start`; stops at end of file.
    /// Returns the number of bytes read.
    fn read_blocks(&self, bounce: &mut AlignedBuf, start: u64) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < bounce.len() {
            match self
                .file
                .read_at(&mut bounce[filled..], start + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // A short read that ends off a block boundary is end of file; reading on from an
            // unaligned position would fail with EINVAL under O_DIRECT.
            if filled % DIRECT_IO_ALIGN != 0 {
                break;
            }
        }
        Ok(filled)
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let edges_aligned = aligned(offset) && aligned(buf.len() as u64);
        if edges_aligned {
            let _shared = self.block_lock.read();
            if is_aligned(buf.as_ptr(), offset, buf.len()) {
                return self.file.write_all_at(buf, offset);
            }
            let mut bounce = AlignedBuf::new(buf.len());
            bounce.copy_from_slice(buf);
            return self.file.write_all_at(&bounce, offset);
        }
        // Partial blocks at either edge: read-modify-write the covering aligned range.
        let _exclusive = self.block_lock.write();
        let (start, end) = covering(offset, buf.len())?;
        let old_len = self.file.metadata()?.len();
        let mut bounce = AlignedBuf::new(bounce_len(start, end)?);
        if start < old_len {
            self.read_blocks(&mut bounce, start)?;
        }
        let skip = usize::try_from(offset - start).map_err(too_large)?;
        bounce[skip..skip + buf.len()].copy_from_slice(buf);
        self.file.write_all_at(&bounce, start)?;
        // The aligned write may have grown the file past the caller's end: trim it back.
        let want_len = old_len.max(offset + buf.len() as u64);
        if end > want_len {
            self.file.set_len(want_len)?;
        }
        Ok(())
    }

    fn issue_sync(&self, op: &'static str, data_only: bool) -> Result<()> {
        let r = if data_only {
            self.file.sync_data()
        } else {
            self.file.sync_all()
        };
        r.map_err(|e| self.err(op, e))?;
        self.stats.sync();
        Ok(())
    }
}

fn is_aligned(ptr: *const u8, offset: u64, len: usize) -> bool {
    aligned(ptr as u64) && aligned(offset) && aligned(len as u64)
}

/// `DIRECT_IO_ALIGN` is a power of two, so a mask tests divisibility.
fn aligned(x: u64) -> bool {
    x & (ALIGN_U64 - 1) == 0
}

/// The aligned range `[start, end)` that covers `[offset, offset + len)`.
fn covering(offset: u64, len: usize) -> std::io::Result<(u64, u64)> {
    let end = offset
        .checked_add(len as u64)
        .and_then(|e| e.checked_next_multiple_of(ALIGN_U64))
        .ok_or_else(|| too_large(()))?;
    Ok((offset - offset % ALIGN_U64, end))
}

fn bounce_len(start: u64, end: u64) -> std::io::Result<usize> {
    usize::try_from(end - start).map_err(too_large)
}

fn too_large<T>(_: T) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "offset or length too large",
    )
}

impl File for DiskFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if self.direct {
            self.read_direct(buf, offset)
        } else {
            self.file.read_exact_at(buf, offset)
        }
        .map_err(|e| self.err("read", e))?;
        self.stats.read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if self.direct {
            self.write_direct(buf, offset)
        } else {
            self.file.write_all_at(buf, offset)
        }
        .map_err(|e| self.err("write", e))?;
        self.stats.write(buf.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        match self.sync_mode {
            SyncMode::Fsync => self.issue_sync("fsync", false),
            SyncMode::Fdatasync => self.issue_sync("fdatasync", true),
            SyncMode::Skip => Ok(()),
            SyncMode::FsyncIfResized => {
                let len = self.len()?;
                if len == self.synced_len.load(Ordering::Acquire) {
                    return Ok(());
                }
                // IMPORTANT: a size change is metadata O_DIRECT does not make durable.
                self.issue_sync("fsync", false)?;
                // Storing the length read before the fsync is safe: a concurrent growth after
                // it only causes one more fsync next time.
                self.synced_len.store(len, Ordering::Release);
                Ok(())
            }
        }
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| self.err("stat", e))?.len())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let _exclusive = self.block_lock.write();
        self.file.set_len(len).map_err(|e| self.err("set_len", e))
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod contract {
    //! The behaviour every `Storage` backend must share; run on both backends.
    use crate::error::Error;
    use crate::io::{FileKind, Storage};

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn assert_eof(e: Error, expect_name: &str) {
        match &e {
            Error::Io { file, op, source } => {
                assert_eq!(source.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
                assert_eq!(*op, "read");
                assert!(
                    file.contains(expect_name),
                    "{file} should name {expect_name}"
                );
            }
            other => panic!("expected Error::Io, got {other:?}"),
        }
    }

    /// Write/read/len/set_len round trips, zero-filled growth, short reads, exists/remove.
    pub(crate) fn roundtrip(s: &dyn Storage, kind: FileKind) {
        assert!(!s.exists("a.dat"));
        assert!(s.open("a.dat", kind, false).is_err(), "open without create");
        let f = s.open("a.dat", kind, true).unwrap();
        assert_eq!(f.name(), "a.dat");
        assert!(f.is_empty().unwrap());
        assert!(s.exists("a.dat"));

        // Unaligned offset and length, then a write leaving a hole that reads as zeros.
        let a = pattern(5000, 1);
        f.write_at(&a, 100).unwrap();
        assert_eq!(f.len().unwrap(), 5100);
        let b = pattern(4096, 2);
        f.write_at(&b, 12288).unwrap();
        assert_eq!(f.len().unwrap(), 16384);

        let mut all = vec![0u8; 16384];
        f.read_at(&mut all, 0).unwrap();
        let mut expect = vec![0u8; 16384];
        expect[100..5100].copy_from_slice(&a);
        expect[12288..].copy_from_slice(&b);
        assert_eq!(all, expect);

        // Overwrite in the middle of existing data keeps the neighbours.
        f.write_at(&[0xEE; 3], 4095).unwrap();
        expect[4095..4098].fill(0xEE);
        let mut mid = vec![0u8; 10];
        f.read_at(&mut mid, 4090).unwrap();
        assert_eq!(mid, expect[4090..4100]);
        assert_eq!(f.len().unwrap(), 16384);

        // Short reads fail with UnexpectedEof, naming the file.
        let mut over = vec![0u8; 100];
        assert_eof(f.read_at(&mut over, 16300).unwrap_err(), "a.dat");
        assert_eof(f.read_at(&mut over, 1 << 20).unwrap_err(), "a.dat");
        f.read_at(&mut [], 16384).unwrap();

        // set_len shrinks and grows with zeros.
        f.set_len(5000).unwrap();
        assert_eq!(f.len().unwrap(), 5000);
        assert_eof(f.read_at(&mut over, 4950).unwrap_err(), "a.dat");
        f.set_len(9000).unwrap();
        let mut tail = vec![0u8; 4000];
        f.read_at(&mut tail, 5000).unwrap();
        assert!(tail.iter().all(|&x| x == 0));
        let mut head = vec![0u8; 5000];
        f.read_at(&mut head, 0).unwrap();
        assert_eq!(head, expect[..5000]);

        f.sync().unwrap();
        drop(f);
        let f = s.open("a.dat", kind, false).unwrap();
        assert_eq!(f.len().unwrap(), 9000);
        let mut again = vec![0u8; 5000];
        f.read_at(&mut again, 0).unwrap();
        assert_eq!(again, expect[..5000]);

        s.sync_dir().unwrap();
        s.remove("a.dat").unwrap();
        assert!(!s.exists("a.dat"));
        assert!(s.remove("a.dat").is_err());
        assert!(
            s.open("a/b", kind, true).is_err(),
            "names are plain file names"
        );
    }

    /// `io_stats` counts completed I/O only (a failed short read is not counted), and counts a
    /// data file's fsync and a directory sync each as one sync. `s` is fresh and, for real
    /// files, fsyncs data files (not `o_direct_no_fsync`).
    pub(crate) fn stats_count_completed_io(s: &dyn Storage) {
        let f = s.open("d", FileKind::Data, true).unwrap();
        f.write_at(&[1; 100], 3).unwrap();
        f.write_at(&[1; 50], 0).unwrap();
        let mut b = [0u8; 20];
        f.read_at(&mut b, 0).unwrap();
        assert!(f.read_at(&mut b, 1000).is_err());
        f.sync().unwrap();
        s.sync_dir().unwrap();
        let st = s.io_stats();
        assert_eq!((st.writes, st.write_bytes), (2, 150));
        assert_eq!((st.reads, st.read_bytes), (1, 20));
        assert_eq!(st.syncs, 2);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Under /var/tmp (a disk file system on our machines), not tmpfs, so O_DIRECT is real.
    fn tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("evenkeel-io-")
            .tempdir_in("/var/tmp")
            .unwrap()
    }

    const ALL_METHODS: [FlushMethod; 4] = [
        FlushMethod::Fsync,
        FlushMethod::ODsync,
        FlushMethod::ODirect,
        FlushMethod::ODirectNoFsync,
    ];

    #[test]
    fn contract_roundtrip_every_method_and_kind() {
        for method in ALL_METHODS {
            for kind in [FileKind::Data, FileKind::Log, FileKind::Doublewrite] {
                let dir = tempdir();
                let s = FileStorage::new(dir.path().join("sub"), method).unwrap();
                contract::roundtrip(&s, kind);
            }
        }
    }

    #[test]
    fn errors_name_the_full_path() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::Fsync).unwrap();
        let e = s.open("missing", FileKind::Data, false).err().unwrap();
        let msg = e.to_string();
        assert!(
            msg.contains(&dir.path().join("missing").display().to_string()),
            "{msg}"
        );
        assert!(msg.starts_with("open of "), "{msg}");
        match e {
            Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOENT)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn o_direct_unaligned_buffers_round_trip() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::ODirect).unwrap();
        let f = s.open_file("d", FileKind::Data, true).unwrap();
        assert!(
            f.direct_io_active(),
            "ext4 under /var/tmp supports O_DIRECT"
        );
        assert!(s.direct_io_active());
        let log = s.open_file("l", FileKind::Log, true).unwrap();
        assert!(!log.direct_io_active(), "log files are never O_DIRECT");

        // An aligned page from an AlignedBuf goes straight through.
        let mut page = AlignedBuf::new(8192);
        page.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        f.write_at(&page, 8192).unwrap();
        // Aligned offset and length, but a misaligned buffer address.
        let backing = vec![7u8; 4096 + 1];
        f.write_at(&backing[1..], 0).unwrap();
        // Misaligned everything, spanning a block boundary.
        f.write_at(&[9u8; 10], 4091).unwrap();
        assert_eq!(f.len().unwrap(), 16384);

        let mut back = vec![0u8; 16384 + 1];
        f.read_at(&mut back[1..], 0).unwrap();
        let got = &back[1..];
        assert!(got[..4091].iter().all(|&b| b == 7));
        assert!(got[4091..4101].iter().all(|&b| b == 9));
        assert!(got[4101..8192].iter().all(|&b| b == 0));
        assert_eq!(&got[8192..], &page[..]);

        // A small unaligned write past EOF leaves the length exact, not rounded to a block.
        f.write_at(b"tail", 20000).unwrap();
        assert_eq!(f.len().unwrap(), 20004);
        let mut t = [0u8; 6];
        f.read_at(&mut t, 19998).unwrap();
        assert_eq!(&t, b"\0\0tail");
    }

    #[test]
    fn o_direct_partial_block_writes_do_not_lose_each_other() {
        // Many threads each write their own bytes of the same blocks; read-modify-write
        // without the per-file lock would let one thread's stale block overwrite another's.
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::ODirect).unwrap();
        let f = s.open_file("d", FileKind::Data, true).unwrap();
        f.set_len(8192).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4u8 {
                let f = &f;
                scope.spawn(move || {
                    for i in 0..200u64 {
                        let off = (i * 4 + u64::from(t)) * 10;
                        f.write_at(&[t + 1; 10], off).unwrap();
                    }
                });
            }
        });
        let mut all = vec![0u8; 8000];
        f.read_at(&mut all, 0).unwrap();
        for (i, chunk) in all.chunks(10).enumerate() {
            assert_eq!(chunk, &[(i % 4) as u8 + 1; 10], "chunk {i}");
        }
    }

    #[test]
    fn fsync_method_syncs_every_time() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::Fsync).unwrap();
        let d = s.open("d", FileKind::Data, true).unwrap();
        let l = s.open("l", FileKind::Log, true).unwrap();
        d.sync().unwrap();
        d.sync().unwrap();
        l.sync().unwrap();
        assert_eq!(s.stats().syncs, 3);
        s.sync_dir().unwrap();
        assert_eq!(s.stats().syncs, 4);
    }

    #[test]
    fn o_dsync_skips_log_sync_only() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::ODsync).unwrap();
        let d = s.open("d", FileKind::Data, true).unwrap();
        let l = s.open("l", FileKind::Log, true).unwrap();
        l.write_at(&[1; 512], 0).unwrap();
        l.sync().unwrap();
        assert_eq!(s.stats().syncs, 0, "O_DSYNC log writes are durable already");
        d.write_at(&[1; 512], 0).unwrap();
        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 1);
    }

    #[test]
    fn o_direct_no_fsync_syncs_only_after_resize() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::ODirectNoFsync).unwrap();
        let d = s.open_file("d", FileKind::Data, true).unwrap();
        assert!(d.direct_io_active());
        let dw = s.open("dw", FileKind::Doublewrite, true).unwrap();
        let page = AlignedBuf::new(4096);

        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 0, "nothing changed since open");
        d.write_at(&page, 0).unwrap();
        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 1, "the file grew: fsync");
        d.write_at(&page, 0).unwrap();
        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 1, "overwrite in place: no fsync");
        d.set_len(16384).unwrap();
        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 2, "set_len grew the file: fsync");
        d.sync().unwrap();
        assert_eq!(s.stats().syncs, 2);

        dw.write_at(&page, 0).unwrap();
        dw.sync().unwrap();
        dw.write_at(&page, 0).unwrap();
        dw.sync().unwrap();
        assert_eq!(s.stats().syncs, 4, "doublewrite files are always fsynced");
    }

    #[test]
    fn stats_count_completed_io() {
        let dir = tempdir();
        let s = FileStorage::new(dir.path(), FlushMethod::ODirect).unwrap();
        contract::stats_count_completed_io(&s);
    }

    #[test]
    fn o_direct_refused_falls_back_to_buffered() {
        let dir = tempdir();
        let mut s = FileStorage::new(dir.path(), FlushMethod::ODirectNoFsync).unwrap();
        s.refuse_o_direct = true;
        assert!(s.direct_io_active(), "nothing refused yet");
        let f = s.open_file("d", FileKind::Data, true).unwrap();
        assert!(!f.direct_io_active());
        assert!(!s.direct_io_active());
        let g = s.open_file("g", FileKind::Doublewrite, true).unwrap();
        assert!(!g.direct_io_active());
        // Buffered data files must be fsynced even under o_direct_no_fsync.
        f.write_at(b"abc", 1).unwrap();
        f.sync().unwrap();
        f.sync().unwrap();
        assert_eq!(s.stats().syncs, 2);
        let mut b = [0u8; 4];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"\0abc");
    }

    #[test]
    fn tmpfs_without_o_direct_falls_back_to_buffered() {
        // tmpfs rejects O_DIRECT on older kernels (and accepts it since 6.6); either way the
        // file must work and direct_io_active must tell the truth.
        let Ok(dir) = tempfile::Builder::new().tempdir_in("/dev/shm") else {
            return;
        };
        let s = FileStorage::new(dir.path(), FlushMethod::ODirect).unwrap();
        let f = s.open_file("d", FileKind::Data, true).unwrap();
        assert_eq!(s.direct_io_active(), f.direct_io_active());
        f.write_at(b"hello", 1).unwrap();
        let mut b = [0u8; 6];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"\0hello");
    }
}
