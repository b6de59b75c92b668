//! summary.json: one run's figures. Stability figures come from the per-second primary
//! throughput of the measured seconds (rows not marked `excluded`); per-op I/O and CPU divide totals over those
//! seconds by the primary operations (New-Order for TPC-C, inserted rows for the insert
//! benchmark), using device counters when the data directory's device is known and the
//! process's /proc/self/io otherwise. iibench's table columns (ips.av, ips.99, wKB/i, rKB/i,
//! r/i, Mcpu/i, size, rss, wMB/s, cpu) are all derivable from here; [`COLUMN_NOTES`] says what
//! each means, wherever a table of them is shown. The machine's load average and the CPU other
//! processes used are summed up beside the engine's own figures, and [`IoFigures`] says whether
//! the run was IO-bound.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::iobound::{parse_size, IoFigures};
use crate::metrics::{Kind, METRICS};
use crate::recorder::KindSummary;
use crate::sampler::host::HOST_SLOW_FRAC;
use crate::sampler::probe::DEVICE_STALL_MS;
use crate::sampler::SampleRow;
use crate::stability::{relative_to_rolling_median, stability, Stability, DETREND_WINDOW_S};

/// One step of the insert benchmark. `rows`, `seconds`, `ips_av` and `ips_99` are the
/// measured part: after the step's warmup (`--warmup`, l.i1 and l.i2), all of it otherwise.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepSummary {
    pub step: String,
    pub rows: u64,
    pub seconds: f64,
    pub ips_av: f64,
    pub ips_99: f64,
    /// Seconds the step ran before it was measured (its warmup); 0 without one.
    #[serde(default)]
    pub warmup_s: f64,
    /// Rows inserted in those seconds, in no measured figure.
    #[serde(default)]
    pub warmup_rows: u64,
}

impl StepSummary {
    /// True when the step had a warmup and finished inside it: nothing of it was measured.
    pub fn ended_in_warmup(&self) -> bool {
        self.warmup_s > 0.0 && self.seconds == 0.0
    }

    /// What the step's warmup left out, for a line beside its figures ("" without one).
    pub fn warmup_note(&self) -> String {
        if self.ended_in_warmup() {
            format!(
                "ended inside its warmup ({} rows in {:.1} s): nothing measured",
                self.warmup_rows, self.warmup_s
            )
        } else if self.warmup_s > 0.0 {
            format!(
                "after a {:.1} s warmup of {} rows, not counted",
                self.warmup_s, self.warmup_rows
            )
        } else {
            String::new()
        }
    }
}

/// A change the run made to the engine while it ran (`--at TIME:set NAME=VALUE`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RunEvent {
    /// Second of the run's time axis (the `t_s` of timeseries.csv) after which it applied.
    pub t_s: u64,
    /// The schedule's time, seconds from the start of the measured phase.
    pub at_s: u64,
    /// `set NAME=VALUE`.
    pub action: String,
    /// The engine's refusal, when it refused.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Summary {
    pub workload: String,
    pub engine: String,
    pub config: BTreeMap<String, String>,
    pub config_hash: String,
    pub started_unix_s: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// What one "op" is in the per-op figures.
    pub op: String,
    pub ops: u64,
    pub throughput_mean: f64,
    pub throughput_p1: f64,
    pub throughput_min: f64,
    pub throughput_max: f64,
    pub throughput_cv: f64,
    pub seconds_below_half_mean: u64,
    pub zero_seconds: u64,
    pub longest_zero_run: u64,
    /// The same figures on throughput relative to its 30-second rolling median
    /// (`stability::detrended`): holes show here, slow drift does not. p1 and min over the
    /// mean, and the seconds under half of it.
    #[serde(default)]
    pub detrended_p1_over_mean: f64,
    #[serde(default)]
    pub detrended_min_over_mean: f64,
    #[serde(default)]
    pub detrended_seconds_below_half: u64,
    /// Measured seconds in which the device probe took 100 ms or more (`sampler::probe`):
    /// the device held every durable commit back, whatever the engine did. None without a
    /// probe.
    #[serde(default)]
    pub device_stall_seconds: Option<u64>,
    /// The detrended p1/mean over the measured seconds without a device stall (the rolling
    /// median still over every second): how level the engine ran where the device let it.
    #[serde(default)]
    pub detrended_p1_over_mean_device_ok: Option<f64>,
    /// Measured seconds in which the host's memory ran slow: the host probe's load took
    /// [`HOST_SLOW_FRAC`] of its 30-second rolling median or longer (`sampler::host`). None
    /// without the probe's figures.
    #[serde(default)]
    pub host_slow_seconds: Option<u64>,
    /// The detrended p1/mean over the measured seconds in which the host's memory did not run
    /// slow: how level the engine ran where the host let it.
    #[serde(default)]
    pub detrended_p1_over_mean_host_ok: Option<f64>,
    /// The correlation of the detrended throughput with the host's memory speed (the probe's
    /// loads per second relative to their rolling median), -1 to 1: near 0 where the engine's
    /// line is its own, high where it follows the host.
    #[serde(default)]
    pub host_speed_correlation: Option<f64>,
    pub checkpoint_age_max_pct: Option<f64>,
    pub checkpoint_age_max_bytes: Option<u64>,
    pub dirty_pct_mean: Option<f64>,
    pub stall_ms_total: Option<f64>,
    /// Foreground stall of all kinds over the measured seconds, summed over threads.
    pub foreground_stall_s: Option<f64>,
    /// Commit admission delay over the measured seconds, summed over threads.
    pub admission_delay_s: Option<f64>,
    /// Of the admission delay, commits waiting for the page cleaner to make room in the log
    /// (evenkeel's room waits), summed over threads.
    #[serde(default)]
    pub room_wait_s: Option<f64>,
    /// Measured seconds in which committing threads flushed at the checkpoint's sync point
    /// (flushed_sync_pages > 0).
    pub sync_point_seconds: Option<u64>,
    /// Measured seconds in which committing threads flushed below the sync point because the
    /// log's free space was promised to transactions in flight (flushed_log_space_pages > 0).
    #[serde(default)]
    pub log_space_seconds: Option<u64>,
    /// The flush policy over the measured seconds; `a -> b` when a schedule changed it.
    pub flush_policy: Option<String>,
    /// Changes made while running, in order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub events: Vec<RunEvent>,
    pub write_kb_per_op: f64,
    pub read_kb_per_op: f64,
    pub reads_per_op: f64,
    pub cpu_us_per_op: f64,
    pub write_mb_per_s: f64,
    pub read_mb_per_s: f64,
    pub reads_per_s: f64,
    pub cpu_pct: f64,
    pub size_bytes: Option<u64>,
    pub rss_bytes: u64,
    pub retries: u64,
    pub failed: u64,
    /// The machine's 1-minute load average over the measured seconds: mean and highest.
    #[serde(default)]
    pub load_avg_1m_mean: Option<f64>,
    #[serde(default)]
    pub load_avg_1m_max: Option<f64>,
    /// CPU other processes used over the measured seconds, % of one CPU: mean and highest.
    #[serde(default)]
    pub other_cpu_pct_mean: Option<f64>,
    #[serde(default)]
    pub other_cpu_pct_max: Option<f64>,
    /// Of that, CPU the hypervisor stole for other guests, % of one CPU: mean and highest.
    #[serde(default)]
    pub steal_pct_mean: Option<f64>,
    #[serde(default)]
    pub steal_pct_max: Option<f64>,
    /// Whether the run was IO-bound, and the reads and writes that say so.
    #[serde(default)]
    pub io: Option<IoFigures>,
    pub load_seconds: Option<f64>,
    // TPC-C.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tpmc: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tpm_total: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub transactions: Vec<KindSummary>,
    /// Consistency checks run in one transaction while the clients ran (`--live-check`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub live_checks: Vec<crate::tpcc::check::LiveCheck>,
    // Insert benchmark.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ips_av: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ips_99: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub steps: Vec<StepSummary>,
    /// Every engine metric of the sampled table (crate::metrics) the engine exposed, by its
    /// timeseries.csv column.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub engine_metrics: BTreeMap<String, MetricFigures>,
}

/// One engine metric over the measured seconds: for a counter, its total and its mean and
/// highest per second; for a gauge, its mean and highest value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct MetricFigures {
    pub unit: String,
    pub kind: Kind,
    /// A counter's sum over the measured seconds (None for a gauge).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub total: Option<f64>,
    pub mean: f64,
    pub max: f64,
    /// Measured seconds with a value.
    pub seconds: u64,
}

/// Each metric of the table that has values in `rows`.
pub fn engine_metrics(rows: &[&SampleRow]) -> BTreeMap<String, MetricFigures> {
    let values: Vec<Vec<Option<f64>>> = rows.iter().map(|r| r.engine.values()).collect();
    let mut out = BTreeMap::new();
    for (i, spec) in METRICS.iter().enumerate() {
        let v: Vec<f64> = values.iter().filter_map(|r| r[i]).collect();
        if v.is_empty() {
            continue;
        }
        let total: f64 = v.iter().sum();
        out.insert(
            spec.column.to_string(),
            MetricFigures {
                unit: spec.unit.to_string(),
                kind: spec.kind,
                total: (spec.kind != Kind::Gauge).then_some(total),
                mean: total / v.len() as f64,
                max: v.iter().copied().fold(f64::MIN, f64::max),
                seconds: v.len() as u64,
            },
        );
    }
    out
}

fn sum<T>(rows: &[&SampleRow], f: impl Fn(&SampleRow) -> T) -> f64
where
    T: Into<f64>,
{
    rows.iter().map(|r| f(r).into()).sum()
}

/// FNV-1a of the configuration, as 16 hex digits: the `config_hash` column of timeseries.csv.
pub fn config_hash(workload: &str, engine: &str, config: &BTreeMap<String, String>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |s: &str| {
        for b in s.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    feed(workload);
    feed(engine);
    for (k, v) in config {
        feed(k);
        feed(v);
    }
    format!("{h:016x}")
}

/// The host probe's figures over a run's measured seconds ([`host_figures`]).
#[derive(Clone, Copy, Debug, PartialEq)]
struct HostFigures {
    slow_seconds: u64,
    p1_over_mean_ok: f64,
    correlation: Option<f64>,
}

/// The host's slow seconds, the detrended p1/mean without them, and the correlation of the
/// detrended throughput `rel` (one value per row of `m`) with the host's memory speed; None
/// unless the probe measured at least half the seconds. The host's load time is taken relative
/// to its own rolling median over the seconds it measured, as the throughput is, so a slow
/// drift of either divides out and what remains is the seconds the host's memory slowed.
fn host_figures(m: &[&SampleRow], rel: &[f64]) -> Option<HostFigures> {
    let measured: Vec<(f64, f64)> = m
        .iter()
        .zip(rel)
        .filter_map(|(r, &v)| r.host_mem_ns.filter(|ns| *ns > 0.0).map(|ns| (v, ns)))
        .collect();
    if measured.is_empty() || measured.len() * 2 < m.len() {
        return None;
    }
    let ns: Vec<f64> = measured.iter().map(|(_, ns)| *ns).collect();
    let slower = relative_to_rolling_median(&ns, DETREND_WINDOW_S);
    let slow: Vec<bool> = slower.iter().map(|x| *x >= HOST_SLOW_FRAC).collect();
    let speed: Vec<f64> = slower
        .iter()
        .map(|x| if *x > 0.0 { 1.0 / x } else { 0.0 })
        .collect();
    let tput: Vec<f64> = measured.iter().map(|(v, _)| *v).collect();
    Some(HostFigures {
        slow_seconds: slow.iter().filter(|s| **s).count() as u64,
        p1_over_mean_ok: p1_over_mean_without(&tput, &slow),
        correlation: correlation(&tput, &speed),
    })
}

/// p1/mean of `rel` over the seconds `skip` does not mark (the device's stalls, the host's
/// slow seconds); 0 when nothing is left.
fn p1_over_mean_without(rel: &[f64], skip: &[bool]) -> f64 {
    let ok: Vec<f64> = rel
        .iter()
        .zip(skip)
        .filter(|(_, s)| !**s)
        .map(|(v, _)| *v)
        .collect();
    let st = stability(&ok);
    if st.mean > 0.0 {
        st.p1 / st.mean
    } else {
        0.0
    }
}

/// Pearson's correlation of two series of equal length; None when either is constant.
fn correlation(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let mean = |x: &[f64]| x[..n].iter().sum::<f64>() / n as f64;
    let (ma, mb) = (mean(a), mean(b));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (x, y) = (a[i] - ma, b[i] - mb);
        sab += x * y;
        saa += x * x;
        sbb += y * y;
    }
    (saa > 0.0 && sbb > 0.0).then(|| sab / (saa * sbb).sqrt())
}

impl Summary {
    /// Fill the common figures from the measured rows (`excluded` rows are skipped).
    pub fn from_rows(
        workload: &str,
        engine: &str,
        config: BTreeMap<String, String>,
        op: &str,
        rows: &[SampleRow],
    ) -> Summary {
        let m: Vec<&SampleRow> = rows.iter().filter(|r| !r.excluded).collect();
        let series: Vec<f64> = m.iter().map(|r| r.ops as f64).collect();
        let st: Stability = stability(&series);
        // `stability::detrended`, with the relative series kept for the device-ok figure
        let rel = relative_to_rolling_median(&series, DETREND_WINDOW_S);
        let dt = stability(&rel);
        let over_mean = |x: f64| if dt.mean > 0.0 { x / dt.mean } else { 0.0 };
        let stalled: Option<Vec<bool>> = m
            .iter()
            .map(|r| r.device_probe_ms.map(|ms| ms >= DEVICE_STALL_MS))
            .collect();
        let device_ok = stalled
            .as_ref()
            .map(|stalled| p1_over_mean_without(&rel, stalled));
        let host = host_figures(&m, &rel);
        let secs = m.len().max(1) as f64;
        let ops: u64 = m.iter().map(|r| r.ops).sum();
        let per_op = |x: f64| if ops == 0 { 0.0 } else { x / ops as f64 };
        let use_dev = m.iter().any(|r| r.dev_write_bytes.is_some());
        let wbytes = if use_dev {
            sum(&m, |r| r.dev_write_bytes.unwrap_or(0) as f64)
        } else {
            sum(&m, |r| r.io_write_bytes as f64)
        };
        let rbytes = if use_dev {
            sum(&m, |r| r.dev_read_bytes.unwrap_or(0) as f64)
        } else {
            sum(&m, |r| r.io_read_bytes as f64)
        };
        let reads = if use_dev {
            sum(&m, |r| r.dev_reads.unwrap_or(0) as f64)
        } else {
            sum(&m, |r| r.engine.pages_read.unwrap_or(0) as f64)
        };
        let cpu_s = sum(&m, |r| r.cpu_pct / 100.0);
        let dirty: Vec<f64> = m.iter().filter_map(|r| r.engine.dirty_pct).collect();
        let stall: Vec<f64> = m.iter().filter_map(|r| r.engine.stall_ms).collect();
        let admission: Vec<f64> = m
            .iter()
            .filter_map(|r| r.engine.admission_delay_ms)
            .collect();
        let room: Vec<f64> = m.iter().filter_map(|r| r.engine.room_wait_ms).collect();
        let sync: Vec<u64> = m
            .iter()
            .filter_map(|r| r.engine.flushed_sync_pages)
            .collect();
        let log_space: Vec<u64> = m
            .iter()
            .filter_map(|r| r.engine.flushed_log_space_pages)
            .collect();
        let mut policies: Vec<&str> = Vec::new();
        for p in m.iter().filter_map(|r| r.engine.flush_policy.as_deref()) {
            if policies.last() != Some(&p) {
                policies.push(p);
            }
        }
        let hash = config_hash(workload, engine, &config);
        let mean_max = |v: Vec<f64>| -> (Option<f64>, Option<f64>) {
            if v.is_empty() {
                return (None, None);
            }
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            (Some(mean), v.into_iter().reduce(f64::max))
        };
        let (load_avg_1m_mean, load_avg_1m_max) =
            mean_max(m.iter().filter_map(|r| r.load_avg_1m).collect());
        let (other_cpu_pct_mean, other_cpu_pct_max) =
            mean_max(m.iter().filter_map(|r| r.other_cpu_pct).collect());
        let (steal_pct_mean, steal_pct_max) =
            mean_max(m.iter().filter_map(|r| r.steal_pct).collect());
        let option = |name: &str| {
            config
                .get(&format!("{engine}.{name}"))
                .and_then(|v| parse_size(v))
        };
        let size_bytes = rows.iter().rev().find_map(|r| r.size_bytes);
        let io = IoFigures::from_rows(
            &m,
            option("page_size"),
            option("buffer_pool_size"),
            size_bytes,
        );
        Summary {
            workload: workload.to_string(),
            engine: engine.to_string(),
            config,
            config_hash: hash,
            duration_s: m.len() as f64,
            warmup_s: (rows.len() - m.len()) as f64,
            op: op.to_string(),
            ops,
            throughput_mean: st.mean,
            throughput_p1: st.p1,
            throughput_min: st.min,
            throughput_max: st.max,
            throughput_cv: st.cv,
            seconds_below_half_mean: st.seconds_below_half_mean,
            zero_seconds: st.zero_seconds,
            longest_zero_run: st.longest_zero_run,
            detrended_p1_over_mean: over_mean(dt.p1),
            detrended_min_over_mean: over_mean(dt.min),
            detrended_seconds_below_half: dt.seconds_below_half_mean,
            device_stall_seconds: stalled
                .as_ref()
                .map(|s| s.iter().filter(|x| **x).count() as u64),
            detrended_p1_over_mean_device_ok: device_ok,
            host_slow_seconds: host.map(|h| h.slow_seconds),
            detrended_p1_over_mean_host_ok: host.map(|h| h.p1_over_mean_ok),
            host_speed_correlation: host.and_then(|h| h.correlation),
            checkpoint_age_max_pct: m
                .iter()
                .filter_map(|r| r.engine.checkpoint_age_pct)
                .reduce(f64::max),
            checkpoint_age_max_bytes: m.iter().filter_map(|r| r.engine.checkpoint_age_bytes).max(),
            dirty_pct_mean: (!dirty.is_empty())
                .then(|| dirty.iter().sum::<f64>() / dirty.len() as f64),
            stall_ms_total: (!stall.is_empty()).then(|| stall.iter().sum()),
            foreground_stall_s: (!stall.is_empty()).then(|| stall.iter().sum::<f64>() / 1000.0),
            admission_delay_s: (!admission.is_empty())
                .then(|| admission.iter().sum::<f64>() / 1000.0),
            room_wait_s: (!room.is_empty()).then(|| room.iter().sum::<f64>() / 1000.0),
            sync_point_seconds: (!sync.is_empty())
                .then(|| sync.iter().filter(|&&p| p > 0).count() as u64),
            log_space_seconds: (!log_space.is_empty())
                .then(|| log_space.iter().filter(|&&p| p > 0).count() as u64),
            flush_policy: (!policies.is_empty()).then(|| policies.join(" -> ")),
            write_kb_per_op: per_op(wbytes / 1024.0),
            read_kb_per_op: per_op(rbytes / 1024.0),
            reads_per_op: per_op(reads),
            cpu_us_per_op: per_op(cpu_s * 1e6),
            write_mb_per_s: wbytes / 1_048_576.0 / secs,
            read_mb_per_s: rbytes / 1_048_576.0 / secs,
            reads_per_s: reads / secs,
            cpu_pct: cpu_s * 100.0 / secs,
            size_bytes,
            rss_bytes: rows.last().map_or(0, |r| r.rss_bytes),
            retries: m.iter().map(|r| r.retries).sum(),
            failed: m.iter().map(|r| r.failed).sum(),
            load_avg_1m_mean,
            load_avg_1m_max,
            other_cpu_pct_mean,
            other_cpu_pct_max,
            steal_pct_mean,
            steal_pct_max,
            io: Some(io),
            engine_metrics: engine_metrics(&m),
            ..Summary::default()
        }
    }

    /// The throughput stability figures as one struct.
    pub fn stability(&self) -> Stability {
        Stability {
            seconds: self.duration_s as u64,
            mean: self.throughput_mean,
            p1: self.throughput_p1,
            min: self.throughput_min,
            max: self.throughput_max,
            cv: self.throughput_cv,
            seconds_below_half_mean: self.seconds_below_half_mean,
            zero_seconds: self.zero_seconds,
            longest_zero_run: self.longest_zero_run,
        }
    }
}

/// The flushing figures as one line for the terminal ("-" where the engine reports nothing).
pub fn flushing_line(s: &Summary) -> String {
    let o = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    format!(
        "flushing: policy {}, max checkpoint age {}%, mean dirty {}%, foreground stall {} s, admission delay {} s (room waits {} s), sync-point seconds {}, log-space seconds {}",
        s.flush_policy.as_deref().unwrap_or("-"),
        o(s.checkpoint_age_max_pct),
        o(s.dirty_pct_mean),
        o(s.foreground_stall_s),
        o(s.admission_delay_s),
        o(s.room_wait_s),
        s.sync_point_seconds.map_or("-".to_string(), |v| v.to_string()),
        s.log_space_seconds.map_or("-".to_string(), |v| v.to_string())
    )
}

/// Mean hypervisor steal, % of one CPU, from which a run is marked as not comparable to a
/// quiet one: a tenth of a CPU taken by the host shows in any CPU-bound figure.
pub const STEAL_WARN_PCT: f64 = 10.0;

/// The machine beside the run, as one line for the terminal.
pub fn machine_line(s: &Summary) -> String {
    let o = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let warn = match s.steal_pct_mean {
        Some(st) if st >= STEAL_WARN_PCT => format!(
            "; WARNING: the hypervisor took {st:.0}% of one CPU on average (steal), so this \
             run's figures do not compare with a quiet run's"
        ),
        _ => String::new(),
    };
    format!(
        "machine: load average (1 min) mean {}, max {}; other processes' CPU mean {}%, max {}% \
         of one CPU, of it stolen by the hypervisor mean {}%, max {}% (this process: {:.1}%){warn}",
        o(s.load_avg_1m_mean),
        o(s.load_avg_1m_max),
        o(s.other_cpu_pct_mean),
        o(s.other_cpu_pct_max),
        o(s.steal_pct_mean),
        o(s.steal_pct_max),
        s.cpu_pct
    )
}

/// What each summary column means: iibench's columns and the sweep table's extra ones.
/// "Storage" is the device holding the data when the sampler found it, else this process's
/// reads and writes (/proc/self/io); an operation is the run's `op` (a New-Order for TPC-C, an
/// inserted row or a query for the insert benchmark).
pub const COLUMN_NOTES: &[(&str, &str)] = &[
    (
        "ips.av",
        "operations per second, mean over the measured seconds",
    ),
    (
        "ips.99",
        "operations per second in the 1st-percentile second (99% of seconds did more)",
    ),
    ("r/i", "storage reads per operation"),
    ("rKB/i", "KiB read from storage per operation"),
    ("wKB/i", "KiB written to storage per operation"),
    ("Mcpu/i", "CPU microseconds of this process per operation"),
    ("size", "data directory size at the end, GB"),
    ("rss", "this process's resident memory at the end, GB"),
    ("r/s", "storage reads per second"),
    ("rMB/s", "MiB read from storage per second"),
    ("wMB/s", "MiB written to storage per second"),
    ("cpu", "this process's CPU, % of one CPU"),
    (
        "engine",
        "the engine (and in a sweep, the varied setting's value)",
    ),
    (
        "cv",
        "coefficient of variation of per-second throughput (standard deviation / mean)",
    ),
    ("zero_s", "measured seconds without one completed operation"),
    (
        "ckpt%",
        "highest checkpoint age, % of the redo log's capacity",
    ),
    (
        "stall_s",
        "foreground flushing stalls, seconds summed over threads",
    ),
    (
        "other%",
        "CPU every other process used, mean over the measured seconds, % of one CPU (steal included)",
    ),
    (
        "steal%",
        "of other%, CPU the hypervisor gave to other virtual machines while this one had work to run",
    ),
    (
        "p1/mean",
        "the 1st-percentile second's throughput over the mean (1.0: no second below average)",
    ),
    (
        "p1/mean (30 s median)",
        "p1/mean of throughput relative to its 30-second rolling median: holes show, slow drift does not",
    ),
    (
        "min (30 s median)",
        "the slowest second relative to its 30-second rolling median",
    ),
    (
        "s < 1/2 (30 s median)",
        "seconds under half their 30-second rolling median (the holes)",
    ),
    (
        "device stall s",
        "seconds in which a durable 4 KiB write beside the data (the device probe, every 10 ms) took 100 ms or more: the storage held every durable commit back, whatever the engine",
    ),
    (
        "p1/mean (30 s median, device ok)",
        "p1/mean (30 s median) over the seconds without a device stall: how level the engine ran where the storage let it",
    ),
];

/// The note for column `name` (see [`COLUMN_NOTES`]).
pub fn column_note(name: &str) -> Option<&'static str> {
    COLUMN_NOTES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}

/// The notes for `names`, one `name: meaning` line each, for the terminal.
pub fn column_notes_text(names: &[&str]) -> String {
    names
        .iter()
        .filter_map(|n| column_note(n).map(|d| format!("  {n}: {d}\n")))
        .collect()
}

/// iibench's summary columns for one run: header and values, in the order the post prints.
pub fn seed002_columns(s: &Summary) -> Vec<(&'static str, String)> {
    let gb = |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1e9));
    vec![
        (
            "ips.av",
            format!("{:.0}", s.ips_av.unwrap_or(s.throughput_mean)),
        ),
        (
            "ips.99",
            format!("{:.0}", s.ips_99.unwrap_or(s.throughput_p1)),
        ),
        ("r/i", format!("{:.2}", s.reads_per_op)),
        ("rKB/i", format!("{:.2}", s.read_kb_per_op)),
        ("wKB/i", format!("{:.2}", s.write_kb_per_op)),
        ("Mcpu/i", format!("{:.0}", s.cpu_us_per_op)),
        ("size", gb(s.size_bytes)),
        ("rss", format!("{:.1}", s.rss_bytes as f64 / 1e9)),
        ("r/s", format!("{:.0}", s.reads_per_s)),
        ("rMB/s", format!("{:.1}", s.read_mb_per_s)),
        ("wMB/s", format!("{:.1}", s.write_mb_per_s)),
        ("cpu", format!("{:.1}", s.cpu_pct)),
        ("engine", s.engine.clone()),
    ]
}

/// The stability figures for the terminal, plain and relative to the 30-second rolling median.
pub fn stability_line(what: &str, s: &Summary) -> String {
    let p1_over_mean = if s.throughput_mean > 0.0 {
        s.throughput_p1 / s.throughput_mean
    } else {
        0.0
    };
    let device = match (s.device_stall_seconds, s.detrended_p1_over_mean_device_ok) {
        (Some(n), Some(ok)) => format!(
            "; the device stalled (a durable 4 KiB write took {DEVICE_STALL_MS:.0} ms or more) in {n} seconds, p1/mean against the rolling median without them {ok:.2}"
        ),
        _ => String::new(),
    };
    let host = match (s.host_slow_seconds, s.detrended_p1_over_mean_host_ok) {
        (Some(n), Some(ok)) => format!(
            "; the host's memory ran slow (a load {:.0}% over its rolling median) in {n} seconds, p1/mean against the rolling median without them {ok:.2}{}",
            (HOST_SLOW_FRAC - 1.0) * 100.0,
            s.host_speed_correlation
                .map(|c| format!(", the throughput's correlation with the host's memory speed {c:.2}"))
                .unwrap_or_default()
        ),
        _ => String::new(),
    };
    format!(
        "stability ({what}): mean {:.1}, p1 {:.1} ({p1_over_mean:.2} of the mean), min {:.1}, cv {:.3}, seconds below half mean {}, zero seconds {}, longest zero run {}; against the 30 s rolling median: p1/mean {:.2}, min {:.2}, seconds below half {}{device}{host}",
        s.throughput_mean,
        s.throughput_p1,
        s.throughput_min,
        s.throughput_cv,
        s.seconds_below_half_mean,
        s.zero_seconds,
        s.longest_zero_run,
        s.detrended_p1_over_mean,
        s.detrended_min_over_mean,
        s.detrended_seconds_below_half
    )
}
