//! toy: a pure, deterministic closed-loop model to run the policies against (tests only): a
//! redo log of capacity C with its async (7/8) and sync (15/16) points, a device that writes D
//! pages/s, and closed-loop clients whose commits each wait `admission_delay_us`.
//!
//! Time advances in 100 ms ticks; the policy plans once per second (every policy is treated as
//! a 1-second loop here, `next_loop_ms` is ignored). Per tick, as the engine does it
//! (flush/cleaner.rs, flush/mod.rs):
//! - the page cleaner writes the plan's share of the tick, or past the async point at least
//!   `io_capacity_max`'s (the limit every policy shares), within what the device writes;
//! - at or past the sync point, committing threads write the oldest pages themselves with
//!   whatever the device has left in the tick (`admit_stalled`'s batches), and commits are
//!   admitted only as far as the log has room under the sync point: throughput there is what
//!   the device frees, not zero. (A commit that finds no room writes one batch and proceeds;
//!   it does not wait for a whole tick.)
//! - then the clients commit, each delayed by the policy's admission curve at the tick's age
//!   (as each commit evaluates it on the age it sees), or by the plan's delay.
//!
//! Flushing f of n dirty pages moves the checkpoint by f / n of the age (dirty pages spread
//! evenly over the age). A commit writes `redo_per_txn` bytes and newly dirties
//! `pages_per_txn` pages times the clean fraction of the pool (pages already dirty are
//! combined). With N clients and an offered rate W (commits/s with no delay), a delay d gives
//! W / (1 + W d / N) commits/s.

use super::{FlushInputs, Policy};

pub const TICKS: usize = 10;

#[derive(Clone, Debug)]
pub struct Params {
    pub log_capacity: u64,
    pub device_pages_per_s: f64,
    pub pool_pages: u64,
    pub clients: f64,
    pub redo_per_txn: f64,
    pub pages_per_txn: f64,
    pub io_capacity: u64,
    pub io_capacity_max: u64,
    pub max_dirty_pages_pct: f64,
    pub avg_loops: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            log_capacity: 256 << 20,
            device_pages_per_s: 2_000.0,
            pool_pages: 200_000,
            clients: 16.0,
            redo_per_txn: 2_000.0,
            pages_per_txn: 0.5,
            io_capacity: 1_000,
            io_capacity_max: 2_000,
            max_dirty_pages_pct: 90.0,
            avg_loops: 5,
        }
    }
}

impl Params {
    /// The device and io_capacity in the proportions of `evenkeel matrix` on the steady
    /// device: the device writes about 6,000 pages/s, three times `io_capacity_max` (2,000,
    /// the default), so past the async point the page cleaner's forced flushing leaves the
    /// committing threads most of the device to write for room (the classic policies' 3,500
    /// room pages/s in tpcc-big-pool).
    pub fn matrix_like() -> Self {
        Params {
            device_pages_per_s: 6_000.0,
            io_capacity: 200,
            io_capacity_max: 2_000,
            ..Params::default()
        }
    }

    /// Offered commits/s that would dirty `k` times what the device writes (clean pool).
    pub fn offered(&self, k: f64) -> f64 {
        k * self.device_pages_per_s / self.pages_per_txn
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Commits per second.
    pub tput: Vec<f64>,
    /// The checkpoint age at the end of each second, as a fraction of the log.
    pub age_frac: Vec<f64>,
    pub max_age_frac: f64,
    pub ticks_past_async: usize,
    /// Ticks in which commits found no room under the sync point (and wrote pages for it).
    pub ticks_at_sync: usize,
    /// Pages committing threads wrote for room.
    pub room_pages: f64,
    pub max_delay_us: u64,
}

impl Outcome {
    pub fn mean(&self) -> f64 {
        self.tput.iter().sum::<f64>() / self.tput.len().max(1) as f64
    }
    pub fn min(&self) -> f64 {
        self.tput.iter().copied().fold(f64::INFINITY, f64::min)
    }
    /// The 1st-percentile second.
    pub fn p1(&self) -> f64 {
        let mut v = self.tput.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 100).copied().unwrap_or(0.0)
    }
    pub fn cv(&self) -> f64 {
        let m = self.mean();
        let var = self.tput.iter().map(|x| (x - m) * (x - m)).sum::<f64>()
            / self.tput.len().max(1) as f64;
        var.sqrt() / m.max(1e-9)
    }
    pub fn row(&self, name: &str) -> String {
        let m = self.mean();
        format!(
            "{name:<13} mean {m:7.0}/s  min {:4.2}  p1 {:4.2}  cv {:4.2}  max age {:5.1}%  ticks>=async {:4}  ticks@sync {:4}  room pages {:7.0}  max delay {:5} us",
            self.min() / m.max(1e-9),
            self.p1() / m.max(1e-9),
            self.cv(),
            100.0 * self.max_age_frac,
            self.ticks_past_async,
            self.ticks_at_sync,
            self.room_pages,
            self.max_delay_us,
        )
    }
}

struct State {
    lsn: f64,
    age: f64,
    dirty: f64,
    redo_hist: Vec<f64>,
    new_dirty_last: f64,
    flushed_last: f64,
    /// Pages committing threads wrote for room last second (the engine's foreground flushing).
    room_last: f64,
    dpb: f64,
    txns_last: f64,
}

fn inputs(p: &Params, s: &State) -> FlushInputs {
    let cap = p.log_capacity;
    let redo_last = s.redo_hist.last().copied().unwrap_or(0.0);
    let n = s.redo_hist.len().min(p.avg_loops).max(1);
    let redo_avg = s.redo_hist.iter().rev().take(n).sum::<f64>() / n as f64;
    let free = p.pool_pages / 20;
    FlushInputs {
        elapsed_s: 1.0,
        period_s: 0.0,
        lsn: s.lsn as u64,
        checkpoint_lsn: (s.lsn - s.age).max(0.0) as u64,
        log_capacity: cap,
        async_point: cap / 8 * 7,
        sync_point: cap / 16 * 15,
        redo_rate_last: redo_last,
        redo_rate_avg: redo_avg,
        commits_per_s: s.txns_last,
        dirty_pages: s.dirty as u64,
        data_pages: p.pool_pages - free,
        free_pages: free,
        total_pages: p.pool_pages,
        flushed_last: s.flushed_last as u64,
        flushed_avg: s.flushed_last,
        dirtied_per_redo_byte: s.dpb,
        // dirty pages spread evenly over the age (the model's assumption)
        tail_pages_per_redo_byte: if s.age > 0.0 { s.dirty / s.age } else { 0.0 },
        reserved_bytes: 0,
        // the toy's commits find no room at the sync point alone (it has no reservations)
        room_age: cap / 16 * 15,
        device_pages_per_s: p.device_pages_per_s,
        reads_per_s: 0.0,
        io_capacity: p.io_capacity,
        io_capacity_max: p.io_capacity_max,
        max_dirty_pages_pct: p.max_dirty_pages_pct,
        max_dirty_pages_pct_lwm: 10.0,
        adaptive_flushing_lwm: 10.0,
        flushing_avg_loops: p.avg_loops as u64,
        lru_scan_depth: 0,
        write_cap_pages_per_s: 0,
        lru_flushed_last: 0,
        foreground_flushed_last: s.room_last as u64,
        dirty_age_mean: 0.0,
        doublewrite: true,
    }
}

/// Writes `f` of the oldest dirty pages: the checkpoint moves by f / n of the age.
fn write_oldest(s: &mut State, f: f64) {
    if s.dirty > 0.0 {
        s.age -= s.age * (f / s.dirty);
    }
    s.dirty -= f;
}

/// Runs `policy` through `phases` of (seconds, offered commits/s).
pub fn run(policy: &mut dyn Policy, p: &Params, phases: &[(usize, f64)]) -> Outcome {
    let cap = p.log_capacity as f64;
    let (async_pt, sync_pt) = (
        (p.log_capacity / 8 * 7) as f64,
        (p.log_capacity / 16 * 15) as f64,
    );
    let dt = 1.0 / TICKS as f64;
    let budget = p.device_pages_per_s * dt;
    let pool = p.pool_pages as f64;
    let mut s = State {
        lsn: 1e6,
        age: 0.0,
        dirty: 0.0,
        redo_hist: Vec::new(),
        new_dirty_last: 0.0,
        flushed_last: 0.0,
        room_last: 0.0,
        dpb: 0.0,
        txns_last: 0.0,
    };
    let mut out = Outcome::default();
    for &(secs, offered) in phases {
        for _ in 0..secs {
            let plan = policy.plan(&inputs(p, &s));
            // a policy's curve is evaluated on the age of each tick, as each commit evaluates
            // it on the age it sees (flush/mod.rs); a bare delay holds for the whole loop
            let rate_at = |age: f64| {
                let delay_us = match &plan.admission {
                    Some(c) => c.delay_us(age as u64),
                    None => plan.admission_delay_us,
                };
                let delay_s = delay_us as f64 / 1e6;
                let rate = offered / (1.0 + offered * delay_s / p.clients);
                (rate, delay_us)
            };
            let share = plan.flush_list_pages as f64 / TICKS as f64;
            let (mut txns, mut redo, mut flushed, mut room) = (0.0, 0.0, 0.0, 0.0);
            s.new_dirty_last = 0.0;
            for _ in 0..TICKS {
                // the page cleaner: the plan's share, at least io_capacity_max past async
                let mut want = share;
                if s.age > async_pt {
                    out.ticks_past_async += 1;
                    want = want.max(p.io_capacity_max as f64 * dt);
                }
                let mut f = want.min(budget).min(s.dirty);
                if plan.lsn_limit > 0 && s.age > 0.0 {
                    // the pages older than the limit, dirty pages spread evenly over the age
                    let older = s.age - (s.lsn - plan.lsn_limit as f64).max(0.0);
                    f = f.min(s.dirty * (older / s.age).max(0.0));
                }
                flushed += f;
                write_oldest(&mut s, f);
                // commits that find no room under the sync point write the oldest pages
                // themselves, with what the device has left in the tick, and are admitted
                // as far as the room then reaches
                let (rate, delay_us) = rate_at(s.age);
                out.max_delay_us = out.max_delay_us.max(delay_us);
                let asked = rate * dt;
                if s.age + asked * p.redo_per_txn > sync_pt {
                    out.ticks_at_sync += 1;
                    let g = (budget - f).max(0.0).min(s.dirty);
                    room += g;
                    out.room_pages += g;
                    write_oldest(&mut s, g);
                }
                let t = asked.min(((sync_pt - s.age) / p.redo_per_txn).max(0.0));
                let r = t * p.redo_per_txn;
                let nd = t * p.pages_per_txn * (1.0 - s.dirty / pool).max(0.0);
                s.lsn += r;
                s.age += r;
                s.dirty += nd;
                s.new_dirty_last += nd;
                txns += t;
                redo += r;
                out.max_age_frac = out.max_age_frac.max(s.age / cap);
            }
            s.redo_hist.push(redo);
            if redo > 0.0 {
                s.dpb = s.new_dirty_last / redo;
            }
            s.flushed_last = flushed;
            s.room_last = room;
            s.txns_last = txns;
            out.tput.push(txns);
            out.age_frac.push(s.age / cap);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::make;
    use super::*;
    use crate::options::FlushPolicy;

    fn scenarios(p: &Params) -> Vec<(&'static str, Vec<(usize, f64)>)> {
        vec![
            ("under: 0.7 x device", vec![(300, p.offered(0.7))]),
            ("over: 1.5 x device", vec![(300, p.offered(1.5))]),
            ("far over: 3 x device", vec![(300, p.offered(3.0))]),
            (
                "steps 0.5/1.5/0.7",
                vec![
                    (100, p.offered(0.5)),
                    (100, p.offered(1.5)),
                    (100, p.offered(0.7)),
                ],
            ),
            (
                "burst 0.5/5 (20 s)/0.5",
                vec![
                    (100, p.offered(0.5)),
                    (20, p.offered(5.0)),
                    (180, p.offered(0.5)),
                ],
            ),
            (
                "steps 0.3/3/0.3",
                vec![
                    (100, p.offered(0.3)),
                    (100, p.offered(3.0)),
                    (100, p.offered(0.3)),
                ],
            ),
        ]
    }

    #[test]
    fn steady_holds_the_log_and_the_throughput() {
        for p in [Params::default(), Params::matrix_like()] {
            steady_holds(&p);
        }
    }

    fn steady_holds(p: &Params) {
        for (label, phases) in scenarios(p) {
            let mut pol = make(FlushPolicy::Steady);
            let o = run(pol.as_mut(), p, &phases);
            println!("[{label}] {}", o.row("steady"));
            // where the device keeps up, the log stays under the sync point; where it does
            // not, commits write for their room there (steady_meters_an_overloaded_device)
            if phases.iter().all(|&(_, offered)| offered <= p.offered(1.0)) {
                assert_eq!(o.ticks_at_sync, 0, "{label}: reached the sync point");
            }
            assert!(o.max_age_frac <= 15.0 / 16.0, "{label}");
            // per phase: the offered load itself changes between phases
            let mut start = 0;
            for &(secs, _) in &phases {
                let ph = Outcome {
                    tput: o.tput[start..start + secs].to_vec(),
                    ..Outcome::default()
                };
                assert!(
                    ph.min() >= 0.5 * ph.mean(),
                    "{label} @{start}s: min {} mean {}",
                    ph.min(),
                    ph.mean()
                );
                start += secs;
            }
        }
    }

    #[test]
    fn commits_that_find_no_room_write_for_it_and_continue() {
        // past the async point the page cleaner writes io_capacity_max (a third of the
        // device); commits that reach the sync point write the rest themselves and are
        // admitted as the room they make allows: no tick without commits, and throughput
        // near what the device sustains
        let p = Params::matrix_like();
        let sustainable = p.device_pages_per_s / p.pages_per_txn;
        for which in [FlushPolicy::Innodb55, FlushPolicy::Innodb80] {
            let o = run(make(which).as_mut(), &p, &[(300, p.offered(1.5))]);
            println!("{}", o.row(which.name()));
            assert!(o.room_pages > 0.0, "{}: no room writes", which.name());
            assert!(o.ticks_at_sync > 0, "{}", which.name());
            let settled = Outcome {
                tput: o.tput[100..].to_vec(),
                ..Outcome::default()
            };
            assert!(
                settled.min() >= 0.8 * settled.mean(),
                "{}: min {} mean {}",
                which.name(),
                settled.min(),
                settled.mean()
            );
            assert!(settled.mean() >= 0.9 * sustainable, "{}", which.name());
        }
    }

    #[test]
    fn the_same_toy_for_every_policy_figures_only() {
        for p in [Params::default(), Params::matrix_like()] {
            figures(&p);
        }
    }

    fn figures(p: &Params) {
        for (label, phases) in scenarios(p) {
            println!(
                "[{label}]  D = {} pages/s, log {} MiB, io_capacity {}/{}",
                p.device_pages_per_s,
                p.log_capacity >> 20,
                p.io_capacity,
                p.io_capacity_max
            );
            for which in crate::options::FlushPolicy::ALL {
                let name = which.name();
                let mut pol = make(which);
                let o = run(pol.as_mut(), p, &phases);
                println!("  {}", o.row(name));
            }
        }
    }

    #[test]
    fn steady_meters_an_overloaded_device_by_the_commits_room() {
        // offered 1.5 and 3 x what the device can clean up after: once settled, the page
        // cleaner takes half the device, commits write the rest for their room, and the
        // commits run level at close to what the device sustains, with no delay
        for p in [Params::default(), Params::matrix_like()] {
            meters_to_a_level_line(&p);
        }
    }

    fn meters_to_a_level_line(p: &Params) {
        let sustainable = p.device_pages_per_s / p.pages_per_txn;
        for k in [1.5, 3.0] {
            let o = run(
                make(FlushPolicy::Steady).as_mut(),
                p,
                &[(300, p.offered(k))],
            );
            let settled = Outcome {
                tput: o.tput[100..].to_vec(),
                ..Outcome::default()
            };
            println!("[{k} x device] {}", settled.row("steady"));
            let m = settled.mean();
            for (t, w) in settled.tput.windows(2).enumerate() {
                assert!((w[1] - w[0]).abs() <= 0.03 * m, "{k} @{}s: {w:?}", t + 101);
            }
            assert!(settled.p1() >= 0.9 * m, "{k}");
            assert!(m >= 0.95 * sustainable, "{k}: {m}");
            // past the async point every policy's cleaner writes at least io_capacity_max: where
            // that is the whole device (the default toy), the commits have nothing left to write
            if (p.io_capacity_max as f64) < p.device_pages_per_s {
                assert!(o.room_pages > 0.0, "{k}: no room writes");
            }
        }
    }

    #[test]
    fn deterministic() {
        let p = Params::default();
        let phases = [(50, p.offered(1.5))];
        let a = run(make(FlushPolicy::Steady).as_mut(), &p, &phases).tput;
        let b = run(make(FlushPolicy::Steady).as_mut(), &p, &phases).tput;
        assert_eq!(a, b);
    }
}
