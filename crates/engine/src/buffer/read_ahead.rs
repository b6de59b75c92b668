//! read_ahead: InnoDB's linear and random read-ahead, as hints queued to the read-ahead
//! threads (a full queue drops them).

use super::{BufferPool, Mode, EXTENT_PAGES};
use crate::error::Result;
use crate::types::PageId;
use std::sync::atomic::Ordering;

impl BufferPool {
    /// Sets read_ahead (0 none, 1 linear, 2 random) and read_ahead_threshold.
    pub fn set_read_ahead(&self, mode: u8, threshold: u32) {
        self.ra_mode.store(mode, Ordering::Relaxed);
        self.ra_threshold.store(threshold, Ordering::Relaxed);
    }

    /// Where read-ahead requests go (the read-ahead threads' queue).
    pub fn set_read_ahead_queue(&self, tx: Option<crossbeam::channel::Sender<PageId>>) {
        *self.ra_queue.lock() = tx;
    }

    /// Loads `pid` for read-ahead (a no-op when it is in the pool already or past the end of
    /// the file).
    pub fn prefetch(&self, pid: PageId) -> Result<()> {
        // resident already: nothing to read (and no file-size query, which is a syscall)
        if self.instances[self.instance_of(pid)].lookup(pid).is_some() {
            return Ok(());
        }
        let end = (pid.0 as u64 + 1) * self.page_size as u64;
        if self.file.len()? < end {
            return Ok(());
        }
        self.fetch(pid, Mode::Prefetch).map(|_| ())
    }

    pub(super) fn extent_resident(&self, first: u32) -> u32 {
        let inst = &self.instances[self.instance_of(PageId(first))];
        (first..first + EXTENT_PAGES)
            .filter(|p| inst.lookup(PageId(*p)).is_some())
            .count() as u32
    }

    /// InnoDB's triggers, simplified to residency: linear, at the last page of an extent with
    /// at least read_ahead_threshold of its pages in the pool, reads the next extent; random,
    /// on a miss in an extent with at least 13 resident pages, reads the rest of it.
    pub(super) fn maybe_read_ahead(&self, pid: PageId, miss: bool) {
        let mode = self.ra_mode.load(Ordering::Relaxed);
        if mode == 0 {
            return;
        }
        let first = pid.0 - pid.0 % EXTENT_PAGES;
        let targets: Vec<u32> = if mode == 1 && pid.0 % EXTENT_PAGES == EXTENT_PAGES - 1 {
            if self.extent_resident(first) < self.ra_threshold.load(Ordering::Relaxed) {
                return;
            }
            (first + EXTENT_PAGES..first + 2 * EXTENT_PAGES).collect()
        } else if mode == 2 && miss {
            if self.extent_resident(first) < 13 {
                return;
            }
            (first..first + EXTENT_PAGES)
                .filter(|p| *p != pid.0)
                .collect()
        } else {
            return;
        };
        let q = self.ra_queue.lock();
        if let Some(tx) = q.as_ref() {
            for p in targets {
                // a full queue drops requests: read-ahead is a hint
                let _ = tx.try_send(PageId(p));
            }
        }
    }
}
