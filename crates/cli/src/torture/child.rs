//! child: `evenkeel torture-child`, the process `evenkeel torture` starts and kills.
//!
//! It opens (or creates) the database with the options the parent passes, writes the ready
//! line to the ack file once the workload's tables are open, and runs the workload's threads
//! until it is killed. It never shuts down on its own: a fatal engine error, or a transaction
//! that keeps failing, ends it with exit code 1 and the reason on stderr, which the parent
//! reports as a failure. If the parent goes away (its pid changes) the child exits, so a killed
//! torture run leaves no workload behind.

use super::acklog::{AckLog, READY};
use super::{insert, kv, tpcc, WorkloadKind};
use crate::config::ConfigArgs;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::Database;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::{Driver, DriverResult, DriverTxn};
use std::path::PathBuf;

/// Attempts of one transaction (deadlocks, lock-wait timeouts) before the child gives up.
const MAX_ATTEMPTS: u32 = 100;

#[derive(Args, Debug)]
pub struct ChildArgs {
    #[arg(long, value_enum)]
    pub workload: WorkloadKind,
    /// Database directory
    #[arg(long)]
    pub db: PathBuf,
    #[arg(long)]
    pub ack_file: PathBuf,
    #[arg(long)]
    pub seed: u64,
    #[arg(long)]
    pub cycle: u64,
    #[arg(long)]
    pub threads: usize,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// What every workload's child side gets.
pub struct ChildCtx<'a> {
    pub driver: &'a EvenkeelDriver,
    pub ack: &'a AckLog,
    pub seed: u64,
    pub cycle: u64,
    pub threads: usize,
    ppid: u32,
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

pub fn run(args: &ChildArgs) -> CmdResult {
    let opts = args.config.options_for(&args.db)?;
    let db = Database::open_or_create(&args.db, opts)
        .map_err(|e| Failure::engine(format!("opening {}", args.db.display()), e))?;
    let driver = EvenkeelDriver::from_database(db);
    let ack = AckLog::create(&args.ack_file)
        .map_err(|e| Failure::op(format!("creating {}", args.ack_file.display()), e))?;
    let ctx = ChildCtx {
        driver: &driver,
        ack: &ack,
        seed: args.seed,
        cycle: args.cycle,
        threads: args.threads.max(1),
        ppid: std::os::unix::process::parent_id(),
    };
    let ready = || ctx.ack(READY);
    let result = match args.workload {
        WorkloadKind::Kv => kv::child(&ctx, &ready),
        WorkloadKind::Insert => insert::child(&ctx, &ready),
        WorkloadKind::Tpcc => tpcc::child(&ctx, &ready),
    };
    result.map_err(|e| Failure::Operation(format!("torture child ({:?}): {e}", args.workload)))
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
