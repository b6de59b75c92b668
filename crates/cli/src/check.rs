//! check: `evenkeel check DIR`, verifies a database without opening it for writing.
//!
//! Runs the engine's `check_dir` (every page checksum, every B+tree invariant, the free list,
//! no leaked or shared pages) and prints a row per table: rows, depth, leaf / internal /
//! overflow pages and the mean leaf fill, then the free-page count. Each problem is printed
//! with its file, page number and the rule it breaks, and the command exits 3. A directory
//! without a database is an operational error (exit 1); a data file whose header page cannot
//! even be read as one is damage (exit 3), since that is what `check` is for.

use crate::dirlock;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::check::CheckReport;
use evenkeel::Error;
use std::path::PathBuf;

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

    /// Engine options file (TOML), used to open the database for --tpcc
    #[arg(long, value_name = "FILE", requires = "tpcc")]
    pub config: Option<PathBuf>,

    /// Engine option NAME=VALUE for --tpcc, after --config; repeatable
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "tpcc")]
    pub set: Vec<String>,
}

pub fn run(args: &CheckArgs) -> CmdResult {
    let lock = dirlock::lock(&args.dir)?;
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
        println!("{text}");
    } else {
        print!("{}", render(&report));
    }
    if report.is_ok() {
        drop(lock);
        if args.tpcc {
            crate::bench::check_tpcc(&args.dir, args.config.clone(), args.set.clone())?;
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
