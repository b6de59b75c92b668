//! The command-line surface the `evenkeel` binary mounts: clap `Args` for `bench tpcc`,
//! `bench insert` and `sweep <tpcc|insert> --vary k=v1,v2,...`, and the run functions behind
//! them. Arguments are checked before anything is loaded; every mistake is a
//! `BenchError::Usage` that names the argument and what it accepts.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::error::{BenchError, BenchResult};
use crate::insert::step::{steps_arg, Step};
use crate::run::defaults::TPCC_EVENKEEL_DEFAULTS;
use crate::run::insert::{run_insert, InsertOptions};
pub use crate::run::kv::args::KvArgs;
use crate::run::kv::run_kv_bench;
use crate::run::schedule::parse_schedule;
use crate::run::sweep::{run_sweep_with, LoadOnce, SweepOutput, Varied};
use crate::run::tpcc::{prepare_tpcc, run_tpcc, TpccOptions};
use crate::run::{CommonOptions, DataDir, EngineSpec, RunOutput};
use crate::tpcc::input::Mix;

/// Options shared by every workload.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Engine to drive: evenkeel; the peers innodb (a MariaDB server the workbench starts and
    /// stops itself), rocksdb, sqlite and lmdb (in a build with --features peers); or model
    /// (the in-memory test engine).
    #[arg(long, default_value = "evenkeel")]
    pub engine: String,
    /// Data directory, kept after the run. Reused when it holds data: tpcc runs on the
    /// warehouses already loaded, insert reloads only when --steps includes l.i0, so several
    /// settings can be compared on the same data. A fresh temporary directory when absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Engine configuration file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Engine option as name=value, applied after --config; repeatable. An IO-bound setup is
    /// e.g. --set buffer_pool_size=64M --set log_file_size=4M (evenkeel's default log buffer
    /// then shrinks to a quarter of the log unless set too). Peers take the same names and
    /// refuse what they have no equivalent for; ENGINE:name=value applies to one engine only
    /// (--set evenkeel:adaptive_flushing=steady).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Results directory [default: ./evenkeel-results/<workload>-<timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print summary.json on stdout at the end instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no per-interval lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Seed of the workload's random numbers.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Change an engine option while running, TIME after the start of the measured phase
    /// (90, 90s, 2m, 1m30s); e.g. --at 60s:set adaptive_flushing=steady. Repeatable.
    #[arg(long = "at", value_name = "TIME:set NAME=VALUE")]
    pub at: Vec<String>,
}

impl CommonArgs {
    pub fn options(&self) -> BenchResult<CommonOptions> {
        Ok(CommonOptions {
            engine: EngineSpec {
                engine: self.engine.clone(),
                config: self.config.clone(),
                set: self.set.clone(),
            },
            dir: self.dir.clone(),
            out: self.out.clone(),
            json: self.json,
            quiet: self.quiet,
            seed: self.seed,
            schedule: parse_schedule(&self.at)?,
        })
    }
}

/// `bench tpcc`.
#[derive(Debug, Clone, Args)]
pub struct TpccArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, short = 'w', default_value_t = 2)]
    pub warehouses: u32,
    /// Client connections (threads).
    #[arg(long, short = 'c', default_value_t = 8)]
    pub connections: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 120)]
    pub duration: u64,
    /// Seconds run before measuring (tpcc-mysql's ramp-up).
    #[arg(long, default_value_t = 10)]
    pub warmup: u64,
    /// Seconds per printed line.
    #[arg(long, default_value_t = 10)]
    pub interval: u64,
    /// Transaction mix: tpcc-mysql (10:10:1:1:1) or spec (45:43:4:4:4).
    #[arg(long, default_value = "tpcc-mysql")]
    pub mix: String,
    /// Items (spec: 100000); smaller for quick looks.
    #[arg(long, hide = true)]
    pub items: Option<u32>,
    /// Customers per district (spec: 3000); smaller for quick looks.
    #[arg(long, hide = true)]
    pub customers: Option<u32>,
    /// Every SECONDS, check TPC-C's consistency conditions (1-10, 12) in one transaction while
    /// the clients run: on an engine whose reads see one snapshot per transaction (evenkeel's
    /// and InnoDB's default), every condition holds. Printed and in summary.json; 0: off.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub live_check: u64,
}

impl TpccArgs {
    pub fn options(&self) -> BenchResult<TpccOptions> {
        let mix = Mix::parse(&self.mix).map_err(|e| BenchError::Usage(format!("--mix: {e}")))?;
        let mut common = self.common.options()?;
        crate::run::defaults::apply(&mut common.engine, TPCC_EVENKEEL_DEFAULTS)?;
        let o = TpccOptions {
            common,
            warehouses: self.warehouses,
            connections: self.connections,
            duration_s: self.duration,
            warmup_s: self.warmup,
            interval_s: self.interval,
            mix,
            items: self.items,
            customers: self.customers,
            live_check_every_s: self.live_check,
        };
        o.validate()?;
        Ok(o)
    }
}

/// `bench insert`.
#[derive(Debug, Clone, Args)]
pub struct InsertArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Clients, each with its own table.
    #[arg(long, short = 'c', default_value_t = 2)]
    pub clients: usize,
    /// Rows per client loaded by l.i0 (without secondary indexes).
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Rows per client inserted by l.i1 (50 per commit, deleting as many of the oldest).
    #[arg(long, default_value_t = 200_000)]
    pub rows_i1: u64,
    /// Rows per client inserted by l.i2 (5 per commit).
    #[arg(long, default_value_t = 20_000)]
    pub rows_i2: u64,
    /// Seconds of each query step (qr: range queries while one writer inserts at --query-ips).
    #[arg(long, default_value_t = 30)]
    pub query_seconds: u64,
    /// Insert rate of the background writer in the query steps, rows per second.
    #[arg(long, default_value_t = 100)]
    pub query_ips: u64,
    /// Upper bound on the seconds of l.i0, l.i1 and l.i2: a step stops early when it is
    /// reached (l.i1 and l.i2 run this long after their --warmup). l.x is not bounded: it
    /// always indexes every row, as secondary indexes built part way would miss rows.
    #[arg(long, default_value_t = 60)]
    pub max_step_seconds: u64,
    /// Seconds at the start of each l.i1 and l.i2 step that are run and sampled (in
    /// timeseries.csv under the step's phase, marked excluded) but not measured: the step's
    /// rows, seconds, ips.av and ips.99 and the summary's figures count from the end of the
    /// warmup, and the step runs up to --max-step-seconds after it (0 to 3600; --at times
    /// still count from the start of the first step). A step whose rows are all done inside
    /// its warmup measures nothing: its line says so and its figures are 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub warmup: u64,
    /// Steps to run, comma-separated, from l.i0,l.x,l.i1,l.i2,qr.
    #[arg(long, default_value = "l.i0,l.x,l.i1,l.i2,qr")]
    pub steps: String,
}

impl InsertArgs {
    pub fn options(&self) -> BenchResult<InsertOptions> {
        let o = InsertOptions {
            common: self.common.options()?,
            clients: self.clients,
            rows_i0: self.rows,
            rows_i1: self.rows_i1,
            rows_i2: self.rows_i2,
            query_seconds: self.query_seconds,
            query_ips: self.query_ips,
            max_step_seconds: self.max_step_seconds,
            warmup: self.warmup,
            steps: crate::insert::step::parse_steps(&self.steps)?,
        };
        o.validate()?;
        Ok(o)
    }
}

/// `evenkeel bench <workload>`.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// TPC-C as tpcc-mysql runs it.
    ///
    /// evenkeel runs with flush_method=o_direct unless --config or --set names flush_method,
    /// so the buffer pool's misses reach the device instead of the OS page cache (an IO-bound
    /// run); --set flush_method=fsync gives the engine's default. The summary says whether the
    /// run was IO-bound, with the engine's page reads beside the process's and the device's
    /// reads and writes.
    Tpcc(TpccArgs),
    /// The insert benchmark (iibench).
    Insert(InsertArgs),
    /// Engine-core micro benchmark: random gets, puts and range scans of 16-byte keys and
    /// 100-byte values at each thread count; ops/s, latency, bytes written per put, memory.
    Kv(KvArgs),
}

/// `evenkeel sweep <workload> --vary name=v1,v2,...`.
#[derive(Debug, Clone, Subcommand)]
pub enum SweepCommand {
    Tpcc {
        #[command(flatten)]
        args: TpccArgs,
        /// Setting to vary: an engine option or a workload argument, with its values. Unless
        /// it shapes the data (warehouses, or an option fixed at create such as
        /// log_file_size), the data is loaded once into <dir>/template (kept with --dir, so the
        /// next sweep loads nothing) and each run starts from a fresh copy of it.
        #[arg(long, value_name = "NAME=V1,V2,...")]
        vary: String,
        /// Remove each run's copy of the loaded data once the run ends, so that one copy is
        /// on disk at a time (each run's results stay in --out). Without it the copies stay in
        /// --dir for inspection; copies in a temporary directory are always removed.
        #[arg(long)]
        discard_copies: bool,
    },
    Insert {
        #[command(flatten)]
        args: InsertArgs,
        /// Setting to vary. Unless it is clients, rows or an option fixed at create, l.i0 and
        /// l.x run once into <dir>/template and each run does the other steps on a copy.
        #[arg(long, value_name = "NAME=V1,V2,...")]
        vary: String,
        /// Remove each run's copy of the loaded data once the run ends, so that one copy is
        /// on disk at a time (each run's results stay in --out). Without it the copies stay in
        /// --dir for inspection; copies in a temporary directory are always removed.
        #[arg(long)]
        discard_copies: bool,
    },
}

/// Run one benchmark.
pub fn run_bench(cmd: &BenchCommand) -> BenchResult<RunOutput> {
    match cmd {
        BenchCommand::Tpcc(a) => run_tpcc(&a.options()?),
        BenchCommand::Insert(a) => run_insert(&a.options()?),
        BenchCommand::Kv(a) => run_kv_bench(&a.options()?),
    }
}

/// In an engine sweep, every engine and its options (`spec_for(engine)`, the workbench's
/// defaults applied as for its run) are checked before anything loads, so a refused option
/// fails the sweep at once rather than after the first engines' runs.
fn check_engines(
    v: &Varied,
    spec_for: impl Fn(&str) -> BenchResult<EngineSpec>,
) -> BenchResult<()> {
    if !v.is_engine() {
        return Ok(());
    }
    for e in &v.values {
        crate::run::engine::check_options(&spec_for(e)?)?;
    }
    Ok(())
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> BenchResult<T> {
    v.parse()
        .map_err(|_| BenchError::Usage(format!("--vary {name}: {v:?} is not a number")))
}

impl TpccArgs {
    /// Set a sweep's `value` of `v`: a workload argument if one has that name, else an engine
    /// option.
    fn apply_varied(&mut self, v: &Varied, value: &str) -> BenchResult<()> {
        match v.name.as_str() {
            "warehouses" => self.warehouses = parse_num(&v.name, value)?,
            "connections" => self.connections = parse_num(&v.name, value)?,
            "duration" => self.duration = parse_num(&v.name, value)?,
            "warmup" => self.warmup = parse_num(&v.name, value)?,
            "mix" => self.mix = value.to_string(),
            "engine" => self.common.engine = value.to_string(),
            _ => self.common.set.push(v.label(value)),
        }
        Ok(())
    }
}

impl InsertArgs {
    /// The same for insert-benchmark arguments.
    fn apply_varied(&mut self, v: &Varied, value: &str) -> BenchResult<()> {
        match v.name.as_str() {
            "clients" => self.clients = parse_num(&v.name, value)?,
            "rows" => self.rows = parse_num(&v.name, value)?,
            "rows_i1" => self.rows_i1 = parse_num(&v.name, value)?,
            "rows_i2" => self.rows_i2 = parse_num(&v.name, value)?,
            "warmup" => self.warmup = parse_num(&v.name, value)?,
            "engine" => self.common.engine = value.to_string(),
            _ => self.common.set.push(v.label(value)),
        }
        Ok(())
    }
}

/// Run a sweep: one run per value, then one table and overlaid charts. When the varied
/// setting does not shape the data, the data is loaded once and copied per run (see
/// `run::sweep`).
pub fn run_sweep(cmd: &SweepCommand) -> BenchResult<SweepOutput> {
    match cmd {
        SweepCommand::Tpcc {
            args,
            vary,
            discard_copies,
        } => {
            let v = Varied::parse(vary)?;
            let base = args.options()?;
            check_engines(&v, |e| {
                let mut a = args.clone();
                a.common.engine = e.to_string();
                Ok(a.options()?.common.engine)
            })?;
            let load = |dir: &Path, _out: &Path, value: &str| -> BenchResult<()> {
                let mut a = args.clone();
                a.common.dir = Some(dir.to_path_buf());
                a.common.at.clear();
                if v.is_engine() {
                    a.common.engine = value.to_string();
                }
                prepare_tpcc(&a.options()?).map(|_| ())
            };
            let shared = v.shares_tpcc_load(&base.common.engine.engine);
            run_sweep_with(
                "tpcc",
                &v,
                &base.common,
                shared.then_some(&load as LoadOnce<'_>),
                *discard_copies,
                |value, out, dir| {
                    let mut a = args.clone();
                    a.common.out = Some(out);
                    a.common.dir = dir;
                    a.apply_varied(&v, value)?;
                    run_tpcc(&a.options()?)
                },
            )
        }
        SweepCommand::Insert {
            args,
            vary,
            discard_copies,
        } => {
            let v = Varied::parse(vary)?;
            let base = args.options()?;
            let (load_steps, run_steps): (Vec<Step>, Vec<Step>) =
                base.steps.iter().partition(|s| s.is_load());
            let shared = v.shares_insert_load(&base.common.engine.engine, &base.steps);
            check_engines(&v, |e| {
                let mut a = args.clone();
                a.common.engine = e.to_string();
                Ok(a.options()?.common.engine)
            })?;
            let load = |dir: &Path, out: &Path, value: &str| -> BenchResult<()> {
                if load_steps.is_empty() {
                    // Without l.i0 the sweep loads nothing: the template must hold an earlier
                    // load, or every run would insert into empty tables.
                    let loaded = std::fs::read_dir(dir)
                        .map(|mut d| d.next().is_some())
                        .unwrap_or(false);
                    if !loaded {
                        return Err(BenchError::Usage(format!(
                            "--steps {}: the sweep's template {} holds no loaded data; add \
                             l.i0,l.x to --steps (the sweep loads the template once and keeps \
                             it for later sweeps), or load it first with `evenkeel bench insert \
                             --dir {} --steps l.i0,l.x` and the same --clients and --rows",
                            steps_arg(&run_steps),
                            dir.display(),
                            dir.display(),
                        )));
                    }
                    return DataDir::new(Some(dir)).map(|_| ());
                }
                let mut a = args.clone();
                a.common.dir = Some(dir.to_path_buf());
                if v.is_engine() {
                    a.common.engine = value.to_string();
                    a.common.out = Some(out.join(format!("load-{value}")));
                } else {
                    a.common.out = Some(out.join("load"));
                }
                a.common.at.clear();
                a.steps = steps_arg(&load_steps);
                run_insert(&a.options()?).map(|_| ())
            };
            run_sweep_with(
                "insert",
                &v,
                &base.common,
                shared.then_some(&load as LoadOnce<'_>),
                *discard_copies,
                |value, out, dir| {
                    let mut a = args.clone();
                    a.common.out = Some(out);
                    a.common.dir = dir;
                    if shared {
                        a.steps = steps_arg(&run_steps);
                    }
                    a.apply_varied(&v, value)?;
                    run_insert(&a.options()?)
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_tpcc_runs_evenkeel_with_o_direct() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            args: TpccArgs,
        }
        let parse = |extra: &[&str]| {
            let t = T::try_parse_from(std::iter::once("tpcc").chain(extra.iter().copied()))
                .expect("parses");
            t.args.options().expect("valid").common.engine.set
        };
        assert_eq!(parse(&[]), ["flush_method=o_direct"]);
        assert_eq!(
            parse(&["--set", "flush_method=fsync"]),
            ["flush_method=fsync"]
        );
    }

    #[test]
    fn an_insert_sweep_varies_the_warmup_as_a_workload_argument() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            args: InsertArgs,
        }
        let mut a = T::try_parse_from(["insert", "--engine", "model", "--warmup", "4"])
            .expect("parses")
            .args;
        assert_eq!(a.options().expect("valid").warmup, 4);
        let v = Varied::parse("warmup=0,9").expect("vary");
        a.apply_varied(&v, "9").expect("a number");
        let o = a.options().expect("valid");
        assert_eq!(o.warmup, 9);
        assert!(o.common.engine.set.is_empty(), "not an engine option");
        a.warmup = 3601;
        let e = a.options().expect_err("too long").to_string();
        assert!(e.contains("--warmup"), "{e}");
    }
}
