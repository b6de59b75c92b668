//! evenkeel: an embeddable transactional storage engine with InnoDB's architecture
//! (B+tree pages updated in place, buffer pool, redo log, fuzzy checkpoints, page cleaner,
//! doublewrite) and one promise: throughput stays level, at 1-second resolution, without tuning.
//!
//! Layers, lowest first; a module uses only the layers below it:
//!
//! ```text
//!   types, error, options
//!   page (pure layout), io (Storage trait: real files, simulated disk)
//!   wal (redo log: group commit, checkpoint slots; record formats), dwb (doublewrite)
//!   buffer (frames, page table, LRU, flush list; the one write-back function, WAL rule)
//!   mtr (mini-transactions: latches + page diffs, one log group each)
//!   btree (B+tree over pages), space (page allocation)
//!   flush (checkpoint fence, flush points, page cleaner, policy/ one file per policy)
//!   catalog (table names -> roots), txn (write sets, key locks, commit), recovery
//!   db (the public API: Database, Transaction, Table, Status)
//! ```
//!
//! mtr sits above buffer (it holds page latches) although DESIGN.md files it under wal: the
//! redo format lives in wal/record.rs, the latch set needs the pool.

#![deny(clippy::unwrap_used)]

pub mod btree;
pub mod buffer;
pub mod catalog;
pub mod check;
pub mod db;
pub mod dwb;
pub mod error;
pub mod flush;
#[doc(hidden)]
pub mod fuzz;
pub mod io;
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
