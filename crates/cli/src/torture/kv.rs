//! kv: a random key-value mix checked against a model of the expected state.
//!
//! Table `kv` holds keys `k00000000`..`k{KEYS-1}`. Thread `t` of `n` owns the keys `k` with
//! `k % n == t`, so writes to one key are serialized by one thread and the order of its
//! transactions is the order of its ack lines. A transaction puts or deletes 1-8 distinct keys
//! of its thread. Every put writes a fresh version (cycle, thread, sequence, op), and a value
//! derived from key and version alone: 16-200 bytes, or 2-8 KiB for one version in 16 (overflow
//! pages), so a value can be checked byte for byte without keeping it.
//!
//! Ack lines: `I t seq k=ver k=- ...` (the transaction's writes, `-` a delete) before it starts,
//! `A t seq` after `commit()` returned. After a kill the expected state is the model of the
//! previous cycles plus every acknowledged transaction; each thread may have one more
//! transaction in flight, which must be there entirely or not at all; anything else — an
//! acknowledged version missing or replaced by an older one, a version nobody wrote, a value
//! whose bytes are wrong, half of an in-flight transaction — is a failure. The checked state
//! becomes the model of the next cycle.

use super::acklog::{append, numbers};
use super::workload::{run_threads, transact, ChildCtx};
use super::{Broken, Model, Verified};
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::{scan_chunked, Driver};
use evenkeel_bench::tpcc::random::rng_for;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;

pub const TABLE: &str = "kv";
/// Keys in the table (all threads together).
pub const KEYS: u64 = 20_000;
/// Sequence numbers of one thread in one cycle stay below this (they are 28 bits of a version).
const SEQ_MAX: u64 = 1 << 28;

fn key(k: u64) -> String {
    format!("k{k:08}")
}

fn parse_key(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b.strip_prefix(b"k")?)
        .ok()?
        .parse()
        .ok()
}

/// A version unique to (cycle, thread, seq, op).
fn version(cycle: u64, thread: u64, seq: u64, op: u64) -> u64 {
    (cycle << 40) | (thread << 32) | (seq << 4) | op
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value of key `k` at version `v`.
pub fn value(k: u64, v: u64) -> Vec<u8> {
    let h = splitmix(k ^ v.rotate_left(17));
    let len = if h.is_multiple_of(16) {
        2048 + (h >> 8) % 6144
    } else {
        16 + (h >> 8) % 185
    } as usize;
    let unit = format!("{k}:{v}:");
    let mut out = unit.repeat(len / unit.len() + 1).into_bytes();
    out.truncate(len.max(unit.len()));
    out
}

/// The version a stored value claims, if its bytes are exactly that version's value.
fn parse_value(k: u64, b: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(b).ok()?;
    let mut parts = text.splitn(3, ':');
    if parts.next()? != k.to_string() {
        return None;
    }
    let v: u64 = parts.next()?.parse().ok()?;
    (value(k, v) == b).then_some(v)
}

/// One transaction's writes: key -> Some(version) for a put, None for a delete.
type Writes = BTreeMap<u64, Option<u64>>;

pub fn child(ctx: &ChildCtx<'_>, ready: &dyn Fn() -> Result<(), String>) -> Result<(), String> {
    let d: &dyn Driver = ctx.driver;
    let t = d.open_table(TABLE, true).map_err(|e| e.to_string())?;
    ready()?;
    let n = ctx.threads as u64;
    run_threads(ctx.threads, &|i| {
        let thread = i as u64;
        let mut rng = rng_for(ctx.seed, thread);
        let owned = (KEYS - thread).div_ceil(n);
        for seq in 0..SEQ_MAX {
            ctx.exit_if_orphaned();
            let ops = rng.gen_range(1..=8u64).min(owned);
            let mut writes = Writes::new();
            for op in 0..ops {
                let k = rng.gen_range(0..owned) * n + thread;
                let put = rng.gen_bool(0.8);
                let v = put.then(|| version(ctx.cycle, thread, seq, op));
                writes.insert(k, v);
            }
            let mut line = format!("I {thread} {seq}");
            for (k, v) in &writes {
                match v {
                    Some(v) => line.push_str(&format!(" {k}={v}")),
                    None => line.push_str(&format!(" {k}=-")),
                }
            }
            ctx.ack(&line)?;
            transact(d, &mut |txn| {
                for (&k, v) in &writes {
                    match v {
                        Some(v) => txn.put(t, key(k).as_bytes(), &value(k, *v))?,
                        None => txn.delete(t, key(k).as_bytes())?,
                    }
                }
                Ok(Some(()))
            })?;
            ctx.ack(&format!("A {thread} {seq}"))?;
        }
        Err(format!("thread {thread} reached {SEQ_MAX} transactions"))
    })
}

/// The expected state across cycles: key -> version (absent keys are absent).
#[derive(Default)]
pub struct KvModel {
    state: BTreeMap<u64, u64>,
}

/// One thread's transactions of a cycle, by sequence number.
#[derive(Default)]
struct ThreadLog {
    intents: BTreeMap<u64, Writes>,
    acked: BTreeSet<u64>,
}

fn parse_intent(line: &str) -> Option<(u64, u64, Writes)> {
    let mut parts = line.split_ascii_whitespace();
    let (_, t, seq) = (parts.next()?, parts.next()?, parts.next()?);
    let mut w = Writes::new();
    for p in parts {
        let (k, v) = p.split_once('=')?;
        let v = if v == "-" {
            None
        } else {
            Some(v.parse().ok()?)
        };
        w.insert(k.parse().ok()?, v);
    }
    Some((t.parse().ok()?, seq.parse().ok()?, w))
}

fn parse_log(lines: &[String]) -> Result<BTreeMap<u64, ThreadLog>, String> {
    let mut threads: BTreeMap<u64, ThreadLog> = BTreeMap::new();
    for line in lines {
        match line.split_ascii_whitespace().next() {
            Some("I") => {
                let (t, seq, w) =
                    parse_intent(line).ok_or_else(|| format!("bad ack line {line:?}"))?;
                threads.entry(t).or_default().intents.insert(seq, w);
            }
            Some("A") => match numbers(line) {
                Some((_, f)) if f.len() == 2 => {
                    threads.entry(f[0]).or_default().acked.insert(f[1]);
                }
                _ => return Err(format!("bad ack line {line:?}")),
            },
            _ => {}
        }
    }
    Ok(threads)
}

fn scan_state(d: &EvenkeelDriver, problems: &mut Vec<String>) -> Option<BTreeMap<u64, u64>> {
    let run = || -> Result<BTreeMap<u64, u64>, String> {
        let t = d.open_table(TABLE, false).map_err(|e| e.to_string())?;
        let mut txn = d.begin().map_err(|e| e.to_string())?;
        let mut state = BTreeMap::new();
        let mut bad = Vec::new();
        let all = Bound::Unbounded;
        scan_chunked(txn.as_mut(), t, all, all, 4096, &mut |k, v| {
            match parse_key(k) {
                Some(kn) => match parse_value(kn, v) {
                    Some(ver) => {
                        state.insert(kn, ver);
                    }
                    None => bad.push(format!(
                        "key {} holds a value that is no version's value ({} bytes)",
                        key(kn),
                        v.len()
                    )),
                },
                None => bad.push(format!("unexpected key {:?}", String::from_utf8_lossy(k))),
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        txn.commit().map_err(|e| e.to_string())?;
        if bad.is_empty() {
            Ok(state)
        } else {
            Err(bad.join("; "))
        }
    };
    match run() {
        Ok(s) => Some(s),
        Err(e) => {
            problems.push(format!("reading table {TABLE}: {e}"));
            None
        }
    }
}

fn apply(state: &mut BTreeMap<u64, u64>, w: &Writes) {
    for (&k, v) in w {
        match v {
            Some(v) => state.insert(k, *v),
            None => state.remove(&k),
        };
    }
}

impl Model for KvModel {
    fn verify(&mut self, d: &EvenkeelDriver, lines: &[String]) -> Result<Verified, Broken> {
        let mut problems = Vec::new();
        let threads = parse_log(lines).map_err(Broken::harness)?;
        let mut expected = self.state.clone();
        // key -> the acknowledged transaction that last wrote it this cycle
        let mut writer: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut pending: Vec<(u64, u64, &Writes)> = Vec::new();
        let mut acked = 0;
        for (&t, log) in &threads {
            let last = log.intents.keys().next_back().copied();
            for (&seq, w) in &log.intents {
                if log.acked.contains(&seq) {
                    apply(&mut expected, w);
                    writer.extend(w.keys().map(|&k| (k, (t, seq))));
                    acked += 1;
                } else if Some(seq) == last {
                    pending.push((t, seq, w));
                } else {
                    problems.push(format!(
                        "thread {t} started transaction {} before {seq} was acknowledged",
                        seq + 1
                    ));
                }
            }
            for seq in &log.acked {
                if !log.intents.contains_key(seq) {
                    problems.push(format!("thread {t} acknowledged {seq} with no intent line"));
                }
            }
        }
        let Some(actual) = scan_state(d, &mut problems) else {
            return Err(Broken {
                lost_acked: 0,
                problems,
            });
        };
        let mut applied = 0;
        for &(t, seq, w) in &pending {
            let (mut yes, mut no) = (0, 0);
            for (&k, v) in w {
                let now = actual.get(&k).copied();
                let before = expected.get(&k).copied();
                if now == *v && now != before {
                    yes += 1;
                } else if now == before && now != *v {
                    no += 1;
                }
            }
            if yes > 0 && no > 0 {
                problems.push(format!(
                    "in-flight transaction {t}/{seq} is partly there: {yes} of its writes \
                     applied, {no} not"
                ));
            } else if yes > 0 {
                apply(&mut expected, w);
                writer.extend(w.keys().map(|&k| (k, (t, seq))));
                applied += 1;
            }
        }
        let mut lost: BTreeSet<(u64, u64)> = BTreeSet::new();
        let mut lost_old = 0u64;
        let keys: BTreeSet<u64> = expected.keys().chain(actual.keys()).copied().collect();
        for k in keys {
            let (want, got) = (expected.get(&k), actual.get(&k));
            if want == got {
                continue;
            }
            let is_pending = |ts: (u64, u64)| pending.iter().any(|p| (p.0, p.1) == ts);
            match writer.get(&k) {
                Some(&ts) if !is_pending(ts) => {
                    lost.insert(ts);
                }
                Some(_) => {}
                None => lost_old += 1,
            }
            let show = |v: Option<&u64>| v.map_or("absent".to_string(), |v| format!("version {v}"));
            problems.push(format!(
                "key {}: expected {}, found {}",
                key(k),
                show(want),
                show(got)
            ));
        }
        if !problems.is_empty() {
            return Err(Broken {
                lost_acked: lost.len() as u64 + lost_old,
                problems,
            });
        }
        self.state = actual;
        Ok(Verified {
            acked,
            in_flight: pending.len() as u64,
            in_flight_applied: applied,
            detail: format!("{} keys", self.state.len()),
        })
    }

    fn plant(&self, ack: &Path, threads: usize) -> std::io::Result<()> {
        // An acknowledged transaction of a thread that never ran, writing a key past the key
        // space that nobody wrote: verification must report it lost.
        let t = threads as u64;
        let v = version(0xff_ffff, t, 0, 0);
        append(ack, &format!("I {t} 0 {KEYS}={v}\nA {t} 0\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_check_their_bytes() {
        for (k, v) in [(0, 1), (17, 1 << 40), (19_999, 12_345)] {
            let b = value(k, v);
            assert!(b.len() >= 16, "{}", b.len());
            assert_eq!(parse_value(k, &b), Some(v));
            assert_eq!(parse_value(k + 1, &b), None);
            let mut bad = b.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            assert_eq!(parse_value(k, &bad), None);
        }
        let big = (0..64).filter(|v| value(3, *v).len() >= 2048).count();
        assert!(big > 0, "some versions make overflow values");
    }

    #[test]
    fn intents_parse() {
        let (t, s, w) = parse_intent("I 2 7 4=99 6=-").unwrap();
        assert_eq!((t, s), (2, 7));
        assert_eq!(w.get(&4), Some(&Some(99)));
        assert_eq!(w.get(&6), Some(&None));
    }
}
