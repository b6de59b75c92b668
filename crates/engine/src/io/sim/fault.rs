//! What the simulated disk can do wrong: the faults it injects and the crashes it simulates.

/// Which operation a [`Fault`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    Read,
    Write,
    Sync,
}

/// What an injected fault does: fail with an errno (`Eio`, `Enospc`: the raw OS error of the
/// `std::io::Error`), or, for `FaultOp::Sync` only, `LostSync`: the sync reports success but
/// the writes it should have made durable are dropped for good (they stay visible to reads, as
/// in a page cache whose write-back failed and was forgotten), so no later sync and no crash
/// brings them back. The engine cannot notice; a later crash shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Eio,
    Enospc,
    LostSync,
}

impl FaultKind {
    pub(super) fn errno(self) -> i32 {
        match self {
            FaultKind::Eio => libc::EIO,
            FaultKind::Enospc => libc::ENOSPC,
            // `inject` refuses LostSync on anything but Sync, and sync() handles it first.
            FaultKind::LostSync => unreachable!("a lost sync returns success"),
        }
    }
}

/// An injected I/O failure: the matching call returns `Error::Io` and changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `None` matches every file.
    pub file: Option<String>,
    pub op: FaultOp,
    /// Let this many matching calls succeed first.
    pub after: u64,
    pub kind: FaultKind,
    /// Keep failing every later matching call too (otherwise the fault fires once).
    pub persistent: bool,
}

/// What survives a crash of the unsynced operations (writes and `set_len`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Every unsynced operation is lost.
    DropUnsynced,
    /// The last unsynced write of each file (or only of `file`, when named) lands partially:
    /// its first `keep_bytes` bytes reach the durable image; every other unsynced operation
    /// is lost.
    TearLastWrite {
        file: Option<String>,
        keep_bytes: usize,
    },
    /// Each unsynced operation is independently kept or lost (probability 1/2), the kept ones
    /// applied in their original order: models the device reordering writes. Deterministic
    /// given the seed.
    KeepRandomSubset { seed: u64 },
    /// As `KeepRandomSubset`, but the kept operations are applied in a random order, so of two
    /// unsynced writes to the same bytes the older may win: a device that completes queued
    /// writes out of order. Deterministic given the seed.
    Reorder { seed: u64 },
}

/// How many failures the simulator has injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub eio: u64,
    pub enospc: u64,
    pub torn_writes: u64,
    /// Syncs that reported success and made nothing durable.
    pub lost_syncs: u64,
    /// Writes dropped by lost syncs.
    pub lost_writes: u64,
    /// Power cuts from `power_cut_after`.
    pub power_cuts: u64,
}
