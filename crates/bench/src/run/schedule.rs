//! `--at TIME:set NAME=VALUE` schedules: change an engine option while a workload runs, the way
//! what a flushing study needs (switch the flush policy at 60 s and watch the line). TIME counts from the
//! start of the measured phase (after TPC-C's warmup; from the first step of the insert
//! benchmark) and takes `90`, `90s`, `2m`, `1m30s` or `1h`. Several `--at` may share a time;
//! they apply in command-line order.
//!
//! The run loop calls `Scheduler::apply_due` after sampling each second, so the row of second
//! N still shows the old setting and the change shows from row N+1; the change is logged as a
//! line, recorded on row N (`event`, drawn as a marker) and kept in summary.json (`events`).
//! TPC-C hands the changes to a worker thread (`Scheduler::start_worker`), so one that takes
//! seconds (a redo log resize: `set log_capacity=...`) does not stop the sampling of those
//! seconds; its line says when it took effect, and a refusal shows in that line and in the
//! event's `error`.
//! TPC-C ticks on whole seconds, so this is exact; insert steps tick on their own seconds, so
//! there a change applies at the first tick at or after its time (never early).
//! Schedules are parsed before anything is opened and checked against the engine
//! (`Driver::check_option`) before anything is loaded, so a typo costs no load time.

use crate::driver::Driver;
use crate::error::{BenchError, BenchResult};
use crate::report::summary::RunEvent;
use crate::sampler::SampleRow;

/// What `--at` expects, for error messages.
const FORM: &str = "TIME:set NAME=VALUE (e.g. 60s:set adaptive_flushing=steady)";

/// One scheduled option change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledSet {
    /// Seconds from the start of the measured phase.
    pub at_s: u64,
    pub name: String,
    pub value: String,
    /// The argument as given, for messages.
    pub text: String,
}

impl ScheduledSet {
    pub fn action(&self) -> String {
        format!("set {}={}", self.name, self.value)
    }
}

/// Parse a duration: whole seconds, or numbers with units h, m, s in that order
/// (`90`, `90s`, `2m`, `1m30s`, `1h`).
pub fn parse_time(t: &str) -> Result<u64, String> {
    let t = t.trim();
    let expected = "expected seconds like 90, 90s, 2m, 1m30s or 1h";
    if t.is_empty() {
        return Err(format!("the time is empty: {expected}"));
    }
    if let Ok(s) = t.parse::<u64>() {
        return Ok(s);
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    let mut last_unit = 0u64;
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("{t:?} is not a time: {expected}")),
        };
        if num.is_empty() || (last_unit != 0 && unit >= last_unit) {
            return Err(format!("{t:?} is not a time: {expected}"));
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("{t:?} is too large: {expected}"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| v.checked_add(total))
            .ok_or_else(|| format!("{t:?} is too large: {expected}"))?;
        num.clear();
        last_unit = unit;
    }
    if !num.is_empty() {
        return Err(format!(
            "{t:?} is not a time (a number after a unit needs its own unit): {expected}"
        ));
    }
    Ok(total)
}

/// Parse one `--at` argument.
pub fn parse_at(s: &str) -> BenchResult<ScheduledSet> {
    let usage = |what: String| BenchError::Usage(format!("--at {s:?}: {what}"));
    let (time, action) = s
        .split_once(':')
        .ok_or_else(|| usage(format!("no ':' after the time; expected {FORM}")))?;
    let at_s = parse_time(time).map_err(|e| usage(format!("bad time: {e}")))?;
    let action = action.trim();
    let (verb, rest) = action
        .split_once(char::is_whitespace)
        .unwrap_or((action, ""));
    if verb != "set" {
        return Err(usage(format!(
            "unknown action {verb:?}; the only action is `set NAME=VALUE`, as in {FORM}"
        )));
    }
    let (name, value) = rest
        .trim()
        .split_once('=')
        .ok_or_else(|| usage(format!("`set` needs NAME=VALUE, got {:?}", rest.trim())))?;
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(usage(format!(
            "`set` needs one option NAME before '=', got {name:?}"
        )));
    }
    if value.is_empty() {
        return Err(usage(format!("`set {name}=` has no VALUE")));
    }
    Ok(ScheduledSet {
        at_s,
        name: name.to_string(),
        value: value.to_string(),
        text: s.to_string(),
    })
}

/// Parse every `--at`, ordered by time (ties keep command-line order).
pub fn parse_schedule(items: &[String]) -> BenchResult<Vec<ScheduledSet>> {
    let mut v: Vec<ScheduledSet> = items
        .iter()
        .map(|s| parse_at(s))
        .collect::<BenchResult<_>>()?;
    v.sort_by_key(|s| s.at_s);
    Ok(v)
}

/// Reject schedules at or past the end of the measured phase (`end_s` seconds long).
pub fn check_within(sets: &[ScheduledSet], end_s: u64, what: &str) -> BenchResult<()> {
    match sets.iter().find(|s| s.at_s >= end_s) {
        Some(s) => Err(BenchError::Usage(format!(
            "--at {:?}: {} s is not before the end of {what} ({end_s} s)",
            s.text, s.at_s
        ))),
        None => Ok(()),
    }
}

/// Ask the engine whether every scheduled change would be accepted.
pub fn check_with_engine(d: &dyn Driver, sets: &[ScheduledSet]) -> BenchResult<()> {
    for s in sets {
        d.check_option(&s.name, &s.value)
            .map_err(|e| BenchError::Usage(format!("--at {:?}: {}", s.text, e.message)))?;
    }
    Ok(())
}

/// Applies a schedule as the run loop passes each second.
#[derive(Debug, Default)]
pub struct Scheduler {
    sets: Vec<ScheduledSet>,
    next: usize,
    events: Vec<RunEvent>,
    /// With a worker ([`Scheduler::start_worker`]): changes go to it and its results come
    /// back here, so a change that takes seconds (a redo log resize) does not hold up the
    /// sampling of those seconds.
    worker: Option<Worker>,
}

/// The channel ends of a worker thread that applies changes one at a time.
#[derive(Debug)]
struct Worker {
    todo: std::sync::mpsc::Sender<(usize, ScheduledSet)>,
    done: std::sync::mpsc::Receiver<(usize, Option<String>, f64)>,
    /// Changes sent whose result has not come back.
    pending: usize,
}

impl Scheduler {
    /// `sets` as from `parse_schedule` (sorted by time).
    pub fn new(sets: Vec<ScheduledSet>) -> Self {
        Scheduler {
            sets,
            next: 0,
            events: Vec::new(),
            worker: None,
        }
    }

    /// From now on changes are applied by a thread of `scope` while the run loop goes on
    /// sampling; each is logged when it is sent and again when it has taken effect (or
    /// failed). The thread ends when the scheduler is dropped or its events are taken.
    pub fn start_worker<'scope, 'env: 'scope>(
        &mut self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        d: &'env dyn Driver,
    ) {
        if self.sets.is_empty() {
            return;
        }
        let (todo, todo_rx) = std::sync::mpsc::channel::<(usize, ScheduledSet)>();
        let (done_tx, done) = std::sync::mpsc::channel();
        scope.spawn(move || {
            for (i, s) in todo_rx {
                let t = std::time::Instant::now();
                let error = d.set_option(&s.name, &s.value).err().map(|e| e.message);
                if done_tx.send((i, error, t.elapsed().as_secs_f64())).is_err() {
                    return;
                }
            }
        });
        self.worker = Some(Worker {
            todo,
            done,
            pending: 0,
        });
    }

    /// Results the worker has sent back: the events get their errors; returns the lines.
    fn collect(&mut self, t_s: u64, wait: bool) -> Vec<String> {
        let mut lines = Vec::new();
        let Some(w) = &mut self.worker else {
            return lines;
        };
        while w.pending > 0 {
            let got = if wait {
                w.done.recv().ok()
            } else {
                w.done.try_recv().ok()
            };
            let Some((i, error, seconds)) = got else {
                break;
            };
            w.pending -= 1;
            let e = &mut self.events[i];
            lines.push(match &error {
                None => format!(
                    "{t_s:4}, at {} s: {} took effect in {seconds:.2} s",
                    e.at_s, e.action
                ),
                Some(err) => format!("{t_s:4}, at {} s: {} FAILED: {err}", e.at_s, e.action),
            });
            e.error = error;
        }
        lines
    }

    /// Apply every change due by `measured_s` seconds into the measured phase. `row` is the
    /// row of the second just sampled (its `t_s` is the run-axis second); it gets the event.
    /// Returns the log lines to print. An engine refusal is logged and recorded, not fatal:
    /// the run goes on with the old setting.
    pub fn apply_due(
        &mut self,
        d: &dyn Driver,
        measured_s: u64,
        row: Option<&mut SampleRow>,
    ) -> Vec<String> {
        let t_s = row.as_ref().map_or(0, |r| r.t_s);
        let mut lines = self.collect(t_s, false);
        let mut applied = Vec::new();
        while let Some(s) = self.sets.get(self.next).filter(|s| s.at_s <= measured_s) {
            self.next += 1;
            let action = s.action();
            if let Some(w) = &mut self.worker {
                if w.todo.send((self.events.len(), s.clone())).is_ok() {
                    w.pending += 1;
                    lines.push(format!("{t_s:4}, at {} s: {action} (applying)", s.at_s));
                    applied.push(action.clone());
                    self.events.push(RunEvent {
                        t_s,
                        at_s: s.at_s,
                        action,
                        error: None,
                    });
                    continue;
                }
            }
            let error = d.set_option(&s.name, &s.value).err().map(|e| e.message);
            lines.push(match &error {
                None => format!("{t_s:4}, at {} s: {action}", s.at_s),
                Some(e) => format!("{t_s:4}, at {} s: {action} FAILED: {e}", s.at_s),
            });
            applied.push(match &error {
                None => action.clone(),
                Some(_) => format!("{action} (failed)"),
            });
            self.events.push(RunEvent {
                t_s,
                at_s: s.at_s,
                action,
                error,
            });
        }
        if let (Some(r), false) = (row, applied.is_empty()) {
            let mut all: Vec<String> = r.event.take().into_iter().collect();
            all.extend(applied);
            r.event = Some(all.join("; "));
        }
        lines
    }

    /// Changes never applied because the run ended first.
    pub fn pending(&self) -> &[ScheduledSet] {
        &self.sets[self.next.min(self.sets.len())..]
    }

    /// The events, once every change sent to the worker has taken effect or failed; returns
    /// the lines of those that finished after the last sampled second too.
    pub fn finish(&mut self, t_s: u64) -> Vec<String> {
        let lines = self.collect(t_s, true);
        self.worker = None;
        lines
    }

    pub fn into_events(mut self) -> Vec<RunEvent> {
        self.collect(0, true);
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::model::ModelDriver;

    #[test]
    fn times() {
        assert_eq!(parse_time("90"), Ok(90));
        assert_eq!(parse_time("90s"), Ok(90));
        assert_eq!(parse_time("2m"), Ok(120));
        assert_eq!(parse_time("1m30s"), Ok(90));
        assert_eq!(parse_time("1h"), Ok(3600));
        assert_eq!(parse_time(" 0s "), Ok(0));
        for bad in [
            "",
            "m",
            "1x",
            "1.5m",
            "30s1m",
            "1m1m",
            "2m30",
            "-5",
            "99999999999999999999h",
        ] {
            let e = parse_time(bad).expect_err(bad);
            assert!(e.contains("90s, 2m"), "{bad}: {e}");
        }
    }

    #[test]
    fn schedules() {
        let s = parse_at("60s:set adaptive_flushing=steady").expect("parses");
        assert_eq!(
            (s.at_s, s.name.as_str(), s.value.as_str()),
            (60, "adaptive_flushing", "steady")
        );
        assert_eq!(s.action(), "set adaptive_flushing=steady");
        let s = parse_at("2m: set  io_capacity = 400 ").expect("spaces");
        assert_eq!(
            (s.at_s, s.name.as_str(), s.value.as_str()),
            (120, "io_capacity", "400")
        );
        let v = parse_schedule(&[
            "2m:set a=1".to_string(),
            "10:set b=2".to_string(),
            "120s:set c=3".to_string(),
        ])
        .expect("parses");
        let names: Vec<&str> = v.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"], "by time, ties in given order");
    }

    fn msg(s: &str) -> String {
        match parse_at(s) {
            Err(BenchError::Usage(m)) => m,
            other => panic!("expected a usage error for {s:?}, got {other:?}"),
        }
    }

    #[test]
    fn bad_schedules_say_which_part() {
        let m = msg("60s set a=b");
        assert!(
            m.contains("no ':'") && m.contains("TIME:set NAME=VALUE"),
            "{m}"
        );
        let m = msg("soon:set a=b");
        assert!(m.contains("bad time") && m.contains("\"soon\""), "{m}");
        let m = msg("60s:put a=b");
        assert!(
            m.contains("unknown action \"put\"") && m.contains("set NAME=VALUE"),
            "{m}"
        );
        let m = msg("60s:set a");
        assert!(m.contains("needs NAME=VALUE"), "{m}");
        let m = msg("60s:set =b");
        assert!(m.contains("option NAME"), "{m}");
        let m = msg("60s:set a=");
        assert!(m.contains("no VALUE"), "{m}");
        assert!(
            m.starts_with("--at \"60s:set a=\""),
            "names the argument: {m}"
        );
        let v = parse_schedule(&["3m:set a=b".to_string()]).expect("parses");
        let e = check_within(&v, 120, "the measured phase").expect_err("late");
        assert!(e.to_string().contains("180 s is not before"), "{e}");
        assert!(check_within(&v, 181, "x").is_ok());
    }

    #[test]
    fn engines_without_options_refuse_before_the_run() {
        let d = ModelDriver::new();
        let v = parse_schedule(&["1s:set x=1".to_string()]).expect("parses");
        let e = check_with_engine(&d, &v).expect_err("model refuses");
        assert!(e.to_string().contains("cannot change options"), "{e}");
        let mut sch = Scheduler::new(v);
        let mut row = SampleRow {
            t_s: 3,
            ..SampleRow::default()
        };
        assert!(
            sch.apply_due(&d, 0, Some(&mut row)).is_empty(),
            "not due yet"
        );
        let lines = sch.apply_due(&d, 1, Some(&mut row));
        assert!(lines[0].contains("FAILED"), "{lines:?}");
        assert_eq!(row.event.as_deref(), Some("set x=1 (failed)"));
        assert!(sch.pending().is_empty());
        let ev = sch.into_events();
        assert_eq!((ev[0].t_s, ev[0].at_s), (3, 1));
        assert!(ev[0].error.is_some());
    }

    #[test]
    fn a_worker_applies_changes_while_the_loop_goes_on() {
        let d = ModelDriver::new();
        let v =
            parse_schedule(&["1s:set x=1".to_string(), "2s:set y=2".to_string()]).expect("parses");
        let mut sch = Scheduler::new(v);
        std::thread::scope(|s| {
            sch.start_worker(s, &d);
            let mut row = SampleRow {
                t_s: 5,
                ..SampleRow::default()
            };
            let lines = sch.apply_due(&d, 2, Some(&mut row));
            // both sent at once; the row carries them, the result comes later
            assert!(lines.len() >= 2, "{lines:?}");
            assert!(lines[0].contains("(applying)"), "{lines:?}");
            assert_eq!(row.event.as_deref(), Some("set x=1; set y=2"));
            let done = sch.finish(6);
            let all: Vec<String> = lines.into_iter().chain(done).collect();
            assert_eq!(
                all.iter().filter(|l| l.contains("FAILED")).count(),
                2,
                "{all:?}"
            );
        });
        let ev = sch.into_events();
        assert_eq!(ev.len(), 2);
        assert!(ev.iter().all(|e| e.error.is_some() && e.t_s == 5));
    }
}
