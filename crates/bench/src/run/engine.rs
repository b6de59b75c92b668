//! Choosing and opening an engine for a run: the engine name, its options as `name=value`
//! pairs plus an optional config file, and the directory. Option syntax is checked here so
//! bad `--set` values fail before anything is loaded; option names and ranges are the engine's
//! to judge (evenkeel's Options report the valid range, each peer refuses what it has no
//! equivalent for). A pair may be scoped to one engine as `ENGINE:name=value` (e.g.
//! `--set evenkeel:adaptive_flushing=steady`), so a sweep over engines can pass each its own
//! options; pairs scoped to another engine are left out.

use std::path::{Path, PathBuf};

use crate::driver::model::ModelDriver;
use crate::driver::Driver;
use crate::error::{BenchError, BenchResult};

/// Every engine the workbench knows, built in or not.
pub const ALL_ENGINES: &[&str] = &["evenkeel", "innodb", "rocksdb", "sqlite", "lmdb", "model"];

/// Engines this build can drive.
pub const ENGINES: &[&str] = &[
    "evenkeel",
    #[cfg(feature = "innodb")]
    "innodb",
    #[cfg(feature = "rocksdb")]
    "rocksdb",
    #[cfg(feature = "sqlite")]
    "sqlite",
    #[cfg(feature = "lmdb")]
    "lmdb",
    "model",
];

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

    /// Split `--set` values into pairs for this engine, rejecting anything without a name and
    /// '='; `ENGINE:name=value` pairs for another engine are left out.
    pub fn pairs(&self) -> BenchResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        for s in &self.set {
            let Some((k, v)) = s.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
                return Err(BenchError::Usage(format!(
                    "--set expects name=value or ENGINE:name=value, got {s:?}"
                )));
            };
            let name = match k.split_once(':') {
                Some((engine, name)) => {
                    let engine = engine.trim();
                    if !ALL_ENGINES.contains(&engine) {
                        return Err(BenchError::Usage(format!(
                            "--set {s:?}: unknown engine {engine:?} before ':': expected one of {}",
                            ALL_ENGINES.join(", ")
                        )));
                    }
                    if engine != self.engine {
                        continue;
                    }
                    name
                }
                None => k,
            };
            out.push((name.trim().to_string(), v.trim().to_string()));
        }
        Ok(out)
    }

    pub fn validate(&self) -> BenchResult<()> {
        if !ENGINES.contains(&self.engine.as_str()) {
            let why = if ALL_ENGINES.contains(&self.engine.as_str()) {
                format!(
                    "this build has no {} driver (build evenkeel-bench with --features {}, or \
                     --features peers for every peer)",
                    self.engine, self.engine
                )
            } else {
                format!("unknown engine {:?}", self.engine)
            };
            return Err(BenchError::Usage(format!(
                "{why}: expected one of {}",
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

/// Check the engine and its options without opening anything (an engine sweep checks every
/// engine before the first one loads). evenkeel's options are checked when it opens.
pub fn check_options(spec: &EngineSpec) -> BenchResult<()> {
    spec.validate()?;
    let pairs = spec.pairs()?;
    let config = spec.config.as_deref();
    let _ = (&pairs, config);
    match spec.engine.as_str() {
        #[cfg(feature = "innodb")]
        "innodb" => crate::driver::innodb::check_options(config, &pairs),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => crate::driver::rocksdb::check_options(config, &pairs),
        #[cfg(feature = "sqlite")]
        "sqlite" => crate::driver::sqlite::check_options(config, &pairs),
        #[cfg(feature = "lmdb")]
        "lmdb" => crate::driver::lmdb::check_options(config, &pairs),
        _ => Ok(()),
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
        #[cfg(feature = "innodb")]
        "innodb" => Ok(Box::new(crate::driver::innodb::InnodbDriver::open(
            dir,
            spec.config.as_deref(),
            &spec.pairs()?,
        )?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(crate::driver::rocksdb::RocksDriver::open(
            dir,
            spec.config.as_deref(),
            &spec.pairs()?,
        )?)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(crate::driver::sqlite::SqliteDriver::open(
            dir,
            spec.config.as_deref(),
            &spec.pairs()?,
        )?)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Ok(Box::new(crate::driver::lmdb::LmdbDriver::open(
            dir,
            spec.config.as_deref(),
            &spec.pairs()?,
        )?)),
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
    match engine {
        "evenkeel" => EVENKEEL_CREATE_TIME.contains(&name),
        // InnoDB resizes its redo log at start; only the page size is fixed at create.
        "innodb" | "sqlite" => name == "page_size",
        _ => false,
    }
}

/// The subdirectory a peer keeps its files in under the data directory (evenkeel's files lie
/// in the directory itself).
pub fn data_subdir(engine: &str) -> Option<&'static str> {
    match engine {
        "innodb" => Some("mariadb"),
        "sqlite" => Some("sqlite"),
        "lmdb" => Some("lmdb"),
        "rocksdb" => Some("rocksdb"),
        _ => None,
    }
}

/// True when the engine keeps its data in the directory (so size and device I/O mean something).
pub fn is_persistent(engine: &str) -> bool {
    engine != "model"
}
