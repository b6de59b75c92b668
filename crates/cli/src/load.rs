//! load: `evenkeel load DIR --table T`, rows from stdin into a table, committed in batches.
//!
//! Opens (or creates) the database and the table, reads `key<TAB>value` lines (see
//! [`crate::escape`]) through one large buffer reused for every line, puts each row into the
//! current transaction and commits every `--batch` lines and once more for the remainder.
//! A bad line stops the load with its line number; batches committed before it stay.
//! The database is closed cleanly on success and on failure.
//!
//! With `--ack-file F`, after each `commit()` returns Ok the count of lines committed so far
//! is appended to F and F is fsynced before the next line is read: every count in F is a
//! promise that those lines survive a crash (as durable as `flush_log_at_trx_commit` makes a
//! commit), which is what the kill -9 tests check.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::escape::decode_row;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::{Database, Table};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
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

    /// After each commit returns, append the number of lines committed so far (one decimal
    /// number per line) to FILE and fsync it, so a crash test can check that every
    /// acknowledged line survived; FILE is created when missing
    #[arg(long, value_name = "FILE")]
    pub ack_file: Option<PathBuf>,

    /// Input has Windows line ends (CRLF): strip one carriage return before each line feed.
    /// Without it a line ending in a raw carriage return is refused, naming the line
    #[arg(long)]
    pub crlf: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

/// What a load did, for the summary line.
struct Tally {
    lines: u64,
    commits: u64,
}

/// The `--ack-file`: one line per commit, each fsynced before the load goes on.
struct AckFile {
    path: PathBuf,
    file: File,
}

impl AckFile {
    fn open(path: &Path) -> Result<AckFile, Failure> {
        let err =
            |e: std::io::Error| Failure::op(format!("opening --ack-file {}", path.display()), e);
        let existed = path.exists();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        if !existed {
            // IMPORTANT: a new file's name is durable only once its directory is synced.
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            File::open(parent).and_then(|d| d.sync_all()).map_err(err)?;
        }
        Ok(AckFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Records that `lines` lines are committed.
    fn ack(&mut self, lines: u64) -> Result<(), String> {
        // IMPORTANT: the count is a durability promise only once it is on disk itself.
        writeln!(self.file, "{lines}")
            .and_then(|()| self.file.sync_data())
            .map_err(|e| format!("writing --ack-file {}: {e}", self.path.display()))
    }
}

pub fn run(args: &LoadArgs) -> CmdResult {
    let opts = args.config.options_for(&args.dir)?;
    let dir = args.dir.display();
    std::fs::create_dir_all(&args.dir).map_err(|e| Failure::op(format!("creating {dir}"), e))?;
    let _lock = dirlock::lock(&args.dir)?;
    let mut ack = args.ack_file.as_deref().map(AckFile::open).transpose()?;
    let db = Database::open_or_create(&args.dir, opts)
        .map_err(|e| Failure::engine(format!("opening {dir}"), e))?;
    // The redo log bounds a transaction: a batch it cannot hold fails now, not after a
    // batch of lines has been read (rows of one byte of key and no value need the least).
    let (max_rows, option) = db.max_writes_per_transaction(1, 0);
    if u64::from(args.batch) > max_rows {
        let log = db.status().log_capacity_bytes;
        let _ = db.close();
        return Err(Failure::Usage(format!(
            "--batch {} is more rows than one transaction can hold with this database's redo \
             log ({log} bytes of capacity): at most {max_rows} rows of the smallest size, \
             fewer for larger rows. Lower --batch, or raise {option} (a log's size is fixed \
             when the database is created)",
            args.batch
        )));
    }
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
    let input = stdin.lock();
    let result = load_lines(
        &db, &table, input, args.batch, args.crlf, &mut ack, &mut tally,
    );
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

/// Reads every line of `input` into `table`, committing every `batch` lines; with `crlf` one
/// carriage return before each line end is dropped, without it such a line is refused.
/// `tally` counts only committed lines; each commit is acknowledged in `ack` when given.
fn load_lines(
    db: &Database,
    table: &Table,
    input: impl Read,
    batch: u32,
    crlf: bool,
    ack: &mut Option<AckFile>,
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
        if line.last() == Some(&b'\r') {
            if !crlf {
                return Err(format!(
                    "line {line_no} ends with a carriage return (\\r): the input has Windows \
                     (CRLF) line ends; run load with --crlf to drop it, or write a carriage \
                     return that belongs to the value as \\x0d"
                ));
            }
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
            if let Some(a) = ack {
                a.ack(tally.lines)?;
            }
            txn = db.begin();
        }
    }
    if pending > 0 {
        txn.commit()
            .map_err(|e| format!("committing lines up to {line_no}: {e}"))?;
        tally.lines += pending;
        tally.commits += 1;
        if let Some(a) = ack {
            a.ack(tally.lines)?;
        }
    }
    Ok(())
}
