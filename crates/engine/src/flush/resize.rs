//! The page cleaner's part in an online redo log resize (wal/resize.rs does the files): bring
//! the checkpoint age within what the resized log may start with, by writing back the oldest
//! dirty pages, then switch with appends held off for the copy of the last blocks only.
//!
//! The write-back starts at `io_capacity_max` pages per second (what the page cleaner may
//! write past the async point) and speeds up only while the age does not fall, and the copy of the log pauses between its chunks
//! (wal/resize.rs), so a resize is background work beside the clients, not a burst.
//!
//! The age the new log may start with is its async point (`checkpoint_async_point_pct` of the
//! new capacity): a shrink that switched nearer the end would hand the first seconds of the new
//! log to forced flushing, exactly the hole a resize must not make. A grow never has to wait
//! (the age is already under the old log's async point or near it).

use super::{Durability, FLUSH_BATCH_PAGES};
use crate::error::{Error, Result};
use crate::wal::ResizeOutcome;
use std::time::{Duration, Instant};

/// How often a shrink's write-back checks that the checkpoint age is falling.
const RESIZE_RATE_WINDOW: Duration = Duration::from_millis(500);

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
        let started = Instant::now();
        let deadline = started + max_wait;
        let mut written = self.lower_age_to(limit, deadline);
        let mut r = self.log.resize_begin(file_size, files)?;
        loop {
            written += self.lower_age_to(limit, deadline);
            self.log.resize_catch_up(&mut r)?;
            if let Some(mut out) = self.space.resize_commit(&mut r, new_capacity - limit)? {
                self.log.resize_cleanup(&mut r);
                out.seconds = started.elapsed().as_secs_f64();
                out.pages_written = written;
                tracing::info!(
                    "redo log resized online: capacity {} -> {} bytes, checkpoint age {} at the \
                     switch, {} bytes of redo copied, {} pages written back, appends held off {} \
                     us, {:.2} s in all",
                    out.old_capacity,
                    out.new_capacity,
                    out.age_at_switch,
                    out.copied_bytes,
                    out.pages_written,
                    out.stall_us,
                    out.seconds
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
    /// `limit` or `deadline` passes (the resize then finds out whether the age fits). It starts
    /// at `io_capacity_max` pages per second and doubles the rate each half second in which
    /// the age did not fall by a twentieth: writers that dirty pages faster than that would
    /// otherwise keep the age up for good. Returns the pages written.
    fn lower_age_to(&self, limit: u64, deadline: Instant) -> u64 {
        let mut written = 0u64;
        let mut rate = self.knobs.read().io_capacity_max.max(1) as f64;
        let (mut window, mut window_written, mut window_age) =
            (Instant::now(), 0u64, self.checkpoint_age());
        while self.checkpoint_age() > limit && Instant::now() < deadline {
            let before = self.log.checkpoint_lsn();
            let flushed = self.flush_oldest(FLUSH_BATCH_PAGES);
            let moved = self.checkpoint().map(|cp| cp > before);
            match (flushed, moved) {
                (Ok(n), Ok(moved)) if n > 0 || moved => {
                    written += n as u64;
                    window_written += n as u64;
                }
                (Err(_), _) | (_, Err(_)) => return written, // poisoned: the switch reports it
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
            if window.elapsed() >= RESIZE_RATE_WINDOW {
                let age = self.checkpoint_age();
                if age > window_age - window_age / 20 {
                    rate *= 2.0;
                }
                (window, window_written, window_age) = (Instant::now(), 0, age);
            }
            let due = Duration::from_secs_f64(window_written as f64 / rate);
            if let Some(ahead) = due.checked_sub(window.elapsed()) {
                std::thread::sleep(ahead.min(deadline.saturating_duration_since(Instant::now())));
            }
        }
        written
    }
}
