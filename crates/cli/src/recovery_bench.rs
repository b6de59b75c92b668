//! recovery_bench: `evenkeel recovery-bench`, how long crash recovery takes and how much memory
//! it needs, per redo log size.
//!
//! For each `--log-size` it creates a database with that much redo log (two files of half the
//! size), starts a child (this binary as the hidden `recovery-bench-child --fill`) that writes
//! random puts until the checkpoint age reaches `--fill` of the log's capacity, SIGKILLs it, and
//! starts a second child (`recovery-bench-child --recover`) that opens the database (crash
//! recovery) and closes it, reporting the recovery report and its own peak resident set size
//! (VmHWM in /proc/self/status: the kernel's ru_maxrss of that process). The parent prints, per
//! log size, the redo replayed, the recovery's time (the open, and its scan, redo and re-apply
//! parts), the redo MB/s and the peak RSS against the budget (pool + log buffer +
//! recovery_memory).
//!
//! Filling uses the `fixed` flush policy (InnoDB 5.1's: no flushing below
//! max_dirty_pages_pct) over a table smaller than the pool, so the checkpoint stays put and
//! the age reaches the log's capacity; the recovery runs with the options as given (--set).
//! Linux only (VmHWM).

use crate::config::ConfigArgs;
use crate::failure::{CmdResult, Failure};
use clap::Args;
use evenkeel::{Database, Options};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Args, Debug)]
pub struct RecoveryBenchArgs {
    /// Redo log sizes to measure (capacity of the log, split over two files), comma-separated
    #[arg(long, value_delimiter = ',', default_value = "64M,1G,4G", value_parser = parse_size)]
    pub log_size: Vec<u64>,

    /// Share of the log's capacity the checkpoint age reaches before the kill
    #[arg(long, default_value_t = 0.8)]
    pub fill: f64,

    /// Bytes of each value written
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,

    /// Bytes of table the writes go to (keys are spread over it): keep it under the pool
    #[arg(long, default_value = "48M", value_parser = parse_size)]
    pub table_size: u64,

    /// Directory for the databases (DIR/log-<size>); must be empty or missing [default: a
    /// temporary directory, removed at the end]
    #[arg(long)]
    pub dir: Option<PathBuf>,

    /// Also write the figures as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    #[command(flatten)]
    pub config: ConfigArgs,
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n >= 1 << 20)
        .ok_or_else(|| format!("{s:?}: expected a size of at least 1M, like 64M or 4G"))
}

/// The hidden child: fills a database, or recovers one.
#[derive(Args, Debug)]
pub struct RecoveryBenchChildArgs {
    #[arg(long)]
    pub db: PathBuf,
    /// Write until the checkpoint age reaches this many bytes, print READY, wait to be killed
    #[arg(long)]
    pub fill: Option<u64>,
    /// Open (crash recovery) and close, print the figures as one JSON line
    #[arg(long)]
    pub recover: bool,
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    #[arg(long, default_value_t = 48 << 20)]
    pub table_size: u64,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// One log size's figures.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Figures {
    log_size: u64,
    redo_bytes: u64,
    open_s: f64,
    scan_s: f64,
    redo_s: f64,
    reapply_s: f64,
    redo_mb_per_s: f64,
    peak_rss_bytes: u64,
    budget_bytes: u64,
    batches: u64,
    batch_peak_bytes: u64,
    records_applied: u64,
    pending_commits_peak: u64,
}

/// What the recovering child prints.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ChildFigures {
    recovery: serde_json::Value,
    peak_rss_bytes: u64,
}

const TABLE: &str = "bench";
const READY: &str = "READY";

pub fn run(args: &RecoveryBenchArgs) -> CmdResult {
    if !(0.05..=0.95).contains(&args.fill) {
        return Err(Failure::Usage(format!(
            "--fill {}: expected 0.05..=0.95 (the checkpoint age's share of the log's capacity \
             at the kill; the async flush point is at 0.88 by default)",
            args.fill
        )));
    }
    if args.value_size == 0 || args.value_size > 4096 {
        return Err(Failure::Usage(format!(
            "--value-size {}: expected 1..=4096",
            args.value_size
        )));
    }
    let opts = args.config.options()?;
    let (root, _temp) = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| Failure::op(format!("creating {}", d.display()), e))?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("evenkeel-recovery-bench-")
                .tempdir_in(std::env::var_os("TMPDIR").unwrap_or_else(|| "/var/tmp".into()))
                .map_err(|e| Failure::op("creating a temporary directory", e))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    println!(
        "recovery-bench: pool {} MiB, log buffer {} MiB, recovery_memory {} MiB, dir {}",
        opts.buffer_pool_size >> 20,
        opts.log_buffer_size >> 20,
        opts.recovery_memory >> 20,
        root.display()
    );
    println!(
        "{:>9} {:>12} {:>9} {:>8} {:>8} {:>9} {:>10} {:>11} {:>11} {:>8}",
        "log",
        "redo bytes",
        "open s",
        "scan s",
        "redo s",
        "reapply s",
        "redo MB/s",
        "peak RSS MB",
        "budget MB",
        "batches"
    );
    let mut all = Vec::new();
    for &size in &args.log_size {
        let db = root.join(format!("log-{}M", size >> 20));
        if db.exists() {
            return Err(Failure::Usage(format!(
                "{} exists: recovery-bench needs a directory without earlier runs",
                db.display()
            )));
        }
        let f = measure(args, &opts, &db, size)?;
        println!(
            "{:>8}M {:>12} {:>9.2} {:>8.2} {:>8.2} {:>9.2} {:>10.1} {:>11.1} {:>11.1} {:>8}",
            size >> 20,
            f.redo_bytes,
            f.open_s,
            f.scan_s,
            f.redo_s,
            f.reapply_s,
            f.redo_mb_per_s,
            f.peak_rss_bytes as f64 / 1e6,
            f.budget_bytes as f64 / 1e6,
            f.batches
        );
        all.push(f);
        // the next size needs the disk space
        if args.dir.is_none() {
            let _ = std::fs::remove_dir_all(&db);
        }
    }
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&all)
            .map_err(|e| Failure::op("encoding the report as JSON", e))?;
        std::fs::write(path, json + "\n")
            .map_err(|e| Failure::op(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

fn child(args: &RecoveryBenchArgs, db: &Path) -> Result<Command, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::op("finding this program", e))?;
    let mut c = Command::new(exe);
    c.arg("recovery-bench-child")
        .arg("--db")
        .arg(db)
        .arg("--value-size")
        .arg(args.value_size.to_string())
        .arg("--table-size")
        .arg(args.table_size.to_string());
    if let Some(p) = &args.config.config {
        c.arg("--config").arg(p);
    }
    for s in &args.config.set {
        c.arg("--set").arg(s);
    }
    Ok(c)
}

fn measure(
    args: &RecoveryBenchArgs,
    opts: &Options,
    db: &Path,
    size: u64,
) -> Result<Figures, Failure> {
    let file_size = size / 2;
    let target = (size as f64 * args.fill) as u64;
    // fill: a log of `size`, the fixed policy, then kill -9
    let mut fill = child(args, db)?;
    fill.arg("--set")
        .arg(format!("log_file_size={file_size}"))
        .arg("--set")
        .arg("log_files_in_group=2")
        .arg("--fill")
        .arg(target.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut proc = fill
        .spawn()
        .map_err(|e| Failure::op("starting the filling child", e))?;
    let out = proc
        .stdout
        .take()
        .ok_or_else(|| Failure::Operation("the filling child has no stdout".into()))?;
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| Failure::op("reading the filling child", e))?;
    if !line.starts_with(READY) {
        let _ = proc.kill();
        let _ = proc.wait();
        return Err(Failure::Operation(format!(
            "the filling child stopped before the checkpoint age reached {target} bytes"
        )));
    }
    // SIGKILL: std's kill sends it on Unix
    proc.kill()
        .map_err(|e| Failure::op("killing the filling child", e))?;
    let _ = proc.wait();
    // recover in a fresh process, measured alone
    let output = child(args, db)?
        .arg("--recover")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure::op("running the recovering child", e))?;
    if !output.status.success() {
        return Err(Failure::Operation(format!(
            "the recovering child failed ({})",
            output.status
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let c: ChildFigures = serde_json::from_str(text.trim()).map_err(|e| {
        Failure::op(
            format!("reading the recovering child's figures {text:?}"),
            e,
        )
    })?;
    let r = &c.recovery;
    let num = |k: &str| r.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    let redo_bytes = (num("end_lsn") - num("checkpoint_lsn")).max(0.0) as u64;
    let open_s = num("seconds");
    Ok(Figures {
        log_size: size,
        redo_bytes,
        open_s,
        scan_s: num("scan_seconds"),
        redo_s: num("redo_seconds"),
        reapply_s: num("reapply_seconds"),
        redo_mb_per_s: redo_bytes as f64 / 1e6 / open_s.max(1e-9),
        peak_rss_bytes: c.peak_rss_bytes,
        budget_bytes: opts.buffer_pool_size + opts.log_buffer_size + opts.recovery_memory,
        batches: num("redo_batches") as u64,
        batch_peak_bytes: num("redo_batch_peak_bytes") as u64,
        records_applied: num("page_records_applied") as u64,
        pending_commits_peak: num("pending_commits_peak") as u64,
    })
}

/// Peak resident set size of this process (VmHWM), bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

pub fn run_child(args: &RecoveryBenchChildArgs) -> CmdResult {
    let opts = args.config.options_for(&args.db)?;
    if args.recover {
        let db = Database::open(&args.db, opts)
            .map_err(|e| Failure::engine(format!("recovering {}", args.db.display()), e))?;
        let recovery = serde_json::to_value(db.status().recovery)
            .map_err(|e| Failure::op("encoding the recovery report", e))?;
        db.close()
            .map_err(|e| Failure::engine("closing after recovery", e))?;
        let figures = ChildFigures {
            recovery,
            peak_rss_bytes: peak_rss(),
        };
        let line =
            serde_json::to_string(&figures).map_err(|e| Failure::op("encoding the figures", e))?;
        println!("{line}");
        return Ok(());
    }
    let Some(target) = args.fill else {
        return Err(Failure::Usage(
            "recovery-bench-child: --fill or --recover".into(),
        ));
    };
    let mut opts = opts;
    opts.adaptive_flushing = evenkeel::FlushPolicy::Fixed;
    opts.flush_log_at_trx_commit = 2;
    let db = Database::create(&args.db, opts)
        .map_err(|e| Failure::engine(format!("creating {}", args.db.display()), e))?;
    let table = db
        .create_table(TABLE)
        .map_err(|e| Failure::engine("creating the table", e))?;
    let keys = (args.table_size / (args.value_size as u64 + 16)).max(1);
    let value = vec![0x5au8; args.value_size];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut n = 0u64;
    loop {
        let mut txn = db.begin();
        for _ in 0..16 {
            let k: u64 = rng.gen_range(0..keys);
            let mut v = value.clone();
            let m = 8.min(v.len());
            v[..m].copy_from_slice(&n.to_le_bytes()[..m]);
            txn.put(&table, &k.to_be_bytes(), &v)
                .map_err(|e| Failure::engine("writing", e))?;
            n += 1;
        }
        txn.commit().map_err(|e| Failure::engine("committing", e))?;
        if n.is_multiple_of(4096) && db.status().checkpoint_age_bytes >= target {
            break;
        }
    }
    // flush_log_at_trx_commit = 2: every commit is in the OS already, which a kill keeps
    println!("{READY} {n}");
    loop {
        std::thread::park();
    }
}
