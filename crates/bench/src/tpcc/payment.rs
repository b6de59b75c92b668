//! The Payment transaction (clause 2.5): add the amount to W_YTD and D_YTD under locks, find the
//! customer (by id, or 60% of the time by last name), lock it and charge it, appending to C_DATA
//! for bad credit, and insert a HISTORY row under a fresh hidden row id. Unlike tpcc-mysql it
//! also updates C_YTD_PAYMENT and C_PAYMENT_CNT, as the spec says. Lock order: warehouse,
//! district, customer, the same in every transaction that locks more than one of them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::access::{customer, customer_id, read_must, write};
use super::input::PaymentInput;
use super::schema::*;
use crate::driver::{DriverResult, DriverTxn};

/// C_DATA is at most 500 characters.
const C_DATA_MAX: usize = 500;

pub fn payment(
    txn: &mut dyn DriverTxn,
    t: &Tables,
    inp: &PaymentInput,
    now: i64,
    history_ids: &AtomicU64,
) -> DriverResult<()> {
    let amount = inp.amount_cents;
    let wkey = warehouse_key(inp.w);
    let mut wh: Warehouse = read_must(txn, t.warehouse, &wkey, true, "warehouse")?;
    wh.w_ytd += amount;
    write(txn, t.warehouse, &wkey, &wh)?;
    let dkey = district_key(inp.w, inp.d);
    let mut dist: District = read_must(txn, t.district, &dkey, true, "district")?;
    dist.d_ytd += amount;
    write(txn, t.district, &dkey, &dist)?;

    let c_id = customer_id(txn, t.customer_idx_name, inp.c_w, inp.c_d, &inp.customer)?;
    let mut c = customer(txn, t.customer, inp.c_w, inp.c_d, c_id, true)?;
    c.c_balance -= amount;
    c.c_ytd_payment += amount;
    c.c_payment_cnt += 1;
    if c.c_credit == "BC" {
        let mut data = format!(
            "{c_id} {} {} {} {} {}.{:02} | ",
            inp.c_d,
            inp.c_w,
            inp.d,
            inp.w,
            amount / 100,
            amount % 100
        );
        data.push_str(&c.c_data);
        data.truncate(C_DATA_MAX);
        c.c_data = data;
    }
    write(txn, t.customer, &customer_key(inp.c_w, inp.c_d, c_id), &c)?;

    let h = History {
        h_c_id: c_id,
        h_c_d_id: inp.c_d,
        h_c_w_id: inp.c_w,
        h_d_id: inp.d,
        h_w_id: inp.w,
        h_date: now,
        h_amount: amount,
        h_data: format!("{}    {}", wh.w_name, dist.d_name),
    };
    let row_id = history_ids.fetch_add(1, Ordering::Relaxed);
    write(txn, t.history, &history_key(row_id), &h)
}
