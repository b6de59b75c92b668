//! Typed row access over a `DriverTxn`: read (plain or locking) and decode, encode and write,
//! and find a customer by id or by last name as tpcc-mysql does (all customers of that name in
//! the district ordered by first name, the one at position ceil(n/2)). A row that must exist and
//! does not, or does not decode, is a fatal error naming the table and key: it means the data
//! is inconsistent, not that the transaction should be retried.

use super::input::CustomerBy;
use super::schema::{customer_key, customer_name_prefix, Customer};
use crate::codec::{KeyReader, RowCodec};
use crate::driver::{scan_prefix, DriverError, DriverResult, DriverTxn, TableId};

/// Read and decode a row; `lock` makes it a locking read.
pub fn read<R: RowCodec>(
    txn: &mut dyn DriverTxn,
    t: TableId,
    key: &[u8],
    lock: bool,
) -> DriverResult<Option<R>> {
    let v = if lock {
        txn.get_for_update(t, key)?
    } else {
        txn.get(t, key)?
    };
    v.map(|b| {
        R::decode(&b).map_err(|e| DriverError::fatal(format!("table {t} key {key:02x?}: {e}")))
    })
    .transpose()
}

/// Read a row that must exist.
pub fn read_must<R: RowCodec>(
    txn: &mut dyn DriverTxn,
    t: TableId,
    key: &[u8],
    lock: bool,
    what: &str,
) -> DriverResult<R> {
    read(txn, t, key, lock)?.ok_or_else(|| DriverError::fatal(format!("{what} missing")))
}

pub fn write<R: RowCodec>(
    txn: &mut dyn DriverTxn,
    t: TableId,
    key: &[u8],
    row: &R,
) -> DriverResult<()> {
    txn.put(t, key, &row.encode())
}

/// Resolve a customer to its id; `by_name` is the customer_idx_name table.
pub fn customer_id(
    txn: &mut dyn DriverTxn,
    by_name: TableId,
    w: u32,
    d: u8,
    who: &CustomerBy,
) -> DriverResult<u32> {
    match who {
        CustomerBy::Id(c) => Ok(*c),
        CustomerBy::LastName(last) => {
            let prefix = customer_name_prefix(w, d, last);
            let rows = scan_prefix(txn, by_name, &prefix, false, 10_000)?;
            if rows.is_empty() {
                return Err(DriverError::fatal(format!(
                    "no customer named {last} in warehouse {w} district {d}"
                )));
            }
            let pick = &rows[rows.len().div_ceil(2) - 1].0;
            customer_id_from_index_key(pick)
        }
    }
}

/// The c_id at the end of a customer_idx_name key (w u32, d u8, last\0, first\0, c u32).
fn customer_id_from_index_key(k: &[u8]) -> DriverResult<u32> {
    let tail = k
        .len()
        .checked_sub(4)
        .and_then(|at| k.get(at..))
        .ok_or_else(|| DriverError::fatal(format!("short customer index key {k:02x?}")))?;
    KeyReader::new(tail)
        .u32()
        .map_err(|e| DriverError::fatal(e.to_string()))
}

/// Read a customer row by id.
pub fn customer(
    txn: &mut dyn DriverTxn,
    t: TableId,
    w: u32,
    d: u8,
    c: u32,
    lock: bool,
) -> DriverResult<Customer> {
    read_must(
        txn,
        t,
        &customer_key(w, d, c),
        lock,
        &format!("customer {w}/{d}/{c}"),
    )
}
