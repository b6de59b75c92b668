//! The TPC-C loader (clause 4.3.3.1) as tpcc-mysql's tpcc_load fills the tables: ITEM once,
//! then per warehouse its STOCK, DISTRICTs, CUSTOMERs with one HISTORY row each, and ORDERS
//! with their ORDER_LINEs, the last 30% undelivered and listed in NEW_ORDERS. Secondary index
//! rows are written next to their base rows. Warehouses are spread over `threads` loaders;
//! each commits every `BATCH_ROWS` writes so no transaction grows large.
//!
//! Initial YTD amounts are derived from the scale so the consistency conditions hold at any
//! size: W_YTD = sum(D_YTD) = sum(H_AMOUNT), with H_AMOUNT = C_YTD_PAYMENT = 10.00.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::seq::SliceRandom;
use rand::Rng;

use super::random::{
    astring, data_with_original, last_name, nstring, nurand, rng_for, zip, NuRandC,
};
use super::scale::{Meta, Scale, DISTRICTS};
use super::schema::*;
use crate::codec::RowCodec;
use crate::driver::{Driver, DriverResult, DriverTxn, TableId};
use crate::error::BenchResult;

/// Writes per loader transaction.
/// 250 rows of at most ~300 bytes: a COMMIT well under the engine's limit of half a small
/// redo log (2 MiB in `evenkeel torture`) for a transaction's estimated redo.
const BATCH_ROWS: usize = 250;

/// Initial H_AMOUNT, C_YTD_PAYMENT and -C_BALANCE in cents.
pub const INITIAL_PAYMENT_CENTS: i64 = 1000;

/// A transaction that commits itself every `BATCH_ROWS` writes.
struct Batch<'a> {
    d: &'a dyn Driver,
    txn: Option<Box<dyn DriverTxn>>,
    n: usize,
}

impl<'a> Batch<'a> {
    fn new(d: &'a dyn Driver) -> Self {
        Batch { d, txn: None, n: 0 }
    }
    fn put(&mut self, t: TableId, k: &[u8], v: &[u8]) -> DriverResult<()> {
        if self.txn.is_none() {
            self.txn = Some(self.d.begin()?);
        }
        if let Some(txn) = self.txn.as_mut() {
            txn.put(t, k, v)?;
        }
        self.n += 1;
        if self.n >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> DriverResult<()> {
        self.n = 0;
        match self.txn.take() {
            Some(t) => t.commit(),
            None => Ok(()),
        }
    }
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Load a fresh database of `scale` with `threads` loader threads; returns the stored meta.
/// `progress` is called with the number of warehouses finished so far.
pub fn load(
    d: &dyn Driver,
    scale: Scale,
    threads: usize,
    seed: u64,
    progress: &(dyn Fn(u32) + Sync),
) -> BenchResult<Meta> {
    scale.validate()?;
    let started = Instant::now();
    let t = Tables::open(d, true)?;
    let nurand = NuRandC::generate(&mut rng_for(seed, u64::MAX));
    load_items(d, &t, scale, seed)?;
    let next = AtomicU32::new(1);
    let done = AtomicU32::new(0);
    let threads = threads.clamp(1, scale.warehouses as usize);
    std::thread::scope(|s| -> BenchResult<()> {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> DriverResult<()> {
                    loop {
                        let w = next.fetch_add(1, Ordering::Relaxed);
                        if w > scale.warehouses {
                            return Ok(());
                        }
                        load_warehouse(d, &t, scale, nurand, w, seed)?;
                        progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        Ok(())
    })?;
    let meta = Meta {
        scale,
        nurand,
        fresh: true,
        load_seconds: started.elapsed().as_secs_f64(),
    };
    meta.write(d)?;
    Ok(meta)
}

fn load_items(d: &dyn Driver, t: &Tables, scale: Scale, seed: u64) -> DriverResult<()> {
    let mut rng = rng_for(seed, 0);
    let mut b = Batch::new(d);
    for i in 1..=scale.items {
        let item = Item {
            i_im_id: rng.gen_range(1..=10_000),
            i_name: astring(&mut rng, 14, 24),
            i_price: rng.gen_range(100..=10_000),
            i_data: data_with_original(&mut rng),
        };
        b.put(t.item, &item_key(i), &item.encode())?;
    }
    b.flush()
}

fn load_warehouse(
    d: &dyn Driver,
    t: &Tables,
    scale: Scale,
    nurand: NuRandC,
    w: u32,
    seed: u64,
) -> DriverResult<()> {
    let mut rng = rng_for(seed, u64::from(w));
    let mut b = Batch::new(d);
    let per_district_ytd = i64::from(scale.customers) * INITIAL_PAYMENT_CENTS;
    let wh = Warehouse {
        w_name: astring(&mut rng, 6, 10),
        w_street_1: astring(&mut rng, 10, 20),
        w_street_2: astring(&mut rng, 10, 20),
        w_city: astring(&mut rng, 10, 20),
        w_state: astring(&mut rng, 2, 2),
        w_zip: zip(&mut rng),
        w_tax: rng.gen_range(0..=2000),
        w_ytd: per_district_ytd * i64::from(DISTRICTS),
    };
    b.put(t.warehouse, &warehouse_key(w), &wh.encode())?;
    for i in 1..=scale.items {
        let s = Stock {
            s_quantity: rng.gen_range(10..=100),
            s_dist_01: astring(&mut rng, 24, 24),
            s_dist_02: astring(&mut rng, 24, 24),
            s_dist_03: astring(&mut rng, 24, 24),
            s_dist_04: astring(&mut rng, 24, 24),
            s_dist_05: astring(&mut rng, 24, 24),
            s_dist_06: astring(&mut rng, 24, 24),
            s_dist_07: astring(&mut rng, 24, 24),
            s_dist_08: astring(&mut rng, 24, 24),
            s_dist_09: astring(&mut rng, 24, 24),
            s_dist_10: astring(&mut rng, 24, 24),
            s_ytd: 0,
            s_order_cnt: 0,
            s_remote_cnt: 0,
            s_data: data_with_original(&mut rng),
        };
        b.put(t.stock, &stock_key(w, i), &s.encode())?;
        b.put(t.stock_idx_item, &stock_item_key(i, w), &[])?;
    }
    for dn in 1..=DISTRICTS {
        let dist = District {
            d_name: astring(&mut rng, 6, 10),
            d_street_1: astring(&mut rng, 10, 20),
            d_street_2: astring(&mut rng, 10, 20),
            d_city: astring(&mut rng, 10, 20),
            d_state: astring(&mut rng, 2, 2),
            d_zip: zip(&mut rng),
            d_tax: rng.gen_range(0..=2000),
            d_ytd: per_district_ytd,
            d_next_o_id: scale.customers + 1,
        };
        b.put(t.district, &district_key(w, dn), &dist.encode())?;
        load_customers(&mut b, t, scale, nurand, w, dn, &mut rng)?;
        load_orders(&mut b, t, scale, w, dn, &mut rng)?;
    }
    b.flush()
}

fn load_customers(
    b: &mut Batch<'_>,
    t: &Tables,
    scale: Scale,
    nu: NuRandC,
    w: u32,
    dn: u8,
    rng: &mut impl Rng,
) -> DriverResult<()> {
    let now = now_s();
    let names = scale.last_name_max() + 1;
    for c in 1..=scale.customers {
        let last = if c <= names {
            last_name(c - 1)
        } else {
            last_name(nurand(rng, 255, nu.c_last_load, 0, scale.last_name_max()))
        };
        let cust = Customer {
            c_first: astring(rng, 8, 16),
            c_middle: "OE".into(),
            c_last: last,
            c_street_1: astring(rng, 10, 20),
            c_street_2: astring(rng, 10, 20),
            c_city: astring(rng, 10, 20),
            c_state: astring(rng, 2, 2),
            c_zip: zip(rng),
            c_phone: nstring(rng, 16, 16),
            c_since: now,
            c_credit: if rng.gen_bool(0.1) { "BC" } else { "GC" }.into(),
            c_credit_lim: 5_000_000,
            c_discount: rng.gen_range(0..=5000),
            c_balance: -INITIAL_PAYMENT_CENTS,
            c_ytd_payment: INITIAL_PAYMENT_CENTS,
            c_payment_cnt: 1,
            c_delivery_cnt: 0,
            c_data: astring(rng, 300, 500),
        };
        b.put(t.customer, &customer_key(w, dn, c), &cust.encode())?;
        let ik = customer_name_key(w, dn, &cust.c_last, &cust.c_first, c);
        b.put(t.customer_idx_name, &ik, &[])?;
        let h = History {
            h_c_id: c,
            h_c_d_id: dn,
            h_c_w_id: w,
            h_d_id: dn,
            h_w_id: w,
            h_date: now,
            h_amount: INITIAL_PAYMENT_CENTS,
            h_data: astring(rng, 12, 24),
        };
        let row_id = (u64::from(w - 1) * u64::from(DISTRICTS) + u64::from(dn - 1))
            * u64::from(scale.customers)
            + u64::from(c);
        b.put(t.history, &history_key(row_id), &h.encode())?;
    }
    Ok(())
}

fn load_orders(
    b: &mut Batch<'_>,
    t: &Tables,
    scale: Scale,
    w: u32,
    dn: u8,
    rng: &mut impl Rng,
) -> DriverResult<()> {
    let now = now_s();
    let mut perm: Vec<u32> = (1..=scale.customers).collect();
    perm.shuffle(rng);
    for (o, &c) in (1..=scale.customers).zip(perm.iter()) {
        let delivered = o <= scale.delivered();
        let ord = Order {
            o_c_id: c,
            o_entry_d: now,
            o_carrier_id: if delivered { rng.gen_range(1..=10) } else { 0 },
            o_ol_cnt: rng.gen_range(5..=15),
            o_all_local: 1,
        };
        b.put(t.orders, &order_key(w, dn, o), &ord.encode())?;
        b.put(t.orders_idx_customer, &order_customer_key(w, dn, c, o), &[])?;
        if !delivered {
            b.put(t.new_orders, &order_key(w, dn, o), &[])?;
        }
        for n in 1..=ord.o_ol_cnt {
            let line = OrderLine {
                ol_i_id: rng.gen_range(1..=scale.items),
                ol_supply_w_id: w,
                ol_delivery_d: if delivered { now } else { 0 },
                ol_quantity: 5,
                ol_amount: if delivered {
                    0
                } else {
                    rng.gen_range(1..=999_999)
                },
                ol_dist_info: astring(rng, 24, 24),
            };
            b.put(t.order_line, &order_line_key(w, dn, o, n), &line.encode())?;
            let sk = order_line_supply_key(w, line.ol_i_id, w, dn, o, n);
            b.put(t.order_line_idx_supply, &sk, &[])?;
        }
    }
    Ok(())
}
