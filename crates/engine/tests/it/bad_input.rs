//! Bad input: a page of garbage, a file of the wrong page size, a truncated file, keys over
//! the limit, bad table names. Clear errors naming the thing, never a panic.

use crate::common::*;
use evenkeel::io::{FileKind, SimStorage, Storage};
use evenkeel::{Database, Error};
use std::sync::Arc;

fn loaded(ps: usize) -> (SimStorage, evenkeel::Options) {
    loaded_with(ps, true)
}

fn loaded_with(ps: usize, doublewrite: bool) -> (SimStorage, evenkeel::Options) {
    let mut o = opts(ps, 64 * ps as u64);
    o.set("doublewrite", if doublewrite { "on" } else { "off" })
        .unwrap();
    let (sim, db) = sim_db(o.clone());
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..3_000u64 {
        txn.put(&t, &key16(i), &val(i, 50)).unwrap();
    }
    txn.commit().unwrap();
    db.close().unwrap();
    (sim, o)
}

fn overwrite(sim: &SimStorage, off: u64, bytes: &[u8]) {
    let f = sim.open("evenkeel.data", FileKind::Data, false).unwrap();
    f.write_at(bytes, off).unwrap();
    f.sync().unwrap();
}

/// With doublewrite on, a page whose last write is still in the doublewrite area is restored
/// at open and counted.
#[test]
fn torn_page_is_repaired_from_doublewrite() {
    let (sim, o) = loaded(4096);
    // the last batch written through the doublewrite area holds the most recently flushed
    // pages; corrupt one of them in place
    let dw = sim.read_durable("evenkeel.dblwr");
    let pid = evenkeel::dwb::copies_in(&dw, 4096)[0].page;
    overwrite(&sim, pid as u64 * 4096 + 200, &[0x5A; 300]);
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert!(db.status().recovery.pages_repaired_from_doublewrite >= 1);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn garbage_page_is_reported_by_check_and_on_read() {
    let (sim, o) = loaded_with(4096, false);
    overwrite(&sim, 5 * 4096 + 100, &[0xAB; 64]);
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    let r = db.check().unwrap();
    assert!(!r.is_ok());
    let p = &r.problems[0];
    assert_eq!(p.page, 5);
    assert!(
        p.rule.contains("checksum") || p.rule.contains("torn"),
        "{p}"
    );
    assert!(p.file.contains("evenkeel.data"));
    // reading through the pool reports the same page, every time, without a panic
    let t = db.table("t").unwrap();
    let mut errors = 0;
    for i in 0..3_000u64 {
        match db.begin().get(&t, &key16(i)) {
            Ok(_) => {}
            Err(e @ Error::CorruptPage { .. }) => {
                assert!(e.to_string().contains("page 5"), "{e}");
                errors += 1;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(errors > 0);
}

#[test]
fn wrong_page_size_is_refused() {
    let (sim, o) = loaded(8192);
    // claim 4 KiB pages in the header: the file length and checksums no longer fit
    let f = sim.open("evenkeel.data", FileKind::Data, false).unwrap();
    let mut p0 = vec![0u8; 8192];
    f.read_at(&mut p0, 0).unwrap();
    p0[52..56].copy_from_slice(&4096u32.to_le_bytes());
    f.write_at(&p0, 0).unwrap();
    f.sync().unwrap();
    let err = Database::open_in(Arc::new(sim.clone()), o.clone())
        .err()
        .unwrap();
    // refused either by the header checksum or by the doublewrite file's recorded geometry
    let msg = err.to_string();
    assert!(
        msg.contains("page 0") || msg.contains("page_size = 8192"),
        "{msg}"
    );
    // a page size outside the allowed set: the header is damaged, and the doublewrite area
    // (whose own header gives the page size) holds a good copy of it
    p0[52..56].copy_from_slice(&12345u32.to_le_bytes());
    f.write_at(&p0, 0).unwrap();
    f.sync().unwrap();
    let db = Database::open_in(Arc::new(sim), o).unwrap();
    assert!(db.status().recovery.file_header_repaired);
    assert_check(&db);
    db.close().unwrap();
    // without a doublewrite area the same damage is refused, naming the value
    let (sim, o) = loaded_with(8192, false);
    let f = sim.open("evenkeel.data", FileKind::Data, false).unwrap();
    f.write_at(&12345u32.to_le_bytes(), 52).unwrap();
    f.sync().unwrap();
    let err = Database::open_in(Arc::new(sim), o).err().unwrap();
    assert!(err.to_string().contains("12345"), "{err}");
    assert!(err.to_string().contains("file header (page 0)"), "{err}");
}

#[test]
fn truncated_file_is_refused() {
    let (sim, o) = loaded(4096);
    let f = sim.open("evenkeel.data", FileKind::Data, false).unwrap();
    let len = f.len().unwrap();
    f.set_len(len - 4096).unwrap();
    f.sync().unwrap();
    let err = Database::open_in(Arc::new(sim.clone()), o.clone())
        .err()
        .unwrap();
    assert!(err.to_string().contains("truncated"), "{err}");
    f.set_len(len - 100).unwrap();
    let err = Database::open_in(Arc::new(sim.clone()), o.clone())
        .err()
        .unwrap();
    assert!(err.to_string().contains("not a multiple"), "{err}");
    f.set_len(10).unwrap();
    let err = Database::open_in(Arc::new(sim), o).err().unwrap();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn not_a_database() {
    let sim = SimStorage::new();
    let f = sim.open("evenkeel.data", FileKind::Data, true).unwrap();
    f.write_at(&[7u8; 8192], 0).unwrap();
    let err = Database::open_in(Arc::new(sim), Default::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("bad magic"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let err = Database::open(dir.path(), Default::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("no database"), "{err}");
}

#[test]
fn key_and_name_limits() {
    let (_sim, db) = sim_db(opts(4096, 1 << 20));
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    let max = db.max_key_len();
    assert_eq!(max, 512);
    txn.put(&t, &vec![1u8; max], b"ok").unwrap();
    let err = txn.put(&t, &vec![1u8; max + 1], b"no").unwrap_err();
    assert!(
        matches!(
            err,
            Error::KeyTooLarge {
                len: 513,
                max: 512,
                page_size: 4096
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("512"));
    txn.commit().unwrap();
    assert!(matches!(
        db.create_table(""),
        Err(Error::InvalidTableName { .. })
    ));
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    assert!(matches!(db.table("nope"), Err(Error::TableNotFound(_))));
    assert_eq!(
        db.begin().get(&t, &vec![1u8; max]).unwrap(),
        Some(b"ok".to_vec())
    );
}
