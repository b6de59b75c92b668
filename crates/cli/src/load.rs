//! load: `evenkeel load DIR --table T`, rows from stdin into a table, committed in batches.
//!
//! Opens (or creates) the database and the table, reads `key<TAB>value` lines (see
//! [`crate::escape`]) through one large buffer reused for every line, puts each row into the
//! current transaction and commits every `--batch` lines and once more for the remainder.
//! A bad line stops the load with its line number; batches committed before it stay.
//! The database is closed cleanly on success and on failure.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::escape::decode_row;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::{Database, Table};
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::PathBuf;
use std::time::Instant;

/// Read buffer for stdin; large enough that a read call carries thousands of lines.
const READ_BUFFER_BYTES: usize = 1 << 20;

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Database directory; created, with its database, when missing
    pub dir: PathBuf,

    /// Table to load into; created when missing, existing keys are replaced
    #[arg(long, short)]
    pub table: String,

    /// Lines per transaction (1..=1000000); the remainder is committed at the end
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch: u32,

    #[command(flatten)]
    pub config: ConfigArgs,
}

/// What a load did, for the summary line.
struct Tally {
    lines: u64,
    commits: u64,
}

pub fn run(args: &LoadArgs) -> CmdResult {
    let opts = args.config.options_for(&args.dir)?;
    let dir = args.dir.display();
    std::fs::create_dir_all(&args.dir).map_err(|e| Failure::op(format!("creating {dir}"), e))?;
    let _lock = dirlock::lock(&args.dir)?;
    let db = Database::open_or_create(&args.dir, opts)
        .map_err(|e| Failure::engine(format!("opening {dir}"), e))?;
    let table = db
        .create_table_if_missing(&args.table)
        .map_err(|e| Failure::op(format!("opening table `{}` in {dir}", args.table), e))?;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("evenkeel load: reading key<TAB>value lines from the terminal; end with Ctrl-D");
    }
    let started = Instant::now();
    let mut tally = Tally {
        lines: 0,
        commits: 0,
    };
    let result = load_lines(&db, &table, stdin.lock(), args.batch, &mut tally);
    let close = db.close();
    let seconds = started.elapsed().as_secs_f64();
    let rate = tally.lines as f64 / seconds.max(1e-9);
    match (result, close) {
        (Ok(()), Ok(())) => {
            eprintln!(
                "loaded {} lines into `{}` in {} commits, {seconds:.2} s, {rate:.0} rows/s",
                tally.lines, args.table, tally.commits
            );
            Ok(())
        }
        (Err(e), _) => Err(Failure::Operation(format!(
            "{e}\n({} lines in {} commits were loaded before the failure)",
            tally.lines, tally.commits
        ))),
        (Ok(()), Err(e)) => Err(Failure::op(format!("closing {dir}"), e)),
    }
}

/// Reads every line of `input` into `table`, committing every `batch` lines.
/// `tally` counts only committed lines.
fn load_lines(
    db: &Database,
    table: &Table,
    input: impl Read,
    batch: u32,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, input);
    let (mut line, mut key, mut value) = (Vec::new(), Vec::new(), Vec::new());
    let mut txn = db.begin();
    let mut pending = 0u64;
    let mut line_no = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading stdin after line {line_no}: {e}"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        decode_row(&line, &mut key, &mut value).map_err(|e| format!("line {line_no}: {e}"))?;
        txn.put(table, &key, &value)
            .map_err(|e| format!("line {line_no}: {e}"))?;
        pending += 1;
        if pending == u64::from(batch) {
            txn.commit()
                .map_err(|e| format!("committing lines up to {line_no}: {e}"))?;
            tally.lines += pending;
            tally.commits += 1;
            pending = 0;
            txn = db.begin();
        }
    }
    if pending > 0 {
        txn.commit()
            .map_err(|e| format!("committing lines up to {line_no}: {e}"))?;
        tally.lines += pending;
        tally.commits += 1;
    }
    Ok(())
}
