//! evenkeel's workbench: the experiments of the seed posts, run against evenkeel and any other
//! engine that implements the `Driver` adapter. Workloads: TPC-C as tpcc-mysql runs it
//! (`tpcc`) and Mark Callaghan's insert benchmark (`insert`). A sampler takes one row per
//! second (throughput, latency percentiles, engine status, process and device I/O); `report`
//! turns the rows into summary.json, timeseries.csv and a self-contained report.html; `cli`
//! holds the clap arguments and run functions the `evenkeel` binary mounts. `--at TIME:set
//! NAME=VALUE` changes an engine option mid-run (`run::schedule`, `Driver::set_option`).
//!
//! Layers, lowest first: `error, codec, driver, recorder` → `tpcc, insert, sampler` →
//! `stability, report` → `run, cli`. Workloads never know which engine they drive.

// `unsafe` only where an API requires it, each with a SAFETY note: the lmdb driver (heed's
// environment), the rocksdb driver (a transaction's lifetime) and the sweep's page-cache advice.
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cell;
pub mod cli;
pub mod codec;
pub mod driver;
pub mod error;
#[cfg(feature = "evenkeel")]
pub mod grid;
#[cfg(feature = "evenkeel")]
pub mod holes;
pub mod insert;
#[cfg(feature = "evenkeel")]
pub mod matrix;
pub mod metrics;
pub mod recorder;
pub mod report;
pub mod run;
pub mod sampler;
pub mod stability;
pub mod tpcc;

pub use cli::{
    run_bench, run_sweep, BenchCommand, CommonArgs, InsertArgs, KvArgs, SweepCommand, TpccArgs,
};
pub use error::{BenchError, BenchResult, DriverError, ErrorClass};
pub use run::engine::EngineSpec;
#[cfg(feature = "evenkeel")]
pub use run::kv::{report::KvReport, run_kv, KvOptions};
pub use run::tpcc::tpcc_check_dir;
pub use run::RunOutput;
pub use tpcc::check::CheckReport;
