//! Options: every knob the engine reads, declared once in the `knobs!` table below.
//!
//! One row gives a knob its field in [`Options`], its default, its kind (how its text is parsed,
//! range-checked and printed) and its one-line doc; parsing from TOML and from `name=value`
//! pairs, `describe`, `help` and `validate` are all driven by that table, so adding a knob is
//! adding a row. What must stay true: only knobs whose feature exists are in the table (a knob
//! that is parsed but ignored is a defect); every default is inside its own range (tested);
//! names are matched case-insensitively with `-` = `_` and an optional `innodb_` prefix, so a
//! my.cnf reader feels at home; every rejection says the valid range or set.

use crate::error::{Error, Result};
use crate::io::FlushMethod;
use crate::mvcc::Isolation;
use std::collections::HashMap;
use std::path::Path;

mod value;

pub use value::{format_size, FlushPolicy, MIN_PAGES_PER_INSTANCE};
use value::{Kind, KnobValue, GIB, KIB, MIB, TIB};

/// One row of the table: everything known about a knob.
struct Knob {
    name: &'static str,
    doc: &'static str,
    kind: Kind,
    get: fn(&Options) -> u64,
    put: fn(&mut Options, u64),
}

macro_rules! knobs {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $default:expr, $kind:expr; )+) => {
        /// The engine's configuration. Build it with `Default`, [`Options::from_toml_str`],
        /// [`Options::from_toml_file`] or [`Options::apply_pairs`]; fields may also be set
        /// directly, and [`Options::validate`] (run at open) checks them all.
        #[derive(Clone, Debug, PartialEq)]
        pub struct Options {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl Default for Options {
            fn default() -> Self {
                Options { $( $name: $default, )+ }
            }
        }

        const KNOBS: &[Knob] = &[ $(
            Knob {
                name: stringify!($name),
                doc: concat!($($doc),+),
                kind: $kind,
                get: |o| KnobValue::to_knob(&o.$name),
                put: |o, v| o.$name = KnobValue::from_knob(v),
            },
        )+ ];
    };
}

knobs! {
    /// Page size in bytes for a new database; on open, the page size in the file wins.
    page_size: usize = 16384, Kind::SizeChoice(&[4096, 8192, 16384, 32768, 65536]);
    /// Memory for buffer-pool frames in bytes, all instances together; allocated once at open.
    buffer_pool_size: u64 = 128 * MIB, Kind::Size { min: 256 * KIB, max: TIB };
    /// Buffer-pool instances, each with its own mutex, LRU, free list and flush list.
    buffer_pool_instances: usize = 1, Kind::Int { min: 1, max: 64, unit: "" };
    /// Share of each LRU list, in percent, that is the old sublist where new pages enter.
    old_blocks_pct: u32 = 37, Kind::Int { min: 5, max: 95, unit: "percent" };
    /// Milliseconds a page stays in the old sublist after its first access before another access can make it young.
    old_blocks_time: u32 = 1000, Kind::Int { min: 0, max: u32::MAX as u64, unit: "milliseconds" };
    /// How writes are made durable: fsync, o_dsync (log files), o_direct (data files), o_direct_no_fsync.
    flush_method: FlushMethod = FlushMethod::Fsync, Kind::Name(FlushMethod::NAMES);
    /// Size in bytes of each redo log file; capacity is log_file_size x log_files_in_group (less headers). Used at create; on open the files' size wins.
    log_file_size: u64 = 48 * MIB, Kind::Size { min: 256 * KIB, max: 512 * GIB };
    /// Number of redo log files, reused circularly behind the checkpoint.
    log_files_in_group: u32 = 2, Kind::Int { min: 1, max: 100, unit: "" };
    /// Total bytes of the redo log files, split evenly over log_files_in_group (InnoDB's innodb_redo_log_capacity); 0: log_file_size x log_files_in_group. Set on an open database it resizes the log online; at open, a value that differs from the files' resizes the log after recovery. Dynamic.
    log_capacity: u64 = 0, Kind::Size { min: 0, max: 100 * 512 * GIB };
    /// Bytes of the in-memory log buffer; an appender waits (counted) when it is full.
    log_buffer_size: u64 = 16 * MIB, Kind::Size { min: 256 * KIB, max: 4 * GIB };
    /// Bytes per redo log block (the unit of log writes): 512 or 4096.
    log_block_size: usize = 512, Kind::SizeChoice(&[512, 4096]);
    /// Bytes of redo records crash recovery gathers, by page, before it applies them: the memory recovery uses besides the buffer pool, one log read chunk and one group, whatever the log's size.
    recovery_memory: u64 = 64 * MIB, Kind::Size { min: MIB, max: 64 * GIB };
    /// Seconds crash recovery may take (0: off): the page cleaner keeps the checkpoint age under what recovery replays in that time at half the recorded replay rate (which follows slower recoveries at once and faster ones slowly; status shows both). Dynamic.
    recovery_time_target: u64 = 0, Kind::Int { min: 0, max: 86400, unit: "seconds" };
    /// The default durability of a commit (a transaction may set its own): 1 fsynced before it returns; 2 written to the OS at commit, fsynced about every second; 0 written and fsynced about every second. Dynamic.
    flush_log_at_trx_commit: u32 = 1, Kind::Int { min: 0, max: 2, unit: "" };
    /// Pages per second the background flusher writes while the checkpoint age is under the async point.
    io_capacity: u64 = 200, Kind::Int { min: 100, max: u32::MAX as u64, unit: "pages per second" };
    /// Pages per second the background flusher may write past the async point.
    io_capacity_max: u64 = 2000, Kind::Int { min: 100, max: u32::MAX as u64, unit: "pages per second" };
    /// Checkpoint age, in percent of log capacity, past which flushing is forced (about 7/8).
    checkpoint_async_point_pct: u32 = 88, Kind::Int { min: 10, max: 98, unit: "percent" };
    /// Checkpoint age, in percent of log capacity, past which committing threads flush pages themselves before they may append (about 15/16).
    checkpoint_sync_point_pct: u32 = 94, Kind::Int { min: 11, max: 99, unit: "percent" };
    /// Point gets go straight to the leaf where a get last found the key (InnoDB's adaptive hash index), verified on the page, instead of descending from the root; the index takes 1/16 of buffer_pool_size (one 8-byte entry per 128 bytes), allocated at open.
    adaptive_hash_index: bool = true, Kind::Bool;
    /// Write pages through the doublewrite area first, so a torn page write can be repaired at recovery.
    doublewrite: bool = true, Kind::Bool;
    /// How the doublewrite area stores its page copies: trim (the default: a B+tree page's copy leaves out the free space between its slots and its cells, which costs only the copy of the bytes kept), none (raw), lz4, zstd (level 1), or auto: zstd for a share of the copies that starts when the device is the limit of page writes and the CPUs have room, grows by a tenth a second while the CPUs have room and shrinks by a tenth a second while they have none (measured each second: a chunk's IO in flight at least 0.85 of the time to start; the machine's CPUs busy under 0.80 to grow, over 0.92 to shrink; between, it holds). lz4, zstd and auto trim first. The copies are half of the bytes a page write costs and B+tree pages compress to a half or a third, so where the device's bandwidth is the limit zstd writes more pages a second; where the CPU is the limit the compression's CPU (about 30 µs a 16 KiB page with zstd) costs throughput instead. The data file's pages are never compressed.
    doublewrite_compression: usize = 4, Kind::Name(&["none", "lz4", "zstd", "auto", "trim"]);
    /// How long a transaction waits for a key lock before it fails with LockWaitTimeout (a plain number is seconds; `500ms` is allowed). Dynamic.
    lock_wait_timeout: std::time::Duration = std::time::Duration::from_secs(50), Kind::Millis { min: 1, max: 1_073_741_824_000 };
    /// Bytes all key locks together may use (a lock costs its key and 200 bytes; each transaction takes its locks' bytes from it in chunks of 1/1024 of it, at most 16 KiB); a lock request past it fails instead of growing.
    max_lock_memory: u64 = 64 * MIB, Kind::Size { min: 64 * KIB, max: TIB };
    /// How plain reads see other transactions' commits unless a transaction sets its own: read_committed, repeatable_read (one read view per transaction, InnoDB's default), snapshot (repeatable_read, and a write to a key changed since the view fails: first committer wins). Dynamic.
    transaction_isolation: Isolation = Isolation::RepeatableRead, Kind::Name(Isolation::NAMES);
    /// Bytes of old row versions kept for read views; past it the oldest views expire (their next read fails with SnapshotTooOld). Dynamic.
    max_history_size: u64 = 256 * MIB, Kind::Size { min: 64 * KIB, max: TIB };
    /// Bytes of keys and values one transaction may write; more fails with TransactionTooLarge.
    max_write_set_size: u64 = 64 * MIB, Kind::Size { min: 4 * KIB, max: TIB };
    /// Flush policy: fixed (5.1), innodb55, estimate, keep_average (XtraDB), innodb80, steady (ours). Dynamic.
    adaptive_flushing: FlushPolicy = FlushPolicy::Steady, Kind::Name(FlushPolicy::NAMES);
    /// innodb80: checkpoint age, in percent of capacity, under which redo does not drive flushing. Dynamic.
    adaptive_flushing_lwm: u64 = 10, Kind::Int { min: 0, max: 70, unit: "percent" };
    /// innodb80/innodb55: loops (about seconds) over which rates are averaged. Dynamic.
    flushing_avg_loops: u64 = 30, Kind::Int { min: 1, max: 1000, unit: "loops" };
    /// Dirty pages, in percent of the pool, past which flushing goes all-out (and, with check_max_dirty_foreground, committing threads flush). Dynamic.
    max_dirty_pages_pct: u64 = 90, Kind::Int { min: 1, max: 99, unit: "percent" };
    /// Dirty pages, in percent, under which innodb80 does no dirty-driven flushing. Dynamic.
    max_dirty_pages_pct_lwm: u64 = 10, Kind::Int { min: 0, max: 99, unit: "percent" };
    /// Make committing threads flush oldest pages before dirtying more while max_dirty_pages_pct is exceeded, so the limit really holds. Dynamic.
    check_max_dirty_foreground: bool = true, Kind::Bool;
    /// Also write dirty neighbours of each flushed page: 0 off, 1 contiguous dirty pages, 2 any dirty page of the 64-page extent. Dynamic.
    flush_neighbors: u64 = 0, Kind::Int { min: 0, max: 2, unit: "" };
    /// Frames scanned from each LRU tail per loop to keep free frames ready. Dynamic.
    lru_scan_depth: u64 = 1024, Kind::Int { min: 100, max: u32::MAX as u64, unit: "pages" };
    /// Page cleaner threads; flushing is spread over buffer-pool instances.
    page_cleaners: u64 = 1, Kind::Int { min: 1, max: 64, unit: "threads" };
    /// Read-ahead: none, linear (next extent after a sequential run) or random (rest of an extent). Dynamic.
    read_ahead: usize = 1, Kind::Name(&["none", "linear", "random"]);
    /// Pages of an extent read in order that trigger linear read-ahead of the next extent. Dynamic.
    read_ahead_threshold: u64 = 56, Kind::Int { min: 0, max: 64, unit: "pages" };
    /// Threads that perform read-ahead reads.
    read_io_threads: u64 = 2, Kind::Int { min: 1, max: 64, unit: "threads" };
    /// steady: cap on page-write bandwidth in bytes per second, for sharing a device (0: none). Dynamic.
    write_bandwidth_max: u64 = 0, Kind::Size { min: 0, max: TIB };
    /// Page-write batches in flight at once: doublewrite segments, and the page cleaner's concurrent writers.
    write_io_threads: u64 = 4, Kind::Int { min: 1, max: 64, unit: "threads" };
    /// Keep as few page-write batches in flight as keep the device busy, up to write_io_threads, so commits' log writes do not queue behind page writes (off: always write_io_threads). Dynamic.
    adaptive_write_concurrency: bool = true, Kind::Bool;
    /// Which changes to index tables (Database::create_index_table) the change buffer records instead of reading a leaf that is not in the buffer pool: none, inserts, deletes, all. Dynamic.
    change_buffering: usize = 3, Kind::Name(CHANGE_BUFFERING_NAMES);
    /// Most pages the change buffer may take, in percent of the buffer pool: past 9/10 of it (its entries counted as pages half full) a share of changes rising to all at it is applied directly; its tree's pages never pass it; at it the background merge runs at io_capacity_max. Dynamic.
    change_buffer_max_size: u64 = 25, Kind::Int { min: 0, max: 50, unit: "percent" };
    /// Leaves per second the background merge applies buffered changes to, in percent of io_capacity, while the change buffer is under half of change_buffer_max_size; from there it rises to io_capacity at the max. 0: no background merge under half the max. Dynamic.
    change_buffer_merge_pct: u64 = 5, Kind::Int { min: 0, max: 100, unit: "percent of io_capacity" };
}

/// The values of `change_buffering`, in the order of their numbers.
pub const CHANGE_BUFFERING_NAMES: &[&str] = &["none", "inserts", "deletes", "all"];

/// Knobs that can change on an open database (taking effect within one cleaner loop).
pub const DYNAMIC_KNOBS: &[&str] = &[
    "adaptive_flushing",
    "adaptive_flushing_lwm",
    "flushing_avg_loops",
    "io_capacity",
    "io_capacity_max",
    "max_dirty_pages_pct",
    "max_dirty_pages_pct_lwm",
    "check_max_dirty_foreground",
    "flush_neighbors",
    "lru_scan_depth",
    "read_ahead",
    "read_ahead_threshold",
    "write_bandwidth_max",
    "adaptive_write_concurrency",
    "lock_wait_timeout",
    "flush_log_at_trx_commit",
    "transaction_isolation",
    "max_history_size",
    "recovery_time_target",
    "log_capacity",
    "change_buffering",
    "change_buffer_max_size",
    "change_buffer_merge_pct",
];

/// `Innodb-Buffer-Pool-Size` -> `buffer_pool_size`; InnoDB 8.0.30's `innodb_redo_log_capacity`
/// -> `log_capacity`.
pub(crate) fn canonical_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase().replace('-', "_");
    let name = match lower.strip_prefix("innodb_") {
        Some(rest) => rest.to_string(),
        None => lower,
    };
    match name.as_str() {
        "redo_log_capacity" => "log_capacity".to_string(),
        _ => name,
    }
}

fn find_knob(name: &str) -> Result<&'static Knob> {
    let canonical = canonical_name(name);
    KNOBS
        .iter()
        .find(|k| k.name == canonical)
        .ok_or_else(|| Error::UnknownOption {
            name: name.to_string(),
            hint: nearest_name(&canonical)
                .map(|near| format!(" (did you mean `{near}`?)"))
                .unwrap_or_default(),
            known: Options::known_names().join(", "),
        })
}

/// The known option closest to `name` by edit distance, when it is close enough to be a typo
/// (at most a third of the name's letters differ) or contains `name` / is contained in it.
fn nearest_name(name: &str) -> Option<&'static str> {
    let (best, distance) = KNOBS
        .iter()
        .map(|k| (k.name, edit_distance(name, k.name)))
        .min_by_key(|&(_, d)| d)?;
    if distance <= (name.len() / 3).max(2) {
        return Some(best);
    }
    KNOBS
        .iter()
        .map(|k| k.name)
        .find(|k| name.len() >= 4 && (k.contains(name) || name.contains(k)))
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur.push(substitute.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// TOML scalars become the text a `name=value` pair would carry, so both paths parse alike.
fn toml_value_text(knob: &Knob, value: &toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        // 16384.0 reads as 16384; 0.5 stays 0.5 and fails the integer parse with the range.
        toml::Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e18 => (*f as i64).to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => {
            return Err(Error::InvalidOption {
                name: knob.name.to_string(),
                value: other.to_string(),
                expected: format!(
                    "{} given as an integer, float, bool or string (the file is one flat table)",
                    knob.kind.expected()
                ),
            })
        }
    })
}

/// A hint for the TOML mistakes a my.cnf writer makes: a size with a suffix left unquoted
/// (`buffer_pool_size = 1G`), which TOML cannot read as a number.
fn toml_hint(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return String::new();
    };
    let line_start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let Some((name, value)) = line.split_once('=') else {
        return String::new();
    };
    let value = value.trim();
    let unquoted_size = value
        .strip_suffix(|c: char| c.is_ascii_alphabetic())
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let unquoted_word = !value.is_empty()
        && !value.starts_with(['"', '\''])
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if unquoted_size || unquoted_word {
        format!(
            "; in TOML a value with letters must be quoted: write `{} = \"{value}\"`",
            name.trim()
        )
    } else {
        String::new()
    }
}

impl Options {
    /// Parses a flat TOML table of knobs over the defaults, then [`validate`](Self::validate)s.
    pub fn from_toml_str(text: &str) -> Result<Options> {
        Self::from_toml_with_origin(text, "TOML text")
    }

    /// Reads and parses a TOML file as [`from_toml_str`](Self::from_toml_str) does.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Options> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(path.display().to_string(), "read", e))?;
        Self::from_toml_with_origin(&text, &path.display().to_string())
    }

    fn from_toml_with_origin(text: &str, origin: &str) -> Result<Options> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| Error::InvalidConfig {
                    origin: origin.to_string(),
                    reason: format!("{e}{}", toml_hint(text, &e)),
                })?;
        let mut options = Options::default();
        // `innodb_page_size` and `page_size` are the same knob: giving both is ambiguous.
        let mut seen: HashMap<&'static str, &str> = HashMap::new();
        for (name, value) in &table {
            let knob = find_knob(name)?;
            if let Some(earlier) = seen.insert(knob.name, name) {
                return Err(Error::InvalidConfig {
                    origin: origin.to_string(),
                    reason: format!(
                        "`{earlier}` and `{name}` both set option `{}`; give it once",
                        knob.name
                    ),
                });
            }
            options.set_knob(knob, &toml_value_text(knob, value)?)?;
        }
        options.validate()?;
        Ok(options)
    }

    /// Sets one knob from its text. Checks the value's own range; cross-field rules are
    /// checked by [`validate`](Self::validate).
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        self.set_knob(find_knob(name)?, value)
    }

    fn set_knob(&mut self, knob: &Knob, value: &str) -> Result<()> {
        let parsed = knob.kind.parse(value).ok_or_else(|| Error::InvalidOption {
            name: knob.name.to_string(),
            value: value.to_string(),
            expected: knob.kind.expected(),
        })?;
        (knob.put)(self, parsed);
        Ok(())
    }

    /// Applies `name=value` pairs (as from `--set`) in order, later ones winning, then
    /// validates the result. All or nothing: on error `self` is unchanged.
    pub fn apply_pairs<I, S>(&mut self, pairs: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut next = self.clone();
        for pair in pairs {
            let pair = pair.as_ref();
            let (name, value) = pair.split_once('=').ok_or_else(|| Error::InvalidConfig {
                origin: "name=value pairs".to_string(),
                reason: format!("`{pair}` is not of the form name=value"),
            })?;
            next.set(name, value)?;
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Checks every field against its range (fields are public, so they may have been set
    /// directly) and the rules between fields.
    /// The size of each redo log file these options ask for: `log_capacity` split over
    /// `log_files_in_group` (rounded down to whole log blocks) when it is set, else
    /// `log_file_size`.
    pub fn log_file_size_wanted(&self) -> u64 {
        if self.log_capacity == 0 {
            return self.log_file_size;
        }
        let block = self.log_block_size as u64;
        self.log_capacity / u64::from(self.log_files_in_group.max(1)) / block * block
    }

    pub fn validate(&self) -> Result<()> {
        for knob in KNOBS {
            let value = (knob.get)(self);
            if !knob.kind.accepts(value) {
                return Err(Error::InvalidOption {
                    name: knob.name.to_string(),
                    value: knob.kind.format(value),
                    expected: knob.kind.expected(),
                });
            }
        }
        if self.max_dirty_pages_pct_lwm > self.max_dirty_pages_pct {
            return Err(Error::InvalidOption {
                name: "max_dirty_pages_pct_lwm".to_string(),
                value: self.max_dirty_pages_pct_lwm.to_string(),
                expected: format!("at most max_dirty_pages_pct ({})", self.max_dirty_pages_pct),
            });
        }
        if self.io_capacity_max < self.io_capacity {
            return Err(Error::InvalidOption {
                name: "io_capacity_max".to_string(),
                value: self.io_capacity_max.to_string(),
                expected: format!("at least io_capacity ({})", self.io_capacity),
            });
        }
        if self.checkpoint_sync_point_pct <= self.checkpoint_async_point_pct {
            return Err(Error::InvalidOption {
                name: "checkpoint_sync_point_pct".to_string(),
                value: self.checkpoint_sync_point_pct.to_string(),
                expected: format!(
                    "more than checkpoint_async_point_pct ({})",
                    self.checkpoint_async_point_pct
                ),
            });
        }
        if self.log_capacity != 0 {
            let files = u64::from(self.log_files_in_group);
            let least = 256 * KIB * files;
            if self.log_capacity < least {
                return Err(Error::InvalidOption {
                    name: "log_capacity".to_string(),
                    value: format_size(self.log_capacity),
                    expected: format!(
                        "0 (log_file_size x log_files_in_group) or at least {} (256K per file \
                         with log_files_in_group = {files}), at most {}",
                        format_size(least),
                        format_size(100 * 512 * GIB)
                    ),
                });
            }
        }
        let page_size = self.page_size as u64;
        let instances = self.buffer_pool_instances as u64;
        let per_instance = self.buffer_pool_size / page_size / instances;
        if per_instance < MIN_PAGES_PER_INSTANCE {
            let needed = MIN_PAGES_PER_INSTANCE * page_size * instances;
            return Err(Error::InvalidOption {
                name: "buffer_pool_size".to_string(),
                value: format_size(self.buffer_pool_size),
                expected: format!(
                    "at least {} with buffer_pool_instances = {instances} and page_size = \
                     {page_size}, so that each instance holds at least {MIN_PAGES_PER_INSTANCE} \
                     pages (it would hold {per_instance})",
                    format_size(needed)
                ),
            });
        }
        Ok(())
    }

    /// Every knob with its current value as text that [`set`](Self::set) accepts back.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        KNOBS
            .iter()
            .map(|k| (k.name, k.kind.format((k.get)(self))))
            .collect()
    }

    /// The names of all knobs, in table order.
    pub fn known_names() -> Vec<&'static str> {
        KNOBS.iter().map(|k| k.name).collect()
    }

    /// `(name, default, valid range, doc)` for every knob, for a `--help`-like listing.
    pub fn help() -> Vec<(&'static str, String, String, &'static str)> {
        let defaults = Options::default();
        KNOBS
            .iter()
            .map(|k| {
                let default = k.kind.format((k.get)(&defaults));
                (k.name, default, k.kind.expected(), k.doc.trim())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use value::parse_size;

    fn invalid(err: Error) -> (String, String, String) {
        match err {
            Error::InvalidOption {
                name,
                value,
                expected,
            } => (name, value, expected),
            other => panic!("expected InvalidOption, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_inside_their_ranges_and_valid() {
        let defaults = Options::default();
        defaults.validate().unwrap();
        for knob in KNOBS {
            assert!(knob.kind.accepts((knob.get)(&defaults)), "{}", knob.name);
        }
        assert_eq!(defaults.page_size, 16384);
        assert_eq!(defaults.buffer_pool_size, 128 * MIB);
        assert_eq!(defaults.buffer_pool_instances, 1);
        assert_eq!(defaults.old_blocks_pct, 37);
        assert_eq!(defaults.old_blocks_time, 1000);
        assert_eq!(defaults.flush_method, FlushMethod::Fsync);
    }

    #[test]
    fn page_size_accepts_bytes_and_suffixes_only_from_the_set() {
        let mut o = Options::default();
        for (text, bytes) in [
            ("4096", 4096),
            ("8K", 8192),
            ("16k", 16384),
            ("32KiB", 32768),
            ("64K", 65536),
        ] {
            o.set("page_size", text).unwrap();
            assert_eq!(o.page_size, bytes, "{text}");
        }
        for bad in ["2048", "12K", "128K", "16 KB", "abc", "", "-4096"] {
            let (name, value, expected) = invalid(o.set("page_size", bad).unwrap_err());
            assert_eq!((name.as_str(), value.as_str()), ("page_size", bad));
            assert_eq!(
                expected,
                "one of 4096, 8192, 16384, 32768, 65536 (or 4K..64K)"
            );
        }
    }

    #[test]
    fn sizes_take_kib_based_suffixes_and_check_the_range() {
        let mut o = Options::default();
        for (text, bytes) in [
            ("16M", 16 * MIB),
            ("16m", 16 * MIB),
            ("1G", GIB),
            ("2GiB", 2 * GIB),
            ("512MiB", 512 * MIB),
            ("256K", 256 * KIB),
            ("1T", TIB),
            ("1TiB", TIB),
            ("1048576", MIB),
        ] {
            o.set("buffer_pool_size", text).unwrap();
            assert_eq!(o.buffer_pool_size, bytes, "{text}");
        }
        for bad in ["255K", "2T", "1.5G", "10X", "M", "99999999999999999999G"] {
            let (_, _, expected) = invalid(o.set("buffer_pool_size", bad).unwrap_err());
            assert!(expected.contains("a size from 256K to 1T"), "{expected}");
        }
    }

    #[test]
    fn integers_check_their_ranges() {
        let mut o = Options::default();
        o.set("buffer_pool_instances", "64").unwrap();
        assert_eq!(o.buffer_pool_instances, 64);
        for bad in ["0", "65", "-1", "2.5", "eight"] {
            let (_, _, expected) = invalid(o.set("buffer_pool_instances", bad).unwrap_err());
            assert_eq!(expected, "an integer from 1 to 64");
        }
        o.set("old_blocks_pct", "5").unwrap();
        o.set("old_blocks_pct", "95").unwrap();
        for bad in ["4", "96"] {
            let (_, _, expected) = invalid(o.set("old_blocks_pct", bad).unwrap_err());
            assert!(expected.contains("an integer from 5 to 95"), "{expected}");
        }
        o.set("old_blocks_time", "0").unwrap();
        o.set("old_blocks_time", "4294967295").unwrap();
        assert_eq!(o.old_blocks_time, u32::MAX);
        let (_, _, expected) = invalid(o.set("old_blocks_time", "4294967296").unwrap_err());
        assert!(expected.contains("from 0 to 4294967295"), "{expected}");
    }

    #[test]
    fn flush_method_takes_the_io_names() {
        let mut o = Options::default();
        for name in FlushMethod::NAMES {
            o.set("flush_method", &name.to_uppercase()).unwrap();
            assert_eq!(o.flush_method.name(), *name);
        }
        o.set("flush_method", "o-direct").unwrap();
        assert_eq!(o.flush_method, FlushMethod::ODirect);
        let (_, _, expected) = invalid(o.set("flush_method", "nosync").unwrap_err());
        assert_eq!(
            expected,
            "one of fsync, o_dsync, o_direct, o_direct_no_fsync"
        );
    }

    #[test]
    fn bools_parse_every_spelling() {
        for (text, v) in [
            ("on", 1),
            ("OFF", 0),
            ("true", 1),
            ("False", 0),
            ("1", 1),
            ("0", 0),
        ] {
            assert_eq!(Kind::Bool.parse(text), Some(v), "{text}");
        }
        assert_eq!(Kind::Bool.parse("yes"), None);
        assert_eq!(Kind::Bool.parse("2"), None);
        assert_eq!(Kind::Bool.format(1), "on");
        assert!(Kind::Bool.expected().contains("on, off, true, false, 1, 0"));
    }

    #[test]
    fn names_ignore_case_prefix_and_dashes() {
        let mut o = Options::default();
        o.set("innodb_buffer_pool_size", "1G").unwrap();
        o.set("Buffer-Pool-Instances", "4").unwrap();
        o.set("INNODB-OLD-BLOCKS-PCT", "20").unwrap();
        assert_eq!(o.buffer_pool_size, GIB);
        assert_eq!(o.buffer_pool_instances, 4);
        assert_eq!(o.old_blocks_pct, 20);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = Options::default().set("max_dirty_pages", "60").unwrap_err();
        match &err {
            Error::UnknownOption { name, known, .. } => {
                assert_eq!(name, "max_dirty_pages");
                for knob in Options::known_names() {
                    assert!(known.contains(knob), "{known}");
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("buffer_pool_size"));
        assert!(Options::from_toml_str("log_file_size = 1").is_err());
    }

    #[test]
    fn toml_and_pairs_agree() {
        let toml = r#"
            innodb_page_size = "8K"
            buffer_pool_size = "64M"
            buffer-pool-instances = 2
            old_blocks_pct = 40.0
            old_blocks_time = 0
            flush_method = "O_DIRECT"
        "#;
        let from_toml = Options::from_toml_str(toml).unwrap();
        let mut from_pairs = Options::default();
        from_pairs
            .apply_pairs([
                "innodb_page_size=8K",
                "buffer_pool_size=64M",
                "buffer-pool-instances=2",
                "old_blocks_pct=40",
                "old_blocks_time=0",
                "flush_method=O_DIRECT",
            ])
            .unwrap();
        assert_eq!(from_toml, from_pairs);
        assert_eq!(from_toml.page_size, 8192);
        assert_eq!(from_toml.buffer_pool_size, 64 * MIB);
        assert_eq!(from_toml.flush_method, FlushMethod::ODirect);
    }

    #[test]
    fn toml_rejects_bad_shapes() {
        let err = Options::from_toml_str("old_blocks_pct = 37.5").unwrap_err();
        assert!(invalid(err).2.contains("from 5 to 95"));
        let err = Options::from_toml_str("page_size = [16384]").unwrap_err();
        assert!(invalid(err).2.contains("flat table"));
        let err = Options::from_toml_str("page_size = true").unwrap_err();
        assert!(invalid(err).2.contains("one of 4096"));
        let err = Options::from_toml_str("page_size = 8192\ninnodb_page_size = 8192");
        assert!(matches!(err, Err(Error::InvalidConfig { .. })), "{err:?}");
        let err = Options::from_toml_str("page_size = ");
        assert!(matches!(err, Err(Error::InvalidConfig { .. })), "{err:?}");
    }

    #[test]
    fn toml_file_is_read_and_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evenkeel.toml");
        std::fs::write(&path, "buffer_pool_size = \"1G\"\n").unwrap();
        assert_eq!(
            Options::from_toml_file(&path).unwrap().buffer_pool_size,
            GIB
        );
        let missing = dir.path().join("missing.toml");
        let err = Options::from_toml_file(&missing).unwrap_err().to_string();
        assert!(err.contains("missing.toml"), "{err}");
    }

    #[test]
    fn pairs_are_all_or_nothing() {
        let mut o = Options::default();
        let err = o
            .apply_pairs(["old_blocks_pct=20", "page_size"])
            .unwrap_err();
        assert!(err.to_string().contains("name=value"), "{err}");
        assert!(o
            .apply_pairs(["old_blocks_pct=20", "old_blocks_pct=99"])
            .is_err());
        assert_eq!(o, Options::default());
        o.apply_pairs(["old_blocks_pct=20", "old_blocks_pct=30"])
            .unwrap();
        assert_eq!(o.old_blocks_pct, 30);
    }

    #[test]
    fn validate_requires_64_pages_per_instance() {
        let mut o = Options {
            buffer_pool_size: MIB,
            buffer_pool_instances: 4,
            page_size: 16384,
            ..Options::default()
        };
        let (name, value, expected) = invalid(o.validate().unwrap_err());
        assert_eq!((name.as_str(), value.as_str()), ("buffer_pool_size", "1M"));
        assert!(expected.contains("at least 4M"), "{expected}");
        assert!(
            expected.contains("at least 64 pages (it would hold 16)"),
            "{expected}"
        );
        o.buffer_pool_size = 4 * MIB;
        o.validate().unwrap();
        // The same rule through the parsers.
        let err = Options::from_toml_str("buffer_pool_size = \"512K\"").unwrap_err();
        assert!(invalid(err).2.contains("at least 1M"));
        assert!(Options::default()
            .apply_pairs(["buffer_pool_size=512K"])
            .is_err());
    }

    #[test]
    fn validate_checks_fields_set_directly() {
        let o = Options {
            old_blocks_pct: 200,
            ..Options::default()
        };
        let (name, _, expected) = invalid(o.validate().unwrap_err());
        assert_eq!(name, "old_blocks_pct");
        assert!(expected.contains("from 5 to 95"));
        let o = Options {
            page_size: 0,
            ..Options::default()
        };
        assert_eq!(invalid(o.validate().unwrap_err()).0, "page_size");
    }

    #[test]
    fn describe_round_trips_through_set() {
        let mut o = Options::default();
        o.apply_pairs([
            "page_size=4K",
            "buffer_pool_size=3000000",
            "buffer_pool_instances=3",
            "old_blocks_pct=50",
            "old_blocks_time=12345",
            "flush_method=o_direct_no_fsync",
        ])
        .unwrap();
        let described = o.describe();
        let names: Vec<_> = described.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, Options::known_names());
        let mut back = Options::default();
        back.apply_pairs(described.iter().map(|(n, v)| format!("{n}={v}")))
            .unwrap();
        assert_eq!(back, o);
        let default_text = Options::default().describe();
        assert!(default_text.contains(&("buffer_pool_size", "128M".to_string())));
        assert!(default_text.contains(&("flush_method", "fsync".to_string())));
    }

    #[test]
    fn help_lists_every_knob_with_default_range_and_doc() {
        let help = Options::help();
        assert_eq!(help.len(), KNOBS.len());
        for (name, default, range, doc) in &help {
            assert!(!doc.is_empty() && !range.is_empty(), "{name}");
            let mut o = Options::default();
            o.set(name, default).unwrap();
            assert_eq!(o, Options::default(), "{name}");
        }
        let pool = help.iter().find(|h| h.0 == "buffer_pool_size").unwrap();
        assert_eq!(pool.1, "128M");
        assert!(pool.2.contains("256K to 1T"));
    }

    #[test]
    fn size_formatting_picks_the_largest_exact_suffix() {
        assert_eq!(format_size(0), "0");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(1536 * KIB), "1536K");
        assert_eq!(format_size(2 * GIB), "2G");
        assert_eq!(parse_size(&format_size(3 * TIB)), Some(3 * TIB));
    }
}
