//! policy: how many pages to write back each cleaner loop. One trait, one small file per
//! policy, each the real published algorithm (cited in its file), each a pure function of its
//! inputs and its own history: no clock, no I/O, no locks (STYLE.md habit 8). The cleaner
//! measures, builds [`FlushInputs`], asks the policy, and carries the [`FlushPlan`] out.
//!
//! Limits that hold for every policy live outside the policies: the async and sync flush
//! points of the checkpoint, and foreground flushing past max_dirty_pages_pct when
//! check_max_dirty_foreground is on. So the classic policies can show the classic stalls.

/// What the cleaner measured for this loop. Rates are per second; pages are buffer-pool pages.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushInputs {
    /// Seconds since the previous plan (about 1; shorter under pressure).
    pub elapsed_s: f64,
    /// Current LSN, checkpoint LSN and log capacity, in bytes of redo.
    pub lsn: u64,
    pub checkpoint_lsn: u64,
    pub log_capacity: u64,
    /// Checkpoint ages (bytes) of the async and sync flush points.
    pub async_point: u64,
    pub sync_point: u64,
    /// Redo generated per second, over the last loop and averaged over flushing_avg_loops.
    pub redo_rate_last: f64,
    pub redo_rate_avg: f64,
    /// Pages on flush lists, pages holding data, free frames, all frames.
    pub dirty_pages: u64,
    pub data_pages: u64,
    pub free_pages: u64,
    pub total_pages: u64,
    /// Pages this cleaner wrote in the previous loop, and their average over the avg window.
    pub flushed_last: u64,
    pub flushed_avg: f64,
    /// Pages newly dirtied per byte of redo (measured: clean->dirty transitions / redo bytes).
    pub dirtied_per_redo_byte: f64,
    /// Observed page-write throughput of the device (pages/s the sink sustained when busy).
    pub device_pages_per_s: f64,
    /// Pages read from disk per second (free frames must keep ahead of this).
    pub reads_per_s: f64,
    /// Knobs (InnoDB's names).
    pub io_capacity: u64,
    pub io_capacity_max: u64,
    pub max_dirty_pages_pct: f64,
    pub max_dirty_pages_pct_lwm: f64,
    pub adaptive_flushing_lwm: f64,
    pub flushing_avg_loops: u64,
    pub lru_scan_depth: u64,
    /// Optional cap on write bandwidth (pages/s) for `steady`; 0 = none.
    pub write_cap_pages_per_s: u64,
}

impl FlushInputs {
    pub fn checkpoint_age(&self) -> u64 {
        self.lsn.saturating_sub(self.checkpoint_lsn)
    }
    /// Seed 000's formula: 100 * dirty / (1 + data + free).
    pub fn dirty_pct(&self) -> f64 {
        100.0 * self.dirty_pages as f64 / (1 + self.data_pages + self.free_pages) as f64
    }
}

/// What to do this loop.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushPlan {
    /// Pages to write from the flush lists, oldest modification first.
    pub flush_list_pages: u64,
    /// Free frames to produce from the LRU tails (clean pages evicted, dirty ones written).
    pub lru_pages: u64,
    /// Delay, in microseconds, each committing transaction waits before appending its COMMIT
    /// (admission control; only `steady` uses it).
    pub admission_delay_us: u64,
}

/// A flush policy. `plan` must be deterministic given its inputs and the policy's history.
pub trait FlushPolicy: Send {
    fn name(&self) -> &'static str;
    fn plan(&mut self, inp: &FlushInputs) -> FlushPlan;
}

/// Policy names accepted by `adaptive_flushing`.
pub const POLICY_NAMES: &[&str] = &[
    "fixed",
    "innodb55",
    "estimate",
    "keep_average",
    "innodb80",
    "steady",
];

/// The policy named `name` (one of POLICY_NAMES).
pub fn make(name: &str) -> Option<Box<dyn FlushPolicy>> {
    let _ = name;
    None
}
