//! The iibench table of one client and its three secondary indexes, stored as separate tables
//! keyed by the index columns followed by the primary key (empty values):
//! marketsegment (productid, customerid, price), registersegment (cashregisterid, customerid,
//! price) and pdc (price, dateandtime, customerid). Price is integer cents.

use rand::Rng;

use crate::codec::{row, Key, KeyReader, RowCodec};
use crate::driver::{Driver, DriverError, DriverResult, DriverTxn, TableId};

row! {
    /// One iibench row (the key is the auto-increment id).
    pub struct Purchase {
        pub dateandtime: i64, pub cashregisterid: u32, pub customerid: u32, pub productid: u32,
        pub price: u32, pub data: String,
    }
}

pub const CASHREGISTERS: u32 = 1000;
pub const CUSTOMERS: u32 = 100_000;
pub const PRODUCTS: u32 = 10_000;
pub const PRICE_MAX_CENTS: u32 = 50_000;

impl Purchase {
    pub fn random(rng: &mut impl Rng, now: i64) -> Purchase {
        let len = rng.gen_range(10..=20);
        Purchase {
            dateandtime: now,
            cashregisterid: rng.gen_range(0..CASHREGISTERS),
            customerid: rng.gen_range(0..CUSTOMERS),
            productid: rng.gen_range(0..PRODUCTS),
            price: rng.gen_range(0..PRICE_MAX_CENTS),
            data: (0..len)
                .map(|_| char::from(rng.gen_range(b'a'..=b'z')))
                .collect(),
        }
    }
}

/// The four tables of one client.
#[derive(Debug, Clone, Copy)]
pub struct ClientTables {
    pub base: TableId,
    pub marketsegment: TableId,
    pub registersegment: TableId,
    pub pdc: TableId,
}

pub fn table_names(client: usize) -> [String; 4] {
    let b = format!("ii{client}");
    [
        b.clone(),
        format!("{b}_marketsegment"),
        format!("{b}_registersegment"),
        format!("{b}_pdc"),
    ]
}

impl ClientTables {
    pub fn open(d: &dyn Driver, client: usize, create: bool) -> DriverResult<ClientTables> {
        let [a, b, c, e] = table_names(client);
        Ok(ClientTables {
            base: d.open_table(&a, create)?,
            marketsegment: d.open_index_table(&b, create)?,
            registersegment: d.open_index_table(&c, create)?,
            pdc: d.open_index_table(&e, create)?,
        })
    }

    /// Drop this client's tables if they exist.
    pub fn drop_all(d: &dyn Driver, client: usize) -> DriverResult<()> {
        let existing = d.tables()?;
        for n in table_names(client) {
            if existing.contains(&n) {
                d.drop_table(&n)?;
            }
        }
        Ok(())
    }

    /// (table, key) of the three index entries of a row.
    pub fn index_keys(&self, pk: u64, r: &Purchase) -> [(TableId, Vec<u8>); 3] {
        [
            (
                self.marketsegment,
                Key::new()
                    .u32(r.productid)
                    .u32(r.customerid)
                    .u32(r.price)
                    .u64(pk)
                    .build(),
            ),
            (
                self.registersegment,
                Key::new()
                    .u32(r.cashregisterid)
                    .u32(r.customerid)
                    .u32(r.price)
                    .u64(pk)
                    .build(),
            ),
            (
                self.pdc,
                Key::new()
                    .u32(r.price)
                    .i64(r.dateandtime)
                    .u32(r.customerid)
                    .u64(pk)
                    .build(),
            ),
        ]
    }

    /// Insert a row, with its index entries when `indexed`.
    pub fn insert(
        &self,
        txn: &mut dyn DriverTxn,
        pk: u64,
        r: &Purchase,
        indexed: bool,
    ) -> DriverResult<()> {
        txn.put(self.base, &pk_key(pk), &r.encode())?;
        if indexed {
            for (t, k) in self.index_keys(pk, r) {
                txn.put(t, &k, &[])?;
            }
        }
        Ok(())
    }

    /// Delete a row and its index entries; false when it was not there.
    pub fn delete(&self, txn: &mut dyn DriverTxn, pk: u64) -> DriverResult<bool> {
        let key = pk_key(pk);
        let Some(v) = txn.get_for_update(self.base, &key)? else {
            return Ok(false);
        };
        let r = Purchase::decode(&v)
            .map_err(|e| DriverError::fatal(format!("iibench row {pk}: {e}")))?;
        txn.delete(self.base, &key)?;
        for (t, k) in self.index_keys(pk, &r) {
            txn.delete(t, &k)?;
        }
        Ok(true)
    }
}

pub fn pk_key(pk: u64) -> Vec<u8> {
    Key::new().u64(pk).build()
}

pub fn pk_of(key: &[u8]) -> DriverResult<u64> {
    KeyReader::new(key)
        .u64()
        .map_err(|e| DriverError::fatal(format!("iibench key: {e}")))
}
