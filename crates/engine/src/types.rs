//! Newtypes shared by every layer: page numbers, LSNs, frame, transaction and table ids.
//!
//! Kept tiny and dependency-free so the lowest layers can use them.

use std::fmt;

/// A page number within the data file. Page 0 is the file header.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct PageId(pub u32);

impl PageId {
    /// The "no page" marker stored in sibling and chain fields.
    pub const NONE: PageId = PageId(u32::MAX);
    pub fn is_none(self) -> bool {
        self == Self::NONE
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Log sequence number: a byte position in the (future) redo stream.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Index of a frame in the buffer pool (global across instances).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FrameId(pub u32);

impl FrameId {
    /// The frame's position in the pool's frame array.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The frame's position counted from `base` (a buffer-pool instance's first frame), for
    /// indexing that instance's per-frame arrays. `self` must not be below `base`.
    pub fn offset_from(self, base: FrameId) -> usize {
        debug_assert!(self >= base, "frame {self} below base {base}");
        (self.0 - base.0) as usize
    }
}

impl fmt::Display for FrameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifier of a transaction; unique for the life of an open database.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TxnId(pub u64);

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifier of a table (one B+tree). 0 is the catalog itself.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TableId(pub u32);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
