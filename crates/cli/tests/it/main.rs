//! The `evenkeel` command's integration tests, one binary with a module per concern (one link
//! instead of one per file): `cli` runs each command end to end, `kill` kills a real load with
//! SIGKILL and proves every acknowledged line survived, `torture` runs `evenkeel torture` on each
//! workload and shows it catches a planted lost acknowledgement.

mod cli;
mod damaged;
mod fuzz;
mod kill;

mod salvage;
mod surface;
mod torture;
