//! The timed loops of `bench kv`: one client thread's gets, puts or scans until a deadline,
//! every unit (every [`GET_SAMPLE_EVERY`]th get) timed into a nanosecond histogram, and the
//! single-threaded bulk load with its progress lines. Every operation goes through evenkeel's
//! public API (`begin`, `get`, `put`, `scan`, `commit`), one transaction per unit, as an
//! embedding program would call it.
//!
//! Must stay true: a get that finds no row, or a value of the wrong length, is an error (the
//! key space is fixed at load, so either means the engine lost data).

use std::ops::Bound;
use std::time::{Duration, Instant};

use evenkeel::{Database, Table};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::keys::{fill_value, key_of, VALUE_BYTES};
use super::{engine_err, Workload};
use crate::error::{BenchError, BenchResult};
use crate::run::console::Console;

/// Rows per commit while loading.
pub const LOAD_COMMIT_ROWS: u64 = 1000;
/// Seconds between progress lines while loading.
const LOAD_LINE_EVERY: Duration = Duration::from_secs(10);
/// Highest latency kept exactly: one hour in nanoseconds (higher values are clamped).
const LATENCY_MAX_NS: u64 = 3_600_000_000_000;
/// Gets timed: one in this many. A get in memory takes about a microsecond and its two clock
/// reads took 4% of that (perf, docs/measurements.md); each timed get is still timed alone,
/// start to end, and which gets are timed depends on their place in the thread's sequence
/// only, not on their key or their latency, so the quantiles are those of every get. Puts and
/// scans are timed every one.
pub const GET_SAMPLE_EVERY: u64 = 8;

/// One in how many units of `w` [`timed_units`] times.
pub fn sample_every(w: Workload) -> u64 {
    match w {
        Workload::Get => GET_SAMPLE_EVERY,
        Workload::Put | Workload::Scan => 1,
    }
}

/// A latency histogram in nanoseconds.
pub fn new_histogram() -> Histogram<u64> {
    // Constant bounds that hdrhistogram accepts (low ≥ 1, high ≥ 2 × low, 3 digits).
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).unwrap_or_else(|_| unreachable!())
}

/// What the client threads share.
pub struct Shared<'a> {
    pub db: &'a Database,
    pub table: &'a Table,
    pub rows: u64,
    pub scan_len: usize,
    pub batch: usize,
    pub seed: u64,
}

/// One thread's counts.
pub struct WorkerOut {
    pub ops: u64,
    pub rows: u64,
    /// Units re-run after a retryable error (a peer's deadlock or lock-wait timeout).
    pub retries: u64,
    pub latency_ns: Histogram<u64>,
}

impl WorkerOut {
    pub fn new() -> WorkerOut {
        WorkerOut {
            ops: 0,
            rows: 0,
            retries: 0,
            latency_ns: new_histogram(),
        }
    }
}

impl Default for WorkerOut {
    fn default() -> Self {
        WorkerOut::new()
    }
}

/// Runs `f(thread)` on `threads` scoped threads and adds up what they counted; the first
/// error wins, a panic is passed on.
pub fn run_threads<F>(threads: usize, f: F) -> BenchResult<WorkerOut>
where
    F: Fn(usize) -> BenchResult<WorkerOut> + Sync,
{
    let f = &f;
    let outs: Vec<BenchResult<WorkerOut>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || f(t))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut total = WorkerOut::new();
    for out in outs {
        let out = out?;
        total.ops += out.ops;
        total.rows += out.rows;
        total.retries += out.retries;
        // Same bounds on both sides, so adding cannot fail.
        let _ = total.latency_ns.add(&out.latency_ns);
    }
    Ok(total)
}

/// Run `w` on one thread until `deadline`; the first unit always runs.
pub fn run_worker(
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

/// Times `unit` on one thread until `deadline` (the first unit always runs): the latency of
/// one unit in [`sample_every`] into the histogram (the deadline is looked at after each of
/// those), and every unit's (ops, rows) added up. A unit that failed with a retryable driver
/// error (a peer's deadlock or lock-wait timeout) counts as a retry and the next one runs; any
/// other error ends the thread. The random stream depends on the seed, the thread and the
/// workload only.
pub fn timed_units(
    seed: u64,
    w: Workload,
    thread: usize,
    deadline: Instant,
    mut unit: impl FnMut(&mut SmallRng, &mut [u8; VALUE_BYTES]) -> BenchResult<(u64, u64)>,
) -> BenchResult<WorkerOut> {
    let stream = (thread as u64 + 1).wrapping_mul(0x9e37_79b9) ^ ((w as u64) << 48);
    let mut rng = SmallRng::seed_from_u64(seed ^ stream);
    let mut out = WorkerOut::new();
    let mut value = [0u8; VALUE_BYTES];
    let every = sample_every(w);
    let mut n = 0u64;
    loop {
        let timed = n.is_multiple_of(every);
        n += 1;
        let t0 = timed.then(Instant::now);
        let done = unit(&mut rng, &mut value);
        let t1 = t0.map(|t0| (t0, Instant::now()));
        match done {
            Ok((ops, rows)) => {
                if let Some((t0, t1)) = t1 {
                    out.latency_ns
                        .saturating_record((t1 - t0).as_nanos() as u64);
                }
                out.ops += ops;
                out.rows += rows;
            }
            Err(BenchError::Driver(e)) if e.is_retryable() => out.retries += 1,
            Err(e) => return Err(e),
        }
        if matches!(t1, Some((_, t1)) if t1 >= deadline) {
            return Ok(out);
        }
    }
}

fn get_one(sh: &Shared<'_>, rng: &mut SmallRng) -> BenchResult<(u64, u64)> {
    let i = rng.gen_range(0..sh.rows);
    let txn = sh.db.begin();
    let v = txn.get(sh.table, &key_of(i)).map_err(engine_err)?;
    txn.commit().map_err(engine_err)?;
    match v {
        Some(v) if v.len() == VALUE_BYTES => Ok((1, 1)),
        Some(v) => Err(BenchError::Data(format!(
            "row {i}: value of {} bytes, expected {VALUE_BYTES}",
            v.len()
        ))),
        None => Err(BenchError::Data(format!("row {i}: key not found"))),
    }
}

fn put_batch(
    sh: &Shared<'_>,
    rng: &mut SmallRng,
    value: &mut [u8; VALUE_BYTES],
) -> BenchResult<(u64, u64)> {
    let mut txn = sh.db.begin();
    for _ in 0..sh.batch {
        let i = rng.gen_range(0..sh.rows);
        fill_value(value, rng.gen());
        txn.put(sh.table, &key_of(i), value).map_err(engine_err)?;
    }
    txn.commit().map_err(engine_err)?;
    Ok((sh.batch as u64, sh.batch as u64))
}

fn scan_one(sh: &Shared<'_>, rng: &mut SmallRng) -> BenchResult<(u64, u64)> {
    let start = key_of(rng.gen_range(0..sh.rows));
    let txn = sh.db.begin();
    let mut n = 0u64;
    {
        let scan = txn
            .scan(
                sh.table,
                Bound::Included(&start[..]),
                Bound::Unbounded,
                false,
            )
            .map_err(engine_err)?;
        for r in scan.take(sh.scan_len) {
            let (_, v) = r.map_err(engine_err)?;
            if v.len() != VALUE_BYTES {
                return Err(BenchError::Data(format!(
                    "scan: value of {} bytes, expected {VALUE_BYTES}",
                    v.len()
                )));
            }
            n += 1;
        }
    }
    txn.commit().map_err(engine_err)?;
    Ok((1, n))
}

/// Load rows `0..rows` in key-random order, `LOAD_COMMIT_ROWS` per commit, printing progress.
/// Returns the latency histogram of the commits.
pub fn load(
    db: &Database,
    table: &Table,
    rows: u64,
    con: &mut Console,
) -> BenchResult<Histogram<u64>> {
    let mut hist = new_histogram();
    let start = Instant::now();
    let mut next_line = start + LOAD_LINE_EVERY;
    let mut value = [0u8; VALUE_BYTES];
    con.start_bar(rows, "load");
    let mut i = 0u64;
    while i < rows {
        let end = (i + LOAD_COMMIT_ROWS).min(rows);
        let t0 = Instant::now();
        let mut txn = db.begin();
        for r in i..end {
            fill_value(&mut value, r);
            txn.put(table, &key_of(r), &value).map_err(engine_err)?;
        }
        txn.commit().map_err(engine_err)?;
        let t1 = Instant::now();
        hist.saturating_record((t1 - t0).as_nanos() as u64);
        i = end;
        con.set_position(i);
        if t1 >= next_line {
            next_line = t1 + LOAD_LINE_EVERY;
            let secs = (t1 - start).as_secs_f64();
            let rate = i as f64 / secs;
            con.line(&format!(
                "load: {i} / {rows} rows ({:.0}%), {rate:.0} rows/s, {secs:.0} s, ETA {:.0} s",
                100.0 * i as f64 / rows as f64,
                (rows - i) as f64 / rate.max(1.0)
            ));
        }
    }
    con.finish_bar();
    Ok(hist)
}
