//! workload: what every workload's child side runs on: its context ([`ChildCtx`]), retried
//! transactions ([`transact`]) and its threads ([`run_threads`]). Below `child` (which starts
//! a workload) and the workloads (`insert`, `kv`, `tpcc`), so neither imports the other.

use super::acklog::AckLog;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::{Driver, DriverResult, DriverTxn};

/// Attempts of one transaction (deadlocks, lock-wait timeouts) before the child gives up.
const MAX_ATTEMPTS: u32 = 100;

/// What every workload's child side gets.
pub struct ChildCtx<'a> {
    pub driver: &'a EvenkeelDriver,
    pub ack: &'a AckLog,
    pub seed: u64,
    pub cycle: u64,
    pub threads: usize,
    pub(super) ppid: u32,
}

impl ChildCtx<'_> {
    /// Exits the process when the parent is gone (the child is re-parented).
    pub fn exit_if_orphaned(&self) {
        if std::os::unix::process::parent_id() != self.ppid {
            std::process::exit(0);
        }
    }

    /// Writes one ack-file line; a failed write ends the workload (nothing may be counted as
    /// acknowledged that the file does not hold).
    pub fn ack(&self, line: &str) -> Result<(), String> {
        self.ack
            .line(line)
            .map_err(|e| format!("writing the ack file: {e}"))
    }
}

/// Runs `body` in a transaction until it commits, retrying deadlocks and lock-wait timeouts.
/// `body` returns `Some` to commit and `None` to roll back; the result is what it returned.
pub fn transact<T>(
    d: &dyn Driver,
    body: &mut dyn FnMut(&mut dyn DriverTxn) -> DriverResult<Option<T>>,
) -> Result<Option<T>, String> {
    let mut last = String::new();
    for _ in 0..MAX_ATTEMPTS {
        let mut txn = d.begin().map_err(|e| e.to_string())?;
        let r = match body(txn.as_mut()) {
            Ok(Some(v)) => txn.commit().map(|()| Some(v)),
            Ok(None) => {
                txn.rollback();
                Ok(None)
            }
            Err(e) => {
                txn.rollback();
                Err(e)
            }
        };
        match r {
            Ok(v) => return Ok(v),
            Err(e) if e.is_retryable() => last = e.to_string(),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "a transaction failed {MAX_ATTEMPTS} times in a row: {last}"
    ))
}

/// Runs `work(i)` on `n` threads and returns the first error (the others run on until the
/// process is killed, which is what the parent does next).
pub fn run_threads(
    n: usize,
    work: &(dyn Fn(usize) -> Result<(), String> + Sync),
) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for i in 0..n {
            let tx = tx.clone();
            s.spawn(move || {
                let _ = tx.send(work(i));
            });
        }
        drop(tx);
        // The first error ends the child at once: the parent must not keep killing a workload
        // that has already failed.
        for r in rx.iter() {
            if let Err(e) = r {
                eprintln!("evenkeel: error: torture child: {e}");
                std::process::exit(1);
            }
        }
        Ok(())
    })
}
