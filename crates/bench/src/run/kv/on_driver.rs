//! `bench kv --engine PEER`: the same table, load and timed points as evenkeel's run, through
//! the `Driver` adapter, so a peer (InnoDB, RocksDB, SQLite, LMDB) and evenkeel can be compared
//! on point gets, replacing puts and range scans. What differs from evenkeel's run, and why:
//! a driver has no "write every dirty page back" call, so a point is not bracketed by flushes
//! and a put point is not charged for the write-back it leaves behind (flush_seconds is 0);
//! bytes written per op are the processes' storage writes (client plus a peer's server, from
//! /proc), and pages read and written per op are whatever the engine's stats expose (0 where it
//! exposes none: RocksDB has no pages). A retryable error (deadlock, lock-wait timeout between
//! concurrent put batches) re-runs the unit; only completed units count.

use std::ops::Bound;
use std::path::Path;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::Rng;

use super::keys::{fill_value, key_of, VALUE_BYTES};
use super::report::{KvReport, KvRow, Memory};
use super::worker::{
    new_histogram, run_threads, sample_every, timed_units, WorkerOut, LOAD_COMMIT_ROWS,
};
use super::{check_loaded, KvOptions, Workload, META_ROWS_KEY, META_TABLE, TABLE};
use crate::driver::{Driver, DriverTxn, EngineStats, TableId};
use crate::error::{BenchError, BenchResult};
use crate::run::console::Console;
use crate::run::engine::open_driver;
use crate::sampler::proc::{dir_size, ProcCounters, ProcReader};

/// What the client threads share.
struct Shared<'a> {
    driver: &'a dyn Driver,
    table: TableId,
    rows: u64,
    scan_len: usize,
    batch: usize,
    seed: u64,
}

/// Counters read around a point.
struct Snapshot {
    proc: ProcCounters,
    stats: EngineStats,
}

fn snapshot(driver: &dyn Driver, proc: &ProcReader) -> Snapshot {
    Snapshot {
        proc: proc.process(),
        stats: driver.stats(),
    }
}

/// Run the benchmark on `o.engine` through its driver in `dir`.
pub(super) fn run_on_driver(o: &KvOptions, dir: &Path, con: &mut Console) -> BenchResult<KvReport> {
    let driver = open_driver(&o.spec(), dir)?;
    let proc = ProcReader::new(Some(dir)).with_server(driver.server_pid());
    let result = run_points(driver.as_ref(), &proc, o, dir, con);
    let closed = driver.close().map_err(BenchError::from);
    let report = result?;
    closed?;
    Ok(report)
}

fn run_points(
    driver: &dyn Driver,
    proc: &ProcReader,
    o: &KvOptions,
    dir: &Path,
    con: &mut Console,
) -> BenchResult<KvReport> {
    let (table, load_row) = prepare_table(driver, proc, o, con)?;
    let sh = Shared {
        driver,
        table,
        rows: o.rows,
        scan_len: o.scan_len,
        batch: o.batch,
        seed: o.seed,
    };
    let loaded = load_row.is_some();
    let mut rows: Vec<KvRow> = load_row.into_iter().collect();
    for &w in &o.workloads {
        for &t in &o.threads {
            let before = snapshot(driver, proc);
            let start = Instant::now();
            let deadline = start + std::time::Duration::from_secs_f64(o.seconds);
            let total = run_threads(t, |i| run_worker(&sh, w, i, deadline))?;
            let elapsed = start.elapsed().as_secs_f64();
            let after = snapshot(driver, proc);
            let row = KvRow {
                latency_sample_every: sample_every(w),
                ..make_row(w.name(), t, elapsed, &total, &before, &after)
            };
            let retried = if total.retries > 0 {
                format!(", {} units re-run after a retryable error", total.retries)
            } else {
                String::new()
            };
            con.line(&format!(
                "{} x{}: {:.0} ops/s, p50 {:.2} us, p99 {:.2} us{retried}",
                row.workload, t, row.ops_per_s, row.latency_us_p50, row.latency_us_p99
            ));
            rows.push(row);
        }
    }
    let rss_max = rows
        .iter()
        .map(|r| r.rss_bytes)
        .max()
        .unwrap_or_else(|| proc.process().rss_bytes);
    let config = driver.config();
    Ok(KvReport {
        engine: driver.name().to_string(),
        rows_in_table: o.rows,
        data_file_bytes: dir_size(dir),
        page_size: page_size_of(&config),
        scan_len: o.scan_len,
        put_batch: o.batch,
        loaded,
        rows,
        // No peak figure for a client plus a server: the highest end-of-point RSS stands in.
        memory: Memory::new(rss_max, rss_max, pool_bytes(o)),
        config,
    })
}

/// The page size the driver reports in its config (0 when it has none).
fn page_size_of(config: &[(String, String)]) -> usize {
    config
        .iter()
        .find(|(k, _)| k.ends_with("page_size") || k == "block_size")
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// buffer_pool_size as the run's --config and --set give it (evenkeel's default when neither
/// does), read with evenkeel's own option parser since every engine takes evenkeel's names:
/// the cache each peer was given from that option. The driver has already accepted or refused
/// every pair, so a pair evenkeel would refuse only leaves the figure at the default.
fn pool_bytes(o: &KvOptions) -> u64 {
    let mut opts = o
        .config
        .as_deref()
        .and_then(|p| evenkeel::Options::from_toml_file(p).ok())
        .unwrap_or_default();
    for (k, v) in o.spec().pairs().unwrap_or_default() {
        let _ = opts.set(&k, &v);
    }
    opts.buffer_pool_size
}

/// The loaded table: reused when the engine holds it with `o.rows` rows, else created and
/// loaded (then the load's row is returned too).
fn prepare_table(
    driver: &dyn Driver,
    proc: &ProcReader,
    o: &KvOptions,
    con: &mut Console,
) -> BenchResult<(TableId, Option<KvRow>)> {
    let names = driver.tables()?;
    if names.iter().any(|n| n == TABLE) {
        let meta = driver.open_table(META_TABLE, false)?;
        let mut txn = driver.begin()?;
        let have = txn
            .get(meta, META_ROWS_KEY)?
            .and_then(|v| v.try_into().ok().map(u64::from_be_bytes));
        txn.commit()?;
        let n = check_loaded(have, o.rows)?;
        con.line(&format!("reusing the kv table of {n} rows"));
        return Ok((driver.open_table(TABLE, false)?, None));
    }
    let table = driver.open_table(TABLE, true)?;
    let meta = driver.open_table(META_TABLE, true)?;
    con.line(&format!(
        "loading {} rows, {LOAD_COMMIT_ROWS} per commit, into {}",
        o.rows,
        driver.name()
    ));
    let before = snapshot(driver, proc);
    let t0 = Instant::now();
    let mut hist = new_histogram();
    let mut value = [0u8; VALUE_BYTES];
    con.start_bar(o.rows, "load");
    let mut i = 0u64;
    while i < o.rows {
        let end = (i + LOAD_COMMIT_ROWS).min(o.rows);
        let u0 = Instant::now();
        let mut txn = driver.begin()?;
        for r in i..end {
            fill_value(&mut value, r);
            txn.put(table, &key_of(r), &value)?;
        }
        txn.commit()?;
        hist.saturating_record(u0.elapsed().as_nanos() as u64);
        i = end;
        con.set_position(i);
    }
    con.finish_bar();
    let seconds = t0.elapsed().as_secs_f64();
    let mut txn = driver.begin()?;
    txn.put(meta, META_ROWS_KEY, &o.rows.to_be_bytes())?;
    txn.commit()?;
    let after = snapshot(driver, proc);
    let out = WorkerOut {
        ops: o.rows,
        rows: o.rows,
        retries: 0,
        latency_ns: hist,
    };
    let row = make_row("load", 1, seconds, &out, &before, &after);
    con.line(&format!(
        "loaded {} rows in {seconds:.1} s ({:.0} rows/s)",
        o.rows, row.ops_per_s
    ));
    Ok((table, Some(row)))
}

/// Run `w` on one thread until `deadline`; the first unit always runs.
fn run_worker(
    sh: &Shared<'_>,
    w: Workload,
    thread: usize,
    deadline: Instant,
) -> BenchResult<WorkerOut> {
    timed_units(sh.seed, w, thread, deadline, |rng, value| match w {
        Workload::Get => get_one(sh, rng),
        Workload::Put => put_batch(sh, rng, value),
        Workload::Scan => scan_one(sh, rng),
    })
}

fn check_value(what: &str, v: &[u8]) -> BenchResult<()> {
    if v.len() == VALUE_BYTES {
        Ok(())
    } else {
        Err(BenchError::Data(format!(
            "{what}: value of {} bytes, expected {VALUE_BYTES}",
            v.len()
        )))
    }
}

fn get_one(sh: &Shared<'_>, rng: &mut SmallRng) -> BenchResult<(u64, u64)> {
    let i = rng.gen_range(0..sh.rows);
    let mut txn = sh.driver.begin()?;
    let v = txn.get(sh.table, &key_of(i))?;
    txn.commit()?;
    match v {
        Some(v) => check_value(&format!("row {i}"), &v).map(|()| (1, 1)),
        None => Err(BenchError::Data(format!("row {i}: key not found"))),
    }
}

fn put_batch(
    sh: &Shared<'_>,
    rng: &mut SmallRng,
    value: &mut [u8; VALUE_BYTES],
) -> BenchResult<(u64, u64)> {
    let mut txn: Box<dyn DriverTxn> = sh.driver.begin()?;
    for _ in 0..sh.batch {
        let i = rng.gen_range(0..sh.rows);
        fill_value(value, rng.gen());
        txn.put(sh.table, &key_of(i), value)?;
    }
    txn.commit()?;
    Ok((sh.batch as u64, sh.batch as u64))
}

fn scan_one(sh: &Shared<'_>, rng: &mut SmallRng) -> BenchResult<(u64, u64)> {
    let start = key_of(rng.gen_range(0..sh.rows));
    let mut txn = sh.driver.begin()?;
    let rows = txn.scan(
        sh.table,
        Bound::Included(&start[..]),
        Bound::Unbounded,
        false,
        sh.scan_len,
    )?;
    txn.commit()?;
    for (_, v) in &rows {
        check_value("scan", v)?;
    }
    Ok((1, rows.len() as u64))
}

fn make_row(
    workload: &str,
    threads: usize,
    seconds: f64,
    out: &WorkerOut,
    before: &Snapshot,
    after: &Snapshot,
) -> KvRow {
    let ops = out.ops.max(1) as f64;
    let per_op = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => a.saturating_sub(b) as f64 / ops,
        _ => 0.0,
    };
    KvRow {
        write_bytes_per_op: after
            .proc
            .write_bytes
            .saturating_sub(before.proc.write_bytes) as f64
            / ops,
        pages_written_per_op: per_op(after.stats.pages_written, before.stats.pages_written),
        pages_read_per_op: per_op(after.stats.pages_read, before.stats.pages_read),
        rss_bytes: after.proc.rss_bytes,
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
