//! status: `evenkeel status DIR`, sizes and counters of a database, grouped like the sections
//! of InnoDB's SHOW ENGINE INNODB STATUS so a MySQL reader finds things where they expect.
//!
//! The counters are those of the process running this command: it opens the database, reads
//! the header, and reports; the engine keeps no counters across opens. Sizes (file, pages,
//! free list, tables) describe the database itself. `--json` prints the engine's `Status`.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::{Database, Status};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Database directory
    pub dir: PathBuf,

    /// Print the engine's Status as JSON instead of the sectioned report
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &StatusArgs) -> CmdResult {
    let opts = args.config.options_for(&args.dir)?;
    let dir = args.dir.display();
    let _lock = dirlock::lock(&args.dir)?;
    let db = Database::open(&args.dir, opts)
        .map_err(|e| Failure::engine(format!("opening {dir}"), e))?;
    let tables = db.tables().map_err(|e| Failure::op("listing tables", e))?;
    let status = db.status();
    db.close()
        .map_err(|e| Failure::op(format!("closing {dir}"), e))?;
    if args.json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| Failure::op("encoding the status as JSON", e))?;
        println!("{text}");
    } else {
        print!("{}", render(&status, &tables));
    }
    Ok(())
}

fn section(out: &mut String, title: &str) {
    let rule = "-".repeat(title.len());
    let _ = write!(out, "{rule}\n{title}\n{rule}\n");
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The sectioned text report.
pub fn render(s: &Status, tables: &[String]) -> String {
    let b = &s.buffer;
    let mut o = String::new();
    let banner = "=".repeat(60);
    let _ = writeln!(o, "{banner}\nevenkeel status of {}\n{banner}", s.location);
    let _ = writeln!(o, "(counters count since this command opened the database)");
    section(&mut o, "BUFFER POOL AND MEMORY");
    let _ = writeln!(
        o,
        "Buffer pool size   {} bytes, {} frames of {} bytes, {} instance(s)",
        s.buffer_pool_size, b.frames, s.page_size, s.buffer_pool_instances
    );
    let _ = writeln!(o, "Database pages     {}", b.pages_data);
    let _ = writeln!(o, "Free buffers       {}", b.pages_free);
    let _ = writeln!(o, "Modified db pages  {}", b.pages_dirty);
    let _ = writeln!(
        o,
        "Dirty pages        {:.2}% (100 * dirty / (1 + data + free))",
        s.dirty_pct
    );
    let _ = writeln!(
        o,
        "Page requests      {}, hits {} ({:.2}%)",
        b.page_requests,
        b.hits,
        pct(b.hits, b.page_requests)
    );
    let _ = writeln!(
        o,
        "Pages read {}, created {}, written {}",
        b.pages_read, b.pages_created, b.pages_written
    );
    let _ = writeln!(
        o,
        "Evictions {}, dirty pages written by eviction {}",
        b.evictions, b.eviction_writes
    );
    let _ = writeln!(
        o,
        "Pages made young {}, not young {}",
        b.made_young, b.made_not_young
    );
    let _ = writeln!(
        o,
        "Free frame waits {}, {} us waited",
        b.free_frame_waits, b.free_frame_wait_us
    );
    section(&mut o, "FILE");
    let _ = writeln!(
        o,
        "Page size {} bytes, per-page overhead {} bytes ({:.2}%)",
        s.page_size,
        s.page_overhead_bytes,
        pct(s.page_overhead_bytes as u64, s.page_size as u64)
    );
    let _ = writeln!(
        o,
        "Pages {}, free-list pages {}, file {} bytes",
        s.file_pages, s.free_list_pages, s.file_bytes
    );
    let io = &s.io;
    let _ = writeln!(
        o,
        "I/O: {} reads ({} bytes), {} writes ({} bytes), {} syncs",
        io.reads, io.read_bytes, io.writes, io.write_bytes, io.syncs
    );
    section(&mut o, "LOG");
    let _ = writeln!(o, "Log sequence number {} (no redo log yet)", s.lsn);
    section(&mut o, "TABLES");
    let names = if tables.is_empty() {
        "(none)".to_string()
    } else {
        tables.join(", ")
    };
    let _ = writeln!(o, "Tables {}: {names}", s.tables);
    section(&mut o, "ROW OPERATIONS");
    let _ = writeln!(
        o,
        "Commits {}, rollbacks {}; rows written {}, rows deleted {}",
        s.commits, s.rollbacks, s.rows_written, s.rows_deleted
    );
    let _ = writeln!(
        o,
        "Page splits {}, pages freed {}, root collapses {}",
        s.page_splits, s.pages_freed, s.root_collapses
    );
    let _ = writeln!(o, "{banner}\nEND OF STATUS\n{banner}");
    o
}
