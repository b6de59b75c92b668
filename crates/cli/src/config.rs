//! config: the `--config FILE` and `--set name=value` flags every database-opening command
//! shares, turned into engine [`Options`].
//!
//! Order: defaults, then the TOML file, then each `--set` in the order given (later wins).
//! Errors from either source are usage errors (exit 2) and keep the engine's message, which
//! names the option and its valid range; we only add where the bad value came from.

use crate::failure::Failure;
use clap::Args;
use evenkeel::Options;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArgs {
    /// TOML file of engine options (a flat table: `buffer_pool_size = "1G"`); see `evenkeel
    /// options` for every name, default and range
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Set one engine option, after the config file; repeat for more (`--set page_size=4K
    /// --set innodb_buffer_pool_size=64M`)
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

impl ConfigArgs {
    /// The options these flags describe, validated.
    pub fn options(&self) -> Result<Options, Failure> {
        self.build(None)
    }

    /// As [`options`](Self::options) for opening the database in `dir`: when one exists, its
    /// page size replaces the configured one before validation, since the file's page size is
    /// what the engine uses (a 4K database may run with a pool too small for 16K pages).
    pub fn options_for(&self, dir: &Path) -> Result<Options, Failure> {
        self.build(Some(dir))
    }

    fn build(&self, dir: Option<&Path>) -> Result<Options, Failure> {
        let mut opts = match &self.config {
            Some(path) => Options::from_toml_file(path)
                .map_err(|e| Failure::Usage(format!("--config {}: {e}", path.display())))?,
            None => Options::default(),
        };
        // Each pair is range-checked alone; the rules between options are checked once at
        // the end, so `--set` order never makes a valid final combination fail midway.
        for pair in &self.set {
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                Failure::Usage(format!("--set {pair}: expected the form name=value"))
            })?;
            opts.set(name, value)
                .map_err(|e| Failure::Usage(format!("--set {pair}: {e}")))?;
        }
        if let Some(file_page_size) = dir.and_then(existing_page_size) {
            // Only a page size someone chose deserves the note, not the default.
            let chosen = opts.page_size != Options::default().page_size;
            if opts.page_size != file_page_size && chosen {
                eprintln!(
                    "evenkeel: note: page_size {} is not used: the existing database has \
                     page_size {file_page_size}",
                    opts.page_size
                );
            }
            opts.page_size = file_page_size;
        }
        opts.validate().map_err(|e| {
            let from = match (&self.config, self.set.is_empty()) {
                (Some(p), false) => format!("--config {} and --set", p.display()),
                (Some(p), true) => format!("--config {}", p.display()),
                (None, _) => "--set".to_string(),
            };
            Failure::Usage(format!("{from}: {e}"))
        })?;
        Ok(opts)
    }
}

/// The page size recorded in `dir`'s data file, if there is a readable one.
fn existing_page_size(dir: &Path) -> Option<usize> {
    let mut first = vec![0u8; evenkeel::page::MIN_PAGE_SIZE];
    let mut f = std::fs::File::open(dir.join(evenkeel::db::DATA_FILE)).ok()?;
    f.read_exact(&mut first).ok()?;
    evenkeel::space::probe_page_size(&first).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_sets(sets: &[&str]) -> Result<Options, Failure> {
        ConfigArgs {
            config: None,
            set: sets.iter().map(|s| s.to_string()).collect(),
        }
        .options()
    }

    #[test]
    fn later_sets_win_and_prefixes_are_accepted() {
        let o = with_sets(&["page_size=4K", "innodb_page_size=8K"]).unwrap();
        assert_eq!(o.page_size, 8192);
    }

    #[test]
    fn cross_option_rules_apply_to_the_final_combination() {
        // 512K alone is under the 64-frame minimum at 16K pages; only the final value counts.
        let o = with_sets(&[
            "buffer_pool_size=512K",
            "page_size=4K",
            "buffer_pool_size=64M",
        ]);
        assert_eq!(o.unwrap().buffer_pool_size, 64 << 20);
        match with_sets(&["buffer_pool_size=512K"]) {
            Err(Failure::Usage(m)) => assert!(
                m.contains("buffer_pool_size") && m.contains("at least"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_sets_are_usage_errors_naming_the_pair() {
        for (pair, needle) in [
            ("nosuch=1", "unknown option `nosuch`"),
            ("page_size=1000", "one of 4096"),
            ("page_size", "name=value"),
        ] {
            match with_sets(&[pair]) {
                Err(Failure::Usage(m)) => {
                    assert!(m.starts_with(&format!("--set {pair}: ")), "{m}");
                    assert!(m.contains(needle), "{m}");
                }
                other => panic!("{pair}: {other:?}"),
            }
        }
    }
}
