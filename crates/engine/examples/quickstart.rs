//! The README's quick start, compiled with every build of the examples (`cargo clippy
//! --all-targets` in CI) so it cannot drift from the API: `cargo run -p evenkeel --example
//! quickstart`.

use evenkeel::{Database, Durability, Options};

fn main() -> evenkeel::Result<()> {
    let mut opts = Options::default(); // every option: `evenkeel options`
    opts.set("buffer_pool_size", "256M")?; // or Options::from_toml_file("my.toml")?
    let db = Database::open_or_create(std::env::temp_dir().join("evenkeel-quickstart"), opts)?;
    let fruit = db.create_table_if_missing("fruit")?;

    let mut txn = db.begin();
    txn.put(&fruit, b"apple", b"red")?;
    txn.put(&fruit, b"banana", b"yellow")?;
    txn.commit()?; // fsynced when it returns (the default)

    let mut txn = db.begin();
    txn.set_durability(Durability::OsBuffered); // this commit only: survives a process crash
    for row in fruit.range(&txn, "a".."b")? {
        // Rust ranges: a..b, a..=b, a.., ..b, ..
        let (key, value) = row?; // a scan does not borrow the transaction:
        txn.put(&fruit, &key, &[&value[..], b"!"].concat())?; // it may write meanwhile
    }
    if let Some(row) = fruit.range(&txn, ..)?.next_back() {
        // .rev() walks down
        let (key, value) = row?;
        println!(
            "last: {} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    txn.commit()?;

    db.close() // writes dirty pages back; the directory lock is released when it returns
}
