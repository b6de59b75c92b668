//! txn: transactions and what they need from each other — for now the key lock table
//! ([`locks::LockTable`]): S/X locks on (table, key) with FIFO waiting, deadlock detection,
//! lock wait timeouts and a hard memory limit.

pub mod locks;
