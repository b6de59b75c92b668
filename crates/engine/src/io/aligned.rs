//! A heap buffer aligned for O_DIRECT (and for page frames, which are written with it).

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Zeroed, `align`-aligned bytes; fixed length. Used for buffer-pool frames so a frame can be
/// handed to an O_DIRECT write without a bounce copy.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Box<[u8]>); &AlignedBuf only gives
// shared access to bytes and &mut AlignedBuf exclusive access, so the usual aliasing rules hold.
unsafe impl Send for AlignedBuf {}
// SAFETY: see Send: no interior mutability, so sharing &AlignedBuf across threads is sound.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Page-size alignment is enough for every device O_DIRECT supports (512 or 4096).
    pub const DEFAULT_ALIGN: usize = 4096;

    pub fn new(len: usize) -> Self {
        Self::with_align(len, Self::DEFAULT_ALIGN)
    }

    /// Panics if `align` is not a power of two or `len` is zero: both are programming errors.
    pub fn with_align(len: usize, align: usize) -> Self {
        assert!(len > 0, "AlignedBuf of zero length");
        let layout = Layout::from_size_align(len, align).expect("valid alignment");
        // SAFETY: layout has non-zero size (asserted above).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    /// A copy of `src`, aligned to [`Self::DEFAULT_ALIGN`], without zeroing it first (a page
    /// image about to be written is a copy of its frame).
    pub fn copy_of(src: &[u8]) -> Self {
        assert!(!src.is_empty(), "AlignedBuf of zero length");
        let layout =
            Layout::from_size_align(src.len(), Self::DEFAULT_ALIGN).expect("valid alignment");
        // SAFETY: layout has non-zero size (asserted above).
        let raw = unsafe { alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: `raw` is a fresh allocation of src.len() bytes, so it is valid for writes of
        // that many bytes and cannot overlap `src`; after the copy every byte is initialised,
        // which Deref relies on.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr.as_ptr(), src.len()) };
        AlignedBuf { ptr, layout }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised bytes (zeroed or copied) owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated (by alloc_zeroed or alloc) with exactly this layout and not
        // freed before.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.layout.size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let b = AlignedBuf::new(16384);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(b.len(), 16384);
    }

    #[test]
    fn a_copy_is_aligned_and_equal() {
        let src: Vec<u8> = (0..16384u32).map(|i| (i % 251) as u8).collect();
        let b = AlignedBuf::copy_of(&src);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(&b[..], &src[..]);
    }
}
