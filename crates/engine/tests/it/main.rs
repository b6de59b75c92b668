//! Integration tests of the engine through its public API. One test binary with modules
//! (one binary per file would link the engine many times).

#![allow(clippy::unwrap_used)]

mod adaptive_hash;
mod api;
mod backup;
mod bad_input;
mod change_buffer;
mod cleaner;
mod common;
mod concurrency;
mod corruption;
mod crash;
mod drop_crash;
mod faults;
mod fuzz;
mod isolation;
mod layers;
mod leaf_hint;
mod model;
mod mvcc;
mod reapply;
mod recovery;
mod resize;
mod small_pool;
mod txn;
