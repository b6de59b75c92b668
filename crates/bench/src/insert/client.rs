//! One insert-benchmark client and its table: the work of each step, batched into transactions
//! and retried on deadlocks or lock-wait timeouts (each retry counted). A client knows the
//! next primary key and the oldest live one, so l.i1 and l.i2 can delete exactly as many of
//! the oldest rows as they insert, keeping the table's size constant.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rand::Rng;

use super::schema::{
    pk_key, pk_of, ClientTables, Purchase, CASHREGISTERS, PRICE_MAX_CENTS, PRODUCTS,
};
use super::step::Step;
use crate::codec::{Key, RowCodec};
use crate::driver::{Driver, DriverError, DriverResult, DriverTxn};
use crate::recorder::Recorder;

/// Operation kinds recorded by insert-benchmark clients.
pub const KINDS: [&str; 3] = ["INSERT", "INDEX", "QUERY"];
pub const KIND_INSERT: usize = 0;
pub const KIND_INDEX: usize = 1;
pub const KIND_QUERY: usize = 2;

const MAX_ATTEMPTS: u32 = 100;

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Run `body` in a transaction, retrying retryable failures; records `n` ops of `kind` on success.
fn with_retry(
    d: &dyn Driver,
    rec: &Mutex<Recorder>,
    kind: usize,
    n: u64,
    body: &mut dyn FnMut(&mut dyn DriverTxn) -> DriverResult<()>,
) -> DriverResult<()> {
    let started = Instant::now();
    for _ in 0..MAX_ATTEMPTS {
        let mut txn = d.begin()?;
        let r = body(txn.as_mut()).and_then(|()| txn.commit());
        match r {
            Ok(()) => {
                let us = started.elapsed().as_micros() as u64;
                let mut g = rec.lock();
                g.record_ok(kind, us, false);
                if let Some(k) = g.kinds.get_mut(kind) {
                    k.ok += n.saturating_sub(1);
                }
                return Ok(());
            }
            Err(e) if e.is_retryable() => rec.lock().record_retry(kind),
            Err(e) => return Err(e),
        }
    }
    rec.lock().record_failed(kind);
    Ok(())
}

/// A client's table and its position.
pub struct ClientState {
    pub client: usize,
    pub t: ClientTables,
    /// Next auto-increment id.
    pub next_pk: u64,
    /// Oldest id still in the table.
    pub oldest_pk: u64,
}

impl ClientState {
    /// Open (creating if needed) the client's tables and find where the ids stand.
    pub fn open(d: &dyn Driver, client: usize) -> DriverResult<ClientState> {
        let t = ClientTables::open(d, client, true)?;
        let mut txn = d.begin()?;
        let first = txn.scan(t.base, Bound::Unbounded, Bound::Unbounded, false, 1)?;
        let last = txn.scan(t.base, Bound::Unbounded, Bound::Unbounded, true, 1)?;
        txn.commit()?;
        let oldest_pk = first.first().map(|r| pk_of(&r.0)).transpose()?.unwrap_or(1);
        let next_pk = last
            .first()
            .map(|r| pk_of(&r.0))
            .transpose()?
            .map_or(1, |p| p + 1);
        Ok(ClientState {
            client,
            t,
            next_pk,
            oldest_pk,
        })
    }

    /// True when the client's table holds no row: nothing was loaded into it, or every row
    /// was deleted.
    pub fn is_empty(&self) -> bool {
        self.next_pk <= self.oldest_pk
    }

    /// An insert step: `rows` rows in batches of the step's size, deleting as many of the
    /// oldest rows in the same transaction for l.i1 and l.i2. Stops early at `deadline` or
    /// `stop`. Returns the rows inserted.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_step(
        &mut self,
        d: &dyn Driver,
        step: Step,
        rows: u64,
        deadline: Instant,
        stop: &AtomicBool,
        rec: &Mutex<Recorder>,
        rng: &mut impl Rng,
    ) -> DriverResult<u64> {
        let indexed = step != Step::LoadI0;
        let delete = matches!(step, Step::InsertI1 | Step::InsertI2);
        let mut done = 0;
        while done < rows && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            let n = (step.batch() as u64).min(rows - done);
            self.insert_batch(d, n, indexed, delete, rec, rng)?;
            done += n;
        }
        Ok(done)
    }

    /// Insert `n` rows (and delete `n` oldest when `delete`) in one transaction.
    pub fn insert_batch(
        &mut self,
        d: &dyn Driver,
        n: u64,
        indexed: bool,
        delete: bool,
        rec: &Mutex<Recorder>,
        rng: &mut impl Rng,
    ) -> DriverResult<()> {
        let now = now_s();
        let batch: Vec<Purchase> = (0..n).map(|_| Purchase::random(rng, now)).collect();
        let (first, oldest, t) = (self.next_pk, self.oldest_pk, self.t);
        with_retry(d, rec, KIND_INSERT, n, &mut |txn| {
            for (i, r) in batch.iter().enumerate() {
                t.insert(txn, first + i as u64, r, indexed)?;
            }
            if delete {
                for pk in oldest..oldest + n {
                    t.delete(txn, pk)?;
                }
            }
            Ok(())
        })?;
        self.next_pk += n;
        if delete {
            self.oldest_pk += n;
        }
        Ok(())
    }

    /// l.x: add the three index entries of every row, 1000 rows per transaction, until every
    /// row has them (no time bound: indexes built part way would miss rows) or `stop`.
    pub fn build_indexes(
        &mut self,
        d: &dyn Driver,
        stop: &AtomicBool,
        rec: &Mutex<Recorder>,
    ) -> DriverResult<u64> {
        let t = self.t;
        let mut from: Option<Vec<u8>> = None;
        let mut done = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut txn = d.begin()?;
            let lower = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let rows = txn.scan(
                t.base,
                lower,
                Bound::Unbounded,
                false,
                Step::BuildIndexes.batch(),
            )?;
            txn.commit()?;
            let Some(last) = rows.last().map(|r| r.0.clone()) else {
                break;
            };
            let mut entries = Vec::with_capacity(rows.len() * 3);
            for (k, v) in &rows {
                let r = Purchase::decode(v)
                    .map_err(|e| DriverError::fatal(format!("iibench row: {e}")))?;
                entries.extend(t.index_keys(pk_of(k)?, &r));
            }
            with_retry(d, rec, KIND_INDEX, rows.len() as u64, &mut |txn| {
                entries
                    .iter()
                    .try_for_each(|(tab, k)| txn.put(*tab, k, &[]))
            })?;
            done += rows.len() as u64;
            from = Some(last);
        }
        Ok(done)
    }

    /// The background writer of the query steps: `ips` rows per second inserted and as many
    /// of the oldest deleted, in transactions of 10 rows, until `stop`.
    pub fn background_writer(
        &mut self,
        d: &dyn Driver,
        ips: u64,
        stop: &AtomicBool,
        rec: &Mutex<Recorder>,
        rng: &mut impl Rng,
    ) -> DriverResult<()> {
        let per_batch = 10u64;
        let gap = Duration::from_secs_f64(per_batch as f64 / ips.max(1) as f64);
        let mut next = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            self.insert_batch(d, per_batch, true, true, rec, rng)?;
            next += gap;
            let now = Instant::now();
            if next > now {
                std::thread::sleep((next - now).min(Duration::from_millis(200)));
            }
        }
        Ok(())
    }
}

/// qr: range queries of 10 rows, rotating over the three secondary indexes from random start
/// keys, until `stop`.
pub fn query_loop(
    d: &dyn Driver,
    t: ClientTables,
    stop: &AtomicBool,
    rec: &Mutex<Recorder>,
    rng: &mut impl Rng,
) -> DriverResult<()> {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (table, start) = match i % 3 {
            0 => (
                t.marketsegment,
                Key::new().u32(rng.gen_range(0..PRODUCTS)).build(),
            ),
            1 => (
                t.registersegment,
                Key::new().u32(rng.gen_range(0..CASHREGISTERS)).build(),
            ),
            _ => (
                t.pdc,
                Key::new().u32(rng.gen_range(0..PRICE_MAX_CENTS)).build(),
            ),
        };
        with_retry(d, rec, KIND_QUERY, 1, &mut |txn| {
            let rows = txn.scan(table, Bound::Included(&start), Bound::Unbounded, false, 10)?;
            // iibench reads the covered columns only; fetch one base row as a point lookup too.
            if let Some((k, _)) = rows.first() {
                if let Some(pk) = k.len().checked_sub(8).and_then(|at| k.get(at..)) {
                    txn.get(t.base, &pk_key(pk_of(pk)?))?;
                }
            }
            Ok(())
        })?;
        i += 1;
    }
    Ok(())
}
