//! report: the figures of a torture run — per cycle, and summed at the end (text and JSON).

use super::{Verified, WorkloadKind};
use evenkeel::recovery::RecoveryReport;
use serde::Serialize;
use std::path::Path;

/// What one passed cycle did.
pub struct CycleStats {
    pub cycle: u64,
    pub seed: u64,
    pub killed_after_ms: u64,
    /// The data file said the last run did not shut down cleanly (so recovery ran).
    pub recovered: bool,
    pub recovery: RecoveryReport,
    /// Wall time of `Database::open`, recovery included.
    pub open_s: f64,
    /// recovery_time_target (0: off), and whether this recovery took longer.
    pub recovery_target_s: u64,
    pub over_target: bool,
    pub lsn: u64,
    pub log_capacity_bytes: u64,
    pub verified: Verified,
}

impl CycleStats {
    pub fn line(&self) -> String {
        let r = &self.recovery;
        let v = &self.verified;
        let flight = if v.in_flight > 0 {
            format!(
                ", {} in flight ({} kept whole)",
                v.in_flight, v.in_flight_applied
            )
        } else {
            String::new()
        };
        let target = match (self.recovery_target_s, self.over_target) {
            (0, _) => String::new(),
            (t, false) => format!(", target {t} s"),
            (t, true) => format!(", OVER the target of {t} s"),
        };
        format!(
            "cycle {} seed {}: killed after {} ms; recovery {:.3} s (open {:.3} s{target}), \
             redo {} bytes, {} records applied, {} pages from doublewrite; {} acked commits \
             present{flight}; {}; check ok",
            self.cycle,
            self.seed,
            self.killed_after_ms,
            r.seconds,
            self.open_s,
            r.redo_bytes_scanned,
            r.page_records_applied,
            r.pages_repaired_from_doublewrite,
            v.acked,
            v.detail
        )
    }
}

/// A failed cycle.
#[derive(Debug, Clone, Serialize)]
pub struct CycleFailure {
    pub cycle: u64,
    pub seed: u64,
    pub lost_acked: u64,
    pub problems: Vec<String>,
}

impl CycleFailure {
    pub fn new(cycle: u64, seed: u64, lost_acked: u64, what: String) -> CycleFailure {
        CycleFailure {
            cycle,
            seed,
            lost_acked,
            problems: if what.is_empty() { vec![] } else { vec![what] },
        }
    }
}

/// The run's summary.
#[derive(Debug, Clone, Serialize)]
pub struct TortureReport {
    pub workload: WorkloadKind,
    pub seed: u64,
    pub dir: String,
    /// Cycles that passed.
    pub cycles: u64,
    /// Of those, how many found the database not shut down cleanly and recovered it.
    pub recoveries: u64,
    pub redo_bytes_total: u64,
    pub redo_bytes_mean: f64,
    pub redo_records_applied_total: u64,
    pub redo_records_applied_mean: f64,
    pub pages_repaired_from_doublewrite: u64,
    pub transactions_reapplied: u64,
    pub recovery_s_mean: f64,
    pub recovery_s_max: f64,
    pub open_s_mean: f64,
    pub open_s_max: f64,
    /// recovery_time_target (0: off) and the recoveries whose open took longer.
    pub recovery_target_s: u64,
    pub recoveries_over_target: u64,
    pub kill_after_ms_mean: f64,
    pub acked_commits_verified: u64,
    pub in_flight: u64,
    pub in_flight_kept: u64,
    pub lost_acked_commits: u64,
    pub final_lsn: u64,
    pub log_capacity_bytes: u64,
    pub elapsed_s: f64,
    pub failures: Vec<CycleFailure>,
}

impl TortureReport {
    pub fn new(workload: WorkloadKind, seed: u64, dir: &Path) -> TortureReport {
        TortureReport {
            workload,
            seed,
            dir: dir.display().to_string(),
            cycles: 0,
            recoveries: 0,
            redo_bytes_total: 0,
            redo_bytes_mean: 0.0,
            redo_records_applied_total: 0,
            redo_records_applied_mean: 0.0,
            pages_repaired_from_doublewrite: 0,
            transactions_reapplied: 0,
            recovery_s_mean: 0.0,
            recovery_s_max: 0.0,
            open_s_mean: 0.0,
            open_s_max: 0.0,
            recovery_target_s: 0,
            recoveries_over_target: 0,
            kill_after_ms_mean: 0.0,
            acked_commits_verified: 0,
            in_flight: 0,
            in_flight_kept: 0,
            lost_acked_commits: 0,
            final_lsn: 0,
            log_capacity_bytes: 0,
            elapsed_s: 0.0,
            failures: Vec::new(),
        }
    }

    pub fn add(&mut self, c: CycleStats) {
        let r = &c.recovery;
        let before = self.cycles as f64;
        let mean = |m: f64, x: f64| (m * before + x) / (before + 1.0);
        self.redo_bytes_mean = mean(self.redo_bytes_mean, r.redo_bytes_scanned as f64);
        self.redo_records_applied_mean = mean(
            self.redo_records_applied_mean,
            r.page_records_applied as f64,
        );
        self.recovery_s_mean = mean(self.recovery_s_mean, r.seconds);
        self.open_s_mean = mean(self.open_s_mean, c.open_s);
        self.kill_after_ms_mean = mean(self.kill_after_ms_mean, c.killed_after_ms as f64);
        self.cycles += 1;
        self.recoveries += u64::from(c.recovered);
        self.redo_bytes_total += r.redo_bytes_scanned;
        self.redo_records_applied_total += r.page_records_applied;
        self.pages_repaired_from_doublewrite += r.pages_repaired_from_doublewrite;
        self.transactions_reapplied += r.transactions_reapplied;
        self.recovery_s_max = self.recovery_s_max.max(r.seconds);
        self.open_s_max = self.open_s_max.max(c.open_s);
        self.recovery_target_s = c.recovery_target_s;
        self.recoveries_over_target += u64::from(c.over_target);
        self.acked_commits_verified += c.verified.acked;
        self.in_flight += c.verified.in_flight;
        self.in_flight_kept += c.verified.in_flight_applied;
        self.final_lsn = c.lsn;
        self.log_capacity_bytes = c.log_capacity_bytes;
    }

    pub fn fail(&mut self, f: CycleFailure) {
        self.lost_acked_commits += f.lost_acked;
        self.failures.push(f);
    }

    pub fn render(&self) -> String {
        let wraps = if self.log_capacity_bytes > 0 {
            self.final_lsn as f64 / self.log_capacity_bytes as f64
        } else {
            0.0
        };
        let mut out = format!(
            "torture {:?} seed {}: {} cycles passed in {:.0} s, {} recoveries\n\
             redo replayed: {} bytes scanned (mean {:.0} per recovery), {} page records \
             applied (mean {:.0}); {} pages repaired from doublewrite, {} transactions \
             re-applied\n\
             recovery time: mean {:.3} s, max {:.3} s (open incl. recovery: mean {:.3} s, max \
             {:.3} s); mean kill after {:.0} ms\n\
             acknowledged commits verified: {}; in flight at the kill: {} ({} kept whole); \
             lost acknowledged commits: {}\n\
             redo written: LSN {} = {:.1} x the log's capacity of {} bytes\n",
            self.workload,
            self.seed,
            self.cycles,
            self.elapsed_s,
            self.recoveries,
            self.redo_bytes_total,
            self.redo_bytes_mean,
            self.redo_records_applied_total,
            self.redo_records_applied_mean,
            self.pages_repaired_from_doublewrite,
            self.transactions_reapplied,
            self.recovery_s_mean,
            self.recovery_s_max,
            self.open_s_mean,
            self.open_s_max,
            self.kill_after_ms_mean,
            self.acked_commits_verified,
            self.in_flight,
            self.in_flight_kept,
            self.lost_acked_commits,
            self.final_lsn,
            wraps,
            self.log_capacity_bytes,
        );
        if self.recovery_target_s > 0 {
            out.push_str(&format!(
                "recovery_time_target {} s: {} of {} recoveries took longer (open max {:.3} s)\n",
                self.recovery_target_s,
                self.recoveries_over_target,
                self.recoveries,
                self.open_s_max
            ));
        }
        if self.failures.is_empty() {
            out.push_str("failures: none");
        } else {
            for f in &self.failures {
                out.push_str(&format!(
                    "FAILURE at cycle {} (cycle seed {}, run seed {}): {} lost acknowledged \
                     commits, {} problems; first: {}\n",
                    f.cycle,
                    f.seed,
                    self.seed,
                    f.lost_acked,
                    f.problems.len(),
                    f.problems.first().map_or("", String::as_str)
                ));
            }
        }
        out
    }
}
