//! Choosing and opening an engine for a run: the engine name, its options as `name=value`
//! pairs plus an optional config file, and the directory. Option syntax is checked here so
//! bad `--set` values fail before anything is loaded; option names and ranges are the engine's
//! to judge (evenkeel's Options report the valid range).

use std::path::{Path, PathBuf};

use crate::driver::model::ModelDriver;
use crate::driver::Driver;
use crate::error::{BenchError, BenchResult};

/// Engines this build can drive.
pub const ENGINES: &[&str] = &["evenkeel", "model"];

/// Which engine, configured how.
#[derive(Debug, Clone, Default)]
pub struct EngineSpec {
    pub engine: String,
    pub config: Option<PathBuf>,
    /// `name=value` pairs, applied after the config file.
    pub set: Vec<String>,
}

impl EngineSpec {
    /// evenkeel with an optional config file and `name=value` overrides.
    pub fn evenkeel(config: Option<PathBuf>, set: Vec<String>) -> Self {
        EngineSpec {
            engine: "evenkeel".into(),
            config,
            set,
        }
    }

    /// Split `--set` values into pairs, rejecting anything without a name and '='.
    pub fn pairs(&self) -> BenchResult<Vec<(String, String)>> {
        self.set
            .iter()
            .map(|s| match s.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                _ => Err(BenchError::Usage(format!(
                    "--set expects name=value, got {s:?}"
                ))),
            })
            .collect()
    }

    pub fn validate(&self) -> BenchResult<()> {
        if !ENGINES.contains(&self.engine.as_str()) {
            return Err(BenchError::Usage(format!(
                "unknown engine {:?}: expected one of {}",
                self.engine,
                ENGINES.join(", ")
            )));
        }
        if let Some(c) = &self.config {
            if !c.is_file() {
                return Err(BenchError::Usage(format!(
                    "--config {}: no such file",
                    c.display()
                )));
            }
        }
        self.pairs().map(|_| ())
    }
}

/// Open (or create) the engine in `dir`.
pub fn open_driver(spec: &EngineSpec, dir: &Path) -> BenchResult<Box<dyn Driver>> {
    spec.validate()?;
    match spec.engine.as_str() {
        "model" => {
            if !spec.set.is_empty() || spec.config.is_some() {
                return Err(BenchError::Usage(
                    "the model engine takes no --set or --config".into(),
                ));
            }
            Ok(Box::new(ModelDriver::new()))
        }
        _ => open_evenkeel(spec, dir),
    }
}

#[cfg(feature = "evenkeel")]
fn open_evenkeel(spec: &EngineSpec, dir: &Path) -> BenchResult<Box<dyn Driver>> {
    let d =
        crate::driver::evenkeel::EvenkeelDriver::open(dir, spec.config.as_deref(), &spec.pairs()?)?;
    Ok(Box::new(d))
}

#[cfg(not(feature = "evenkeel"))]
fn open_evenkeel(_spec: &EngineSpec, _dir: &Path) -> BenchResult<Box<dyn Driver>> {
    Err(BenchError::Usage(
        "this build has no evenkeel driver (build evenkeel-bench with feature \"evenkeel\"); use --engine model".into(),
    ))
}

/// evenkeel options that only take effect when the database is created (the files' own
/// values win on open), so data loaded with one value cannot stand in for another.
const EVENKEEL_CREATE_TIME: &[&str] = &[
    "page_size",
    "log_file_size",
    "log_files_in_group",
    "log_block_size",
];

/// True when `option` shapes the data on disk for `engine`: a sweep over it must load once per
/// value rather than copy one loaded template.
pub fn shapes_data(engine: &str, option: &str) -> bool {
    let lower = option.trim().to_ascii_lowercase().replace('-', "_");
    let name = lower.strip_prefix("innodb_").unwrap_or(&lower);
    engine == "evenkeel" && EVENKEEL_CREATE_TIME.contains(&name)
}

/// True when the engine keeps its data in the directory (so size and device I/O mean something).
pub fn is_persistent(engine: &str) -> bool {
    engine != "model"
}
