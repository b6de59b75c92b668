//! Counters of the redo log, kept as relaxed atomics and read as one [`LogStats`] snapshot.
//!
//! What must stay true: counters only count (never drive decisions); a failed write or fsync is
//! not counted as done. Names end in their unit.

use std::sync::atomic::{AtomicU64, Ordering};

crate::counter::counter_group! {
    /// The redo log's counters since it was created or opened.
    pub struct Counters => LogStats named "log_" {
        /// Groups appended.
        groups: "groups",
        /// Payload bytes appended (without group framing or padding).
        payload_bytes: "bytes",
        /// Bytes written to log files: whole blocks, including headers, padding and rewrites
        /// of the last partial block.
        written_bytes: "bytes",
        /// `write_at` calls on log files (one per contiguous file range per flush).
        writes: "writes",
        /// fsync calls on log files, checkpoint slot writes included.
        fsyncs: "fsyncs",
        /// Time spent in fsyncs of the log files written by flushes (not the checkpoint
        /// slots'): what durable commits wait on the device.
        fsync_us: "us",
        /// Of those fsyncs, the ones that took 20 ms or more ([`SLOW_FSYNC_US`]): a commit
        /// stall the device caused, which shows in the second's throughput.
        slow_fsyncs: "fsyncs",
        /// Flushes that did I/O (each one a group commit: one leader, any number of waiters).
        flushes: "flushes",
        /// `flush_to` calls.
        flush_requests: "requests",
        /// `flush_to` calls asking for durability (commits under FlushAtCommit::One).
        durable_flush_requests: "requests",
        /// `flush_to` calls that waited for another thread's flush instead of doing their own.
        flush_waits: "waits",
        /// Most `flush_to` callers served by one flush: its leader plus the callers waiting on
        /// it when it completed.
        max_waiters_per_flush: "callers" gauge,
        /// Stream bytes skipped to close the last block before an fsync (W3).
        padding_bytes: "bytes",
        /// Flushes that rewrote a partial block written (not fsynced) by an earlier flush.
        partial_block_rewrites: "rewrites",
        /// Appends that found the log buffer full and waited for it to drain.
        buffer_full_waits: "waits",
        /// Time appends spent waiting for the log buffer to drain.
        buffer_full_wait_us: "us",
        /// Appends refused because the log had no space before the checkpoint.
        log_full_refusals: "refusals",
        /// Checkpoint slots written (including the epoch slot written at open).
        checkpoints: "slots",
    }
}

/// A log fsync this long or longer counts as slow (`log_slow_fsyncs`): about ten times what
/// a log fsync takes on a device that is keeping up, and long enough to show at 1-second
/// resolution when every committing thread waits for it.
pub const SLOW_FSYNC_US: u64 = 20_000;

impl Counters {
    pub fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn max(&self, c: &AtomicU64, n: u64) {
        c.fetch_max(n, Ordering::Relaxed);
    }
}
