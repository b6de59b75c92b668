//! files: the data file before anything else reads it. Probing it (exists, page size, whole,
//! clean or in need of recovery), restoring its torn pages from the doublewrite area, locking
//! it against a second writer, and checking a database directory without opening it.

use super::DATA_FILE;
use crate::dwb::Doublewrite;
use crate::error::{Error, Result};
use crate::io::{File, FileKind, FileStorage, Storage};
use crate::options::Options;
use crate::page;
use crate::recovery::RecoveryReport;
use crate::space::{self, Header, HEADER_PAGE};
use crate::wal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens the data file and checks what can be checked before the log is read: it exists, its
/// header gives the page size (or, when damaged, the doublewrite area does, read-write only),
/// it holds at least its header page, and after a clean shutdown (always, when `read_only`)
/// it is whole and its header verifies; a read-only open of a database that needs recovery is
/// refused. Sets the options the files decide (page size, log geometry). Returns the file, the
/// page size and the header page's fault when the doublewrite area must repair it.
pub(super) fn probe_data_file(
    storage: &Arc<dyn Storage>,
    opts: &mut Options,
    read_only: bool,
) -> Result<(Arc<dyn File>, usize, Option<String>)> {
    let location = storage.describe();
    let bad = |reason: String| Error::BadDatabase {
        path: PathBuf::from(&location).join(DATA_FILE),
        reason,
    };
    if !storage.exists(DATA_FILE) {
        let log0 = wal::layout::file_name(0);
        return Err(bad(if wal::log_exists(storage.as_ref()) {
            format!(
                "no database here: the data file is missing but the redo log {log0} exists \
                 (a create that did not finish, or a removed data file)"
            )
        } else {
            "no database here".into()
        }));
    }
    let file = storage.open(DATA_FILE, FileKind::Data, false)?;
    let len = file.len()?;
    if len < page::MIN_PAGE_SIZE as u64 {
        return Err(bad(format!(
            "the file is {len} bytes, shorter than the smallest page ({} bytes): it was \
             truncated, or is not an evenkeel data file",
            page::MIN_PAGE_SIZE
        )));
    }
    let mut first = vec![0u8; page::MIN_PAGE_SIZE];
    file.read_at(&mut first, 0)?;
    // A damaged header page may still have a good copy in the doublewrite area, whose own
    // header gives the page size; repair is tried below, before anything reads page 0.
    let (ps, header_fault) = match space::probe_page_size(&first) {
        Ok(ps) => (ps, None),
        Err(reason) => match crate::dwb::stored_page_size(storage.as_ref()) {
            Some(ps) if !read_only => (ps, Some(reason)),
            _ => return Err(bad(format!("file header (page 0): {reason}"))),
        },
    };
    if len < ps as u64 {
        // No crash cuts the header page: it is written before the file is made durable.
        return Err(bad(space::truncated_header_page(len, ps)));
    }
    // The file's page size wins over the option (which only applies at create time), and so
    // does the log's recorded geometry.
    opts.page_size = ps;
    if let Some((file_size, files, block)) = wal::probe_geometry(storage.as_ref()) {
        opts.log_file_size = file_size;
        opts.log_files_in_group = files;
        opts.log_block_size = block;
    }
    opts.validate()?;
    // After a clean shutdown the file must be whole; after a crash a torn extension write
    // may leave a partial last page, which doublewrite and redo repair.
    let mut p0 = vec![0u8; ps];
    let header_ok = file.read_at(&mut p0, 0).is_ok() && page::verify(&p0, HEADER_PAGE).is_ok();
    let clean = header_ok && Header::decode(&p0).clean;
    if clean || read_only {
        if !header_ok {
            return Err(bad(
                "file header (page 0) fails verification; `evenkeel check` names the fault \
                 and `evenkeel check --salvage --out DIR` exports every readable row"
                    .into(),
            ));
        }
        if let Err(reason) = space::check_file_length(len, ps, &Header::decode(&p0)) {
            return Err(bad(reason));
        }
    }
    if read_only && !clean {
        return Err(Error::NeedsRecovery {
            path: PathBuf::from(&location).join(DATA_FILE),
            dir: location.clone(),
        });
    }
    Ok((file, ps, header_fault))
}

/// Restores torn pages from the doublewrite area into `file` and counts what it did in
/// `report`; a torn page without a usable copy refuses the open, naming the page.
///
/// Also refuses when a slot holds a page image newer than the end of the recovered log
/// (`recovered`): the image was written after the log was durable up to its LSN, so the log
/// lost writes that the data file may already reflect (a lost fsync) and redo cannot make the
/// pages consistent. Redo and `check` (C8) catch such a page only while the log end is below
/// its LSN; the slots catch it at open, before recovery appends anything.
pub(super) fn repair_torn_pages(
    d: &Doublewrite,
    file: &dyn File,
    report: &mut RecoveryReport,
    recovered: &wal::Recovered,
) -> Result<()> {
    let r = d.recover(file)?;
    if let Some((lsn, page)) = r.newest_slot.filter(|&(lsn, _)| lsn > recovered.end_lsn) {
        return Err(crate::recovery::log_behind_page(
            &format!(
                "{} (its copy in {})",
                file.name(),
                crate::dwb::DWB_FILE_NAME
            ),
            page,
            lsn.0,
            recovered.end_lsn,
            &recovered.stop,
        ));
    }
    report.pages_repaired_from_doublewrite = r.pages_repaired.len() as u64;
    report.doublewrite_slots_corrupt = r.slots_corrupt as u64;
    report.corruptions_detected += (r.pages_damaged + r.slots_corrupt) as u64;
    report.file_header_repaired = r.pages_repaired.contains(&HEADER_PAGE.0);
    report.doublewrite_header_repaired = d.header_repaired();
    report.corruptions_detected += u64::from(d.header_repaired());
    if let Some((page, reason)) = r.pages_unrepairable.first() {
        let more = r.pages_unrepairable.len() - 1;
        return Err(Error::corrupt(
            file.name(),
            *page,
            format!(
                "{reason}{}. Refusing to open; `evenkeel check --salvage --out DIR` \
                     exports every readable row",
                if more > 0 {
                    format!(" (and {more} more page(s) like it)")
                } else {
                    String::new()
                }
            ),
        ));
    }
    Ok(())
}

/// Locks `dir/evenkeel.data` (exclusive for writers, shared for `check`) with flock(2),
/// through a handle of its own so the lock does not depend on the storage backend.
pub(super) fn lock_data_file(dir: &Path, exclusive: bool) -> Result<std::fs::File> {
    let path = dir.join(DATA_FILE);
    let f = std::fs::File::open(&path)
        .map_err(|e| Error::io(path.display().to_string(), "open for locking", e))?;
    let r = if exclusive {
        f.try_lock()
    } else {
        f.try_lock_shared()
    };
    match r {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::BadDatabase {
            path: path.clone(),
            reason: "the database is open in another process (or another handle in this one)"
                .into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::io(path.display().to_string(), "lock", e))
        }
    }
}

/// The data file of the database in `dir`, or an error saying what `dir` is instead.
pub fn require_database(dir: &Path) -> Result<PathBuf> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::BadDatabase {
            path: dir.to_path_buf(),
            reason: "is a file, not a directory: a database is a directory holding \
                     evenkeel.data"
                .into(),
        });
    }
    let path = dir.join(DATA_FILE);
    if !path.is_file() {
        return Err(Error::BadDatabase {
            path: dir.to_path_buf(),
            reason: format!("no database here ({DATA_FILE} is missing)"),
        });
    }
    Ok(path)
}

/// Checks the database in a directory without opening it for writing.
pub fn check_dir(dir: impl AsRef<Path>) -> Result<crate::check::CheckReport> {
    let dir = dir.as_ref();
    require_database(dir)?;
    let _lock = lock_data_file(dir, false)?;
    let storage = FileStorage::new(dir, crate::io::FlushMethod::Fsync)?;
    let file: Arc<dyn File> = storage.open(DATA_FILE, FileKind::Data, false)?;
    crate::check::check_file(file.as_ref())
}
