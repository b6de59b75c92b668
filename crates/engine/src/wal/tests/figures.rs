//! Figures on real files, as ignored tests that print numbers (never timed assertions): group
//! commit at 1..64 threads beside the device's own fdatasync rate, log bytes per commit, and
//! recovery scan speed. Run with
//! `cargo test -p evenkeel --lib wal::tests::figures -- --ignored --nocapture --test-threads 1`.

use super::concurrency::commit_storm;
use super::payload;
use crate::io::{FileKind, FileStorage, FlushMethod, Storage};
use crate::wal::{Log, LogConfig};
use std::sync::Arc;
use std::time::Instant;

fn scratch() -> tempfile::TempDir {
    // Under /var/tmp (a disk file system on our machines), not tmpfs, so fsync is real.
    tempfile::Builder::new()
        .prefix("evenkeel-wal")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// Figures on real files: commits/s, fsyncs/s and commits per fsync at 1, 4, 16, 64 threads,
/// beside the device's own fdatasync rate.
#[test]
#[ignore]
fn group_commit_figures_on_real_files() {
    let dir = scratch();
    let c = LogConfig {
        file_size: 64 << 20,
        files: 2,
        buffer_size: 8 << 20,
        ..LogConfig::default()
    };
    {
        let fs = FileStorage::new(dir.path().join("raw"), FlushMethod::Fsync).unwrap();
        let f = fs.open("probe", FileKind::Log, true).unwrap();
        f.set_len(64 << 20).unwrap();
        f.sync().unwrap();
        let t = Instant::now();
        let n = 200u64;
        for i in 0..n {
            f.write_at(&[1u8; 512], (i % 1000) * 512).unwrap();
            f.sync().unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        eprintln!("device: {:.0} write+fdatasync/s", n as f64 / secs);
    }
    for threads in [1u64, 4, 16, 64] {
        let path = dir.path().join(format!("t{threads}"));
        let fs: Arc<dyn Storage> = Arc::new(FileStorage::new(path, FlushMethod::Fsync).unwrap());
        let log = Arc::new(Log::create(fs, c.clone()).unwrap());
        let per = 3200 / threads;
        let t = Instant::now();
        let acked = commit_storm(&log, threads, per, 100);
        let secs = t.elapsed().as_secs_f64();
        let s = log.stats();
        let commits = acked.len() as f64;
        eprintln!(
            "{threads:>2} threads: {:>7.0} commits/s, {:>6.0} fsyncs/s, {:>5.1} commits/fsync, \
             {:.0} log bytes per 100-byte commit",
            commits / secs,
            s.fsyncs as f64 / secs,
            commits / s.fsyncs as f64,
            s.written_bytes as f64 / commits
        );
    }
}

/// Recovery scan speed: a full log of 2 x 32 MiB of 1000-byte groups, closed, reopened. The
/// files are in the page cache (dropping it needs root), so this measures the scan, not the disk.
#[test]
#[ignore]
fn recovery_scan_speed_on_real_files() {
    let dir = scratch();
    let c = LogConfig {
        file_size: 32 << 20,
        files: 2,
        buffer_size: 4 << 20,
        ..LogConfig::default()
    };
    let fs = || -> Arc<dyn Storage> {
        Arc::new(FileStorage::new(dir.path().join("log"), FlushMethod::Fsync).unwrap())
    };
    let log = Log::create(fs(), c.clone()).unwrap();
    let mut n = 0u64;
    while log.append(&payload(n, 1000)).is_ok() {
        n += 1;
    }
    log.close().unwrap();
    drop(log);
    let t = Instant::now();
    let (_log, rec) = Log::open(fs(), c).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(rec.group_count, n);
    let mb = rec.bytes_scanned as f64 / (1 << 20) as f64;
    eprintln!(
        "recovery: {n} groups, {mb:.1} MiB scanned in {:.3} s = {:.0} MiB/s",
        secs,
        mb / secs
    );
}
