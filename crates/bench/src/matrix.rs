//! `evenkeel matrix`: every flush policy over a fixed grid of setups, back to back per cell,
//! and one table of how level each ran.
//!
//! A cell is one sweep (`evenkeel sweep <workload> ... --vary adaptive_flushing=<policies>`):
//! its data is loaded once into `<dir>/<cell>/template` and every policy runs on a fresh copy
//! of it, one after another, so within a cell the policies differ only in the policy. The
//! grid spans what the seeds say decides whether an update-in-place engine falls into holes:
//! the redo log's size against the buffer pool (1/16 to 1/2), the data against the pool (5x
//! and more over it, and a pool that holds it all), and more clients than cores (64 on 2),
//! for TPC-C and for the insert benchmark's l.i1. Each cell's command is printed, so a cell
//! can be rerun on its own.
//!
//! Every run is measured after the same warmup (`--warmup`): TPC-C's own, and the first
//! seconds of each insert cell's l.i1 step, which starts on a fresh copy of the template and
//! for its first seconds runs at another rate than later; measured from its first second, an
//! insert cell's detrended p1/mean would be set by that start, for every policy alike.
//!
//! The table gives, per cell and policy, throughput p1 over its mean after detrending (the
//! per-second throughput over its 30-second rolling median: holes show, slow drift does
//! not; `stability::detrended`), and marks the cells where steady is below the best classic
//! policy or below 0.9. `matrix.txt` holds it with the plain p1/mean, the mean and the seconds
//! under half the detrended mean; `matrix.json` holds every run's summary figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, Parser};
use serde::Serialize;

use crate::cli::run_sweep;
use crate::error::{BenchError, BenchResult};
use crate::grid::{
    load_line, p1_over_mean, pick, remove_copies, results_dir, run_load, span_args, workload_line,
    write_results, SweepLine,
};
use crate::report::summary::STEAL_WARN_PCT;

/// Steal in one second, % of one CPU, from which a matrix run is stolen from
/// ([`MatrixRun::stolen`]).
pub const STEAL_SECOND_PCT: f64 = 25.0;

/// One setup of the grid.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    pub name: &'static str,
    /// What the cell tests, in a user's words.
    pub what: &'static str,
    pub workload: &'static str,
    /// The sweep's arguments, without the buffer pool, the policy, the durations and the
    /// directories.
    pub args: &'static str,
    /// The buffer pool of the runs (the data is loaded with [`crate::grid::LOAD_POOL`]).
    pub pool: &'static str,
}

/// The grid. Pools and logs are small so that each cell is IO-bound on a 2-core machine
/// with a few GB of disk, and the whole grid runs in under an hour at the default durations.
pub const CELLS: &[Cell] = &[
    Cell {
        name: "tpcc-log-1/16",
        what: "TPC-C 4 warehouses over a 64 MiB pool, redo 2 x 2 MiB (1/16 of the pool)",
        workload: "tpcc",
        args: "-w 4 -c 8 --set log_file_size=2M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "tpcc-log-1/2",
        what: "TPC-C 4 warehouses over a 64 MiB pool, redo 2 x 16 MiB (1/2 of the pool)",
        workload: "tpcc",
        args: "-w 4 -c 8 --set log_file_size=16M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "tpcc-64-clients",
        what: "TPC-C 4 warehouses over a 64 MiB pool, redo 2 x 4 MiB, 64 connections",
        workload: "tpcc",
        args: "-w 4 -c 64 --set log_file_size=4M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "tpcc-big-pool",
        what: "TPC-C 4 warehouses in a 1 GiB pool (data fits), redo 2 x 4 MiB",
        workload: "tpcc",
        args: "-w 4 -c 8 --set log_file_size=4M \
               --set log_files_in_group=2",
        pool: "1G",
    },
    Cell {
        name: "insert-log-1/16",
        what: "insert l.i1, 4 clients, 3 secondary indexes over a 64 MiB pool, redo 2 x 2 MiB",
        workload: "insert",
        args: "-c 4 --rows 500000 --set log_file_size=2M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "insert-log-1/2",
        what: "insert l.i1, 4 clients over a 64 MiB pool, redo 2 x 16 MiB (1/2 of the pool)",
        workload: "insert",
        args: "-c 4 --rows 500000 --set log_file_size=16M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "insert-16-clients",
        what: "insert l.i1, 16 clients over a 64 MiB pool, redo 2 x 4 MiB",
        workload: "insert",
        args: "-c 16 --rows 125000 --set log_file_size=4M \
               --set log_files_in_group=2",
        pool: "64M",
    },
    Cell {
        name: "insert-big-pool",
        what: "insert l.i1, 4 clients in a 1 GiB pool (data fits), redo 2 x 4 MiB",
        workload: "insert",
        args: "-c 4 --rows 500000 --set log_file_size=4M \
               --set log_files_in_group=2",
        pool: "1G",
    },
];

/// `evenkeel matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// Directory for the cells' data (`<dir>/<cell>/template` is kept, so a second matrix
    /// on the same directory loads nothing). A temporary directory when absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Results directory [default: ./evenkeel-results/matrix-<timestamp>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Flush policies to compare, in the order they run in each cell.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fixed,innodb55,estimate,keep_average,innodb80,steady"
    )]
    pub policies: Vec<String>,
    /// Cells to run (names from the grid, comma-separated) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub cells: Vec<String>,
    /// Measured seconds of each TPC-C run and each l.i1 step.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Rounds per cell: each round runs every policy once, in the order given, each on a fresh
    /// copy of the cell's data, so a policy's runs are spread over the cell's time instead of
    /// side by side. The tables give each policy's median over its rounds (with two, their
    /// mean), and matrix.txt each round's detrended p1/mean.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub rounds: u32,
    /// Seconds each run warms up before measuring: TPC-C's warmup, and the first seconds of
    /// each insert cell's l.i1 step.
    #[arg(long, default_value_t = 10)]
    pub warmup: u64,
    /// Runs again, up to this many times, a run from which the hypervisor stole 10% of a CPU
    /// or more on average, or 25% in one second (steal: on a shared VM it slows a CPU-bound
    /// second by as much, and one such run sets a policy's median): right after its round,
    /// alone, on a fresh copy.
    /// The tables use the last run; matrix.txt lists the runs replaced and marks with `*` a
    /// figure whose run the host still stole from. 0 keeps every run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=5))]
    pub rerun_stolen: u32,
    /// Tiny data in every cell (1 small warehouse, 5,000 rows per insert client): checks the
    /// machinery in seconds, measures nothing worth quoting.
    #[arg(long)]
    pub quick: bool,
    /// No progress bars or per-interval lines from the runs (each run still prints its
    /// summary; the table comes last).
    #[arg(long, short)]
    pub quiet: bool,
}

/// One policy's figures in one cell.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixRun {
    pub policy: String,
    /// The round it ran in, from 1 (0: a policy's median over its rounds).
    pub round: u32,
    pub mean: f64,
    pub p1_over_mean: f64,
    pub detrended_p1_over_mean: f64,
    pub detrended_seconds_below_half: u64,
    /// Seconds the device stalled (the probe's durable write took 100 ms or more).
    #[serde(default)]
    pub device_stall_seconds: Option<u64>,
    /// The detrended p1/mean over the seconds the device did not stall.
    #[serde(default)]
    pub detrended_p1_over_mean_device_ok: Option<f64>,
    /// The hypervisor's steal over the measured seconds, mean % of one CPU.
    #[serde(default)]
    pub steal_pct_mean: Option<f64>,
    /// The hypervisor's steal in the run's worst second, % of one CPU.
    #[serde(default)]
    pub steal_pct_max: Option<f64>,
    pub seconds: u64,
    pub out_dir: PathBuf,
}

impl MatrixRun {
    fn of(policy: &str, round: u32, r: &crate::run::RunOutput) -> MatrixRun {
        let s = &r.summary;
        MatrixRun {
            policy: policy.to_string(),
            round,
            mean: s.throughput_mean,
            p1_over_mean: p1_over_mean(s),
            detrended_p1_over_mean: s.detrended_p1_over_mean,
            detrended_seconds_below_half: s.detrended_seconds_below_half,
            device_stall_seconds: s.device_stall_seconds,
            detrended_p1_over_mean_device_ok: s.detrended_p1_over_mean_device_ok,
            steal_pct_mean: s.steal_pct_mean,
            steal_pct_max: s.steal_pct_max,
            seconds: s.duration_s as u64,
            out_dir: r.out_dir.clone(),
        }
    }

    /// Whether the host stole enough CPU from this run that it does not compare with a quiet
    /// one: [`STEAL_WARN_PCT`] on average (the run summary's warning), or
    /// [`STEAL_SECOND_PCT`] in one second. The second: a 30 s run's p1 is its lowest second,
    /// and one second a quarter of a CPU short is a CPU-bound second an eighth slower on 2
    /// cores, while the mean over the run stays near nothing.
    pub fn stolen(&self) -> bool {
        self.steal_pct_mean.is_some_and(|s| s >= STEAL_WARN_PCT)
            || self.steal_pct_max.is_some_and(|s| s >= STEAL_SECOND_PCT)
    }
}

/// One cell's runs and the sweep that made them.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixCell {
    pub name: String,
    pub what: String,
    pub command: String,
    pub runs: Vec<MatrixRun>,
    /// Runs the host stole from, each replaced by a run of the same policy and round
    /// (`--rerun-stolen`).
    #[serde(default)]
    pub replaced: Vec<MatrixRun>,
}

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl MatrixCell {
    /// A policy's runs, in round order.
    fn rounds(&self, policy: &str) -> Vec<&MatrixRun> {
        self.runs.iter().filter(|r| r.policy == policy).collect()
    }

    /// A policy's figures: its one run, or each figure's median over its rounds (round 0).
    pub fn run(&self, policy: &str) -> Option<MatrixRun> {
        let runs = self.rounds(policy);
        match runs[..] {
            [] => None,
            [one] => Some(one.clone()),
            _ => {
                let m = |f: &dyn Fn(&MatrixRun) -> f64| median(runs.iter().map(|r| f(r)).collect());
                Some(MatrixRun {
                    policy: policy.to_string(),
                    round: 0,
                    mean: m(&|r| r.mean),
                    p1_over_mean: m(&|r| r.p1_over_mean),
                    detrended_p1_over_mean: m(&|r| r.detrended_p1_over_mean),
                    detrended_seconds_below_half: m(&|r| r.detrended_seconds_below_half as f64)
                        .round() as u64,
                    device_stall_seconds: runs
                        .iter()
                        .map(|r| r.device_stall_seconds)
                        .sum::<Option<u64>>(),
                    detrended_p1_over_mean_device_ok: runs
                        .iter()
                        .map(|r| r.detrended_p1_over_mean_device_ok)
                        .collect::<Option<Vec<f64>>>()
                        .map(median),
                    // the worst round's, so a median a stolen round entered is marked
                    steal_pct_mean: runs
                        .iter()
                        .filter_map(|r| r.steal_pct_mean)
                        .max_by(f64::total_cmp),
                    steal_pct_max: runs
                        .iter()
                        .filter_map(|r| r.steal_pct_max)
                        .max_by(f64::total_cmp),
                    seconds: runs.iter().map(|r| r.seconds).sum(),
                    out_dir: runs[0].out_dir.clone(),
                })
            }
        }
    }

    /// The classic policy with the highest detrended p1/mean (its median over rounds), and
    /// that figure.
    pub fn best_classic(&self) -> Option<(String, f64)> {
        let mut names: Vec<&str> = self.runs.iter().map(|r| r.policy.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter(|p| *p != "steady")
            .filter_map(|p| self.run(p).map(|r| (r.policy, r.detrended_p1_over_mean)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// How far apart two runs of the same policy land in this cell: the median over the
    /// policies that ran more than one round of their rounds' range (highest minus lowest
    /// detrended p1/mean). None with one round: a single run per policy says nothing about
    /// its own noise.
    pub fn spread(&self) -> Option<f64> {
        let mut names: Vec<&str> = self.runs.iter().map(|r| r.policy.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let ranges: Vec<f64> = names
            .into_iter()
            .map(|p| self.rounds(p))
            .filter(|r| r.len() > 1)
            .map(|r| {
                let v = r.iter().map(|x| x.detrended_p1_over_mean);
                v.clone().fold(f64::MIN, f64::max) - v.fold(f64::MAX, f64::min)
            })
            .collect();
        (!ranges.is_empty()).then(|| median(ranges))
    }

    /// What the promise says of steady in this cell: at least the best classic policy's
    /// detrended p1/mean, and at least 0.9. None when steady did not run. A shortfall that
    /// the rounds' own spread ([`Self::spread`]) covers is said as a tie, with both figures:
    /// the runs cannot tell the two policies apart, in either direction.
    pub fn verdict(&self) -> Option<String> {
        let steady = self.run("steady")?.detrended_p1_over_mean;
        let mut misses = Vec::new();
        if let Some((name, best)) = self.best_classic() {
            if steady < best {
                match self.spread() {
                    Some(s) if best - steady <= s => misses.push(format!(
                        "tie with {name} (-{:.3}, rounds spread {s:.3})",
                        best - steady
                    )),
                    _ => misses.push(format!("below {name}")),
                }
            }
        }
        if steady < 0.9 {
            misses.push("below 0.9".to_string());
        }
        Some(if misses.is_empty() {
            "ok".to_string()
        } else {
            misses.join(", ")
        })
    }
}

/// What a matrix leaves behind.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixOutput {
    pub out_dir: PathBuf,
    pub policies: Vec<String>,
    pub cells: Vec<MatrixCell>,
}

fn check_policies(policies: &[String]) -> BenchResult<()> {
    if policies.is_empty() {
        return Err(BenchError::Usage("--policies: give at least one".into()));
    }
    for p in policies {
        if !evenkeel::options::FlushPolicy::NAMES.contains(&p.as_str()) {
            return Err(BenchError::Usage(format!(
                "--policies: {p:?} is not a flush policy; valid: {}",
                evenkeel::options::FlushPolicy::NAMES.join(", ")
            )));
        }
    }
    Ok(())
}

/// Workload arguments shared by a cell's load and its runs.
fn workload_args(cell: &Cell, a: &MatrixArgs) -> String {
    workload_line(cell.workload, cell.args, a.quick, a.quiet)
}

/// The command line that loads `cell`'s data into `template` (a `bench` command).
pub fn load_command(cell: &Cell, a: &MatrixArgs, template: &str, out: &str) -> String {
    load_line(
        &workload_args(cell, a),
        cell.workload,
        "evenkeel",
        template,
        out,
    )
}

/// The sweep command line of `cell` over `policies` (what a user would type to rerun it once
/// its template is loaded).
pub fn cell_command(
    cell: &Cell,
    a: &MatrixArgs,
    policies: &[String],
    data: &str,
    out: &str,
) -> String {
    let mut line = workload_args(cell, a);
    let _ = write!(line, " --set buffer_pool_size={}", cell.pool);
    line.push_str(&span_args(cell.workload, a.seconds, a.warmup));
    let _ = write!(
        line,
        " --engine evenkeel --dir {data} --out {out} --vary adaptive_flushing={} --discard-copies",
        policies.join(",")
    );
    line
}

/// Loads `cell`'s data into `<data>/template` unless it is there: TPC-C's warehouses, or the
/// insert benchmark's l.i0 and l.x, with a pool of [`crate::grid::LOAD_POOL`].
fn load_template(cell: &Cell, a: &MatrixArgs, data: &Path, out: &Path) -> BenchResult<()> {
    let template = data.join("template");
    if template.join(evenkeel::DATA_FILE).exists() {
        return Ok(());
    }
    let line = load_command(
        cell,
        a,
        &template.display().to_string(),
        &out.join("load").display().to_string(),
    );
    if !a.quiet {
        eprintln!("matrix: {}: loading: evenkeel bench {line}", cell.name);
    }
    run_load(&line, &format!("matrix cell {}", cell.name))
}

/// Runs the grid: one sweep per cell, the policies back to back in each.
pub fn run_matrix(a: &MatrixArgs) -> BenchResult<MatrixOutput> {
    check_policies(&a.policies)?;
    let cells = pick(&a.cells, CELLS, |c| c.name, "--cells")?;
    let data = crate::run::DataDir::new(a.dir.as_deref())?;
    let out_dir = results_dir(a.out.as_deref(), "matrix")?;
    let mut done = Vec::new();
    for cell in &cells {
        let slug = cell.name.replace('/', "_");
        let cell_data = data.path.join(&slug);
        let cell_out = out_dir.join(&slug);
        // One sweep per round, each into its own results directory when there are several;
        // every command is parsed before the template is loaded, so a bad one costs no load.
        let sweep_line = |policies: &[String], out: &Path| {
            cell_command(
                cell,
                a,
                policies,
                &cell_data.display().to_string(),
                &out.display().to_string(),
            )
        };
        let parse = |line: String| {
            SweepLine::try_parse_from(line.split_whitespace())
                .map(|parsed| parsed.cmd)
                .map_err(|e| BenchError::Usage(format!("matrix cell {}: {e}", cell.name)))
        };
        let line = sweep_line(&a.policies, &cell_out);
        if !a.quiet {
            eprintln!("matrix: {}: evenkeel sweep {line}", cell.name);
        }
        let round_out = |round: u32| {
            if a.rounds == 1 {
                cell_out.clone()
            } else {
                cell_out.join(format!("round-{round}"))
            }
        };
        let sweeps = (1..=a.rounds)
            .map(|round| Ok((round, parse(sweep_line(&a.policies, &round_out(round)))?)))
            .collect::<BenchResult<Vec<_>>>()?;
        load_template(cell, a, &cell_data, &cell_out)?;
        let (mut runs, mut replaced) = (Vec::new(), Vec::new());
        for (round, cmd) in &sweeps {
            let round = *round;
            if a.rounds > 1 && !a.quiet {
                eprintln!("matrix: {}: round {round} of {}", cell.name, a.rounds);
            }
            // the sweep removes each run's copy as it ends (--discard-copies); what is left
            // is an interrupted matrix's, and would not leave room for this round's
            remove_copies(&cell_data, "adaptive_flushing=")?;
            let sweep = run_sweep(cmd)?;
            let mut this: Vec<MatrixRun> = sweep
                .runs
                .iter()
                .zip(&a.policies)
                .map(|(r, policy)| MatrixRun::of(policy, round, r))
                .collect();
            for run in &mut this {
                for again in 1..=a.rerun_stolen {
                    if !run.stolen() {
                        break;
                    }
                    eprintln!(
                        "matrix: {}: round {round}: the hypervisor stole {:.0}% of a CPU from \
                         {}'s run on average, {:.0}% in its worst second; running it again \
                         ({again} of at most {})",
                        cell.name,
                        run.steal_pct_mean.unwrap_or(0.0),
                        run.steal_pct_max.unwrap_or(0.0),
                        run.policy,
                        a.rerun_stolen
                    );
                    let out = round_out(round).join(format!("rerun-{again}"));
                    let cmd = parse(sweep_line(std::slice::from_ref(&run.policy), &out))?;
                    remove_copies(&cell_data, "adaptive_flushing=")?;
                    let sweep = run_sweep(&cmd)?;
                    let Some(r) = sweep.runs.first() else {
                        break;
                    };
                    let new = MatrixRun::of(&run.policy, round, r);
                    replaced.push(std::mem::replace(run, new));
                }
            }
            runs.extend(this);
        }
        done.push(MatrixCell {
            name: cell.name.to_string(),
            what: cell.what.to_string(),
            command: format!("evenkeel sweep {line}"),
            runs,
            replaced,
        });
        // Written after every cell, so an interrupted grid keeps what it measured.
        write_outputs(&out_dir, &a.policies, &done)?;
    }
    Ok(MatrixOutput {
        out_dir,
        policies: a.policies.clone(),
        cells: done,
    })
}

fn write_outputs(out: &Path, policies: &[String], cells: &[MatrixCell]) -> BenchResult<()> {
    let json = serde_json::json!({ "policies": policies, "cells": cells });
    write_results(out, "matrix", &json, &render_text(policies, cells))
}

/// The tables: detrended p1/mean per cell and policy with the verdict (three decimals, as the
/// verdict compares them, so a 0.896 is not shown as a 0.90 "below 0.9"), then the plain
/// p1/mean, the mean and the seconds under half the detrended mean, then each cell's command.
pub fn render_text(policies: &[String], cells: &[MatrixCell]) -> String {
    let mut o = String::new();
    let width = cells.iter().map(|c| c.name.len()).max().unwrap_or(4).max(4);
    let table = |o: &mut String, title: &str, f: &dyn Fn(&MatrixRun) -> String, verdict: bool| {
        let _ = writeln!(o, "{title}");
        let _ = write!(o, "{:width$}", "cell");
        for p in policies {
            let _ = write!(o, " {p:>12}");
        }
        if verdict {
            let _ = write!(o, "  verdict");
        }
        o.push('\n');
        for c in cells {
            let _ = write!(o, "{:width$}", c.name);
            for p in policies {
                let v = c.run(p).map_or("-".to_string(), |r| f(&r));
                let _ = write!(o, " {v:>12}");
            }
            if verdict {
                let _ = write!(o, "  {}", c.verdict().unwrap_or_else(|| "-".into()));
            }
            o.push('\n');
        }
        o.push('\n');
    };
    let rounds = cells
        .iter()
        .flat_map(|c| c.runs.iter().map(|r| r.round))
        .max()
        .unwrap_or(1);
    let of_rounds = if rounds > 1 {
        format!(", each policy's median over {rounds} rounds")
    } else {
        String::new()
    };
    let tie = if rounds > 1 {
        " (a shortfall no larger than the cell's round-to-round spread, the median over the \
         policies of their rounds' range, is a tie: the runs cannot tell the two apart)"
    } else {
        ""
    };
    table(
        &mut o,
        &format!(
            "p1/mean of per-second throughput, detrended (30 s rolling median){of_rounds}; \
             steady's verdict: at least the best classic policy and 0.9{tie}"
        ),
        &|r| format!("{:.3}{}", r.detrended_p1_over_mean, star(r)),
        true,
    );
    table(
        &mut o,
        "detrended p1/mean over the seconds the device did not stall (a durable 4 KiB write \
         under 100 ms): how level each policy ran where the storage let it",
        &|r| {
            r.detrended_p1_over_mean_device_ok
                .map_or("-".into(), |v| format!("{v:.3}"))
        },
        false,
    );
    table(
        &mut o,
        "seconds the device stalled (summed over rounds)",
        &|r| r.device_stall_seconds.map_or("-".into(), |v| v.to_string()),
        false,
    );
    table(
        &mut o,
        "p1/mean, plain",
        &|r| format!("{:.2}", r.p1_over_mean),
        false,
    );
    table(
        &mut o,
        "mean throughput (New-Order/s for TPC-C, rows/s for insert)",
        &|r| format!("{:.0}", r.mean),
        false,
    );
    table(
        &mut o,
        "seconds under half the detrended mean",
        &|r| r.detrended_seconds_below_half.to_string(),
        false,
    );
    if rounds > 1 {
        let _ = writeln!(
            o,
            "detrended p1/mean in each round (round 1/round 2/...), and the cell's spread"
        );
        let _ = write!(o, "{:width$}", "cell");
        for p in policies {
            let _ = write!(o, " {p:>20}");
        }
        let _ = write!(o, " {:>8}", "spread");
        o.push('\n');
        for c in cells {
            let _ = write!(o, "{:width$}", c.name);
            for p in policies {
                let v: Vec<String> = c
                    .rounds(p)
                    .iter()
                    .map(|r| format!("{:.3}{}", r.detrended_p1_over_mean, star(r)))
                    .collect();
                let v = if v.is_empty() {
                    "-".into()
                } else {
                    v.join("/")
                };
                let _ = write!(o, " {v:>20}");
            }
            let spread = c.spread().map_or("-".into(), |s| format!("{s:.3}"));
            let _ = write!(o, " {spread:>8}");
            o.push('\n');
        }
        o.push('\n');
    }
    if cells.iter().any(|c| c.runs.iter().any(MatrixRun::stolen)) {
        let _ = writeln!(
            o,
            "*: {} from the run (or from one of the rounds a median is over), which slows a \
             CPU-bound second as much: the figure does not compare with a quiet run's\n",
            stolen_rule()
        );
    }
    if cells.iter().any(|c| !c.replaced.is_empty()) {
        let _ = writeln!(
            o,
            "runs replaced because {} from them (--rerun-stolen): detrended p1/mean and steal \
             (mean/worst second), then the run that replaced it",
            stolen_rule()
        );
        for c in cells {
            for old in &c.replaced {
                let new = c
                    .runs
                    .iter()
                    .find(|r| r.policy == old.policy && r.round == old.round);
                let pct = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{s:.0}%"));
                let steal =
                    |r: &MatrixRun| format!("{}/{}", pct(r.steal_pct_mean), pct(r.steal_pct_max));
                let _ = write!(
                    o,
                    "  {} {} round {}: {:.3} (steal {})",
                    c.name,
                    old.policy,
                    old.round,
                    old.detrended_p1_over_mean,
                    steal(old)
                );
                if let Some(n) = new {
                    let _ = write!(
                        o,
                        " -> {:.3} (steal {})",
                        n.detrended_p1_over_mean,
                        steal(n)
                    );
                }
                o.push('\n');
            }
        }
        o.push('\n');
    }
    for c in cells {
        let _ = writeln!(o, "{}: {}\n  {}", c.name, c.what, c.command);
    }
    o
}

/// [`MatrixRun::stolen`]'s rule, in words.
fn stolen_rule() -> String {
    format!(
        "the hypervisor stole {STEAL_WARN_PCT:.0}% of a CPU or more on average, or \
         {STEAL_SECOND_PCT:.0}% in one second,"
    )
}

/// `*` after a figure whose run the host stole from ([`MatrixRun::stolen`]).
fn star(r: &MatrixRun) -> &'static str {
    if r.stolen() {
        "*"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SweepCommand;
    use crate::grid::BenchLine;

    fn args() -> MatrixArgs {
        MatrixArgs {
            dir: None,
            out: None,
            policies: vec!["innodb80".into(), "steady".into()],
            cells: vec![],
            seconds: 30,
            rounds: 1,
            warmup: 10,
            rerun_stolen: 1,
            quick: false,
            quiet: false,
        }
    }

    #[test]
    fn every_cell_parses_as_a_load_and_a_sweep() {
        let mut a = args();
        for quick in [false, true] {
            a.quick = quick;
            for c in CELLS {
                let line = cell_command(c, &a, &a.policies, "/tmp/d", "/tmp/o");
                SweepLine::try_parse_from(line.split_whitespace())
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", c.name));
                let line = load_command(c, &a, "/tmp/d/template", "/tmp/o/load");
                BenchLine::try_parse_from(line.split_whitespace())
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", c.name));
            }
        }
    }

    #[test]
    fn every_cell_is_measured_after_the_warmup() {
        let mut a = args();
        a.warmup = 7;
        a.seconds = 20;
        for quick in [false, true] {
            a.quick = quick;
            for c in CELLS {
                let line = cell_command(c, &a, &a.policies, "/tmp/d", "/tmp/o");
                assert!(line.contains(" --warmup 7 "), "{}: {line}", c.name);
                let parsed = SweepLine::try_parse_from(line.split_whitespace())
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", c.name));
                match parsed.cmd {
                    SweepCommand::Tpcc { args, .. } => {
                        assert_eq!(c.workload, "tpcc");
                        assert_eq!((args.warmup, args.duration), (7, 20), "{line}");
                    }
                    SweepCommand::Insert { args, .. } => {
                        assert_eq!(c.workload, "insert");
                        let o = args.options().expect("valid");
                        assert_eq!((o.warmup, o.max_step_seconds), (7, 20), "{line}");
                        assert_eq!(o.steps, [crate::insert::step::Step::InsertI1]);
                        // the l.i1 step's deadline: its warmup, then the measured seconds
                        assert_eq!(o.max_seconds(), Some(27));
                    }
                }
                // the load runs l.i0 and l.x, which have no warmup
                let load = load_command(c, &a, "/tmp/d/template", "/tmp/o/load");
                assert!(!load.contains("--warmup"), "{}: {load}", c.name);
            }
        }
    }

    /// A run of `policy` in `round` whose p1/mean, plain and detrended, is `d`.
    fn run_of(policy: &str, round: u32, d: f64) -> MatrixRun {
        MatrixRun {
            policy: policy.into(),
            round,
            mean: 100.0,
            p1_over_mean: d,
            detrended_p1_over_mean: d,
            detrended_seconds_below_half: 0,
            device_stall_seconds: None,
            detrended_p1_over_mean_device_ok: None,
            steal_pct_mean: None,
            steal_pct_max: None,
            seconds: 30,
            out_dir: PathBuf::new(),
        }
    }

    #[test]
    fn the_verdict_compares_steady_with_the_best_classic_policy_and_0_9() {
        let run = |p: &str, d: f64| run_of(p, 1, d);
        let cell = |s: f64| MatrixCell {
            name: "c".into(),
            what: String::new(),
            command: String::new(),
            runs: vec![run("fixed", 0.5), run("innodb80", 0.93), run("steady", s)],
            replaced: vec![],
        };
        assert_eq!(cell(0.95).verdict().as_deref(), Some("ok"));
        assert_eq!(cell(0.92).verdict().as_deref(), Some("below innodb80"));
        let low = MatrixCell {
            runs: vec![run("fixed", 0.5), run("steady", 0.8)],
            ..cell(0.0)
        };
        assert_eq!(low.verdict().as_deref(), Some("below 0.9"));
        let text = render_text(
            &["fixed".into(), "innodb80".into(), "steady".into()],
            &[cell(0.92)],
        );
        assert!(text.contains("below innodb80"), "{text}");
    }

    #[test]
    fn rounds_are_judged_by_each_policys_median() {
        let run = |p: &str, round: u32, d: f64| MatrixRun {
            policy: p.into(),
            round,
            mean: 100.0 * d,
            p1_over_mean: d,
            detrended_p1_over_mean: d,
            detrended_seconds_below_half: 0,
            device_stall_seconds: Some(round as u64),
            detrended_p1_over_mean_device_ok: Some(d + 0.01),
            steal_pct_mean: Some(1.0),
            steal_pct_max: Some(3.0),
            seconds: 30,
            out_dir: PathBuf::new(),
        };
        // innodb80's best round (0.95) beats steady's rounds, its median (0.88) does not
        let cell = MatrixCell {
            name: "c".into(),
            what: String::new(),
            command: String::new(),
            runs: vec![
                run("innodb80", 1, 0.95),
                run("steady", 1, 0.92),
                run("innodb80", 2, 0.81),
                run("steady", 2, 0.90),
            ],
            replaced: vec![],
        };
        let steady = cell.run("steady").expect("steady ran");
        assert_eq!(steady.round, 0);
        assert!((steady.detrended_p1_over_mean - 0.91).abs() < 1e-9);
        assert_eq!(steady.seconds, 60);
        assert_eq!(steady.device_stall_seconds, Some(3));
        assert!((steady.detrended_p1_over_mean_device_ok.unwrap_or(0.0) - 0.92).abs() < 1e-9);
        assert_eq!(
            cell.best_classic().map(|b| b.0).as_deref(),
            Some("innodb80")
        );
        assert_eq!(cell.verdict().as_deref(), Some("ok"));
        // ranges: innodb80 0.14, steady 0.02 -> median 0.08
        assert!((cell.spread().unwrap_or(0.0) - 0.08).abs() < 1e-9);
        let text = render_text(
            &["innodb80".into(), "steady".into()],
            std::slice::from_ref(&cell),
        );
        assert!(text.contains("median over 2 rounds"), "{text}");
        assert!(text.contains("0.950/0.810"), "{text}");
        assert!(text.contains("0.920/0.900"), "{text}");
        // a shortfall inside the rounds' spread is a tie, one outside it is not
        let with_steady = |a: f64, b: f64| MatrixCell {
            runs: vec![
                run("innodb80", 1, 0.95),
                run("steady", 1, a),
                run("innodb80", 2, 0.93),
                run("steady", 2, b),
            ],
            ..cell.clone()
        };
        // innodb80 0.94 (range 0.02), steady 0.93 (range 0.02): spread 0.02, short by 0.01
        assert_eq!(
            with_steady(0.94, 0.92).verdict().as_deref(),
            Some("tie with innodb80 (-0.010, rounds spread 0.020)")
        );
        // steady 0.905 (range 0.01): spread 0.015, short by 0.035
        assert_eq!(
            with_steady(0.91, 0.90).verdict().as_deref(),
            Some("below innodb80")
        );
        let one_round = MatrixCell {
            runs: vec![run("innodb80", 1, 0.95), run("steady", 1, 0.94)],
            ..cell.clone()
        };
        assert_eq!(one_round.spread(), None);
        assert_eq!(one_round.verdict().as_deref(), Some("below innodb80"));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn runs_the_host_stole_from_are_marked_and_the_replaced_ones_listed() {
        let run = |p: &str, round: u32, d: f64, steal: f64| MatrixRun {
            steal_pct_mean: Some(steal),
            steal_pct_max: Some(2.0 * steal),
            ..run_of(p, round, d)
        };
        assert!(!run("fixed", 1, 0.9, STEAL_WARN_PCT - 0.1).stolen());
        assert!(run("fixed", 1, 0.9, STEAL_WARN_PCT).stolen());
        // a burst in one second is enough, however low the run's mean
        let burst = |max: f64| MatrixRun {
            steal_pct_mean: Some(1.0),
            steal_pct_max: Some(max),
            ..run("fixed", 1, 0.9, 0.0)
        };
        assert!(!burst(STEAL_SECOND_PCT - 0.1).stolen());
        assert!(burst(STEAL_SECOND_PCT).stolen());
        let cell = MatrixCell {
            name: "c".into(),
            what: String::new(),
            command: String::new(),
            runs: vec![
                run("fixed", 1, 0.93, 2.0),
                run("steady", 1, 0.92, 12.0),
                run("fixed", 2, 0.95, 0.0),
                run("steady", 2, 0.94, 1.0),
            ],
            replaced: vec![run("fixed", 1, 0.37, 14.0)],
        };
        // a median that a stolen round entered is marked as one
        assert!(cell.run("steady").is_some_and(|r| r.stolen()));
        assert!(cell.run("fixed").is_some_and(|r| !r.stolen()));
        let text = render_text(&["fixed".into(), "steady".into()], &[cell]);
        assert!(text.contains("0.930*"), "{text}");
        assert!(text.contains("0.920*/0.940"), "{text}");
        assert!(text.contains("0.930/0.950"), "{text}");
        assert!(
            text.contains("c fixed round 1: 0.370 (steal 14%/28%) -> 0.930 (steal 2%/4%)"),
            "{text}"
        );
        assert!(text.contains("*: the hypervisor stole 10%"), "{text}");
        let quiet = MatrixCell {
            name: "c".into(),
            what: String::new(),
            command: String::new(),
            runs: vec![run("steady", 1, 0.92, 0.0)],
            replaced: vec![],
        };
        let text = render_text(&["steady".into()], &[quiet]);
        assert!(!text.contains('*') && !text.contains("replaced"), "{text}");
    }

    #[test]
    fn bad_cells_and_policies_are_refused_with_the_valid_ones() {
        let mut a = args();
        a.cells = vec!["nope".into()];
        let e = pick(&a.cells, CELLS, |c| c.name, "--cells")
            .expect_err("bad cell")
            .to_string();
        assert!(e.contains("tpcc-log-1/16"), "{e}");
        let e = check_policies(&["fast".into()])
            .expect_err("bad policy")
            .to_string();
        assert!(e.contains("steady"), "{e}");
    }
}
