//! The page cleaner's part in an online redo log resize (wal/resize.rs does the files): bring
//! the checkpoint age within what the resized log may start with, by writing back the oldest
//! dirty pages, then switch with appends held off for the copy of the last blocks only.
//!
//! The age the new log may start with is its async point (`checkpoint_async_point_pct` of the
//! new capacity): a shrink that switched nearer the end would hand the first seconds of the new
//! log to forced flushing, exactly the hole a resize must not make. A grow never has to wait
//! (the age is already under the old log's async point or near it).

use super::{Durability, FLUSH_BATCH_PAGES};
use crate::error::{Error, Result};
use crate::wal::ResizeOutcome;
use std::time::{Duration, Instant};

/// How long a resize may spend, by default, bringing the checkpoint age within the new log before it gives
/// up with an error (the log keeps its size).
pub const RESIZE_WAIT_MAX: Duration = Duration::from_secs(30);

impl Durability {
    /// Resizes the redo log to `files` files of `file_size` bytes while the database runs.
    /// `requested` is the capacity the user asked for, for messages.
    /// Gives up after `max_wait` when the checkpoint age cannot be brought within the new log.
    pub fn resize_log(
        &self,
        file_size: u64,
        files: u32,
        requested: u64,
        max_wait: Duration,
    ) -> Result<ResizeOutcome> {
        let new_capacity = self.log.capacity_for(file_size, files)?;
        let async_pct = u64::from(self.knobs.read().checkpoint_async_point_pct);
        let limit = new_capacity / 100 * async_pct;
        let deadline = Instant::now() + max_wait;
        self.lower_age_to(limit, deadline);
        let mut r = self.log.resize_begin(file_size, files)?;
        loop {
            self.lower_age_to(limit, deadline);
            self.log.resize_catch_up(&mut r)?;
            if let Some(out) = self.space.resize_commit(&mut r, new_capacity - limit)? {
                self.log.resize_cleanup(&mut r);
                tracing::info!(
                    "redo log resized online: capacity {} -> {} bytes, checkpoint age {} at the \
                     switch, {} bytes of redo copied, appends held off {} us",
                    out.old_capacity,
                    out.new_capacity,
                    out.age_at_switch,
                    out.copied_bytes,
                    out.stall_us
                );
                self.wake_flusher();
                return Ok(out);
            }
            if Instant::now() > deadline {
                let age = self.checkpoint_age();
                return Err(Error::LogResize {
                    requested,
                    reason: format!(
                        "the checkpoint age stayed at {age} bytes, above the {limit} bytes the \
                         resized log may start with ({async_pct}% of its capacity of \
                         {new_capacity} bytes, checkpoint_async_point_pct), for {:.1} s of \
                         writing back dirty pages (a transaction still applying, or a backup, \
                         holds the checkpoint back; or writers outran the page cleaner). \
                         log_capacity must hold the checkpoint age: at least about {} bytes \
                         now; the log keeps its size",
                        max_wait.as_secs_f64(),
                        self.log.file_bytes_for(age * 100 / async_pct + 1, files)
                    ),
                });
            }
        }
    }

    /// Writes back the oldest dirty pages and checkpoints until the checkpoint age is at most
    /// `limit` or `deadline` passes (the resize then finds out whether the age fits).
    fn lower_age_to(&self, limit: u64, deadline: Instant) {
        while self.checkpoint_age() > limit && Instant::now() < deadline {
            let before = self.log.checkpoint_lsn();
            let flushed = self.flush_oldest(FLUSH_BATCH_PAGES);
            let moved = self.checkpoint().map(|cp| cp > before);
            match (flushed, moved) {
                (Ok(n), Ok(moved)) if n > 0 || moved => {}
                (Err(_), _) | (_, Err(_)) => return, // poisoned: the switch reports it
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
}
