//! Figures on real files, as ignored tests that print numbers (never timed assertions):
//! pages/s through `write_batch` at 16 KiB pages for batches of 1, 8 and 64 random pages, beside
//! the same pages written in place with one fsync per batch and no doublewrite; and pages/s of
//! 64-page batches from 1, 2, 4 and 8 concurrent writers through 1 segment against 4 and 8
//! segments (write_io_threads). Run with
//! `cargo test -p evenkeel --lib dwb::tests::figures -- --ignored --nocapture --test-threads 1`.

use super::image;
use crate::dwb::Doublewrite;
use crate::io::{File, FileKind, FileStorage, FlushMethod, Storage};
use crate::types::PageId;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAGE_SIZE: usize = 16384;
/// 64 MiB of data file: pages are picked at random in it, as a flush list would.
const DATA_PAGES: u32 = 4096;
const SLOTS: usize = 64;
const RUN: Duration = Duration::from_secs(2);

fn scratch() -> tempfile::TempDir {
    // Under /var/tmp (a disk file system on our machines), not tmpfs, so fsync is real.
    tempfile::Builder::new()
        .prefix("evenkeel-dwb")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// Calls `write` with random distinct page sets of `batch` pages for `RUN`; returns
/// (pages, batches, seconds).
fn drive(batch: usize, mut write: impl FnMut(&[u32])) -> (u64, u64, f64) {
    let mut rng = SmallRng::seed_from_u64(batch as u64);
    let (mut pages, mut batches) = (0u64, 0u64);
    let t = Instant::now();
    while t.elapsed() < RUN {
        let set: Vec<u32> = rand::seq::index::sample(&mut rng, DATA_PAGES as usize, batch)
            .into_iter()
            .map(|i| i as u32)
            .collect();
        write(&set);
        pages += batch as u64;
        batches += 1;
    }
    (pages, batches, t.elapsed().as_secs_f64())
}

/// A scratch directory holding a synced data file of `DATA_PAGES` pages.
fn data_file(method: FlushMethod) -> (tempfile::TempDir, FileStorage, Arc<dyn File>) {
    let dir = scratch();
    let fs = FileStorage::new(dir.path(), method).unwrap();
    let data = fs.open("data", FileKind::Data, true).unwrap();
    data.set_len(u64::from(DATA_PAGES) * PAGE_SIZE as u64)
        .unwrap();
    data.sync().unwrap();
    fs.sync_dir().unwrap();
    (dir, fs, data)
}

#[test]
#[ignore]
fn write_batch_figures_on_real_files() {
    let images: Vec<Vec<u8>> = (0..DATA_PAGES).map(|p| image(p, 2, PAGE_SIZE)).collect();
    for method in [FlushMethod::Fsync, FlushMethod::ODirect] {
        let (_dir, fs, data) = data_file(method);
        let dwb = Doublewrite::open(&fs, PAGE_SIZE, SLOTS).unwrap();
        eprintln!(
            "flush_method = {}, page_size = {PAGE_SIZE}, {SLOTS} slots, {} MiB data file",
            method.name(),
            (u64::from(DATA_PAGES) * PAGE_SIZE as u64) >> 20
        );
        for batch in [1usize, 8, 64] {
            let before = dwb.stats();
            let (pages, batches, secs) = drive(batch, |set| {
                let refs: Vec<(PageId, &[u8])> = set
                    .iter()
                    .map(|&p| (PageId(p), images[p as usize].as_slice()))
                    .collect();
                dwb.write_batch(&*data, &refs).unwrap();
            });
            let s = dwb.stats();
            let fsyncs = s.fsyncs - before.fsyncs;
            let mb = (s.bytes_written - before.bytes_written) as f64 / (1 << 20) as f64;
            let (raw_pages, _, raw_secs) = drive(batch, |set| {
                for &p in set {
                    let off = u64::from(p) * PAGE_SIZE as u64;
                    data.write_at(&images[p as usize], off).unwrap();
                }
                data.sync().unwrap();
            });
            eprintln!(
                "  batch {batch:>2}: {:>7.0} pages/s via doublewrite ({:>6.0} batches/s, {:>6.0} \
                 fsyncs/s, {:>6.1} MB/s written to both files); in place only, 1 fsync per \
                 batch: {:>7.0} pages/s",
                pages as f64 / secs,
                batches as f64 / secs,
                fsyncs as f64 / secs,
                mb / secs,
                raw_pages as f64 / raw_secs,
            );
        }
    }
}

/// Pages/s of `writers` threads writing random 64-page batches of their own pages (as the page
/// cleaner's writers do: a page is never in two batches at once) through `dwb` for `RUN`.
fn concurrent_pages_per_s(
    dwb: &Doublewrite,
    data: &dyn crate::io::File,
    images: &[Vec<u8>],
    writers: usize,
) -> f64 {
    let pages = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let per = DATA_PAGES as usize / writers;
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..writers {
            let (pages, stop) = (&pages, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(w as u64);
                while !stop.load(Ordering::Relaxed) {
                    let refs: Vec<(PageId, &[u8])> = rand::seq::index::sample(&mut rng, per, 64)
                        .into_iter()
                        .map(|i| (w * per + i) as u32)
                        .map(|p| (PageId(p), images[p as usize].as_slice()))
                        .collect();
                    dwb.write_batch(data, &refs).unwrap();
                    pages.fetch_add(64, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(RUN);
        stop.store(true, Ordering::Relaxed);
    });
    pages.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

#[test]
#[ignore]
fn concurrent_writers_through_segments_on_real_files() {
    let images: Vec<Vec<u8>> = (0..DATA_PAGES).map(|p| image(p, 2, PAGE_SIZE)).collect();
    for method in [FlushMethod::Fsync, FlushMethod::ODirect] {
        eprintln!(
            "flush_method = {}, page_size = {PAGE_SIZE}, 64-page batches of random pages, \
             {} MiB data file: pages/s (ratio to 1 segment)",
            method.name(),
            (u64::from(DATA_PAGES) * PAGE_SIZE as u64) >> 20
        );
        for writers in [1usize, 2, 4, 8] {
            let mut line = format!("  {writers} writer(s):");
            let mut base = 0.0;
            for segments in [1usize, 4, 8] {
                // A fresh directory per configuration: the slot count is part of the file.
                let (_dir, fs, data) = data_file(method);
                let dwb = Doublewrite::open_segments(&fs, PAGE_SIZE, segments, SLOTS).unwrap();
                let rate = concurrent_pages_per_s(&dwb, &*data, &images, writers);
                if segments == 1 {
                    base = rate;
                    line += &format!(" 1 segment {rate:>6.0}");
                } else {
                    line += &format!(
                        "; {segments} segments {rate:>6.0} ({:.2}x)",
                        rate / base.max(1.0)
                    );
                }
            }
            eprintln!("{line}");
        }
    }
}
