//! `bench insert`: the insert benchmark's steps one after another on one time axis, sampled
//! each second. Every step records its rows, seconds, ips.av and ips.99 (per client, the
//! per-10-second rates sorted descending, the value at the 99% position; summed over clients).
//! The summary's per-op figures come from the main insert step: l.i1 when it ran, else l.i0,
//! else l.i2 (iibench reports the load with indexes maintained). `--at` times count from the
//! start of the first step, the time axis of the report.
//!
//! `--warmup N`: l.i1 and l.i2 start on tables just loaded, or in a sweep on a fresh copy of
//! them with a cold buffer pool and nothing in the page cache, and run at another rate for
//! their first seconds (5-7 s in the stability matrix's insert cells). Their first N seconds
//! are run and sampled, with the step's phase name, but marked `excluded`, so they are in no
//! summary figure; the step's rows, seconds, ips.av and ips.99 count from the end of the
//! warmup, and the step then runs up to `--max-step-seconds` measured seconds.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::console::Console;
use super::engine::{is_persistent, open_driver};
use super::schedule::{check_with_engine, check_within, Scheduler};
use super::{config_map, require_positive, wait_second, CommonOptions, DataDir, RunOutput};
use crate::driver::Driver;
use crate::error::{BenchError, BenchResult};
use crate::insert::client::{query_loop, ClientState, KINDS, KIND_INDEX, KIND_INSERT, KIND_QUERY};
use crate::insert::schema::ClientTables;
use crate::insert::step::{steps_arg, Step};
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
    /// Seconds at the start of each l.i1 and l.i2 step that are run but not measured.
    pub warmup: u64,
    pub steps: Vec<Step>,
}

/// The longest `--warmup`, seconds: longer than any warmup a step needs, so a larger value is
/// taken for a mistake (milliseconds, or a row count) rather than run for hours.
pub const MAX_WARMUP_S: u64 = 3600;

impl InsertOptions {
    pub fn validate(&self) -> BenchResult<()> {
        require_positive("--clients", self.clients as u64)?;
        require_positive("--max-step-seconds", self.max_step_seconds)?;
        require_positive("--query-ips", self.query_ips)?;
        if self.warmup > MAX_WARMUP_S {
            return Err(BenchError::Usage(format!(
                "--warmup must be 0 to {MAX_WARMUP_S} seconds, got {}",
                self.warmup
            )));
        }
        if let Some(end) = self.max_seconds() {
            check_within(
                &self.common.schedule,
                end,
                "the steps (at most --max-step-seconds per step, plus --warmup for l.i1 and \
                 l.i2, --query-seconds per query step)",
            )?;
        }
        self.common.engine.validate()
    }

    /// The unmeasured seconds at the start of `step`: `warmup` for l.i1 and l.i2, else 0.
    pub fn warmup_of(&self, step: Step) -> u64 {
        if step.warms_up() {
            self.warmup
        } else {
            0
        }
    }

    /// The longest `step` can take, seconds, its warmup included; `None` for l.x, which runs
    /// until every row is indexed (an index build cut short would leave secondary indexes
    /// that miss rows, and every later step, and every template made from it, would run on
    /// them).
    pub fn step_max_seconds(&self, step: Step) -> Option<u64> {
        match step {
            Step::QueryRange => Some(self.query_seconds),
            Step::BuildIndexes => None,
            _ => Some(self.warmup_of(step).saturating_add(self.max_step_seconds)),
        }
    }

    /// The longest the steps can take, seconds; `None` when l.x is among them.
    pub fn max_seconds(&self) -> Option<u64> {
        self.steps
            .iter()
            .map(|&s| self.step_max_seconds(s))
            .try_fold(0u64, |sum, s| Some(sum.saturating_add(s?)))
    }
}

/// What one step did: its measured part, and what its warmup left out.
struct StepRun {
    /// Operations (rows, index rows or queries) done after the warmup.
    rows: u64,
    /// Seconds from the end of the warmup to the end of the step; 0 when it ended inside it.
    seconds: f64,
    /// Per client, primary completions in each measured second.
    per_client: Vec<Vec<u64>>,
    warmup_s: f64,
    warmup_rows: u64,
}

/// What `Run::sample_until` saw of a step.
struct Sampled {
    /// Per client, primary completions in each measured second.
    per_client: Vec<Vec<u64>>,
    /// When the warmup's last second was sampled with the step still running: the measured
    /// part starts there. None when the step had no warmup or ended inside it.
    measured_from: Option<Instant>,
    /// Primary completions of the clients in the warmup's seconds.
    warmup_ops: u64,
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
    /// Sample once a second until `done` (or `until`). The first `warmup` seconds are
    /// sampled as `excluded` rows and kept out of the per-client series.
    fn sample_until(
        &mut self,
        done: &AtomicUsize,
        workers: usize,
        until: Option<Instant>,
        stop: &AtomicBool,
        warmup: u64,
    ) -> Sampled {
        let n = self.clients.recorders.len();
        let mut out = Sampled {
            per_client: vec![Vec::new(); n],
            measured_from: None,
            warmup_ops: 0,
        };
        // Seconds are counted from the step's start, so every full row is one second long.
        let start = Instant::now();
        let finished = || {
            done.load(Ordering::Relaxed) >= workers || until.is_some_and(|u| Instant::now() >= u)
        };
        let mut k = 0;
        while wait_second(start, k + 1, &finished) {
            k += 1;
            let in_warmup = k <= warmup;
            // The tick drains the recorders first: what completes after this instant is in
            // the next row.
            let at = Instant::now();
            let ops = self.tick(&mut out.per_client, in_warmup);
            if in_warmup {
                out.warmup_ops += ops;
            }
            if finished() {
                break;
            }
            if k == warmup {
                out.measured_from = Some(at);
            }
        }
        stop.store(true, Ordering::Relaxed);
        out
    }

    /// Sample; an excluded second (a warmup second, or the partial last second of a step) is
    /// kept out of the per-client series. Returns the clients' primary completions.
    fn tick(&mut self, per_client: &mut [Vec<u64>], excluded: bool) -> u64 {
        let mut row = self.sampler.tick(self.d, self.clients, excluded);
        let counts = self.sampler.last_per_client();
        if !excluded {
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
                "{:4}, {}: {} /s, p99 {:.3} ms, max {:.3} ms{}",
                r.t_s,
                r.phase,
                r.ops,
                r.lat_p99_ms,
                r.lat_max_ms,
                if r.excluded { " (not measured)" } else { "" }
            ));
        }
    }
}

fn step_summary(step: Step, r: &StepRun, clients: usize) -> StepSummary {
    let rates: Vec<Vec<f64>> = r
        .per_client
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
        rows: r.rows,
        seconds: r.seconds,
        ips_av: if r.seconds > 0.0 {
            r.rows as f64 / r.seconds
        } else {
            0.0
        },
        ips_99: ips99(&rates),
        warmup_s: r.warmup_s,
        warmup_rows: r.warmup_rows,
    }
}

/// A step's line: its measured figures and what its warmup left out.
fn step_line(s: &StepSummary) -> String {
    let note = s.warmup_note();
    format!(
        "step {}: {} ops in {:.1} s, {:.0} /s, ips.99 {:.0}{}{note}",
        s.step,
        s.rows,
        s.seconds,
        s.ips_av,
        s.ips_99,
        if note.is_empty() { "" } else { "; " }
    )
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
    if o.steps.first() != Some(&Step::LoadI0) {
        if let Some(empty) = states.iter().find(|s| s.is_empty()) {
            let client = empty.client;
            d.close()?;
            return Err(BenchError::Usage(format!(
                "--steps {}: every step after l.i0 runs on the rows l.i0 loads, and client \
                 {client}'s table in {} holds none; start --steps with l.i0 (l.i0,l.x,l.i1 \
                 loads and indexes {} rows per client first), or give --dir a directory an \
                 earlier run loaded with the same --clients",
                steps_arg(&o.steps),
                dd.path.display(),
                o.rows_i0,
            )));
        }
    }
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
    match o.max_seconds() {
        Some(len) => run.con.start_bar(len, "insert"),
        // l.x runs until it is done: elapsed seconds without a length.
        None => run.con.start_spinner("insert"),
    }
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
        let r = run_step(o, &mut run, &mut states, step)?;
        let asked = o.rows_i0.saturating_mul(o.clients as u64);
        if step == Step::LoadI0 && r.rows < asked {
            // Said even with --quiet: the data every later step (and a sweep's template) runs
            // on is smaller than --rows asked.
            eprintln!(
                "warning: l.i0 stopped at --max-step-seconds {} with {} of the {asked} rows \
                 --rows asked loaded; the steps after it run on the smaller table",
                o.max_step_seconds, r.rows
            );
        }
        let s = step_summary(step, &r, o.clients);
        run.con.line(&step_line(&s));
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
) -> BenchResult<StepRun> {
    let d = run.d;
    let stop = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let warmup = o.warmup_of(step);
    // The step's warmup, then up to --max-step-seconds measured (the query step ends on its
    // own clock, `until` below).
    let deadline = o
        .step_max_seconds(step)
        .map(|s| started + Duration::from_secs(s));
    let seed = o.common.seed;
    std::thread::scope(|s| -> BenchResult<StepRun> {
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
                    Step::BuildIndexes => st.build_indexes(d, stop, rec),
                    _ => {
                        let deadline = deadline.expect("every insert step has a deadline");
                        st.insert_step(d, step, rows, deadline, stop, rec, &mut rng)
                    }
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
        let sampled = run.sample_until(done, workers, until, stop, warmup);
        let mut per_client = sampled.per_client;
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
        let ended = Instant::now();
        Ok(match (warmup, sampled.measured_from) {
            (0, _) => StepRun {
                rows: n,
                seconds: (ended - started).as_secs_f64(),
                per_client,
                warmup_s: 0.0,
                warmup_rows: 0,
            },
            (_, Some(from)) => StepRun {
                rows: n.saturating_sub(sampled.warmup_ops),
                seconds: (ended - from).as_secs_f64(),
                per_client,
                warmup_s: (from - started).as_secs_f64(),
                warmup_rows: sampled.warmup_ops.min(n),
            },
            // The rows were done inside the warmup: the step has no measured part.
            (_, None) => StepRun {
                rows: 0,
                seconds: 0.0,
                per_client,
                warmup_s: (ended - started).as_secs_f64(),
                warmup_rows: n,
            },
        })
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
        ("warmup_s", o.warmup.to_string()),
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
    for st in s.steps.iter().filter(|st| st.warmup_s > 0.0) {
        con.result(&format!("{}: {}", st.step, st.warmup_note()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insert::step::parse_steps;
    use crate::run::schedule::parse_schedule;
    use crate::run::EngineSpec;

    fn options(steps: &str, warmup: u64, at: &[&str]) -> InsertOptions {
        let at: Vec<String> = at.iter().map(|s| s.to_string()).collect();
        InsertOptions {
            common: CommonOptions {
                engine: EngineSpec {
                    engine: "model".into(),
                    ..EngineSpec::default()
                },
                schedule: parse_schedule(&at).expect("schedule"),
                ..CommonOptions::default()
            },
            clients: 1,
            rows_i0: 10,
            rows_i1: 10,
            rows_i2: 10,
            query_seconds: 5,
            query_ips: 10,
            max_step_seconds: 20,
            warmup,
            steps: parse_steps(steps).expect("steps"),
        }
    }

    #[test]
    fn the_warmup_lengthens_l_i1_and_l_i2_only() {
        let o = options("l.i0,l.x,l.i1,l.i2,qr", 3, &[]);
        let warmups: Vec<u64> = o.steps.iter().map(|&s| o.warmup_of(s)).collect();
        assert_eq!(warmups, [0, 0, 3, 3, 0]);
        // l.x has no bound: it runs until every row is indexed
        assert_eq!(o.max_seconds(), None);
        assert_eq!(o.step_max_seconds(Step::BuildIndexes), None);
        assert_eq!(
            options("l.i0,l.i1,l.i2,qr", 3, &[]).max_seconds(),
            Some(20 + 23 + 23 + 5)
        );
        assert_eq!(options("l.i0,l.i1,l.i2,qr", 0, &[]).max_seconds(), Some(65));
        assert_eq!(options("l.i0,qr", 3, &[]).max_seconds(), Some(25));
    }

    #[test]
    fn the_warmup_is_validated_and_counts_toward_the_schedule() {
        assert!(options("l.i1", MAX_WARMUP_S, &[]).validate().is_ok());
        let e = options("l.i1", MAX_WARMUP_S + 1, &[])
            .validate()
            .expect_err("too long")
            .to_string();
        assert!(e.contains("--warmup") && e.contains("0 to 3600"), "{e}");
        // --at 25s is past a 20 s l.i1, within one that warms up 10 s first
        let e = options("l.i1", 0, &["25s:set io_capacity=400"])
            .validate()
            .expect_err("past the end")
            .to_string();
        assert!(e.contains("(20 s)"), "{e}");
        assert!(options("l.i1", 10, &["25s:set io_capacity=400"])
            .validate()
            .is_ok());
    }

    #[test]
    fn a_step_line_says_what_the_warmup_left_out() {
        let r = StepRun {
            rows: 300,
            seconds: 3.0,
            per_client: vec![vec![50, 50, 50, 50, 50, 50, 50, 50, 50, 50]],
            warmup_s: 2.0,
            warmup_rows: 120,
        };
        let s = step_summary(Step::InsertI1, &r, 1);
        assert_eq!((s.rows, s.ips_av, s.ips_99), (300, 100.0, 50.0));
        assert!(!s.ended_in_warmup());
        let line = step_line(&s);
        assert!(
            line.ends_with("; after a 2.0 s warmup of 120 rows, not counted"),
            "{line}"
        );
        let ended = StepRun {
            rows: 0,
            seconds: 0.0,
            per_client: vec![Vec::new()],
            warmup_s: 0.4,
            warmup_rows: 500,
        };
        let s = step_summary(Step::InsertI1, &ended, 1);
        assert_eq!((s.rows, s.ips_av, s.ips_99), (0, 0.0, 0.0));
        assert!(s.ended_in_warmup());
        assert!(
            step_line(&s).contains("ended inside its warmup (500 rows in 0.4 s): nothing measured"),
            "{}",
            step_line(&s)
        );
        let plain = StepRun {
            warmup_s: 0.0,
            warmup_rows: 0,
            ..r
        };
        assert!(!step_line(&step_summary(Step::InsertI1, &plain, 1)).contains("warmup"));
    }
}
