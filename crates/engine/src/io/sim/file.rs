//! [`SimFile`]: a handle on one simulated file, the `File` side of [`super::SimStorage`].

use super::{
    write_into, CrashMode, FaultKind, FaultOp, Inner, NodeRef, PendingOp, State, SIM_MAX_FILE_BYTES,
};
use crate::error::{Error, Result};
use crate::io::{File, FileKind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A handle on a simulated file. Like an fd it keeps the file alive after `remove`.
#[derive(Debug)]
pub struct SimFile {
    pub(super) name: String,
    pub(super) kind: FileKind,
    pub(super) epoch: u64,
    pub(super) node: NodeRef,
    pub(super) inner: Arc<Inner>,
}

impl SimFile {
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    fn err(&self, op: &'static str, e: std::io::Error) -> Error {
        Error::io(self.name.clone(), op, e)
    }

    /// Locks the storage state, failing if a crash has happened since this handle was opened.
    fn live(&self, op: &'static str) -> Result<parking_lot::MutexGuard<'_, State>> {
        let st = self.inner.state.lock();
        if st.epoch != self.epoch {
            let e = std::io::Error::other("the simulated storage crashed; reopen the file");
            return Err(self.err(op, e));
        }
        Ok(st)
    }

    fn fault(&self, st: &mut State, op: FaultOp, name: &'static str) -> Result<()> {
        match st.take_fault(&self.name, op) {
            Some(kind) => Err(self.err(name, std::io::Error::from_raw_os_error(kind.errno()))),
            None => Ok(()),
        }
    }

    fn check_end(&self, op: &'static str, offset: u64, len: usize) -> Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= SIM_MAX_FILE_BYTES => Ok(()),
            _ => Err(self.err(op, std::io::Error::from_raw_os_error(libc::EFBIG))),
        }
    }
}

impl File for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut st = self.live("read")?;
        self.fault(&mut st, FaultOp::Read, "read")?;
        let node = self.node.lock();
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= node.current.len() as u64 => {
                buf.copy_from_slice(&node.current[offset as usize..end as usize]);
            }
            _ if buf.is_empty() => {}
            _ => {
                let e = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                );
                return Err(self.err("read", e));
            }
        }
        self.inner.stats.read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut st = self.live("write")?;
        if buf.is_empty() {
            return Ok(());
        }
        st.tick(&self.name, "write")?;
        self.check_end("write", offset, buf.len())?;
        if let Some(keep) = st.tears.remove(&self.name) {
            let prefix = &buf[..keep.min(buf.len())];
            let mut node = self.node.lock();
            write_into(&mut node.current, offset, prefix);
            // The prefix reached the platter: it is durable whatever the crash mode.
            write_into(&mut node.durable, offset, prefix);
            st.counts.torn_writes += 1;
            if st.tear_cuts.remove(&self.name) {
                drop(node);
                st.counts.power_cuts += 1;
                st.crash(&CrashMode::DropUnsynced);
                st.dead = true;
                let e = std::io::Error::other("the simulated power was cut");
                return Err(self.err("write", e));
            }
            st.counts.eio += 1;
            let e = std::io::Error::from_raw_os_error(libc::EIO);
            return Err(self.err("write", e));
        }
        self.fault(&mut st, FaultOp::Write, "write")?;
        let mut node = self.node.lock();
        write_into(&mut node.current, offset, buf);
        node.unsynced.push(PendingOp::Write {
            offset,
            data: buf.to_vec(),
        });
        self.inner.stats.write(buf.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let lat = self.inner.sync_latency_us.load(Ordering::Relaxed);
        if lat > 0 {
            std::thread::sleep(Duration::from_micros(lat));
        }
        let mut st = self.live("fsync")?;
        st.tick(&self.name, "fsync")?;
        if let Some(kind) = st.take_fault(&self.name, FaultOp::Sync) {
            if kind != FaultKind::LostSync {
                return Err(self.err("fsync", std::io::Error::from_raw_os_error(kind.errno())));
            }
            st.counts.lost_writes += self.node.lock().lose_sync();
        } else {
            self.node.lock().sync();
        }
        self.inner.stats.sync();
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let _st = self.live("stat")?;
        let len = self.node.lock().current.len() as u64;
        Ok(len)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut st = self.live("set_len")?;
        st.tick(&self.name, "set_len")?;
        self.check_end("set_len", len, 0)?;
        let mut node = self.node.lock();
        node.current.resize(len as usize, 0);
        node.unsynced.push(PendingOp::SetLen(len));
        Ok(())
    }

    fn name(&self) -> &str {
        &self.name
    }
}
