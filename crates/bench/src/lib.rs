//! evenkeel's workbench: the experiments of the seed posts, run against evenkeel and any other
//! engine that implements the `Driver` adapter. Workloads: TPC-C as tpcc-mysql runs it
//! (`tpcc`) and Mark Callaghan's insert benchmark (`insert`). A sampler takes one row per
//! second (throughput, latency percentiles, engine status, process and device I/O); `report`
//! turns the rows into summary.json, timeseries.csv and a self-contained report.html; `cli`
//! holds the clap arguments and run functions the `evenkeel` binary mounts.
//!
//! Layers, lowest first: `error, codec, driver, recorder` → `tpcc, insert, sampler` →
//! `stability, report` → `run, cli`. Workloads never know which engine they drive.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]

pub mod codec;
pub mod driver;
pub mod error;
pub mod recorder;
pub mod report;
pub mod run;
pub mod sampler;
pub mod stability;
pub mod tpcc;

pub use error::{BenchError, BenchResult, DriverError, ErrorClass};
