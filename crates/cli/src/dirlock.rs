//! dirlock: keeps two `evenkeel` processes from working on one database at once.
//!
//! The engine takes an flock on `evenkeel.data` while a database is open, but only after
//! `Database::create` has written the new data and log files: two `load`s racing into an empty
//! directory would both create, and one would open files the other overwrote. So every command
//! also holds an exclusive flock on `DIR/evenkeel.lock` for its whole run, taken before it looks
//! for a database. The kernel drops the lock when the process ends, however it ends, so a lock
//! left by a killed process never blocks the next command, and a recycled pid cannot make a
//! dead owner look alive. The file itself stays in the directory: deleting a locked file would
//! let two processes hold locks on two different files of that name. It holds the owner's pid,
//! for the refusal message only. Programs embedding the engine rely on the engine's own lock.
//!
//! Commands that only use an existing database (`dump`, `status`, `check`, `recover`) take the
//! lock with [`lock_existing`], which creates no lock file in a directory that holds neither a
//! database nor a lock file: such a command then fails on the missing database and leaves the
//! directory as it found it. A path that names a file instead of a directory is refused, saying so.

use crate::failure::Failure;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, Write};
use std::path::Path;

pub const LOCK_FILE: &str = "evenkeel.lock";

/// Held while a command works on a database; the flock goes with the file handle.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Refuses a `dir` argument that exists but is not a directory (a data file given instead of
/// its directory, say), naming it.
pub fn require_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(Failure::Usage(format!(
            "{} is a file, not a directory: give the database's directory (the one holding {})",
            dir.display(),
            evenkeel::db::DATA_FILE
        ))),
        _ => Ok(()),
    }
}

/// Locks `dir`, creating the lock file when missing (for a command that may create the
/// database). `None` when `dir` does not exist: the command then fails on the missing database
/// with the engine's own message.
pub fn lock(dir: &Path) -> Result<Option<DirLock>, Failure> {
    require_dir(dir)?;
    if !dir.is_dir() {
        return Ok(None);
    }
    let path = dir.join(LOCK_FILE);
    let io_err = |e: std::io::Error| Failure::op(format!("locking {}", path.display()), e);
    // No truncate at open: a refused process must not erase the owner's pid.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let owner = std::fs::read_to_string(&path).unwrap_or_default();
            let owner = match owner.trim().parse::<u32>() {
                Ok(pid) => format!("process {pid}"),
                Err(_) => "another process".to_string(),
            };
            return Err(Failure::Operation(format!(
                "the database in {} is in use by {owner} (it holds {}); wait for it to finish",
                dir.display(),
                path.display()
            )));
        }
        Err(TryLockError::Error(e)) => return Err(io_err(e)),
    }
    file.set_len(0).map_err(io_err)?;
    file.rewind().map_err(io_err)?;
    writeln!(file, "{}", std::process::id()).map_err(io_err)?;
    Ok(Some(DirLock { _file: file }))
}

/// Locks `dir` for a command that only uses an existing database: as [`lock`], but `None`
/// without creating anything when `dir` holds neither the data file nor a lock file. A lock
/// file that is already there is taken even without a data file, since its owner may be
/// creating the database right now.
pub fn lock_existing(dir: &Path) -> Result<Option<DirLock>, Failure> {
    require_dir(dir)?;
    if !dir.join(evenkeel::db::DATA_FILE).exists() && !dir.join(LOCK_FILE).exists() {
        return Ok(None);
    }
    lock(dir)
}
