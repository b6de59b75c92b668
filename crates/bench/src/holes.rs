//! `evenkeel holes`: the setups where the seeds saw an update-in-place engine fall into
//! throughput holes, each run on every engine given (`--engines`, evenkeel and real InnoDB by
//! default) back to back on copies of the same loaded data, and one table of how each engine
//! ran.
//!
//! A setup is one engine sweep (`evenkeel sweep <workload> ... --vary engine=...`), so its
//! `sweep.html` draws every engine on one chart. The setups are the seeds' (what each
//! teaches is in its `what`): the insert benchmark's l.i1 with secondary indexes over a pool a
//! quarter of the data's size, where InnoDB pins its checkpoint age and its pool goes nearly
//! all dirty; TPC-C with a small redo log; a large pool with a small redo log; more clients
//! than cores. All TPC-C setups share one template per engine (`<dir>/tpcc/template-<engine>`,
//! the same warehouses and redo size), the insert setup another (`<dir>/insert/...`), so a
//! second `holes` on the same `--dir` loads nothing.
//!
//! The table gives, per setup and engine, what tells a hole from a level line: the mean, p1
//! over the mean plain and after detrending (per-second throughput over its 30-second rolling
//! median, `stability::detrended`: holes show, slow drift does not), the seconds under half
//! the mean and at zero, the checkpoint age's maximum and the dirty pages' mean (why an engine
//! stalled), its own stall time where it times it (InnoDB does not), the seconds the device
//! stalled, and the bytes written per operation. Each setup's verdict says whether evenkeel
//! met the promise there: p1/mean at least 0.9, no second under half its mean, and a mean at
//! least InnoDB's. `holes.txt` holds the tables and each setup's command, `holes.json` every
//! run's figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, Parser};
use serde::Serialize;

use crate::cli::{run_sweep, BenchCommand};
use crate::error::{BenchError, BenchResult};
use crate::grid::{
    load_line, p1_over_mean, pick, remove_copies, results_dir, run_load, span_args, workload_line,
    write_results, BenchLine, SweepLine,
};

/// One setup.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub name: &'static str,
    /// What the setup is and what the seeds saw on it.
    pub what: &'static str,
    pub workload: &'static str,
    /// The workload's arguments shared by the load and the runs (warehouses or rows, redo).
    pub data_args: &'static str,
    /// The runs' own arguments (connections or clients, the buffer pool).
    pub run_args: &'static str,
}

/// Every setup runs with O_DIRECT, on every engine: the pool's misses are read from the
/// device, as InnoDB reads them by default on Linux, not from the OS page cache.
const FLUSH_METHOD: &str = "o_direct";

/// The setups, in the order they run.
pub const SETUPS: &[Setup] = &[
    Setup {
        name: "insert",
        what: "insert l.i1: 4 clients, 3 secondary indexes, 2 M rows (0.45-0.94 GB) over a \
               256 MiB pool, redo 2 x 32 MiB; 50 rows in and the 50 oldest out per synced \
               commit. Seed: the insert benchmark, where InnoDB pins its checkpoint age near \
               the async point with its pool nearly all dirty",
        workload: "insert",
        data_args: "-c 4 --rows 500000 --set log_file_size=32M --set log_files_in_group=2",
        run_args: "--set buffer_pool_size=256M",
    },
    Setup {
        name: "tpcc-small-log",
        what: "TPC-C, 4 warehouses (0.6-1.3 GB) over a 128 MiB pool, redo 2 x 8 MiB, 8 \
               connections. Seed: a redo log small against the write rate, the checkpoint \
               age at the async point",
        workload: "tpcc",
        data_args: "-w 4 --set log_file_size=8M --set log_files_in_group=2",
        run_args: "-c 8 --set buffer_pool_size=128M",
    },
    Setup {
        name: "tpcc-big-pool",
        what: "TPC-C, 4 warehouses in a 1 GiB pool (the data fits), redo 2 x 8 MiB, 8 \
               connections. Seed: a large pool with a small redo log, where the dirty pages \
               the log holds back are many and the flushing comes in bursts",
        workload: "tpcc",
        data_args: "-w 4 --set log_file_size=8M --set log_files_in_group=2",
        run_args: "-c 8 --set buffer_pool_size=1G",
    },
    Setup {
        name: "tpcc-32-clients",
        what: "TPC-C, 4 warehouses over a 128 MiB pool, redo 2 x 8 MiB, 32 connections on \
               2 cores. Seed: more clients than cores, every one of them stalled at once when \
               the log fills",
        workload: "tpcc",
        data_args: "-w 4 --set log_file_size=8M --set log_files_in_group=2",
        run_args: "-c 32 --set buffer_pool_size=128M",
    },
];

/// `evenkeel holes`.
#[derive(Debug, Clone, Args)]
pub struct HolesArgs {
    /// Directory for the data (`<dir>/tpcc/template-<engine>` and
    /// `<dir>/insert/template-<engine>` are kept, so a second run on the same directory loads
    /// nothing). A temporary directory when absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Results directory [default: ./evenkeel-results/holes-<timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Engines to run, in the order they run in each setup (InnoDB needs the workbench built
    /// with `--features innodb` and Debian's mariadb-server).
    #[arg(long, value_delimiter = ',', default_value = "evenkeel,innodb")]
    pub engines: Vec<String>,
    /// Setups to run (names from the list, comma-separated) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub setups: Vec<String>,
    /// Measured seconds of each run (TPC-C's duration, the l.i1 step's seconds after its
    /// warmup).
    #[arg(long, default_value_t = 120)]
    pub seconds: u64,
    /// Seconds each run warms up before measuring.
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// Tiny data in every setup (1 small warehouse, 5,000 rows per insert client): checks the
    /// machinery in seconds, measures nothing worth quoting.
    #[arg(long)]
    pub quick: bool,
    /// No progress bars or per-interval lines from the runs (the table comes last).
    #[arg(long, short)]
    pub quiet: bool,
}

/// One engine's figures in one setup.
#[derive(Debug, Clone, Serialize)]
pub struct HolesRun {
    pub engine: String,
    pub mean: f64,
    pub p1_over_mean: f64,
    pub detrended_p1_over_mean: f64,
    pub cv: f64,
    pub seconds_below_half_mean: u64,
    pub zero_seconds: u64,
    pub detrended_seconds_below_half: u64,
    pub checkpoint_age_max_pct: Option<f64>,
    pub dirty_pct_mean: Option<f64>,
    /// Foreground stalls of every kind the engine times, summed over threads, seconds.
    pub foreground_stall_s: Option<f64>,
    /// Seconds in which committing threads flushed at the checkpoint's sync point.
    pub sync_point_seconds: Option<u64>,
    pub device_stall_seconds: Option<u64>,
    /// Seconds the host's memory ran slow, the detrended p1/mean without them, and the
    /// throughput's correlation with the host's memory speed (`sampler::host`).
    pub host_slow_seconds: Option<u64>,
    pub detrended_p1_over_mean_host_ok: Option<f64>,
    pub host_speed_correlation: Option<f64>,
    pub write_kb_per_op: f64,
    pub seconds: u64,
    pub out_dir: PathBuf,
}

/// One setup's runs and the sweep that made them.
#[derive(Debug, Clone, Serialize)]
pub struct HolesSetup {
    pub name: String,
    pub what: String,
    pub command: String,
    /// The sweep's results: `sweep.html` has every engine on one chart.
    pub out_dir: PathBuf,
    pub runs: Vec<HolesRun>,
}

impl HolesSetup {
    pub fn run(&self, engine: &str) -> Option<&HolesRun> {
        self.runs.iter().find(|r| r.engine == engine)
    }

    /// Whether evenkeel kept the promise here: p1/mean at least 0.9, no second under half its
    /// mean, and (when InnoDB ran) a mean at least InnoDB's. None when evenkeel did not run.
    pub fn verdict(&self) -> Option<String> {
        let e = self.run("evenkeel")?;
        let mut misses = Vec::new();
        if e.p1_over_mean < 0.9 {
            // the miss stays a miss; where the host's memory slowed, say how level the rest was
            let host = match (e.host_slow_seconds, e.detrended_p1_over_mean_host_ok) {
                (Some(n), Some(ok)) if n > 0 => format!(
                    " (detrended {ok:.2} without the {n} s the host's memory ran slow{})",
                    e.host_speed_correlation
                        .map(|c| format!(", correlation with the host {c:.2}"))
                        .unwrap_or_default()
                ),
                _ => String::new(),
            };
            misses.push(format!("p1/mean {:.2} < 0.9{host}", e.p1_over_mean));
        }
        if e.seconds_below_half_mean > 0 {
            misses.push(format!("{} s under half", e.seconds_below_half_mean));
        }
        if let Some(i) = self.run("innodb") {
            if e.mean < i.mean {
                misses.push(format!("mean {:.0} < InnoDB's {:.0}", e.mean, i.mean));
            }
        }
        Some(if misses.is_empty() {
            "ok".to_string()
        } else {
            misses.join(", ")
        })
    }
}

/// What `holes` leaves behind.
#[derive(Debug, Clone, Serialize)]
pub struct HolesOutput {
    pub out_dir: PathBuf,
    pub engines: Vec<String>,
    pub setups: Vec<HolesSetup>,
}

/// The workload and its data's arguments, with the quick data and quiet output when asked.
fn data_args(s: &Setup, a: &HolesArgs) -> String {
    let mut line = workload_line(s.workload, s.data_args, a.quick, a.quiet);
    let _ = write!(line, " --set flush_method={FLUSH_METHOD}");
    line
}

/// The bench command line that loads `s`'s data for `engine` into `template`.
pub fn load_command(s: &Setup, a: &HolesArgs, engine: &str, template: &str, out: &str) -> String {
    load_line(&data_args(s, a), s.workload, engine, template, out)
}

/// The sweep command line of `s` (what a user would type to rerun it once its templates are
/// loaded).
pub fn setup_command(s: &Setup, a: &HolesArgs, data: &str, out: &str) -> String {
    let mut line = data_args(s, a);
    let _ = write!(
        line,
        " {}",
        s.run_args.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    line.push_str(&span_args(s.workload, a.seconds, a.warmup));
    let _ = write!(
        line,
        " --dir {data} --out {out} --vary engine={} --discard-copies",
        a.engines.join(",")
    );
    line
}

/// Written beside an insert template once its load finished: the insert benchmark's load
/// cannot be told from a half-made one by its files, and a sweep whose steps start at l.i1
/// runs on whatever the template holds.
fn loaded_marker(data: &Path, engine: &str) -> PathBuf {
    data.join(format!("loaded-{engine}"))
}

/// Loads `s`'s data for every engine into `<data>/template-<engine>` unless it is there.
/// TPC-C's loader finds a loaded template itself and keeps it.
fn load_templates(s: &Setup, a: &HolesArgs, data: &Path, out: &Path) -> BenchResult<()> {
    for engine in &a.engines {
        let template = data.join(format!("template-{engine}"));
        let marker = loaded_marker(data, engine);
        if s.workload == "insert" && marker.exists() && template.exists() {
            continue;
        }
        let line = load_command(
            s,
            a,
            engine,
            &template.display().to_string(),
            &out.join(format!("load-{engine}")).display().to_string(),
        );
        if !a.quiet {
            eprintln!("holes: {}: {engine}: evenkeel bench {line}", s.name);
        }
        let _ = std::fs::remove_file(&marker);
        run_load(&line, &format!("holes setup {}", s.name))?;
        if s.workload == "insert" {
            std::fs::write(&marker, b"l.i0,l.x loaded\n")
                .map_err(|e| BenchError::io(format!("write {}", marker.display()), e))?;
        }
    }
    Ok(())
}

/// Runs every setup: one engine sweep each.
pub fn run_holes(a: &HolesArgs) -> BenchResult<HolesOutput> {
    if a.engines.is_empty() {
        return Err(BenchError::Usage("--engines: give at least one".into()));
    }
    let setups = pick(&a.setups, SETUPS, |s| s.name, "--setups")?;
    let data = crate::run::DataDir::new(a.dir.as_deref())?;
    let out_dir = results_dir(a.out.as_deref(), "holes")?;
    // Every command is parsed, and every engine's options checked, before anything loads.
    let mut planned = Vec::new();
    for s in &setups {
        let setup_data = data.path.join(s.workload);
        let setup_out = out_dir.join(s.name);
        let line = setup_command(
            s,
            a,
            &setup_data.display().to_string(),
            &setup_out.display().to_string(),
        );
        let cmd = SweepLine::try_parse_from(line.split_whitespace())
            .map_err(|e| BenchError::Usage(format!("holes setup {}: {e}", s.name)))?
            .cmd;
        for engine in &a.engines {
            let load = load_command(s, a, engine, "/nonexistent", "/nonexistent");
            match BenchLine::try_parse_from(load.split_whitespace())
                .map_err(|e| BenchError::Usage(format!("holes setup {}: {e}", s.name)))?
                .cmd
            {
                BenchCommand::Tpcc(t) => t.options().map(|_| ())?,
                BenchCommand::Insert(i) => i.options().map(|_| ())?,
                BenchCommand::Kv(_) => {}
            }
        }
        planned.push((s, setup_data, setup_out, line, cmd));
    }
    let mut done = Vec::new();
    for (s, setup_data, setup_out, line, cmd) in planned {
        if !a.quiet {
            eprintln!("holes: {}: evenkeel sweep {line}", s.name);
        }
        std::fs::create_dir_all(&setup_data)
            .map_err(|e| BenchError::io(format!("create {}", setup_data.display()), e))?;
        load_templates(s, a, &setup_data, &setup_out)?;
        // the sweep removes each run's copy as it ends (--discard-copies); what is left is an
        // interrupted run's
        remove_copies(&setup_data, "engine=")?;
        let sweep = run_sweep(&cmd)?;
        let runs = sweep
            .runs
            .iter()
            .zip(&a.engines)
            .map(|(r, engine)| {
                let m = &r.summary;
                HolesRun {
                    engine: engine.clone(),
                    mean: m.throughput_mean,
                    p1_over_mean: p1_over_mean(m),
                    detrended_p1_over_mean: m.detrended_p1_over_mean,
                    cv: m.throughput_cv,
                    seconds_below_half_mean: m.seconds_below_half_mean,
                    zero_seconds: m.zero_seconds,
                    detrended_seconds_below_half: m.detrended_seconds_below_half,
                    checkpoint_age_max_pct: m.checkpoint_age_max_pct,
                    dirty_pct_mean: m.dirty_pct_mean,
                    foreground_stall_s: m.foreground_stall_s,
                    sync_point_seconds: m.sync_point_seconds,
                    device_stall_seconds: m.device_stall_seconds,
                    host_slow_seconds: m.host_slow_seconds,
                    detrended_p1_over_mean_host_ok: m.detrended_p1_over_mean_host_ok,
                    host_speed_correlation: m.host_speed_correlation,
                    write_kb_per_op: m.write_kb_per_op,
                    seconds: m.duration_s as u64,
                    out_dir: r.out_dir.clone(),
                }
            })
            .collect();
        done.push(HolesSetup {
            name: s.name.to_string(),
            what: s.what.to_string(),
            command: format!("evenkeel sweep {line}"),
            out_dir: sweep.out_dir.clone(),
            runs,
        });
        // Written after every setup, so an interrupted run keeps what it measured.
        write_outputs(&out_dir, &a.engines, &done)?;
    }
    Ok(HolesOutput {
        out_dir,
        engines: a.engines.clone(),
        setups: done,
    })
}

fn write_outputs(out: &Path, engines: &[String], setups: &[HolesSetup]) -> BenchResult<()> {
    let json = serde_json::json!({ "engines": engines, "setups": setups });
    write_results(out, "holes", &json, &render_text(setups))
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// The table: a row per setup and engine, then each setup's verdict, what it is, its command
/// and where its chart is.
pub fn render_text(setups: &[HolesSetup]) -> String {
    let mut o = String::new();
    let head = [
        "setup",
        "engine",
        "mean",
        "p1/mean",
        "detr p1/m",
        "CV",
        "s<half",
        "zero s",
        "ckpt max%",
        "dirty%",
        "stall s",
        "sync s",
        "dev stall s",
        "host slow s",
        "detr host-ok",
        "host corr",
        "KB wr/op",
    ];
    let width = setups
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0)
        .max(head[0].len());
    let ewidth = setups
        .iter()
        .flat_map(|s| s.runs.iter().map(|r| r.engine.len()))
        .max()
        .unwrap_or(0)
        .max(head[1].len());
    let _ = write!(o, "{:width$} {:ewidth$}", head[0], head[1]);
    for h in &head[2..] {
        let _ = write!(o, " {h:>11}");
    }
    o.push('\n');
    for s in setups {
        for r in &s.runs {
            let cells = [
                format!("{:.1}", r.mean),
                format!("{:.2}", r.p1_over_mean),
                format!("{:.3}", r.detrended_p1_over_mean),
                format!("{:.3}", r.cv),
                r.seconds_below_half_mean.to_string(),
                r.zero_seconds.to_string(),
                opt(r.checkpoint_age_max_pct, |v| format!("{v:.1}")),
                opt(r.dirty_pct_mean, |v| format!("{v:.1}")),
                opt(r.foreground_stall_s, |v| format!("{v:.1}")),
                opt(r.sync_point_seconds, |v| v.to_string()),
                opt(r.device_stall_seconds, |v| v.to_string()),
                opt(r.host_slow_seconds, |v| v.to_string()),
                opt(r.detrended_p1_over_mean_host_ok, |v| format!("{v:.3}")),
                opt(r.host_speed_correlation, |v| format!("{v:.2}")),
                format!("{:.1}", r.write_kb_per_op),
            ];
            let _ = write!(o, "{:width$} {:ewidth$}", s.name, r.engine);
            for c in &cells {
                let _ = write!(o, " {c:>11}");
            }
            o.push('\n');
        }
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "mean: New-Order/s (TPC-C), rows/s (insert l.i1); detr p1/m: p1 over the mean of \
         throughput relative to its 30 s rolling median (holes show, drift does not); s<half: \
         seconds under half the mean; ckpt max%: the checkpoint age's maximum, % of the redo \
         log; stall s: foreground stalls the engine times, summed over threads (InnoDB times \
         none); sync s: seconds commits flushed at the sync point; dev stall s: seconds a \
         durable 4 KiB write took 100 ms or more; host slow s: seconds the host's memory \
         answered 10% or more slower than its 30 s rolling median (a CPU-bound engine runs at \
         that speed); detr host-ok: the detrended p1/mean without those seconds; host corr: \
         the detrended throughput's correlation with the host's memory speed; KB wr/op: the \
         device's bytes written per operation.\n"
    );
    let _ = writeln!(
        o,
        "verdict: evenkeel's p1/mean at least 0.9, no second under half its mean, a mean at \
         least InnoDB's"
    );
    for s in setups {
        let _ = writeln!(
            o,
            "{:width$} {}",
            s.name,
            s.verdict().unwrap_or_else(|| "-".into())
        );
    }
    o.push('\n');
    for s in setups {
        let _ = writeln!(
            o,
            "{}: {}\n  {}\n  chart: {}",
            s.name,
            s.what,
            s.command,
            s.out_dir.join("sweep.html").display()
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SweepCommand;

    fn args() -> HolesArgs {
        HolesArgs {
            dir: None,
            out: None,
            engines: vec!["evenkeel".into(), "innodb".into()],
            setups: vec![],
            seconds: 120,
            warmup: 20,
            quick: false,
            quiet: false,
        }
    }

    #[test]
    fn every_setup_parses_as_loads_and_a_sweep() {
        let mut a = args();
        for quick in [false, true] {
            a.quick = quick;
            for s in SETUPS {
                let line = setup_command(s, &a, "/tmp/d", "/tmp/o");
                let parsed = SweepLine::try_parse_from(line.split_whitespace())
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", s.name));
                assert!(line.contains("--vary engine=evenkeel,innodb"), "{line}");
                assert!(line.contains("--set flush_method=o_direct"), "{line}");
                match parsed.cmd {
                    SweepCommand::Tpcc { args, .. } => {
                        assert_eq!(s.workload, "tpcc");
                        assert_eq!((args.warmup, args.duration), (20, 120), "{line}");
                    }
                    SweepCommand::Insert { args, .. } => {
                        assert_eq!(s.workload, "insert");
                        let o = args.options().expect("valid");
                        assert_eq!(o.steps, [crate::insert::step::Step::InsertI1]);
                        assert_eq!(o.max_seconds(), Some(140), "{line}");
                    }
                }
                for engine in ["evenkeel", "innodb"] {
                    let load = load_command(s, &a, engine, "/tmp/d/t", "/tmp/o/l");
                    BenchLine::try_parse_from(load.split_whitespace())
                        .unwrap_or_else(|e| panic!("{}: {load}: {e}", s.name));
                    assert!(load.contains(&format!("--engine {engine}")), "{load}");
                    // the load's pool is LOAD_POOL, whatever the runs' pool
                    assert!(load.contains("buffer_pool_size=1G"), "{load}");
                    assert!(!load.contains("--warmup"), "{load}");
                }
            }
        }
    }

    /// The TPC-C setups share one template per engine: the same data arguments, so the same
    /// warehouses and the same redo log (fixed at create).
    #[test]
    fn the_tpcc_setups_load_the_same_data() {
        let a = args();
        let loads: Vec<String> = SETUPS
            .iter()
            .filter(|s| s.workload == "tpcc")
            .map(|s| load_command(s, &a, "evenkeel", "/t", "/o"))
            .collect();
        assert_eq!(loads.len(), 3);
        assert!(loads.windows(2).all(|w| w[0] == w[1]), "{loads:?}");
    }

    #[test]
    fn an_unknown_setup_is_named_with_the_valid_ones() {
        let mut a = args();
        a.setups = vec!["tpcc-tiny".into()];
        let e = pick(&a.setups, SETUPS, |s| s.name, "--setups")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tpcc-tiny") && e.contains("tpcc-big-pool"),
            "{e}"
        );
    }

    fn run(engine: &str, mean: f64, p1: f64, below_half: u64) -> HolesRun {
        HolesRun {
            engine: engine.into(),
            mean,
            p1_over_mean: p1,
            detrended_p1_over_mean: p1,
            cv: 0.05,
            seconds_below_half_mean: below_half,
            zero_seconds: 0,
            detrended_seconds_below_half: below_half,
            checkpoint_age_max_pct: Some(80.0),
            dirty_pct_mean: Some(50.0),
            foreground_stall_s: None,
            sync_point_seconds: None,
            device_stall_seconds: Some(0),
            host_slow_seconds: Some(2),
            detrended_p1_over_mean_host_ok: Some(0.95),
            host_speed_correlation: Some(0.6),
            write_kb_per_op: 100.0,
            seconds: 120,
            out_dir: PathBuf::from("/o"),
        }
    }

    #[test]
    fn the_verdict_names_each_miss() {
        let setup = |runs| HolesSetup {
            name: "s".into(),
            what: "w".into(),
            command: "c".into(),
            out_dir: PathBuf::from("/o"),
            runs,
        };
        let ok = setup(vec![
            run("evenkeel", 900.0, 0.92, 0),
            run("innodb", 300.0, 0.5, 7),
        ]);
        assert_eq!(ok.verdict().as_deref(), Some("ok"));
        let bad = setup(vec![
            run("evenkeel", 200.0, 0.85, 2),
            run("innodb", 300.0, 0.9, 0),
        ]);
        let v = bad.verdict().expect("evenkeel ran");
        for needle in [
            "p1/mean 0.85 < 0.9",
            "2 s under half",
            "mean 200 < InnoDB's 300",
            "detrended 0.95 without the 2 s the host's memory ran slow, correlation with the host 0.60",
        ] {
            assert!(v.contains(needle), "{needle}: {v}");
        }
        // without InnoDB, the mean is not judged
        let alone = setup(vec![run("evenkeel", 200.0, 0.95, 0)]);
        assert_eq!(alone.verdict().as_deref(), Some("ok"));
        assert_eq!(setup(vec![run("innodb", 1.0, 1.0, 0)]).verdict(), None);
        let text = render_text(&[ok, bad]);
        assert!(text.contains("innodb") && text.contains("900.0"), "{text}");
        assert!(
            text.contains("host slow s") && text.contains("0.950"),
            "{text}"
        );
    }
}
