//! The one error type of the engine.
//!
//! Operating errors carry context (file, page, limit) so the message alone tells a user what
//! went wrong and what the valid range is; bugs panic instead of becoming errors.

use crate::types::{Lsn, TableId, TxnId};
use std::path::PathBuf;
use std::time::Duration;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Each variant displays as a sentence that names the thing and the limit or the way on;
/// `Debug` prints the variant's name and that sentence, so `fn main() -> Result<(), Error>`
/// shows the sentence too.
#[derive(thiserror::Error)]
pub enum Error {
    #[error("{op} of {file} failed: {source}")]
    Io {
        file: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A data page that could not be read (the I/O failed; nothing of it is served).
    #[error("read of page {page} of {file} failed: {source}")]
    PageRead {
        file: String,
        page: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupted page {page} in {file}: {reason}")]
    CorruptPage {
        file: String,
        page: u32,
        reason: String,
    },
    #[error("{path}: {reason}")]
    BadDatabase { path: PathBuf, reason: String },
    #[error("unknown option `{name}`{hint}; known options: {known}")]
    UnknownOption {
        name: String,
        /// " (did you mean `x`?)" when a known name is close, else empty.
        hint: String,
        known: String,
    },
    #[error("option `{name}` = `{value}` is invalid: {expected}")]
    InvalidOption {
        name: String,
        value: String,
        expected: String,
    },
    #[error("invalid configuration in {origin}: {reason}")]
    InvalidConfig { origin: String, reason: String },
    #[error(
        "lock wait timeout: txn {txn} waited {waited:?} for a lock on table {table}, over the \
         limit of {limit:?}; roll the transaction back and retry it"
    )]
    LockWaitTimeout {
        txn: TxnId,
        table: TableId,
        waited: Duration,
        limit: Duration,
    },
    #[error(
        "deadlock: {} (each waits for a lock held or requested earlier by the next); txn \
         {victim}, whose request would close the cycle, was refused: roll it back and retry",
        cycle_text(.cycle)
    )]
    Deadlock { victim: TxnId, cycle: Vec<TxnId> },
    #[error(
        "lock table memory exhausted: {used} bytes in use + {requested} requested is over the \
         limit of {limit} bytes; commit in smaller transactions or raise the limit"
    )]
    LockMemoryExhausted {
        used: usize,
        requested: usize,
        limit: usize,
    },
    #[error("key of {len} bytes is over the limit of {max} bytes for page_size {page_size}")]
    KeyTooLarge {
        len: usize,
        max: usize,
        page_size: usize,
    },
    #[error("value of {len} bytes is over the limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("table `{0}` does not exist")]
    TableNotFound(String),
    #[error("table `{0}` already exists")]
    TableExists(String),
    #[error("invalid table name `{name}`: {reason}")]
    InvalidTableName { name: String, reason: String },
    #[error("the database file is full: {0}")]
    SpaceExhausted(String),
    #[error("the engine refuses writes after an earlier failure: {0}")]
    Poisoned(String),
    #[error(
        "redo log full: appending {needed_bytes} bytes at LSN {current_lsn} would overwrite log \
         space not yet released by the checkpoint at LSN {checkpoint_lsn} (capacity \
         {capacity_bytes} bytes); flush dirty pages and write a checkpoint first"
    )]
    LogFull {
        needed_bytes: u64,
        current_lsn: Lsn,
        checkpoint_lsn: Lsn,
        capacity_bytes: u64,
    },
    #[error(
        "redo log group of {len} bytes is over the limit of {max} bytes (set by log_buffer_size)"
    )]
    LogGroupTooLarge { len: usize, max: usize },
    #[error("the redo log is closed")]
    LogClosed,
    #[error(
        "txn {txn} was rolled back by an earlier error ({cause}); every later call on it fails \
         and it cannot commit: drop it and run the transaction again"
    )]
    TransactionAborted { txn: TxnId, cause: String },
    #[error(
        "table `{table}` belongs to the database at {table_db}, not to the one at {txn_db} this \
         transaction runs on; open the table from the transaction's database"
    )]
    ForeignTable {
        table: String,
        table_db: String,
        txn_db: String,
    },
    #[error(
        "table `{0}` was dropped: this handle no longer refers to a table (open it again by \
         name if it was re-created)"
    )]
    TableDropped(String),
    #[error(
        "the read view was {age_s:.1} s old and the old row versions kept for read views \
         reached {history_bytes} bytes, over max_history_size ({limit} bytes): the oldest views \
         were expired so writers could go on. Run the read again in a new transaction or \
         snapshot; keep read views shorter, or raise max_history_size"
    )]
    SnapshotTooOld {
        age_s: f64,
        history_bytes: u64,
        limit: u64,
    },
    #[error(
        "txn {txn} (isolation snapshot) would change `{key}` of table `{table}`, which another \
         transaction changed after this one's read view was taken (first committer wins); \
         the transaction was rolled back: run it again"
    )]
    SerializationFailure {
        txn: TxnId,
        table: String,
        key: String,
    },
    #[error("the database at {0} is closed")]
    DatabaseClosed(String),
    #[error(
        "table `{table}` is an index table (a set of keys, created with create_index_table): a \
         put's value must be empty, this one has {len} bytes"
    )]
    IndexValueNotEmpty { table: String, len: usize },
    #[error("the database at {location} is open read-only: {what} is refused")]
    ReadOnly {
        location: String,
        what: &'static str,
    },
    #[error(
        "{path}: the database was not shut down cleanly, and opening it read-only cannot run \
         crash recovery (recovery writes to the database). Run `evenkeel recover {dir}` (or \
         open it read-write) first, or `evenkeel check --salvage --out OUT {dir}` to export \
         what is readable without changing it"
    )]
    NeedsRecovery { path: PathBuf, dir: String },
    #[error(
        "transaction too large: {what} of {bytes} bytes is over the limit of {limit} bytes ({why})"
    )]
    TransactionTooLarge {
        what: &'static str,
        bytes: u64,
        limit: u64,
        why: &'static str,
    },
    #[error("recovery failed at LSN {lsn}: {reason}")]
    Recovery { lsn: u64, reason: String },
    /// An online backup that did not complete (`Database::backup_to`): what went wrong and the
    /// limit; the source database is not affected and the target holds no partial copy.
    #[error("backup to {target} failed: {reason}")]
    Backup { target: String, reason: String },
    /// An online redo log resize (`log_capacity`) that did not happen: why, and the limit. The
    /// log keeps its old size and nothing committed is affected.
    #[error("redo log resize to log_capacity = {requested} refused: {reason}")]
    LogResize { requested: u64, reason: String },
}

impl Error {
    /// The variant's name, as `Debug` prints it.
    fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "Io",
            Error::PageRead { .. } => "PageRead",
            Error::CorruptPage { .. } => "CorruptPage",
            Error::BadDatabase { .. } => "BadDatabase",
            Error::UnknownOption { .. } => "UnknownOption",
            Error::InvalidOption { .. } => "InvalidOption",
            Error::InvalidConfig { .. } => "InvalidConfig",
            Error::LockWaitTimeout { .. } => "LockWaitTimeout",
            Error::Deadlock { .. } => "Deadlock",
            Error::LockMemoryExhausted { .. } => "LockMemoryExhausted",
            Error::KeyTooLarge { .. } => "KeyTooLarge",
            Error::ValueTooLarge { .. } => "ValueTooLarge",
            Error::TableNotFound(..) => "TableNotFound",
            Error::TableExists(..) => "TableExists",
            Error::InvalidTableName { .. } => "InvalidTableName",
            Error::SpaceExhausted(..) => "SpaceExhausted",
            Error::Poisoned(..) => "Poisoned",
            Error::LogFull { .. } => "LogFull",
            Error::LogGroupTooLarge { .. } => "LogGroupTooLarge",
            Error::LogClosed => "LogClosed",
            Error::TransactionAborted { .. } => "TransactionAborted",
            Error::ForeignTable { .. } => "ForeignTable",
            Error::TableDropped(..) => "TableDropped",
            Error::SnapshotTooOld { .. } => "SnapshotTooOld",
            Error::SerializationFailure { .. } => "SerializationFailure",
            Error::DatabaseClosed(..) => "DatabaseClosed",
            Error::IndexValueNotEmpty { .. } => "IndexValueNotEmpty",
            Error::ReadOnly { .. } => "ReadOnly",
            Error::NeedsRecovery { .. } => "NeedsRecovery",
            Error::TransactionTooLarge { .. } => "TransactionTooLarge",
            Error::Recovery { .. } => "Recovery",
            Error::Backup { .. } => "Backup",
            Error::LogResize { .. } => "LogResize",
        }
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {self}", self.kind())
    }
}

impl Error {
    /// Whether retrying the whole transaction may succeed: a lock conflict (deadlock, lock wait
    /// timeout), an expired read view, a snapshot write conflict.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Deadlock { .. }
                | Error::LockWaitTimeout { .. }
                | Error::SnapshotTooOld { .. }
                | Error::SerializationFailure { .. }
        )
    }
}

impl Error {
    pub fn io(file: impl Into<String>, op: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            file: file.into(),
            op,
            source,
        }
    }
    pub fn corrupt(file: impl Into<String>, page: u32, reason: impl Into<String>) -> Self {
        Error::CorruptPage {
            file: file.into(),
            page,
            reason: reason.into(),
        }
    }
}

/// "txn 3 -> txn 7 -> txn 3": the cycle closed back on its first member.
fn cycle_text(cycle: &[TxnId]) -> String {
    let mut text: Vec<String> = cycle.iter().map(|t| format!("txn {t}")).collect();
    if let Some(first) = cycle.first() {
        text.push(format!("txn {first}"));
    }
    text.join(" -> ")
}

/// The engine's one fail-stop state (invariant 5): the first failure whose outcome is
/// uncertain (a failed write or fsync of the data, log or doublewrite file, an apply that
/// failed after its COMMIT was logged). Shared by the log, the doublewrite area, the buffer pool
/// and the flush layer of one open database; set once, never cleared, checked before every
/// write. The text names the file and the OS error, and every later refusal carries it.
#[derive(Debug, Default)]
pub struct Health {
    failed: std::sync::atomic::AtomicBool,
    first: parking_lot::Mutex<Option<String>>,
}

impl Health {
    pub fn new() -> std::sync::Arc<Health> {
        std::sync::Arc::new(Health::default())
    }

    /// Records `why` when it is the first failure; returns whether it was.
    pub fn fail(&self, why: &str) -> bool {
        let mut first = self.first.lock();
        if first.is_some() {
            return false;
        }
        *first = Some(why.to_string());
        self.failed
            .store(true, std::sync::atomic::Ordering::Release);
        true
    }

    /// The first failure, once there is one.
    pub fn first_failure(&self) -> Option<String> {
        if !self.failed.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.first.lock().clone()
    }

    /// Refuses once a failure was recorded, with [`Error::Poisoned`] carrying it.
    pub fn check(&self) -> Result<()> {
        match self.first_failure() {
            Some(why) => Err(Error::Poisoned(why)),
            None => Ok(()),
        }
    }
}
