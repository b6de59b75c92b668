//! dump: `evenkeel dump DIR --table T`, a table to stdout in key order, in the line format
//! `load` reads, so `dump | load` rebuilds the same rows and a second dump is byte-identical.
//!
//! The database is opened read-only: a dump writes nothing to it, and one that needs crash
//! recovery is refused with the command that runs it. The rows are read from one snapshot
//! (`Database::snapshot`). Output goes through one large buffer. A closed pipe (`| head`) ends the dump quietly with
//! exit 0: the reader asked for no more, which is not a failure of the dump.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::escape::encode_row;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::Database;
use std::io::{ErrorKind, Write};
use std::path::PathBuf;

/// Bytes of encoded rows gathered before one write to stdout.
const WRITE_BUFFER_BYTES: usize = 1 << 18;

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Database directory
    pub dir: PathBuf,

    /// Table to print
    #[arg(long, short)]
    pub table: String,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &DumpArgs) -> CmdResult {
    let opts = args.config.options_for(&args.dir)?;
    let dir = args.dir.display();
    let _lock = dirlock::lock_existing(&args.dir)?;
    let db = Database::open_read_only(&args.dir, opts)
        .map_err(|e| Failure::engine(format!("opening {dir}"), e))?;
    let result = dump_table(&db, &args.table);
    let close = db.close();
    result?;
    close.map_err(|e| Failure::op(format!("closing {dir}"), e))
}

fn dump_table(db: &Database, name: &str) -> CmdResult {
    let table = db.table(name)?;
    // one snapshot: on an open database with writers (an embedding program's) it would be a
    // consistent copy too
    let snap = db.snapshot();
    let rows = snap.range(&table, ..)?;
    let mut stdout = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(WRITE_BUFFER_BYTES + 4096);
    let mut write = |buf: &mut Vec<u8>| -> Result<bool, Failure> {
        match stdout.write_all(buf) {
            Ok(()) => {
                buf.clear();
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(Failure::op("writing stdout", e)),
        }
    };
    for row in rows {
        let (key, value) = row.map_err(|e| Failure::op(format!("reading table `{name}`"), e))?;
        encode_row(&mut buf, &key, &value);
        if buf.len() >= WRITE_BUFFER_BYTES && !write(&mut buf)? {
            return Ok(());
        }
    }
    if !write(&mut buf)? {
        return Ok(());
    }
    match stdout.flush() {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(Failure::op("writing stdout", e)),
        _ => Ok(()),
    }
}
