//! The Delivery transaction (clause 2.7), run inline as tpcc-mysql does: for each of the ten
//! districts take the oldest NEW_ORDERS row (skip the district when there is none), lock and
//! delete it, set the order's carrier, stamp its lines' delivery date while summing OL_AMOUNT,
//! and credit the customer's balance and delivery count. All ten districts commit together.
//!
//! The oldest row is found with a non-locking scan and then locked; when a concurrent Delivery
//! took it first, the locking read sees it gone and the district is skipped.

use super::access::{customer, read_must, write};
use super::input::DeliveryInput;
use super::scale::DISTRICTS;
use super::schema::*;
use crate::codec::{Key, KeyReader, RowCodec};
use crate::driver::{scan_prefix, DriverError, DriverResult, DriverTxn};

/// Returns how many districts had an order to deliver.
pub fn delivery(
    txn: &mut dyn DriverTxn,
    t: &Tables,
    inp: &DeliveryInput,
    now: i64,
) -> DriverResult<u32> {
    let w = inp.w;
    let mut delivered = 0;
    for d in 1..=DISTRICTS {
        let prefix = Key::new().u32(w).u8(d).build();
        let oldest = scan_prefix(txn, t.new_orders, &prefix, false, 1)?;
        let Some((nokey, _)) = oldest.into_iter().next() else {
            continue;
        };
        if txn.get_for_update(t.new_orders, &nokey)?.is_none() {
            continue;
        }
        let o_id = nokey
            .get(prefix.len()..)
            .map(KeyReader::new)
            .ok_or_else(|| DriverError::fatal("short new_orders key"))
            .and_then(|mut r| r.u32().map_err(|e| DriverError::fatal(e.to_string())))?;
        txn.delete(t.new_orders, &nokey)?;
        let okey = order_key(w, d, o_id);
        let mut ord: Order = read_must(txn, t.orders, &okey, true, "order")?;
        ord.o_carrier_id = inp.carrier;
        write(txn, t.orders, &okey, &ord)?;
        let mut total = 0i64;
        for (k, v) in scan_prefix(txn, t.order_line, &okey, false, 64)? {
            let mut ol = OrderLine::decode(&v).map_err(|e| DriverError::fatal(e.to_string()))?;
            ol.ol_delivery_d = now;
            total += ol.ol_amount;
            write(txn, t.order_line, &k, &ol)?;
        }
        let mut c = customer(txn, t.customer, w, d, ord.o_c_id, true)?;
        c.c_balance += total;
        c.c_delivery_cnt += 1;
        write(txn, t.customer, &customer_key(w, d, ord.o_c_id), &c)?;
        delivered += 1;
    }
    Ok(delivered)
}
