//! Helpers shared by the integration tests.

use evenkeel::io::SimStorage;
use evenkeel::{Database, Options};
use std::sync::Arc;

pub fn opts(page_size: usize, pool_bytes: u64) -> Options {
    let mut o = Options::default();
    o.set("page_size", &page_size.to_string()).unwrap();
    o.set("buffer_pool_size", &pool_bytes.to_string()).unwrap();
    o
}

pub fn sim_db(o: Options) -> (SimStorage, Database) {
    let sim = SimStorage::new();
    let db = Database::create_in(Arc::new(sim.clone()), o).unwrap();
    (sim, db)
}

/// Runs `check` and fails the test with every problem listed.
pub fn assert_check(db: &Database) -> evenkeel::check::CheckReport {
    let r = db.check().unwrap();
    assert!(
        r.is_ok(),
        "check found problems:\n{}",
        r.problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    r
}

/// Deterministic key of 16 bytes for `i` (big-endian so key order = numeric order).
pub fn key16(i: u64) -> Vec<u8> {
    let mut k = vec![b'k'; 8];
    k.extend_from_slice(&i.to_be_bytes());
    k
}

pub fn val(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}
