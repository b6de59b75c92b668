//! tpcc: TPC-C (tpcc-mysql's 10:10:1:1:1 mix, the bench crate's transactions) under kill -9.
//!
//! The parent loads the warehouses once, before the first cycle (a load is not a transaction
//! anyone acknowledges, so it is not killed). Each child runs `threads` clients over the loaded
//! data. Ack lines, written after `commit()` returned: `N w d o` for a New-Order that entered
//! order `o`, `P id w d amount` for a Payment that inserted HISTORY row `id`.
//!
//! After a kill: every acknowledged order is in ORDERS, every acknowledged payment's HISTORY row
//! is there with its amount, warehouse and district, D_NEXT_O_ID - 1 is at least the highest
//! order ever acknowledged in the district (across all cycles), and the consistency conditions
//! of clause 3.3.2 (1-10 and 12) hold — the same check as `evenkeel check --tpcc`.

use super::acklog::{append, numbers};
use super::workload::{run_threads, transact, ChildCtx};
use super::{Broken, Model, Verified};
use crate::failure::Failure;
use evenkeel::{Database, Options};
use evenkeel_bench::codec::RowCodec;
use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
use evenkeel_bench::driver::Driver;
use evenkeel_bench::tpcc::check::check;
use evenkeel_bench::tpcc::client::{AckedFile, Shared};
use evenkeel_bench::tpcc::delivery::delivery;
use evenkeel_bench::tpcc::input::{Deck, InputGen, Mix, TxnKind};
use evenkeel_bench::tpcc::load::load;
use evenkeel_bench::tpcc::new_order::{new_order, NewOrderResult};
use evenkeel_bench::tpcc::order_status::order_status;
use evenkeel_bench::tpcc::payment::payment;
use evenkeel_bench::tpcc::random::rng_for;
use evenkeel_bench::tpcc::scale::{Meta, Scale};
use evenkeel_bench::tpcc::schema::{history_key, order_key, History, Tables};
use evenkeel_bench::tpcc::stock_level::stock_level;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub fn child(ctx: &ChildCtx<'_>, ready: &dyn Fn() -> Result<(), String>) -> Result<(), String> {
    let d: &dyn Driver = ctx.driver;
    let meta = Meta::read(d)
        .map_err(|e| e.to_string())?
        .ok_or("the database holds no TPC-C data (tpcc_meta is missing)")?;
    let t = Tables::open(d, false).map_err(|e| e.to_string())?;
    let gen = InputGen {
        scale: meta.scale,
        c: meta.nurand,
    };
    let shared = Shared::new(d, t, gen, Mix::TpccMysql).map_err(|e| e.to_string())?;
    ready()?;
    run_threads(ctx.threads, &|i| {
        let mut rng = rng_for(ctx.seed, 1000 + i as u64);
        let mut deck = Deck::new(shared.mix);
        let (g, t) = (&shared.gen, &shared.tables);
        loop {
            ctx.exit_if_orphaned();
            let now = now_s();
            match deck.deal(&mut rng) {
                TxnKind::NewOrder => {
                    let inp = g.new_order(&mut rng);
                    let entered = transact(d, &mut |txn| {
                        Ok(match new_order(txn, t, &inp, now)? {
                            NewOrderResult::Entered(o) => Some(o),
                            NewOrderResult::Rollback => None,
                        })
                    })?;
                    if let Some(o) = entered {
                        ctx.ack(&format!("N {} {} {o}", inp.w, inp.d))?;
                    }
                }
                TxnKind::Payment => {
                    let inp = g.payment(&mut rng);
                    let id = shared.history_ids.fetch_add(1, Ordering::Relaxed);
                    transact(d, &mut |txn| {
                        // Every attempt inserts under the same HISTORY id, the one acked.
                        payment(txn, t, &inp, now, &AtomicU64::new(id))?;
                        Ok(Some(()))
                    })?;
                    let amount = inp.amount_cents;
                    ctx.ack(&format!("P {id} {} {} {amount}", inp.w, inp.d))?;
                }
                TxnKind::OrderStatus => {
                    let inp = g.order_status(&mut rng);
                    transact(d, &mut |txn| order_status(txn, t, &inp).map(|_| Some(())))?;
                }
                TxnKind::Delivery => {
                    let inp = g.delivery(&mut rng);
                    transact(d, &mut |txn| delivery(txn, t, &inp, now).map(|_| Some(())))?;
                }
                TxnKind::StockLevel => {
                    let inp = g.stock_level(&mut rng);
                    transact(d, &mut |txn| stock_level(txn, t, &inp).map(|_| Some(())))?;
                }
            }
        }
    })
}

pub struct TpccModel {
    scale: Scale,
    load_threads: usize,
    seed: u64,
    /// The highest order ever acknowledged per (warehouse, district).
    max_acked: BTreeMap<(u32, u8), u32>,
}

impl TpccModel {
    pub fn new(scale: Scale, load_threads: usize, seed: u64) -> TpccModel {
        TpccModel {
            scale,
            load_threads,
            seed,
            max_acked: BTreeMap::new(),
        }
    }
}

/// An acknowledged New-Order or Payment.
enum Ack {
    NewOrder { w: u32, d: u8, o: u32 },
    Payment { id: u64, w: u32, d: u8, amount: i64 },
}

fn parse_log(lines: &[String]) -> Result<Vec<Ack>, String> {
    let mut acks = Vec::new();
    for line in lines {
        let bad = || format!("bad ack line {line:?}");
        let (tag, f) = numbers(line).ok_or_else(bad)?;
        let small = |v: u64| u32::try_from(v).map_err(|_| bad());
        let district = |v: u64| u8::try_from(v).map_err(|_| bad());
        match (tag, f.as_slice()) {
            ("N", &[w, d, o]) => acks.push(Ack::NewOrder {
                w: small(w)?,
                d: district(d)?,
                o: small(o)?,
            }),
            ("P", &[id, w, d, amount]) => acks.push(Ack::Payment {
                id,
                w: small(w)?,
                d: district(d)?,
                amount: i64::try_from(amount).map_err(|_| bad())?,
            }),
            ("R", []) => {}
            _ => return Err(bad()),
        }
    }
    Ok(acks)
}

/// Problems with acknowledged transactions of this cycle; returns how many are lost.
fn check_acks(d: &EvenkeelDriver, acks: &[Ack], problems: &mut Vec<String>) -> Result<u64, String> {
    let t = Tables::open(d, false).map_err(|e| e.to_string())?;
    let mut txn = d.begin().map_err(|e| e.to_string())?;
    let mut lost = 0;
    for a in acks {
        match *a {
            Ack::NewOrder { w, d, o } => {
                let row = txn
                    .get(t.orders, &order_key(w, d, o))
                    .map_err(|e| e.to_string())?;
                if row.is_none() {
                    lost += 1;
                    problems.push(format!(
                        "acknowledged New-Order lost: warehouse {w} district {d} order {o} is \
                         not in ORDERS"
                    ));
                }
            }
            Ack::Payment { id, w, d, amount } => {
                let row = txn
                    .get(t.history, &history_key(id))
                    .map_err(|e| e.to_string())?;
                let h = row.map(|v| History::decode(&v));
                let ok = matches!(&h, Some(Ok(h)) if h.h_amount == amount && h.h_w_id == w && h.h_d_id == d);
                if !ok {
                    lost += 1;
                    let found = match h {
                        None => "no row".to_string(),
                        Some(Ok(h)) => format!(
                            "amount {} warehouse {} district {}",
                            h.h_amount, h.h_w_id, h.h_d_id
                        ),
                        Some(Err(e)) => format!("an undecodable row ({e})"),
                    };
                    problems.push(format!(
                        "acknowledged Payment lost: HISTORY row {id} should hold amount {amount} \
                         for warehouse {w} district {d}; found {found}"
                    ));
                }
            }
        }
    }
    txn.commit().map_err(|e| e.to_string())?;
    Ok(lost)
}

impl Model for TpccModel {
    fn setup(&mut self, db: &Path, opts: &Options) -> Result<String, Failure> {
        let db = Database::open_or_create(db, opts.clone())
            .map_err(|e| Failure::engine(format!("opening {}", db.display()), e))?;
        let d = EvenkeelDriver::from_database(db);
        let bench = |e: evenkeel_bench::BenchError| Failure::Operation(e.to_string());
        let note = match Meta::read(&d).map_err(bench)? {
            Some(m) => format!("{} warehouses already loaded", m.scale.warehouses),
            None => {
                let mut meta =
                    load(&d, self.scale, self.load_threads, self.seed, &|_| {}).map_err(bench)?;
                meta.fresh = false;
                meta.write(&d)
                    .map_err(|e| Failure::Operation(e.to_string()))?;
                format!(
                    "loaded {} warehouse(s) ({} items, {} customers per district) in {:.1} s",
                    self.scale.warehouses,
                    self.scale.items,
                    self.scale.customers,
                    meta.load_seconds
                )
            }
        };
        d.close().map_err(|e| Failure::Operation(e.to_string()))?;
        Ok(note)
    }

    fn verify(&mut self, d: &EvenkeelDriver, lines: &[String]) -> Result<Verified, Broken> {
        let acks = parse_log(lines).map_err(Broken::harness)?;
        let mut problems = Vec::new();
        let lost = check_acks(d, &acks, &mut problems).map_err(Broken::harness)?;
        let (mut orders, mut payments) = (0u64, 0u64);
        for a in &acks {
            match *a {
                Ack::NewOrder { w, d, o } => {
                    orders += 1;
                    let m = self.max_acked.entry((w, d)).or_default();
                    *m = (*m).max(o);
                }
                Ack::Payment { .. } => payments += 1,
            }
        }
        let acked = AckedFile {
            acked: self
                .max_acked
                .iter()
                .map(|(&(w, d), &o)| [w, u32::from(d), o])
                .collect(),
        };
        let report = check(d, Some(&acked)).map_err(|e| Broken::harness(e.to_string()))?;
        let lost_max = report.failures.iter().filter(|f| f.condition == 0).count() as u64;
        problems.extend(report.failures.iter().map(|f| f.to_string()));
        if !problems.is_empty() {
            // A lost order of this cycle shows in both counts; earlier cycles' only in the second.
            return Err(Broken {
                lost_acked: lost.max(lost_max),
                problems,
            });
        }
        Ok(Verified {
            acked: orders + payments,
            in_flight: 0,
            in_flight_applied: 0,
            detail: format!(
                "{orders} New-Orders + {payments} Payments acked, conditions {:?} hold",
                report.conditions_checked
            ),
        })
    }

    fn plant(&self, ack: &Path, _threads: usize) -> std::io::Result<()> {
        // An order id no district reaches in a torture run.
        append(ack, "N 1 1 4000000000\n")
    }
}
