//! evenkeel's option names mapped onto MariaDB's InnoDB, and the `my.cnf` the workbench's own
//! server runs with. The table `MAPPED` is the whole mapping: an option not in it has no
//! InnoDB meaning here and is refused by `PeerOptions::parse` with the engine named; a value
//! InnoDB cannot express (a flush policy InnoDB does not have) is refused with the reason.
//!
//! Must stay true: every accepted option becomes a line of my.cnf (listed by `settings`), and
//! the server never listens on TCP.

use std::fmt::Write as _;
use std::path::Path;

use crate::driver::peer_options::{
    PeerOptions, DEFAULT_BUFFER_POOL_BYTES, DEFAULT_LOCK_WAIT_TIMEOUT_S,
};
use crate::error::{BenchError, BenchResult};

/// evenkeel options the innodb engine takes; each maps onto the InnoDB variable of the same
/// name with an `innodb_` prefix, except the redo capacity (`log_file_size` x
/// `log_files_in_group` → MariaDB's single `innodb_log_file_size`), `adaptive_flushing`
/// (fixed / innodb80 → `innodb_adaptive_flushing` off / on) and `read_ahead` (linear / random
/// → `innodb_random_read_ahead` off / on).
pub const MAPPED: &[&str] = &[
    "page_size",
    "buffer_pool_size",
    "buffer_pool_instances",
    "old_blocks_pct",
    "old_blocks_time",
    "flush_method",
    "log_file_size",
    "log_files_in_group",
    "log_buffer_size",
    "flush_log_at_trx_commit",
    "io_capacity",
    "io_capacity_max",
    "doublewrite",
    "lock_wait_timeout",
    "adaptive_flushing",
    "adaptive_flushing_lwm",
    "flushing_avg_loops",
    "max_dirty_pages_pct",
    "max_dirty_pages_pct_lwm",
    "flush_neighbors",
    "lru_scan_depth",
    "page_cleaners",
    "read_ahead",
    "read_ahead_threshold",
    "read_io_threads",
    "write_io_threads",
];

/// Options that only take effect when the datadir is created.
pub const CREATE_TIME: &[&str] = &["page_size"];

/// InnoDB settings (name without the `innodb_` prefix, value as my.cnf takes it) for the
/// options given; defaults follow evenkeel's so an empty `--set` compares like with like.
pub fn settings(o: &PeerOptions) -> BenchResult<Vec<(String, String)>> {
    let mut s: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| s.push((k.to_string(), v));
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let page = o.size("page_size", 16 * KIB, 4 * KIB, 64 * KIB)?;
    if ![4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB].contains(&page) {
        return Err(BenchError::Usage(format!(
            "innodb engine: page_size={page} is not valid: expected 4K, 8K, 16K, 32K or 64K"
        )));
    }
    put("page_size", page.to_string());
    put(
        "buffer_pool_size",
        o.size(
            "buffer_pool_size",
            DEFAULT_BUFFER_POOL_BYTES,
            8 * MIB,
            1 << 40,
        )?
        .to_string(),
    );
    // MariaDB 10.5+ has one buffer pool instance and one page cleaner: only 1 means the same.
    for single in ["buffer_pool_instances", "page_cleaners"] {
        if o.int(single, 1, 1, 64)? != 1 {
            return Err(BenchError::Usage(format!(
                "innodb engine: {single} must be 1: MariaDB 10.5 and later have one buffer \
                 pool instance and one page cleaner"
            )));
        }
    }
    if o.raw("old_blocks_pct").is_some() {
        put(
            "old_blocks_pct",
            o.int("old_blocks_pct", 37, 5, 95)?.to_string(),
        );
    }
    if o.raw("old_blocks_time").is_some() {
        put(
            "old_blocks_time",
            o.int("old_blocks_time", 1000, 0, u64::from(u32::MAX))?
                .to_string(),
        );
    }
    let method = o
        .choice(
            "flush_method",
            &["fsync", "o_dsync", "o_direct", "o_direct_no_fsync"],
        )?
        .unwrap_or_else(|| "fsync".into());
    let method = match method.as_str() {
        "o_dsync" => "O_DSYNC",
        "o_direct" => "O_DIRECT",
        "o_direct_no_fsync" => "O_DIRECT_NO_FSYNC",
        _ => "fsync",
    };
    put("flush_method", method.to_string());
    // MariaDB keeps one redo file; its size is the whole capacity.
    put("log_file_size", o.redo_capacity()?.max(MIB).to_string());
    // As evenkeel does for a small log: the default 16 MiB buffer becomes a quarter of the
    // redo capacity (at least 256 KiB) when it is over half of it; a set value is kept.
    let redo = o.redo_capacity()?.max(MIB);
    let default_buffer = if 16 * MIB > redo / 2 {
        (redo / 4).max(256 * KIB)
    } else {
        16 * MIB
    };
    put(
        "log_buffer_size",
        o.size("log_buffer_size", default_buffer, 256 * KIB, 4 * GIB)?
            .to_string(),
    );
    put("flush_log_at_trx_commit", o.durability()?.to_string());
    let io = o.int("io_capacity", 200, 100, u64::from(u32::MAX))?;
    let io_max = o.int("io_capacity_max", 2000, 100, u64::from(u32::MAX))?;
    if io_max < io {
        return Err(BenchError::Usage(format!(
            "innodb engine: io_capacity_max={io_max} is below io_capacity={io}"
        )));
    }
    put("io_capacity", io.to_string());
    put("io_capacity_max", io_max.to_string());
    put("doublewrite", on_off(o.bool("doublewrite", true)?));
    put(
        "lock_wait_timeout",
        o.int(
            "lock_wait_timeout",
            DEFAULT_LOCK_WAIT_TIMEOUT_S,
            1,
            1_073_741_824,
        )?
        .to_string(),
    );
    if let Some(raw) = o.raw("adaptive_flushing") {
        put("adaptive_flushing", on_off(adaptive_flushing_on(raw)?));
    }
    let opt_int = |name: &str, default: u64, min: u64, max: u64| -> BenchResult<Option<String>> {
        Ok(match o.raw(name) {
            Some(_) => Some(o.int(name, default, min, max)?.to_string()),
            None => None,
        })
    };
    let ranged: [(&str, u64, u64, u64); 8] = [
        ("adaptive_flushing_lwm", 10, 0, 70),
        ("flushing_avg_loops", 30, 1, 1000),
        ("max_dirty_pages_pct", 90, 1, 99),
        ("max_dirty_pages_pct_lwm", 10, 0, 99),
        ("flush_neighbors", 0, 0, 2),
        ("lru_scan_depth", 1024, 100, u64::from(u32::MAX)),
        ("read_ahead_threshold", 56, 0, 64),
        ("read_io_threads", 2, 1, 64),
    ];
    for (name, default, min, max) in ranged {
        if let Some(v) = opt_int(name, default, min, max)? {
            put(name, v);
        }
    }
    // evenkeel's defaults that differ from MariaDB's: neighbours off, as evenkeel's default.
    if o.raw("flush_neighbors").is_none() {
        put("flush_neighbors", "0".into());
    }
    if let Some(v) = opt_int("write_io_threads", 4, 1, 64)? {
        put("write_io_threads", v);
    }
    match o
        .choice("read_ahead", &["none", "linear", "random"])?
        .as_deref()
    {
        Some("none") => {
            return Err(BenchError::Usage(
                "innodb engine: read_ahead=none has no InnoDB equivalent: InnoDB's linear \
                 read-ahead is always on (read_ahead=linear or random)"
                    .into(),
            ))
        }
        Some(r) => put("random_read_ahead", on_off(r == "random")),
        None => {}
    }
    Ok(s)
}

fn on_off(b: bool) -> String {
    if b { "ON" } else { "OFF" }.to_string()
}

/// Where the server keeps its files.
pub struct Paths<'a> {
    pub datadir: &'a Path,
    pub socket: &'a Path,
    pub pid_file: &'a Path,
    pub error_log: &'a Path,
    /// The server's own temporary directory (two servers sharing /tmp collide on names).
    pub tmpdir: &'a Path,
}

/// The whole my.cnf: the mapped InnoDB settings plus what every run of the workbench's server
/// needs (its own socket, no TCP, READ COMMITTED, a lock-wait timeout that ends the whole
/// transaction, no binary log).
pub fn my_cnf(innodb: &[(String, String)], p: &Paths<'_>, user: &str) -> String {
    let mut s = String::from(
        "# Written by the evenkeel workbench for its own MariaDB server; rewritten every start.\n\
         [mariadbd]\n",
    );
    let _ = writeln!(s, "user = {user}");
    let _ = writeln!(s, "datadir = {}", p.datadir.display());
    let _ = writeln!(s, "socket = {}", p.socket.display());
    let _ = writeln!(s, "pid-file = {}", p.pid_file.display());
    let _ = writeln!(s, "log-error = {}", p.error_log.display());
    let _ = writeln!(s, "tmpdir = {}", p.tmpdir.display());
    s.push_str(
        "skip-networking\n\
         skip-grant-tables\n\
         skip-name-resolve\n\
         skip-log-bin\n\
         default-storage-engine = InnoDB\n\
         # InnoDB's default and evenkeel's: plain reads see one read view per transaction,\n\
         # locking reads and writes the newest committed rows.\n\
         transaction-isolation = REPEATABLE-READ\n\
         # A lock-wait timeout rolls back the whole transaction, as a deadlock does, so both\n\
         # are retryable the same way (the driver trait's contract).\n\
         innodb_rollback_on_timeout = ON\n\
         innodb_deadlock_detect = ON\n\
         # The rows are opaque bytes; a prepared-statement cache per connection.\n\
         max_prepared_stmt_count = 65528\n\
         max_connections = 1000\n\
         # No query cache (off in 10.11's defaults too), no performance schema overhead.\n\
         query_cache_type = OFF\n\
         performance_schema = OFF\n\
         # Every run starts with a cold pool, as evenkeel's does (no dump at shutdown, no load\n\
         # at start from a sweep template's copy).\n\
         innodb_buffer_pool_dump_at_shutdown = OFF\n\
         innodb_buffer_pool_load_at_startup = OFF\n\
         # Every INNODB_METRICS counter (pages flushed by kind, sync-flush waits, checkpoints).\n\
         innodb_monitor_enable = all\n",
    );
    for (k, v) in innodb {
        let _ = writeln!(s, "innodb_{k} = {v}");
    }
    s
}

/// evenkeel's two flush policies InnoDB has, by name: the one that is InnoDB's adaptive
/// flushing (innodb80, InnoDB 5.6-8.0's) and the one without it (fixed, InnoDB 5.1's).
#[cfg(feature = "evenkeel")]
fn innodb_policies() -> (&'static str, &'static str) {
    use evenkeel::options::FlushPolicy;
    (FlushPolicy::Innodb80.name(), FlushPolicy::Fixed.name())
}

/// The same in a build without the evenkeel feature, which does not link the engine crate
/// where the policy names are defined.
#[cfg(not(feature = "evenkeel"))]
fn innodb_policies() -> (&'static str, &'static str) {
    ("innodb80", "fixed")
}

/// `innodb_adaptive_flushing` for an `adaptive_flushing` value: on for a true boolean or the
/// innodb80 policy, off for a false one or fixed; any other policy has no InnoDB equivalent.
fn adaptive_flushing_on(raw: &str) -> BenchResult<bool> {
    let (on, off) = innodb_policies();
    match raw.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        v if v == on => Ok(true),
        v if v == off => Ok(false),
        _ => Err(BenchError::Usage(format!(
            "innodb engine: adaptive_flushing={raw} has no InnoDB equivalent: InnoDB has \
             adaptive flushing on ({on}) or off ({off})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(p: &[(&str, &str)]) -> BenchResult<PeerOptions> {
        let pairs: Vec<(String, String)> = p
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PeerOptions::parse("innodb", None, &pairs, MAPPED)
    }

    fn get<'a>(s: &'a [(String, String)], k: &str) -> Option<&'a str> {
        s.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn maps_redo_capacity_and_policies() {
        let s = settings(
            &opts(&[
                ("log_file_size", "8M"),
                ("log_files_in_group", "2"),
                ("adaptive_flushing", "fixed"),
                ("flush_method", "o_direct"),
                ("doublewrite", "off"),
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(get(&s, "log_file_size"), Some("16777216"));
        assert_eq!(get(&s, "adaptive_flushing"), Some("OFF"));
        assert_eq!(get(&s, "flush_method"), Some("O_DIRECT"));
        assert_eq!(get(&s, "doublewrite"), Some("OFF"));
        let s = settings(&opts(&[("flush_method", "o_direct_no_fsync")]).unwrap()).unwrap();
        assert_eq!(get(&s, "flush_method"), Some("O_DIRECT_NO_FSYNC"));
        let e = opts(&[("checkpoint_sync_point_pct", "90")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("innodb engine has no equivalent"), "{e}");
    }

    /// Of evenkeel's flush policies, innodb80 and fixed map onto InnoDB's adaptive flushing on
    /// and off; every other is refused with a message naming the two.
    #[cfg(feature = "evenkeel")]
    #[test]
    fn maps_every_evenkeel_flush_policy_or_refuses_it() {
        use evenkeel::options::FlushPolicy;
        for p in FlushPolicy::ALL {
            let r = settings(&opts(&[("adaptive_flushing", p.name())]).unwrap());
            match p {
                FlushPolicy::Innodb80 => {
                    assert_eq!(get(&r.unwrap(), "adaptive_flushing"), Some("ON"))
                }
                FlushPolicy::Fixed => {
                    assert_eq!(get(&r.unwrap(), "adaptive_flushing"), Some("OFF"))
                }
                _ => {
                    let e = r.unwrap_err().to_string();
                    assert!(
                        e.contains(&format!("adaptive_flushing={p} has no InnoDB equivalent"))
                            && e.contains("on (innodb80) or off (fixed)"),
                        "{e}"
                    );
                }
            }
        }
    }
}
