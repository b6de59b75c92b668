//! Counters of the redo log, kept as relaxed atomics and read as one [`LogStats`] snapshot.
//!
//! What must stay true: counters only count (never drive decisions); a failed write or fsync is
//! not counted as done. Names end in their unit.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the log's counters since it was created or opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogStats {
    /// Groups appended.
    pub groups: u64,
    /// Payload bytes appended (without group framing or padding).
    pub payload_bytes: u64,
    /// Bytes written to log files: whole blocks, including headers, padding and rewrites of the
    /// last partial block.
    pub written_bytes: u64,
    /// `write_at` calls on log files (one per contiguous file range per flush).
    pub writes: u64,
    /// fsync calls on log files, checkpoint slot writes included.
    pub fsyncs: u64,
    /// Flushes that did I/O (each one a group commit: one leader, any number of waiters).
    pub flushes: u64,
    /// `flush_to` calls, and those asking for durability (commits under FlushAtCommit::One).
    pub flush_requests: u64,
    pub durable_flush_requests: u64,
    /// `flush_to` calls that waited for another thread's flush instead of doing their own.
    pub flush_waits: u64,
    /// Most `flush_to` callers served by one flush: its leader plus the callers waiting on it
    /// when it completed.
    pub max_waiters_per_flush: u64,
    /// Stream bytes skipped to close the last block before an fsync (W3).
    pub padding_bytes: u64,
    /// Flushes that rewrote a partial block written (not fsynced) by an earlier flush.
    pub partial_block_rewrites: u64,
    /// Appends that found the log buffer full and waited for it to drain, and the time spent.
    pub buffer_full_waits: u64,
    pub buffer_full_wait_us: u64,
    /// Appends refused because the log had no space before the checkpoint.
    pub log_full_refusals: u64,
    /// Checkpoint slots written (including the epoch slot written at open).
    pub checkpoints: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub groups: AtomicU64,
    pub payload_bytes: AtomicU64,
    pub written_bytes: AtomicU64,
    pub writes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_requests: AtomicU64,
    pub durable_flush_requests: AtomicU64,
    pub flush_waits: AtomicU64,
    pub max_waiters_per_flush: AtomicU64,
    pub padding_bytes: AtomicU64,
    pub partial_block_rewrites: AtomicU64,
    pub buffer_full_waits: AtomicU64,
    pub buffer_full_wait_us: AtomicU64,
    pub log_full_refusals: AtomicU64,
    pub checkpoints: AtomicU64,
}

impl Counters {
    pub fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn max(&self, c: &AtomicU64, n: u64) {
        c.fetch_max(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LogStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogStats {
            groups: g(&self.groups),
            payload_bytes: g(&self.payload_bytes),
            written_bytes: g(&self.written_bytes),
            writes: g(&self.writes),
            fsyncs: g(&self.fsyncs),
            flushes: g(&self.flushes),
            flush_requests: g(&self.flush_requests),
            durable_flush_requests: g(&self.durable_flush_requests),
            flush_waits: g(&self.flush_waits),
            max_waiters_per_flush: g(&self.max_waiters_per_flush),
            padding_bytes: g(&self.padding_bytes),
            partial_block_rewrites: g(&self.partial_block_rewrites),
            buffer_full_waits: g(&self.buffer_full_waits),
            buffer_full_wait_us: g(&self.buffer_full_wait_us),
            log_full_refusals: g(&self.log_full_refusals),
            checkpoints: g(&self.checkpoints),
        }
    }
}
