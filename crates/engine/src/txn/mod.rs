//! txn: transactions (private write sets applied at commit).

pub mod transaction;
