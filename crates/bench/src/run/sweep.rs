//! `sweep <tpcc|insert> --vary name=v1,v2,...`: the same workload once per value of one
//! setting (an engine option, passed as `--set name=value`, or one of the workload's own
//! arguments), each into its own results directory, then `sweep.html` (one table, overlaid
//! throughput charts), `sweep.txt` (iibench's plain table) and `sweep.json`.
//!
//! Data: when the varied setting does not shape the data (a flush policy, io_capacity, the
//! buffer pool size, connections — not warehouses, insert clients or rows, nor an option the
//! engine fixes at create such as evenkeel's log_file_size or page_size), the sweep loads
//! once into `<dir>/template` and gives every run a fresh copy of it in `<dir>/<name>=<value>`,
//! made while the engine is closed: every value starts from the same pages and a clean
//! shutdown, and a sweep over four flush policies loads once, not four times. With `--dir` the
//! template stays, so the next sweep on that directory loads nothing; without it everything
//! lives in a temporary directory. For the insert benchmark the template holds l.i0 and l.x
//! (when in --steps) and each run does the remaining steps. Otherwise each run loads its own
//! data in `<dir>/<name>=<value>` (reused when already loaded there).
//!
//! `--vary engine=evenkeel,innodb,...` runs the same workload on each engine: each engine
//! loads its own template once (`<dir>/template-<engine>`), every engine's options are
//! checked before anything loads, and the sweep page puts the engines side by side.

use std::path::{Path, PathBuf};

use crate::error::{BenchError, BenchResult};
use crate::insert::step::Step;
use crate::report::summary::column_notes_text;
use crate::report::sweep::{render, text_table, SweepRun};
use crate::report::{now_unix_s, utc_stamp};
use crate::run::engine::{is_persistent, shapes_data};
use crate::run::{copy_dir, CommonOptions, RunOutput};

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

    /// True when runs over this setting can share one loaded copy of TPC-C data: anything but
    /// the warehouses or an option the engine fixes at create.
    pub fn shares_tpcc_load(&self, engine: &str) -> bool {
        if self.is_engine() {
            return self.values.iter().all(|e| is_persistent(e));
        }
        is_persistent(engine)
            && !["warehouses", "items", "customers"].contains(&self.name.as_str())
            && !shapes_data(engine, &self.name)
    }

    /// The same for the insert benchmark: not clients or rows (what l.i0 loads), not a
    /// create-time option, and only when some step follows the load steps.
    pub fn shares_insert_load(&self, engine: &str, steps: &[Step]) -> bool {
        if self.is_engine() {
            return self.values.iter().all(|e| is_persistent(e))
                && steps.iter().any(|s| !s.is_load());
        }
        is_persistent(engine)
            && !["clients", "rows"].contains(&self.name.as_str())
            && !shapes_data(engine, &self.name)
            && steps.iter().any(|s| !s.is_load())
    }

    /// `name=value`: a run's label, its directory and the `--set` that applies it.
    pub fn label(&self, value: &str) -> String {
        format!("{}={value}", self.name)
    }

    /// True when the sweep compares engines.
    pub fn is_engine(&self) -> bool {
        self.name == "engine"
    }

    /// The template a value's run is copied from: one per engine in an engine sweep.
    fn template_name(&self, value: &str) -> String {
        if self.is_engine() {
            format!("template-{value}")
        } else {
            "template".to_string()
        }
    }
}

fn write(path: &Path, text: &str) -> BenchResult<()> {
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// Loads a sweep's template: called with the template's data directory, the sweep's results
/// directory and the value whose run needs it (the engine, in an engine sweep); the engine
/// must be closed when it returns.
pub type LoadOnce<'a> = &'a dyn Fn(&Path, &Path, &str) -> BenchResult<()>;

/// Run `one(value, out, dir)` for every value, where `out` is the run's results directory
/// inside the sweep's and `dir` its data directory, then write the sweep's own files. With
/// `load_once`, the data is loaded once into `<dir>/template` and copied to each run's `dir`
/// before it starts; without, `dir` is a subdirectory of `--dir` when given (runs never share
/// data) and `None` otherwise (a fresh temporary directory per run). A run's copy is removed
/// when it ends if it lies in a temporary directory, or with `discard_copies`.
pub fn run_sweep_with(
    workload: &str,
    v: &Varied,
    base: &CommonOptions,
    load_once: Option<LoadOnce<'_>>,
    discard_copies: bool,
    mut one: impl FnMut(&str, PathBuf, Option<PathBuf>) -> BenchResult<RunOutput>,
) -> BenchResult<SweepOutput> {
    let out_dir = base.out.clone().unwrap_or_else(|| {
        PathBuf::from("evenkeel-results")
            .join(format!("sweep-{workload}-{}", utc_stamp(now_unix_s())))
    });
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| BenchError::io(format!("create {}", out_dir.display()), e))?;
    let say = |s: &str| {
        if !base.quiet {
            eprintln!("{s}");
        }
    };
    // The temporary root lives until the sweep is done.
    let mut temp_root = None;
    let root = match load_once {
        Some(_) => Some(match &base.dir {
            Some(d) => d.clone(),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("evenkeel-sweep-")
                    .tempdir()
                    .map_err(|e| BenchError::io("create a temporary data directory", e))?;
                let p = t.path().to_path_buf();
                temp_root = Some(t);
                p
            }
        }),
        None => {
            say(&format!(
                "sweep: {} shapes the data, so each run loads its own",
                v.name
            ));
            None
        }
    };
    let mut loaded: Vec<PathBuf> = Vec::new();
    let mut runs = Vec::new();
    for value in &v.values {
        let label = v.label(value);
        let dir = match (&root, load_once) {
            (Some(root), Some(load)) => {
                let t = root.join(v.template_name(value));
                if !loaded.contains(&t) {
                    say(&format!(
                        "sweep: loading once into {} (reused if loaded); each run starts from a copy",
                        t.display()
                    ));
                    load(&t, &out_dir, value)?;
                    loaded.push(t.clone());
                }
                let d = root.join(&label);
                copy_dir(&t, &d)?;
                Some((d, true))
            }
            _ => base.dir.as_ref().map(|p| (p.join(&label), false)),
        };
        let run = one(
            value,
            out_dir.join(&label),
            dir.as_ref().map(|(d, _)| d.clone()),
        );
        if let Some((d, true)) = &dir {
            if temp_root.is_some() || discard_copies {
                // free the space for the next copy (also when the run failed)
                std::fs::remove_dir_all(d)
                    .map_err(|e| BenchError::io(format!("remove {}", d.display()), e))?;
            }
        }
        runs.push(run?);
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
        let text = text_table(&sweep);
        print!("{text}");
        let head: Vec<&str> = text.lines().next().unwrap_or("").split(' ').collect();
        print!("where:\n{}", column_notes_text(&head));
        println!("sweep results in {}", out_dir.display());
    }
    Ok(SweepOutput { out_dir, runs })
}
