//! The API as a new user meets it: table handles tied to their database, errors that end the
//! transaction, read-only opens that write nothing, check and open agreeing on a file's
//! length, Rust ranges and double-ended scans, per-transaction durability, close, and the
//! options' messages. Each test pins a behaviour a user hit (issue 17).

use crate::common::*;
use evenkeel::{Database, Durability, Error, Options};
use std::path::Path;
use std::time::{Duration, Instant};

fn small() -> Options {
    let mut o = opts(4096, 64 * 4096);
    o.set("log_file_size", "256K").unwrap();
    o.set("log_buffer_size", "256K").unwrap();
    o
}

fn rows(scan: impl Iterator<Item = evenkeel::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
    scan.map(|r| String::from_utf8(r.unwrap().0).unwrap())
        .collect()
}

/// Puts rows 0..n with values of `len` bytes, committing every 200.
fn fill(db: &Database, t: &evenkeel::Table, n: u64, len: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let mut txn = db.begin();
        for &i in chunk {
            txn.put(t, &key16(i), &val(i, len)).unwrap();
        }
        txn.commit().unwrap();
    }
}

/// Every byte of every file in `dir`, by name.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_table_of_one_database_is_refused_by_another() {
    let (_a_disk, a) = sim_db(small());
    let (_b_disk, b) = sim_db(small());
    let ta = a.create_table("orders").unwrap();
    let tb = b.create_table("other").unwrap();
    let mut txn = b.begin();
    let e = txn.put(&ta, b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::ForeignTable { .. }), "{e}");
    assert!(
        e.to_string().contains("`orders` belongs to the database"),
        "{e}"
    );
    assert!(matches!(
        txn.get(&ta, b"k"),
        Err(Error::ForeignTable { .. })
    ));
    assert!(matches!(
        txn.range(&ta, ..),
        Err(Error::ForeignTable { .. })
    ));
    txn.put(&tb, b"k", b"v").unwrap();
    txn.commit().unwrap();
    // nothing reached the other database's table
    let txn = b.begin();
    assert_eq!(rows(tb.range(&txn, ..).unwrap()), ["k"]);
    assert_eq!(b.tables().unwrap(), ["other"]);
}

#[test]
fn a_handle_to_a_dropped_table_is_refused_even_after_re_creation() {
    let (_disk, db) = sim_db(small());
    let old = db.create_table("t").unwrap();
    db.drop_table("t").unwrap();
    let new = db.create_table("t").unwrap();
    let mut txn = db.begin();
    let e = txn.put(&old, b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::TableDropped(_)), "{e}");
    txn.put(&new, b"k", b"v").unwrap();
    txn.commit().unwrap();
}

#[test]
fn a_lock_wait_timeout_ends_the_transaction() {
    let (_disk, db) = sim_db(small());
    let t = db.create_table("t").unwrap();
    let mut holder = db.begin();
    holder.put(&t, b"k", b"held").unwrap();
    let mut waiter = db.begin();
    waiter.set_lock_wait_timeout(Duration::from_millis(50));
    waiter.put(&t, b"other", b"1").unwrap();
    let started = Instant::now();
    let e = waiter.put(&t, b"k", b"2").unwrap_err();
    assert!(
        e.is_retryable() && started.elapsed() < Duration::from_secs(5),
        "{e}"
    );
    assert!(waiter.is_aborted());
    // every later call fails, naming the cause, and commit is refused
    let later = waiter.put(&t, b"z", b"3").unwrap_err();
    assert!(matches!(later, Error::TransactionAborted { .. }), "{later}");
    assert!(later.to_string().contains("lock wait timeout"), "{later}");
    assert!(matches!(
        waiter.get(&t, b"other"),
        Err(Error::TransactionAborted { .. })
    ));
    let commit = waiter.commit().unwrap_err();
    assert!(
        matches!(commit, Error::TransactionAborted { .. }),
        "{commit}"
    );
    holder.commit().unwrap();
    // the aborted transaction's write before the timeout never landed; its lock was freed
    let mut txn = db.begin();
    assert_eq!(txn.get(&t, b"other").unwrap(), None);
    txn.put(&t, b"other", b"free").unwrap();
    txn.commit().unwrap();
}

#[test]
fn lock_wait_timeout_takes_milliseconds_and_is_a_duration() {
    let mut o = Options::default();
    o.set("lock_wait_timeout", "250ms").unwrap();
    assert_eq!(o.lock_wait_timeout, Duration::from_millis(250));
    o.set("lock_wait_timeout", "2").unwrap();
    assert_eq!(o.lock_wait_timeout, Duration::from_secs(2));
    o.set("lock_wait_timeout", "1.5s").unwrap();
    assert_eq!(o.lock_wait_timeout, Duration::from_millis(1500));
    let e = o.set("lock_wait_timeout", "0").unwrap_err().to_string();
    assert!(e.contains("a duration from 1ms to"), "{e}");
    let (_disk, db) = sim_db(small());
    db.set_option("lock_wait_timeout", "100ms").unwrap();
    assert_eq!(
        db.current_options().lock_wait_timeout,
        Duration::from_millis(100)
    );
}

#[test]
fn scans_take_rust_ranges_and_run_both_ways_while_the_transaction_writes() {
    let (_disk, db) = sim_db(small());
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for k in ["a", "b", "c", "d", "e"] {
        txn.put(&t, k.as_bytes(), b"v").unwrap();
    }
    txn.commit().unwrap();
    let mut txn = db.begin();
    txn.put(&t, b"bb", b"own").unwrap(); // the transaction's own write
    txn.delete(&t, b"d").unwrap(); // and its own delete
    assert_eq!(
        rows(t.range(&txn, b"a".as_slice()..b"c").unwrap()),
        ["a", "b", "bb"]
    );
    assert_eq!(rows(t.range(&txn, "b"..="c").unwrap()), ["b", "bb", "c"]);
    assert_eq!(rows(t.range(&txn, "c"..).unwrap()), ["c", "e"]);
    assert_eq!(rows(t.range(&txn, .."b").unwrap()), ["a"]);
    assert_eq!(rows(t.range(&txn, ..="b").unwrap()), ["a", "b"]);
    assert_eq!(
        rows(t.range(&txn, ..).unwrap().rev()),
        ["e", "c", "bb", "b", "a"]
    );
    // both ends at once meet without repeating or losing a row
    let mut scan = t.range(&txn, ..).unwrap();
    let mut seen = Vec::new();
    for i in 0.. {
        let next = if i % 2 == 0 {
            scan.next()
        } else {
            scan.next_back()
        };
        match next {
            Some(r) => seen.push(String::from_utf8(r.unwrap().0).unwrap()),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["a", "b", "bb", "c", "e"]);
    // a scan borrows nothing from the transaction: write while iterating
    for row in t.range(&txn, ..).unwrap() {
        let (k, _) = row.unwrap();
        txn.put(&t, &[k.as_slice(), b"!"].concat(), b"copy")
            .unwrap();
    }
    txn.commit().unwrap();
    let txn = db.begin();
    assert_eq!(t.range(&txn, ..).unwrap().count(), 10);
}

#[test]
fn double_ended_scans_match_a_model_over_many_leaves() {
    let (_disk, db) = sim_db(small());
    let t = db.create_table("t").unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut txn = db.begin();
    for i in 0..3000u64 {
        txn.put(&t, &key16(i * 2), &val(i, 40)).unwrap();
        model.insert(key16(i * 2), val(i, 40));
        if i % 200 == 199 {
            txn.commit().unwrap();
            txn = db.begin();
        }
    }
    txn.commit().unwrap();
    let mut txn = db.begin();
    for i in (0..6000u64).step_by(7) {
        if i % 2 == 0 {
            txn.delete(&t, &key16(i)).unwrap();
            model.remove(&key16(i));
        } else {
            txn.put(&t, &key16(i), b"own").unwrap();
            model.insert(key16(i), b"own".to_vec());
        }
    }
    let (lo, hi) = (key16(1000), key16(5000));
    let want: Vec<Vec<u8>> = model
        .range(lo.clone()..hi.clone())
        .map(|(k, _)| k.clone())
        .collect();
    let mut scan = t.range(&txn, lo.as_slice()..hi.as_slice()).unwrap();
    let (mut front, mut back) = (Vec::new(), Vec::new());
    // uneven interleaving: three from the front for every one from the back
    loop {
        let r = if (front.len() + back.len()) % 4 == 3 {
            scan.next_back().map(|r| (false, r))
        } else {
            scan.next().map(|r| (true, r))
        };
        match r {
            Some((true, r)) => front.push(r.unwrap().0),
            Some((false, r)) => back.push(r.unwrap().0),
            None => break,
        }
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, want);
}

#[test]
fn durability_is_per_transaction_with_the_database_option_as_default() {
    let (_disk, db) = sim_db(small());
    let t = db.create_table("t").unwrap();
    assert_eq!(db.begin().durability(), Durability::Sync);
    db.set_option("flush_log_at_trx_commit", "2").unwrap();
    assert_eq!(db.begin().durability(), Durability::OsBuffered);
    let fsyncs = || db.status().log.fsyncs;
    // Lazy: the commit returns without an fsync of its own
    let before = fsyncs();
    for i in 0..20u64 {
        let mut txn = db.begin();
        txn.set_durability(Durability::Lazy);
        txn.put(&t, &key16(i), b"v").unwrap();
        txn.commit().unwrap();
    }
    let lazy = fsyncs() - before;
    // Sync: every commit waits for an fsync that covers it
    let before = fsyncs();
    for i in 0..20u64 {
        let mut txn = db.begin();
        txn.set_durability(Durability::Sync);
        txn.put(&t, &key16(100 + i), b"v").unwrap();
        txn.commit().unwrap();
        assert!(db.status().flushed_lsn >= db.status().lsn - 4096);
    }
    let sync = fsyncs() - before;
    assert!(sync >= 20 && lazy < 20, "sync {sync} fsyncs, lazy {lazy}");
}

#[test]
fn close_ends_every_handle_and_releases_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Database::create(tmp.path(), small()).unwrap();
    let t = db.create_table("t").unwrap();
    let clone = db.clone();
    let mut live = db.begin();
    live.put(&t, b"k", b"v").unwrap();
    db.close().unwrap();
    let e = clone.table("t").unwrap_err();
    assert!(matches!(e, Error::DatabaseClosed(_)), "{e}");
    assert!(e.to_string().contains("is closed"), "{e}");
    let e = live.commit().unwrap_err();
    assert!(matches!(e, Error::DatabaseClosed(_)), "{e}");
    // the clone is still alive, yet the database may be opened again
    let again = Database::open(tmp.path(), small()).unwrap();
    assert_eq!(again.tables().unwrap(), ["t"]);
    drop(clone);
    again.close().unwrap();
}

#[test]
fn a_read_only_open_writes_nothing_and_refuses_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Database::create(tmp.path(), small()).unwrap();
    let t = db.create_table("t").unwrap();
    fill(&db, &t, 2000, 100);
    db.close().unwrap();
    let before = snapshot(tmp.path());
    let ro = Database::open_read_only(tmp.path(), small()).unwrap();
    // two read-only opens may run side by side
    let ro2 = Database::open_read_only(tmp.path(), small()).unwrap();
    assert!(ro.is_read_only());
    let t = ro.table("t").unwrap();
    let txn = ro.begin();
    assert_eq!(t.range(&txn, ..).unwrap().count(), 2000);
    let mut txn = ro.begin();
    let e = txn.put(&t, b"x", b"y").unwrap_err();
    assert!(matches!(e, Error::ReadOnly { .. }), "{e}");
    assert!(matches!(ro.create_table("u"), Err(Error::ReadOnly { .. })));
    assert!(matches!(ro.drop_table("t"), Err(Error::ReadOnly { .. })));
    assert!(ro.check().unwrap().is_ok());
    // a writer is refused while a reader holds the database
    assert!(Database::open(tmp.path(), small()).is_err());
    ro.close().unwrap();
    ro2.close().unwrap();
    assert!(
        snapshot(tmp.path()) == before,
        "a read-only open changed a file"
    );
}

#[test]
fn a_read_only_open_refuses_a_database_that_needs_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Database::create(tmp.path(), small()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.put(&t, b"k", b"v").unwrap();
    txn.commit().unwrap();
    // a crash: the process ends without closing (the handle is leaked, as a kill leaves it)
    std::mem::forget(db);
    // the leaked handle's flock would refuse any open in this process: copy the files
    let copy = tempfile::tempdir().unwrap();
    for (name, bytes) in snapshot(tmp.path()) {
        std::fs::write(copy.path().join(name), bytes).unwrap();
    }
    let before = snapshot(copy.path());
    let e = Database::open_read_only(copy.path(), small()).unwrap_err();
    assert!(matches!(e, Error::NeedsRecovery { .. }), "{e}");
    assert!(e.to_string().contains("evenkeel recover"), "{e}");
    assert!(snapshot(copy.path()) == before);
    // recovery (a read-write open) makes it readable
    Database::open(copy.path(), small())
        .unwrap()
        .close()
        .unwrap();
    let ro = Database::open_read_only(copy.path(), small()).unwrap();
    let t = ro.table("t").unwrap();
    assert_eq!(ro.begin().get(&t, b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn check_and_open_agree_on_a_file_with_extra_or_missing_bytes() {
    for (what, change) in [("777 extra bytes", 777i64), ("a cut last page", -1000)] {
        let tmp = tempfile::tempdir().unwrap();
        let db = Database::create(tmp.path(), small()).unwrap();
        let t = db.create_table("t").unwrap();
        fill(&db, &t, 500, 100);
        db.close().unwrap();
        let path = tmp.path().join(evenkeel::DATA_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len((len as i64 + change) as u64).unwrap();
        drop(f);
        let open = Database::open(tmp.path(), small()).unwrap_err().to_string();
        let report = evenkeel::check_dir(tmp.path()).unwrap();
        assert!(
            !report.is_ok(),
            "{what}: check passed a file open refuses ({open})"
        );
        assert!(open.contains("page size of 4096 bytes"), "{what}: {open}");
        assert!(
            report.problems[0].rule.contains("page size of 4096 bytes"),
            "{what}: {:?}",
            report.problems
        );
        let ro = Database::open_read_only(tmp.path(), small())
            .unwrap_err()
            .to_string();
        assert_eq!(ro, open, "{what}");
    }
}

#[test]
fn a_data_file_shorter_than_its_header_page_names_size_page_size_and_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = small();
    o.set("page_size", "16K").unwrap();
    o.set("buffer_pool_size", "4M").unwrap();
    Database::create(tmp.path(), o.clone())
        .unwrap()
        .close()
        .unwrap();
    let path = tmp.path().join(evenkeel::DATA_FILE);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(12_345).unwrap();
    drop(f);
    let before = snapshot(tmp.path());
    for e in [
        Database::open(tmp.path(), o.clone())
            .unwrap_err()
            .to_string(),
        Database::open_read_only(tmp.path(), o.clone())
            .unwrap_err()
            .to_string(),
        evenkeel::check_dir(tmp.path()).unwrap_err().to_string(),
    ] {
        assert!(e.contains("evenkeel.data"), "{e}");
        assert!(e.contains("12345 bytes"), "{e}");
        assert!(e.contains("16384 bytes"), "{e}");
        assert!(e.contains("4039 bytes of the header page"), "{e}");
    }
    assert!(
        snapshot(tmp.path()) == before,
        "a refused open changed the files"
    );
}

#[test]
fn an_unknown_option_suggests_the_nearest_name_and_toml_sizes_get_a_quoting_hint() {
    let e = Options::default()
        .set("buffer_pool_sise", "1G")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `buffer_pool_size`?"), "{e}");
    let e = Options::default()
        .set("flush_log_at_commit", "1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `flush_log_at_trx_commit`?"), "{e}");
    let e = Options::default().set("zzz", "1").unwrap_err().to_string();
    assert!(!e.contains("did you mean"), "{e}");
    let e = Options::from_toml_str("buffer_pool_size = 1G\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(r#"write `buffer_pool_size = "1G"`"#), "{e}");
    assert!(Options::from_toml_str("buffer_pool_size = \"1G\"\n").is_ok());
}

#[test]
fn the_public_types_print_with_debug() {
    let (_disk, db) = sim_db(small());
    let t = db.create_table("t").unwrap();
    let txn = db.begin();
    let text = format!("{db:?} {t:?} {txn:?}");
    assert!(text.contains("Database") && text.contains("Table") && text.contains("Transaction"));
    // what `fn main() -> Result<(), Error>` prints: the sentence, not a struct's fields
    let e = Options::default().set("page_size", "3K").unwrap_err();
    assert_eq!(
        format!("{e:?}"),
        format!("InvalidOption: {e}"),
        "Debug of an error is its kind and sentence"
    );
}

#[test]
fn a_batch_the_log_cannot_hold_is_known_before_it_is_written() {
    let (_disk, db) = sim_db(small());
    let (max, option) = db.max_writes_per_transaction(1, 0);
    assert_eq!(option, "log_file_size");
    let t = db.create_table("t").unwrap();
    // one more than the bound fails at commit; the bound itself commits
    let mut txn = db.begin();
    for i in 0..=max {
        txn.put(&t, format!("{i:07}").as_bytes(), b"").unwrap();
    }
    let e = txn.commit().unwrap_err();
    assert!(e.to_string().contains("raise log_file_size"), "{e}");
    let (max7, _) = db.max_writes_per_transaction(7, 0);
    let mut txn = db.begin();
    for i in 0..max7 {
        txn.put(&t, format!("{i:07}").as_bytes(), b"").unwrap();
    }
    txn.commit().unwrap();
}
