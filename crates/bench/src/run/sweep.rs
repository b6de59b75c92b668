//! `sweep <tpcc|insert> --vary name=v1,v2,...`: the same workload once per value of one
//! setting (an engine option, passed as `--set name=value`, or one of the workload's own
//! arguments), each into its own results directory, then `sweep.html` (one table, overlaid
//! throughput charts), `sweep.txt` (seed 002's plain table) and `sweep.json`.

use std::path::{Path, PathBuf};

use crate::cli::{InsertArgs, TpccArgs};
use crate::error::{BenchError, BenchResult};
use crate::report::sweep::{render, text_table, SweepRun};
use crate::report::{now_unix_s, utc_stamp};
use crate::run::{CommonOptions, RunOutput};

/// The varied setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Varied {
    pub name: String,
    pub values: Vec<String>,
}

/// What a sweep leaves behind.
#[derive(Debug, Clone)]
pub struct SweepOutput {
    pub out_dir: PathBuf,
    pub runs: Vec<RunOutput>,
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> BenchResult<T> {
    v.parse()
        .map_err(|_| BenchError::Usage(format!("--vary {name}: {v:?} is not a number")))
}

impl Varied {
    pub fn parse(s: &str) -> BenchResult<Varied> {
        let (name, vals) = s.split_once('=').ok_or_else(|| {
            BenchError::Usage(format!("--vary expects name=v1,v2,..., got {s:?}"))
        })?;
        let values: Vec<String> = vals
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if name.trim().is_empty() || values.is_empty() {
            return Err(BenchError::Usage(format!(
                "--vary expects name=v1,v2,..., got {s:?}"
            )));
        }
        Ok(Varied {
            name: name.trim().to_string(),
            values,
        })
    }

    fn label(&self, value: &str) -> String {
        format!("{}={value}", self.name)
    }

    /// Set `value` on TPC-C arguments: a workload argument if one has that name, else an engine option.
    pub fn apply_tpcc(&self, a: &mut TpccArgs, value: &str) -> BenchResult<()> {
        match self.name.as_str() {
            "warehouses" => a.warehouses = parse_num(&self.name, value)?,
            "connections" => a.connections = parse_num(&self.name, value)?,
            "duration" => a.duration = parse_num(&self.name, value)?,
            "warmup" => a.warmup = parse_num(&self.name, value)?,
            "mix" => a.mix = value.to_string(),
            _ => a.common.set.push(self.label(value)),
        }
        Ok(())
    }

    /// Set `value` on insert-benchmark arguments.
    pub fn apply_insert(&self, a: &mut InsertArgs, value: &str) -> BenchResult<()> {
        match self.name.as_str() {
            "clients" => a.clients = parse_num(&self.name, value)?,
            "rows" => a.rows = parse_num(&self.name, value)?,
            "rows_i1" => a.rows_i1 = parse_num(&self.name, value)?,
            "rows_i2" => a.rows_i2 = parse_num(&self.name, value)?,
            _ => a.common.set.push(self.label(value)),
        }
        Ok(())
    }
}

fn write(path: &Path, text: &str) -> BenchResult<()> {
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// Run `one(value, out, dir)` for every value, where `out` is the run's results directory
/// inside the sweep's and `dir` its data directory (a subdirectory of `--dir` when given, so
/// runs never share data), then write the sweep's own files.
pub fn run_sweep_with(
    workload: &str,
    v: &Varied,
    base: &CommonOptions,
    mut one: impl FnMut(&str, PathBuf, Option<PathBuf>) -> BenchResult<RunOutput>,
) -> BenchResult<SweepOutput> {
    let out_dir = base.out.clone().unwrap_or_else(|| {
        PathBuf::from("evenkeel-results")
            .join(format!("sweep-{workload}-{}", utc_stamp(now_unix_s())))
    });
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| BenchError::io(format!("create {}", out_dir.display()), e))?;
    let mut runs = Vec::new();
    for value in &v.values {
        let label = v.label(value);
        runs.push(one(
            value,
            out_dir.join(&label),
            base.dir.as_ref().map(|p| p.join(&label)),
        )?);
    }
    let sweep: Vec<SweepRun> = runs
        .iter()
        .zip(&v.values)
        .map(|(r, value)| SweepRun {
            label: v.label(value),
            summary: r.summary.clone(),
            rows: r.rows.clone(),
        })
        .collect();
    write(
        &out_dir.join("sweep.html"),
        &render(workload, &v.name, &sweep),
    )?;
    write(&out_dir.join("sweep.txt"), &text_table(&sweep))?;
    let summaries: Vec<_> = runs.iter().map(|r| &r.summary).collect();
    let json =
        serde_json::to_string_pretty(&summaries).map_err(|e| BenchError::Data(e.to_string()))?;
    write(&out_dir.join("sweep.json"), &json)?;
    if !base.quiet && !base.json {
        print!("{}", text_table(&sweep));
        println!("sweep results in {}", out_dir.display());
    }
    Ok(SweepOutput { out_dir, runs })
}
