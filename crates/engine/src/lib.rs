//! evenkeel: an embeddable transactional storage engine with InnoDB's architecture
//! (B+tree pages updated in place, buffer pool, redo log, fuzzy checkpoints, page cleaner,
//! doublewrite) and one promise: throughput stays level, at 1-second resolution, without tuning.
//!
//! # Quick start
//!
//! ```
//! use evenkeel::{Database, Durability, Options};
//!
//! # fn main() -> evenkeel::Result<()> {
//! # let tmp = tempfile::tempdir().expect("tempdir");
//! # let dir = tmp.path().join("db");
//! let mut opts = Options::default();
//! opts.buffer_pool_size = 64 << 20; // or Options::from_toml_file, or opts.set("buffer_pool_size", "64M")
//! let db = Database::open_or_create(&dir, opts)?;
//! let fruit = db.create_table_if_missing("fruit")?;
//!
//! let mut txn = db.begin();
//! txn.put(&fruit, b"apple", b"red")?;
//! txn.put(&fruit, b"banana", b"yellow")?;
//! txn.put(&fruit, b"cherry", b"dark red")?;
//! assert_eq!(txn.get(&fruit, b"apple")?, Some(b"red".to_vec())); // reads its own writes
//! txn.commit()?; // durable when it returns (flush_log_at_trx_commit = 1, the default)
//!
//! let mut txn = db.begin();
//! txn.set_durability(Durability::OsBuffered); // this commit: written to the OS, fsynced within ~1 s
//! for row in fruit.range(&txn, "a".."c")? {
//!     let (key, value) = row?;
//!     txn.put(&fruit, &key, &[value.as_slice(), b"!"].concat())?; // a scan does not borrow txn
//! }
//! let newest: Vec<_> = fruit.range(&txn, ..)?.rev().take(1).collect::<Result<_, _>>()?;
//! assert_eq!(newest[0].0, b"cherry");
//! txn.commit()?;
//!
//! db.close()?; // writes every dirty page back; the directory may be opened by another process
//! # Ok(())
//! # }
//! ```
//!
//! Plain reads see one read view per transaction plus its own writes (repeatable read, see
//! [`Isolation`]); [`Database::snapshot`] is a read-only view of every table. `get_for_update`
//! and every write take an exclusive key lock held to commit and act on the newest committed
//! value. A retryable error ([`Error::is_retryable`]: deadlock, lock wait timeout, an expired
//! view, a snapshot write conflict) rolls the transaction back: run it again. [`Database::open_read_only`] opens a database without
//! writing anything to it. Every option, its default and its range: [`Options::help`] or
//! `evenkeel options`.
//!
//! # Inside
//!
//! Layers, lowest first. A module uses only modules of the layers above its line in this table
//! (never its own line's, never a later one); `tests/it/layers.rs` reads this table and fails on
//! an upward or same-layer import, and on an import cycle among the files of one folder.
//!
//! ```text
//!   types, counter             Lsn, PageId, FrameId, TxnId, TableId; counter groups and metric declarations
//!   error                      the one error type
//!   page, io, locks, mvcc      page layout (pure); Storage trait (files, simulated disk); key locks; read views and old row versions
//!   options, wal, dwb          knobs; redo log (group commit, slots, records, log space and the checkpoint); doublewrite
//!   buffer                     frames, page table, LRU, flush list; the one write-back function (WAL rule)
//!   mtr                        mini-transactions: latches + page diffs, one log group each
//!   space                      page allocation
//!   btree                      B+tree over pages
//!   catalog, recovery, flush   table names -> roots; redo at open; flush points, page cleaner, policies
//!   check                      page and B+tree verification of a data file
//!   shared                     one open database's state (DbInner, Table handles), shutdown
//!   txn                        transactions: write sets, commit, recovery's re-apply
//!   status                     Status and the table of every metric it carries
//!   db, fuzz                   the public API (Database, Status, open and recovery); fuzz entry points
//!   backup                     online backup of an open database (Database::backup_to)
//! ```
//!
//! mtr sits above buffer (it holds page latches) although DESIGN.md files it under wal: the
//! redo format lives in wal/record.rs, the latch set needs the pool. The log's space (the
//! checkpoint fence and computation) is in wal/space.rs, below mtr; what frees space when the
//! log is full is flush's, passed down as a callback (`wal::MakeRoom`).
//!
//! The modules are public for the workbench, the command-line tools, the fuzzers and the
//! tests, and hidden from the documentation: their items may change in any release. The API
//! is what the crate root re-exports.

#![deny(clippy::unwrap_used)]

pub mod backup;
#[doc(hidden)]
pub mod btree;
#[doc(hidden)]
pub mod buffer;
#[doc(hidden)]
pub mod catalog;
pub mod check;
pub mod counter;
#[doc(hidden)]
pub mod db;
#[doc(hidden)]
pub mod dwb;
pub mod error;
#[doc(hidden)]
pub mod flush;
#[doc(hidden)]
pub mod fuzz;
#[doc(hidden)]
pub mod io;
#[doc(hidden)]
pub mod locks;
#[doc(hidden)]
pub mod mtr;
#[doc(hidden)]
pub mod mvcc;
pub mod options;
#[doc(hidden)]
pub mod page;
#[doc(hidden)]
pub mod recovery;
#[doc(hidden)]
pub mod shared;
#[doc(hidden)]
pub mod space;
pub mod status;
#[doc(hidden)]
pub mod txn;
#[doc(hidden)]
pub mod types;
#[doc(hidden)]
pub mod wal;

pub use backup::BackupReport;
pub use check::{CheckReport, Problem, TableReport};
pub use counter::{MetricInfo, MetricKind};
pub use db::{check_dir, require_database, Database, Table, DATA_FILE};
pub use error::{Error, Result};
pub use mvcc::Isolation;
pub use options::{FlushPolicy, Options};
pub use status::{metric_infos, Status};
pub use txn::snapshot::Snapshot;
pub use txn::transaction::{Durability, KeyRange, Scan, Transaction};
