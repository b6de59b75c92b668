//! `bench insert`: the insert benchmark's steps one after another on one time axis, sampled
//! each second. Every step records its rows, seconds, ips.av and ips.99 (per client, the
//! per-10-second rates sorted descending, the value at the 99% position; summed over clients).
//! The summary's per-op figures come from the main insert step: l.i1 when it ran, else l.i0,
//! else l.i2 (iibench reports the load with indexes maintained). `--at` times count from the
//! start of the first step, the time axis of the report.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::console::Console;
use super::engine::{is_persistent, open_driver};
use super::schedule::{check_with_engine, check_within, Scheduler};
use super::{config_map, require_positive, wait_second, CommonOptions, DataDir, RunOutput};
use crate::driver::Driver;
use crate::error::BenchResult;
use crate::insert::client::{query_loop, ClientState, KINDS, KIND_INDEX, KIND_INSERT, KIND_QUERY};
use crate::insert::schema::ClientTables;
use crate::insert::step::Step;
use crate::report::summary::{
    column_notes_text, flushing_line, machine_line, stability_line, StepSummary, Summary,
};
use crate::report::{default_out, now_unix_s, write_results};
use crate::sampler::{Clients, SampleRow, Sampler};
use crate::stability::{ips99, windows};
use crate::tpcc::random::rng_for;

#[derive(Debug, Clone)]
pub struct InsertOptions {
    pub common: CommonOptions,
    pub clients: usize,
    pub rows_i0: u64,
    pub rows_i1: u64,
    pub rows_i2: u64,
    pub query_seconds: u64,
    pub query_ips: u64,
    pub max_step_seconds: u64,
    pub steps: Vec<Step>,
}

impl InsertOptions {
    pub fn validate(&self) -> BenchResult<()> {
        require_positive("--clients", self.clients as u64)?;
        require_positive("--max-step-seconds", self.max_step_seconds)?;
        require_positive("--query-ips", self.query_ips)?;
        check_within(
            &self.common.schedule,
            self.max_seconds(),
            "the steps (at most --max-step-seconds per step, --query-seconds per query step)",
        )?;
        self.common.engine.validate()
    }

    /// The longest the steps can take, seconds.
    pub fn max_seconds(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| {
                if *s == Step::QueryRange {
                    self.query_seconds
                } else {
                    self.max_step_seconds
                }
            })
            .sum()
    }
}

/// Sampling state carried across steps.
struct Run<'a> {
    d: &'a dyn Driver,
    clients: &'a Clients,
    sampler: Sampler,
    rows: Vec<SampleRow>,
    con: Console,
    next_line_s: u64,
    sch: Scheduler,
}

/// Seconds between live lines.
const LINE_EVERY_S: u64 = 10;

impl Run<'_> {
    /// Sample once a second until `done` (or `until`); returns per-client primary counts per second.
    fn sample_until(
        &mut self,
        done: &AtomicUsize,
        workers: usize,
        until: Option<Instant>,
        stop: &AtomicBool,
    ) -> Vec<Vec<u64>> {
        let n = self.clients.recorders.len();
        let mut per_client: Vec<Vec<u64>> = vec![Vec::new(); n];
        // Seconds are counted from the step's start, so every full row is one second long.
        let start = Instant::now();
        let finished = || {
            done.load(Ordering::Relaxed) >= workers || until.is_some_and(|u| Instant::now() >= u)
        };
        let mut k = 0;
        while wait_second(start, k + 1, &finished) {
            k += 1;
            self.tick(&mut per_client, false);
            if finished() {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        per_client
    }

    /// Sample; a partial second is `excluded` and kept out of the per-client series.
    fn tick(&mut self, per_client: &mut [Vec<u64>], partial: bool) -> u64 {
        let mut row = self.sampler.tick(self.d, self.clients, partial);
        let counts = self.sampler.last_per_client();
        if !partial {
            for (series, &c) in per_client.iter_mut().zip(counts) {
                series.push(c);
            }
        }
        let clients_ops: u64 = counts.iter().take(self.clients.recorders.len() / 2).sum();
        self.live_line(&row);
        // Steps tick on their own seconds, so go by whole seconds elapsed: never early, at
        // most one tick late.
        let elapsed = self.sampler.started().elapsed().as_secs();
        for l in self.sch.apply_due(self.d, elapsed, Some(&mut row)) {
            self.con.line(&l);
        }
        self.con
            .set_position(self.sampler.started().elapsed().as_secs());
        self.rows.push(row);
        clients_ops
    }

    /// A live line every `LINE_EVERY_S` seconds.
    fn live_line(&mut self, r: &SampleRow) {
        if r.t_s >= self.next_line_s {
            self.next_line_s = r.t_s + LINE_EVERY_S;
            self.con.line(&format!(
                "{:4}, {}: {} /s, p99 {:.3} ms, max {:.3} ms",
                r.t_s, r.phase, r.ops, r.lat_p99_ms, r.lat_max_ms
            ));
        }
    }
}

fn step_summary(
    step: Step,
    rows: u64,
    secs: f64,
    per_client: &[Vec<u64>],
    clients: usize,
) -> StepSummary {
    let rates: Vec<Vec<f64>> = per_client
        .iter()
        .take(clients)
        .map(|s| {
            let s: Vec<f64> = s.iter().map(|&c| c as f64).collect();
            let w: Vec<f64> = windows(&s, 10).into_iter().map(|x| x / 10.0).collect();
            if w.is_empty() {
                s
            } else {
                w
            }
        })
        .collect();
    StepSummary {
        step: step.name().to_string(),
        rows,
        seconds: secs,
        ips_av: rows as f64 / secs.max(1e-9),
        ips_99: ips99(&rates),
    }
}

pub fn run_insert(o: &InsertOptions) -> BenchResult<RunOutput> {
    o.validate()?;
    let dd = DataDir::new(o.common.dir.as_deref())?;
    let driver = open_driver(&o.common.engine, &dd.path)?;
    let d: &dyn Driver = driver.as_ref();
    check_with_engine(d, &o.common.schedule)?;
    if o.steps.contains(&Step::LoadI0) {
        for c in 0..o.clients {
            ClientTables::drop_all(d, c)?;
        }
    }
    let mut states: Vec<ClientState> = (0..o.clients)
        .map(|c| ClientState::open(d, c))
        .collect::<Result<_, _>>()?;
    // Recorders: one per client, then one per background writer of the query step.
    let clients = Clients::new(KINDS.to_vec(), KIND_INSERT, o.clients * 2, "l.i0");
    let data_dir = is_persistent(&o.common.engine.engine).then(|| dd.path.clone());
    let sampler = Sampler::new(d, &clients, data_dir);
    let mut run = Run {
        d,
        clients: &clients,
        sampler,
        rows: Vec::new(),
        next_line_s: LINE_EVERY_S,
        con: Console::new(o.common.quiet, o.common.json),
        sch: Scheduler::new(o.common.schedule.clone()),
    };
    run.con.start_bar(o.max_seconds(), "insert");
    for l in run.sch.apply_due(d, 0, None) {
        run.con.line(&l);
    }
    let mut steps = Vec::new();
    for &step in &o.steps {
        run.clients.set_phase(step.name());
        let kind = match step {
            Step::BuildIndexes => KIND_INDEX,
            Step::QueryRange => KIND_QUERY,
            _ => KIND_INSERT,
        };
        run.clients.set_primary(kind);
        let started = Instant::now();
        let (n, per_client) = run_step(o, &mut run, &mut states, step)?;
        let secs = started.elapsed().as_secs_f64();
        let s = step_summary(step, n, secs, &per_client, o.clients);
        run.con.line(&format!(
            "step {}: {} ops in {:.1} s, {:.0} /s, ips.99 {:.0}",
            s.step, s.rows, s.seconds, s.ips_av, s.ips_99
        ));
        steps.push(s);
    }
    run.con.finish_bar();
    d.close()?;
    for p in run.sch.pending() {
        run.con.line(&format!(
            "--at {:?}: not reached, the run ended first",
            p.text
        ));
    }
    finish(o, d, run, steps)
}

fn run_step(
    o: &InsertOptions,
    run: &mut Run<'_>,
    states: &mut [ClientState],
    step: Step,
) -> BenchResult<(u64, Vec<Vec<u64>>)> {
    let d = run.d;
    let stop = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let deadline = Instant::now() + Duration::from_secs(o.max_step_seconds);
    let seed = o.common.seed;
    std::thread::scope(|s| -> BenchResult<(u64, Vec<Vec<u64>>)> {
        let clients: &Clients = run.clients;
        let (stop, done) = (&stop, &done);
        let mut handles = Vec::new();
        let mut writers = Vec::new();
        for (i, st) in states.iter_mut().enumerate() {
            let rows = match step {
                Step::LoadI0 => o.rows_i0,
                Step::InsertI1 => o.rows_i1,
                _ => o.rows_i2,
            };
            let rec = &clients.recorders[i];
            if step == Step::QueryRange {
                let t = st.t;
                handles.push(s.spawn(move || {
                    let mut rng = rng_for(seed, 5000 + i as u64);
                    let r = query_loop(d, t, stop, rec, &mut rng).map(|()| 0);
                    done.fetch_add(1, Ordering::Relaxed);
                    r
                }));
                let wrec = &clients.recorders[o.clients + i];
                let ips = o.query_ips;
                writers.push(s.spawn(move || {
                    let mut rng = rng_for(seed, 6000 + i as u64);
                    st.background_writer(d, ips, stop, wrec, &mut rng)
                }));
                continue;
            }
            handles.push(s.spawn(move || {
                let mut rng = rng_for(seed, 4000 + i as u64 + 100 * step as u64);
                let r = match step {
                    Step::BuildIndexes => st.build_indexes(d, deadline, stop, rec),
                    _ => st.insert_step(d, step, rows, deadline, stop, rec, &mut rng),
                };
                done.fetch_add(1, Ordering::Relaxed);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            }));
        }
        let until = (step == Step::QueryRange)
            .then(|| Instant::now() + Duration::from_secs(o.query_seconds));
        let workers = handles.len();
        let mut per_client = run.sample_until(done, workers, until, stop);
        let mut n = 0;
        for h in handles {
            n += h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        for w in writers {
            w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        if step == Step::QueryRange {
            n = per_client.iter().take(o.clients).flatten().sum();
        }
        // The partial last second, so every op of the step is in some row.
        let last = run.tick(&mut per_client, true);
        if step == Step::QueryRange {
            n += last;
        }
        Ok((n, per_client))
    })
}

fn finish(
    o: &InsertOptions,
    d: &dyn Driver,
    mut run: Run<'_>,
    steps: Vec<StepSummary>,
) -> BenchResult<RunOutput> {
    let params = [
        ("workload", "insert".to_string()),
        ("clients", o.clients.to_string()),
        ("rows_i0", o.rows_i0.to_string()),
        ("rows_i1", o.rows_i1.to_string()),
        ("rows_i2", o.rows_i2.to_string()),
        ("query_seconds", o.query_seconds.to_string()),
        ("query_ips", o.query_ips.to_string()),
        ("max_step_seconds", o.max_step_seconds.to_string()),
        (
            "steps",
            o.steps
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    let config = config_map(&params, d.config(), &o.common.engine);
    let main = ["l.i1", "l.i0", "l.i2"]
        .into_iter()
        .find(|m| steps.iter().any(|s| s.step == *m));
    let main_rows: Vec<SampleRow> = run
        .rows
        .iter()
        .filter(|r| Some(r.phase.as_str()) == main)
        .cloned()
        .collect();
    let op = if main.is_some() {
        "rows inserted"
    } else {
        "queries"
    };
    let basis = if main_rows.is_empty() {
        &run.rows
    } else {
        &main_rows
    };
    let mut s = Summary::from_rows("insert", d.name(), config, op, basis);
    s.size_bytes = run.rows.iter().rev().find_map(|r| r.size_bytes);
    s.rss_bytes = run.rows.last().map_or(0, |r| r.rss_bytes);
    s.started_unix_s = now_unix_s().saturating_sub(run.rows.len() as u64);
    if let Some(m) = main.and_then(|m| steps.iter().find(|s| s.step == m)) {
        s.ips_av = Some(m.ips_av);
        s.ips_99 = Some(m.ips_99);
    }
    s.steps = steps;
    s.events = std::mem::take(&mut run.sch).into_events();
    let out_dir = o
        .common
        .out
        .clone()
        .unwrap_or_else(|| default_out("insert"));
    write_results(&out_dir, &s, &run.rows)?;
    let con = &run.con;
    con.result("step  rows  seconds  ips.av  ips.99");
    for st in &s.steps {
        con.result(&format!(
            "{} {} {:.1} {:.0} {:.0}",
            st.step, st.rows, st.seconds, st.ips_av, st.ips_99
        ));
    }
    let cols = crate::report::summary::seed002_columns(&s);
    con.result(&cols.iter().map(|c| c.0).collect::<Vec<_>>().join(" "));
    con.result(
        &cols
            .iter()
            .map(|c| c.1.clone())
            .collect::<Vec<_>>()
            .join(" "),
    );
    let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
    con.result(&format!(
        "where (one operation = one of {op}):\n{}",
        column_notes_text(&names).trim_end()
    ));
    con.result(&stability_line(&format!("{op}/s"), &s));
    con.result(&flushing_line(&s));
    if let Some(io) = &s.io {
        con.result(&io.lines());
    }
    con.result(&machine_line(&s));
    con.result(&format!("results in {}", out_dir.display()));
    con.json(&serde_json::to_string_pretty(&s).unwrap_or_default());
    Ok(RunOutput {
        summary: s,
        rows: run.rows,
        out_dir,
    })
}
