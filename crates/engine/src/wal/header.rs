//! The log files themselves: creating them with their header block (format version, block size,
//! capacity, index), and opening them with every recorded field checked against the
//! configuration.
//!
//! Also which of the two file sets ([`LogSet`]) holds the log: an online resize (resize.rs)
//! builds the resized log in the other set, and a crash may leave both.
//!
//! What must stay true: a file header is written once, at create, and never again; `create`
//! makes the files and their directory entries durable before it returns; `open` refuses a file
//! whose header does not match the configuration (no silent recreate: resizing is the explicit
//! online step of resize.rs). Must never truncate or overwrite an existing log. Of two sets, the
//! one in use is the newer generation that has a valid checkpoint slot: a resized set gets its
//! first slot only once all its files are durable, so a set without one is a resize that never
//! finished, and a set older than one with a slot is a log a finished resize replaced.

use super::block::{checksum_ok, le_u32, le_u64, seal};
use super::checkpoint::decode_slot;
use super::layout::{slot_offset, Geometry, LogSet};
use super::LogConfig;
use crate::error::{Error, Result};
use crate::io::{File, FileKind, Storage};
use std::path::PathBuf;
use std::sync::Arc;

use super::layout::FORMAT_VERSION;
const FILE_MAGIC: &[u8; 4] = b"EKLG";

/// "dir/ib_logfile0", for error messages.
pub(crate) fn path_of(storage: &dyn Storage, set: LogSet, index: usize) -> PathBuf {
    PathBuf::from(storage.describe()).join(set.file_name(index))
}

/// Byte offset of the generation in a file header: 0 in logs made before online resize (the
/// bytes were zero), one more than the replaced set's in a resized set.
const GENERATION_AT: usize = 36;

fn encode(geom: &Geometry, index: usize, generation: u64) -> Vec<u8> {
    let mut b = vec![0u8; geom.block_size];
    b[0..4].copy_from_slice(FILE_MAGIC);
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&(geom.block_size as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(index as u32).to_le_bytes());
    b[16..20].copy_from_slice(&geom.files.to_le_bytes());
    b[20..28].copy_from_slice(&geom.file_size.to_le_bytes());
    b[28..36].copy_from_slice(&geom.capacity().to_le_bytes());
    b[GENERATION_AT..GENERATION_AT + 8].copy_from_slice(&generation.to_le_bytes());
    seal(&mut b);
    b
}

/// Checks a file header read back; the error is a reason fit for a user.
pub(super) fn check(raw: &[u8], geom: &Geometry, index: usize) -> std::result::Result<(), String> {
    if raw.get(0..4) != Some(FILE_MAGIC.as_slice()) {
        return Err("not an evenkeel redo log file (bad magic)".into());
    }
    let version = le_u32(raw, 4).unwrap_or(0);
    if version != FORMAT_VERSION {
        return Err(format!(
            "redo log format version {version}; this build reads version {FORMAT_VERSION}"
        ));
    }
    let block_size = le_u32(raw, 8).unwrap_or(0) as usize;
    if block_size != geom.block_size {
        return Err(format!(
            "written with log_block_size = {block_size}, configured {}",
            geom.block_size
        ));
    }
    if !checksum_ok(raw) {
        return Err("file header checksum mismatch".into());
    }
    let fields = (
        le_u32(raw, 12).unwrap_or(u32::MAX) as usize,
        le_u32(raw, 16).unwrap_or(0),
        le_u64(raw, 20).unwrap_or(0),
        le_u64(raw, 28).unwrap_or(0),
    );
    let want = (index, geom.files, geom.file_size, geom.capacity());
    if fields != want {
        return Err(format!(
            "written as file {} of {} with log_file_size = {} (capacity {}), configured file {} \
             of {} with log_file_size = {} (capacity {})",
            fields.0, fields.1, fields.2, fields.3, want.0, want.1, want.2, want.3
        ));
    }
    Ok(())
}

/// Creates the log files of `set`, each `file_size` bytes with its header; file 0 also gets
/// `slots` (the two checkpoint slot blocks, already encoded) when given: a resized set gets
/// its slots only when it takes over. Refuses if any file of the set exists.
pub(crate) fn create_files(
    storage: &dyn Storage,
    geom: &Geometry,
    set: LogSet,
    generation: u64,
    slots: Option<[&[u8]; 2]>,
) -> Result<Vec<Arc<dyn File>>> {
    for i in 0..geom.files as usize {
        if storage.exists(&set.file_name(i)) {
            return Err(Error::BadDatabase {
                path: path_of(storage, set, i),
                reason: "a redo log file already exists; refusing to overwrite it".into(),
            });
        }
    }
    let mut files = Vec::with_capacity(geom.files as usize);
    for i in 0..geom.files as usize {
        let f = storage.open(&set.file_name(i), FileKind::Log, true)?;
        f.set_len(geom.file_size)?;
        f.write_at(&encode(geom, i, generation), 0)?;
        if let (0, Some(slots)) = (i, slots) {
            for (s, bytes) in slots.iter().enumerate() {
                f.write_at(bytes, super::layout::slot_offset(geom, s))?;
            }
        }
        // IMPORTANT: the header and slots must be durable before anything trusts this file.
        f.sync()?;
        files.push(f);
    }
    // IMPORTANT: a new file is not durable until its directory entry is.
    storage.sync_dir()?;
    Ok(files)
}

/// Removes every file of `set` (each index that exists: a removal a crash interrupted, or
/// directory operations that reached the disk out of order, may leave any of them), the
/// highest index first, and makes the removal durable.
pub(crate) fn remove_set(storage: &dyn Storage, set: LogSet) -> Result<()> {
    let present: Vec<usize> = (0..MAX_FILES)
        .filter(|&i| storage.exists(&set.file_name(i)))
        .collect();
    for &i in present.iter().rev() {
        storage.remove(&set.file_name(i))?;
    }
    if !present.is_empty() {
        storage.sync_dir()?;
    }
    Ok(())
}

/// Whether any file of `set` exists.
fn set_present(storage: &dyn Storage, set: LogSet) -> bool {
    (0..MAX_FILES).any(|i| storage.exists(&set.file_name(i)))
}

/// Most files a log may have (`log_files_in_group`'s limit).
const MAX_FILES: usize = 100;

/// Opens the existing log files of `set` and checks their size and header against `geom`;
/// returns them and the set's generation.
pub(crate) fn open_files(
    storage: &dyn Storage,
    geom: &Geometry,
    set: LogSet,
) -> Result<(Vec<Arc<dyn File>>, u64)> {
    let mut files = Vec::with_capacity(geom.files as usize);
    let mut generation = 0;
    for i in 0..geom.files as usize {
        let bad = |reason: String| Error::InvalidConfig {
            origin: path_of(storage, set, i).display().to_string(),
            reason,
        };
        if !storage.exists(&set.file_name(i)) {
            return Err(bad(format!(
                "missing; the configuration asks for {} log files",
                geom.files
            )));
        }
        let f = storage.open(&set.file_name(i), FileKind::Log, false)?;
        let len = f.len()?;
        if len != geom.file_size {
            return Err(bad(format!(
                "is {len} bytes, configured log_file_size = {}",
                geom.file_size
            )));
        }
        let mut raw = vec![0u8; geom.block_size];
        f.read_at(&mut raw, 0)?;
        check(&raw, geom, i).map_err(bad)?;
        let g = le_u64(&raw, GENERATION_AT).unwrap_or(0);
        if i == 0 {
            generation = g;
        } else if g != generation {
            return Err(bad(format!(
                "belongs to redo log generation {g}, file 0 to generation {generation}"
            )));
        }
        files.push(f);
    }
    if storage.exists(&set.file_name(geom.files as usize)) {
        return Err(Error::InvalidConfig {
            origin: path_of(storage, set, geom.files as usize)
                .display()
                .to_string(),
            reason: format!(
                "exists, but log_files_in_group = {}: the log has more files than configured",
                geom.files
            ),
        });
    }
    Ok((files, generation))
}

/// What the header of a set's first file says, and whether that file has a valid checkpoint
/// slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SetInfo {
    pub set: LogSet,
    pub file_size: u64,
    pub files: u32,
    pub block_size: usize,
    pub generation: u64,
    pub has_slot: bool,
}

/// Reads the header (and the checkpoint slots) of `set`'s first file; None when the file is
/// missing or its header unreadable.
fn probe_set(storage: &dyn Storage, set: LogSet) -> Option<SetInfo> {
    if !storage.exists(&set.file_name(0)) {
        return None;
    }
    let f = storage.open(&set.file_name(0), FileKind::Log, false).ok()?;
    let mut first = vec![0u8; 512];
    f.read_at(&mut first, 0).ok()?;
    if first.get(0..4) != Some(FILE_MAGIC.as_slice()) {
        return None;
    }
    let block_size = le_u32(&first, 8)? as usize;
    if block_size != 512 && block_size != 4096 {
        return None;
    }
    let mut raw = vec![0u8; block_size];
    f.read_at(&mut raw, 0).ok()?;
    if !checksum_ok(&raw) {
        return None;
    }
    let (file_size, files) = (le_u64(&raw, 20)?, le_u32(&raw, 16)?);
    let geom = Geometry::new(&LogConfig {
        file_size,
        files,
        block_size,
        buffer_size: 4 * block_size,
        ..LogConfig::default()
    })
    .ok()?;
    let has_slot = (0..2).any(|index| {
        let mut slot = vec![0u8; block_size];
        f.read_at(&mut slot, slot_offset(&geom, index)).is_ok()
            && decode_slot(&slot, &geom, index).is_ok()
    });
    Some(SetInfo {
        set,
        file_size,
        files,
        block_size,
        generation: le_u64(&raw, GENERATION_AT)?,
        has_slot,
    })
}

/// The set that holds the log, and the other set when files of it are left over (a resize a
/// crash interrupted, before or after it switched) and may be removed. None: no log here. The
/// set in use is the newest generation with a valid checkpoint slot; when no set has one, the
/// newest readable one (whose open then names what is wrong; nothing is left over to remove
/// then, so that no file a salvage may want is removed), else set A.
pub(crate) fn choose_set(storage: &dyn Storage) -> Option<(LogSet, Option<LogSet>)> {
    let present: Vec<LogSet> = [LogSet::A, LogSet::B]
        .into_iter()
        .filter(|&s| set_present(storage, s))
        .collect();
    let infos: Vec<SetInfo> = present
        .iter()
        .filter_map(|&s| probe_set(storage, s))
        .collect();
    let newest = |with_slot: bool| {
        infos
            .iter()
            .filter(|i| i.has_slot || !with_slot)
            .max_by_key(|i| i.generation)
            .map(|i| i.set)
    };
    let with_slot = newest(true);
    let chosen = with_slot
        .or_else(|| newest(false))
        .or_else(|| present.first().copied())?;
    let leftover = present
        .into_iter()
        .find(|&s| s != chosen)
        .filter(|_| with_slot.is_some());
    Some((chosen, leftover))
}

/// The geometry recorded in an existing log (file size, file count, block size), read from
/// the header of the first file of the set in use; None when there is no log or its header is
/// unreadable (then `open_files` reports the problem). The files' geometry wins over the
/// options on open.
pub fn probe_geometry(storage: &dyn Storage) -> Option<(u64, u32, usize)> {
    let (set, _) = choose_set(storage)?;
    let i = probe_set(storage, set)?;
    Some((i.file_size, i.files, i.block_size))
}

/// True when any redo log file of either set exists here.
pub fn log_exists(storage: &dyn Storage) -> bool {
    [LogSet::A, LogSet::B]
        .into_iter()
        .any(|s| set_present(storage, s))
}
