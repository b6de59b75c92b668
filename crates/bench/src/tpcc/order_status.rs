//! The Order-Status transaction (clause 2.6), read-only and non-locking: find the customer,
//! its most recent order through idx_orders (a reverse scan limited to one row), and that
//! order's lines. Returns the number of lines seen so tests can tell it found something.

use super::access::{customer, customer_id, read_must};
use super::input::OrderStatusInput;
use super::schema::*;
use crate::codec::{Key, KeyReader};
use crate::driver::{scan_prefix, DriverError, DriverResult, DriverTxn};

pub fn order_status(
    txn: &mut dyn DriverTxn,
    t: &Tables,
    inp: &OrderStatusInput,
) -> DriverResult<usize> {
    let (w, d) = (inp.w, inp.d);
    let c_id = customer_id(txn, t.customer_idx_name, w, d, &inp.customer)?;
    let _c = customer(txn, t.customer, w, d, c_id, false)?;
    let prefix = Key::new().u32(w).u8(d).u32(c_id).build();
    let last = scan_prefix(txn, t.orders_idx_customer, &prefix, true, 1)?;
    let Some((k, _)) = last.first() else {
        return Ok(0);
    };
    let o_id = k
        .get(prefix.len()..)
        .map(KeyReader::new)
        .ok_or_else(|| DriverError::fatal("short orders index key"))
        .and_then(|mut r| r.u32().map_err(|e| DriverError::fatal(e.to_string())))?;
    let _o: Order = read_must(txn, t.orders, &order_key(w, d, o_id), false, "order")?;
    let lines = scan_prefix(txn, t.order_line, &order_key(w, d, o_id), false, 20)?;
    Ok(lines.len())
}
