//! ahi: the adaptive hash index (InnoDB's `btr_search_guess_on_hash`): a guess, from a hash
//! of a point get's tree and key, of the buffer-pool frame holding the leaf, and the slot,
//! where a get last found the key, so that the next get of that key can go to its leaf
//! without the descent and without the page-table lookup (InnoDB's entries point at the
//! record in the frame likewise).
//!
//! What it owns: one fixed table of [`WAYS`]-way sets of 8-byte entries, allocated once at
//! open (one entry per [`POOL_BYTES_PER_ENTRY`] bytes of buffer pool, a power of two), shared
//! by every tree (the tree id is hashed with the key). An entry packs a 16-bit tag of the
//! hash, the slot and the frame index into one `AtomicU64`, so readers and writers need no lock
//! and never see a torn entry. The table is a cache: a full set evicts a way, a collision
//! of two keys only costs a miss, and hostile keys can do no worse than empty it.
//!
//! What must stay true: a guess is only a hint. [`Tree::get`](super::Tree::get) verifies it
//! against the page it latches (see `Tree::get_guessed` for every way a guess goes stale and
//! the check that catches it) and, when it fails, descends as if there were no entry. So
//! nothing that changes a tree or the pool maintains this table: puts, deletes, splits,
//! merges, drops, page reuse, eviction and frame reuse leave entries stale, and the reader
//! pays for a stale one with one latch of the frame (`BufferPool::read_frame`, which latches
//! only a frame that holds a page now).
//!
//! Never: return a value from the table itself, or hold a latch while consulting it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Ways of a set; the set's entries share half a cache line, so a lookup touches one line.
pub const WAYS: usize = 4;

/// Bytes of buffer pool per table entry (8 bytes): the table takes 1/16 of the pool. At one
/// entry per 256 bytes, 1 M uniformly drawn keys over a 256 MiB pool hit 82% of the time (4-way
/// sets fill); at 128, 97% (docs/measurements.md, "Point gets: the guessed frame").
pub const POOL_BYTES_PER_ENTRY: u64 = 128;

/// The fewest sets a table has, whatever the pool's size.
const MIN_SETS: usize = 64;

crate::counter::counter_group! {
    /// Point gets and the adaptive hash index (`adaptive_hash_index`).
    pub struct AdaptiveHashCounters => AdaptiveHashCounts named "adaptive_hash_" {
        /// Point gets answered from the leaf the adaptive hash index guessed (no descent).
        hits: "gets" hot,
        /// Point gets for which the adaptive hash index held no entry (they descended).
        misses: "gets" hot,
        /// Point gets whose guessed leaf no longer held the key as a leaf of the tree (the
        /// entry was stale; they descended).
        failed_guesses: "gets",
    }
}

/// Where a key was: the frame that held its leaf, its slot there, and the entry it came
/// from (to drop it when it turns out stale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guess {
    pub frame: u32,
    pub slot: usize,
    /// Where the key's cell was in the page, to the cache line (0: not known).
    pub cell: usize,
    entry: u64,
}

#[repr(align(32))]
#[derive(Default)]
struct Set([AtomicU64; WAYS]);

const _: () = assert!(std::mem::size_of::<Set>() == 32);

pub struct AdaptiveHash {
    sets: Box<[Set]>,
    /// `sets.len() - 1` (the length is a power of two).
    mask: u64,
    pub counters: AdaptiveHashCounters,
}

/// An entry: tag in bits 48..64 (never 0, so 0 is an empty way), the cache line of the
/// key's cell in the page in 38..48 (0: not known; a page's first line is its header, never
/// a cell), slot in 26..38, frame index in 0..26. The cell's line lets a get ask the CPU for
/// the frame's descriptor, the page's slot and the cell at once instead of one after another
/// (`Tree::get_guessed`). A slot or a frame too large for its bits is not recorded: 4,096
/// slots hold more cells than a 64 KiB page can, and 2^26 frames of 16 KiB are 1 TiB.
fn pack(tag: u16, frame: u32, slot: u16, line: u16) -> u64 {
    u64::from(tag) << 48
        | u64::from(line & LINE_MASK) << 38
        | u64::from(slot & SLOT_MASK) << 26
        | u64::from(frame & FRAME_MASK)
}

const FRAME_MASK: u32 = (1 << 26) - 1;
const SLOT_MASK: u16 = (1 << 12) - 1;
const LINE_MASK: u16 = (1 << 10) - 1;

fn tag_of(hash: u64) -> u16 {
    (hash >> 48) as u16 | 1
}

fn entry_tag(e: u64) -> u16 {
    (e >> 48) as u16
}

const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xBF58_476D_1CE4_E5B9;

/// The 128-bit product's halves xored: a cheap mix of two words.
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    p as u64 ^ (p >> 64) as u64
}

/// The hash of a point get: its tree and its full key. Not keyed: colliding keys only share
/// a set (see the module comment).
pub fn hash(tree: u32, key: &[u8]) -> u64 {
    let mut h = fold(u64::from(tree) ^ K0, key.len() as u64 ^ K1);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = fold(h ^ u64::from_le_bytes(b), K1);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = fold(h ^ u64::from_le_bytes(b), K0);
    }
    fold(h, K1 ^ K0)
}

impl AdaptiveHash {
    /// A table for a buffer pool of `pool_bytes`: one entry per [`POOL_BYTES_PER_ENTRY`]
    /// bytes, rounded down to a power of two of sets (at least [`MIN_SETS`]).
    pub fn for_pool(pool_bytes: u64) -> Self {
        let want = (pool_bytes / POOL_BYTES_PER_ENTRY / WAYS as u64).max(MIN_SETS as u64);
        let sets = 1u64 << (63 - want.leading_zeros());
        Self::with_sets(usize::try_from(sets).unwrap_or(usize::MAX / 2 + 1))
    }

    /// A table of `sets` sets (a power of two).
    pub fn with_sets(sets: usize) -> Self {
        assert!(sets.is_power_of_two(), "{sets} sets: not a power of two");
        AdaptiveHash {
            sets: (0..sets).map(|_| Set::default()).collect(),
            mask: sets as u64 - 1,
            counters: AdaptiveHashCounters::default(),
        }
    }

    /// Entries the table holds at most.
    pub fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    fn set(&self, hash: u64) -> &Set {
        // the mask keeps the index below sets.len()
        &self.sets[(hash & self.mask) as usize]
    }

    /// The guess for `hash`, if the table holds one.
    pub fn lookup(&self, hash: u64) -> Option<Guess> {
        let tag = tag_of(hash);
        self.set(hash).0.iter().find_map(|w| {
            let e = w.load(Ordering::Relaxed);
            (entry_tag(e) == tag).then_some(Guess {
                frame: e as u32 & FRAME_MASK,
                slot: usize::from((e >> 26) as u16 & SLOT_MASK),
                cell: usize::from((e >> 38) as u16 & LINE_MASK) * 64,
                entry: e,
            })
        })
    }

    /// Records that the key of `hash` was found at `slot` of the leaf in frame `frame`, its
    /// cell at byte `cell` of the page: replaces the key's entry, else takes an empty way,
    /// else evicts one. A slot or frame past its bits is not recorded (see [`pack`]).
    pub fn record(&self, hash: u64, frame: u32, slot: usize, cell: usize) {
        let slot = match u16::try_from(slot) {
            Ok(s) if s <= SLOT_MASK && frame <= FRAME_MASK => s,
            _ => return,
        };
        let line = u16::try_from(cell / 64).map_or(0, |l| if l > LINE_MASK { 0 } else { l });
        let tag = tag_of(hash);
        let new = pack(tag, frame, slot, line);
        let ways = &self.set(hash).0;
        let mut empty = None;
        for w in ways {
            let e = w.load(Ordering::Relaxed);
            if entry_tag(e) == tag {
                if e != new {
                    w.store(new, Ordering::Relaxed);
                }
                return;
            }
            if e == 0 && empty.is_none() {
                empty = Some(w);
            }
        }
        // the victim varies with the frame and slot, so two keys of one set that keep
        // evicting each other do not always pick the same way
        let victim = ((hash >> 32) ^ u64::from(frame) ^ u64::from(slot)) as usize % WAYS;
        empty.unwrap_or(&ways[victim]).store(new, Ordering::Relaxed);
    }

    /// Drops the entry `g` came from, unless another thread replaced it meanwhile.
    pub fn forget(&self, hash: u64, g: Guess) {
        for w in &self.set(hash).0 {
            if w.compare_exchange(g.entry, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_finds_a_guess_and_forgets_it() {
        let t = AdaptiveHash::with_sets(64);
        let h = hash(7, b"apple");
        assert_eq!(t.lookup(h), None);
        t.record(h, 42, 3, 0);
        let g = t.lookup(h).expect("recorded");
        assert_eq!((g.frame, g.slot), (42, 3));
        // a newer position replaces the entry instead of taking a second way
        t.record(h, 43, 0, 0);
        let g2 = t.lookup(h).expect("recorded");
        assert_eq!((g2.frame, g2.slot), (43, 0));
        let used = t.set(h).0.iter().filter(|w| w.load(Ordering::Relaxed) != 0);
        assert_eq!(used.count(), 1);
        // forgetting a stale guess does not drop the newer entry
        t.forget(h, g);
        assert_eq!(t.lookup(h), Some(g2));
        t.forget(h, g2);
        assert_eq!(t.lookup(h), None);
    }

    #[test]
    fn the_tree_id_and_every_key_byte_change_the_hash() {
        assert_ne!(hash(1, b"k"), hash(2, b"k"));
        assert_ne!(hash(1, b"k"), hash(1, b"k\0"));
        let key = b"0123456789abcdefXYZ".to_vec();
        for i in 0..key.len() {
            let mut k = key.clone();
            k[i] ^= 1;
            assert_ne!(hash(1, &k), hash(1, &key), "byte {i}");
        }
    }

    #[test]
    fn a_full_set_evicts_and_the_table_never_grows() {
        let t = AdaptiveHash::with_sets(64);
        // 1,000 keys into 256 entries: every set fills, and what is found is what was
        // recorded for that key
        let keys: Vec<u64> = (0..1000u32).map(|i| hash(1, &i.to_be_bytes())).collect();
        for (i, &h) in keys.iter().enumerate() {
            t.record(h, i as u32, i % 100, 0);
        }
        let mut found = 0;
        for (i, &h) in keys.iter().enumerate() {
            if let Some(g) = t.lookup(h) {
                // a tag collision may answer for another key: only the verified leaf decides
                if g.frame == i as u32 {
                    assert_eq!(g.slot, i % 100);
                    found += 1;
                }
            }
        }
        assert!(found <= t.capacity(), "{found} found in {}", t.capacity());
        assert!(
            found >= t.capacity() / 2,
            "only {found} of the last keys kept"
        );
        assert_eq!(t.capacity(), 256);
    }

    #[test]
    fn the_table_is_sized_from_the_pool() {
        // 256 MiB / 128 bytes = 2 Mi entries
        assert_eq!(AdaptiveHash::for_pool(256 << 20).capacity(), 2 << 20);
        // rounded down to a power of two of sets
        assert_eq!(AdaptiveHash::for_pool(384 << 20).capacity(), 2 << 20);
        assert_eq!(AdaptiveHash::for_pool(256 << 10).capacity(), 2048);
        assert_eq!(AdaptiveHash::for_pool(4096).capacity(), MIN_SETS * WAYS);
    }

    #[test]
    fn an_oversized_slot_is_not_recorded() {
        let t = AdaptiveHash::with_sets(64);
        let h = hash(1, b"x");
        t.record(h, 5, 70_000, 640);
        assert_eq!(t.lookup(h), None);
        t.record(h, 5, 4_096, 640);
        assert_eq!(t.lookup(h), None);
        t.record(h, 1 << 26, 3, 640);
        assert_eq!(t.lookup(h), None);
        t.record(h, (1 << 26) - 1, 4_095, 65_535);
        let g = t.lookup(h).expect("recorded");
        assert_eq!((g.frame, g.slot, g.cell), ((1 << 26) - 1, 4_095, 65_472));
    }
}
