//! status: `evenkeel status DIR`, sizes and counters of a database, grouped like the sections
//! of InnoDB's SHOW ENGINE INNODB STATUS so a MySQL reader finds things where they expect.
//!
//! The counters are those of the process running this command: it opens the database
//! read-only (nothing is written to it; a database that needs crash recovery is refused with
//! the command that runs it), reads the header, and reports; the engine keeps no counters
//! across opens. Sizes (file, pages,
//! free list, tables) and the LSNs describe the database itself; RECOVERY is what this
//! command's open had to redo: nothing, since it opens only cleanly shut down databases. `--json` prints the engine's
//! whole `Status`; `--metrics` prints every metric of the engine's metrics table (name, value,
//! unit, counter or gauge, meaning), the names the workbench's extras use.

use crate::config::ConfigArgs;
use crate::dirlock;
use crate::failure::{print_stdout, CmdResult, Failure};
use clap::Args;
use evenkeel::{Database, Status};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Database directory
    pub dir: PathBuf,

    /// Print the engine's Status as JSON instead of the sectioned report
    #[arg(long, conflicts_with = "metrics")]
    pub json: bool,

    /// Print every metric of the engine's table: name, value, unit, kind and meaning
    #[arg(long)]
    pub metrics: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &StatusArgs) -> CmdResult {
    let opts = args.config.options_for(&args.dir)?;
    let dir = args.dir.display();
    let _lock = dirlock::lock_existing(&args.dir)?;
    let db = Database::open_read_only(&args.dir, opts)
        .map_err(|e| Failure::engine(format!("opening {dir}"), e))?;
    let tables = db.tables().map_err(|e| Failure::op("listing tables", e))?;
    let status = db.status();
    let doublewrite = db.options().doublewrite;
    db.close()
        .map_err(|e| Failure::op(format!("closing {dir}"), e))?;
    if args.json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| Failure::op("encoding the status as JSON", e))?;
        print_stdout(&format!("{text}\n"))
    } else if args.metrics {
        print_stdout(&render_metrics(&status))
    } else {
        print_stdout(&render(&status, &tables, doublewrite))
    }
}

/// One line per metric of `evenkeel::metric_infos`: name, value, unit, kind, meaning.
pub fn render_metrics(s: &Status) -> String {
    let metrics = s.metrics();
    let width = metrics.iter().map(|(m, _)| m.name.len()).max().unwrap_or(0);
    let mut o = String::new();
    for (m, v) in metrics {
        let value = if v == v.trunc() {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        };
        let kind = match m.kind {
            evenkeel::MetricKind::Counter => "counter",
            evenkeel::MetricKind::Gauge => "gauge",
        };
        let _ = writeln!(
            o,
            "{:width$}  {value:>16} {:<11} {kind:<7}  {}",
            m.name,
            m.unit,
            m.meaning_line()
        );
    }
    o
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
pub fn render(s: &Status, tables: &[String], doublewrite: bool) -> String {
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
        "Pages read {} (failed verification {}), created {}, written {}",
        b.pages_read, b.pages_read_corrupt, b.pages_created, b.pages_written
    );
    let _ = writeln!(
        o,
        "Evictions {}, dirty pages written by eviction {}",
        b.evictions, b.eviction_writes
    );
    let _ = writeln!(
        o,
        "Pages changed while being written {} (still dirty after the write, from a newer LSN)",
        b.pages_redirtied_in_write
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
    render_change_buffer(&mut o, s);
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
    render_log(&mut o, s);
    render_flush(&mut o, s, doublewrite);
    render_recovery(&mut o, s);
    section(&mut o, "TABLES");
    let names = if tables.is_empty() {
        "(none)".to_string()
    } else {
        tables.join(", ")
    };
    let _ = writeln!(o, "Tables {}: {names}", s.tables);
    render_transactions(&mut o, s);
    section(&mut o, "ROW OPERATIONS");
    let _ = writeln!(
        o,
        "Rows written {}, rows deleted {}",
        s.txns.rows_written, s.txns.rows_deleted
    );
    let _ = writeln!(
        o,
        "Page splits {}, pages freed {}, root collapses {}",
        s.tree.page_splits, s.tree.pages_freed, s.tree.root_collapses
    );
    let _ = writeln!(o, "{banner}\nEND OF STATUS\n{banner}");
    o
}

fn ratio(part: u64, whole: u64) -> f64 {
    part as f64 / whole.max(1) as f64
}

/// LOG: where the redo stream is, how far the checkpoint trails it, and the log writer's work.
fn render_log(o: &mut String, s: &Status) {
    let l = &s.log;
    section(o, "LOG");
    let _ = writeln!(o, "Log sequence number {}", s.lsn);
    let _ = writeln!(o, "Log flushed up to   {}", s.flushed_lsn);
    let _ = writeln!(o, "Last checkpoint at  {}", s.checkpoint_lsn);
    let _ = writeln!(
        o,
        "Checkpoint age {} bytes, {:.2}% of log capacity {} bytes",
        s.checkpoint_age_bytes, s.checkpoint_age_pct, s.log_capacity_bytes
    );
    let _ = writeln!(
        o,
        "Log groups {}, payload {} bytes, written {} bytes in {} writes, {} fsyncs",
        l.groups, l.payload_bytes, l.written_bytes, l.writes, l.fsyncs
    );
    let _ = writeln!(
        o,
        "Group commit: flushes {}, flush requests {} ({} durable), {:.2} requests per \
         flush, at most {} in one",
        l.flushes,
        l.flush_requests,
        l.durable_flush_requests,
        ratio(l.flush_requests, l.flushes),
        l.max_waiters_per_flush
    );
    let _ = writeln!(
        o,
        "Commits per log fsync {:.2} ({} commits / {} fsyncs, checkpoint writes included)",
        ratio(s.txns.commits, l.fsyncs),
        s.txns.commits,
        l.fsyncs
    );
    let _ = writeln!(
        o,
        "Padding {} bytes, partial-block rewrites {}",
        l.padding_bytes, l.partial_block_rewrites
    );
    let _ = writeln!(
        o,
        "Log buffer full waits {}, {} us waited; log-full refusals {}",
        l.buffer_full_waits, l.buffer_full_wait_us, l.log_full_refusals
    );
}

/// FLUSH / DOUBLEWRITE: who wrote pages back, and whether commits had to wait for it.
fn render_flush(o: &mut String, s: &Status, doublewrite: bool) {
    section(o, "FLUSH / DOUBLEWRITE");
    let _ = writeln!(
        o,
        "Doublewrite {}",
        if doublewrite {
            "on: page batches go to evenkeel.dblwr and are fsynced before the in-place writes"
        } else {
            "off: a torn page is detected and reported at recovery, not repaired"
        }
    );
    let _ = writeln!(
        o,
        "Pages flushed: background {}, sync point (by committing threads) {}, for log space promised to others {}, by transactions the pace held back {}",
        s.flush.pages_flushed_background,
        s.flush.pages_flushed_sync,
        s.flush.pages_flushed_log_space,
        s.flush.pages_flushed_pace
    );
    let _ = writeln!(
        o,
        "Sync-flush waits {}, {} us waited; log-space waits {}, {} us waited; log-full waits {}",
        s.flush.sync_flush_waits,
        s.flush.sync_flush_wait_us,
        s.flush.log_space_waits,
        s.flush.log_space_wait_us,
        s.log_full_waits
    );
    let _ = writeln!(
        o,
        "Commit admission delays {}, {} us (steady); of them waits for the cleaner to free log room {}, {} us",
        s.flush.admission_delays, s.flush.admission_delay_us, s.flush.room_waits, s.flush.room_wait_us
    );
    let _ = writeln!(
        o,
        "Checkpoints {} (log checkpoint slots written {})",
        s.checkpoints, s.log.checkpoints
    );
}

/// RECOVERY: what this command's open of the database had to redo.
fn render_recovery(o: &mut String, s: &Status) {
    let r = &s.recovery;
    section(o, "RECOVERY");
    if r.groups == 0 && r.pages_repaired_from_doublewrite == 0 && r.transactions_reapplied == 0 {
        let _ = writeln!(
            o,
            "Nothing to recover at open (checkpoint at {})",
            r.checkpoint_lsn
        );
    }
    let _ = writeln!(
        o,
        "Redo from checkpoint {} to {}: {} bytes scanned, {} groups",
        r.checkpoint_lsn, r.end_lsn, r.redo_bytes_scanned, r.groups
    );
    let _ = writeln!(
        o,
        "Page records applied {} ({} of them compactions), skipped (page already newer) {}",
        r.page_records_applied, r.page_compactions_replayed, r.page_records_skipped
    );
    let _ = writeln!(
        o,
        "Pages repaired from doublewrite {}{}, checkpoint slots repaired {}, corrupt \
         doublewrite slots ignored {}{}, corruptions detected {}",
        r.pages_repaired_from_doublewrite,
        if r.file_header_repaired {
            " (the file header among them)"
        } else {
            ""
        },
        r.checkpoint_slots_repaired,
        r.doublewrite_slots_corrupt,
        if r.doublewrite_header_repaired {
            ", doublewrite header rewritten"
        } else {
            ""
        },
        r.corruptions_detected
    );
    let _ = writeln!(
        o,
        "Redo batches {} (largest {} bytes), COMMITs awaiting their apply at most {}; scan \
         {:.3} s, redo {:.3} s, re-apply and checkpoint {:.3} s",
        r.redo_batches,
        r.redo_batch_peak_bytes,
        r.pending_commits_peak,
        r.scan_seconds,
        r.redo_seconds,
        r.reapply_seconds
    );
    let _ = writeln!(
        o,
        "Transactions re-applied {}, {:.3} s",
        r.transactions_reapplied, r.seconds
    );
    let rate = match s.replay_rate_bytes_per_s {
        0 => "none measured yet".to_string(),
        r => format!("{:.1} MB/s recorded from recoveries", r as f64 / 1e6),
    };
    let _ = writeln!(
        o,
        "Replay rate {rate}; a recovery now would take about {:.2} s",
        s.recovery_time_estimate_s
    );
    match &s.recovery_target {
        None => {
            let _ = writeln!(o, "Recovery time target off");
        }
        Some(t) => {
            let _ = writeln!(
                o,
                "Recovery time target {} s: checkpoint age held under {} bytes (planned at \
                 {:.1} MB/s, a share of the {:.1} MB/s {})",
                t.seconds,
                t.max_age,
                t.planned_rate as f64 / 1e6,
                t.replay_rate as f64 / 1e6,
                if t.measured { "recorded" } else { "assumed" }
            );
        }
    }
}

/// INSERT BUFFER (InnoDB's name for it): the change buffer's size and what it took and merged.
fn render_change_buffer(o: &mut String, s: &Status) {
    let c = &s.change_buffer;
    section(o, "INSERT BUFFER");
    let _ = writeln!(
        o,
        "Change buffer: {} pages of at most {}, {} changes for {} leaves",
        c.tree_pages, s.change_buffer_max_pages, c.entries, c.pages_with_changes
    );
    let _ = writeln!(
        o,
        "Buffered: inserts {}, deletes {}; changes made while it was full {}",
        c.inserts_buffered, c.deletes_buffered, c.full_skips
    );
    let _ = writeln!(
        o,
        "Merged: {} changes, leaves by a read {}, by the background {}; contract violations {}",
        c.merged, c.merges_by_read, c.merges_by_background, c.contract_violations
    );
}

/// TRANSACTIONS: outcomes and the lock table.
fn render_transactions(o: &mut String, s: &Status) {
    let k = &s.locks;
    section(o, "TRANSACTIONS");
    let _ = writeln!(
        o,
        "Commits {}, rollbacks {}, commits continued (apply outgrew its log reservation) {}, \
         applies that waited for the oldest pin's owner {}",
        s.txns.commits, s.txns.rollbacks, s.txns.commit_continuations, s.txns.apply_yields
    );
    let _ = writeln!(
        o,
        "Rows written {}, deleted {}; puts logged as the bytes that changed {}",
        s.txns.rows_written, s.txns.rows_deleted, s.txns.writes_logged_as_patches
    );
    let _ = writeln!(
        o,
        "Lock waits {} ({} us), timeouts {}, deadlocks {}",
        k.lock_waits, k.lock_wait_us, k.lock_timeouts, k.deadlocks
    );
    let _ = writeln!(
        o,
        "Lock memory {} of {} bytes",
        k.memory_used_bytes, k.memory_max_bytes
    );
}
