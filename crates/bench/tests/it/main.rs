//! Integration tests of the workbench, one binary with a module per subject (fast links).
//! Every workload test runs against the in-memory model engine.

mod cli;
mod insert;
mod kv;
mod report;
mod tpcc;
