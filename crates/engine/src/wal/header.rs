//! The log files themselves: creating them with their header block (format version, block size,
//! capacity, index), and opening them with every recorded field checked against the
//! configuration.
//!
//! What must stay true: a file header is written once, at create, and never again; `create`
//! makes the files and their directory entries durable before it returns; `open` refuses a file
//! whose header does not match the configuration (no silent recreate: resizing the log is an
//! explicit step — close cleanly, remove the files, create). Must never truncate or overwrite an
//! existing log.

use super::block::{checksum_ok, le_u32, le_u64, seal};
use super::layout::{file_name, Geometry};
use crate::error::{Error, Result};
use crate::io::{File, FileKind, Storage};
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) const FORMAT_VERSION: u32 = 1;
const FILE_MAGIC: &[u8; 4] = b"EKLG";

/// "dir/ib_logfile0", for error messages.
pub(crate) fn path_of(storage: &dyn Storage, index: usize) -> PathBuf {
    PathBuf::from(storage.describe()).join(file_name(index))
}

fn encode(geom: &Geometry, index: usize) -> Vec<u8> {
    let mut b = vec![0u8; geom.block_size];
    b[0..4].copy_from_slice(FILE_MAGIC);
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&(geom.block_size as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(index as u32).to_le_bytes());
    b[16..20].copy_from_slice(&geom.files.to_le_bytes());
    b[20..28].copy_from_slice(&geom.file_size.to_le_bytes());
    b[28..36].copy_from_slice(&geom.capacity().to_le_bytes());
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

/// Creates the log files, each `file_size` bytes with its header; file 0 also gets `slots`
/// (the two checkpoint slot blocks, already encoded). Refuses if any log file exists.
pub(crate) fn create_files(
    storage: &dyn Storage,
    geom: &Geometry,
    slots: [&[u8]; 2],
) -> Result<Vec<Arc<dyn File>>> {
    for i in 0..geom.files as usize {
        if storage.exists(&file_name(i)) {
            return Err(Error::BadDatabase {
                path: path_of(storage, i),
                reason: "a redo log file already exists; refusing to overwrite it".into(),
            });
        }
    }
    let mut files = Vec::with_capacity(geom.files as usize);
    for i in 0..geom.files as usize {
        let f = storage.open(&file_name(i), FileKind::Log, true)?;
        f.set_len(geom.file_size)?;
        f.write_at(&encode(geom, i), 0)?;
        if i == 0 {
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

/// Opens the existing log files and checks their size and header against `geom`.
pub(crate) fn open_files(storage: &dyn Storage, geom: &Geometry) -> Result<Vec<Arc<dyn File>>> {
    let mut files = Vec::with_capacity(geom.files as usize);
    for i in 0..geom.files as usize {
        let bad = |reason: String| Error::InvalidConfig {
            origin: path_of(storage, i).display().to_string(),
            reason,
        };
        if !storage.exists(&file_name(i)) {
            return Err(bad(format!(
                "missing; the configuration asks for {} log files",
                geom.files
            )));
        }
        let f = storage.open(&file_name(i), FileKind::Log, false)?;
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
        files.push(f);
    }
    if storage.exists(&file_name(geom.files as usize)) {
        return Err(Error::InvalidConfig {
            origin: path_of(storage, geom.files as usize).display().to_string(),
            reason: format!(
                "exists, but log_files_in_group = {}: the log has more files than configured",
                geom.files
            ),
        });
    }
    Ok(files)
}

/// The geometry recorded in an existing log (file size, file count, block size), read from
/// the header of the first file; None when there is no log or its header is unreadable (then
/// `open_files` reports the problem). The files' geometry wins over the options on open.
pub fn probe_geometry(storage: &dyn Storage) -> Option<(u64, u32, usize)> {
    if !storage.exists(&file_name(0)) {
        return None;
    }
    let f = storage.open(&file_name(0), FileKind::Log, false).ok()?;
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
    Some((le_u64(&raw, 20)?, le_u32(&raw, 16)?, block_size))
}
