//! The Stock-Level transaction (clause 2.8), read-only and non-locking as tpcc-mysql runs it:
//! the distinct items of the district's last 20 orders, and how many of them have
//! S_QUANTITY below the threshold.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::access::{read, read_must};
use super::input::StockLevelInput;
use super::schema::*;
use crate::codec::RowCodec;
use crate::driver::{DriverError, DriverResult, DriverTxn};

pub fn stock_level(
    txn: &mut dyn DriverTxn,
    t: &Tables,
    inp: &StockLevelInput,
) -> DriverResult<u32> {
    let (w, d) = (inp.w, inp.d);
    let dist: District = read_must(txn, t.district, &district_key(w, d), false, "district")?;
    let next = dist.d_next_o_id;
    let lo = order_key(w, d, next.saturating_sub(20));
    let hi = order_key(w, d, next);
    let lines = txn.scan(
        t.order_line,
        Bound::Included(&lo),
        Bound::Excluded(&hi),
        false,
        20 * 16,
    )?;
    let mut items = BTreeSet::new();
    for (_, v) in lines {
        let ol = OrderLine::decode(&v).map_err(|e| DriverError::fatal(e.to_string()))?;
        items.insert(ol.ol_i_id);
    }
    let mut low = 0;
    for i in items {
        if let Some(s) = read::<Stock>(txn, t.stock, &stock_key(w, i), false)? {
            if s.s_quantity < inp.threshold {
                low += 1;
            }
        }
    }
    Ok(low)
}
