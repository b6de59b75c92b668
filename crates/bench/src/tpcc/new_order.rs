//! The New-Order transaction (clause 2.4) in tpcc-mysql's statement order: read warehouse tax
//! and customer, lock and bump D_NEXT_O_ID, insert ORDERS and NEW_ORDERS, then per line read the
//! ITEM (an unused id rolls the whole transaction back), lock and update the STOCK row, and
//! insert the ORDER_LINE. Stock rows are locked in (supply warehouse, item) order to make
//! deadlocks between New-Orders rarer; line numbers keep the input order.
//! OL_AMOUNT = quantity * price (clause 2.4.2.2), in cents.

use super::access::{customer, read, read_must, write};
use super::input::NewOrderInput;
use super::schema::*;
use crate::driver::{DriverResult, DriverTxn};

/// What a New-Order did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewOrderResult {
    /// The order was entered with this O_ID (commit still pending).
    Entered(u32),
    /// An item was not found: the caller must roll back.
    Rollback,
}

pub fn new_order(
    txn: &mut dyn DriverTxn,
    t: &Tables,
    inp: &NewOrderInput,
    now: i64,
) -> DriverResult<NewOrderResult> {
    let (w, d) = (inp.w, inp.d);
    let _wh: Warehouse = read_must(txn, t.warehouse, &warehouse_key(w), false, "warehouse")?;
    let _cust = customer(txn, t.customer, w, d, inp.c, false)?;
    let dkey = district_key(w, d);
    let mut dist: District = read_must(txn, t.district, &dkey, true, "district")?;
    let o_id = dist.d_next_o_id;
    dist.d_next_o_id += 1;
    write(txn, t.district, &dkey, &dist)?;

    let ord = Order {
        o_c_id: inp.c,
        o_entry_d: now,
        o_carrier_id: 0,
        o_ol_cnt: inp.lines.len() as u8,
        o_all_local: u8::from(inp.all_local()),
    };
    write(txn, t.orders, &order_key(w, d, o_id), &ord)?;
    txn.put(
        t.orders_idx_customer,
        &order_customer_key(w, d, inp.c, o_id),
        &[],
    )?;
    txn.put(t.new_orders, &order_key(w, d, o_id), &[])?;

    let mut order: Vec<usize> = (0..inp.lines.len()).collect();
    order.sort_by_key(|&i| (inp.lines[i].supply_w, inp.lines[i].i_id));
    // Items are read first in input order, so the unused item of a rollback is found the way
    // tpcc-mysql finds it: on the last line.
    let mut prices = vec![0i64; inp.lines.len()];
    for (i, line) in inp.lines.iter().enumerate() {
        match read::<Item>(txn, t.item, &item_key(line.i_id), false)? {
            Some(item) => prices[i] = item.i_price,
            None => return Ok(NewOrderResult::Rollback),
        }
    }
    for i in order {
        let line = inp.lines[i];
        let skey = stock_key(line.supply_w, line.i_id);
        let mut s: Stock = read_must(txn, t.stock, &skey, true, "stock")?;
        let q = u32::from(line.quantity);
        s.s_quantity = if s.s_quantity >= q + 10 {
            s.s_quantity - q
        } else {
            s.s_quantity + 91 - q
        };
        s.s_ytd += q;
        s.s_order_cnt += 1;
        if line.supply_w != w {
            s.s_remote_cnt += 1;
        }
        write(txn, t.stock, &skey, &s)?;
        let n = i as u8 + 1;
        let ol = OrderLine {
            ol_i_id: line.i_id,
            ol_supply_w_id: line.supply_w,
            ol_delivery_d: 0,
            ol_quantity: line.quantity,
            ol_amount: i64::from(line.quantity) * prices[i],
            ol_dist_info: s.dist(d).to_string(),
        };
        write(txn, t.order_line, &order_line_key(w, d, o_id, n), &ol)?;
        let sk = order_line_supply_key(line.supply_w, line.i_id, w, d, o_id, n);
        txn.put(t.order_line_idx_supply, &sk, &[])?;
    }
    Ok(NewOrderResult::Entered(o_id))
}
