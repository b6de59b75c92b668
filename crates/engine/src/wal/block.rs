//! Byte formats of data blocks and of groups (tables in `wal/mod.rs`): sealing a block, checking
//! one read back, framing a group and parsing one out of the stream.
//!
//! What must stay true: every decoder here is total — any bytes, of any length, give a verdict
//! and never panic; a block is accepted only with a matching checksum and the expected absolute
//! number; a group is accepted only whole, at the LSN it claims, with its checksum and end
//! marker. Layout constants are frozen once published (format version 1).

use super::layout::{
    BLOCK_HEADER_SIZE, BLOCK_TRAILER_SIZE, GROUP_END_SIZE, GROUP_HEADER_SIZE, GROUP_OVERHEAD,
};

/// Flag bit: the bytes after `data_len` are padding and the stream continues in the next block.
pub(crate) const FLAG_PADDED: u16 = 1;

pub(crate) const GROUP_END_MARK: u32 = 0x454B_4E44;

const _: () = assert!(BLOCK_HEADER_SIZE == 16 && BLOCK_TRAILER_SIZE == 4);
const _: () = assert!(GROUP_OVERHEAD == 16);

/// The header fields of a data block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub block_no: u64,
    pub epoch: u32,
    pub data_len: u16,
    pub padded: bool,
}

/// Why a block read back was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockDefect {
    /// Torn, never written, or corrupted.
    Checksum,
    /// A valid block from another lap (or misplaced).
    Number { found: u64 },
    /// Checksum matches but a field is out of range (a bug or a deliberate forgery).
    Header,
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Writes a checksum over `block[..len-4]` into its last four bytes.
pub(crate) fn seal(block: &mut [u8]) {
    let n = block.len() - BLOCK_TRAILER_SIZE;
    let crc = crc32c::crc32c(&block[..n]);
    block[n..].copy_from_slice(&crc.to_le_bytes());
}

/// True when the last four bytes of `block` are the checksum of the rest.
pub(crate) fn checksum_ok(block: &[u8]) -> bool {
    let Some(n) = block.len().checked_sub(BLOCK_TRAILER_SIZE) else {
        return false;
    };
    le_u32(block, n) == Some(crc32c::crc32c(&block[..n]))
}

/// Fills in the header of a block whose stream bytes are already in place, then seals it.
pub(crate) fn seal_data_block(block: &mut [u8], h: &BlockHeader) {
    block[0..8].copy_from_slice(&h.block_no.to_le_bytes());
    block[8..12].copy_from_slice(&h.epoch.to_le_bytes());
    block[12..14].copy_from_slice(&h.data_len.to_le_bytes());
    let flags = if h.padded { FLAG_PADDED } else { 0 };
    block[14..16].copy_from_slice(&flags.to_le_bytes());
    seal(block);
}

/// Checks a data block read back, expecting absolute number `expect`.
pub(crate) fn check_data_block(block: &[u8], expect: u64) -> Result<BlockHeader, BlockDefect> {
    if !checksum_ok(block) {
        return Err(BlockDefect::Checksum);
    }
    let payload = block
        .len()
        .saturating_sub(BLOCK_HEADER_SIZE + BLOCK_TRAILER_SIZE);
    let (Some(block_no), Some(epoch), Some(data_len), Some(flags)) = (
        le_u64(block, 0),
        le_u32(block, 8),
        le_u16(block, 12),
        le_u16(block, 14),
    ) else {
        return Err(BlockDefect::Header);
    };
    if block_no != expect {
        return Err(BlockDefect::Number { found: block_no });
    }
    if usize::from(data_len) > payload || flags & !FLAG_PADDED != 0 {
        return Err(BlockDefect::Header);
    }
    Ok(BlockHeader {
        block_no,
        epoch,
        data_len,
        padded: flags & FLAG_PADDED != 0,
    })
}

/// The 12-byte header of a group of `len` payload bytes starting at `start_lsn`, given the
/// crc32c of its payload.
pub(crate) fn group_header(len: u32, start_lsn: u64, payload_crc: u32) -> [u8; GROUP_HEADER_SIZE] {
    let mut h = [0u8; GROUP_HEADER_SIZE];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&(start_lsn as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(payload_crc, &h[0..8]);
    h[8..12].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The verdict on the stream bytes at a group boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupParse {
    /// A whole valid group of `total` stream bytes; its payload is `bytes[12..total-4]`.
    Complete { total: usize },
    /// Valid so far, more bytes needed.
    NeedMore,
    /// Not a group that this log wrote at this LSN.
    Invalid(&'static str),
}

/// Parses the group that should start at `start_lsn` from `bytes` (the stream from there on).
pub(crate) fn parse_group(bytes: &[u8], start_lsn: u64, max_len: u64) -> GroupParse {
    let (Some(len), Some(lsn_lo), Some(crc)) =
        (le_u32(bytes, 0), le_u32(bytes, 4), le_u32(bytes, 8))
    else {
        return GroupParse::NeedMore;
    };
    if lsn_lo != start_lsn as u32 {
        return GroupParse::Invalid("group header names another LSN");
    }
    if u64::from(len) > max_len {
        return GroupParse::Invalid("group length over the limit");
    }
    let total = GROUP_OVERHEAD + len as usize;
    let Some(group) = bytes.get(..total) else {
        return GroupParse::NeedMore;
    };
    let payload = &group[GROUP_HEADER_SIZE..total - GROUP_END_SIZE];
    if le_u32(group, total - GROUP_END_SIZE) != Some(GROUP_END_MARK) {
        return GroupParse::Invalid("group end marker missing");
    }
    if crc32c::crc32c_append(crc32c::crc32c(payload), &group[0..8]) != crc {
        return GroupParse::Invalid("group checksum mismatch");
    }
    GroupParse::Complete { total }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    fn framed(payload: &[u8], lsn: u64) -> Vec<u8> {
        let mut v = group_header(payload.len() as u32, lsn, crc32c::crc32c(payload)).to_vec();
        v.extend_from_slice(payload);
        v.extend_from_slice(&GROUP_END_MARK.to_le_bytes());
        v
    }

    #[test]
    fn block_roundtrip_and_defects() {
        let mut b = vec![7u8; 512];
        let h = BlockHeader {
            block_no: 42,
            epoch: 3,
            data_len: 100,
            padded: true,
        };
        seal_data_block(&mut b, &h);
        assert_eq!(check_data_block(&b, 42), Ok(h));
        assert_eq!(
            check_data_block(&b, 43),
            Err(BlockDefect::Number { found: 42 })
        );
        b[300] ^= 1;
        assert_eq!(check_data_block(&b, 42), Err(BlockDefect::Checksum));
        assert_eq!(check_data_block(&[0u8; 512], 0), Err(BlockDefect::Checksum));
        let mut big = vec![0u8; 512];
        big[12..14].copy_from_slice(&600u16.to_le_bytes());
        seal(&mut big);
        assert_eq!(check_data_block(&big, 0), Err(BlockDefect::Header));
    }

    #[test]
    fn group_parse_accepts_only_whole_valid_groups() {
        let g = framed(b"hello", 1000);
        assert_eq!(
            parse_group(&g, 1000, 64),
            GroupParse::Complete { total: 21 }
        );
        for cut in 0..g.len() {
            assert_eq!(parse_group(&g[..cut], 1000, 64), GroupParse::NeedMore);
        }
        assert!(matches!(parse_group(&g, 1001, 64), GroupParse::Invalid(_)));
        assert!(matches!(parse_group(&g, 1000, 4), GroupParse::Invalid(_)));
        for i in 0..g.len() {
            let mut bad = g.clone();
            bad[i] ^= 0x10;
            assert!(
                !matches!(parse_group(&bad, 1000, 64), GroupParse::Complete { .. }),
                "flip at {i} accepted"
            );
        }
    }

    #[test]
    fn decoders_never_panic_on_random_bytes() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let n = rng.gen_range(0..600);
            let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            let _ = check_data_block(&bytes, rng.gen());
            let _ = parse_group(&bytes, rng.gen(), rng.gen_range(0..1 << 20));
        }
    }
}
