//! The simulated-disk fault campaign: many seeded runs, each a workload of concurrent
//! transactions (acks recorded when `commit()` returns, flush_log_at_trx_commit=1), one fault of
//! a kind chosen round-robin by seed, a crash or a restart, a reopen on a healthy disk, then
//! verification: `check` clean, every acknowledged commit present, no transaction half-applied
//! (each transaction inserts a row of its own and moves a shared counter, so the counter must
//! equal the number of rows, and each thread's rows must be the state after some prefix of its
//! transactions that includes every acknowledged one).
//!
//! Fault kinds and what each run asserts besides the above:
//! - power loss (every unsynced write dropped), power cut at the n-th I/O (that I/O fails and
//!   nothing later happens), reorder (a random subset of unsynced writes lands, in a random
//!   order), torn write of a data / log / doublewrite file at the crash (its first k bytes
//!   land), torn write with EIO while running (prefix durable, then crash);
//! - EIO / ENOSPC on a write or fsync of the data, log or doublewrite file (one-shot, so an
//!   engine that retried would succeed and carry on): the error reaches the caller naming the
//!   file and the errno, the engine then refuses every write, and no commit started after the
//!   refusal is acknowledged; after restart (crash or not) everything acknowledged is intact;
//! - EIO on a data-file read while running: the error names the file and the page, no wrong
//!   data is served (the end state is verified), the engine keeps working or refuses cleanly;
//!   EIO on a read during recovery: open fails naming the file, a later open recovers;
//! - lost fsync (success reported, the writes dropped for good) of the log: every commit acked
//!   before the lost fsync survives, those acked after it may be lost, and the survivors are
//!   still a consistent prefix, or `check` reports pages whose LSN is beyond the recovered log
//!   end (C8), or recovery refuses to open; of the data file: when the damage was covered (a
//!   later synced write, or redo) the run is verified in full; when not, the outcome is
//!   classified and counted (the engine cannot know of a lost fsync; what `check` and recovery
//!   catch and what they cannot is in the table);
//! - power cut at the n-th I/O of `Database::create_in` (file creations not yet made durable by
//!   a directory fsync vanish): reopening finds a consistent empty database or refuses with an
//!   error naming the file, and never opens a half-created one;
//! - ENOSPC / EIO on a write or fsync of the new files of an online log resize, or EIO on a read
//!   of the log it copies, while the workload commits: the resize fails naming the file and the
//!   errno, the log keeps its size and the workload goes on (or, when the failed write was the
//!   switch's checkpoint slot, the engine refuses writes, W7); everything acknowledged is intact
//!   after the crash.
//!
//! The workload and its verification are `common::workload`, shared with the crash campaign.
//! `EVENKEEL_SIM_RUNS=N` sets the number of runs (default 260: 10 per kind); a failure prints
//! the seed, and `EVENKEEL_SIM_SEED=S` replays one run. The per-kind table is printed.

use crate::common::workload::{self, crash_opts, Progress, THREADS};
use crate::common::*;
use evenkeel::db::DATA_FILE;
use evenkeel::dwb::DWB_FILE_NAME;
use evenkeel::io::sim::{CrashMode, Fault, FaultKind, FaultOp};
use evenkeel::io::{SimStorage, Storage};
use evenkeel::{Database, Options};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const LOG0: &str = "ib_logfile0";
/// Bound on polling loops (each step yields or sleeps 1 ms): a liveness bound, not a timing.
const MAX_POLLS: u64 = 20_000;

#[derive(Clone, Debug)]
enum Kind {
    PowerLoss,
    PowerCut,
    Reorder,
    TornAtCrash(&'static str),
    TornRunning(&'static str),
    IoError {
        file: &'static str,
        op: FaultOp,
        kind: FaultKind,
    },
    ReadError,
    RecoveryReadError,
    LostSync(&'static str),
    CreateCut,
    ResizeFault {
        file: &'static str,
        op: FaultOp,
        kind: FaultKind,
    },
}

impl Kind {
    fn all() -> Vec<Kind> {
        let mut v = vec![Kind::PowerLoss, Kind::PowerCut, Kind::Reorder];
        for f in [DATA_FILE, LOG0, DWB_FILE_NAME] {
            v.push(Kind::TornAtCrash(f));
            v.push(Kind::TornRunning(f));
        }
        for file in [DATA_FILE, LOG0, DWB_FILE_NAME] {
            for op in [FaultOp::Write, FaultOp::Sync] {
                for kind in [FaultKind::Eio, FaultKind::Enospc] {
                    v.push(Kind::IoError { file, op, kind });
                }
            }
        }
        v.extend([
            Kind::ReadError,
            Kind::RecoveryReadError,
            Kind::LostSync(LOG0),
            Kind::LostSync(DATA_FILE),
            Kind::CreateCut,
            // the log starts in set A, so a resize builds ib_redo*
            Kind::ResizeFault {
                file: "ib_redo0",
                op: FaultOp::Write,
                kind: FaultKind::Enospc,
            },
            Kind::ResizeFault {
                file: "ib_redo1",
                op: FaultOp::Sync,
                kind: FaultKind::Eio,
            },
            Kind::ResizeFault {
                file: LOG0,
                op: FaultOp::Read,
                kind: FaultKind::Eio,
            },
        ]);
        v
    }

    fn label(&self) -> String {
        match self {
            Kind::PowerLoss => "power loss".into(),
            Kind::PowerCut => "power cut at n-th I/O".into(),
            Kind::Reorder => "reordered unsynced writes".into(),
            Kind::TornAtCrash(f) => format!("torn write at crash: {f}"),
            Kind::TornRunning(f) => format!("torn write + EIO: {f}"),
            Kind::IoError { file, op, kind } => format!("{kind:?} on {op:?}: {file}"),
            Kind::ReadError => "EIO on read (running)".into(),
            Kind::RecoveryReadError => "EIO on read (recovery)".into(),
            Kind::LostSync(f) => format!("lost fsync: {f}"),
            Kind::CreateCut => "power cut in create".into(),
            Kind::ResizeFault { file, op, kind } => format!("resize: {kind:?} on {op:?}: {file}"),
        }
    }

    /// Whether the run must end with every ack present and `check` clean.
    fn strict(&self) -> bool {
        !matches!(self, Kind::LostSync(_) | Kind::CreateCut)
    }
}

fn errno_text(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Eio => "os error 5",
        FaultKind::Enospc => "os error 28",
        FaultKind::LostSync => unreachable!(),
    }
}

/// Rows preloaded (over the buffer pool) for the read-fault runs.
const BULK_ROWS: u64 = 1500;

fn bulk_val(i: u64) -> Vec<u8> {
    val(i, 180)
}

#[derive(Default)]
struct Shared {
    /// Acks and attempts per thread.
    p: Progress,
    /// Acks that returned before any sync was lost (a prefix of each thread's acks).
    safe: Vec<AtomicU64>,
    /// Set once the engine refused an operation after a write/fsync fault.
    refused: AtomicBool,
    /// Transactions begun after `refused` was set, and how many of them were acknowledged.
    after_refusal: AtomicU64,
    acks_after_refusal: AtomicU64,
    /// Commits acknowledged after a worker saw a read error (the engine stayed usable).
    acks_after_read_error: AtomicU64,
    errors: Mutex<Vec<String>>,
    stop: AtomicBool,
    /// Workers whose errors mean "refused" (write/fsync faults) rather than a transient read.
    errors_refuse: bool,
}

impl Shared {
    fn new(errors_refuse: bool) -> Self {
        let z = || (0..THREADS).map(|_| AtomicU64::new(0)).collect();
        Shared {
            safe: z(),
            errors_refuse,
            ..Default::default()
        }
    }

    fn error(&self, e: String) {
        let mut v = self.errors.lock().unwrap();
        if v.len() < 64 {
            v.push(e);
        }
    }
}

fn worker(db: Database, sim: SimStorage, t: u64, seed: u64, sh: Arc<Shared>, bulk: bool) {
    let mut rng = SmallRng::seed_from_u64(seed ^ (t << 32));
    // the crash may come before this thread starts
    let (Ok(own), Ok(meta), Ok(idx)) = (db.table("own"), db.table("meta"), db.table("idx")) else {
        return;
    };
    let bulk_t = if bulk { db.table("bulk").ok() } else { None };
    let mut i = 0u64;
    let mut failures = 0u32;
    while !sh.stop.load(Ordering::Relaxed) {
        let refused_before = sh.refused.load(Ordering::SeqCst);
        if refused_before {
            sh.after_refusal.fetch_add(1, Ordering::SeqCst);
        }
        let mut txn = db.begin();
        let r = (|| -> evenkeel::Result<()> {
            if let Some(b) = &bulk_t {
                let k = rng.gen_range(0..BULK_ROWS);
                let got = txn.get(b, &key16(k))?;
                assert_eq!(got, Some(bulk_val(k)), "seed {seed}: wrong bulk row {k}");
            }
            workload::txn_writes(&mut txn, &own, &meta, &idx, t, i, &mut rng)?;
            sh.p.attempted[t as usize].fetch_max(i + 1, Ordering::SeqCst);
            std::mem::replace(&mut txn, db.begin()).commit()
        })();
        match r {
            Ok(()) => {
                sh.p.acked[t as usize].store(i + 1, Ordering::SeqCst);
                if sim.fault_counts().lost_syncs == 0 {
                    sh.safe[t as usize].store(i + 1, Ordering::SeqCst);
                }
                if refused_before {
                    sh.acks_after_refusal.fetch_add(1, Ordering::SeqCst);
                }
                if failures > 0 && !sh.errors_refuse {
                    sh.acks_after_read_error.fetch_add(1, Ordering::SeqCst);
                }
                i += 1;
            }
            Err(e) if e.is_retryable() => panic!("seed {seed}: no conflicts expected: {e}"),
            Err(e) => {
                // Not advanced: a failed commit is retried with the same contents, so the
                // prefix model holds whether or not the failed one is durable (a failure after
                // its COMMIT was logged poisons the engine, so a retry cannot commit it twice).
                sh.error(e.to_string());
                if sh.errors_refuse {
                    sh.refused.store(true, Ordering::SeqCst);
                }
                failures += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// What verification found: per thread the prefix length present.
struct Verified {
    lost_acks: u64,
}

/// Checks the reopened database with `workload::verify`: `check` clean, no transaction
/// half-applied, each thread's rows the state after a prefix of at least `lo[t]` of its
/// transactions. Returns the acknowledged transactions lost.
fn verify(db: &Database, sh: &Shared, lo: &[u64]) -> Result<Verified, String> {
    workload::verify(db, &sh.p, lo).map(|lost_acks| Verified { lost_acks })
}

/// One run's figures, summed per kind.
#[derive(Clone, Default)]
struct Tally {
    runs: u64,
    injected: u64,
    crashes: u64,
    recoveries: u64,
    errors: u64,
    acked: u64,
    lost_acks: u64,
    /// Kind-specific outcomes (name -> count).
    outcomes: BTreeMap<String, u64>,
    sample: Option<String>,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.runs += o.runs;
        self.injected += o.injected;
        self.crashes += o.crashes;
        self.recoveries += o.recoveries;
        self.errors += o.errors;
        self.acked += o.acked;
        self.lost_acks += o.lost_acks;
        for (k, v) in &o.outcomes {
            *self.outcomes.entry(k.clone()).or_default() += v;
        }
        if self.sample.is_none() {
            self.sample = o.sample.clone();
        }
    }

    fn outcome(&mut self, what: &str) {
        *self.outcomes.entry(what.to_string()).or_default() += 1;
    }
}

/// A one-shot `kind` fault on the first, second or third `op` of `file`.
fn inject_once(sim: &SimStorage, file: &str, op: FaultOp, kind: FaultKind, rng: &mut SmallRng) {
    sim.inject(Fault {
        file: Some(file.to_string()),
        op,
        after: rng.gen_range(0..3),
        kind,
        persistent: false,
    });
}

fn faults_fired(sim: &SimStorage) -> u64 {
    let c = sim.fault_counts();
    c.eio + c.enospc + c.lost_syncs + c.power_cuts
}

/// Polls until `done`, calling `nudge` between polls (e.g. a flush that drives I/O).
fn poll(mut done: impl FnMut() -> bool, mut nudge: impl FnMut()) -> bool {
    for _ in 0..MAX_POLLS {
        if done() {
            return true;
        }
        nudge();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    done()
}

fn one_run(seed: u64, kind: &Kind) -> Tally {
    let mut tally = Tally {
        runs: 1,
        ..Default::default()
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let o = crash_opts(&mut rng);
    let sim = SimStorage::new();
    if let Kind::CreateCut = kind {
        create_cut(seed, &mut rng, &sim, &o, &mut tally);
        return tally;
    }
    let db = workload::create_db(&sim, &o);
    let bulk = matches!(kind, Kind::ReadError | Kind::RecoveryReadError);
    if bulk {
        let b = db.create_table("bulk").unwrap();
        for chunk in 0..BULK_ROWS / 100 {
            let mut txn = db.begin();
            for i in chunk * 100..(chunk + 1) * 100 {
                txn.put(&b, &key16(i), &bulk_val(i)).unwrap();
            }
            txn.commit().unwrap();
        }
        db.flush().unwrap();
    }
    let refuses = matches!(kind, Kind::IoError { .. } | Kind::TornRunning(_));
    let sh = Arc::new(Shared::new(refuses));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, sim, sh) = (db.clone(), sim.clone(), sh.clone());
            std::thread::spawn(move || worker(db, sim, t, seed, sh, bulk))
        })
        .collect();
    let target = rng.gen_range(5..150u64);
    assert!(
        poll(|| sh.p.total_acked() >= target, || {}),
        "seed {seed}: workload stalled before {target} acks"
    );
    let mut crash: Option<CrashMode> = Some(CrashMode::DropUnsynced);
    let mut read_errors = Vec::new();
    match kind {
        Kind::PowerLoss | Kind::RecoveryReadError => {}
        Kind::Reorder => crash = Some(CrashMode::Reorder { seed }),
        Kind::TornAtCrash(f) => {
            // the power fails while the next write to `f` is landing
            sim.tear_next_write_then_cut(f, rng.gen_range(0..4096));
            let fired = poll(
                || sim.is_power_cut(),
                || {
                    let _ = db.flush();
                },
            );
            assert!(fired, "seed {seed}: no write to {f} came");
            crash = None;
            tally.crashes += 1;
        }
        Kind::PowerCut => {
            sim.power_cut_after(rng.gen_range(0..200));
            // flushes drive data, doublewrite and log I/O too
            let fired = poll(
                || sim.is_power_cut(),
                || {
                    let _ = db.flush();
                },
            );
            assert!(fired, "seed {seed}: the power cut never came");
            crash = None; // the cut was the crash
            tally.crashes += 1;
        }
        Kind::TornRunning(f) => {
            sim.tear_next_write(f, rng.gen_range(0..4096));
            await_refusal(seed, &sim, &db, &sh, f, "os error 5");
        }
        Kind::IoError { file, op, kind } => {
            inject_once(&sim, file, *op, *kind, &mut rng);
            await_refusal(seed, &sim, &db, &sh, file, errno_text(*kind));
            if rng.gen_bool(0.5) {
                crash = None; // a process restart: the OS keeps what was written
            }
        }
        Kind::ReadError => {
            sim.inject(Fault {
                file: Some(DATA_FILE.to_string()),
                op: FaultOp::Read,
                after: rng.gen_range(0..20),
                kind: FaultKind::Eio,
                persistent: false,
            });
            let more = sh.p.total_acked() + rng.gen_range(1..60);
            poll(|| faults_fired(&sim) > 0, || {});
            // then more acks, unless the read failed inside a commit and the engine refuses
            poll(
                || sh.p.total_acked() >= more || !sh.errors.lock().unwrap().is_empty(),
                || {},
            );
            let n = sh.acks_after_read_error.load(Ordering::SeqCst);
            for _ in 0..200 {
                if sh.acks_after_read_error.load(Ordering::SeqCst) > n {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            crash = rng.gen_bool(0.5).then_some(CrashMode::DropUnsynced);
            // only errors before the crash are about the read fault
            read_errors = sh.errors.lock().unwrap().clone();
        }
        Kind::LostSync(f) => {
            sim.inject(Fault {
                file: Some(f.to_string()),
                op: FaultOp::Sync,
                after: rng.gen_range(0..3),
                kind: FaultKind::LostSync,
                persistent: false,
            });
            let data = *f == DATA_FILE;
            poll(
                || faults_fired(&sim) > 0,
                || {
                    if data {
                        let _ = db.flush();
                    }
                },
            );
            // keep going after the lost fsync; sometimes checkpoint past it
            let more = sh.p.total_acked() + rng.gen_range(0..60);
            poll(|| sh.p.total_acked() >= more, || {});
            if rng.gen_bool(0.5) {
                let _ = db.flush();
            }
        }
        Kind::ResizeFault { file, op, kind } => {
            inject_once(&sim, file, *op, *kind, &mut rng);
            let before = db.status().log_capacity_bytes;
            let r = db.resize_log(2048 * 1024);
            let fired = faults_fired(&sim) > 0;
            match (r, fired) {
                (Err(e), true) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(file) && e.contains(errno_text(*kind)),
                        "seed {seed}: a failed resize must name the file and the cause: {e}"
                    );
                    assert_eq!(db.status().log_capacity_bytes, before, "seed {seed}");
                    tally.errors += 1;
                    tally.sample = Some(e);
                }
                (Ok(_), false) => tally.outcome("resize done (the fault did not fire)"),
                // The fault skips up to two matching operations first, so it may fire after
                // the switch, on the new log's own write or fsync by a commit: a log I/O
                // error like any other, which a commit must report. A resize that swallowed the
                // error of its own operation would leave every commit succeeding instead.
                (Ok(_), true) => {
                    let refused = poll(|| !sh.errors.lock().unwrap().is_empty(), || {});
                    assert!(
                        refused && db.status().log_capacity_bytes != before,
                        "seed {seed}: the resize succeeded, the fault fired and no commit failed"
                    );
                    tally.outcome("resize done, the fault hit the new log in use: a commit failed");
                }
                (r, fired) => panic!("seed {seed}: resize {r:?} with the fault fired: {fired}"),
            }
            // the workload goes on after an abandoned resize; a failed switch stops it (W7)
            let more = sh.p.total_acked() + rng.gen_range(1..40);
            poll(
                || sh.p.total_acked() >= more || !sh.errors.lock().unwrap().is_empty(),
                || {},
            );
            if fired {
                tally.outcome(if sh.errors.lock().unwrap().is_empty() {
                    "resize abandoned, commits went on"
                } else {
                    "resize failed at the switch, writes refused"
                });
            }
        }
        Kind::CreateCut => unreachable!(),
    }
    if let Some(mode) = &crash {
        if std::env::var("EVENKEEL_SIM_DEBUG").is_ok() {
            eprintln!("seed {seed}: {}: crash {mode:?}", kind.label());
        }
        sim.crash_with(mode.clone());
        tally.crashes += 1;
    }
    sh.stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    if crash.is_none() && !matches!(kind, Kind::PowerCut | Kind::TornAtCrash(_)) {
        // a restart without power loss: the faults go away, the OS keeps what was written
        sim.clear_faults();
    }
    drop(db);
    sim.restart();
    let c = sim.fault_counts();
    tally.injected += match kind {
        // a torn running write counts as a torn write and an EIO: one fault
        Kind::TornRunning(_) => c.torn_writes,
        _ => c.eio + c.enospc + c.lost_syncs + c.power_cuts + c.torn_writes,
    };
    tally.acked = sh.p.total_acked();
    let errors = sh.errors.lock().unwrap().clone();
    tally.errors += errors.len() as u64;
    if let Some(e) = errors.first() {
        tally.sample = Some(e.clone());
    }
    if let Kind::IoError { .. } | Kind::TornRunning(_) = kind {
        let (after, acks) = (
            sh.after_refusal.load(Ordering::SeqCst),
            sh.acks_after_refusal.load(Ordering::SeqCst),
        );
        assert_eq!(
            acks, 0,
            "seed {seed}: {acks} of {after} commits begun after the engine refused were acked"
        );
        *tally
            .outcomes
            .entry("commits refused after the failure".into())
            .or_default() += after;
    }
    if let Kind::ReadError = kind {
        for e in &read_errors {
            assert!(
                e.contains(DATA_FILE) && e.contains("page") && e.contains("os error 5"),
                "seed {seed}: a read error must name the file, the page and the cause: {e}"
            );
        }
        if !read_errors.is_empty() {
            let n = sh.acks_after_read_error.load(Ordering::SeqCst);
            tally.outcome(if n > 0 {
                "stayed usable after read error"
            } else {
                "refused after read error"
            });
        }
    }
    if let Kind::RecoveryReadError = kind {
        sim.inject(Fault {
            file: Some(DATA_FILE.to_string()),
            op: FaultOp::Read,
            after: rng.gen_range(0..4),
            kind: FaultKind::Eio,
            persistent: false,
        });
        match Database::open_in(Arc::new(sim.clone()), o.clone()) {
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(DATA_FILE) && e.contains("os error 5"),
                    "seed {seed}: open must name the file and the cause: {e}"
                );
                tally.errors += 1;
                tally.sample = Some(e);
                tally.outcome("open refused");
            }
            Ok(db) => {
                // the fault did not fire during recovery, or fired in a background read
                drop(db);
                tally.outcome("open succeeded");
            }
        }
        tally.injected += sim.fault_counts().eio - c.eio;
        sim.clear_faults();
        // the failed open may have written (its new log epoch): a crash, then the real reopen
        sim.crash();
    }
    // reopen on a healthy disk
    if let Kind::LostSync(f) = kind {
        // every ack from before the lost fsync must be there; later ones may be lost
        let lo: Vec<u64> = sh.safe.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        let reopened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match Database::open_in(Arc::new(sim.clone()), o.clone()) {
                Ok(db) => (true, verify(&db, &sh, &lo)),
                Err(e) => (false, Err(format!("open refused: {e}"))),
            }
        }));
        let (opened, result) = reopened.unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            (false, Err(format!("engine panicked: {msg}")))
        });
        tally.recoveries += u64::from(opened);
        lost_sync_outcome(seed, f, &sim, o.page_size, result, &mut tally);
        return tally;
    }
    let db = Database::open_in(Arc::new(sim.clone()), o.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: {}: recovery failed: {e}", kind.label()));
    tally.recoveries += 1;
    match verify(&db, &sh, &sh.p.acked()) {
        Ok(v) => assert_eq!(v.lost_acks, 0),
        Err(e) => panic!("seed {seed}: {}: {e}", kind.label()),
    }
    drop(db);
    tally
}

/// After a write/fsync fault: drives I/O until the fault fires, then until the engine refuses;
/// checks the error names `file` and `cause`; lets every worker try at least one more commit.
fn await_refusal(seed: u64, sim: &SimStorage, db: &Database, sh: &Shared, file: &str, cause: &str) {
    let fired = poll(
        || faults_fired(sim) > 0 || sim.fault_counts().torn_writes > 0,
        || {
            let _ = db.flush();
        },
    );
    assert!(fired, "seed {seed}: the fault on {file} never fired");
    // The engine must refuse from now on: a flush (which writes pages and the log) fails.
    let refusal = std::cell::RefCell::new(None);
    let refused = poll(
        || refusal.borrow().is_some(),
        || {
            if let Err(e) = db.flush() {
                *refusal.borrow_mut() = Some(e.to_string());
            }
        },
    );
    assert!(
        refused,
        "seed {seed}: the engine kept accepting writes after a failed I/O on {file}"
    );
    sh.refused.store(true, Ordering::SeqCst);
    let msg = refusal.into_inner().unwrap();
    assert!(
        msg.contains(file) && msg.contains(cause),
        "seed {seed}: the refusal must name {file} and {cause}: {msg}"
    );
    for e in sh.errors.lock().unwrap().iter() {
        assert!(
            e.contains(file) && e.contains(cause),
            "seed {seed}: a worker's error must name {file} and {cause}: {e}"
        );
    }
    sh.error(msg);
    // every worker tries again after the refusal (each such commit must fail)
    let before = sh.after_refusal.load(Ordering::SeqCst);
    poll(
        || sh.after_refusal.load(Ordering::SeqCst) >= before + THREADS,
        || {},
    );
}

fn lost_sync_outcome(
    seed: u64,
    file: &str,
    sim: &SimStorage,
    ps: usize,
    result: Result<Verified, String>,
    tally: &mut Tally,
) {
    let fired = sim.fault_counts().lost_syncs > 0;
    let damage = sim.lost_sync_damage(file, if file == DATA_FILE { ps } else { 512 });
    match (file == DATA_FILE, result) {
        (_, Ok(v)) => {
            // every ack from before the lost fsync is present (verify's lower bound)
            tally.lost_acks += v.lost_acks;
            tally.outcome(match (fired, damage.is_empty(), v.lost_acks) {
                (false, _, _) => "not fired",
                (true, true, _) => "covered by later writes",
                (true, false, 0) => "consistent, no ack lost",
                (true, false, _) => "acks after the lost fsync lost, rest consistent",
            });
        }
        (false, Err(e)) => {
            // the log lost writes the data file may already reflect: check must say so, or
            // recovery must refuse; never silently wrong
            let what = if e.contains("C8") {
                "detected by check (C8)"
            } else if e.starts_with("open refused") {
                "detected by recovery (open refused)"
            } else {
                panic!(
                    "seed {seed}: lost log fsync: the damage must be reported by check (C8 \
                     page LSN beyond the log end) or refused at open, got: {e}"
                )
            };
            tally.outcome(what);
            tally.sample = Some(e);
        }
        (true, Err(e)) => {
            assert!(
                !damage.is_empty(),
                "seed {seed}: a lost data fsync whose writes were all covered must not matter: {e}"
            );
            let what = if e.starts_with("check") {
                "detected by check"
            } else if e.starts_with("open refused") {
                "detected by recovery (open refused)"
            } else if e.starts_with("engine panicked") {
                "engine panicked in recovery"
            } else {
                "undetected by the engine: acked data lost or inconsistent"
            };
            tally.outcome(what);
            tally.sample = Some(e);
        }
    }
}

/// A power cut at the n-th I/O of create, then reopen and re-create.
fn create_cut(seed: u64, rng: &mut SmallRng, sim: &SimStorage, o: &Options, tally: &mut Tally) {
    sim.power_cut_after(rng.gen_range(0..40));
    let created = Database::create_in(Arc::new(sim.clone()), o.clone());
    sim.restart();
    tally.injected += sim.fault_counts().power_cuts;
    tally.crashes += sim.fault_counts().power_cuts;
    let was_cut = sim.fault_counts().power_cuts > 0;
    match created {
        Ok(db) => {
            assert!(
                !was_cut,
                "seed {seed}: create succeeded through a power cut"
            );
            drop(db);
            tally.outcome("create finished before the cut");
            return;
        }
        Err(e) => {
            tally.errors += 1;
            tally.sample = Some(e.to_string());
        }
    }
    let names_a_file =
        |e: &str| e.contains(DATA_FILE) || e.contains("ib_logfile") || e.contains(DWB_FILE_NAME);
    match Database::open_in(Arc::new(sim.clone()), o.clone()) {
        Ok(db) => {
            tally.recoveries += 1;
            assert_check(&db);
            assert!(
                db.tables().unwrap().is_empty(),
                "seed {seed}: a half-created database has tables"
            );
            drop(db);
            tally.outcome("reopened: complete, empty");
        }
        Err(e) => {
            let e = e.to_string();
            assert!(
                names_a_file(&e),
                "seed {seed}: refusing a half-created database must name the file: {e}"
            );
            // the data file is what makes a database exist: it may appear only complete
            assert!(
                !sim.exists(DATA_FILE),
                "seed {seed}: {DATA_FILE} survived a cut create incomplete: {e}"
            );
            // a second create: succeeds, or refuses naming what is in the way
            match Database::create_in(Arc::new(sim.clone()), o.clone()) {
                Ok(db) => {
                    assert_check(&db);
                    drop(db);
                    tally.outcome("reopen refused, re-create succeeded");
                }
                Err(e2) => {
                    let e2 = e2.to_string();
                    assert!(
                        names_a_file(&e2),
                        "seed {seed}: re-create must name the file in the way: {e2}"
                    );
                    tally.outcome("reopen refused, re-create refused");
                    tally.sample = Some(e2);
                }
            }
        }
    }
}

#[test]
fn simulated_disk_fault_campaign() {
    let kinds = Kind::all();
    if let Some(seed) = std::env::var("EVENKEEL_SIM_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let kind = &kinds[seed as usize % kinds.len()];
        eprintln!("seed {seed}: {}", kind.label());
        one_run(seed, kind);
        return;
    }
    let runs: u64 = std::env::var("EVENKEEL_SIM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10 * kinds.len() as u64);
    let mut per_kind: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    for seed in 0..runs {
        let kind = &kinds[seed as usize % kinds.len()];
        let started = std::time::Instant::now();
        let r = std::panic::catch_unwind(|| one_run(seed, kind));
        if std::env::var("EVENKEEL_SIM_DEBUG").is_ok() {
            eprintln!("seed {seed}: {}: {:?}", kind.label(), started.elapsed());
        }
        match r {
            Ok(t) => per_kind.entry(kind.label()).or_default().add(&t),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push((seed, kind.label(), msg));
            }
        }
    }
    print_table(&per_kind);
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed (replay one with EVENKEEL_SIM_SEED=<seed>):\n{}",
        failures.len(),
        failures
            .iter()
            .map(|(s, k, m)| format!("seed {s} [{k}]: {m}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let strict_lost: u64 = kinds
        .iter()
        .filter(|k| k.strict())
        .filter_map(|k| per_kind.get(&k.label()))
        .map(|t| t.lost_acks)
        .sum();
    assert_eq!(strict_lost, 0);
    // every kind must have injected its fault somewhere (a fault that never fires tests nothing)
    for k in &kinds {
        let t = &per_kind[&k.label()];
        let needs = !matches!(k, Kind::PowerLoss | Kind::Reorder | Kind::TornAtCrash(_));
        assert!(
            !needs || t.injected > 0,
            "{}: no fault fired in {} runs",
            k.label(),
            t.runs
        );
    }
}

fn print_table(per_kind: &BTreeMap<String, Tally>) {
    let mut total = Tally::default();
    println!(
        "{:<32} {:>6} {:>8} {:>7} {:>10} {:>7} {:>8} {:>9}",
        "fault kind", "runs", "injected", "crashes", "recoveries", "errors", "acked", "lost acks"
    );
    for (k, t) in per_kind {
        println!(
            "{:<32} {:>6} {:>8} {:>7} {:>10} {:>7} {:>8} {:>9}",
            k, t.runs, t.injected, t.crashes, t.recoveries, t.errors, t.acked, t.lost_acks
        );
        total.add(t);
    }
    println!(
        "{:<32} {:>6} {:>8} {:>7} {:>10} {:>7} {:>8} {:>9}",
        "total",
        total.runs,
        total.injected,
        total.crashes,
        total.recoveries,
        total.errors,
        total.acked,
        total.lost_acks
    );
    println!("outcomes and sample messages:");
    for (k, t) in per_kind {
        for (o, n) in &t.outcomes {
            println!("  {k}: {o}: {n}");
        }
        if let Some(s) = &t.sample {
            println!("  {k}: sample: {s}");
        }
    }
}

/// A power cut at every I/O of `Database::create_in`, in turn: the database either does not
/// exist afterwards (open refuses naming the file) or is complete; never a data file that
/// exists but is incomplete.
#[test]
fn power_cut_at_every_io_of_create() {
    let mut rng = SmallRng::seed_from_u64(7);
    let o = crash_opts(&mut rng);
    let mut outcomes: BTreeMap<&str, u64> = BTreeMap::new();
    for n in 0.. {
        let sim = SimStorage::new();
        sim.power_cut_after(n);
        let created = Database::create_in(Arc::new(sim.clone()), o.clone());
        let cut = sim.is_power_cut();
        sim.restart();
        if let Ok(db) = created {
            assert!(!cut, "cut at I/O {n}: create reported success");
            drop(db);
            break; // create did fewer than n I/Os: every cut point was tried
        }
        assert!(
            cut,
            "create failed without a cut: {}",
            created.err().unwrap()
        );
        match Database::open_in(Arc::new(sim.clone()), o.clone()) {
            Ok(db) => {
                assert_check(&db);
                assert!(db.tables().unwrap().is_empty());
                *outcomes.entry("complete").or_default() += 1;
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    !sim.exists(DATA_FILE),
                    "cut at I/O {n}: {DATA_FILE} exists but cannot be opened: {e}"
                );
                assert!(e.contains(DATA_FILE), "cut at I/O {n}: {e}");
                // a new create either works or says what is in the way and what to do
                match Database::create_in(Arc::new(sim.clone()), o.clone()) {
                    Ok(db) => {
                        assert_check(&db);
                        *outcomes.entry("absent, re-created").or_default() += 1;
                    }
                    Err(e) => {
                        let e = e.to_string();
                        assert!(
                            e.contains("ib_logfile0") && e.contains("did not finish"),
                            "cut at I/O {n}: {e}"
                        );
                        *outcomes.entry("absent, leftover log refused").or_default() += 1;
                    }
                }
            }
        }
    }
    println!("power cut at each I/O of create: {outcomes:?}");
    assert!(
        outcomes.contains_key("complete") && outcomes.len() >= 2,
        "{outcomes:?}"
    );
}

/// EIO on one fsync of the redo log: the committing thread gets the error naming the file and
/// the cause; the fsync is not retried (it would succeed: the fault fires once), every later
/// commit is refused with the same reason; after restart every acknowledged commit is there
/// and the failed one is absent or complete.
#[test]
fn failed_log_fsync_stops_commits_for_good() {
    for kind in [FaultKind::Eio, FaultKind::Enospc] {
        let o = opts(4096, 64 * 4096);
        let (sim, db) = sim_db(o.clone());
        let t = db.create_table("t").unwrap();
        for i in 0..20 {
            let mut txn = db.begin();
            txn.put(&t, &key16(i), &val(i, 50)).unwrap();
            txn.commit().unwrap();
        }
        sim.inject(Fault {
            file: Some(LOG0.into()),
            op: FaultOp::Sync,
            after: 0,
            kind,
            persistent: false,
        });
        let mut txn = db.begin();
        txn.put(&t, &key16(20), &val(20, 50)).unwrap();
        let e = txn.commit().unwrap_err().to_string();
        assert!(e.contains(LOG0) && e.contains(errno_text(kind)), "{e}");
        for i in 21..24 {
            let mut txn = db.begin();
            let r = txn
                .put(&t, &key16(i), &val(i, 50))
                .and_then(|()| txn.commit());
            let e = r.expect_err("a commit after a failed log fsync was acknowledged");
            let e = e.to_string();
            assert!(e.contains(LOG0) && e.contains(errno_text(kind)), "{e}");
        }
        assert!(db.flush().is_err());
        drop(db);
        sim.crash();
        let db = Database::open_in(Arc::new(sim), o).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..20 {
            assert_eq!(db.begin().get(&t, &key16(i)).unwrap(), Some(val(i, 50)));
        }
        let failed = db.begin().get(&t, &key16(20)).unwrap();
        assert!(failed.is_none() || failed == Some(val(20, 50)));
        for i in 21..24 {
            assert_eq!(db.begin().get(&t, &key16(i)).unwrap(), None);
        }
        assert_check(&db);
    }
}

/// A write of the data file that fails while a user thread evicts a dirty page (not through
/// the page cleaner): later commits are refused naming the data file and the cause. Before the
/// buffer pool kept the reason, commits went on being acknowledged after such a failure, and
/// refusals said only "page writes are stopped after an earlier I/O failure".
#[test]
fn failed_data_write_refuses_later_commits_naming_the_file() {
    let o = opts(4096, 64 * 4096);
    let (sim, db) = sim_db(o.clone());
    let t = db.create_table("t").unwrap();
    let n = 3000u64;
    for chunk in 0..n / 100 {
        let mut txn = db.begin();
        for i in chunk * 100..(chunk + 1) * 100 {
            txn.put(&t, &key16(i), &val(i, 100)).unwrap();
        }
        txn.commit().unwrap();
    }
    sim.inject(Fault {
        file: Some(DATA_FILE.into()),
        op: FaultOp::Write,
        after: 0,
        kind: FaultKind::Enospc,
        persistent: false,
    });
    // dirty every page and read them all back: evictions write dirty pages from this thread
    let mut first_error = None;
    for i in (0..n).step_by(7) {
        let mut txn = db.begin();
        let r = txn
            .put(&t, &key16(i), &val(i + 1, 100))
            .and_then(|()| txn.commit());
        if let Err(e) = r {
            first_error = Some(e.to_string());
            break;
        }
    }
    let fired = sim.fault_counts().enospc == 1;
    assert!(fired, "no data-file write happened");
    if first_error.is_none() {
        // the page cleaner hit it: a flush sees the refusal
        first_error = db.flush().err().map(|e| e.to_string());
    }
    let e = first_error.expect("the engine went on after a failed data-file write");
    assert!(e.contains(DATA_FILE) && e.contains("os error 28"), "{e}");
    let mut txn = db.begin();
    let r = txn
        .put(&t, &key16(n + 1), b"late")
        .and_then(|()| txn.commit());
    let e = r.expect_err("a commit after a failed data-file write was acknowledged");
    assert!(
        e.to_string().contains(DATA_FILE) && e.to_string().contains("os error 28"),
        "{e}"
    );
    drop(db);
    sim.crash();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert_check(&db);
    let t = db.table("t").unwrap();
    assert_eq!(db.begin().get(&t, &key16(n + 1)).unwrap(), None);
    assert_eq!(
        db.begin()
            .scan(&t, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .count() as u64,
        n
    );
}

/// EIO on a data-file read: the reader gets an error naming the file and the page; nothing
/// wrong is served; the next read of the same row works.
#[test]
fn failed_page_read_names_file_and_page_and_serves_nothing_wrong() {
    let o = opts(4096, 64 * 4096);
    let (sim, db) = sim_db(o.clone());
    let t = db.create_table("t").unwrap();
    let n = 3000u64;
    for chunk in 0..n / 100 {
        let mut txn = db.begin();
        for i in chunk * 100..(chunk + 1) * 100 {
            txn.put(&t, &key16(i), &val(i, 100)).unwrap();
        }
        txn.commit().unwrap();
    }
    db.flush().unwrap();
    let mut seen_error = false;
    for i in (0..n).step_by(13) {
        sim.inject(Fault {
            file: Some(DATA_FILE.into()),
            op: FaultOp::Read,
            after: 0,
            kind: FaultKind::Eio,
            persistent: false,
        });
        match db.begin().get(&t, &key16(i)) {
            Ok(v) => assert_eq!(v, Some(val(i, 100))), // cached: no read happened
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(DATA_FILE) && e.contains("page ") && e.contains("os error 5"),
                    "{e}"
                );
                seen_error = true;
            }
        }
        sim.clear_faults();
        assert_eq!(db.begin().get(&t, &key16(i)).unwrap(), Some(val(i, 100)));
    }
    assert!(seen_error, "no read reached the disk");
    // reads failing do not stop writes
    let mut txn = db.begin();
    txn.put(&t, &key16(n), b"after").unwrap();
    txn.commit().unwrap();
    assert_check(&db);
}

/// Named regression, seed 5925 of a 10,000-run campaign: a lost fsync of the redo log whose
/// damage recovery met first. Open refused (the log's end is behind pages it must redo),
/// which the campaign then did not accept as a detection; it must be, and the run must end in
/// a refusal or a check that reports C8, never in silently wrong data.
#[test]
fn regression_seed_5925_lost_log_fsync_refused_at_open() {
    // the kind the campaign drew for seed 5925 when it was found (the draw by seed moves as
    // kinds are added; the seed's own random choices do not)
    one_run(5925, &Kind::LostSync(LOG0));
}
