//! Errors of the workbench. Driver errors carry their class (retryable or fatal) so workloads
//! can retry deadlocks and lock-wait timeouts and count them; everything the command line can
//! get wrong is a `BenchError::Usage` whose message names the argument and the valid values.
//! Nothing here panics; bugs in workload logic panic where they are found.

use std::fmt;

/// How a driver classifies a failed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Deadlock or lock-wait timeout: the transaction was rolled back and may be run again.
    Retryable,
    /// Anything else: corruption, I/O failure, a bug. The run stops.
    Fatal,
}

/// An error reported by a driver (the engine adapter).
#[derive(Debug, Clone)]
pub struct DriverError {
    pub class: ErrorClass,
    pub message: String,
}

impl DriverError {
    pub fn retryable(message: impl Into<String>) -> Self {
        DriverError {
            class: ErrorClass::Retryable,
            message: message.into(),
        }
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        DriverError {
            class: ErrorClass::Fatal,
            message: message.into(),
        }
    }
    pub fn is_retryable(&self) -> bool {
        self.class == ErrorClass::Retryable
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.class {
            ErrorClass::Retryable => "retryable",
            ErrorClass::Fatal => "fatal",
        };
        write!(f, "{} ({class})", self.message)
    }
}

impl std::error::Error for DriverError {}

/// Result type of driver operations.
pub type DriverResult<T> = std::result::Result<T, DriverError>;

/// An error of a benchmark run, a sweep or a check.
#[derive(Debug)]
pub enum BenchError {
    /// Bad command-line input: the message says which argument and what is accepted.
    Usage(String),
    /// The engine failed.
    Driver(DriverError),
    /// Reading or writing results, /proc, or the database directory failed.
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Stored data could not be decoded (a workload row, a metadata file).
    Data(String),
    /// A TPC-C consistency condition failed (the message names condition and location).
    Inconsistent(String),
}

impl BenchError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Usage(m) => write!(f, "usage: {m}"),
            BenchError::Driver(e) => write!(f, "engine error: {e}"),
            BenchError::Io { what, source } => write!(f, "{what}: {source}"),
            BenchError::Data(m) => write!(f, "bad data: {m}"),
            BenchError::Inconsistent(m) => write!(f, "consistency check failed: {m}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Driver(e) => Some(e),
            BenchError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<DriverError> for BenchError {
    fn from(e: DriverError) -> Self {
        BenchError::Driver(e)
    }
}

/// Result type of runs, sweeps and checks.
pub type BenchResult<T> = std::result::Result<T, BenchError>;
