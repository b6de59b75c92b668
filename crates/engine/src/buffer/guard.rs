//! guard: a pinned, latched page. Dropping the guard releases the latch, then the pin.
//!
//! IMPORTANT: the latch is released before the pin. Eviction only picks frames whose pin count
//! is zero (checked under the instance mutex, where pins are taken), so an unpinned frame is
//! never latched and the evicting thread's latch attempt cannot block.

use super::{BufferPool, FrameData};
use crate::types::{FrameId, Lsn, PageId};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use std::ops::{Deref, DerefMut};

/// A page latched shared.
pub struct PageRead<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) fid: FrameId,
    pub(super) g: Option<RwLockReadGuard<'a, FrameData>>,
}

impl PageRead<'_> {
    pub fn page_id(&self) -> PageId {
        self.g.as_ref().map(|g| g.page).unwrap_or(PageId::NONE)
    }

    /// The frame holding the page (for [`BufferPool::read_frame`] later).
    pub fn frame_id(&self) -> FrameId {
        self.fid
    }
}

impl Deref for PageRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.g {
            Some(g) => &g.buf,
            None => unreachable!("guard used after release"),
        }
    }
}

impl Drop for PageRead<'_> {
    fn drop(&mut self) {
        drop(self.g.take());
        self.pool.unpin(self.fid);
    }
}

/// A page latched exclusive. Changes must be stamped (see [`PageWrite::stamp`]) by the
/// mini-transaction that made them, which also puts the page on its flush list.
pub struct PageWrite<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) fid: FrameId,
    pub(super) g: Option<RwLockWriteGuard<'a, FrameData>>,
    pub(super) modified: bool,
}

impl<'a> PageWrite<'a> {
    pub fn page_id(&self) -> PageId {
        self.g.as_ref().map(|g| g.page).unwrap_or(PageId::NONE)
    }

    pub fn is_modified(&self) -> bool {
        self.modified
    }

    /// Sets the page LSN to `end` (the end of the redo group holding the change) and, if the
    /// frame was clean, enters it on the flush list with oldest_modification = `start`.
    /// Called at mini-transaction commit and by redo.
    pub fn stamp(&mut self, start: Lsn, end: Lsn) {
        crate::page::hdr::set_lsn(&mut self[..], end);
        self.pool.note_dirty(self.fid, start, end);
        self.modified = false;
    }

    /// Leaves the changes unlogged: only after the engine was poisoned, when nothing more is
    /// written to the data file.
    pub fn abandon_changes(&mut self) {
        self.modified = false;
    }

    /// Gives up the exclusive latch for a shared one without unpinning.
    pub fn downgrade(mut self) -> PageRead<'a> {
        debug_assert!(!self.modified, "downgrading an unstamped page");
        let pool = self.pool;
        let fid = self.fid;
        let g = self.g.take().map(RwLockWriteGuard::downgrade);
        std::mem::forget(self);
        PageRead { pool, fid, g }
    }
}

impl Deref for PageWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.g {
            Some(g) => &g.buf,
            None => unreachable!("guard used after release"),
        }
    }
}

impl DerefMut for PageWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.modified = true;
        match &mut self.g {
            Some(g) => &mut g.buf,
            None => unreachable!("guard used after release"),
        }
    }
}

impl Drop for PageWrite<'_> {
    fn drop(&mut self) {
        // A modified page must have been stamped by its mtr; dropping it unstamped would leave a
        // change that no flush list knows about. That is a bug, not an operating error.
        debug_assert!(
            !self.modified || std::thread::panicking(),
            "page {} modified but not stamped",
            self.page_id()
        );
        drop(self.g.take());
        self.pool.unpin(self.fid);
    }
}
