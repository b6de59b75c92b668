//! grid: what the commands that run many sweeps over a fixed set of setups share
//! (`evenkeel matrix`, `evenkeel holes`): the command lines they build for a setup's load and
//! its runs, parsing and running them, picking setups by name, removing the runs' copies of a
//! template, the results directory and the files written after every setup.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Parser;

use crate::cli::{BenchCommand, SweepCommand};
use crate::error::{BenchError, BenchResult};
use crate::report::{now_unix_s, utc_stamp};
use crate::run::insert::run_insert;
use crate::run::tpcc::prepare_tpcc;

/// The buffer pool a setup's data is loaded with (the runs' pools are their own): a small
/// pool and a small log make the load (the insert benchmark's index build above all) take many
/// minutes, and each run starts from a copy of the loaded data, closed cleanly, whatever pool
/// loaded it.
pub const LOAD_POOL: &str = "1G";

/// The workload and the arguments a setup's load and runs share (`args`, whitespace
/// normalised), with tiny data when `quick` (1 small warehouse, 5,000 rows per insert client)
/// and no progress output when `quiet` or `quick`.
pub fn workload_line(workload: &str, args: &str, quick: bool, quiet: bool) -> String {
    let mut line = format!(
        "{workload} {}",
        args.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    if quick {
        line.push_str(if workload == "tpcc" {
            " -w 1 --items 2000 --customers 300"
        } else {
            " --rows 5000"
        });
    }
    if quiet || quick {
        line.push_str(" --quiet");
    }
    line
}

/// `base` (a [`workload_line`]) made the bench command that loads the data for `engine` into
/// `template` with a [`LOAD_POOL`] pool: TPC-C's warehouses, or the insert benchmark's l.i0 and
/// l.x.
pub fn load_line(base: &str, workload: &str, engine: &str, template: &str, out: &str) -> String {
    let mut line = base.to_string();
    let _ = write!(
        line,
        " --engine {engine} --set buffer_pool_size={LOAD_POOL} --dir {template} --out {out}"
    );
    if workload == "insert" {
        line.push_str(" --steps l.i0,l.x --max-step-seconds 3600");
    }
    line
}

/// What a run of `workload` measures: TPC-C's duration and warmup, or the l.i1 step's seconds
/// after its warmup.
pub fn span_args(workload: &str, seconds: u64, warmup: u64) -> String {
    if workload == "tpcc" {
        format!(" --duration {seconds} --warmup {warmup}")
    } else {
        format!(" --steps l.i1 --rows-i1 100000000 --max-step-seconds {seconds} --warmup {warmup}")
    }
}

/// Parses and runs a load command line ([`load_line`]); `who` names the setup in errors.
pub fn run_load(line: &str, who: &str) -> BenchResult<()> {
    let parsed = BenchLine::try_parse_from(line.split_whitespace())
        .map_err(|e| BenchError::Usage(format!("{who} load: {e}")))?;
    match parsed.cmd {
        BenchCommand::Tpcc(t) => prepare_tpcc(&t.options()?).map(|_| ()),
        BenchCommand::Insert(i) => run_insert(&i.options()?).map(|_| ()),
        BenchCommand::Kv(_) => Err(BenchError::Usage(format!(
            "{who}: kv is not a workload here"
        ))),
    }
}

/// The results directory: `out`, or `./evenkeel-results/<what>-<timestamp>`; created.
pub fn results_dir(out: Option<&Path>, what: &str) -> BenchResult<PathBuf> {
    let dir = out.map(Path::to_path_buf).unwrap_or_else(|| {
        PathBuf::from("evenkeel-results").join(format!("{what}-{}", utc_stamp(now_unix_s())))
    });
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
    Ok(dir)
}

/// Writes `<what>.json` (`json`) and `<what>.txt` (`text`) into `out`.
pub fn write_results(
    out: &Path,
    what: &str,
    json: &serde_json::Value,
    text: &str,
) -> BenchResult<()> {
    let json = serde_json::to_string_pretty(json)
        .map_err(|e| BenchError::Data(format!("encoding {what}.json: {e}")))?;
    for (name, body) in [
        (format!("{what}.json"), json.as_str()),
        (format!("{what}.txt"), text),
    ] {
        let p = out.join(name);
        std::fs::write(&p, body)
            .map_err(|e| BenchError::io(format!("write {}", p.display()), e))?;
    }
    Ok(())
}

/// A run's p1 over its mean (0 for a run that did nothing).
pub fn p1_over_mean(s: &crate::report::summary::Summary) -> f64 {
    if s.throughput_mean > 0.0 {
        s.throughput_p1 / s.throughput_mean
    } else {
        0.0
    }
}

/// A sweep command line (without the program name); a later `-w` or `--rows` (quick data)
/// overrides the setup's.
#[derive(Parser)]
#[command(no_binary_name = true, args_override_self = true)]
pub struct SweepLine {
    #[command(subcommand)]
    pub cmd: SweepCommand,
}

/// A bench command line (without the program name), as [`SweepLine`].
#[derive(Parser)]
#[command(no_binary_name = true, args_override_self = true)]
pub struct BenchLine {
    #[command(subcommand)]
    pub cmd: BenchCommand,
}

/// The items of `all` named in `wanted`, in `wanted`'s order (all of them when it is empty);
/// an unknown name is a usage error naming `flag` and the valid names.
pub fn pick<T: Copy>(
    wanted: &[String],
    all: &[T],
    name: impl Fn(&T) -> &'static str,
    flag: &str,
) -> BenchResult<Vec<T>> {
    if wanted.is_empty() {
        return Ok(all.to_vec());
    }
    wanted
        .iter()
        .map(|w| {
            all.iter().find(|x| name(x) == w).copied().ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(&name).collect();
                BenchError::Usage(format!("{flag}: no {w:?}; valid: {}", names.join(", ")))
            })
        })
        .collect()
}

/// Removes runs' copies of a template in `data` (the directories whose names start with
/// `prefix`, a sweep's `<setting>=`), keeping the templates: the copies an interrupted grid
/// left behind (its sweeps remove each copy as its run ends, `--discard-copies`), which would
/// not leave room for the next on a small disk.
pub fn remove_copies(data: &Path, prefix: &str) -> BenchResult<()> {
    let entries = std::fs::read_dir(data)
        .map_err(|e| BenchError::io(format!("list {}", data.display()), e))?;
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            std::fs::remove_dir_all(e.path())
                .map_err(|err| BenchError::io(format!("remove {}", e.path().display()), err))?;
        }
    }
    Ok(())
}
