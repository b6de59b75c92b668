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

/// The durable files of `sim`, as (name, bytes): an image to start crash runs from.
pub fn durable_image(sim: &SimStorage) -> Vec<(String, Vec<u8>)> {
    sim.durable_file_names()
        .into_iter()
        .map(|n| {
            let bytes = sim.read_durable(&n);
            (n, bytes)
        })
        .collect()
}

/// A fresh simulated disk holding `image` durably.
pub fn disk_from(image: &[(String, Vec<u8>)]) -> SimStorage {
    use evenkeel::io::{FileKind, Storage};
    let sim = SimStorage::new();
    for (name, bytes) in image {
        let f = sim.open(name, FileKind::Other, true).unwrap();
        f.write_at(bytes, 0).unwrap();
        f.sync().unwrap();
    }
    sim.sync_dir().unwrap();
    sim
}

/// After a power cut at operation `n`: the crash (every unsynced write dropped for even `n`, a
/// random subset kept for odd), the power back on, and the reopen, which must succeed.
pub fn crash_after_cut_and_reopen(sim: &SimStorage, n: u64, o: Options) -> Database {
    use evenkeel::io::sim::CrashMode;
    sim.crash_with(if n.is_multiple_of(2) {
        CrashMode::DropUnsynced
    } else {
        CrashMode::KeepRandomSubset { seed: n }
    });
    sim.restart();
    Database::open_in(Arc::new(sim.clone()), o)
        .unwrap_or_else(|e| panic!("cut at write {n}: reopen failed: {e}"))
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

/// The workload of the crash and fault campaigns (`crash.rs`, `faults.rs`): `THREADS` threads
/// commit transactions, each inserting a row of its own and moving a shared counter (read with
/// `get_for_update`), so that after a crash a half-applied transaction shows as a counter that
/// differs from the number of rows, and each thread's rows are the state after some prefix of
/// its transactions. Each row's key also goes into the index table "idx" (a key set, so its
/// changes go through the change buffer when their leaf is not in the pool), whose keys must
/// equal the rows'.
pub mod workload {
    use super::{opts, val};
    use evenkeel::io::SimStorage;
    use evenkeel::{Database, Options, Table, Transaction};
    use rand::{rngs::SmallRng, Rng};
    use std::collections::BTreeSet;
    use std::ops::Bound;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    pub const THREADS: u64 = 3;

    /// The campaigns' options: 4 KiB pages, a 64-page pool, a 512 KiB log in two files (it
    /// wraps), 512 or 4096-byte log blocks, write_io_threads 1, 2 or 4.
    pub fn crash_opts(rng: &mut SmallRng) -> Options {
        let mut o = opts(4096, 64 * 4096);
        o.set("log_file_size", "256K").unwrap();
        o.set("log_files_in_group", "2").unwrap();
        o.set("log_buffer_size", "256K").unwrap();
        o.set("io_capacity", "100").unwrap();
        if rng.gen_bool(0.5) {
            o.set("log_block_size", "4096").unwrap();
        }
        // One doublewrite segment (a single batch in flight) or several writing concurrently.
        let wio = [1, 2, 4][rng.gen_range(0..3)];
        o.set("write_io_threads", &wio.to_string()).unwrap();
        o
    }

    /// Keys the index table starts with (`pad_key`): enough leaves (about 30 of the pool's 64
    /// pages) that some leave the pool while the workload runs, so its changes go through the
    /// change buffer.
    pub const IDX_PADDING: u64 = 2500;

    /// A padding key of the index table (not a row's: `b"pad"` where a row's has `b"own"`).
    pub fn pad_key(i: u64) -> Vec<u8> {
        let mut k = (i ^ 0x5a5a)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_be_bytes()
            .to_vec();
        k.extend_from_slice(b"pad");
        k.extend_from_slice(&i.to_be_bytes());
        k
    }

    /// A new database on `sim` with the workload's tables, "own", "meta" and the index table
    /// "idx" (holding `IDX_PADDING` padding keys).
    pub fn create_db(sim: &SimStorage, o: &Options) -> Database {
        let db = Database::create_in(Arc::new(sim.clone()), o.clone()).unwrap();
        db.create_table("own").unwrap();
        db.create_table("meta").unwrap();
        let idx = db.create_index_table("idx").unwrap();
        for chunk in (0..IDX_PADDING).collect::<Vec<_>>().chunks(500) {
            let mut txn = db.begin();
            for &i in chunk {
                txn.put(&idx, &pad_key(i), &[]).unwrap();
            }
            txn.commit().unwrap();
        }
        db
    }

    /// The index table's key of row (t, i): a hash of it first, so the keys of consecutive
    /// transactions land on leaves all over the index (a key at the end of a leaf that fills
    /// in order leaves it full, and a full leaf takes no buffered insert), then the row's key.
    pub fn idx_key(t: u64, i: u64) -> Vec<u8> {
        let h = ((t << 40) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut k = h.to_be_bytes().to_vec();
        k.extend_from_slice(&own_key(t, i));
        k
    }

    pub fn own_key(t: u64, i: u64) -> Vec<u8> {
        let mut k = b"own".to_vec();
        k.extend_from_slice(&t.to_be_bytes());
        k.extend_from_slice(&i.to_be_bytes());
        k
    }

    /// The rows thread `t` has after its transactions 0..n: txn i inserts row i and deletes row
    /// i-3 when i % 4 == 3.
    pub fn expected_rows(t: u64, n: u64) -> BTreeSet<Vec<u8>> {
        let mut s = BTreeSet::new();
        for i in 0..n {
            s.insert(own_key(t, i));
            if i % 4 == 3 {
                s.remove(&own_key(t, i - 3));
            }
        }
        s
    }

    pub fn counter_of(v: Option<Vec<u8>>) -> u64 {
        v.map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()))
    }

    /// The writes of thread `t`'s transaction `i` into `txn`: its row i (a value of 0-200
    /// bytes, one in 20 of 2,000-9,000), row i-3 deleted when i % 4 == 3, the same keys put
    /// into and deleted from the index table `idx`, and the counter moved by the rows added
    /// (read with `get_for_update`). Not committed.
    #[allow(clippy::too_many_arguments)]
    pub fn txn_writes(
        txn: &mut Transaction,
        own: &Table,
        meta: &Table,
        idx: &Table,
        t: u64,
        i: u64,
        rng: &mut SmallRng,
    ) -> evenkeel::Result<()> {
        let c = counter_of(txn.get_for_update(meta, b"counter")?);
        let delta: i64 = if i % 4 == 3 { 0 } else { 1 };
        let len = if rng.gen_ratio(1, 20) {
            rng.gen_range(2000..9000)
        } else {
            rng.gen_range(0..200)
        };
        txn.put(own, &own_key(t, i), &val(i, len))?;
        txn.put(idx, &idx_key(t, i), &[])?;
        if i % 4 == 3 {
            txn.delete(own, &own_key(t, i - 3))?;
            txn.delete(idx, &idx_key(t, i - 3))?;
        }
        txn.put(meta, b"counter", &((c as i64 + delta) as u64).to_be_bytes())
    }

    /// Per thread: transactions acknowledged (commit returned Ok) and attempted (commit called).
    pub struct Progress {
        pub acked: Vec<AtomicU64>,
        pub attempted: Vec<AtomicU64>,
    }

    impl Default for Progress {
        fn default() -> Self {
            let z = || (0..THREADS).map(|_| AtomicU64::new(0)).collect();
            Progress {
                acked: z(),
                attempted: z(),
            }
        }
    }

    impl Progress {
        pub fn acked(&self) -> Vec<u64> {
            self.acked
                .iter()
                .map(|a| a.load(Ordering::SeqCst))
                .collect()
        }

        pub fn total_acked(&self) -> u64 {
            self.acked().iter().sum()
        }
    }

    /// Checks the reopened database: `check` clean, counter == rows, each thread's rows the state
    /// after a prefix n with lo[t] <= n <= max(attempted[t], acked[t]), each row's value the one
    /// its transaction wrote. Returns the acknowledged transactions lost (acked - n, summed).
    pub fn verify(db: &Database, p: &Progress, lo: &[u64]) -> Result<u64, String> {
        let r = db
            .check()
            .map_err(|e| format!("check failed to run: {e}"))?;
        if !r.is_ok() {
            let rules: BTreeSet<&str> = r
                .problems
                .iter()
                .filter_map(|p| p.rule.split_whitespace().next())
                .collect();
            let p: Vec<String> = r.problems.iter().take(3).map(|p| p.to_string()).collect();
            return Err(format!(
                "check: {} problems, rules {rules:?}: {}",
                r.problems.len(),
                p.join("; ")
            ));
        }
        let own = db.table("own").map_err(|e| e.to_string())?;
        let meta = db.table("meta").map_err(|e| e.to_string())?;
        let idx = db.table("idx").map_err(|e| e.to_string())?;
        let txn = db.begin();
        let counter = counter_of(txn.get(&meta, b"counter").map_err(|e| e.to_string())?);
        let rows: Vec<Vec<u8>> = txn
            .scan(&own, Bound::Unbounded, Bound::Unbounded, false)
            .map_err(|e| e.to_string())?
            .map(|r| r.map(|r| r.0).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        if counter != rows.len() as u64 {
            return Err(format!(
                "counter {counter} vs {} rows: a half-applied (torn) transaction",
                rows.len()
            ));
        }
        let keys: BTreeSet<Vec<u8>> = txn
            .scan(&idx, Bound::Unbounded, Bound::Unbounded, false)
            .map_err(|e| e.to_string())?
            .map(|r| r.map(|r| r.0[8..].to_vec()).map_err(|e| e.to_string()))
            .collect::<Result<BTreeSet<_>, _>>()?
            .into_iter()
            .filter(|k| !k.starts_with(b"pad"))
            .collect();
        if keys.iter().ne(rows.iter()) {
            return Err(format!(
                "the index table holds {} keys, the rows are {}: they differ",
                keys.len(),
                rows.len()
            ));
        }
        for k in rows.iter().step_by(7) {
            let t = u64::from_be_bytes(k[3..11].try_into().unwrap());
            let i = u64::from_be_bytes(k[11..19].try_into().unwrap());
            if txn.get(&idx, &idx_key(t, i)).map_err(|e| e.to_string())? != Some(Vec::new()) {
                return Err("a row's key is missing from the index table on get".into());
            }
        }
        let mut lost = 0;
        for t in 0..THREADS {
            let mine: BTreeSet<Vec<u8>> = rows
                .iter()
                .filter(|k| k[3..11] == t.to_be_bytes())
                .cloned()
                .collect();
            let acked = p.acked[t as usize].load(Ordering::SeqCst);
            let hi = p.attempted[t as usize].load(Ordering::SeqCst).max(acked);
            let lo = lo[t as usize];
            let Some(n) = (lo..=hi).find(|&n| expected_rows(t, n) == mine) else {
                let best = (0..=hi).find(|&n| expected_rows(t, n) == mine);
                return Err(format!(
                    "thread {t}: rows are not the state after any prefix of {lo}..={hi} \
                     transactions (acknowledged {acked}, must have {lo}); found {} rows, which \
                     match prefix {best:?}",
                    mine.len()
                ));
            };
            lost += acked.saturating_sub(n);
            for k in &mine {
                let i = u64::from_be_bytes(k[11..19].try_into().unwrap());
                let v = txn.get(&own, k).map_err(|e| e.to_string())?.unwrap();
                if !(v.is_empty() || v[0] == val(i, 1)[0]) {
                    return Err(format!("thread {t}: wrong value of row {i}"));
                }
            }
        }
        Ok(lost)
    }
}
