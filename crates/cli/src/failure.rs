//! failure: how a command fails, and the exit code each kind of failure gives.
//!
//! Exit codes are part of the interface and stay fixed: 0 success, 1 an operational failure
//! (I/O, a missing database or table, bad input data), 2 a usage or configuration error
//! (clap's own usage errors also exit 2), 3 `check` found problems in the database.

use std::fmt;

#[derive(Debug)]
pub enum Failure {
    /// Bad flags or configuration: nothing was attempted.
    Usage(String),
    /// The command was attempted and failed.
    Operation(String),
    /// `check` ran and found the database damaged.
    Damaged(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Operation(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Damaged(_) => 3,
        }
    }

    /// An operational failure with `context` (what was being done) before the cause.
    pub fn op(context: impl fmt::Display, cause: impl fmt::Display) -> Failure {
        Failure::Operation(format!("{context}: {cause}"))
    }

    /// As [`Failure::op`] for engine errors, without the context when the engine's message
    /// already starts with the path (a missing or unreadable database).
    pub fn engine(context: impl fmt::Display, cause: evenkeel::Error) -> Failure {
        match cause {
            evenkeel::Error::BadDatabase { .. } | evenkeel::Error::NeedsRecovery { .. } => {
                Failure::Operation(cause.to_string())
            }
            other => Failure::op(context, other),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(m) | Failure::Operation(m) | Failure::Damaged(m) => f.write_str(m),
        }
    }
}

impl From<evenkeel::Error> for Failure {
    fn from(e: evenkeel::Error) -> Failure {
        Failure::Operation(e.to_string())
    }
}

pub type CmdResult = Result<(), Failure>;

/// Writes `text` to stdout. A closed pipe (`| head`) ends the output quietly: the reader asked
/// for no more, which is not a failure of the command.
pub fn print_stdout(text: &str) -> CmdResult {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::op("writing stdout", e))
        }
        _ => Ok(()),
    }
}
