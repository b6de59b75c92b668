//! Options of the peer engines, spelled with evenkeel's names. A run passes the same `--set
//! name=value` pairs (and `--config` TOML file) to every engine; each peer declares a table of
//! the evenkeel options it understands and what each becomes in its own configuration. An
//! option a peer has no meaning for is refused with an error naming the engine and the options
//! it does take, so a sweep never compares an engine that silently ignored a setting.
//!
//! Must stay true: every accepted option reaches the peer (each driver's `config()` lists what
//! it set), and an option is never accepted only to be dropped.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{BenchError, BenchResult};

/// The evenkeel defaults the peers start from, so "no --set" means the same memory, log
/// capacity and durability for every engine.
pub const DEFAULT_BUFFER_POOL_BYTES: u64 = 128 << 20;
pub const DEFAULT_LOG_FILE_BYTES: u64 = 48 << 20;
pub const DEFAULT_LOG_FILES: u64 = 2;
pub const DEFAULT_FLUSH_LOG_AT_TRX_COMMIT: u64 = 1;
pub const DEFAULT_LOCK_WAIT_TIMEOUT_S: u64 = 50;

/// Parsed `name=value` pairs for one peer, with the names normalised (lower case, `-` as `_`,
/// an `innodb_` prefix dropped) and later values winning.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    engine: String,
    values: BTreeMap<String, String>,
}

/// A size with an optional K/M/G/T suffix (powers of 1024): "128M", "16384", "1g".
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        'T' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// A boolean in any of the spellings evenkeel's options take.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

fn canonical(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase().replace('-', "_");
    lower.strip_prefix("innodb_").unwrap_or(&lower).to_string()
}

impl PeerOptions {
    /// Options for `engine` from an optional flat TOML file then `pairs`. Every name must be
    /// in `accepted` (the peer's table), else the error names the engine and lists them.
    pub fn parse(
        engine: &str,
        config: Option<&Path>,
        pairs: &[(String, String)],
        accepted: &[&str],
    ) -> BenchResult<PeerOptions> {
        let mut all: Vec<(String, String)> = Vec::new();
        if let Some(p) = config {
            all.extend(read_toml(p)?);
        }
        all.extend(pairs.iter().cloned());
        let mut values = BTreeMap::new();
        for (name, value) in all {
            let c = canonical(&name);
            if !accepted.contains(&c.as_str()) {
                return Err(BenchError::Usage(format!(
                    "the {engine} engine has no equivalent of option {name}; it takes: {}",
                    accepted.join(", ")
                )));
            }
            values.insert(c, value.trim().to_string());
        }
        Ok(PeerOptions {
            engine: engine.to_string(),
            values,
        })
    }

    /// The raw text of an option when it was given.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    fn bad(&self, name: &str, value: &str, expected: &str) -> BenchError {
        BenchError::Usage(format!(
            "{} engine: {name}={value:?} is not valid: expected {expected}",
            self.engine
        ))
    }

    /// A size option in `[min, max]` bytes, or `default`.
    pub fn size(&self, name: &str, default: u64, min: u64, max: u64) -> BenchResult<u64> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        match parse_size(v) {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(
                name,
                v,
                &format!("a size from {min} to {max} bytes (K, M, G suffixes allowed)"),
            )),
        }
    }

    /// An integer option in `[min, max]`, or `default`.
    pub fn int(&self, name: &str, default: u64, min: u64, max: u64) -> BenchResult<u64> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(name, v, &format!("an integer from {min} to {max}"))),
        }
    }

    /// A boolean option, or `default`.
    pub fn bool(&self, name: &str, default: bool) -> BenchResult<bool> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        parse_bool(v).ok_or_else(|| self.bad(name, v, "on or off"))
    }

    /// One of `choices` (returned lower-cased), or `None` when not given.
    pub fn choice(&self, name: &str, choices: &[&str]) -> BenchResult<Option<String>> {
        let Some(v) = self.raw(name) else {
            return Ok(None);
        };
        let lower = v.to_ascii_lowercase();
        if choices.contains(&lower.as_str()) {
            Ok(Some(lower))
        } else {
            Err(self.bad(name, v, &format!("one of {}", choices.join(", "))))
        }
    }

    /// Redo capacity in bytes: log_file_size x log_files_in_group, as evenkeel counts it.
    pub fn redo_capacity(&self) -> BenchResult<u64> {
        let size = self.size(
            "log_file_size",
            DEFAULT_LOG_FILE_BYTES,
            256 << 10,
            512 << 30,
        )?;
        let files = self.int("log_files_in_group", DEFAULT_LOG_FILES, 1, 100)?;
        Ok(size * files)
    }

    /// Commit durability as flush_log_at_trx_commit: 1 synced at commit, 2 written at commit
    /// and synced about once a second, 0 neither at commit.
    pub fn durability(&self) -> BenchResult<u64> {
        self.int(
            "flush_log_at_trx_commit",
            DEFAULT_FLUSH_LOG_AT_TRX_COMMIT,
            0,
            2,
        )
    }
}

/// `name = value` pairs of a flat TOML file (strings, integers and booleans).
fn read_toml(path: &Path) -> BenchResult<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::io(format!("read {}", path.display()), e))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| BenchError::Usage(format!("--config {}: {e}", path.display())))?;
    table
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(BenchError::Usage(format!(
                        "--config {}: {k} must be a string, integer or boolean, got {other}",
                        path.display()
                    )))
                }
            };
            Ok((k, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sizes_and_refusals() {
        assert_eq!(parse_size("128M"), Some(128 << 20));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("12x"), None);
        let o = PeerOptions::parse(
            "sqlite",
            None,
            &pairs(&[("innodb_buffer_pool_size", "64M"), ("log-file-size", "8M")]),
            &["buffer_pool_size", "log_file_size"],
        )
        .unwrap();
        assert_eq!(
            o.size("buffer_pool_size", 0, 1, u64::MAX).unwrap(),
            64 << 20
        );
        assert_eq!(o.redo_capacity().unwrap(), 16 << 20);
        let e = PeerOptions::parse(
            "sqlite",
            None,
            &pairs(&[("io_capacity", "200")]),
            &["buffer_pool_size"],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sqlite") && e.contains("io_capacity"), "{e}");
        let o = PeerOptions::parse("x", None, &pairs(&[("n", "7")]), &["n"]).unwrap();
        let e = o.int("n", 1, 1, 5).unwrap_err().to_string();
        assert!(e.contains("from 1 to 5"), "{e}");
    }
}
