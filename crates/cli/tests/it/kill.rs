//! kill: SIGKILL a real `evenkeel load` mid-load, reopen, and prove nothing acknowledged was
//! lost — the process-crash half of the durability promise (the simulated-disk campaign in
//! `crates/engine/tests/it/crash.rs` covers power loss).
//!
//! Each round spawns `evenkeel load DIR -t t --ack-file F` with a small redo log (so it wraps
//! and checkpoints run during the load) and a small buffer pool (so eviction writes pages
//! back), feeds it deterministic rows (key i -> a value derived from i, some several KiB) from a
//! thread through a pipe, waits until it has acknowledged a few batches, kills it at a random
//! moment, then runs `evenkeel check` (which recovers first) and `evenkeel dump`. What must
//! hold after every kill:
//! - K1 every line up to the last acknowledged count is present with its exact value;
//! - K2 the table is exactly the prefix 0..n of the keys: no key beyond what was sent, no hole;
//! - K3 the lines of the killed round form whole batches (a commit is all or nothing).
//!
//! The next round loads into the same directory, after the killed process's locks are gone.
//! `flush_log_at_trx_commit=2` must lose nothing either: a process crash keeps what was written
//! to the OS. Rounds: 5 per mode, `EVENKEEL_KILL_ROUNDS=N` for more; `EVENKEEL_KILL_SEED=S`
//! replays a seed's batch sizes and kill delays (the timing of the kill itself cannot be
//! replayed exactly).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ROUNDS_DEFAULT: u64 = 5;
/// Batches a load must acknowledge before it may be killed.
const MIN_ACKS: usize = 3;
/// A load runs this long after its first acknowledgements, plus up to the max more.
const KILL_DELAY_MS_MIN: u64 = 300;
const KILL_DELAY_MS_MAX: u64 = 1500;
/// A load that acknowledged nothing in this long is stuck.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);
/// The generator stops after this many lines per round (a round is killed long before).
const LINES_PER_ROUND_MAX: u64 = 20_000_000;
const BATCHES: [u32; 4] = [1, 16, 64, 256];

/// splitmix64: a small, seedable source for batch sizes, delays and value lengths.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key(i: u64) -> String {
    format!("k{i:010}")
}

/// The value of key `i`: 8-135 bytes, or 2-8 KiB for one key in 16 (overflow pages).
fn value(i: u64) -> String {
    let h = mix(i);
    let len = if h.is_multiple_of(16) {
        2048 + (h >> 8) % 6144
    } else {
        8 + (h >> 8) % 128
    } as usize;
    let unit = format!("{i}.");
    let mut v = unit.repeat(len / unit.len() + 1);
    v.truncate(len);
    v
}

/// Writes rows `start..` to the child's stdin until the pipe breaks (the child died) or the
/// round's limit; returns one past the last key handed to the pipe (an upper bound on what the
/// child can have read).
fn generate(stdin: ChildStdin, start: u64) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut out = BufWriter::with_capacity(1 << 16, stdin);
        for i in start..start + LINES_PER_ROUND_MAX {
            if writeln!(out, "{}\t{}", key(i), value(i)).is_err() {
                return i + 1;
            }
        }
        let _ = out.flush();
        start + LINES_PER_ROUND_MAX
    })
}

/// The last complete count in an ack file, and how many counts it holds.
fn read_acks(path: &Path) -> (u64, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = &text[..text.rfind('\n').map_or(0, |p| p + 1)];
    let counts: Vec<u64> = complete
        .lines()
        .map(|l| l.parse().expect("an ack line is a decimal count"))
        .collect();
    assert!(
        counts.windows(2).all(|w| w[0] < w[1]),
        "ack counts increase"
    );
    (counts.last().copied().unwrap_or(0), counts.len())
}

struct Run {
    mode: u8,
    seed: u64,
    dir: PathBuf,
    work: PathBuf,
    sets: Vec<String>,
}

/// What one round saw.
struct Round {
    acked: u64,
    present: u64,
    sent: u64,
}

impl Run {
    fn ctx(&self, round: u64) -> String {
        format!(
            "flush_log_at_trx_commit={} seed={} round={round} (replay: EVENKEEL_KILL_SEED={})",
            self.mode, self.seed, self.seed
        )
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_evenkeel"));
        c.args(args).args(&self.sets);
        c
    }

    /// Starts a load of rows `start..` with `batch` lines per commit.
    fn spawn_load(&self, round: u64, batch: u32) -> (Child, PathBuf) {
        let ack = self.work.join(format!("ack-{round}"));
        let err = File::create(self.work.join(format!("load-{round}.stderr"))).expect("stderr");
        let dir = self.dir.to_str().expect("utf-8 path");
        let batch = batch.to_string();
        let ack_arg = ack.to_str().expect("utf-8 path");
        let child = self
            .command(&[
                "load",
                dir,
                "-t",
                "t",
                "--batch",
                &batch,
                "--ack-file",
                ack_arg,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("spawn evenkeel load");
        (child, ack)
    }

    /// Waits for `MIN_ACKS` acknowledgements; the error says why there were none.
    fn wait_for_acks(&self, child: &mut Child, ack: &Path, round: u64) -> Result<(), String> {
        let started = Instant::now();
        while read_acks(ack).1 < MIN_ACKS {
            if let Ok(Some(status)) = child.try_wait() {
                let log = self.work.join(format!("load-{round}.stderr"));
                return Err(format!(
                    "load exited ({status}) before {MIN_ACKS} acks: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ));
            }
            if started.elapsed() > ACK_TIMEOUT {
                return Err(format!("no {MIN_ACKS} acks in {ACK_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// One round: load from `start`, kill, check, verify. Returns the round's figures.
    fn round(&self, round: u64, start: u64) -> Round {
        let ctx = self.ctx(round);
        let r = mix(self.seed ^ mix(round));
        let batch = BATCHES[(r % BATCHES.len() as u64) as usize];
        let delay = Duration::from_millis(KILL_DELAY_MS_MIN + (r >> 16) % KILL_DELAY_MS_MAX);
        let (mut child, ack) = self.spawn_load(round, batch);
        let gen = generate(child.stdin.take().expect("stdin"), start);
        let waited = self.wait_for_acks(&mut child, &ack, round);
        if waited.is_ok() {
            std::thread::sleep(delay);
        }
        // SIGKILL on Unix; the wait reaps the child so nothing of it remains.
        let _ = child.kill();
        let _ = child.wait();
        let sent = gen.join().expect("generator");
        if let Err(e) = waited {
            panic!("{ctx}: batch {batch}: {e}");
        }
        let acked = start + read_acks(&ack).0;

        let dir = self.dir.to_str().expect("utf-8 path");
        // the read-only commands refuse a database that needs recovery: recover it first
        let recover = self
            .command(&["recover", dir])
            .output()
            .expect("run recover");
        assert!(
            recover.status.success(),
            "{ctx}: recover failed after the kill ({}):\n{}",
            recover.status,
            String::from_utf8_lossy(&recover.stderr)
        );
        let check = self.command(&["check", dir]).output().expect("run check");
        let check_err = String::from_utf8_lossy(&check.stderr);
        assert!(
            check.status.success(),
            "{ctx}: check failed after the kill ({}):\n{}{check_err}",
            check.status,
            String::from_utf8_lossy(&check.stdout)
        );
        let dump = self
            .command(&["dump", dir, "-t", "t"])
            .output()
            .expect("dump");
        assert!(
            dump.status.success(),
            "{ctx}: dump failed: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
        let present = verify_rows(&dump.stdout, &ctx);
        assert!(
            present >= acked,
            "{ctx}: K1 lost acknowledged lines: {acked} acknowledged, only keys 0..{present} present"
        );
        assert!(
            present <= sent,
            "{ctx}: K2 keys up to {present} present, only 0..{sent} were ever sent"
        );
        assert_eq!(
            (present - start) % u64::from(batch),
            0,
            "{ctx}: K3 round started at {start} with batch {batch}, {present} rows present: a \
             commit is partly present"
        );
        eprintln!(
            "kill: {ctx}: batch {batch}, killed {} ms after {MIN_ACKS} acks: {} acknowledged, {} \
             present, {} sent; {}",
            delay.as_millis(),
            acked,
            present,
            sent,
            check_err.trim()
        );
        Round {
            acked,
            present,
            sent,
        }
    }
}

/// Checks that `dump` is exactly rows 0..n with their values (K1's values, K2's no hole and no
/// stranger); returns n.
fn verify_rows(dump: &[u8], ctx: &str) -> u64 {
    let text = std::str::from_utf8(dump).expect("the test's rows are ASCII");
    let mut n = 0u64;
    for line in text.lines() {
        let (k, v) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("{ctx}: dump line without a tab: {line:.80}"));
        assert_eq!(k, key(n), "{ctx}: K2 row {n} has the wrong key");
        assert!(
            v == value(n),
            "{ctx}: K1 key {k} has a wrong value: {v:.80}"
        );
        n += 1;
    }
    n
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: expected a number"))
    })
}

fn kill_rounds(mode: u8) {
    let rounds = env_u64("EVENKEEL_KILL_ROUNDS").unwrap_or(ROUNDS_DEFAULT);
    let seed = env_u64("EVENKEEL_KILL_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        mix(t.map_or(0, |d| d.as_nanos() as u64) ^ u64::from(mode))
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = Run {
        mode,
        seed,
        dir: tmp.path().join("db"),
        work: tmp.path().to_path_buf(),
        sets: [
            format!("flush_log_at_trx_commit={mode}"),
            "log_file_size=1M".into(),
            "log_buffer_size=512K".into(),
            "buffer_pool_size=4M".into(),
        ]
        .iter()
        .flat_map(|s| ["--set".to_string(), s.clone()])
        .collect(),
    };
    let (mut start, mut acked_total, mut sent_total) = (0u64, 0u64, 0u64);
    for round in 0..rounds {
        let r = run.round(round, start);
        acked_total += r.acked - start;
        sent_total += r.sent - start;
        start = r.present;
    }

    // The log must have wrapped, or the rounds did not test checkpoints under load.
    let dir = run.dir.to_str().expect("utf-8 path");
    let out = run
        .command(&["status", dir, "--json"])
        .output()
        .expect("status");
    assert!(out.status.success(), "{}", run.ctx(rounds));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status json");
    let (lsn, capacity) = (s["lsn"].as_u64(), s["log_capacity_bytes"].as_u64());
    let wrapped = lsn.unwrap_or(0) > capacity.unwrap_or(u64::MAX);
    eprintln!(
        "kill: flush_log_at_trx_commit={mode} seed={seed}: {rounds} rounds, {acked_total} \
         acknowledged lines verified (0 lost), {start} rows present, {sent_total} sent; LSN \
         {lsn:?}, log capacity {capacity:?}"
    );
    assert!(
        wrapped,
        "{}: the redo log should have wrapped: LSN {lsn:?}, capacity {capacity:?}",
        run.ctx(rounds)
    );
}

#[test]
fn kill_9_mid_load_loses_nothing_acknowledged_with_flush_at_commit_1() {
    kill_rounds(1);
}

#[test]
fn kill_9_mid_load_loses_nothing_acknowledged_with_flush_at_commit_2() {
    kill_rounds(2);
}
