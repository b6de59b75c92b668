//! A `Storage` wrapper that records every completed write and fsync (with the page numbers and
//! LSNs each write carried), and a checker of D1 and D2 over the recorded order.

use crate::dwb::DWB_FILE_NAME;
use crate::error::Result;
use crate::io::{File, FileKind, IoStats, SimStorage, Storage};
use crate::page::hdr;
use parking_lot::Mutex;
use std::sync::Arc;

/// A page image identity: (page number, LSN).
pub(super) type Key = (u32, u64);

#[derive(Clone, Debug)]
pub(super) enum Op {
    Write {
        file: String,
        offset: u64,
        pages: Vec<Key>,
    },
    Sync {
        file: String,
    },
}

#[derive(Clone)]
pub(super) struct TraceStorage {
    pub sim: SimStorage,
    pub ops: Arc<Mutex<Vec<Op>>>,
    pub page_size: usize,
}

struct TraceFile {
    inner: Arc<dyn File>,
    ops: Arc<Mutex<Vec<Op>>>,
    page_size: usize,
}

impl TraceStorage {
    pub fn new(sim: &SimStorage, page_size: usize) -> Self {
        TraceStorage {
            sim: sim.clone(),
            ops: Arc::default(),
            page_size,
        }
    }
}

impl Storage for TraceStorage {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> Result<Arc<dyn File>> {
        Ok(Arc::new(TraceFile {
            inner: self.sim.open(name, kind, create)?,
            ops: Arc::clone(&self.ops),
            page_size: self.page_size,
        }))
    }
    fn exists(&self, name: &str) -> bool {
        self.sim.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.sim.remove(name)
    }
    fn sync_dir(&self) -> Result<()> {
        self.sim.sync_dir()
    }
    fn describe(&self) -> String {
        self.sim.describe()
    }
    fn io_stats(&self) -> IoStats {
        self.sim.io_stats()
    }
}

impl File for TraceFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    // The trace lock is held across the operation, so the recorded order is the order the
    // operations took effect in, also with concurrent writers (doublewrite segments).
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut ops = self.ops.lock();
        self.inner.write_at(buf, offset)?;
        let pages = buf
            .chunks(self.page_size)
            .map(|p| (hdr::page_no(p).0, hdr::lsn(p).0))
            .collect();
        ops.push(Op::Write {
            file: self.name().to_string(),
            offset,
            pages,
        });
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        let mut ops = self.ops.lock();
        self.inner.sync()?;
        ops.push(Op::Sync {
            file: self.name().to_string(),
        });
        Ok(())
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// Replays `ops` and panics at the first violation of D1 (a page written in place without a
/// durable slot copy of that very image) or D2 (a slot overwritten while the in-place copy of
/// its page is not yet durable). Returns the number of in-place page writes checked.
pub(super) fn check_order(ops: &[Op], page_size: usize, data: &str) -> usize {
    // Per slot: the image it holds and whether that slot write has been fsynced.
    let mut slots: Vec<Option<(Key, bool)>> = Vec::new();
    let mut in_place_unsynced: Vec<Key> = Vec::new();
    let mut checked = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write {
                file,
                offset,
                pages,
            } if file == DWB_FILE_NAME => {
                let first = (*offset as usize / page_size).saturating_sub(1);
                for (k, key) in pages.iter().enumerate() {
                    if *offset == 0 && k == 0 {
                        continue; // the header block
                    }
                    let slot = if *offset == 0 { k - 1 } else { first + k };
                    if slots.len() <= slot {
                        slots.resize(slot + 1, None);
                    }
                    if let Some((old, _)) = slots[slot] {
                        assert!(
                            !in_place_unsynced.contains(&old),
                            "D2 broken at op {i}: slot {slot} overwritten while page {old:?} \
                             is not yet durable in place"
                        );
                    }
                    slots[slot] = Some((*key, false));
                }
            }
            Op::Sync { file } if file == DWB_FILE_NAME => {
                for (_, durable) in slots.iter_mut().flatten() {
                    *durable = true;
                }
            }
            Op::Write { file, pages, .. } if file == data => {
                for key in pages {
                    assert!(
                        slots.contains(&Some((*key, true))),
                        "D1 broken at op {i}: page {key:?} written in place without a durable \
                         doublewrite copy"
                    );
                    in_place_unsynced.push(*key);
                    checked += 1;
                }
            }
            Op::Sync { file } if file == data => in_place_unsynced.clear(),
            _ => {}
        }
    }
    checked
}
