//! txn: transactions ([`transaction::Transaction`]: private write sets applied at commit) and
//! the key lock table ([`locks::LockTable`]: S/X locks on (table, key) with FIFO waiting,
//! deadlock detection, lock wait timeouts and a hard memory limit).

pub mod locks;
pub mod transaction;
