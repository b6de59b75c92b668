//! Integration tests of the workbench, one binary with a module per subject (fast links).
//! Workload tests run against the in-memory model engine; `flush` uses a tiny evenkeel database.

mod backup;
mod browser;
mod cli;
mod conformance;
mod flush;
mod imports;
mod insert;
mod kv;
mod peers;
mod report;
mod tpcc;
