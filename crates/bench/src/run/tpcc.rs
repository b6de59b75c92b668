//! `bench tpcc`: load when the directory holds no TPC-C data, run `connections` clients for
//! warmup + duration seconds, print tpcc-mysql's per-interval lines
//! (`  10, trx: N, 95%: …, 99%: …, max_rt: …, count|max …`, real milliseconds), then go-tpc's
//! per-type summary lines and tpmC / tpmTotal, and write the results directory. The last
//! acknowledged order id of every district is saved each second to `tpcc-acked.json` in the
//! data directory, so `tpcc_check_dir` can prove after a crash that no acknowledged New-Order
//! was lost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::console::Console;
use super::engine::{data_subdir, is_persistent, open_driver};
use super::schedule::{check_with_engine, check_within, Scheduler};
use super::{
    config_map, require_positive, sleep_until_second, CommonOptions, DataDir, EngineSpec, RunOutput,
};
use crate::driver::Driver;
use crate::error::{BenchError, BenchResult};
use crate::recorder::Recorder;
use crate::report::summary::{flushing_line, machine_line, stability_line, RunEvent, Summary};
use crate::report::{default_out, now_unix_s, write_results};
use crate::sampler::{Clients, SampleRow, Sampler};
use crate::tpcc::check::{check, check_live, CheckReport, LiveCheck};
use crate::tpcc::client::{run_client, AckedFile, Shared};
use crate::tpcc::input::{InputGen, Mix, TxnKind};
use crate::tpcc::load::load;
use crate::tpcc::scale::{Meta, Scale};
use crate::tpcc::schema::Tables;

/// File in the data directory holding the last acknowledged O_ID per district.
pub const ACKED_FILE: &str = "tpcc-acked.json";

#[derive(Debug, Clone)]
pub struct TpccOptions {
    pub common: CommonOptions,
    pub warehouses: u32,
    pub connections: usize,
    pub duration_s: u64,
    pub warmup_s: u64,
    /// Seconds per printed line (tpcc-mysql's report interval).
    pub interval_s: u64,
    pub mix: Mix,
    /// Smaller item and customer counts than the spec's, for tests and quick looks.
    pub items: Option<u32>,
    pub customers: Option<u32>,
    /// Seconds between consistency checks run in one transaction while the clients run
    /// (`check_live`); 0: none.
    pub live_check_every_s: u64,
}

impl TpccOptions {
    pub fn scale(&self) -> Scale {
        let mut s = Scale::spec(self.warehouses);
        s.items = self.items.unwrap_or(s.items);
        s.customers = self.customers.unwrap_or(s.customers);
        s
    }

    pub fn validate(&self) -> BenchResult<()> {
        self.scale().validate()?;
        require_positive("--connections", self.connections as u64)?;
        require_positive("--duration", self.duration_s)?;
        require_positive("--interval", self.interval_s)?;
        check_within(
            &self.common.schedule,
            self.duration_s,
            "the measured phase (--duration)",
        )?;
        self.common.engine.validate()
    }
}

fn save_acked(dir: &Path, acked: &AckedFile) -> BenchResult<()> {
    let tmp = dir.join(format!("{ACKED_FILE}.tmp"));
    let json = serde_json::to_vec(acked).map_err(|e| BenchError::Data(e.to_string()))?;
    std::fs::write(&tmp, json)
        .map_err(|e| BenchError::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, dir.join(ACKED_FILE)).map_err(|e| BenchError::io("rename acked file", e))
}

fn read_acked(dir: &Path) -> BenchResult<Option<AckedFile>> {
    let p = dir.join(ACKED_FILE);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| BenchError::Data(format!("{}: {e}", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BenchError::io(format!("read {}", p.display()), e)),
    }
}

/// Load if needed; returns the metadata of the data to run on.
fn ensure_loaded(d: &dyn Driver, o: &TpccOptions, con: &mut Console) -> BenchResult<Meta> {
    if let Some(m) = Meta::read(d)? {
        if m.scale.warehouses != o.warehouses {
            con.line(&format!(
                "note: the directory holds {} warehouses; running on those",
                m.scale.warehouses
            ));
        }
        return Ok(m);
    }
    let scale = o.scale();
    con.line(&format!(
        "loading {} warehouses ({} items, {} customers per district)",
        scale.warehouses, scale.items, scale.customers
    ));
    con.start_bar(u64::from(scale.warehouses), "load");
    let meta = {
        let c = &*con;
        load(d, scale, o.connections, o.common.seed, &|n| {
            c.set_position(u64::from(n))
        })?
    };
    con.finish_bar();
    con.line(&format!("loaded in {:.1} s", meta.load_seconds));
    Ok(meta)
}

/// Load the data directory `o.common.dir` if it holds no TPC-C data, then close the engine
/// (a sweep's template). Returns the load's seconds (those of the earlier load when reused).
pub fn prepare_tpcc(o: &TpccOptions) -> BenchResult<f64> {
    o.validate()?;
    let mut con = Console::new(o.common.quiet, o.common.json);
    let dd = DataDir::new(o.common.dir.as_deref())?;
    let driver = open_driver(&o.common.engine, &dd.path)?;
    let meta = ensure_loaded(driver.as_ref(), o, &mut con)?;
    driver.close()?;
    Ok(meta.load_seconds)
}

/// tpcc-mysql's per-interval line.
pub fn interval_line(t_s: u64, r: &Recorder) -> String {
    let k = |kind: TxnKind| &r.kinds[kind.index()];
    let no = k(TxnKind::NewOrder);
    let rest: Vec<String> = [
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ]
    .iter()
    .map(|&t| format!("{}|{:.3}", k(t).ok, k(t).max_ms()))
    .collect();
    format!(
        "{t_s:4}, trx: {}, 95%: {:.3}, 99%: {:.3}, max_rt: {:.3}, {}",
        no.ok,
        no.ms(0.95),
        no.ms(0.99),
        no.max_ms(),
        rest.join(", ")
    )
}

/// Run TPC-C as configured.
pub fn run_tpcc(o: &TpccOptions) -> BenchResult<RunOutput> {
    o.validate()?;
    let mut con = Console::new(o.common.quiet, o.common.json);
    let dd = DataDir::new(o.common.dir.as_deref())?;
    let driver = open_driver(&o.common.engine, &dd.path)?;
    let d: &dyn Driver = driver.as_ref();
    check_with_engine(d, &o.common.schedule)?;
    let mut meta = ensure_loaded(d, o, &mut con)?;
    let load_seconds = meta.load_seconds;
    meta.fresh = false;
    meta.write(d)?;
    let t = Tables::open(d, false)?;
    let shared = Shared::new(
        d,
        t,
        InputGen {
            scale: meta.scale,
            c: meta.nurand,
        },
        o.mix,
    )?;
    let names = TxnKind::ALL.iter().map(|k| k.label()).collect();
    let clients = Clients::new(
        names,
        TxnKind::NewOrder.index(),
        o.connections,
        if o.warmup_s > 0 { "warmup" } else { "run" },
    );
    let persistent = is_persistent(&o.common.engine.engine);
    let data_dir = persistent.then(|| dd.path.clone());
    let failed = AtomicBool::new(false);
    let mut sch = Scheduler::new(o.common.schedule.clone());
    let live = std::sync::Mutex::new(Vec::new());
    let (rows, total) = std::thread::scope(|s| -> BenchResult<(Vec<SampleRow>, Recorder)> {
        sch.start_worker(s, d);
        if o.live_check_every_s > 0 {
            let (shared, live) = (&shared, &live);
            s.spawn(move || live_checks(d, o.live_check_every_s, &shared.stop, live));
        }
        let handles: Vec<_> = (0..o.connections)
            .map(|i| {
                let (shared, clients, failed) = (&shared, &clients, &failed);
                s.spawn(move || {
                    let r = run_client(shared, &clients.recorders[i], o.common.seed, i as u64);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let out = sample_loop(
            o,
            d,
            (&clients, &mut sch),
            data_dir,
            &shared,
            &failed,
            &mut con,
        );
        // the worker thread ends once the changes sent to it are done (also after an error)
        for l in sch.finish(o.warmup_s + o.duration_s) {
            con.line(&l);
        }
        shared.stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        out
    })?;
    if persistent {
        save_acked(&dd.path, &shared.acked.to_file())?;
    }
    d.close()?;
    for p in sch.pending() {
        con.line(&format!(
            "--at {:?}: not reached, the run ended first",
            p.text
        ));
    }
    let events = sch.into_events();
    let live = live.into_inner().unwrap_or_else(|p| p.into_inner());
    finish(
        o,
        d,
        (rows, events, live),
        &total,
        (meta.scale, load_seconds),
        &con,
    )
}

fn sample_loop(
    o: &TpccOptions,
    d: &dyn Driver,
    (clients, sch): (&Clients, &mut Scheduler),
    data_dir: Option<std::path::PathBuf>,
    shared: &Shared<'_>,
    failed: &AtomicBool,
    con: &mut Console,
) -> BenchResult<(Vec<SampleRow>, Recorder)> {
    let mut sampler = Sampler::new(d, clients, data_dir.clone());
    let start = sampler.started();
    let mut total = Recorder::new(TxnKind::ALL.len());
    let mut period = Recorder::new(TxnKind::ALL.len());
    let mut rows = Vec::new();
    let all = o.warmup_s + o.duration_s;
    con.start_bar(all, "tpcc");
    if o.warmup_s == 0 {
        for l in sch.apply_due(d, 0, None) {
            con.line(&l);
        }
    }
    for sec in 1..=all {
        sleep_until_second(start, sec);
        if failed.load(Ordering::Relaxed) {
            break;
        }
        let warmup = sec <= o.warmup_s;
        let mut row = sampler.tick(d, clients, warmup);
        if sec >= o.warmup_s {
            for l in sch.apply_due(d, sec - o.warmup_s, Some(&mut row)) {
                con.line(&l);
            }
        }
        if !warmup {
            total.merge(sampler.last_interval());
        }
        period.merge(sampler.last_interval());
        if sec == o.warmup_s {
            clients.set_phase("run");
        }
        if sec % o.interval_s == 0 {
            con.line(&interval_line(sec, &period));
            period.reset();
        }
        if let Some(dir) = &data_dir {
            save_acked(dir, &shared.acked.to_file())?;
        }
        rows.push(row);
        con.set_position(sec);
    }
    con.finish_bar();
    Ok((rows, total))
}

/// Every `every_s` seconds until `stop`, checks the database's consistency in one transaction
/// while the clients run; each result goes to `out`.
fn live_checks(
    d: &dyn Driver,
    every_s: u64,
    stop: &AtomicBool,
    out: &std::sync::Mutex<Vec<LiveCheck>>,
) {
    let started = std::time::Instant::now();
    let mut next = every_s as f64;
    while !stop.load(Ordering::Relaxed) {
        if started.elapsed().as_secs_f64() < next {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        let at_s = started.elapsed().as_secs_f64();
        let r = check_live(d);
        let seconds = started.elapsed().as_secs_f64() - at_s;
        let check = match r {
            Ok((report, rows)) => LiveCheck {
                at_s,
                seconds,
                rows,
                rows_per_s: rows as f64 / seconds.max(1e-9),
                failures: report.failures.iter().map(ToString::to_string).collect(),
            },
            Err(e) => LiveCheck {
                at_s,
                seconds,
                rows: 0,
                rows_per_s: 0.0,
                failures: vec![format!("the check did not complete: {e}")],
            },
        };
        if let Ok(mut v) = out.lock() {
            v.push(check);
        }
        next = started.elapsed().as_secs_f64() + every_s as f64;
    }
}

fn finish(
    o: &TpccOptions,
    d: &dyn Driver,
    (rows, events, live): (Vec<SampleRow>, Vec<RunEvent>, Vec<LiveCheck>),
    total: &Recorder,
    (scale, load_seconds): (Scale, f64),
    con: &Console,
) -> BenchResult<RunOutput> {
    let params = [
        ("workload", "tpcc".to_string()),
        ("warehouses", scale.warehouses.to_string()),
        ("connections", o.connections.to_string()),
        ("duration_s", o.duration_s.to_string()),
        ("warmup_s", o.warmup_s.to_string()),
        ("mix", format!("{:?}", o.mix)),
        ("items", scale.items.to_string()),
        ("customers_per_district", scale.customers.to_string()),
    ];
    let config = config_map(&params, d.config(), &o.common.engine);
    let mut s = Summary::from_rows("tpcc", d.name(), config, "New-Order", &rows);
    s.started_unix_s = now_unix_s().saturating_sub(rows.len() as u64);
    let minutes = (s.duration_s / 60.0).max(1.0 / 60.0);
    let no = &total.kinds[TxnKind::NewOrder.index()];
    let all: u64 = total.kinds.iter().map(|k| k.ok).sum();
    s.tpmc = Some(no.ok as f64 / minutes);
    s.tpm_total = Some(all as f64 / minutes);
    s.transactions = TxnKind::ALL
        .iter()
        .map(|k| total.kinds[k.index()].summary(k.label()))
        .collect();
    s.load_seconds = Some(load_seconds);
    s.events = events;
    for c in &live {
        let verdict = match c.failures.first() {
            None => "every condition held".to_string(),
            Some(f) => format!("{} failure(s), the first: {f}", c.failures.len()),
        };
        con.result(&format!(
            "[Live check] at {:.0} s: {} rows in one transaction in {:.1} s ({:.0} rows/s); {verdict}",
            c.at_s, c.rows, c.seconds, c.rows_per_s
        ));
    }
    s.live_checks = live;
    let out_dir = o.common.out.clone().unwrap_or_else(|| default_out("tpcc"));
    write_results(&out_dir, &s, &rows)?;
    for k in &s.transactions {
        con.result(&format!(
            "[Summary] {} - Takes(s): {:.1}, Count: {}, TPM: {:.1}, Retries: {}, Rollbacks: {}, Failed: {}, Avg(ms): {:.1}, 50th(ms): {:.1}, 90th(ms): {:.1}, 95th(ms): {:.1}, 99th(ms): {:.1}, 99.9th(ms): {:.1}, Max(ms): {:.1}",
            k.name, s.duration_s, k.count, k.count as f64 / minutes, k.retries, k.rolled_back, k.failed, k.mean_ms, k.p50_ms, k.p90_ms, k.p95_ms, k.p99_ms, k.p999_ms, k.max_ms
        ));
    }
    con.result(&stability_line("New-Order/s", &s));
    con.result(&flushing_line(&s));
    if let Some(io) = &s.io {
        con.result(&io.lines());
    }
    con.result(&machine_line(&s));
    con.result(&format!(
        "<TpmC>\n{:>24.3} TpmC\ntpmC: {:.1}, tpmTotal: {:.1}",
        s.tpmc.unwrap_or(0.0),
        s.tpmc.unwrap_or(0.0),
        s.tpm_total.unwrap_or(0.0)
    ));
    con.result(&format!("results in {}", out_dir.display()));
    con.json(&serde_json::to_string_pretty(&s).unwrap_or_default());
    Ok(RunOutput {
        summary: s,
        rows,
        out_dir,
    })
}

/// `evenkeel check DIR --tpcc`: run the consistency conditions on the data in `dir`, including
/// the acknowledged-order proof when `tpcc-acked.json` is there.
pub fn tpcc_check_dir(dir: &Path, engine: &EngineSpec) -> BenchResult<CheckReport> {
    if !dir.is_dir() {
        return Err(BenchError::Usage(format!(
            "{}: no such directory",
            dir.display()
        )));
    }
    // Opening creates a database in an empty directory; a check must not.
    let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
    if empty && is_persistent(&engine.engine) {
        return Err(BenchError::Usage(format!(
            "{}: empty directory, no database to check",
            dir.display()
        )));
    }
    if let Some(sub) = data_subdir(&engine.engine) {
        if !dir.join(sub).is_dir() {
            return Err(BenchError::Usage(format!(
                "{}: holds no {} data (no {sub}/ directory); was it loaded with --engine {}?",
                dir.display(),
                engine.engine,
                engine.engine
            )));
        }
    }
    let driver = open_driver(engine, dir)?;
    let acked = read_acked(dir)?;
    let report = check(driver.as_ref(), acked.as_ref())?;
    driver.close()?;
    Ok(report)
}
