//! evenkeel: an embeddable transactional storage engine with InnoDB's architecture
//! (B+tree pages updated in place, buffer pool, redo log, fuzzy checkpoints, page cleaner,
//! doublewrite) and one promise: throughput stays level, at 1-second resolution, without tuning.
//!
//! Layers, lowest first; a module uses only the layers below it:
//!
//! ```text
//!   types, error, metrics
//!   page (pure layout), io (Storage trait: real files, simulated disk)
//!   buffer (frames, page table, LRU, flush list; the one write-back function)
//!   btree (B+tree over pages), space (page allocation)
//!   catalog (table names -> roots), txn (write sets, commit)
//!   db (the public API: Database, Transaction, Table)
//! ```

#![deny(clippy::unwrap_used)]

pub mod btree;
pub mod buffer;
pub mod catalog;
pub mod check;
pub mod db;
pub mod dwb;
pub mod error;
pub mod flush;
pub mod io;
pub mod metrics;
pub mod mtr;
pub mod options;
pub mod page;
pub mod recovery;
pub mod space;
pub mod txn;
pub mod types;
pub mod wal;

pub use db::{check_dir, Database, Status, Table};
pub use error::{Error, Result};
pub use options::Options;
pub use txn::transaction::{Scan, Transaction};
