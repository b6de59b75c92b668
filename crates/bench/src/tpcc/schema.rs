//! TPC-C's nine tables as tpcc-mysql creates them, plus its secondary indexes stored as extra
//! tables (index columns followed by the primary key, empty value), which the workload keeps
//! in step with the base rows. Money is integer cents, tax and discount are basis points
//! (1/10000), times are Unix seconds, and a NULL carrier or delivery date is stored as 0.
//! HISTORY has no key in tpcc-mysql; here it gets a hidden 64-bit row id.

use crate::codec::{row, Key};
use crate::driver::{Driver, DriverResult, TableId};

row! {
    /// WAREHOUSE (key: w_id).
    pub struct Warehouse {
        pub w_name: String, pub w_street_1: String, pub w_street_2: String, pub w_city: String,
        pub w_state: String, pub w_zip: String, pub w_tax: u16, pub w_ytd: i64,
    }
}

row! {
    /// DISTRICT (key: w_id, d_id).
    pub struct District {
        pub d_name: String, pub d_street_1: String, pub d_street_2: String, pub d_city: String,
        pub d_state: String, pub d_zip: String, pub d_tax: u16, pub d_ytd: i64,
        pub d_next_o_id: u32,
    }
}

row! {
    /// CUSTOMER (key: w_id, d_id, c_id).
    pub struct Customer {
        pub c_first: String, pub c_middle: String, pub c_last: String, pub c_street_1: String,
        pub c_street_2: String, pub c_city: String, pub c_state: String, pub c_zip: String,
        pub c_phone: String, pub c_since: i64, pub c_credit: String, pub c_credit_lim: i64,
        pub c_discount: u16, pub c_balance: i64, pub c_ytd_payment: i64, pub c_payment_cnt: u32,
        pub c_delivery_cnt: u32, pub c_data: String,
    }
}

row! {
    /// HISTORY (key: hidden row id).
    pub struct History {
        pub h_c_id: u32, pub h_c_d_id: u8, pub h_c_w_id: u32, pub h_d_id: u8, pub h_w_id: u32,
        pub h_date: i64, pub h_amount: i64, pub h_data: String,
    }
}

row! {
    /// ORDERS (key: w_id, d_id, o_id). A carrier id of 0 is NULL.
    pub struct Order {
        pub o_c_id: u32, pub o_entry_d: i64, pub o_carrier_id: u8, pub o_ol_cnt: u8,
        pub o_all_local: u8,
    }
}

row! {
    /// ORDER_LINE (key: w_id, d_id, o_id, ol_number). A delivery date of 0 is NULL.
    pub struct OrderLine {
        pub ol_i_id: u32, pub ol_supply_w_id: u32, pub ol_delivery_d: i64, pub ol_quantity: u8,
        pub ol_amount: i64, pub ol_dist_info: String,
    }
}

row! {
    /// ITEM (key: i_id).
    pub struct Item { pub i_im_id: u32, pub i_name: String, pub i_price: i64, pub i_data: String, }
}

row! {
    /// STOCK (key: w_id, i_id). The ten S_DIST_xx columns are `s_dist[d_id - 1]`.
    pub struct Stock {
        pub s_quantity: u32, pub s_dist_01: String, pub s_dist_02: String, pub s_dist_03: String,
        pub s_dist_04: String, pub s_dist_05: String, pub s_dist_06: String,
        pub s_dist_07: String, pub s_dist_08: String, pub s_dist_09: String,
        pub s_dist_10: String, pub s_ytd: u32, pub s_order_cnt: u32, pub s_remote_cnt: u32,
        pub s_data: String,
    }
}

impl Stock {
    /// S_DIST_xx for district `d_id` (1-10).
    pub fn dist(&self, d_id: u8) -> &str {
        match d_id {
            1 => &self.s_dist_01,
            2 => &self.s_dist_02,
            3 => &self.s_dist_03,
            4 => &self.s_dist_04,
            5 => &self.s_dist_05,
            6 => &self.s_dist_06,
            7 => &self.s_dist_07,
            8 => &self.s_dist_08,
            9 => &self.s_dist_09,
            _ => &self.s_dist_10,
        }
    }
}

/// Table names, in creation order. The last four are the secondary indexes.
pub const TABLE_NAMES: [&str; 13] = [
    "warehouse",
    "district",
    "customer",
    "history",
    "new_orders",
    "orders",
    "order_line",
    "item",
    "stock",
    "customer_idx_name",
    "orders_idx_customer",
    "order_line_idx_supply",
    "stock_idx_item",
];

/// Opened handles of all TPC-C tables.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub history: TableId,
    pub new_orders: TableId,
    pub orders: TableId,
    pub order_line: TableId,
    pub item: TableId,
    pub stock: TableId,
    /// idx_customer: (w, d, c_last, c_first, c_id).
    pub customer_idx_name: TableId,
    /// idx_orders: (w, d, c_id, o_id).
    pub orders_idx_customer: TableId,
    /// fkey_order_line_2: (supply_w, i_id, w, d, o_id, ol_number).
    pub order_line_idx_supply: TableId,
    /// fkey_stock_2: (i_id, w).
    pub stock_idx_item: TableId,
}

impl Tables {
    /// Open (and when `create`, create) every table.
    pub fn open(d: &dyn Driver, create: bool) -> DriverResult<Tables> {
        let mut ids = [0; 13];
        for (n, (id, name)) in ids.iter_mut().zip(TABLE_NAMES).enumerate() {
            // the last four are secondary indexes: index tables (evenkeel's change buffer)
            *id = if n >= TABLE_NAMES.len() - 4 {
                d.open_index_table(name, create)?
            } else {
                d.open_table(name, create)?
            };
        }
        let [warehouse, district, customer, history, new_orders, orders, order_line, item, stock, customer_idx_name, orders_idx_customer, order_line_idx_supply, stock_idx_item] =
            ids;
        Ok(Tables {
            warehouse,
            district,
            customer,
            history,
            new_orders,
            orders,
            order_line,
            item,
            stock,
            customer_idx_name,
            orders_idx_customer,
            order_line_idx_supply,
            stock_idx_item,
        })
    }
}

pub fn warehouse_key(w: u32) -> Vec<u8> {
    Key::new().u32(w).build()
}
pub fn district_key(w: u32, d: u8) -> Vec<u8> {
    Key::new().u32(w).u8(d).build()
}
pub fn customer_key(w: u32, d: u8, c: u32) -> Vec<u8> {
    Key::new().u32(w).u8(d).u32(c).build()
}
pub fn customer_name_key(w: u32, d: u8, last: &str, first: &str, c: u32) -> Vec<u8> {
    Key::new().u32(w).u8(d).str(last).str(first).u32(c).build()
}
/// Prefix of all customers of a district with a given last name.
pub fn customer_name_prefix(w: u32, d: u8, last: &str) -> Vec<u8> {
    Key::new().u32(w).u8(d).str(last).build()
}
pub fn history_key(row_id: u64) -> Vec<u8> {
    Key::new().u64(row_id).build()
}
pub fn order_key(w: u32, d: u8, o: u32) -> Vec<u8> {
    Key::new().u32(w).u8(d).u32(o).build()
}
pub fn order_customer_key(w: u32, d: u8, c: u32, o: u32) -> Vec<u8> {
    Key::new().u32(w).u8(d).u32(c).u32(o).build()
}
pub fn order_line_key(w: u32, d: u8, o: u32, n: u8) -> Vec<u8> {
    Key::new().u32(w).u8(d).u32(o).u8(n).build()
}
pub fn order_line_supply_key(sw: u32, i: u32, w: u32, d: u8, o: u32, n: u8) -> Vec<u8> {
    Key::new().u32(sw).u32(i).u32(w).u8(d).u32(o).u8(n).build()
}
pub fn item_key(i: u32) -> Vec<u8> {
    Key::new().u32(i).build()
}
pub fn stock_key(w: u32, i: u32) -> Vec<u8> {
    Key::new().u32(w).u32(i).build()
}
pub fn stock_item_key(i: u32, w: u32) -> Vec<u8> {
    Key::new().u32(i).u32(w).build()
}
