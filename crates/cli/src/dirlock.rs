//! dirlock: keeps two `evenkeel` processes from opening one database at once.
//!
//! The engine does not lock its directory yet, and two processes writing one data file corrupt
//! it silently (each trusts its own cached header and pages). Until the engine takes that lock
//! itself, every command holds `DIR/evenkeel.lock` while it works: created with `create_new`
//! (atomic), holding the owner's pid, removed when the command ends. A lock whose pid no longer
//! runs (the owner was killed) is stale and taken over. What this cannot do: protect against a
//! program that embeds the engine directly, or detect a live owner where `/proc` is missing
//! (there the lock is treated as held and the message says how to remove it).

use crate::failure::Failure;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "evenkeel.lock";

/// Held while a command works on a database; removes the lock file when dropped.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pid_is_running(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// Locks `dir`. `None` when `dir` does not exist: the command then fails on the missing
/// database with the engine's own message.
pub fn lock(dir: &Path) -> Result<Option<DirLock>, Failure> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let path = dir.join(LOCK_FILE);
    let io_err = |e: std::io::Error| Failure::op(format!("locking {}", path.display()), e);
    // Two attempts: the second follows the removal of a stale lock.
    for _ in 0..2 {
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                writeln!(f, "{}", std::process::id()).map_err(io_err)?;
                return Ok(Some(DirLock { path }));
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                match text.trim().parse::<u32>() {
                    Ok(pid) if !pid_is_running(pid) => {
                        // The owner died without cleaning up; its lock protects nothing.
                        match std::fs::remove_file(&path) {
                            Err(e) if e.kind() != ErrorKind::NotFound => return Err(io_err(e)),
                            _ => continue,
                        }
                    }
                    Ok(pid) => {
                        return Err(Failure::Operation(format!(
                            "the database in {} is in use by process {pid} ({}); wait for it \
                             to finish, or remove the file if that process is not evenkeel",
                            dir.display(),
                            path.display()
                        )))
                    }
                    // Being written by its creator this instant, or damaged.
                    Err(_) => {
                        return Err(Failure::Operation(format!(
                            "the database in {} is locked by {} (no owner pid in it); remove \
                             the file if no other evenkeel command is running",
                            dir.display(),
                            path.display()
                        )))
                    }
                }
            }
            Err(e) => return Err(io_err(e)),
        }
    }
    Err(Failure::Operation(format!(
        "could not take {}: another process keeps taking it",
        path.display()
    )))
}
