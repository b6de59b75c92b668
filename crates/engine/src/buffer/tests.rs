//! Unit tests of the buffer pool: batches own their frames (B5), a page changed while written
//! moves up the flush list, neighbours.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::io::{FileKind, SimStorage, Storage};

fn pool(frames: u64) -> BufferPool {
    let sim = SimStorage::new();
    let file = sim.open("d", FileKind::Data, true).unwrap();
    let cfg = PoolConfig {
        page_size: 4096,
        pool_bytes: frames * 4096,
        instances: 1,
        old_blocks_pct: 37,
        old_blocks_time_ms: 0,
    };
    BufferPool::new(&cfg, file, None, Box::new(DirectSink)).unwrap()
}

/// Dirties `pids` (each formatted as a free page and stamped); returns their frames.
fn dirty(p: &BufferPool, pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .map(|&n| {
            let mut g = p.create(PageId(n)).unwrap();
            page::init(&mut g, PageId(n), page::PageType::Free, 0);
            g.stamp(Lsn(n as u64 + 1), Lsn(n as u64 + 1));
            g.fid
        })
        .collect()
}

/// B5 with concurrent writers: a prepared batch's pages are skipped by `oldest_dirty_in`
/// and by another `prepare_batch` until it is written (then clean) or dropped (released).
#[test]
fn prepared_pages_are_nobody_elses_until_written_or_dropped() {
    let p = pool(64);
    let f = dirty(&p, &[3, 4, 5, 9]);
    let all = |p: &BufferPool| p.oldest_dirty_in(64, 0, &|_| true);
    assert_eq!(all(&p), f, "oldest first");
    let a = p.prepare_batch(&f[..2]).unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(all(&p), f[2..], "pages 3 and 4 are being written");
    assert!(
        p.prepare_batch(&f[..2]).unwrap().is_empty(),
        "no page in two batches"
    );
    let b = p.prepare_batch(&f).unwrap();
    assert_eq!(b.len(), 2, "only 5 and 9");
    assert!(all(&p).is_empty());
    drop(b);
    assert_eq!(all(&p), f[2..], "dropped unwritten: released, still dirty");
    assert_eq!(a.write().unwrap(), 2);
    assert_eq!(all(&p), f[2..], "written: clean and off the flush list");
    assert_eq!(p.flush_batch(&f).unwrap(), 2);
    assert!(all(&p).is_empty());
}

/// A page changed while its write is in flight stays dirty, but from the change's LSN:
/// the write took everything before it to disk, so the checkpoint may pass its old place.
/// A page not changed meanwhile is clean; one changed only before the copy is clean too.
#[test]
fn a_page_changed_while_written_moves_up_the_flush_list() {
    let p = pool(64);
    let f = dirty(&p, &[3, 4, 5]);
    assert_eq!(p.oldest_modification(), Some(Lsn(4)));
    {
        // changed again before the copy: in the image
        let mut g = p.write(PageId(4)).unwrap();
        g.stamp(Lsn(20), Lsn(30));
    }
    let batch = p.prepare_batch(&f[..2]).unwrap();
    {
        // changed after the copy, twice: the first change's start is the new place
        let mut g = p.write(PageId(3)).unwrap();
        g.stamp(Lsn(50), Lsn(60));
        g.stamp(Lsn(70), Lsn(80));
    }
    assert_eq!(
        p.oldest_modification(),
        Some(Lsn(4)),
        "in flight: the old place holds until the write completes"
    );
    assert_eq!(batch.write().unwrap(), 2);
    assert_eq!(
        p.oldest_dirty_in(64, 0, &|_| true),
        vec![f[2], f[0]],
        "page 4 clean; page 3 dirty from 50, after page 5 (6)"
    );
    assert_eq!(p.oldest_modification(), Some(Lsn(6)));
    assert_eq!(p.status().pages_dirty, 2);
    assert_eq!(p.status().pages_redirtied_in_write, 1);
    assert_eq!(p.dirty_below(50, 64), 1);
    assert_eq!(p.dirty_below(51, 64), 2);
    let mean = p.oldest_modification_mean().unwrap();
    assert!((mean - 28.0).abs() < 1.0, "mean of 6 and 50: {mean}");
    // written again with nothing changing: clean
    assert_eq!(p.flush_batch(&f[..1]).unwrap(), 1);
    assert_eq!(p.oldest_modification(), Some(Lsn(6)));
    assert_eq!(p.status().pages_redirtied_in_write, 1);
}

#[test]
fn neighbours_contiguous_and_extent() {
    let p = pool(64);
    // dirty: 3 4 5 _ 7 ... and 70 in the next extent
    let f = dirty(&p, &[3, 4, 5, 7, 70]);
    let (f3, f4, f5, f7, f70) = (f[0], f[1], f[2], f[3], f[4]);
    // clean page 6 between them
    drop(p.create(PageId(6)).unwrap());
    let mut want = vec![f3, f4, f5];
    want.sort_unstable();
    assert_eq!(
        p.with_neighbors(&[f4], 1),
        want,
        "mode 1: the contiguous dirty run"
    );
    let mut want = vec![f3, f4, f5, f7];
    want.sort_unstable();
    assert_eq!(
        p.with_neighbors(&[f4], 2),
        want,
        "mode 2: every dirty page of the extent"
    );
    assert_eq!(p.with_neighbors(&[f70], 2), vec![f70], "another extent");
    assert_eq!(p.with_neighbors(&[f4], 0), vec![f4], "off");
    // flushing the batch writes them all and leaves them clean
    assert_eq!(p.flush_batch(&p.with_neighbors(&[f4], 2)).unwrap(), 4);
    assert_eq!(p.status().pages_dirty, 1);
}
