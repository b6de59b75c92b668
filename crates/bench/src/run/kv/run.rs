//! The engine side of `bench kv`: open (or create) the database, load or reuse the table,
//! run every (workload, threads) point between two flushes, and assemble the report with the
//! memory figure. This file and `worker` are the ones that call evenkeel's API (`engine_err`
//! in mod.rs converts its errors for both).

use std::path::{Path, PathBuf};
use std::time::Instant;

use evenkeel::{Database, Options, Table};

use super::report::{render, AdaptiveHashRow, KvReport, KvRow, Memory};
use super::worker::{load, run_threads, run_worker, sample_every, Shared, WorkerOut};
use super::{check_loaded, engine_err, KvOptions, Workload, META_ROWS_KEY, META_TABLE, TABLE};
use crate::error::{BenchError, BenchResult};
use crate::report::now_unix_s;
use crate::report::summary::{config_hash, Summary};
use crate::run::config_map;
use crate::run::console::Console;
use crate::run::RunOutput;
use crate::sampler::proc::parse_status_rss;

/// Where the temporary data directory goes without `--dir`.
const TEMP_PARENT: &str = "/var/tmp";

fn engine_options(o: &KvOptions) -> BenchResult<Options> {
    let mut opts = match &o.config {
        Some(p) => {
            Options::from_toml_file(p).map_err(|e| BenchError::Usage(format!("--config: {e}")))?
        }
        None => Options::default(),
    };
    opts.apply_pairs(&o.set)
        .map_err(|e| BenchError::Usage(format!("--set: {e}")))?;
    Ok(opts)
}

/// `(VmRSS, VmHWM)` of this process in bytes (0 when /proc is unreadable).
fn rss_now() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = text
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024);
    (parse_status_rss(&text).unwrap_or(0), hwm)
}

/// Run the benchmark and return its report (printed unless `quiet`/`json` say otherwise).
pub fn run_kv(o: &KvOptions) -> BenchResult<KvReport> {
    o.validate()?;
    let mut con = Console::new(o.quiet, o.json);
    let temp = match &o.dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("evenkeel-kv-")
                .tempdir_in(TEMP_PARENT)
                .map_err(|e| BenchError::io(format!("create a directory in {TEMP_PARENT}"), e))?,
        ),
    };
    let dir: &Path = match (&o.dir, &temp) {
        (Some(d), _) => d,
        (None, Some(t)) => t.path(),
        (None, None) => unreachable!(),
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
    let report = if o.engine == "evenkeel" {
        let db = Database::open_or_create(dir, engine_options(o)?).map_err(engine_err)?;
        let result = run_on(&db, o, &mut con);
        let closed = db.close().map_err(engine_err);
        let report = result?;
        closed?;
        report
    } else {
        super::on_driver::run_on_driver(o, dir, &mut con)?
    };
    drop(temp);
    con.json(&serde_json::to_string_pretty(&report).map_err(|e| BenchError::Data(e.to_string()))?);
    con.result(&render(&report));
    Ok(report)
}

/// `bench kv` as `run_bench` dispatches it. kv writes no results directory: its report is
/// the printed table (or JSON); the summary carries totals and the memory figure.
pub fn run_kv_bench(o: &KvOptions) -> BenchResult<RunOutput> {
    let started = now_unix_s();
    let report = run_kv(o)?;
    let workload = [
        ("rows", o.rows.to_string()),
        ("seconds", o.seconds.to_string()),
        ("batch", o.batch.to_string()),
        ("scan_len", o.scan_len.to_string()),
    ];
    let config = config_map(&workload, report.config.clone(), &o.spec());
    let summary = Summary {
        workload: "kv".into(),
        engine: o.engine.clone(),
        config_hash: config_hash("kv", &o.engine, &config),
        config,
        started_unix_s: started,
        duration_s: report.rows.iter().map(|r| r.seconds).sum(),
        op: "kv operation".into(),
        ops: report.rows.iter().map(|r| r.ops).sum(),
        rss_bytes: report.memory.rss_bytes,
        size_bytes: Some(report.data_file_bytes),
        ..Summary::default()
    };
    Ok(RunOutput {
        summary,
        rows: Vec::new(),
        out_dir: PathBuf::new(),
    })
}

/// Open or load the table, then run every point.
fn run_on(db: &Database, o: &KvOptions, con: &mut Console) -> BenchResult<KvReport> {
    let (table, load_row) = prepare_table(db, o, con)?;
    let sh = Shared {
        db,
        table: &table,
        rows: o.rows,
        scan_len: o.scan_len,
        batch: o.batch,
        seed: o.seed,
    };
    let loaded = load_row.is_some();
    let mut rows: Vec<KvRow> = load_row.into_iter().collect();
    for &w in &o.workloads {
        for &t in &o.threads {
            let row = run_point(&sh, w, t, o.seconds)?;
            con.line(&format!(
                "{} x{}: {:.0} ops/s, p50 {:.2} us, p99 {:.2} us",
                row.workload, t, row.ops_per_s, row.latency_us_p50, row.latency_us_p99
            ));
            rows.push(row);
        }
    }
    let status = db.status();
    let rss_max = rows.iter().map(|r| r.rss_bytes).max().unwrap_or(0);
    let (_, hwm) = rss_now();
    Ok(KvReport {
        engine: "evenkeel".into(),
        rows_in_table: o.rows,
        data_file_bytes: status.file_bytes,
        page_size: status.page_size,
        scan_len: o.scan_len,
        put_batch: o.batch,
        loaded,
        rows,
        memory: Memory::new(rss_max, hwm, status.buffer_pool_size),
        config: db
            .options()
            .describe()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    })
}

/// The loaded table: reused when the directory holds it with `o.rows` rows, else created and
/// loaded (then the load's row is returned too).
fn prepare_table(
    db: &Database,
    o: &KvOptions,
    con: &mut Console,
) -> BenchResult<(Table, Option<KvRow>)> {
    let names = db.tables().map_err(engine_err)?;
    if names.iter().any(|n| n == TABLE) {
        let meta = db.table(META_TABLE).map_err(engine_err)?;
        let txn = db.begin();
        let have = txn
            .get(&meta, META_ROWS_KEY)
            .map_err(engine_err)?
            .and_then(|v| v.try_into().ok().map(u64::from_be_bytes));
        txn.commit().map_err(engine_err)?;
        let n = check_loaded(have, o.rows)?;
        con.line(&format!("reusing the kv table of {n} rows"));
        return Ok((db.table(TABLE).map_err(engine_err)?, None));
    }
    let table = db.create_table(TABLE).map_err(engine_err)?;
    let meta = db.create_table_if_missing(META_TABLE).map_err(engine_err)?;
    con.line(&format!(
        "loading {} rows, {} per commit",
        o.rows,
        super::worker::LOAD_COMMIT_ROWS
    ));
    let before = flushed_status(db)?;
    let t0 = Instant::now();
    let hist = load(db, &table, o.rows, con)?;
    let seconds = t0.elapsed().as_secs_f64();
    let f0 = Instant::now();
    let after = flushed_status(db)?;
    let flush_seconds = f0.elapsed().as_secs_f64();
    let mut txn = db.begin();
    txn.put(&meta, META_ROWS_KEY, &o.rows.to_be_bytes())
        .map_err(engine_err)?;
    txn.commit().map_err(engine_err)?;
    let out = WorkerOut {
        ops: o.rows,
        rows: o.rows,
        retries: 0,
        latency_ns: hist,
    };
    let row = make_row("load", 1, seconds, flush_seconds, &out, &before, &after);
    con.line(&format!(
        "loaded {} rows in {seconds:.1} s ({:.0} rows/s) + flush {flush_seconds:.1} s",
        o.rows, row.ops_per_s
    ));
    Ok((table, Some(row)))
}

/// Write every dirty page back, then sample the status.
fn flushed_status(db: &Database) -> BenchResult<evenkeel::Status> {
    db.flush().map_err(engine_err)?;
    Ok(db.status())
}

/// One workload at one thread count.
fn run_point(sh: &Shared<'_>, w: Workload, threads: usize, seconds: f64) -> BenchResult<KvRow> {
    let before = flushed_status(sh.db)?;
    let start = Instant::now();
    let deadline = start + std::time::Duration::from_secs_f64(seconds);
    let total = run_threads(threads, |t| run_worker(sh, w, t, deadline))?;
    let elapsed = start.elapsed().as_secs_f64();
    let f0 = Instant::now();
    let after = flushed_status(sh.db)?;
    let flush_seconds = match w {
        Workload::Put => f0.elapsed().as_secs_f64(),
        _ => 0.0,
    };
    let (a0, a1) = (&before.adaptive_hash, &after.adaptive_hash);
    let adaptive_hash =
        (matches!(w, Workload::Get) && after.adaptive_hash_entries_max > 0).then(|| {
            AdaptiveHashRow {
                hits: a1.hits.saturating_sub(a0.hits),
                misses: a1.misses.saturating_sub(a0.misses),
                failed_guesses: a1.failed_guesses.saturating_sub(a0.failed_guesses),
            }
        });
    Ok(KvRow {
        latency_sample_every: sample_every(w),
        adaptive_hash,
        ..make_row(
            w.name(),
            threads,
            elapsed,
            flush_seconds,
            &total,
            &before,
            &after,
        )
    })
}

fn make_row(
    workload: &str,
    threads: usize,
    seconds: f64,
    flush_seconds: f64,
    out: &WorkerOut,
    before: &evenkeel::Status,
    after: &evenkeel::Status,
) -> KvRow {
    let ops = out.ops.max(1) as f64;
    let per_op = |a: u64, b: u64| a.saturating_sub(b) as f64 / ops;
    KvRow {
        write_bytes_per_op: per_op(after.io.write_bytes, before.io.write_bytes),
        pages_written_per_op: per_op(after.buffer.pages_written, before.buffer.pages_written),
        pages_read_per_op: per_op(after.buffer.pages_read, before.buffer.pages_read),
        flush_seconds,
        rss_bytes: rss_now().0,
        ..KvRow::timed(
            workload,
            threads,
            seconds,
            out.ops,
            out.rows,
            &out.latency_ns,
        )
    }
}
