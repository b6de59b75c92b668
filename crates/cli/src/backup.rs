//! backup: `evenkeel backup SRC DEST`, an online backup of the database in SRC into DEST (new
//! or empty), prepared: DEST opens cleanly, with no recovery, and holds one commit-consistent
//! state of SRC. The engine's `Database::backup_to` does the work (the data file copied while
//! the redo log is followed, then recovered to one point; see its documentation).
//!
//! A program embedding the engine calls `Database::backup_to` on its open database while it
//! keeps writing; this command opens SRC itself, read-only (so a database that needs crash
//! recovery is refused with the command that runs it, and SRC is not written to), for a
//! database no process has open for writing. A DEST that is not empty, or runs out of space,
//! fails with the engine's error naming the limit, and DEST is left without any file of the
//! backup.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::failure::{print_stdout, CmdResult, Failure};
use clap::Args;
use evenkeel::Database;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// Database directory to back up (holding evenkeel.data)
    pub src: PathBuf,

    /// Directory for the copy: created if missing, refused unless empty
    pub dest: PathBuf,

    /// Print the backup's report as JSON instead of a summary line
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &BackupArgs) -> CmdResult {
    let opts = args.config.options_for(&args.src)?;
    let src = args.src.display();
    let _lock = dirlock::lock_existing(&args.src)?;
    let db = Database::open_read_only(&args.src, opts)
        .map_err(|e| Failure::engine(format!("opening {src}"), e))?;
    let result = db.backup_to(&args.dest);
    let close = db.close();
    let r = result.map_err(|e| Failure::op(format!("backing up {src}"), e))?;
    close.map_err(|e| Failure::op(format!("closing {src}"), e))?;
    if args.json {
        let text = serde_json::to_string_pretty(&r).map_err(|e| Failure::op("JSON", e))?;
        return print_stdout(&format!("{text}\n"));
    }
    print_stdout(&format!(
        "backed up {src} to {}: {} bytes of data file and {} bytes of redo copied in {:.2} s, \
         prepared in {:.2} s ({} transactions re-applied); the copy holds every commit before \
         LSN {} and takes {} bytes\n",
        args.dest.display(),
        r.data_bytes,
        r.redo_bytes,
        r.copy_seconds,
        r.prepare_seconds,
        r.transactions_reapplied,
        r.end_lsn,
        r.size_bytes
    ))
}
