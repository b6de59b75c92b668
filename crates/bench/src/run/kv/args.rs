//! The command line of `bench kv`: clap arguments, the `memory` and `io` presets, and their
//! translation into checked [`KvOptions`]. Every mistake is a `BenchError::Usage` naming the
//! argument and what it accepts; nothing is opened before the arguments are accepted.

use std::path::PathBuf;

use clap::Args;

use super::{KvOptions, Workload};
use crate::error::{BenchError, BenchResult};

/// Rows when neither `--rows` nor a preset says.
pub const DEFAULT_ROWS: u64 = 1_000_000;
/// Most client threads accepted per point.
pub const MAX_THREADS: usize = 256;

/// A named starting configuration; explicit `--rows` and `--set` win over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Data fits the pool: 1,000,000 rows, buffer_pool_size = 256M.
    Memory,
    /// IO-bound: 9,000,000 rows (a data file over 1 GiB), buffer_pool_size = 16M.
    Io,
}

impl Preset {
    pub fn parse(s: &str) -> BenchResult<Preset> {
        match s.trim().to_ascii_lowercase().as_str() {
            "memory" => Ok(Preset::Memory),
            "io" => Ok(Preset::Io),
            _ => Err(BenchError::Usage(format!(
                "--preset: expected memory or io, got {s:?}"
            ))),
        }
    }

    pub fn rows(self) -> u64 {
        match self {
            Preset::Memory => 1_000_000,
            Preset::Io => 9_000_000,
        }
    }

    pub fn buffer_pool_size(self) -> &'static str {
        match self {
            Preset::Memory => "256M",
            Preset::Io => "16M",
        }
    }
}

/// `bench kv`: the engine-core micro benchmark.
#[derive(Debug, Clone, Args)]
pub struct KvArgs {
    /// Engine: evenkeel (through its own API, with its Status around each point) or a peer
    /// (innodb, rocksdb, sqlite, lmdb in a build with --features peers; model), through the
    /// same driver as tpcc and insert.
    #[arg(long, default_value = "evenkeel")]
    pub engine: String,
    /// memory (1,000,000 rows, buffer_pool_size=256M) or io (9,000,000 rows, buffer_pool_size=16M).
    #[arg(long)]
    pub preset: Option<String>,
    /// Rows in the table [default: 1000000, or the preset's].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Thread counts to run each workload with, comma-separated.
    #[arg(long, default_value = "1,2")]
    pub threads: String,
    /// Seconds per workload per thread count (fractions allowed).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Workloads, comma-separated, from get,put,scan (the load runs first when the table is missing).
    #[arg(long, default_value = "get,put,scan")]
    pub workloads: String,
    /// Puts per commit.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Rows per range scan.
    #[arg(long, default_value_t = 100)]
    pub scan_len: usize,
    /// Data directory; reused when it already holds the kv table with --rows rows. A
    /// temporary directory under /var/tmp, removed afterwards, when absent.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Engine configuration file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Engine option as name=value, applied after --config and the preset; repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Print the report as JSON on stdout (progress goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Seed of the random key choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl KvArgs {
    pub fn options(&self) -> BenchResult<KvOptions> {
        let preset = self.preset.as_deref().map(Preset::parse).transpose()?;
        let mut set = Vec::new();
        if let Some(p) = preset {
            set.push(format!("buffer_pool_size={}", p.buffer_pool_size()));
        }
        set.extend(self.set.iter().cloned());
        let o = KvOptions {
            engine: self.engine.trim().to_ascii_lowercase(),
            rows: self
                .rows
                .or(preset.map(Preset::rows))
                .unwrap_or(DEFAULT_ROWS),
            threads: parse_threads(&self.threads)?,
            seconds: self.seconds,
            workloads: parse_workloads(&self.workloads)?,
            batch: self.batch,
            scan_len: self.scan_len,
            dir: self.dir.clone(),
            config: self.config.clone(),
            set,
            json: self.json,
            quiet: self.quiet,
            seed: self.seed,
        };
        o.validate()?;
        Ok(o)
    }
}

/// `1,2` -> [1, 2]; each count in 1..=MAX_THREADS.
pub fn parse_threads(s: &str) -> BenchResult<Vec<usize>> {
    let bad = |why: String| {
        BenchError::Usage(format!(
            "--threads: expected thread counts from 1 to {MAX_THREADS}, comma-separated \
             (e.g. 1,2); {why}"
        ))
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        let n: usize = part
            .trim()
            .parse()
            .map_err(|_| bad(format!("got {part:?}")))?;
        if n == 0 || n > MAX_THREADS {
            return Err(bad(format!("got {n}")));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// `get,put` -> [Get, Put], in the order given, without repeats.
pub fn parse_workloads(s: &str) -> BenchResult<Vec<Workload>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let w = Workload::parse(part.trim()).ok_or_else(|| {
            BenchError::Usage(format!(
                "--workloads: expected names from get, put, scan, comma-separated; got {part:?}"
            ))
        })?;
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        assert_eq!(parse_threads("1, 2,2").ok(), Some(vec![1, 2]));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("1,x").is_err());
        assert!(parse_threads("").is_err());
        assert_eq!(
            parse_workloads("scan,get").ok(),
            Some(vec![Workload::Scan, Workload::Get])
        );
        assert!(parse_workloads("get,load").is_err());
    }

    #[test]
    fn presets_parse() {
        assert_eq!(Preset::parse("IO").ok(), Some(Preset::Io));
        assert!(Preset::parse("disk").is_err());
    }
}
