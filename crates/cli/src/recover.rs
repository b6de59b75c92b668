//! recover: `evenkeel recover DIR`, runs crash recovery on a database that was not shut down
//! cleanly, and says what it did.
//!
//! The read-only commands (`dump`, `status`, `check`) never write to a database, so they
//! refuse one that needs recovery and point here. Recovery opens the database read-write
//! (restoring torn pages from the doublewrite area, redoing the log from the checkpoint,
//! re-applying committed transactions whose apply was cut) and closes it cleanly, with the
//! `--config`/`--set` options. A cleanly shut down database is left untouched.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// Database directory (holding evenkeel.data)
    pub dir: PathBuf,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &RecoverArgs) -> CmdResult {
    let _lock = dirlock::lock_existing(&args.dir)?;
    evenkeel::require_database(&args.dir).map_err(Failure::from)?;
    if !crate::check::needs_recovery(&args.dir) {
        eprintln!(
            "evenkeel recover: {} was shut down cleanly; nothing to recover",
            args.dir.display()
        );
        return Ok(());
    }
    crate::check::recover(&args.dir, &args.config, "returning")
}
