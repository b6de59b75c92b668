//! The insert benchmark (Mark Callaghan's iibench): one table per client with an
//! auto-increment primary key and three secondary indexes, loaded and then churned in steps
//! (l.i0, l.x, l.i1, l.i2, qr). Throughput is rows inserted per second in the l.i* steps,
//! rows indexed per second in l.x and queries per second in qr.

pub mod client;
pub mod schema;
pub mod step;
