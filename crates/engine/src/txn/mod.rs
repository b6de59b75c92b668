//! txn: transactions ([`transaction::Transaction`]: private write sets with read-your-writes,
//! key locks from [`crate::locks`], applied at commit; recovery's re-apply of cut commits).
//!
//! Files: `transaction` (the transaction and its commit), `apply` (a COMMIT's limits and
//! sizing, the apply of a write set to the trees, recovery's re-apply), `scan` (range scans
//! and their key bounds), `snapshot` (read-only views of the whole database).

pub mod apply;
pub mod scan;
pub mod snapshot;
pub mod transaction;
