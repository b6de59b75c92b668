//! torture: `evenkeel torture`, kill -9 a workload at random moments, recover, verify, repeat.
//!
//! Each cycle starts a child (this binary re-run as the hidden `torture-child`) on the same
//! database, waits until its workload is running, lets it run a random time from the
//! `--kill-after` window (drawn from the cycle's seed), and SIGKILLs it. The parent then opens
//! the database in-process — `Database::open` runs crash recovery, whose report (redo scanned,
//! records applied, seconds) goes into the figures — verifies the workload's acknowledged
//! state (see `kv`, `insert`, `tpcc`), closes, and runs the offline `check` on every page. The
//! database carries over to the next cycle, so damage cannot hide behind a fresh start.
//!
//! What "acknowledged" means is fixed by the child: it writes an ack line only after `commit()`
//! returned (`acklog`), and the parent counts only lines that reached the file. Commits run
//! with flush_log_at_trx_commit=1 by default (2 is also process-crash safe; 0 is refused).
//!
//! Every cycle prints its seed; a run's seed (`--seed`) fixes every cycle's seed, kill delay
//! and the workload's random choices (the thread interleaving and the kill's exact moment
//! cannot be replayed). The first failure stops the run: the directory is kept and its path,
//! the cycle and both seeds are printed, and the command exits 3.

mod acklog;
mod child;
mod insert;
mod kv;
mod report;
mod tpcc;
mod workload;

pub use child::{run as run_child, ChildArgs};

use crate::config::ConfigArgs;
use crate::failure::{CmdResult, Failure};
use acklog::{read_lines, READY};
use clap::{Args, ValueEnum};
use evenkeel::{Database, Options};
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::Driver;
use evenkeel_bench::tpcc::scale::Scale;
use report::{CycleFailure, CycleStats, TortureReport};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Engine options a torture starts from, before --config and --set: commits durable at
/// return, and a small pool and log so that eviction, checkpoints, log wrap and the page
/// cleaner all happen within a cycle of a second or two.
pub const DEFAULT_SETS: &[&str] = &[
    "flush_log_at_trx_commit=1",
    "buffer_pool_size=4M",
    "log_file_size=1M",
    "log_buffer_size=256K",
];
/// Cycles when neither --cycles nor --duration is given.
const CYCLES_DEFAULT: u64 = 10;
/// A child that is not running its workload this long after its start has failed.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const THREADS_MAX: usize = 64;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// TPC-C (tpcc-mysql's mix) on a small loaded database
    Tpcc,
    /// The insert benchmark's churn: batches of inserts with three secondary indexes, deleting
    /// the oldest rows once a table is full
    Insert,
    /// Random puts and deletes checked against a model of every key's expected version
    Kv,
}

/// A `MIN..MAX` window of milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct KillWindow {
    pub min_ms: u64,
    pub max_ms: u64,
}

fn parse_window(s: &str) -> Result<KillWindow, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?}: expected MIN..MAX in milliseconds, e.g. 100..1500"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?}: {v:?} is not a number of milliseconds"))
    };
    let (min_ms, max_ms) = (num(a)?, num(b)?);
    if min_ms > max_ms {
        return Err(format!("{s:?}: MIN is above MAX"));
    }
    Ok(KillWindow { min_ms, max_ms })
}

#[derive(Args, Debug)]
pub struct TortureArgs {
    /// Workload the child runs
    #[arg(long, value_enum, default_value = "kv")]
    pub workload: WorkloadKind,

    /// Cycles to run (kill, recover, verify) [default: 10 unless --duration is given]
    #[arg(long)]
    pub cycles: Option<u64>,

    /// Start no new cycle after this many seconds (with --cycles, whichever comes first)
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<u64>,

    /// Seed of the run; every cycle's seed derives from it [default: from the clock]
    #[arg(long)]
    pub seed: Option<u64>,

    /// Directory for the database (DIR/db), ack files and child logs; must not hold a
    /// database yet [default: a temporary directory, removed after a clean run, kept after
    /// a failure]
    #[arg(long)]
    pub dir: Option<PathBuf>,

    /// Milliseconds the child's workload runs before the kill, drawn per cycle
    #[arg(long, value_name = "MIN..MAX", default_value = "100..1500", value_parser = parse_window)]
    pub kill_after: KillWindow,

    /// Threads of the child's workload (clients for tpcc and insert)
    #[arg(long, default_value_t = 4)]
    pub threads: usize,

    /// TPC-C warehouses loaded before the first cycle
    #[arg(long, default_value_t = 1)]
    pub warehouses: u32,

    /// TPC-C items (spec: 100000)
    #[arg(long, default_value_t = 100_000)]
    pub items: u32,

    /// TPC-C customers per district (spec: 3000)
    #[arg(long, default_value_t = 3_000)]
    pub customers: u32,

    /// Also write the final report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Fail a cycle whose recovery (the reopen, recovery included) took longer than
    /// recovery_time_target (set it with --set recovery_time_target=SECONDS); without this
    /// flag such cycles are counted and reported
    #[arg(long)]
    pub check_recovery_target: bool,

    /// Resize the redo log online all along, cycling through these sizes (log_capacity, e.g.
    /// 64M,256M), one resize every 200 ms in the child, so kills land before, during and after
    /// resizes and recovery finds whichever log was in use
    #[arg(long, value_name = "SIZES", value_delimiter = ',', value_parser = crate::recovery_bench::parse_size)]
    pub resize_log: Vec<u64>,

    #[command(flatten)]
    pub config: ConfigArgs,

    /// Test hook: after the kill of cycle N, append an acknowledgement of a commit that never
    /// happened, which verification must report as lost
    #[arg(long, hide = true, value_name = "N")]
    pub plant_lost_ack: Option<u64>,
}

/// What verifying one cycle found.
pub struct Verified {
    /// Acknowledged commits checked.
    pub acked: u64,
    /// Transactions started but not acknowledged at the kill (tracked by kv and insert).
    pub in_flight: u64,
    /// Of those, how many recovery kept (whole).
    pub in_flight_applied: u64,
    /// One line on the state (rows, keys, conditions).
    pub detail: String,
}

/// What a failed verification found.
pub struct Broken {
    pub lost_acked: u64,
    pub problems: Vec<String>,
}

impl Broken {
    /// A failure to verify at all (an unreadable table, a malformed ack line).
    pub fn harness(e: impl Into<String>) -> Broken {
        Broken {
            lost_acked: 0,
            problems: vec![e.into()],
        }
    }
}

/// A workload's parent side: what the database must hold after a kill.
pub trait Model {
    /// Prepares the database before the first cycle; returns a note to print.
    fn setup(&mut self, _db: &Path, _opts: &Options) -> Result<String, Failure> {
        Ok(String::new())
    }
    /// Checks the recovered database against the ack lines of the killed child, and on
    /// success takes the recovered state as the expectation of the next cycle.
    fn verify(&mut self, d: &EvenkeelDriver, lines: &[String]) -> Result<Verified, Broken>;
    /// Appends an acknowledgement of a commit that never happened (the planted failure).
    fn plant(&self, ack: &Path, threads: usize) -> std::io::Result<()>;
}

/// splitmix64: per-cycle seeds and kill delays from the run's seed.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Torture<'a> {
    args: &'a TortureArgs,
    seed: u64,
    root: PathBuf,
    db: PathBuf,
    config: ConfigArgs,
    model: Box<dyn Model>,
}

pub fn run(args: &TortureArgs) -> CmdResult {
    if args.threads == 0 || args.threads > THREADS_MAX {
        return Err(Failure::Usage(format!(
            "--threads {}: expected 1..={THREADS_MAX}",
            args.threads
        )));
    }
    if args.cycles == Some(0) || args.duration == Some(0) {
        return Err(Failure::Usage(
            "--cycles and --duration must be at least 1".into(),
        ));
    }
    let scale = Scale {
        warehouses: args.warehouses,
        items: args.items,
        customers: args.customers,
    };
    scale
        .validate()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let config = ConfigArgs {
        config: args.config.config.clone(),
        set: DEFAULT_SETS
            .iter()
            .map(|s| s.to_string())
            .chain(args.config.set.iter().cloned())
            .collect(),
    };
    let opts = config.options()?;
    if args.check_recovery_target && opts.recovery_time_target == 0 {
        return Err(Failure::Usage(
            "--check-recovery-target needs recovery_time_target (--set \
             recovery_time_target=SECONDS)"
                .into(),
        ));
    }
    if opts.flush_log_at_trx_commit == 0 {
        return Err(Failure::Usage(
            "flush_log_at_trx_commit=0: a commit is not written to the OS when it returns, so \
             a kill may lose acknowledged commits by design; torture needs 1 (or 2)"
                .into(),
        ));
    }
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        mix(t.map_or(0, |d| d.as_nanos() as u64)) >> 1
    });
    let (root, temp) = torture_dir(args.dir.as_deref())?;
    let model: Box<dyn Model> = match args.workload {
        WorkloadKind::Kv => Box::<kv::KvModel>::default(),
        WorkloadKind::Insert => Box::new(insert::InsertModel::new(args.threads)),
        WorkloadKind::Tpcc => Box::new(tpcc::TpccModel::new(scale, args.threads, seed)),
    };
    let mut t = Torture {
        args,
        seed,
        db: root.join("db"),
        root,
        config,
        model,
    };
    let report = t.run_cycles();
    println!("{}", report.render());
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::op("encoding the report as JSON", e))?;
        std::fs::write(path, json + "\n")
            .map_err(|e| Failure::op(format!("writing {}", path.display()), e))?;
    }
    let Some(f) = report.failures.first() else {
        return Ok(());
    };
    // The evidence stays: a temporary directory is kept after a failure.
    if let Some(temp) = temp {
        let _ = temp.keep();
    }
    Err(Failure::Damaged(format!(
        "torture failed at cycle {} (cycle seed {}, run seed {seed}; replay with --seed \
         {seed}): {}; the database and ack files are kept in {}",
        f.cycle,
        f.seed,
        f.problems.first().map_or("", String::as_str),
        t.root.display()
    )))
}

/// The run's directory: `--dir` (which must not hold a database) or a fresh temporary one.
fn torture_dir(dir: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>), Failure> {
    match dir {
        Some(d) => {
            if d.join("db").join(evenkeel::db::DATA_FILE).exists() {
                return Err(Failure::Usage(format!(
                    "--dir {}: {} holds a database from an earlier run; torture verifies \
                     against what it wrote itself, so it needs a directory without one",
                    d.display(),
                    d.join("db").display()
                )));
            }
            std::fs::create_dir_all(d)
                .map_err(|e| Failure::op(format!("creating {}", d.display()), e))?;
            Ok((d.to_path_buf(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("evenkeel-torture-")
                .tempdir()
                .map_err(|e| Failure::op("creating a temporary directory", e))?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

impl Torture<'_> {
    fn run_cycles(&mut self) -> TortureReport {
        let a = self.args;
        println!(
            "torture: workload {:?}, seed {} (replay: --seed {}), {} threads, kill after \
             {}..{} ms, dir {}",
            a.workload,
            self.seed,
            self.seed,
            a.threads,
            a.kill_after.min_ms,
            a.kill_after.max_ms,
            self.root.display()
        );
        let mut report = TortureReport::new(a.workload, self.seed, &self.root);
        let setup = self
            .config
            .options_for(&self.db)
            .and_then(|o| self.model.setup(&self.db, &o));
        match setup {
            Ok(note) if !note.is_empty() => println!("torture: {note}"),
            Ok(_) => {}
            Err(e) => {
                report.fail(CycleFailure::new(0, self.seed, 0, format!("setup: {e}")));
                return report;
            }
        }
        let started = Instant::now();
        let cycles = match (a.cycles, a.duration) {
            (None, None) => Some(CYCLES_DEFAULT),
            (c, _) => c,
        };
        for n in 0.. {
            let out_of_time = a
                .duration
                .is_some_and(|d| started.elapsed() >= Duration::from_secs(d));
            if cycles.is_some_and(|c| n >= c) || out_of_time {
                break;
            }
            match self.cycle(n) {
                Ok(c) => {
                    println!("{}", c.line());
                    report.add(c);
                }
                Err(f) => {
                    println!("cycle {n} seed {}: FAILED", f.seed);
                    for p in f.problems.iter().take(20) {
                        println!("  {p}");
                    }
                    report.fail(f);
                    break;
                }
            }
        }
        report.elapsed_s = started.elapsed().as_secs_f64();
        report
    }

    fn child_command(&self, n: u64, seed: u64, ack: &Path) -> Result<Command, String> {
        let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
        let mut c = Command::new(exe);
        c.arg("torture-child")
            .arg("--workload")
            .arg(format!("{:?}", self.args.workload).to_lowercase())
            .arg("--db")
            .arg(&self.db)
            .arg("--ack-file")
            .arg(ack)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--cycle")
            .arg(n.to_string())
            .arg("--threads")
            .arg(self.args.threads.to_string());
        if !self.args.resize_log.is_empty() {
            let sizes: Vec<String> = self.args.resize_log.iter().map(u64::to_string).collect();
            c.arg("--resize-log").arg(sizes.join(","));
        }
        if let Some(p) = &self.config.config {
            c.arg("--config").arg(p);
        }
        for s in &self.config.set {
            c.arg("--set").arg(s);
        }
        Ok(c)
    }

    /// Starts the child and waits until its workload runs; the error says why it did not.
    fn start_child(&self, n: u64, seed: u64, ack: &Path, log: &Path) -> Result<Child, String> {
        let err =
            std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let mut child = self
            .child_command(n, seed, ack)?
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting the child: {e}"))?;
        let started = Instant::now();
        loop {
            let ready = read_lines(ack).is_ok_and(|l| l.first().is_some_and(|l| l == READY));
            if ready {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "the child exited ({status}) before its workload started: {}",
                    tail(log)
                ));
            }
            if started.elapsed() > READY_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the child's workload did not start within {READY_TIMEOUT:?}: {}",
                    tail(log)
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// One cycle: start, kill, recover, verify, check.
    fn cycle(&mut self, n: u64) -> Result<CycleStats, CycleFailure> {
        let seed = mix(self.seed ^ mix(n + 1)) >> 1;
        let fail = |lost: u64, what: String| CycleFailure::new(n, seed, lost, what);
        let ack = self.root.join(format!("ack-{n}.log"));
        let log = self.root.join(format!("child-{n}.stderr"));
        let w = self.args.kill_after;
        let delay = Duration::from_millis(w.min_ms + mix(seed) % (w.max_ms - w.min_ms + 1));

        let mut child = self
            .start_child(n, seed, &ack, &log)
            .map_err(|e| fail(0, e))?;
        let ran = Instant::now();
        while ran.elapsed() < delay {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(fail(
                    0,
                    format!(
                        "the child exited on its own ({status}) after {} ms: {}",
                        ran.elapsed().as_millis(),
                        tail(&log)
                    ),
                ));
            }
            std::thread::sleep((delay - ran.elapsed().min(delay)).min(Duration::from_millis(10)));
        }
        // SIGKILL; the wait reaps the child, and the kernel drops its file locks with it.
        let _ = child.kill();
        let _ = child.wait();
        let killed_after_ms = ran.elapsed().as_millis() as u64;

        if self.args.plant_lost_ack == Some(n) {
            self.model
                .plant(&ack, self.args.threads)
                .map_err(|e| fail(0, format!("planting a lost ack: {e}")))?;
        }
        let lines = read_lines(&ack).map_err(|e| fail(0, format!("{}: {e}", ack.display())))?;
        let unclean = crate::check::needs_recovery(&self.db);
        let opts = self
            .config
            .options_for(&self.db)
            .map_err(|e| fail(0, e.to_string()))?;
        let target_s = opts.recovery_time_target;
        let t0 = Instant::now();
        let db = Database::open(&self.db, opts)
            .map_err(|e| fail(0, format!("reopening after the kill (recovery): {e}")))?;
        let open_s = t0.elapsed().as_secs_f64();
        let status = db.status();
        let driver = EvenkeelDriver::from_database(db);
        let verdict = self.model.verify(&driver, &lines);
        let closed = driver.close();
        // The adapter and its tables hold the database's handle until they are dropped.
        drop(driver);
        let mut problems = Vec::new();
        let mut lost = 0;
        let verified = match verdict {
            Ok(v) => Some(v),
            Err(b) => {
                lost = b.lost_acked;
                problems.extend(b.problems);
                None
            }
        };
        if let Err(e) = closed {
            problems.push(format!("closing after verification: {e}"));
        }
        let over_target = unclean && target_s > 0 && open_s > target_s as f64;
        if over_target && self.args.check_recovery_target {
            problems.push(format!(
                "recovery took {open_s:.3} s, over recovery_time_target = {target_s} s ({} \
                 redo bytes replayed at {:.1} MB/s)",
                status.recovery.redo_bytes(),
                status.recovery.redo_bytes() as f64 / 1e6 / open_s.max(1e-9)
            ));
        }
        match evenkeel::check_dir(&self.db) {
            Ok(r) if r.is_ok() => {}
            Ok(r) => problems.extend(r.problems.iter().map(|p| format!("check: {p}"))),
            Err(e) => problems.push(format!("check: {e}")),
        }
        let Some(verified) = verified.filter(|_| problems.is_empty()) else {
            let mut f = fail(lost, String::new());
            f.problems = problems;
            return Err(f);
        };
        let _ = std::fs::remove_file(&ack);
        let _ = std::fs::remove_file(&log);
        Ok(CycleStats {
            cycle: n,
            seed,
            killed_after_ms,
            recovered: unclean,
            recovery: status.recovery,
            open_s,
            recovery_target_s: target_s,
            over_target,
            lsn: status.lsn,
            log_capacity_bytes: status.log_capacity_bytes,
            verified,
        })
    }
}

/// The last part of a child's stderr, for a failure message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        return "(no output on stderr)".into();
    }
    let start = text.len().saturating_sub(2000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_windows_parse_or_say_why_not() {
        let w = parse_window("100..1500").unwrap();
        assert_eq!((w.min_ms, w.max_ms), (100, 1500));
        assert!(parse_window("5").unwrap_err().contains("MIN..MAX"));
        assert!(parse_window("9..3").unwrap_err().contains("above"));
        assert!(parse_window("a..3").unwrap_err().contains("not a number"));
    }
}
