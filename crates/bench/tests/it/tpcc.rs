//! TPC-C against the model engine: the input rules over many draws with a fixed seed, the mix
//! proportions, and the consistency conditions after concurrent transactions.

use std::sync::atomic::Ordering;

use evenkeel_bench::driver::model::ModelDriver;
use evenkeel_bench::driver::Driver;
use evenkeel_bench::recorder::Recorder;
use evenkeel_bench::tpcc::check::check;
use evenkeel_bench::tpcc::client::{run_one, Shared};
use evenkeel_bench::tpcc::input::{CustomerBy, Deck, InputGen, Mix, TxnKind};
use evenkeel_bench::tpcc::load::load;
use evenkeel_bench::tpcc::random::{rng_for, NuRandC};
use evenkeel_bench::tpcc::scale::{Meta, Scale};
use evenkeel_bench::tpcc::schema::Tables;
use parking_lot::Mutex;

/// The clients' shared state for TPC-C on the data `meta` describes (tpcc-mysql's mix).
pub(crate) fn clients_on<'a>(d: &'a dyn Driver, meta: &Meta) -> Shared<'a> {
    let t = Tables::open(d, false).expect("tables");
    let g = InputGen {
        scale: meta.scale,
        c: meta.nurand,
    };
    Shared::new(d, t, g, Mix::TpccMysql).expect("shared")
}

/// Runs `threads` seeded clients, `per_thread` transactions each; returns their merged
/// recorder.
pub(crate) fn run_clients(shared: &Shared<'_>, threads: u64, per_thread: usize) -> Recorder {
    let recs: Vec<Mutex<Recorder>> = (0..threads).map(|_| Mutex::new(Recorder::new(5))).collect();
    std::thread::scope(|s| {
        for (i, rec) in recs.iter().enumerate() {
            s.spawn(move || {
                let mut rng = rng_for(11, i as u64);
                let mut deck = Deck::new(Mix::TpccMysql);
                for _ in 0..per_thread {
                    run_one(shared, deck.deal(&mut rng), &mut rng, rec).expect("txn");
                }
            });
        }
    });
    let mut total = Recorder::new(5);
    recs.iter().for_each(|r| total.merge(&r.lock()));
    total
}

fn small() -> Scale {
    Scale {
        warehouses: 2,
        items: 1000,
        customers: 60,
    }
}

fn gen(scale: Scale) -> InputGen {
    InputGen {
        scale,
        c: NuRandC::generate(&mut rng_for(5, 5)),
    }
}

#[test]
fn input_rules_hold_over_many_draws() {
    let g = gen(Scale::spec(10));
    let mut rng = rng_for(42, 1);
    let n = 100_000;
    let (mut rollbacks, mut lines) = (0u32, 0u64);
    for _ in 0..n {
        let no = g.new_order(&mut rng);
        rollbacks += u32::from(no.will_roll_back(&g.scale));
        lines += no.lines.len() as u64;
        assert!(no.lines.iter().all(|l| (1..=10).contains(&l.quantity)));
    }
    let rb_pct = 100.0 * f64::from(rollbacks) / f64::from(n);
    assert!((0.9..=1.1).contains(&rb_pct), "rollbacks {rb_pct}%");
    let avg = lines as f64 / f64::from(n);
    assert!((9.5..=10.5).contains(&avg), "lines per order {avg}");
    let (mut remote, mut by_name) = (0u32, 0u32);
    for _ in 0..n {
        let p = g.payment(&mut rng);
        remote += u32::from(p.c_w != p.w);
        by_name += u32::from(matches!(p.customer, CustomerBy::LastName(_)));
        assert!((100..=500_000).contains(&p.amount_cents));
    }
    let remote_pct = 100.0 * f64::from(remote) / f64::from(n);
    let name_pct = 100.0 * f64::from(by_name) / f64::from(n);
    assert!(
        (14.0..=16.0).contains(&remote_pct),
        "remote payments {remote_pct}%"
    );
    assert!(
        (57.0..=63.0).contains(&name_pct),
        "by last name {name_pct}%"
    );
}

#[test]
fn mix_proportions_follow_the_deck() {
    for (mix, weights) in [
        (Mix::TpccMysql, [10, 10, 1, 1, 1]),
        (Mix::Spec, [45, 43, 4, 4, 4]),
    ] {
        let mut deck = Deck::new(mix);
        let mut rng = rng_for(9, 0);
        let total: u32 = weights.iter().sum();
        let mut counts = [0u32; 5];
        for _ in 0..total * 200 {
            counts[deck.deal(&mut rng).index()] += 1;
        }
        for (c, w) in counts.iter().zip(weights) {
            assert_eq!(*c, w * 200, "{mix:?}");
        }
    }
}

#[test]
fn consistency_holds_after_concurrent_transactions() {
    let d = ModelDriver::new();
    let meta = load(&d, small(), 2, 7, &|_| {}).expect("load");
    let fresh = check(&d, None).expect("check");
    assert!(fresh.ok(), "{:?}", fresh.failures);
    assert!(fresh.conditions_checked.contains(&11));

    let shared = clients_on(&d, &meta);
    let total = run_clients(&shared, 4, 400);
    let done: u64 = total.kinds.iter().map(|k| k.ok).sum();
    assert_eq!(done, 1600);
    assert!(total.kinds[TxnKind::Delivery.index()].ok > 0);
    let mut meta = Meta::read(&d).expect("meta").expect("present");
    meta.fresh = false;
    meta.write(&d).expect("write meta");
    let acked = shared.acked.to_file();
    assert!(!acked.acked.is_empty());
    let after = check(&d, Some(&acked)).expect("check");
    assert!(after.ok(), "{:?}", after.failures);
    assert!(after.acked_checked);
    assert!(shared.history_ids.load(Ordering::Relaxed) > 1);
}

#[test]
fn check_names_condition_and_district() {
    use evenkeel_bench::codec::RowCodec;
    use evenkeel_bench::tpcc::schema::{district_key, District};
    let d = ModelDriver::new();
    load(&d, small(), 1, 3, &|_| {}).expect("load");
    let t = Tables::open(&d, false).expect("tables");
    let mut txn = d.begin().expect("begin");
    let k = district_key(2, 3);
    let mut dist =
        District::decode(&txn.get(t.district, &k).expect("get").expect("row")).expect("decode");
    dist.d_ytd += 1;
    txn.put(t.district, &k, &dist.encode()).expect("put");
    txn.commit().expect("commit");
    let r = check(&d, None).expect("check");
    let conds: Vec<(u8, u32, Option<u8>)> = r
        .failures
        .iter()
        .map(|f| (f.condition, f.warehouse, f.district))
        .collect();
    assert!(conds.contains(&(9, 2, Some(3))), "{conds:?}");
    assert!(conds.contains(&(1, 2, None)), "{conds:?}");
    let msg = r.into_result().expect_err("inconsistent").to_string();
    assert!(msg.contains("warehouse 2"), "{msg}");
}

#[test]
fn retryable_errors_are_retried_and_counted() {
    let d = ModelDriver::new();
    let meta = load(&d, small(), 1, 1, &|_| {}).expect("load");
    d.set_retryable_failures(0.3);
    let t = Tables::open(&d, false).expect("tables");
    let shared = Shared::new(
        &d,
        t,
        InputGen {
            scale: meta.scale,
            c: meta.nurand,
        },
        Mix::TpccMysql,
    )
    .expect("shared");
    let rec = Mutex::new(Recorder::new(5));
    let mut rng = rng_for(1, 2);
    for _ in 0..200 {
        run_one(&shared, TxnKind::Payment, &mut rng, &rec).expect("payment");
    }
    let r = rec.lock();
    assert_eq!(r.kinds[1].ok, 200);
    assert!(r.kinds[1].retries > 20, "retries {}", r.kinds[1].retries);
}

/// The consistency check run in one transaction while four clients commit on evenkeel: under
/// repeatable read (the default) it reads one snapshot, so every condition holds every time.
/// (Under read committed the same check fails within seconds: rows of one transaction seen
/// and others not; not asserted here, as it depends on timing.)
#[test]
fn a_check_in_one_transaction_sees_one_snapshot_while_clients_commit() {
    use evenkeel_bench::driver::evenkeel::EvenkeelDriver;
    use evenkeel_bench::recorder::Recorder;
    use evenkeel_bench::tpcc::check::check_live;
    use evenkeel_bench::tpcc::client::run_client;

    let dir = tempfile::tempdir().expect("tempdir");
    let d = EvenkeelDriver::open(dir.path(), None, &[]).expect("open");
    let mut meta = load(&d, small(), 2, 7, &|_| {}).expect("load");
    meta.fresh = false;
    meta.write(&d).expect("meta");
    let shared = clients_on(&d, &meta);
    let recs: Vec<Mutex<Recorder>> = (0..4).map(|_| Mutex::new(Recorder::new(5))).collect();
    let done = || -> u64 {
        recs.iter()
            .map(|r| r.lock().kinds.iter().map(|k| k.ok).sum::<u64>())
            .sum()
    };
    std::thread::scope(|s| {
        for (i, rec) in recs.iter().enumerate() {
            let shared = &shared;
            s.spawn(move || run_client(shared, rec, 31, i as u64).expect("client"));
        }
        let mut checks = 0;
        let mut last = 0;
        while checks < 6 {
            let (report, rows) = check_live(&d).expect("check");
            assert!(
                report.ok(),
                "a snapshot check failed: {:?}",
                report.failures
            );
            assert!(rows > 1000, "{rows} rows read");
            let now = done();
            // count only checks that had commits going on around them
            if now > last {
                checks += 1;
                last = now;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        shared.stop.store(true, Ordering::Relaxed);
    });
    assert!(done() > 0);
    let h = d.database().status().history;
    assert_eq!(h.views_open, 0, "{h:?}");
    drop(shared);
    d.close().expect("close");
}
