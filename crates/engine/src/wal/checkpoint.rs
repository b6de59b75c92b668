//! Checkpoint slots: the two alternating, checksummed records in `ib_logfile0` (blocks 1 and 2)
//! that say where recovery starts and which epoch last ran; reading both and picking the newest
//! valid one; writing one and releasing log space behind it.
//!
//! What must stay true (W5): a slot is written only for an LSN the log has already made durable,
//! and fsynced before the in-memory checkpoint LSN moves (that is what releases space for reuse);
//! consecutive writes go to alternate slots, so a torn write leaves the previous checkpoint
//! valid. Must never write a slot with an epoch lower than one a block on disk may carry.

use super::block::{checksum_ok, le_u32, le_u64, seal};
use super::layout::{slot_offset, Geometry, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::io::File;

const SLOT_MAGIC: &[u8; 4] = b"EKCP";

/// One checkpoint record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Increases by one per write; slot index = number % 2.
    pub number: u64,
    pub lsn: u64,
    pub epoch: u32,
    /// Redo bytes per second the last measured recovery replayed; 0: none measured (and what
    /// slots written before the field existed hold there).
    pub replay_rate: u64,
}

pub(crate) fn encode_slot(geom: &Geometry, slot: &Slot) -> Vec<u8> {
    let mut b = vec![0u8; geom.block_size];
    b[0..4].copy_from_slice(SLOT_MAGIC);
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&slot.number.to_le_bytes());
    b[16..24].copy_from_slice(&slot.lsn.to_le_bytes());
    b[24..28].copy_from_slice(&slot.epoch.to_le_bytes());
    b[32..40].copy_from_slice(&geom.capacity().to_le_bytes());
    b[40..48].copy_from_slice(&slot.replay_rate.to_le_bytes());
    seal(&mut b);
    b
}

pub(super) fn decode_slot(
    raw: &[u8],
    geom: &Geometry,
    index: usize,
) -> std::result::Result<Slot, String> {
    if !checksum_ok(raw) {
        let n = raw.len().saturating_sub(4);
        return Err(format!(
            "checksum mismatch, stored {:#010x}, computed {:#010x}",
            le_u32(raw, n).unwrap_or(0),
            crc32c::crc32c(&raw[..n])
        ));
    }
    if raw.get(0..4) != Some(SLOT_MAGIC.as_slice()) || le_u32(raw, 4) != Some(FORMAT_VERSION) {
        return Err("bad magic or version".into());
    }
    let (Some(number), Some(lsn), Some(epoch), Some(cap), Some(replay_rate)) = (
        le_u64(raw, 8),
        le_u64(raw, 16),
        le_u32(raw, 24),
        le_u64(raw, 32),
        le_u64(raw, 40),
    ) else {
        return Err("truncated".into());
    };
    if number % 2 != index as u64 || cap != geom.capacity() || lsn < geom.first_lsn() {
        return Err(format!(
            "fields out of range (number {number}, lsn {lsn}, capacity {cap})"
        ));
    }
    Ok(Slot {
        number,
        lsn,
        epoch,
        replay_rate,
    })
}

/// Both slots as read back.
pub(crate) struct Slots {
    /// The valid slot with the highest number.
    pub newest: Slot,
    /// The other slot was invalid (it will be overwritten by the next slot write).
    pub one_bad: bool,
    /// Highest epoch in any valid slot.
    pub max_epoch: u32,
}

/// Reads and checks both slots; both invalid is an error naming the file.
pub(crate) fn read_slots(file0: &dyn File, geom: &Geometry) -> Result<Slots> {
    let mut found = Vec::with_capacity(2);
    let mut reasons = Vec::with_capacity(2);
    for index in 0..2 {
        let mut raw = vec![0u8; geom.block_size];
        file0.read_at(&mut raw, slot_offset(geom, index))?;
        match decode_slot(&raw, geom, index) {
            Ok(s) => found.push(s),
            Err(r) => {
                tracing::warn!(
                    "{}: checkpoint slot {index} (offset {}) is invalid: {r}",
                    file0.name(),
                    slot_offset(geom, index)
                );
                reasons.push(format!(
                    "slot {index} at offset {}: {r}",
                    slot_offset(geom, index)
                ))
            }
        }
    }
    let Some(newest) = found.iter().copied().max_by_key(|s| s.number) else {
        return Err(Error::BadDatabase {
            path: file0.name().into(),
            reason: format!(
                "both redo log checkpoint slots are invalid ({}); recovery has no starting \
                 point and refuses to guess one. Way out: `evenkeel check --salvage --out DIR` \
                 exports every readable row",
                reasons.join("; ")
            ),
        });
    };
    Ok(Slots {
        newest,
        one_bad: found.len() == 1,
        max_epoch: found.iter().map(|s| s.epoch).max().unwrap_or(0),
    })
}

/// Writes `slot` into its place and fsyncs the file.
pub(crate) fn write_slot(file0: &dyn File, geom: &Geometry, slot: &Slot) -> Result<()> {
    let index = (slot.number % 2) as usize;
    file0.write_at(&encode_slot(geom, slot), slot_offset(geom, index))?;
    // IMPORTANT: the slot must be durable before log space behind it is reused, and before any
    // block of a new epoch is written (W5, W6).
    file0.sync()
}

/// Serialises checkpoint writers and remembers the next slot number and the replay rate the
/// slots carry.
pub(crate) struct CheckpointWriter {
    pub next_number: u64,
    pub replay_rate: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wal::LogConfig;

    #[test]
    fn slot_roundtrip_and_rejections() {
        let cfg = LogConfig {
            file_size: 512 * 16,
            buffer_size: 2048,
            ..LogConfig::default()
        };
        let g = Geometry::new(&cfg).unwrap();
        let s = Slot {
            number: 7,
            lsn: 5000,
            epoch: 3,
            replay_rate: 123_456_789,
        };
        let raw = encode_slot(&g, &s);
        assert_eq!(decode_slot(&raw, &g, 1), Ok(s));
        assert!(decode_slot(&raw, &g, 0).is_err(), "odd number in slot 0");
        let mut bad = raw.clone();
        bad[17] ^= 1;
        assert!(decode_slot(&bad, &g, 1).unwrap_err().contains("checksum"));
    }
}
