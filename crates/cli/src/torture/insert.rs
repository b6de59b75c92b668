//! insert: the insert benchmark's churn (iibench l.i1) under kill -9.
//!
//! Each of `threads` clients owns table `ii{c}` and its three secondary-index tables and loops:
//! insert a batch of 1-50 rows with their index entries under the next auto-increment ids,
//! and once the table holds `TARGET_ROWS`, delete as many of the oldest rows (and their index
//! entries) in the same transaction — the bench crate's `ClientState::insert_batch`.
//!
//! Ack lines: `I c next n del` (del 1 when the batch deletes) before a batch, `A c next oldest`
//! after its commit returned, with the client's id range after it. After a kill each client's
//! table must hold exactly the ids `oldest..next` of its last acknowledgement, or of the batch
//! in flight applied whole; every row must decode, and the index tables must hold exactly the
//! three entries of every row — no entry missing, none left by a deleted row.

use super::acklog::{append, numbers};
use super::workload::{run_threads, ChildCtx};
use super::{Broken, Model, Verified};
use evenkeel_bench::codec::RowCodec;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::{scan_chunked, Driver, DriverResult, TableId};
use evenkeel_bench::insert::client::{ClientState, KINDS, KIND_INSERT};
use evenkeel_bench::insert::schema::{pk_of, ClientTables, Purchase};
use evenkeel_bench::recorder::Recorder;
use evenkeel_bench::tpcc::random::rng_for;
use parking_lot::Mutex;
use rand::Rng;
use std::collections::HashSet;
use std::ops::Bound;
use std::path::Path;

/// Rows a client's table grows to before each batch also deletes the oldest rows.
pub const TARGET_ROWS: u64 = 30_000;
const BATCH_MAX: u64 = 50;

pub fn child(ctx: &ChildCtx<'_>, ready: &dyn Fn() -> Result<(), String>) -> Result<(), String> {
    let d: &dyn Driver = ctx.driver;
    let states = (0..ctx.threads)
        .map(|c| ClientState::open(d, c).map(std::sync::Mutex::new))
        .collect::<DriverResult<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    ready()?;
    run_threads(ctx.threads, &|c| {
        let mut st = states[c]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rec = Mutex::new(Recorder::new(KINDS.len()));
        let mut rng = rng_for(ctx.seed, c as u64);
        loop {
            ctx.exit_if_orphaned();
            let n = rng.gen_range(1..=BATCH_MAX);
            let del = st.next_pk - st.oldest_pk >= TARGET_ROWS;
            ctx.ack(&format!("I {c} {} {n} {}", st.next_pk, u8::from(del)))?;
            let failed = rec.lock().kinds[KIND_INSERT].failed;
            st.insert_batch(d, n, true, del, &rec, &mut rng)
                .map_err(|e| e.to_string())?;
            if rec.lock().kinds[KIND_INSERT].failed != failed {
                return Err(format!("client {c}: a batch failed every attempt"));
            }
            ctx.ack(&format!("A {c} {} {}", st.next_pk, st.oldest_pk))?;
        }
    })
}

/// Per client, the id range `oldest..next` its table held at the last verification.
pub struct InsertModel {
    clients: Vec<(u64, u64)>,
}

impl InsertModel {
    pub fn new(clients: usize) -> InsertModel {
        InsertModel {
            clients: vec![(1, 1); clients],
        }
    }
}

/// What one client's ack lines say.
#[derive(Default)]
struct ClientLog {
    /// (next before, rows, deletes) of each batch started
    intents: Vec<(u64, u64, bool)>,
    /// (next, oldest) after each acknowledged batch
    acks: Vec<(u64, u64)>,
}

fn parse_log(lines: &[String], clients: usize) -> Result<Vec<ClientLog>, String> {
    let mut logs: Vec<ClientLog> = (0..clients).map(|_| ClientLog::default()).collect();
    for line in lines {
        let Some((tag, f)) = numbers(line) else {
            return Err(format!("bad ack line {line:?}"));
        };
        let log = |c: u64| -> Result<usize, String> {
            let i = c as usize;
            if i < clients {
                Ok(i)
            } else {
                Err(format!("ack line {line:?} names client {c} of {clients}"))
            }
        };
        match (tag, f.as_slice()) {
            ("I", &[c, next, n, del]) => logs[log(c)?].intents.push((next, n, del != 0)),
            ("A", &[c, next, oldest]) => logs[log(c)?].acks.push((next, oldest)),
            ("R", []) => {}
            _ => return Err(format!("bad ack line {line:?}")),
        }
    }
    Ok(logs)
}

/// The id range `oldest..next` a client's table holds, after checking that ids are contiguous,
/// rows decode and the index tables hold exactly the rows' entries.
fn scan_client(d: &EvenkeelDriver, c: usize) -> Result<Option<(u64, u64)>, String> {
    let t = ClientTables::open(d, c, false).map_err(|e| e.to_string())?;
    let mut txn = d.begin().map_err(|e| e.to_string())?;
    let all = Bound::Unbounded;
    let mut range: Option<(u64, u64)> = None;
    let mut entries: HashSet<(TableId, Vec<u8>)> = HashSet::new();
    let mut bad = Vec::new();
    scan_chunked(txn.as_mut(), t.base, all, all, 4096, &mut |k, v| {
        let pk = pk_of(k)?;
        match &mut range {
            None => range = Some((pk, pk + 1)),
            Some((_, next)) if *next == pk => *next += 1,
            Some((_, next)) => {
                if bad.len() < 10 {
                    bad.push(format!("ids jump from {} to {pk}", *next - 1));
                }
                *next = pk + 1;
            }
        }
        match Purchase::decode(v) {
            Ok(r) => entries.extend(t.index_keys(pk, &r)),
            Err(e) => bad.push(format!("row {pk} does not decode: {e}")),
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    for (name, idx) in [
        ("marketsegment", t.marketsegment),
        ("registersegment", t.registersegment),
        ("pdc", t.pdc),
    ] {
        let mut stray = 0u64;
        scan_chunked(txn.as_mut(), idx, all, all, 4096, &mut |k, _| {
            if !entries.remove(&(idx, k.to_vec())) {
                stray += 1;
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        if stray > 0 {
            bad.push(format!("{stray} {name} entries of rows that are not there"));
        }
    }
    txn.commit().map_err(|e| e.to_string())?;
    if !entries.is_empty() {
        bad.push(format!(
            "{} index entries of present rows missing",
            entries.len()
        ));
    }
    if bad.is_empty() {
        Ok(range)
    } else {
        Err(format!("client {c}: {}", bad.join("; ")))
    }
}

impl Model for InsertModel {
    fn verify(&mut self, d: &EvenkeelDriver, lines: &[String]) -> Result<Verified, Broken> {
        let logs = parse_log(lines, self.clients.len()).map_err(Broken::harness)?;
        let (mut problems, mut lost, mut acked, mut in_flight, mut applied) =
            (Vec::new(), 0u64, 0u64, 0u64, 0u64);
        let mut next_state = self.clients.clone();
        let mut rows = 0;
        for (c, log) in logs.iter().enumerate() {
            let before = self.clients[c];
            let (next_a, oldest_a) = log.acks.last().copied().unwrap_or(before);
            acked += log.acks.len() as u64;
            let pending = log
                .intents
                .last()
                .filter(|i| i.0 == next_a)
                .map(|&(_, n, del)| (next_a + n, oldest_a + if del { n } else { 0 }));
            in_flight += u64::from(pending.is_some());
            let found = match scan_client(d, c) {
                Ok(r) => r.map_or((next_a, next_a), |(oldest, next)| (next, oldest)),
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            rows += found.0 - found.1;
            if found == (next_a, oldest_a) || (found.0 == found.1 && next_a == oldest_a) {
                next_state[c] = (next_a, oldest_a);
            } else if Some(found) == pending {
                applied += 1;
                next_state[c] = found;
            } else {
                // Acknowledged batches whose rows (or deletes) are not there.
                let gone = log
                    .acks
                    .iter()
                    .filter(|&&(n, o)| n > found.0 || o > found.1)
                    .count() as u64;
                lost += gone.max(1);
                problems.push(format!(
                    "client {c}: table ii{c} holds ids {}..{}, acknowledged {oldest_a}..{next_a}{}",
                    found.1,
                    found.0,
                    pending.map_or(String::new(), |(n, o)| format!(
                        " (or {o}..{n} with the batch in flight)"
                    ))
                ));
            }
        }
        if !problems.is_empty() {
            return Err(Broken {
                lost_acked: lost,
                problems,
            });
        }
        self.clients = next_state;
        Ok(Verified {
            acked,
            in_flight,
            in_flight_applied: applied,
            detail: format!("{rows} rows"),
        })
    }

    fn plant(&self, ack: &Path, _threads: usize) -> std::io::Result<()> {
        // Client 0 acknowledges ids it never inserted.
        append(ack, &format!("A 0 {} 1\n", 1u64 << 40))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_parse_and_reject_strangers() {
        let lines: Vec<String> = ["R", "I 0 1 5 0", "A 0 6 1", "I 1 1 3 0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let logs = parse_log(&lines, 2).unwrap();
        assert_eq!(logs[0].acks, vec![(6, 1)]);
        assert_eq!(logs[1].intents, vec![(1, 3, false)]);
        assert!(parse_log(&["A 5 1 1".to_string()], 2).is_err());
    }
}
