//! txn: transactions ([`transaction::Transaction`]: private write sets with read-your-writes,
//! key locks from [`crate::locks`], applied at commit; recovery's re-apply of cut commits).

pub mod transaction;
