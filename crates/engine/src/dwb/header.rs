//! The doublewrite file's header block: encoding it at create, checking it at open.
//!
//! What must stay true: the header is written when the file is created (and again when the
//! slot count changes), and fsynced (with the directory entry) before any slot is written; `check` is total (any bytes give a verdict,
//! never a panic) and refuses a header whose page size or slot count differs from the
//! configuration, because slots written under another page size would be misread. A header of
//! another slot count is valid geometry (`check_page_size`): the writer rewrites it. Layout
//! constants are frozen once published. Version 3 (entries compressed or trimmed, `format.rs`)
//! is written; a version 1 file (raw slots) or 2 (entries compressed, never trimmed) is read,
//! recovered from, and rewritten as version 3 before its first write. A build that reads only
//! versions 1 and 2 refuses a version 3 file by its version.

pub(super) const FORMAT_VERSION: u32 = 3;
/// The versions this build reads.
const READ_VERSIONS: [u32; 3] = [1, 2, 3];
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
        || (le_u32(raw, 4).is_some_and(|v| READ_VERSIONS.contains(&v))
            && le_u32(raw, body) != Some(crc32c::crc32c(&raw[..body])))
}

/// Checks a header block read back (`raw` is the whole block as the file holds it): valid, of
/// this build's version, and of this geometry; the error is a reason fit for a user.
pub(super) fn check(raw: &[u8], page_size: usize, slots: usize) -> Result<(), String> {
    let version = check_page_size(raw, page_size)?;
    if version != FORMAT_VERSION {
        return Err(format!("written in doublewrite format version {version}"));
    }
    let found_slots = le_u32(raw, 12).unwrap_or(0);
    if found_slots as usize != slots {
        return Err(format!(
            "written with {found_slots} slots, configured {slots} slots"
        ));
    }
    Ok(())
}

/// Checks everything but the slot count: a valid header (magic, version, checksum) written with
/// `page_size`, in a version this build reads; returns the version. The slot area is read
/// without its geometry (`format.rs`), so a file of another slot count is read correctly (the
/// count only bounds the writer's segments).
pub(super) fn check_page_size(raw: &[u8], page_size: usize) -> Result<u32, String> {
    if raw.get(0..4) != Some(MAGIC.as_slice()) {
        return Err("not an evenkeel doublewrite file (bad magic)".into());
    }
    let version = le_u32(raw, 4).unwrap_or(0);
    if !READ_VERSIONS.contains(&version) {
        return Err(format!(
            "doublewrite format version {version}; this build reads versions 1 to \
             {FORMAT_VERSION}"
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
    Ok(version)
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
