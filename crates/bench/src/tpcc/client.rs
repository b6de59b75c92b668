//! One TPC-C client (tpcc-mysql's "connection"): deal a transaction kind from the deck, draw its
//! input, run it, and on a deadlock or lock-wait timeout roll back and run the same input again,
//! counting the retry. Latency runs from the first attempt to the successful commit. After a
//! committed New-Order the client raises the district's last acknowledged order id, which the
//! consistency check later compares with D_NEXT_O_ID (durability of acknowledged commits).
//! Keying and think times are zero, as in tpcc-mysql by default.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::delivery::delivery;
use super::input::{Deck, InputGen, Mix, TxnKind};
use super::new_order::{new_order, NewOrderResult};
use super::order_status::order_status;
use super::payment::payment;
use super::random::rng_for;
use super::scale::{Scale, DISTRICTS};
use super::schema::Tables;
use super::stock_level::stock_level;
use crate::codec::KeyReader;
use crate::driver::{Driver, DriverError, DriverResult, DriverTxn};
use crate::recorder::Recorder;

/// Attempts of one input before it is counted as failed.
pub const MAX_ATTEMPTS: u32 = 100;

/// The highest acknowledged O_ID per district, as `[w, d, o_id]` triples when saved.
pub struct AckedOrders {
    warehouses: u32,
    ids: Vec<AtomicU32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct AckedFile {
    pub acked: Vec<[u32; 3]>,
}

impl AckedOrders {
    pub fn new(warehouses: u32) -> Self {
        let n = warehouses as usize * usize::from(DISTRICTS);
        AckedOrders {
            warehouses,
            ids: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn slot(&self, w: u32, d: u8) -> Option<&AtomicU32> {
        if w == 0 || w > self.warehouses || d == 0 || d > DISTRICTS {
            return None;
        }
        self.ids
            .get((w as usize - 1) * usize::from(DISTRICTS) + usize::from(d) - 1)
    }

    pub fn ack(&self, w: u32, d: u8, o_id: u32) {
        if let Some(s) = self.slot(w, d) {
            s.fetch_max(o_id, Ordering::Relaxed);
        }
    }

    pub fn get(&self, w: u32, d: u8) -> u32 {
        self.slot(w, d).map_or(0, |s| s.load(Ordering::Relaxed))
    }

    pub fn to_file(&self) -> AckedFile {
        let mut acked = Vec::new();
        for w in 1..=self.warehouses {
            for d in 1..=DISTRICTS {
                let o = self.get(w, d);
                if o > 0 {
                    acked.push([w, u32::from(d), o]);
                }
            }
        }
        AckedFile { acked }
    }
}

/// State shared by all clients of a run.
pub struct Shared<'a> {
    pub driver: &'a dyn Driver,
    pub tables: Tables,
    pub gen: InputGen,
    pub mix: Mix,
    pub history_ids: AtomicU64,
    pub acked: AckedOrders,
    pub stop: AtomicBool,
}

impl<'a> Shared<'a> {
    pub fn new(
        driver: &'a dyn Driver,
        tables: Tables,
        gen: InputGen,
        mix: Mix,
    ) -> DriverResult<Self> {
        let next_history = next_history_id(driver, &tables)?;
        let acked = AckedOrders::new(gen.scale.warehouses);
        Ok(Shared {
            driver,
            tables,
            gen,
            mix,
            history_ids: AtomicU64::new(next_history),
            acked,
            stop: AtomicBool::new(false),
        })
    }

    pub fn scale(&self) -> Scale {
        self.gen.scale
    }
}

/// One past the highest hidden HISTORY row id.
fn next_history_id(d: &dyn Driver, t: &Tables) -> DriverResult<u64> {
    let mut txn = d.begin()?;
    let last = txn.scan(
        t.history,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        true,
        1,
    )?;
    txn.commit()?;
    match last.first() {
        None => Ok(1),
        Some((k, _)) => KeyReader::new(k)
            .u64()
            .map(|id| id + 1)
            .map_err(|e| DriverError::fatal(format!("history key: {e}"))),
    }
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The client loop; returns when `shared.stop` is set or on a fatal error.
pub fn run_client(
    shared: &Shared<'_>,
    rec: &Mutex<Recorder>,
    seed: u64,
    id: u64,
) -> DriverResult<()> {
    let mut rng = rng_for(seed, 1000 + id);
    let mut deck = Deck::new(shared.mix);
    while !shared.stop.load(Ordering::Relaxed) {
        let kind = deck.deal(&mut rng);
        run_one(shared, kind, &mut rng, rec)?;
    }
    Ok(())
}

/// What a transaction body asks the caller to do.
enum Ending {
    Commit(Option<(u32, u8, u32)>),
    Rollback,
}

/// Run one transaction of `kind` with retries, recording the outcome.
pub fn run_one(
    shared: &Shared<'_>,
    kind: TxnKind,
    rng: &mut impl Rng,
    rec: &Mutex<Recorder>,
) -> DriverResult<()> {
    let g = &shared.gen;
    let t = &shared.tables;
    let input = match kind {
        TxnKind::NewOrder => Input::NewOrder(g.new_order(rng)),
        TxnKind::Payment => Input::Payment(g.payment(rng)),
        TxnKind::OrderStatus => Input::OrderStatus(g.order_status(rng)),
        TxnKind::Delivery => Input::Delivery(g.delivery(rng)),
        TxnKind::StockLevel => Input::StockLevel(g.stock_level(rng)),
    };
    let started = Instant::now();
    for _ in 0..MAX_ATTEMPTS {
        let mut txn = shared.driver.begin()?;
        let body = execute(shared, t, &input, txn.as_mut());
        let result = match body {
            Ok(Ending::Commit(acked)) => txn.commit().map(|()| (acked, false)),
            Ok(Ending::Rollback) => {
                txn.rollback();
                Ok((None, true))
            }
            Err(e) => {
                txn.rollback();
                Err(e)
            }
        };
        match result {
            Ok((acked, rolled_back)) => {
                if let Some((w, d, o)) = acked {
                    shared.acked.ack(w, d, o);
                }
                let us = started.elapsed().as_micros() as u64;
                rec.lock().record_ok(kind.index(), us, rolled_back);
                return Ok(());
            }
            Err(e) if e.is_retryable() => rec.lock().record_retry(kind.index()),
            Err(e) => return Err(e),
        }
    }
    rec.lock().record_failed(kind.index());
    Ok(())
}

enum Input {
    NewOrder(super::input::NewOrderInput),
    Payment(super::input::PaymentInput),
    OrderStatus(super::input::OrderStatusInput),
    Delivery(super::input::DeliveryInput),
    StockLevel(super::input::StockLevelInput),
}

fn execute(
    shared: &Shared<'_>,
    t: &Tables,
    input: &Input,
    txn: &mut dyn DriverTxn,
) -> DriverResult<Ending> {
    let now = now_s();
    Ok(match input {
        Input::NewOrder(i) => match new_order(txn, t, i, now)? {
            NewOrderResult::Entered(o) => Ending::Commit(Some((i.w, i.d, o))),
            NewOrderResult::Rollback => Ending::Rollback,
        },
        Input::Payment(i) => {
            payment(txn, t, i, now, &shared.history_ids)?;
            Ending::Commit(None)
        }
        Input::OrderStatus(i) => {
            order_status(txn, t, i)?;
            Ending::Commit(None)
        }
        Input::Delivery(i) => {
            delivery(txn, t, i, now)?;
            Ending::Commit(None)
        }
        Input::StockLevel(i) => {
            stock_level(txn, t, i)?;
            Ending::Commit(None)
        }
    })
}
