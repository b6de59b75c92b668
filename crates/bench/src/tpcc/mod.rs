//! TPC-C as tpcc-mysql runs it: schema and loader, input generation with the spec's random
//! rules, the five transactions over the `Driver` adapter, the client loop with retries, and
//! the clause 3.3.2 consistency check.

pub mod access;
pub mod check;
pub mod client;
pub mod delivery;
pub mod input;
pub mod load;
pub mod new_order;
pub mod order_status;
pub mod payment;
pub mod random;
pub mod scale;
pub mod schema;
pub mod stock_level;
