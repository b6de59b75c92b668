//! child: `evenkeel torture-child`, the process `evenkeel torture` starts and kills.
//!
//! It opens (or creates) the database with the options the parent passes, writes the ready
//! line to the ack file once the workload's tables are open, and runs the workload's threads
//! until it is killed. It never shuts down on its own: a fatal engine error, or a transaction
//! that keeps failing, ends it with exit code 1 and the reason on stderr, which the parent
//! reports as a failure. If the parent goes away (its pid changes) the child exits, so a killed
//! torture run leaves no workload behind.

use super::acklog::{AckLog, READY};
use super::workload::ChildCtx;
use super::{insert, kv, tpcc, WorkloadKind};
use crate::config::ConfigArgs;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::Database;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use std::path::PathBuf;

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
    /// Log sizes to cycle through with online resizes (bytes)
    #[arg(long, value_delimiter = ',')]
    pub resize_log: Vec<u64>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &ChildArgs) -> CmdResult {
    let opts = args.config.options_for(&args.db)?;
    let db = Database::open_or_create(&args.db, opts)
        .map_err(|e| Failure::engine(format!("opening {}", args.db.display()), e))?;
    if !args.resize_log.is_empty() {
        spawn_resizer(db.clone(), args.resize_log.clone(), args.seed);
    }
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

/// Resizes the log at once and then every 200 ms, cycling through `sizes` from a place the seed picks, until the
/// process is killed. A resize the engine refuses (the checkpoint age does not fit yet) is
/// tried again at the next turn; any other error ends the resizing, and the workload's own
/// transactions report what failed.
fn spawn_resizer(db: Database, sizes: Vec<u64>, seed: u64) {
    std::thread::spawn(move || {
        for i in (seed as usize).. {
            if i != seed as usize {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            let size = sizes[i % sizes.len()];
            match db.resize_log(size) {
                Ok(out) => eprintln!(
                    "resized the redo log to {size} bytes (capacity {} -> {}, {} bytes copied, \
                     writers held {} us)",
                    out.old_capacity, out.new_capacity, out.copied_bytes, out.stall_us
                ),
                Err(evenkeel::Error::LogResize { reason, .. }) => {
                    eprintln!("resize to {size} refused: {reason}")
                }
                Err(e) => {
                    eprintln!("resizing stops: {e}");
                    return;
                }
            }
        }
    });
}
