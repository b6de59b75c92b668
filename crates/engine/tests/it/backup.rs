//! Online backup (`Database::backup_to`): the copy opens cleanly and holds one commit-consistent
//! state of the source, taken while writers run; bad targets get a clear error and the source
//! loses nothing.
//!
//! The concurrent test is model-checked with the crash campaign's workload (common::workload):
//! each transaction inserts a row of its own and moves a shared counter, so the copy must hold,
//! per thread, the rows after some prefix of its transactions, at least every one acknowledged
//! before the backup began and at most every one attempted before it ended, with the counter
//! equal to the rows. The target's data-file writes wait for more commits, so the data file is
//! copied while the log moves (and wraps: the campaign's log is 512 KiB).

use crate::common::workload::{self, Progress, THREADS};
use crate::common::{assert_check, key16, opts, sim_db, val};
use evenkeel::io::sim::{Fault, FaultKind, FaultOp};
use evenkeel::io::{File, FileKind, IoStats, SimStorage, Storage};
use evenkeel::{Database, Error};
use rand::{rngs::SmallRng, SeedableRng};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A storage that runs `hook` before each write (with the file's name) and may tear reads of
/// the data file made by a thread that asked for it (`TEAR_READS`).
struct Hooked {
    inner: SimStorage,
    hook: Arc<dyn Fn(&str) + Send + Sync>,
}

thread_local! {
    /// Data-file reads by this thread still to tear (a byte of the first page flipped).
    static TEAR_READS: Cell<u32> = const { Cell::new(0) };
    /// Page whose every read by this thread is torn (u32::MAX: none).
    static TEAR_PAGE: Cell<u32> = const { Cell::new(u32::MAX) };
}

struct HookedFile {
    inner: Arc<dyn File>,
    hook: Arc<dyn Fn(&str) + Send + Sync>,
    data: bool,
}

impl File for HookedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> evenkeel::Result<()> {
        self.inner.read_at(buf, offset)?;
        if self.data && buf.len() >= 4096 {
            let left = TEAR_READS.get();
            if left > 0 {
                TEAR_READS.set(left - 1);
                buf[100] ^= 0xff;
            }
            let page = TEAR_PAGE.get();
            let first = offset / 4096;
            let n = buf.len() as u64 / 4096;
            if page != u32::MAX && (first..first + n).contains(&u64::from(page)) {
                let at = (u64::from(page) - first) as usize * 4096 + 200;
                buf[at] ^= 0xff;
            }
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> evenkeel::Result<()> {
        (self.hook)(self.inner.name());
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> evenkeel::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> evenkeel::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> evenkeel::Result<()> {
        self.inner.set_len(len)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}

impl Storage for Hooked {
    fn open(&self, name: &str, kind: FileKind, create: bool) -> evenkeel::Result<Arc<dyn File>> {
        Ok(Arc::new(HookedFile {
            inner: self.inner.open(name, kind, create)?,
            hook: self.hook.clone(),
            data: kind == FileKind::Data,
        }))
    }
    fn exists(&self, name: &str) -> bool {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> evenkeel::Result<()> {
        self.inner.remove(name)
    }
    fn sync_dir(&self) -> evenkeel::Result<()> {
        self.inner.sync_dir()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn io_stats(&self) -> IoStats {
        self.inner.io_stats()
    }
}

fn no_hook() -> Arc<dyn Fn(&str) + Send + Sync> {
    Arc::new(|_| {})
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Every row of every table, in order.
fn contents(db: &Database) -> Vec<(String, Rows)> {
    let txn = db.begin();
    db.tables()
        .unwrap()
        .into_iter()
        .map(|name| {
            let t = db.table(&name).unwrap();
            let rows = t.range(&txn, ..).unwrap().map(|r| r.unwrap()).collect();
            (name, rows)
        })
        .collect()
}

/// A source with two tables, overflow values and a dropped table's pages on the free list.
fn loaded_source() -> (SimStorage, Database) {
    let (sim, db) = sim_db(opts(4096, 64 * 4096));
    let a = db.create_table("a").unwrap();
    let b = db.create_table("b").unwrap();
    let gone = db.create_table("gone").unwrap();
    let mut txn = db.begin();
    for i in 0..600 {
        let len = if i % 50 == 0 { 9000 } else { 150 };
        txn.put(&a, &key16(i), &val(i, len)).unwrap();
        txn.put(&gone, &key16(i), &val(i, 100)).unwrap();
        if i % 3 == 0 {
            txn.put(&b, &key16(i), &val(i + 7, 40)).unwrap();
        }
    }
    txn.commit().unwrap();
    db.drop_table("gone").unwrap();
    (sim, db)
}

#[test]
fn backup_of_a_quiet_database_equals_it_and_opens_cleanly() {
    let (_sim, db) = loaded_source();
    let copy = SimStorage::with_label("copy");
    let rep = db.backup_to_storage(Arc::new(copy.clone())).unwrap();
    assert!(
        rep.data_bytes > 0 && rep.size_bytes >= rep.data_bytes,
        "{rep:?}"
    );
    assert!(
        !copy.file_names().iter().any(|n| n.contains("backup")),
        "the staging file is gone: {:?}",
        copy.file_names()
    );
    let c = Database::open_in(Arc::new(copy), opts(4096, 64 * 4096)).unwrap();
    assert_eq!(
        c.status().recovery.groups,
        0,
        "a prepared copy needs no recovery"
    );
    assert_eq!(contents(&c), contents(&db));
    assert_check(&c);
    // the source goes on as before
    let a = db.table("a").unwrap();
    let mut txn = db.begin();
    txn.put(&a, b"after", b"x").unwrap();
    txn.commit().unwrap();
    assert_check(&db);
}

fn worker(db: Database, t: u64, p: Arc<Progress>, stop: Arc<AtomicBool>) {
    let mut rng = SmallRng::seed_from_u64(77 ^ (t << 32));
    let (own, meta) = (db.table("own").unwrap(), db.table("meta").unwrap());
    let idx = db.table("idx").unwrap();
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut txn = db.begin();
        workload::txn_writes(&mut txn, &own, &meta, &idx, t, i, &mut rng).unwrap();
        p.attempted[t as usize].store(i + 1, Ordering::SeqCst);
        txn.commit().unwrap();
        p.acked[t as usize].store(i + 1, Ordering::SeqCst);
    }
}

/// Waits (bounded) until `p` counts `n` more acknowledged commits than when called.
fn wait_for_commits(p: &Progress, n: u64) {
    let target = p.total_acked() + n;
    let until = Instant::now() + Duration::from_secs(10);
    while p.total_acked() < target && Instant::now() < until {
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn backup_under_concurrent_writes_is_one_commit_consistent_state() {
    for seed in 0..3u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut o = workload::crash_opts(&mut rng);
        // 2 x 1 MiB: the bulk load below still wraps the log
        o.set("log_file_size", "1M").unwrap();
        let sim = SimStorage::new();
        let db = workload::create_db(&sim, &o);
        // About 2.5 MiB of data, so the data file is copied in several chunks.
        let bulk = db.create_table("bulk").unwrap();
        for chunk in 0..50 {
            let mut txn = db.begin();
            for i in chunk * 10..(chunk + 1) * 10 {
                txn.put(&bulk, &key16(i), &val(i, 5000)).unwrap();
            }
            txn.commit().unwrap();
        }
        let p = Arc::new(Progress::default());
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, p, stop) = (db.clone(), p.clone(), stop.clone());
                std::thread::spawn(move || worker(db, t, p, stop))
            })
            .collect();
        wait_for_commits(&p, 20);
        let lo = p.acked();
        let hook_p = p.clone();
        let hook: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(move |name| {
            if name == evenkeel::DATA_FILE {
                wait_for_commits(&hook_p, 15);
            }
        });
        // Eight writers on two cores can outrun the redo copy on a busy machine (tests run in
        // parallel): the backup then refuses, naming the lag, and the source goes on. That is
        // the designed outcome, so such an attempt is made again on a fresh target; any other
        // error fails the test.
        let mut attempts = 0;
        let (rep, copy) = loop {
            attempts += 1;
            let copy = SimStorage::with_label("copy");
            let target = Hooked {
                inner: copy.clone(),
                hook: hook.clone(),
            };
            match db.backup_to_storage(Arc::new(target)) {
                Ok(rep) => break (rep, copy),
                Err(e) if attempts < 10 && e.to_string().contains("fell") => {
                    eprintln!("seed {seed}: attempt {attempts}: {e}");
                }
                Err(e) => panic!("seed {seed}: backup failed after {attempts} attempt(s): {e}"),
            }
        };
        let hi: Vec<u64> = (0..THREADS as usize)
            .map(|t| p.attempted[t].load(Ordering::SeqCst))
            .collect();
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().for_each(|w| w.join().unwrap());
        assert!(rep.end_lsn > rep.start_lsn && rep.redo_bytes > 0, "{rep:?}");
        let c = Database::open_in(Arc::new(copy), o.clone()).unwrap();
        assert_eq!(
            c.status().recovery.groups,
            0,
            "a prepared copy needs no recovery"
        );
        let bounds = Progress::default();
        for t in 0..THREADS as usize {
            bounds.acked[t].store(lo[t], Ordering::SeqCst);
            bounds.attempted[t].store(hi[t], Ordering::SeqCst);
        }
        workload::verify(&c, &bounds, &lo)
            .unwrap_or_else(|e| panic!("seed {seed}: the copy is not consistent: {e}; {rep:?}"));
        let txn = c.begin();
        assert_eq!(
            c.table("bulk").unwrap().range(&txn, ..).unwrap().count(),
            500
        );
        drop(txn);
        // the source lost nothing either
        workload::verify(&db, &p, &p.acked()).unwrap();
    }
}

#[test]
fn pages_torn_while_read_are_read_again_or_taken_from_the_pool() {
    // The source's data file is behind a Hooked storage: reads this thread asks to tear (a
    // read racing a page write) come back with a byte flipped.
    let sim = SimStorage::new();
    let src = Database::create_in(
        Arc::new(Hooked {
            inner: sim.clone(),
            hook: no_hook(),
        }),
        opts(4096, 64 * 4096),
    )
    .unwrap();
    let t = src.create_table("t").unwrap();
    let mut txn = src.begin();
    for i in 0..400 {
        txn.put(&t, &key16(i), &val(i, 300)).unwrap();
    }
    txn.commit().unwrap();
    src.flush().unwrap();
    // The first chunk read and the first read again of its page come back torn: the page is
    // read a third time.
    TEAR_READS.set(2);
    let copy = SimStorage::with_label("copy1");
    let rep = src.backup_to_storage(Arc::new(copy.clone())).unwrap();
    TEAR_READS.set(0);
    assert_eq!((rep.pages_reread, rep.pages_from_pool), (1, 0), "{rep:?}");
    let c = Database::open_in(Arc::new(copy), opts(4096, 64 * 4096)).unwrap();
    assert_eq!(contents(&c), contents(&src));
    assert_check(&c);
    drop(c);
    // A page that reads torn every time: its image comes from the buffer pool.
    TEAR_PAGE.set(5);
    let copy = SimStorage::with_label("copy2");
    let rep = src.backup_to_storage(Arc::new(copy.clone())).unwrap();
    TEAR_PAGE.set(u32::MAX);
    assert_eq!((rep.pages_reread, rep.pages_from_pool), (1, 1), "{rep:?}");
    let c = Database::open_in(Arc::new(copy), opts(4096, 64 * 4096)).unwrap();
    assert_eq!(contents(&c), contents(&src));
    assert_check(&c);
}

#[test]
fn a_target_that_is_not_empty_is_refused_and_left_alone() {
    let (_sim, db) = loaded_source();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"mine").unwrap();
    let e = db.backup_to(tmp.path()).unwrap_err();
    assert!(matches!(e, Error::Backup { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("not empty") && msg.contains("notes.txt"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("notes.txt")).unwrap(),
        b"mine"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    // a storage already holding a database's file
    let copy = SimStorage::with_label("copy");
    copy.open(evenkeel::DATA_FILE, FileKind::Data, true)
        .unwrap();
    let msg = db
        .backup_to_storage(Arc::new(copy.clone()))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("already holds `evenkeel.data`"), "{msg}");
    assert!(copy.exists(evenkeel::DATA_FILE));
    // a file instead of a directory
    let f = tmp.path().join("notes.txt");
    let msg = db.backup_to(&f).unwrap_err().to_string();
    assert!(msg.contains("is a file"), "{msg}");
}

#[test]
fn a_target_out_of_space_fails_cleanly_and_the_source_loses_nothing() {
    let (_sim, db) = loaded_source();
    let before = contents(&db);
    for after in [0, 3, 10] {
        let copy = SimStorage::with_label("full");
        copy.inject(Fault {
            file: None,
            op: FaultOp::Write,
            after,
            kind: FaultKind::Enospc,
            persistent: true,
        });
        let e = db
            .backup_to_storage(Arc::new(copy.clone()))
            .expect_err(&format!("ENOSPC after {after} writes"));
        let msg = e.to_string();
        assert!(
            matches!(e, Error::Backup { .. })
                && msg.contains("ran out of space")
                && msg.contains("needs at least"),
            "{msg}"
        );
        assert_eq!(
            copy.file_names(),
            Vec::<String>::new(),
            "nothing left behind"
        );
        // the source goes on: it reads the same, commits, checks clean
        assert_eq!(contents(&db), before);
        let a = db.table("a").unwrap();
        let mut txn = db.begin();
        txn.put(&a, b"after-enospc", &after.to_be_bytes()).unwrap();
        txn.commit().unwrap();
        let mut txn = db.begin();
        txn.delete(&a, b"after-enospc").unwrap();
        txn.commit().unwrap();
    }
    assert_check(&db);
    // and a backup to a target with room works
    let copy = SimStorage::with_label("roomy");
    db.backup_to_storage(Arc::new(copy.clone())).unwrap();
    let c = Database::open_in(Arc::new(copy), opts(4096, 64 * 4096)).unwrap();
    assert_eq!(contents(&c), before);
}

#[test]
fn backup_to_a_directory_makes_a_database_that_opens_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    let db = Database::create(&src_dir, opts(4096, 1 << 20)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..300 {
        txn.put(&t, &key16(i), &val(i, 500)).unwrap();
    }
    txn.commit().unwrap();
    let dest = tmp.path().join("new").join("copy");
    let rep = db.backup_to(&dest).unwrap();
    assert!(rep.seconds >= rep.copy_seconds, "{rep:?}");
    let c = Database::open(&dest, opts(4096, 1 << 20)).unwrap();
    assert_eq!(c.status().recovery.groups, 0);
    assert_eq!(contents(&c), contents(&db));
    assert_check(&c);
    c.close().unwrap();
    // a read-only handle backs up too (nothing to flush, nothing changes)
    db.close().unwrap();
    let ro = Database::open_read_only(&src_dir, opts(4096, 1 << 20)).unwrap();
    let dest2 = tmp.path().join("copy2");
    ro.backup_to(&dest2).unwrap();
    let c = Database::open(&dest2, opts(4096, 1 << 20)).unwrap();
    assert_eq!(contents(&c), contents(&ro));
}
