//! check: `evenkeel check DIR`, verifies a database without opening it for writing.
//!
//! Runs the engine's `check_dir` (every page checksum, every B+tree invariant, the free list,
//! no leaked or shared pages) and prints a row per table: rows, depth, leaf / internal /
//! overflow pages and the mean leaf fill, then the free-page count. Each problem is printed
//! with its file, page number and the rule it breaks, and the command exits 3. A directory
//! without a database is an operational error (exit 1); a data file whose header page cannot
//! even be read as one is damage (exit 3), since that is what `check` is for.
//!
//! `check` writes nothing to a database. One that was not shut down cleanly (its process was
//! killed) is refused with the way on: before redo its data file is a fuzzy image (pages
//! written back at different moments, maybe a torn page whose good copy is in the doublewrite
//! area) that would fail the B+tree rules without being damaged, and recovery writes. `evenkeel
//! recover DIR` or `check --recover` runs recovery first (with the `--config`/`--set` options,
//! saying so on stderr); `--no-recover` checks the file as it lies.
//!
//! `--salvage --out DIR` is the way out for a damaged database: see `salvage.rs`.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::failure::{print_stdout, CmdResult, Failure};
use clap::Args;
use evenkeel::check::CheckReport;
use evenkeel::{Database, Error};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Database directory (holding evenkeel.data)
    pub dir: PathBuf,

    /// Print the full report as JSON (page size, counts, tables, problems)
    #[arg(long)]
    pub json: bool,

    /// Then run TPC-C consistency conditions 1-10 and 12 (11 on fresh data) on a database
    /// loaded by `evenkeel bench tpcc`, and prove every acknowledged New-Order is present
    #[arg(long)]
    pub tpcc: bool,

    /// The engine that holds the directory: evenkeel, or a peer the workbench loaded
    /// (innodb, rocksdb, sqlite, lmdb in a build with --features peers); a peer's directory is
    /// only checked with --tpcc, through its driver
    #[arg(long, default_value = "evenkeel")]
    pub engine: String,

    /// Check the data file as it lies even when the database was not shut down cleanly (its
    /// fuzzy image may break B+tree rules without being damaged)
    #[arg(long, conflicts_with = "recover")]
    pub no_recover: bool,

    /// When the database was not shut down cleanly, run crash recovery first (as `evenkeel
    /// recover` does; it writes to the database), then check
    #[arg(long)]
    pub recover: bool,

    /// The way out for a damaged database (also when a normal open refuses): export every
    /// readable row, one dump file per table in the load format, into --out DIR, skipping
    /// pages that fail verification; prints rows exported and pages skipped (exit 3 if any)
    #[arg(long, requires = "out", conflicts_with_all = ["json", "tpcc"])]
    pub salvage: bool,

    /// Directory for the --salvage dump files (created if missing)
    #[arg(long, requires = "salvage", value_name = "DIR")]
    pub out: Option<PathBuf>,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &CheckArgs) -> CmdResult {
    if args.engine != "evenkeel" {
        if !args.tpcc || args.salvage || args.json || args.no_recover || args.recover {
            return Err(Failure::Usage(format!(
                "check --engine {}: a peer engine's directory is checked with --tpcc only \
                 (no --json, --salvage, --recover or --no-recover: those read evenkeel's own \
                 files)",
                args.engine
            )));
        }
        return crate::bench::check_tpcc(
            &args.dir,
            &args.engine,
            args.config.config.clone(),
            args.config.set.clone(),
        );
    }
    let lock = dirlock::lock_existing(&args.dir)?;
    if let (true, Some(out)) = (args.salvage, &args.out) {
        evenkeel::require_database(&args.dir).map_err(Failure::from)?;
        if needs_recovery(&args.dir) {
            if args.recover {
                // when the damage makes recovery refuse, salvage the file as it lies
                if let Err(e) = recover(&args.dir, &args.config, "the salvage") {
                    eprintln!(
                        "evenkeel check --salvage: crash recovery refused ({e}); salvaging the \
                         data file as it lies: changes only in the redo log are missing"
                    );
                }
            } else {
                eprintln!(
                    "evenkeel check --salvage: {} was not shut down cleanly; salvaging the data \
                     file as it lies (nothing is written to the database): changes only in the \
                     redo log are missing. Add --recover to run crash recovery first.",
                    args.dir.display()
                );
            }
        }
        return crate::salvage::run(&args.dir, out);
    }
    if needs_recovery(&args.dir) {
        if args.recover {
            recover(&args.dir, &args.config, "the check")?;
        } else if !args.no_recover {
            return Err(Failure::Operation(format!(
                "{dir} was not shut down cleanly (its process was killed or crashed): until \
                 crash recovery runs, its data file is a fuzzy image that may break B+tree \
                 rules without being damaged. `check` writes nothing to a database, so it does \
                 not recover it: run `evenkeel recover {dir}` first (or `evenkeel check \
                 --recover {dir}`), check the file as it lies with `--no-recover`, or export \
                 what is readable with `--salvage --out OUT`",
                dir = args.dir.display()
            )));
        }
    }
    let report = match evenkeel::check_dir(&args.dir) {
        Ok(r) => r,
        Err(e @ Error::CorruptPage { .. }) => {
            return Err(Failure::Damaged(format!(
                "check of {}: {e}",
                args.dir.display()
            )))
        }
        Err(e) => {
            return Err(Failure::engine(
                format!("check of {}", args.dir.display()),
                e,
            ))
        }
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::op("encoding the report as JSON", e))?;
        print_stdout(&format!("{text}\n"))?;
    } else {
        print_stdout(&render(&report))?;
    }
    if report.is_ok() {
        drop(lock);
        if args.tpcc {
            crate::bench::check_tpcc(
                &args.dir,
                "evenkeel",
                args.config.config.clone(),
                args.config.set.clone(),
            )?;
        }
        Ok(())
    } else {
        Err(Failure::Damaged(format!(
            "check of {}: {} problem{} found{}",
            args.dir.display(),
            report.problems.len(),
            if report.problems.len() == 1 { "" } else { "s" },
            if args.json {
                " (listed in the JSON report)"
            } else {
                ""
            }
        )))
    }
}

/// Whether `dir` holds a database whose header page reads as one and says its last run did
/// not end in a clean shutdown. A header that cannot be read is left to the check to report.
pub(crate) fn needs_recovery(dir: &Path) -> bool {
    let read = || -> Option<bool> {
        let mut f = std::fs::File::open(dir.join(evenkeel::db::DATA_FILE)).ok()?;
        let mut first = vec![0u8; evenkeel::page::MIN_PAGE_SIZE];
        f.read_exact(&mut first).ok()?;
        let page_size = evenkeel::space::probe_page_size(&first).ok()?;
        let mut header = vec![0u8; page_size];
        f.seek(SeekFrom::Start(0)).ok()?;
        f.read_exact(&mut header).ok()?;
        evenkeel::page::verify(&header, evenkeel::space::HEADER_PAGE).ok()?;
        Some(!evenkeel::space::Header::decode(&header).clean)
    };
    read().unwrap_or(false)
}

/// Runs crash recovery by opening and closing the database, and reports what it did on
/// stderr (`before`: what runs after it, for the messages).
pub(crate) fn recover(dir: &Path, config: &ConfigArgs, before: &str) -> CmdResult {
    let shown = dir.display();
    let opts = config.options_for(dir)?;
    let damaged = |e: Error| match e {
        e @ (Error::CorruptPage { .. } | Error::BadDatabase { .. }) => {
            Failure::Damaged(format!("crash recovery of {shown} before {before}: {e}"))
        }
        e => Failure::engine(format!("crash recovery of {shown} before {before}"), e),
    };
    let db = Database::open(dir, opts).map_err(damaged)?;
    let r = db.status().recovery;
    db.close().map_err(damaged)?;
    eprintln!(
        "evenkeel: {shown} was not shut down cleanly; crash recovery ran: {} redo bytes \
         scanned, {} page records applied, {} pages repaired from doublewrite, {} transactions \
         re-applied, {:.3} s",
        r.redo_bytes_scanned,
        r.page_records_applied,
        r.pages_repaired_from_doublewrite,
        r.transactions_reapplied,
        r.seconds
    );
    Ok(())
}

/// The human-readable report: a summary line, a table of tables, then problems.
pub fn render(r: &CheckReport) -> String {
    let mut out = String::new();
    let file_bytes = u64::from(r.page_count) * r.page_size as u64;
    out.push_str(&format!(
        "page size {} bytes, {} pages ({file_bytes} bytes), {} free pages\n",
        r.page_size, r.page_count, r.free_pages
    ));
    let name_width = r
        .tables
        .iter()
        .map(|t| t.name.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    out.push_str(&format!(
        "{:<name_width$} {:>12} {:>5} {:>10} {:>10} {:>10} {:>9}\n",
        "table", "rows", "depth", "leaf", "internal", "overflow", "leaf fill"
    ));
    for t in &r.tables {
        out.push_str(&format!(
            "{:<name_width$} {:>12} {:>5} {:>10} {:>10} {:>10} {:>8.1}%\n",
            t.name,
            t.rows,
            t.depth,
            t.leaf_pages,
            t.internal_pages,
            t.overflow_pages,
            100.0 * t.leaf_fill
        ));
    }
    for p in &r.problems {
        out.push_str(&format!("problem: {p}\n"));
    }
    if r.is_ok() {
        out.push_str(&format!("ok: {} pages, no problems\n", r.page_count));
    }
    out
}
