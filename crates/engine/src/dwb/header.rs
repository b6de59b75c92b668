//! The doublewrite file's header block: encoding it at create, checking it at open.
//!
//! What must stay true: the header is written when the file is created (and again when the
//! slot count changes), and fsynced (with the directory entry) before any slot is written; `check` is total (any bytes give a verdict,
//! never a panic) and refuses a header whose page size or slot count differs from the
//! configuration, because slots written under another page size would be misread. A header of
//! another slot count is valid geometry (`check_page_size`): the writer rewrites it. Layout
//! constants are frozen once published (format version 1).

pub(super) const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 4] = b"EKDW";
const CHECKSUM_SIZE: usize = 4;

use crate::page::PAGE_SIZES;

/// The header block: `page_size` bytes (table in `dwb/mod.rs`).
pub(super) fn encode(page_size: usize, slots: usize) -> Vec<u8> {
    let mut b = vec![0u8; page_size];
    b[0..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&(page_size as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(slots as u32).to_le_bytes());
    let body = page_size - CHECKSUM_SIZE;
    let crc = crc32c::crc32c(&b[..body]);
    b[body..].copy_from_slice(&crc.to_le_bytes());
    b
}

fn le_u32(b: &[u8], off: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// The page size recorded in a header that starts with the magic, if it is a valid page size:
/// the header block is that long.
pub(super) fn stored_page_size(raw: &[u8]) -> Option<usize> {
    if raw.get(0..4) != Some(MAGIC.as_slice()) {
        return None;
    }
    let ps = le_u32(raw, 8)? as usize;
    PAGE_SIZES.contains(&ps).then_some(ps)
}

/// Whether a header that fails [`check`] is damaged (bad magic, or a checksum that does not
/// match) rather than a valid header of another version or geometry.
pub(super) fn is_damage(raw: &[u8]) -> bool {
    let body = raw.len().saturating_sub(CHECKSUM_SIZE);
    raw.get(0..4) != Some(MAGIC.as_slice())
        || (le_u32(raw, 4) == Some(FORMAT_VERSION)
            && le_u32(raw, body) != Some(crc32c::crc32c(&raw[..body])))
}

/// Checks a header block read back (`raw` is the whole block as the file holds it); the error
/// is a reason fit for a user.
pub(super) fn check(raw: &[u8], page_size: usize, slots: usize) -> Result<(), String> {
    check_page_size(raw, page_size)?;
    let found_slots = le_u32(raw, 12).unwrap_or(0);
    if found_slots as usize != slots {
        return Err(format!(
            "written with {found_slots} slots, configured {slots} slots"
        ));
    }
    Ok(())
}

/// Checks everything but the slot count: a valid header (magic, version, checksum) written with
/// `page_size`. Slot `i` is at `(1 + i) * page_size` whatever the slot count, so a file of
/// another slot count is read correctly (the count only bounds the writer's segments).
pub(super) fn check_page_size(raw: &[u8], page_size: usize) -> Result<(), String> {
    if raw.get(0..4) != Some(MAGIC.as_slice()) {
        return Err("not an evenkeel doublewrite file (bad magic)".into());
    }
    let version = le_u32(raw, 4).unwrap_or(0);
    if version != FORMAT_VERSION {
        return Err(format!(
            "doublewrite format version {version}; this build reads version {FORMAT_VERSION}"
        ));
    }
    let body = raw.len().saturating_sub(CHECKSUM_SIZE);
    let whole = stored_page_size(raw) == Some(raw.len());
    if !whole || le_u32(raw, body) != Some(crc32c::crc32c(&raw[..body])) {
        return Err("doublewrite header checksum mismatch (corrupted header)".into());
    }
    let (found_ps, found_slots) = (le_u32(raw, 8).unwrap_or(0), le_u32(raw, 12).unwrap_or(0));
    if found_ps as usize != page_size {
        return Err(format!(
            "written with page_size = {found_ps} and {found_slots} slots, configured page_size = \
             {page_size}; run recovery with the old page size, then remove the file to change it"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_defect_is_refused() {
        let h = encode(4096, 64);
        check(&h, 4096, 64).unwrap();
        assert!(check(&h, 8192, 64)
            .unwrap_err()
            .contains("page_size = 4096"));
        assert_eq!(stored_page_size(&h), Some(4096));
        assert_eq!(stored_page_size(&h[..10]), None);
        assert!(check(&h, 4096, 32).unwrap_err().contains("64 slots"));
        let mut bad = h.clone();
        bad[100] ^= 1;
        assert!(check(&bad, 4096, 64).unwrap_err().contains("checksum"));
        let mut bad = h.clone();
        bad[0] = b'X';
        assert!(check(&bad, 4096, 64).unwrap_err().contains("magic"));
        assert!(check(&h[..10], 4096, 64).is_err());
        assert!(check(&[], 4096, 64).is_err());
    }
}
