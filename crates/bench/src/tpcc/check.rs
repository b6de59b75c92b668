//! TPC-C consistency conditions (clause 3.3.2.1-3.3.2.12) over any `Driver`: 1-10 and 12
//! always, 11 only while the data is as loaded, plus one of ours: every acknowledged New-Order
//! is there (D_NEXT_O_ID - 1 >= the last acknowledged O_ID of the district, when known). Every
//! failure names its condition and the warehouse, district, customer or order. Tables are read
//! in chunks, one district at a time, so the check runs at any scale in bounded memory (the
//! HISTORY sums are the one per-customer map).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use serde::Serialize;

use super::client::AckedFile;
use super::scale::{Meta, DISTRICTS};
use super::schema::*;
use crate::codec::{Key, KeyReader, RowCodec};
use crate::driver::{
    prefix_end, scan_chunked, Driver, DriverError, DriverResult, DriverTxn, RowVisitor, TableId,
};
use crate::error::{BenchError, BenchResult};

const CHUNK: usize = 4096;
/// Failures listed before the check stops collecting.
const MAX_FAILURES: usize = 50;

/// One violated condition.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CheckFailure {
    /// Condition number of clause 3.3.2 (0 for "acknowledged New-Order missing").
    pub condition: u8,
    pub warehouse: u32,
    pub district: Option<u8>,
    pub customer: Option<u32>,
    pub order: Option<u32>,
    pub detail: String,
}

impl std::fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.condition == 0 {
            write!(
                f,
                "acknowledged New-Order missing: warehouse {}",
                self.warehouse
            )?;
        } else {
            write!(
                f,
                "condition {}: warehouse {}",
                self.condition, self.warehouse
            )?;
        }
        if let Some(d) = self.district {
            write!(f, " district {d}")?;
        }
        if let Some(c) = self.customer {
            write!(f, " customer {c}")?;
        }
        if let Some(o) = self.order {
            write!(f, " order {o}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// The result of a check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub conditions_checked: Vec<u8>,
    pub warehouses: u32,
    pub acked_checked: bool,
    pub failures: Vec<CheckFailure>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// `Err(BenchError::Inconsistent)` naming the first failure, if any.
    pub fn into_result(self) -> BenchResult<CheckReport> {
        match self.failures.first() {
            None => Ok(self),
            Some(f) => Err(BenchError::Inconsistent(format!(
                "{f} ({} failure(s) in all)",
                self.failures.len()
            ))),
        }
    }
}

struct Sums {
    by_warehouse: HashMap<u32, i64>,
    by_district: HashMap<(u32, u8), i64>,
    by_customer: HashMap<(u32, u8, u32), i64>,
}

fn decode<R: RowCodec>(v: &[u8], what: &str) -> DriverResult<R> {
    R::decode(v).map_err(|e| DriverError::fatal(format!("{what}: {e}")))
}

fn key_err(e: crate::codec::CodecError) -> DriverError {
    DriverError::fatal(format!("key: {e}"))
}

fn history_sums(txn: &mut dyn DriverTxn, t: TableId) -> DriverResult<Sums> {
    let mut s = Sums {
        by_warehouse: HashMap::new(),
        by_district: HashMap::new(),
        by_customer: HashMap::new(),
    };
    scan_chunked(
        txn,
        t,
        Bound::Unbounded,
        Bound::Unbounded,
        CHUNK,
        &mut |_, v| {
            let h: History = decode(v, "history")?;
            *s.by_warehouse.entry(h.h_w_id).or_default() += h.h_amount;
            *s.by_district.entry((h.h_w_id, h.h_d_id)).or_default() += h.h_amount;
            *s.by_customer
                .entry((h.h_c_w_id, h.h_c_d_id, h.h_c_id))
                .or_default() += h.h_amount;
            Ok(())
        },
    )?;
    Ok(s)
}

/// Walk every row of `t` whose key starts with `prefix`.
fn scan_prefix_all(
    txn: &mut dyn DriverTxn,
    t: TableId,
    prefix: &[u8],
    f: &mut RowVisitor<'_>,
) -> DriverResult<()> {
    let end = prefix_end(prefix);
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    scan_chunked(txn, t, Bound::Included(prefix), upper, CHUNK, f)
}

/// Check a loaded TPC-C database. `acked` is the recorded last acknowledged order ids, if any.
pub fn check(d: &dyn Driver, acked: Option<&AckedFile>) -> BenchResult<CheckReport> {
    let meta = Meta::read(d)?
        .ok_or_else(|| BenchError::Data("no tpcc_meta table: not a TPC-C database".into()))?;
    let acked: BTreeMap<(u32, u8), u32> = acked
        .map(|a| a.acked.iter().map(|&[w, d, o]| ((w, d as u8), o)).collect())
        .unwrap_or_default();
    let mut c = Checker {
        meta: &meta,
        t: Tables::open(d, false)?,
        failures: Vec::new(),
    };
    let mut txn = d.begin()?;
    let sums = history_sums(txn.as_mut(), c.t.history)?;
    txn.commit()?;
    for w in 1..=meta.scale.warehouses {
        let mut txn = d.begin()?;
        c.warehouse(txn.as_mut(), w, &sums, &acked)?;
        txn.commit()?;
        if c.failures.len() >= MAX_FAILURES {
            break;
        }
    }
    let mut conditions: Vec<u8> = (1..=10).chain([12]).collect();
    if meta.fresh {
        conditions.push(11);
        conditions.sort_unstable();
    }
    Ok(CheckReport {
        conditions_checked: conditions,
        warehouses: meta.scale.warehouses,
        acked_checked: !acked.is_empty(),
        failures: c.failures,
    })
}

/// One consistency check run while clients change the database ([`check_live`]).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct LiveCheck {
    /// Seconds into the run (warm-up included) when the check began.
    pub at_s: f64,
    pub seconds: f64,
    /// Rows the check read (point reads and scanned rows).
    pub rows: u64,
    pub rows_per_s: f64,
    /// Violated conditions, as sentences (empty: all held).
    pub failures: Vec<String>,
}

/// Checks conditions 1-10 and 12 of a TPC-C database that clients keep changing, every read in
/// one transaction: on an engine whose plain reads see one read view per transaction
/// (evenkeel's and InnoDB's default), the check sees one snapshot and every condition holds;
/// a read that saw part of a transaction breaks one. Condition 11 holds only as loaded, and the
/// acknowledged orders are checked after the run, so neither is here.
pub fn check_live(d: &dyn Driver) -> BenchResult<(CheckReport, u64)> {
    let meta = Meta::read(d)?
        .ok_or_else(|| BenchError::Data("no tpcc_meta table: not a TPC-C database".into()))?;
    let mut c = Checker {
        meta: &meta,
        t: Tables::open(d, false)?,
        failures: Vec::new(),
    };
    let mut txn = Counting {
        inner: d.begin()?,
        rows: 0,
    };
    let sums = history_sums(&mut txn, c.t.history)?;
    for w in 1..=meta.scale.warehouses {
        c.warehouse(&mut txn, w, &sums, &BTreeMap::new())?;
        if c.failures.len() >= MAX_FAILURES {
            break;
        }
    }
    let rows = txn.rows;
    txn.inner.commit()?;
    let report = CheckReport {
        conditions_checked: (1..=10).chain([12]).collect(),
        warehouses: meta.scale.warehouses,
        acked_checked: false,
        failures: c.failures,
    };
    Ok((report, rows))
}

/// A transaction that counts the rows its reads return.
struct Counting {
    inner: Box<dyn DriverTxn>,
    rows: u64,
}

impl DriverTxn for Counting {
    fn get(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        let v = self.inner.get(t, key)?;
        self.rows += u64::from(v.is_some());
        Ok(v)
    }
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> DriverResult<Option<Vec<u8>>> {
        self.inner.get_for_update(t, key)
    }
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> DriverResult<()> {
        self.inner.put(t, key, value)
    }
    fn delete(&mut self, t: TableId, key: &[u8]) -> DriverResult<()> {
        self.inner.delete(t, key)
    }
    fn scan(
        &mut self,
        t: TableId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> DriverResult<Vec<crate::driver::Row>> {
        let rows = self.inner.scan(t, lower, upper, reverse, limit)?;
        self.rows += rows.len() as u64;
        Ok(rows)
    }
    fn commit(self: Box<Self>) -> DriverResult<()> {
        self.inner.commit()
    }
    fn rollback(self: Box<Self>) {
        self.inner.rollback()
    }
}

struct Checker<'a> {
    meta: &'a Meta,
    t: Tables,
    failures: Vec<CheckFailure>,
}

/// What one district's orders look like.
#[derive(Default)]
struct OrderFacts {
    /// o_id -> (c_id, carrier, ol_cnt)
    orders: BTreeMap<u32, (u32, u8, u8)>,
    lines: BTreeMap<u32, u32>,
    delivered_by_customer: HashMap<u32, i64>,
}

impl Checker<'_> {
    fn fail(
        &mut self,
        condition: u8,
        w: u32,
        d: Option<u8>,
        c: Option<u32>,
        o: Option<u32>,
        detail: String,
    ) {
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(CheckFailure {
                condition,
                warehouse: w,
                district: d,
                customer: c,
                order: o,
                detail,
            });
        }
    }

    fn warehouse(
        &mut self,
        txn: &mut dyn DriverTxn,
        w: u32,
        sums: &Sums,
        acked: &BTreeMap<(u32, u8), u32>,
    ) -> DriverResult<()> {
        let Some(v) = txn.get(self.t.warehouse, &warehouse_key(w))? else {
            self.fail(1, w, None, None, None, "warehouse row missing".into());
            return Ok(());
        };
        let wh: Warehouse = decode(&v, "warehouse")?;
        let mut d_ytd_sum = 0;
        for d in 1..=DISTRICTS {
            let Some(v) = txn.get(self.t.district, &district_key(w, d))? else {
                self.fail(1, w, Some(d), None, None, "district row missing".into());
                continue;
            };
            let dist: District = decode(&v, "district")?;
            d_ytd_sum += dist.d_ytd;
            let h = sums.by_district.get(&(w, d)).copied().unwrap_or(0);
            if dist.d_ytd != h {
                self.fail(
                    9,
                    w,
                    Some(d),
                    None,
                    None,
                    format!("D_YTD {} != sum(H_AMOUNT) {h}", dist.d_ytd),
                );
            }
            if let Some(&o) = acked.get(&(w, d)) {
                if dist.d_next_o_id.saturating_sub(1) < o {
                    let detail = format!(
                        "D_NEXT_O_ID - 1 = {} < acknowledged O_ID {o}",
                        dist.d_next_o_id - 1
                    );
                    self.fail(0, w, Some(d), None, Some(o), detail);
                }
            }
            self.district(txn, w, d, &dist, sums)?;
        }
        if wh.w_ytd != d_ytd_sum {
            self.fail(
                1,
                w,
                None,
                None,
                None,
                format!("W_YTD {} != sum(D_YTD) {d_ytd_sum}", wh.w_ytd),
            );
        }
        let h = sums.by_warehouse.get(&w).copied().unwrap_or(0);
        if wh.w_ytd != h {
            self.fail(
                8,
                w,
                None,
                None,
                None,
                format!("W_YTD {} != sum(H_AMOUNT) {h}", wh.w_ytd),
            );
        }
        Ok(())
    }

    fn district(
        &mut self,
        txn: &mut dyn DriverTxn,
        w: u32,
        d: u8,
        dist: &District,
        sums: &Sums,
    ) -> DriverResult<()> {
        let prefix = Key::new().u32(w).u8(d).build();
        let plen = prefix.len();
        let mut new_orders = Vec::new();
        scan_prefix_all(txn, self.t.new_orders, &prefix, &mut |k, _| {
            new_orders.push(
                KeyReader::new(k.get(plen..).unwrap_or_default())
                    .u32()
                    .map_err(key_err)?,
            );
            Ok(())
        })?;
        let mut f = OrderFacts::default();
        scan_prefix_all(txn, self.t.orders, &prefix, &mut |k, v| {
            let o_id = KeyReader::new(k.get(plen..).unwrap_or_default())
                .u32()
                .map_err(key_err)?;
            let o: Order = decode(v, "orders")?;
            f.orders
                .insert(o_id, (o.o_c_id, o.o_carrier_id, o.o_ol_cnt));
            Ok(())
        })?;
        let mut line_faults = Vec::new();
        let mut line_count = 0u64;
        scan_prefix_all(txn, self.t.order_line, &prefix, &mut |k, v| {
            let o_id = KeyReader::new(k.get(plen..).unwrap_or_default())
                .u32()
                .map_err(key_err)?;
            let ol: OrderLine = decode(v, "order_line")?;
            line_count += 1;
            *f.lines.entry(o_id).or_default() += 1;
            let (c_id, carrier, _) = f.orders.get(&o_id).copied().unwrap_or((0, 0, 0));
            if (ol.ol_delivery_d == 0) != (carrier == 0) {
                line_faults.push((o_id, ol.ol_delivery_d, carrier));
            }
            if ol.ol_delivery_d != 0 {
                *f.delivered_by_customer.entry(c_id).or_default() += ol.ol_amount;
            }
            Ok(())
        })?;
        for (o, dd, carrier) in line_faults {
            self.fail(
                7,
                w,
                Some(d),
                None,
                Some(o),
                format!("OL_DELIVERY_D {dd} with O_CARRIER_ID {carrier}"),
            );
        }
        self.order_conditions(w, d, dist, &new_orders, &f, line_count);
        self.customers(txn, w, d, &prefix, &f, sums)
    }

    fn order_conditions(
        &mut self,
        w: u32,
        d: u8,
        dist: &District,
        no: &[u32],
        f: &OrderFacts,
        lines: u64,
    ) {
        let max_o = f.orders.keys().next_back().copied().unwrap_or(0);
        if dist.d_next_o_id - 1 != max_o {
            self.fail(
                2,
                w,
                Some(d),
                None,
                None,
                format!(
                    "D_NEXT_O_ID - 1 = {} != max(O_ID) {max_o}",
                    dist.d_next_o_id - 1
                ),
            );
        }
        if let (Some(&lo), Some(&hi)) = (no.first(), no.last()) {
            if hi != max_o {
                self.fail(
                    2,
                    w,
                    Some(d),
                    None,
                    None,
                    format!("max(NO_O_ID) {hi} != max(O_ID) {max_o}"),
                );
            }
            if u64::from(hi - lo) + 1 != no.len() as u64 {
                self.fail(
                    3,
                    w,
                    Some(d),
                    None,
                    None,
                    format!("NEW_ORDER ids {lo}..={hi} but {} rows", no.len()),
                );
            }
        }
        let ol_cnt_sum: u64 = f.orders.values().map(|o| u64::from(o.2)).sum();
        if ol_cnt_sum != lines {
            self.fail(
                4,
                w,
                Some(d),
                None,
                None,
                format!("sum(O_OL_CNT) {ol_cnt_sum} != ORDER_LINE rows {lines}"),
            );
        }
        let no_set: std::collections::BTreeSet<u32> = no.iter().copied().collect();
        for (&o, &(_, carrier, cnt)) in &f.orders {
            if (carrier == 0) != no_set.contains(&o) {
                self.fail(
                    5,
                    w,
                    Some(d),
                    None,
                    Some(o),
                    format!(
                        "O_CARRIER_ID {carrier}, NEW_ORDER row present: {}",
                        no_set.contains(&o)
                    ),
                );
            }
            let n = f.lines.get(&o).copied().unwrap_or(0);
            if u32::from(cnt) != n {
                self.fail(
                    6,
                    w,
                    Some(d),
                    None,
                    Some(o),
                    format!("O_OL_CNT {cnt} != {n} ORDER_LINE rows"),
                );
            }
        }
        if self.meta.fresh {
            let diff = f.orders.len() as i64 - no.len() as i64;
            if diff != i64::from(self.meta.scale.delivered()) {
                self.fail(
                    11,
                    w,
                    Some(d),
                    None,
                    None,
                    format!(
                        "count(ORDER) - count(NEW_ORDER) = {diff}, expected {}",
                        self.meta.scale.delivered()
                    ),
                );
            }
        }
    }

    fn customers(
        &mut self,
        txn: &mut dyn DriverTxn,
        w: u32,
        d: u8,
        prefix: &[u8],
        f: &OrderFacts,
        sums: &Sums,
    ) -> DriverResult<()> {
        let mut faults = Vec::new();
        let plen = prefix.len();
        scan_prefix_all(txn, self.t.customer, prefix, &mut |k, v| {
            let c_id = KeyReader::new(k.get(plen..).unwrap_or_default())
                .u32()
                .map_err(key_err)?;
            let c: Customer = decode(v, "customer")?;
            let ol = f.delivered_by_customer.get(&c_id).copied().unwrap_or(0);
            let h = sums.by_customer.get(&(w, d, c_id)).copied().unwrap_or(0);
            if c.c_balance != ol - h {
                faults.push((
                    10,
                    c_id,
                    format!(
                        "C_BALANCE {} != sum(OL_AMOUNT) {ol} - sum(H_AMOUNT) {h}",
                        c.c_balance
                    ),
                ));
            }
            if c.c_balance + c.c_ytd_payment != ol {
                faults.push((
                    12,
                    c_id,
                    format!(
                        "C_BALANCE {} + C_YTD_PAYMENT {} != sum(OL_AMOUNT) {ol}",
                        c.c_balance, c.c_ytd_payment
                    ),
                ));
            }
            Ok(())
        })?;
        for (cond, c_id, detail) in faults {
            self.fail(cond, w, Some(d), Some(c_id), None, detail);
        }
        Ok(())
    }
}
