//! grid: what the commands that run many sweeps over a fixed set of setups share
//! (`evenkeel matrix`, `evenkeel holes`): parsing the sweep and bench command lines they
//! build, picking setups by name, and removing the runs' copies of a template.

use std::path::Path;

use clap::Parser;

use crate::cli::{BenchCommand, SweepCommand};
use crate::error::{BenchError, BenchResult};

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

/// Removes the runs' copies of a template in `data` (the directories whose names start with
/// `prefix`, a sweep's `<setting>=`), keeping the templates: a grid's copies would not fit on
/// a small disk.
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
