//! lru: InnoDB's LRU list with midpoint insertion, for one buffer-pool instance.
//!
//! The list is young (head, hot) followed by old (tail, cold). A page read from disk enters at
//! the head of the old sublist (the midpoint), so a scan cannot flush the hot set; it is made
//! young only when touched again at least `old_blocks_time` ms after its first access. The old
//! sublist is kept at `old_blocks_pct` of the list. A young page is moved to the head only when
//! it has drifted into the older quarter of the young sublist, to avoid churning the list on
//! every hit (InnoDB's buf_page_peek_if_too_old).
//!
//! Entries are the instance's frames, from `base` on; the caller holds the instance mutex.

use crate::types::FrameId;

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
    young_seq: Vec<u64>,
    seq: u64,
    old_pct: usize,
    old_time_ms: u64,
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
            seq: 0,
            old_pct,
            old_time_ms,
        }
    }

    pub fn len(&self) -> usize {
        self.young.len + self.old.len
    }

    #[cfg(test)]
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
        if w == Which::Young {
            self.seq += 1;
            self.young_seq[x] = self.seq;
        }
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
                    Touch::MadeYoung
                } else {
                    Touch::NotYoung
                }
            }
            Which::Young => {
                if self.young_seq[x] + (self.young.len as u64 / 4) < self.seq {
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

    pub fn remove(&mut self, i: FrameId) {
        if self.contains(i) {
            self.unlink(i);
            self.rebalance();
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
