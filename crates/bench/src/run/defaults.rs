//! The workbench's own defaults for evenkeel options, applied under the user's: an option the
//! user names in `--config` or `--set` keeps the user's value, and one the user leaves alone
//! takes the workbench's value instead of the engine's default.
//!
//! `bench tpcc` and `sweep tpcc` run with `flush_method=o_direct`: the data files are read and
//! written past the OS page cache, so the buffer-pool misses of a pool smaller than the data
//! reach the device, as they do for a production database whose data is larger than memory.
//! With the engine's default (`fsync`, buffered I/O) the default 2 warehouses (about 400 MiB)
//! sit in the page cache of any machine with a few GiB of memory, and a "IO-bound" run measures
//! memory copies.

use std::path::Path;

use super::EngineSpec;
use crate::error::{BenchError, BenchResult};

/// evenkeel options the TPC-C workbench sets unless the user does.
pub const TPCC_EVENKEEL_DEFAULTS: &[(&str, &str)] = &[("flush_method", "o_direct")];

/// Engines that map every option in the workbench's defaults.
const ENGINES_TAKING_DEFAULTS: &[&str] = &["evenkeel", "innodb", "rocksdb"];

/// An option name as the engine accepts it, reduced to its canonical form (lower case, `_`
/// for `-`, no `innodb_` prefix).
fn canonical(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase().replace('-', "_");
    lower
        .strip_prefix("innodb_")
        .map_or(lower.clone(), str::to_string)
}

/// The option names a TOML config file sets (its top-level keys), canonical.
fn config_names(path: &Path) -> BenchResult<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::io(format!("--config {}", path.display()), e))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| BenchError::Usage(format!("--config {}: {e}", path.display())))?;
    Ok(table.keys().map(|k| canonical(k)).collect())
}

/// Puts each of `defaults` in front of `spec.set` unless the config file or a `--set` names it;
/// only for the engines that take them: evenkeel, and the peers that can read past the OS page
/// cache as well (InnoDB, RocksDB), so an engine comparison is not one engine on the device
/// against another in memory. SQLite and LMDB have no such option (the README's fairness table).
pub fn apply(spec: &mut EngineSpec, defaults: &[(&str, &str)]) -> BenchResult<()> {
    if !ENGINES_TAKING_DEFAULTS.contains(&spec.engine.as_str()) {
        return Ok(());
    }
    let mut named: Vec<String> = spec
        .set
        .iter()
        .filter_map(|p| p.split_once('=').map(|(k, _)| canonical(k)))
        .collect();
    if let Some(c) = &spec.config {
        named.extend(config_names(c)?);
    }
    let mut set: Vec<String> = defaults
        .iter()
        .filter(|(k, _)| !named.iter().any(|n| n == k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    set.append(&mut spec.set);
    spec.set = set;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(set: &[&str], config: Option<&Path>) -> EngineSpec {
        EngineSpec {
            engine: "evenkeel".into(),
            config: config.map(Path::to_path_buf),
            set: set.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_default_goes_under_the_users_values() {
        let mut s = spec(&["buffer_pool_size=64M"], None);
        apply(&mut s, TPCC_EVENKEEL_DEFAULTS).expect("apply");
        assert_eq!(s.set, ["flush_method=o_direct", "buffer_pool_size=64M"]);
        for named in ["flush_method=fsync", "innodb-flush-method=fsync"] {
            let mut s = spec(&[named], None);
            apply(&mut s, TPCC_EVENKEEL_DEFAULTS).expect("apply");
            assert_eq!(s.set, [named], "the user's value alone");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let toml = dir.path().join("my.toml");
        std::fs::write(&toml, "innodb_flush_method = \"fsync\"\n").expect("write");
        let mut s = spec(&[], Some(&toml));
        apply(&mut s, TPCC_EVENKEEL_DEFAULTS).expect("apply");
        assert!(s.set.is_empty(), "the config file names it: {:?}", s.set);
        let mut m = EngineSpec {
            engine: "model".into(),
            ..EngineSpec::default()
        };
        apply(&mut m, TPCC_EVENKEEL_DEFAULTS).expect("apply");
        assert!(m.set.is_empty(), "not for other engines");
        for (engine, takes) in [
            ("innodb", true),
            ("rocksdb", true),
            ("sqlite", false),
            ("lmdb", false),
        ] {
            let mut p = EngineSpec {
                engine: engine.into(),
                ..EngineSpec::default()
            };
            apply(&mut p, TPCC_EVENKEEL_DEFAULTS).expect("apply");
            assert_eq!(!p.set.is_empty(), takes, "{engine}: {:?}", p.set);
        }
    }
}
