//! The per-second sampler. Client threads record into their own `Recorder`s (`Clients`); once a
//! second the run loop calls `Sampler::tick`, which drains them, reads the engine's status and
//! the process and device counters, and returns one `SampleRow`: throughput and latency
//! percentiles of the interval, engine gauges and counter differences, CPU %, RSS, bytes
//! read and written (a peer's server process included), and the machine's load average and the
//! CPU that other processes used (the machine's busy CPU less this process's and the server's),
//! so a busy neighbour can be told from the engine.
//! Rows are what timeseries.csv, the report and the stability figures use.

pub mod host;
pub mod probe;
pub mod proc;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::driver::{Driver, EngineStats};
use crate::metrics::EngineInterval;
use crate::recorder::Recorder;
use host::HostProbe;
use probe::DeviceProbe;
use proc::{dir_size, DiskCounters, MachineCounters, ProcCounters, ProcReader};

/// The recorders of all client threads of a run, plus what the sampler needs to label them.
pub struct Clients {
    pub kind_names: Vec<&'static str>,
    /// The kind whose completions are "throughput" (New-Order for TPC-C, inserted rows for
    /// iibench's insert steps, queries for its query step).
    pub primary: AtomicUsize,
    pub recorders: Vec<Mutex<Recorder>>,
    /// The current phase or step name ("warmup", "run", "l.i0", ...).
    pub phase: Mutex<String>,
}

impl Clients {
    pub fn new(kind_names: Vec<&'static str>, primary: usize, clients: usize, phase: &str) -> Self {
        let n = kind_names.len();
        Clients {
            kind_names,
            primary: AtomicUsize::new(primary),
            recorders: (0..clients).map(|_| Mutex::new(Recorder::new(n))).collect(),
            phase: Mutex::new(phase.to_string()),
        }
    }

    pub fn set_phase(&self, phase: &str) {
        *self.phase.lock() = phase.to_string();
    }

    pub fn set_primary(&self, kind: usize) {
        self.primary.store(kind, Ordering::Relaxed);
    }

    pub fn primary(&self) -> usize {
        self.primary.load(Ordering::Relaxed)
    }

    /// Merge every client's recorder into `into` and reset them; `per_client[i]` gets client
    /// i's completions of the primary kind.
    pub fn drain(&self, into: &mut Recorder, per_client: &mut Vec<u64>) {
        let primary = self.primary();
        per_client.clear();
        for r in &self.recorders {
            let mut r = r.lock();
            per_client.push(r.kinds.get(primary).map_or(0, |k| k.ok));
            into.merge(&r);
            r.reset();
        }
    }
}

/// One kind's figures in one interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KindInterval {
    pub name: String,
    pub count: u64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One second of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SampleRow {
    /// Seconds since the run started, at the end of this interval.
    pub t_s: u64,
    /// The interval's real length, ms: a tick the scheduler woke late makes its second longer
    /// and the next one shorter by as much.
    #[serde(default)]
    pub interval_ms: f64,
    pub phase: String,
    /// Left out of the figures: a warmup second, or the partial last second of a step.
    pub excluded: bool,
    /// Completions of the primary kind in this interval.
    pub ops: u64,
    /// Completions of all kinds.
    pub ops_all: u64,
    pub retries: u64,
    pub failed: u64,
    pub lat_p50_ms: f64,
    pub lat_p95_ms: f64,
    pub lat_p99_ms: f64,
    pub lat_max_ms: f64,
    pub kinds: Vec<KindInterval>,
    /// The engine's figures in the interval (crate::metrics declares them).
    #[serde(flatten)]
    pub engine: EngineInterval,
    pub cpu_pct: f64,
    pub rss_bytes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    pub dev_reads: Option<u64>,
    pub dev_writes: Option<u64>,
    pub dev_read_bytes: Option<u64>,
    pub dev_write_bytes: Option<u64>,
    /// Milliseconds the device's requests spent queued or in service in the interval, summed
    /// over requests (/proc/diskstats' weighted time, all processes): a device that stalls
    /// shows here as a jump, whatever the engine, so a slow second can be told to be the
    /// device's or the engine's.
    pub dev_wait_ms: Option<u64>,
    /// The slowest 4 KiB write made durable (write + fdatasync) beside the data in the
    /// interval, ms; the probe writes every 10 ms (`sampler::probe`). 100 ms or more is a
    /// device stall: durable commits on any engine waited that long.
    pub device_probe_ms: Option<f64>,
    /// The host's memory in the interval: the median time of one dependent load over an array
    /// larger than the cache, ns (`sampler::host`). A CPU-bound engine runs at the speed of
    /// the memory it misses to, and on a virtual machine that speed moves with the host's
    /// other tenants; a second at [`host::HOST_SLOW_FRAC`] of the run's rolling median or
    /// slower is one the host slowed, on any engine.
    #[serde(default)]
    pub host_mem_ns: Option<f64>,
    pub size_bytes: Option<u64>,
    /// The machine's 1-minute load average at the end of the interval.
    pub load_avg_1m: Option<f64>,
    /// CPU used by every other process in the interval, % of one CPU (the machine's busy CPU
    /// time less this process's); includes `steal_pct`.
    pub other_cpu_pct: Option<f64>,
    /// CPU the hypervisor gave to something outside this machine while its CPUs had work to
    /// run (steal), % of one CPU: a virtual machine's noisy neighbour, which no process here
    /// shows.
    pub steal_pct: Option<f64>,
    /// What the run changed right after this interval (`--at` schedules), `; `-separated.
    pub event: Option<String>,
}

/// A probe thread's pacing: sleeps until `next` plus `every` and moves `next` there; a probe
/// already past it (behind after a stall) starts its next round now, not a burst of them.
fn sleep_to_next(next: &mut Instant, every: std::time::Duration) {
    *next += every;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        *next = now;
    }
}

/// Turns counters into per-interval rows.
pub struct Sampler {
    started: Instant,
    last_at: Instant,
    interval: Recorder,
    per_client: Vec<u64>,
    engine: EngineStats,
    proc_before: ProcCounters,
    disk_before: Option<DiskCounters>,
    machine_before: Option<MachineCounters>,
    reader: ProcReader,
    data_dir: Option<PathBuf>,
    probe: Option<DeviceProbe>,
    host: Option<HostProbe>,
}

impl Sampler {
    pub fn new(driver: &dyn Driver, clients: &Clients, data_dir: Option<PathBuf>) -> Self {
        let reader = ProcReader::new(data_dir.as_deref()).with_server(driver.server_pid());
        // beside the data directory, not in it: an engine owns its directory
        let probe = data_dir
            .as_deref()
            .and_then(|d| d.parent())
            .and_then(DeviceProbe::start);
        let host = HostProbe::start();
        let now = Instant::now();
        Sampler {
            started: now,
            last_at: now,
            interval: Recorder::new(clients.kind_names.len()),
            per_client: Vec::new(),
            engine: driver.stats(),
            proc_before: reader.process(),
            disk_before: reader.disk(),
            machine_before: reader.machine(),
            reader,
            data_dir,
            probe,
            host,
        }
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// The recorder of the interval just sampled (all kinds), for aggregation by the caller.
    pub fn last_interval(&self) -> &Recorder {
        &self.interval
    }

    /// Each client's primary completions in the interval just sampled.
    pub fn last_per_client(&self) -> &[u64] {
        &self.per_client
    }

    /// Sample now: everything since the previous tick.
    pub fn tick(&mut self, driver: &dyn Driver, clients: &Clients, excluded: bool) -> SampleRow {
        self.interval.reset();
        clients.drain(&mut self.interval, &mut self.per_client);
        let now = Instant::now();
        let secs = now.duration_since(self.last_at).as_secs_f64().max(1e-6);
        self.last_at = now;
        let e = driver.stats();
        let p = self.reader.process();
        let disk = self.reader.disk();
        let machine = self.reader.machine();
        let own_cpu_s = (p.cpu_s - self.proc_before.cpu_s).max(0.0);
        let pct = |cpu_s: f64| Some(100.0 * cpu_s.max(0.0) / secs);
        let (other_cpu_pct, steal_pct) = match (machine, self.machine_before) {
            (Some(m), Some(b)) => (
                pct(m.busy_cpu_s - b.busy_cpu_s - own_cpu_s),
                pct(m.steal_cpu_s - b.steal_cpu_s),
            ),
            _ => (None, None),
        };
        let prim = &self.interval.kinds[clients.primary().min(self.interval.kinds.len() - 1)];
        let kinds = clients
            .kind_names
            .iter()
            .zip(&self.interval.kinds)
            .map(|(n, k)| KindInterval {
                name: n.to_string(),
                count: k.ok,
                p95_ms: k.ms(0.95),
                p99_ms: k.ms(0.99),
                max_ms: k.max_ms(),
            })
            .collect();
        let row = SampleRow {
            t_s: now.duration_since(self.started).as_secs_f64().round() as u64,
            interval_ms: secs * 1e3,
            phase: clients.phase.lock().clone(),
            excluded,
            ops: prim.ok,
            ops_all: self.interval.kinds.iter().map(|k| k.ok).sum(),
            retries: self.interval.kinds.iter().map(|k| k.retries).sum(),
            failed: self.interval.kinds.iter().map(|k| k.failed).sum(),
            lat_p50_ms: prim.ms(0.50),
            lat_p95_ms: prim.ms(0.95),
            lat_p99_ms: prim.ms(0.99),
            lat_max_ms: prim.max_ms(),
            kinds,
            engine: EngineInterval::between(&e, &self.engine),
            cpu_pct: 100.0 * own_cpu_s / secs,
            // the host probe's array lives in this process, not in the engine's
            rss_bytes: if self.host.is_some() {
                p.rss_bytes.saturating_sub(host::ARRAY_BYTES as u64)
            } else {
                p.rss_bytes
            },
            io_read_bytes: p.read_bytes.saturating_sub(self.proc_before.read_bytes),
            io_write_bytes: p.write_bytes.saturating_sub(self.proc_before.write_bytes),
            dev_reads: disk.map(|d| {
                d.reads
                    .saturating_sub(self.disk_before.map_or(0, |b| b.reads))
            }),
            dev_writes: disk.map(|d| {
                d.writes
                    .saturating_sub(self.disk_before.map_or(0, |b| b.writes))
            }),
            dev_read_bytes: disk.map(|d| {
                d.read_bytes
                    .saturating_sub(self.disk_before.map_or(0, |b| b.read_bytes))
            }),
            dev_write_bytes: disk.map(|d| {
                d.write_bytes
                    .saturating_sub(self.disk_before.map_or(0, |b| b.write_bytes))
            }),
            dev_wait_ms: disk.map(|d| {
                d.weighted_ms
                    .saturating_sub(self.disk_before.map_or(0, |b| b.weighted_ms))
            }),
            device_probe_ms: self.probe.as_ref().and_then(DeviceProbe::take_max_ms),
            host_mem_ns: self.host.as_ref().and_then(HostProbe::take_ns),
            size_bytes: self.data_dir.as_deref().map(dir_size),
            load_avg_1m: machine.map(|m| m.load_avg_1m),
            other_cpu_pct,
            steal_pct,
            event: None,
        };
        self.engine = e;
        self.proc_before = p;
        self.disk_before = disk;
        self.machine_before = machine;
        row
    }
}
