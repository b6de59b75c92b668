//! lru: InnoDB's LRU list with midpoint insertion, for one buffer-pool instance.
//!
//! The list is young (head, hot) followed by old (tail, cold). A page read from disk enters at
//! the head of the old sublist (the midpoint), so a scan cannot flush the hot set; it is made
//! young only when touched again at least `old_blocks_time` ms after its first access. The old
//! sublist is kept at `old_blocks_pct` of the list. A young page is moved to the head only when
//! a quarter of the young sublist's length in pages has left the list since it was last put
//! there, to avoid churning the list on every hit (InnoDB's buf_page_peek_if_too_old, which
//! measures this drift with freed_page_clock): while nothing is evicted (a working set that
//! fits the pool) no young page is ever moved.
//!
//! Entries are the instance's frames, from `base` on; the caller holds the instance mutex for
//! every method here. A hit decides without that mutex whether a touch would change anything
//! through [`LruHints`] (atomics published under the mutex, read relaxed): a young page near
//! the head, or an old page touched before `old_blocks_time`, needs no mutex, and only an old
//! page needs the clock. The hint is only a pre-check: the touch that moves a page re-decides
//! under the mutex.

use crate::types::FrameId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The "no frame" end of a list.
const NIL: FrameId = FrameId(u32::MAX);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Which {
    None,
    Young,
    Old,
}

#[derive(Clone, Copy)]
struct List {
    head: FrameId,
    tail: FrameId,
    len: usize,
}

impl List {
    fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

const TAG_SHIFT: u32 = 62;
const TAG_YOUNG: u64 = 1 << TAG_SHIFT;
const TAG_OLD: u64 = 2 << TAG_SHIFT;
const VALUE_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// What a hit may read without the instance mutex: per frame, its sublist and either its
/// young stamp (young) or its first access time (old); per instance, the stamp below which a
/// young page would be moved. Written only by [`Lru`] under the mutex, read relaxed: a stale
/// read only makes a hit skip or take a move that the locked touch re-decides.
pub struct LruHints {
    /// Tag (bits 62-63: none, young, old) | young stamp or first access ms.
    state: Box<[AtomicU64]>,
    /// A young page whose stamp is below this is moved to the head on a hit.
    young_cutoff: AtomicU64,
    old_time_ms: u64,
    /// Per frame, `Lru::old_seq`; and the list's `freed` clock: what [`Self::may_be_cold`]
    /// reads.
    old_seq: Box<[AtomicU64]>,
    freed: AtomicU64,
}

/// What a hit should do, as far as the hints tell.
#[derive(Debug, PartialEq, Eq)]
pub enum Peek {
    /// Nothing to change: a young page near the head, or not on the list.
    Young,
    /// An old page touched within old_blocks_time of its first access: counted, not moved.
    NotYoung,
    /// The page may move: touch it under the mutex.
    Move,
}

impl LruHints {
    /// Frame `x` (relative to the instance's first frame), hit now; `now_ms` is called only
    /// for an old page.
    pub fn peek(&self, x: usize, now_ms: impl FnOnce() -> u64) -> Peek {
        let s = self.state[x].load(Ordering::Relaxed);
        let v = s & VALUE_MASK;
        if s & TAG_OLD != 0 {
            if self.old_time_ms == 0 || now_ms().saturating_sub(v) >= self.old_time_ms {
                Peek::Move
            } else {
                Peek::NotYoung
            }
        } else if s & TAG_YOUNG != 0 && v < self.young_cutoff.load(Ordering::Relaxed) {
            Peek::Move
        } else {
            Peek::Young
        }
    }

    /// [`Lru::is_cold`] as far as the hints tell, without the mutex: the change buffer's
    /// pre-check, so that a change to a cached leaf takes the instance mutex only when the
    /// leaf may be dropped.
    pub fn may_be_cold(&self, x: usize) -> bool {
        self.state[x].load(Ordering::Relaxed) & TAG_OLD != 0
            && self.freed.load(Ordering::Relaxed) > self.old_seq[x].load(Ordering::Relaxed)
    }
}

/// Outcome of touching a page, for the made-young / not-young counters.
#[derive(Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // InnoDB's own vocabulary: made young / not young
pub enum Touch {
    MadeYoung,
    NotYoung,
    AlreadyYoung,
}

pub struct Lru {
    /// The instance's first frame: the per-frame arrays below are indexed from it.
    base: FrameId,
    young: List,
    old: List,
    prev: Vec<FrameId>,
    next: Vec<FrameId>,
    which: Vec<Which>,
    first_access_ms: Vec<u64>,
    /// `freed` when the page was last put at the head of the young sublist.
    young_seq: Vec<u64>,
    /// `freed` when the page was last put at the head of the old sublist (the midpoint).
    old_seq: Vec<u64>,
    /// Pages removed from the list so far (InnoDB's freed_page_clock).
    freed: u64,
    old_pct: usize,
    old_time_ms: u64,
    hints: Arc<LruHints>,
}

impl Lru {
    /// An empty list over the `nframes` frames from `base` on.
    pub fn new(base: FrameId, nframes: usize, old_pct: usize, old_time_ms: u64) -> Self {
        Lru {
            base,
            young: List::new(),
            old: List::new(),
            prev: vec![NIL; nframes],
            next: vec![NIL; nframes],
            which: vec![Which::None; nframes],
            first_access_ms: vec![0; nframes],
            young_seq: vec![0; nframes],
            old_seq: vec![0; nframes],
            freed: 0,
            old_pct,
            old_time_ms,
            hints: Arc::new(LruHints {
                state: (0..nframes).map(|_| AtomicU64::new(0)).collect(),
                young_cutoff: AtomicU64::new(0),
                old_time_ms,
                old_seq: (0..nframes).map(|_| AtomicU64::new(0)).collect(),
                freed: AtomicU64::new(0),
            }),
        }
    }

    /// The hints a hit reads without the mutex.
    pub fn hints(&self) -> Arc<LruHints> {
        self.hints.clone()
    }

    /// Publishes frame slot `x`'s sublist and stamp.
    fn publish(&self, x: usize) {
        let s = match self.which[x] {
            Which::None => 0,
            Which::Young => TAG_YOUNG | (self.young_seq[x] & VALUE_MASK),
            Which::Old => {
                self.hints.old_seq[x].store(self.old_seq[x], Ordering::Relaxed);
                TAG_OLD | (self.first_access_ms[x] & VALUE_MASK)
            }
        };
        self.hints.state[x].store(s, Ordering::Relaxed);
    }

    /// Publishes the young stamp cutoff (after the list or the clock changed).
    fn publish_cutoff(&self) {
        let cutoff = self.freed.saturating_sub(self.young.len as u64 / 4);
        self.hints.young_cutoff.store(cutoff, Ordering::Relaxed);
        self.hints.freed.store(self.freed, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.young.len + self.old.len
    }

    pub fn old_len(&self) -> usize {
        self.old.len
    }

    /// Where frame `i`'s entries are in the per-frame arrays.
    fn at(&self, i: FrameId) -> usize {
        i.offset_from(self.base)
    }

    pub fn contains(&self, i: FrameId) -> bool {
        self.which[self.at(i)] != Which::None
    }

    fn list(&mut self, w: Which) -> &mut List {
        match w {
            Which::Young => &mut self.young,
            Which::Old => &mut self.old,
            Which::None => unreachable!("frame not on the LRU list"),
        }
    }

    fn unlink(&mut self, i: FrameId) {
        let x = self.at(i);
        let w = self.which[x];
        let (p, n) = (self.prev[x], self.next[x]);
        if p != NIL {
            let px = self.at(p);
            self.next[px] = n;
        } else {
            self.list(w).head = n;
        }
        if n != NIL {
            let nx = self.at(n);
            self.prev[nx] = p;
        } else {
            self.list(w).tail = p;
        }
        self.list(w).len -= 1;
        self.which[x] = Which::None;
        self.prev[x] = NIL;
        self.next[x] = NIL;
        self.publish(x);
    }

    fn push_front(&mut self, w: Which, i: FrameId) {
        let x = self.at(i);
        let head = self.list(w).head;
        self.prev[x] = NIL;
        self.next[x] = head;
        if head != NIL {
            let hx = self.at(head);
            self.prev[hx] = i;
        }
        let l = self.list(w);
        l.head = i;
        if l.tail == NIL {
            l.tail = i;
        }
        l.len += 1;
        self.which[x] = w;
        match w {
            Which::Young => self.young_seq[x] = self.freed,
            _ => self.old_seq[x] = self.freed,
        }
        self.publish(x);
    }

    fn push_back(&mut self, w: Which, i: FrameId) {
        let x = self.at(i);
        let tail = self.list(w).tail;
        self.next[x] = NIL;
        self.prev[x] = tail;
        if tail != NIL {
            let tx = self.at(tail);
            self.next[tx] = i;
        }
        let l = self.list(w);
        l.tail = i;
        if l.head == NIL {
            l.head = i;
        }
        l.len += 1;
        self.which[x] = w;
        self.publish(x);
    }

    /// Keeps the old sublist at old_pct of the list by moving pages across the midpoint.
    fn rebalance(&mut self) {
        let target = self.len() * self.old_pct / 100;
        while self.old.len > target + 1 {
            let i = self.old.head;
            self.unlink(i);
            self.push_back(Which::Young, i);
        }
        while self.old.len < target && self.young.len > 0 {
            let i = self.young.tail;
            self.unlink(i);
            self.push_front(Which::Old, i);
        }
    }

    /// A page just read from disk: insert at the midpoint.
    pub fn insert_new(&mut self, i: FrameId, now_ms: u64) {
        debug_assert!(!self.contains(i));
        let x = self.at(i);
        self.first_access_ms[x] = now_ms;
        self.push_front(Which::Old, i);
        self.rebalance();
        self.publish_cutoff();
    }

    /// A page found in the pool was accessed again.
    pub fn touch(&mut self, i: FrameId, now_ms: u64) -> Touch {
        let x = self.at(i);
        match self.which[x] {
            Which::Old => {
                if now_ms.saturating_sub(self.first_access_ms[x]) >= self.old_time_ms {
                    self.unlink(i);
                    self.push_front(Which::Young, i);
                    self.rebalance();
                    self.publish_cutoff();
                    Touch::MadeYoung
                } else {
                    Touch::NotYoung
                }
            }
            Which::Young => {
                if self.young_seq[x] + (self.young.len as u64 / 4) < self.freed {
                    self.unlink(i);
                    self.push_front(Which::Young, i);
                    Touch::MadeYoung
                } else {
                    Touch::AlreadyYoung
                }
            }
            Which::None => Touch::AlreadyYoung,
        }
    }

    /// Whether frame `i` holds a cold page: in the old sublist (not touched again since
    /// old_blocks_time after it came in), and pages have left the list since it was put at
    /// the midpoint (InnoDB's freed_page_clock moved): the pool is evicting, and this page is
    /// on its way to the tail. Never true while nothing is evicted (a working set that fits
    /// the pool).
    pub fn is_cold(&self, i: FrameId) -> bool {
        let x = self.at(i);
        self.which[x] == Which::Old && self.freed > self.old_seq[x]
    }

    pub fn remove(&mut self, i: FrameId) {
        if self.contains(i) {
            self.unlink(i);
            self.freed += 1;
            self.rebalance();
            self.publish_cutoff();
        }
    }

    /// Frames from the cold end: old tail first, then young tail, up to `depth`.
    pub fn tail_iter(&self, depth: usize) -> impl Iterator<Item = FrameId> + '_ {
        let mut cur = if self.old.tail != NIL {
            self.old.tail
        } else {
            self.young.tail
        };
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let i = cur;
            let x = self.at(i);
            cur = self.prev[x];
            if cur == NIL && self.which[x] == Which::Old {
                cur = self.young.tail;
            }
            Some(i)
        })
        .take(depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoint_insertion_and_scan_resistance() {
        let mut lru = Lru::new(FrameId(0), 100, 37, 1000);
        for i in 0..100 {
            lru.insert_new(FrameId(i), 0);
        }
        assert_eq!(lru.len(), 100);
        let old = lru.old_len();
        assert!((36..=38).contains(&old), "old sublist {old}");
        // touched too soon: stays old
        assert_eq!(lru.touch(FrameId(99), 10), Touch::NotYoung);
        // touched after old_blocks_time: made young, no longer near the tail
        assert_eq!(lru.touch(FrameId(99), 2000), Touch::MadeYoung);
        let tail: Vec<FrameId> = lru.tail_iter(100).collect();
        assert_eq!(tail.len(), 100);
        assert_eq!(*tail.last().unwrap_or(&NIL), FrameId(99));
        // the first pages inserted are the coldest
        assert_eq!(tail[0], FrameId(0));
        let mut sorted = tail.clone();
        sorted.sort();
        assert_eq!(sorted, (0..100).map(FrameId).collect::<Vec<_>>());
    }

    #[test]
    fn young_pages_move_only_after_evictions_and_hints_agree() {
        let mut lru = Lru::new(FrameId(0), 100, 37, 1000);
        let hints = lru.hints();
        for i in 0..100 {
            lru.insert_new(FrameId(i), 0);
        }
        // an old page: the clock is asked, and before old_blocks_time nothing moves
        let x = lru.tail_iter(1).next().unwrap_or(NIL);
        let mut asked = false;
        let peek = hints.peek(x.index(), || {
            asked = true;
            10
        });
        assert!(asked);
        assert_eq!(peek, Peek::NotYoung);
        assert_eq!(lru.touch(x, 10), Touch::NotYoung);
        assert_eq!(hints.peek(x.index(), || 2000), Peek::Move);
        assert_eq!(lru.touch(x, 2000), Touch::MadeYoung);
        // young, and nothing evicted since: no move however many hits, no clock
        let young: Vec<FrameId> = (0..100)
            .map(FrameId)
            .filter(|&f| lru.which[f.index()] == Which::Young)
            .collect();
        assert!(young.len() > 50);
        for &f in &young {
            assert_eq!(
                hints.peek(f.index(), || unreachable!("clock read for a young page")),
                Peek::Young
            );
            assert_eq!(lru.touch(f, 5000), Touch::AlreadyYoung);
        }
        // a quarter of the young sublist evicted: pages made young before are moved on a hit
        let quarter = lru.young.len / 4 + 1;
        let victims: Vec<FrameId> = lru.tail_iter(quarter).collect();
        for v in victims {
            lru.remove(v);
        }
        assert!(lru.contains(x));
        assert_eq!(hints.peek(x.index(), || 5000), Peek::Move);
        assert_eq!(lru.touch(x, 5000), Touch::MadeYoung);
        assert_eq!(hints.peek(x.index(), || 5000), Peek::Young);
        // a removed page is on no list
        let gone = lru.tail_iter(1).next().unwrap_or(NIL);
        lru.remove(gone);
        assert_eq!(hints.peek(gone.index(), || 0), Peek::Young);
    }

    #[test]
    fn old_pages_are_cold_only_once_the_list_evicts_and_hints_agree() {
        let mut lru = Lru::new(FrameId(0), 100, 37, 1000);
        let hints = lru.hints();
        for i in 0..90 {
            lru.insert_new(FrameId(i), 0);
        }
        let cold = |lru: &Lru, f: FrameId| {
            let c = lru.is_cold(f);
            assert_eq!(c, hints.may_be_cold(f.index()), "hints disagree on {f}");
            c
        };
        // a pool that has evicted nothing has no cold page, old or young
        assert!((0..90).all(|i| !cold(&lru, FrameId(i))));
        lru.touch(FrameId(89), 2000);
        assert_eq!(lru.which[89], Which::Young);
        // the pool evicts its tail: the old pages that were there before are cold, young
        // ones are not
        let tail = lru.tail_iter(1).next().unwrap_or(NIL);
        lru.remove(tail);
        let old: Vec<FrameId> = (0..90)
            .map(FrameId)
            .filter(|&f| lru.which[f.index()] == Which::Old)
            .collect();
        assert!(!old.is_empty());
        assert!(old.iter().all(|&f| cold(&lru, f)));
        assert!(!cold(&lru, FrameId(89)));
        // a page read in now is not cold until the list evicts again
        lru.insert_new(FrameId(95), 3000);
        assert!(!cold(&lru, FrameId(95)));
        let tail = lru.tail_iter(1).next().unwrap_or(NIL);
        lru.remove(tail);
        assert!(cold(&lru, FrameId(95)));
        // made young, it is no longer cold
        lru.touch(FrameId(95), 5000);
        assert!(!cold(&lru, FrameId(95)));
        assert!(!cold(&lru, tail), "a removed page");
    }

    #[test]
    fn remove_keeps_lists_consistent() {
        // frames 20..30: an instance that does not start at frame 0
        let mut lru = Lru::new(FrameId(20), 10, 50, 0);
        for i in 20..30 {
            lru.insert_new(FrameId(i), 0);
        }
        for i in (20..30).step_by(2) {
            lru.remove(FrameId(i));
        }
        let mut rest: Vec<FrameId> = lru.tail_iter(10).collect();
        rest.sort();
        assert_eq!(rest, [21, 23, 25, 27, 29].map(FrameId));
        assert!(lru.old_len() <= 3);
    }
}
