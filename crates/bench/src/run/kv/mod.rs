//! `bench kv`: the engine-core micro benchmark. One table of 16-byte keys and 100-byte values,
//! loaded once (1000 rows per commit, keys in random order), then timed points of random
//! point gets, random replacing puts and range scans from random starts, each workload at
//! each thread count for a fixed time. On evenkeel it drives the engine's own API rather than
//! the `Driver` adapter so the figures are the engine's, and so it can read `Status` (data-file
//! I/O, buffer-pool counters) around each point; each point starts and ends with a flush, so
//! write-back of what the point dirtied is charged to it. `--engine PEER` runs the same
//! points through the peer's driver (`on_driver`, which says what differs).
//!
//! Must stay true: the table's key set never changes after the load (puts only replace), so
//! every drawn key exists and a `--dir` loaded once can be reused by later runs.

pub mod args;
pub mod keys;
#[cfg(feature = "evenkeel")]
mod on_driver;
pub mod report;
#[cfg(feature = "evenkeel")]
mod run;
#[cfg(feature = "evenkeel")]
pub mod worker;

use std::path::PathBuf;

use super::{require_positive, EngineSpec};
use crate::error::{BenchError, BenchResult};

#[cfg(feature = "evenkeel")]
pub use run::{run_kv, run_kv_bench};

/// The benchmark's table.
pub const TABLE: &str = "kv";
/// A one-row table recording how many rows `TABLE` was loaded with.
pub const META_TABLE: &str = "kv_meta";
/// The key of that row (the value: the row count, big-endian u64).
pub(crate) const META_ROWS_KEY: &[u8] = b"rows";

/// An evenkeel error as a fatal `BenchError`, for `run` (open, load, flush) and `worker` (the
/// timed units).
#[cfg(feature = "evenkeel")]
pub(crate) fn engine_err(e: evenkeel::Error) -> BenchError {
    BenchError::Driver(crate::error::DriverError::fatal(e.to_string()))
}

/// Whether the kv table found in `--dir`, loaded with `have` rows (`None`: its load did not
/// finish), can serve a run of `want` rows; the error says what to pass instead.
pub(crate) fn check_loaded(have: Option<u64>, want: u64) -> BenchResult<u64> {
    match have {
        Some(n) if n == want => Ok(n),
        Some(n) => Err(BenchError::Usage(format!(
            "--dir holds a kv table of {n} rows but --rows asks for {want}: pass --rows {n} or \
             another --dir"
        ))),
        None => Err(BenchError::Usage(
            "--dir holds a kv table whose load did not finish: remove it or use another --dir"
                .into(),
        )),
    }
}

/// Without the evenkeel driver there is nothing for kv to measure.
#[cfg(not(feature = "evenkeel"))]
pub fn run_kv_bench(o: &KvOptions) -> BenchResult<super::RunOutput> {
    o.validate()?;
    Err(BenchError::Usage(
        "bench kv drives evenkeel directly; this build has no evenkeel (feature \"evenkeel\")"
            .into(),
    ))
}

/// Longest point accepted, in seconds.
const MAX_SECONDS: f64 = 86_400.0;

/// A timed workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Get = 1,
    Put = 2,
    Scan = 3,
}

impl Workload {
    pub fn parse(s: &str) -> Option<Workload> {
        match s.to_ascii_lowercase().as_str() {
            "get" => Some(Workload::Get),
            "put" => Some(Workload::Put),
            "scan" => Some(Workload::Scan),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Get => "get",
            Workload::Put => "put",
            Workload::Scan => "scan",
        }
    }
}

/// Checked options of a run.
#[derive(Debug, Clone)]
pub struct KvOptions {
    /// evenkeel (its own API) or a peer (through its driver).
    pub engine: String,
    pub rows: u64,
    pub threads: Vec<usize>,
    pub seconds: f64,
    pub workloads: Vec<Workload>,
    pub batch: usize,
    pub scan_len: usize,
    pub dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// `name=value` engine options, preset first.
    pub set: Vec<String>,
    pub json: bool,
    pub quiet: bool,
    pub seed: u64,
}

impl KvOptions {
    pub fn validate(&self) -> BenchResult<()> {
        require_positive("--rows", self.rows)?;
        require_positive("--batch", self.batch as u64)?;
        require_positive("--scan-len", self.scan_len as u64)?;
        if self.threads.is_empty() || self.workloads.is_empty() {
            return Err(BenchError::Usage(
                "--threads and --workloads need at least one value".into(),
            ));
        }
        if !(self.seconds > 0.0 && self.seconds <= MAX_SECONDS) {
            return Err(BenchError::Usage(format!(
                "--seconds: expected a number of seconds above 0 and at most {MAX_SECONDS}, got {}",
                self.seconds
            )));
        }
        self.spec().validate()
    }

    pub(crate) fn spec(&self) -> EngineSpec {
        EngineSpec {
            engine: self.engine.clone(),
            config: self.config.clone(),
            set: self.set.clone(),
        }
    }
}
