//! The size of a TPC-C database and the facts a run needs to find again (NURand constants,
//! whether the data is still as loaded). They are stored inside the database, in the table
//! `tpcc_meta`, so they travel with the data whatever the engine. Sizes default to the spec
//! (100,000 items; 10 districts of 3,000 customers and orders; the last 900 orders of each
//! district undelivered); tests shrink them, keeping the 70% delivered ratio.

use serde::{Deserialize, Serialize};

use super::random::NuRandC;
use crate::driver::{Driver, DriverResult, DriverTxn, TableId};
use crate::error::{BenchError, BenchResult};

/// Name of the table holding the metadata row.
pub const META_TABLE: &str = "tpcc_meta";
const META_KEY: &[u8] = b"meta";

/// Districts per warehouse (fixed by the spec).
pub const DISTRICTS: u8 = 10;

/// Database size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scale {
    pub warehouses: u32,
    pub items: u32,
    /// Customers per district; also the initial orders per district.
    pub customers: u32,
}

impl Scale {
    /// The spec's sizes for `w` warehouses.
    pub fn spec(w: u32) -> Scale {
        Scale {
            warehouses: w,
            items: 100_000,
            customers: 3_000,
        }
    }

    /// Orders per district that are loaded already delivered (2,100 of 3,000).
    pub fn delivered(&self) -> u32 {
        self.customers * 7 / 10
    }

    /// Highest last-name number the loader gives to the first customers (999 in the spec).
    pub fn last_name_max(&self) -> u32 {
        999.min(self.customers.saturating_sub(1))
    }

    pub fn validate(&self) -> BenchResult<()> {
        if self.warehouses == 0 || self.warehouses > 100_000 {
            return Err(BenchError::Usage(format!(
                "--warehouses must be 1..=100000, got {}",
                self.warehouses
            )));
        }
        if self.items < 100 || self.customers < 10 {
            return Err(BenchError::Usage(
                "items must be >= 100 and customers >= 10".into(),
            ));
        }
        Ok(())
    }
}

/// What is stored in `tpcc_meta`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub scale: Scale,
    pub nurand: NuRandC,
    /// True until a run has changed the data (condition 11 holds only then).
    pub fresh: bool,
    /// Seconds the load took.
    pub load_seconds: f64,
}

impl Meta {
    pub fn read(d: &dyn Driver) -> BenchResult<Option<Meta>> {
        if !d.tables()?.iter().any(|t| t == META_TABLE) {
            return Ok(None);
        }
        let t = d.open_table(META_TABLE, false)?;
        let mut txn = d.begin()?;
        let v = txn.get(t, META_KEY)?;
        txn.commit()?;
        match v {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| BenchError::Data(format!("tpcc_meta: {e}"))),
        }
    }

    pub fn write(&self, d: &dyn Driver) -> DriverResult<()> {
        let t: TableId = d.open_table(META_TABLE, true)?;
        let mut txn: Box<dyn DriverTxn> = d.begin()?;
        let json = serde_json::to_vec(self).unwrap_or_default();
        txn.put(t, META_KEY, &json)?;
        txn.commit()
    }
}
