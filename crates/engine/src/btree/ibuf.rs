//! ibuf: the change buffer (InnoDB's insert buffer). A put or delete to an index table whose
//! target leaf is not in the buffer pool is recorded in a B+tree of its own instead of reading
//! the leaf; the changes are merged into the leaf when something reads it, and in the
//! background at a rate tied to `io_capacity` (shared.rs runs that thread), the leaves with
//! the most changes first ([`ChangeBuffer::fullest`]).
//!
//! **A cold cached leaf is dropped, not dirtied.** Unlike InnoDB, a change whose leaf is
//! cached but clean and cold (in the LRU's old sublist of a pool that is evicting:
//! `Lru::is_cold`) drops the leaf from the pool (a clean page costs nothing to drop) and is
//! buffered. Applied directly, the change would dirty a page the LRU is about to evict, and
//! that page would then be written for the one change; buffered, it is merged with the leaf's
//! other changes when the leaf is next read (docs/measurements.md, "Cold cached leaves").
//!
//! **Which tables.** Only key-set trees ([`Tree::key_set`], made by
//! `Database::create_index_table`): every value is empty, a put inserts a key the table does
//! not hold and a delete removes one it holds (InnoDB's secondary index, whose key includes
//! the primary key). A commit records each key's before-image for read views (mvcc.rs), which
//! for such a table is known without the leaf (put: absent, delete: present and empty), so
//! neither the commit nor the apply has to read the leaf. The contract is checked where it is
//! cheap: a buffered insert of a key the leaf holds, or delete of a key it does not, is found
//! at merge, counted (`contract_violations`) and the leaf ends as the change says.
//!
//! **The tree.** An ordinary B+tree (a table id of its own, its root in the catalog under a
//! reserved name) keyed by (table id, leaf page number, sequence), all big-endian, whose value
//! is the operation (1 insert, 2 delete) followed by the key. Every change to it and every
//! merge is an mtr with redo like any page, so crash safety and recovery come with the pages.
//! A merge step is one mtr that changes the leaf and deletes the entries it applied; the
//! sequence keeps a page's changes in the order they were made (per key that is commit order:
//! a key's next writer waits for the previous one's key lock). Recovery's re-apply of a COMMIT
//! without ApplyDone first reads each key (which merges its leaf) and skips what is in place,
//! so buffering again what a crash cut is harmless.
//!
//! **The invariant: a leaf is used only when the change buffer holds nothing for it.** Every
//! path of btree/ that latches a leaf of a key-set tree calls `Tree::guard_leaf` before it
//! uses the page; a leaf with buffered changes makes the operation let go of every latch and
//! merge them first (`Tree::merge_leaf`). Changes are buffered only for a leaf that is not
//! in the page table. The race between "not resident, buffer" (A) and "read in, check" (B) is
//! closed as Dekker's: A counts its entry for the page (under the page's shard lock), then a
//! SeqCst fence, then asks the page table; B's fetch puts the page in the page table, then
//! `guard_leaf` fences and reads the count. One of them sees the other: A finds the page
//! resident and applies directly, or B finds the count and merges. A holds the page's stripe
//! lock while it inserts its entry, and a merge takes the same stripe, so a merge never runs
//! between A's count and A's entry. A pinned page cannot be evicted, so while B holds the
//! latch nothing can be buffered for it. A page read ahead is resident without a check, which
//! is fine: nothing is buffered for a resident page, and its first user merges.
//!
//! **Free space.** An insert is buffered only when the leaf is known to have room for it and
//! every insert already buffered for it: each time a key-set leaf is latched (`guard_leaf`)
//! and before every mtr that changed one commits (`note_leaves`), its free bytes are noted;
//! buffered inserts reserve their cell and slot from that. A leaf whose free space is not
//! known (not touched since open) takes no buffered insert, so a merge never needs a split.
//! Deletes need no room; a merge that empties a leaf frees it afterwards as a delete does.
//!
//! **Lock order**: the tree's SMO latch, a stripe, the leaf's latch, the change buffer tree's
//! SMO latch and its pages. Buffering takes no leaf latch at all; a reader that finds changes
//! lets go of everything before it merges.

use super::{Ctx, Stop, Tree, TreeCounters, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::mtr::Mtr;
use crate::page::{hdr, node, PageType, PAGE_HEADER_SIZE, PAGE_TRAILER_SIZE};
use crate::types::PageId;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// The catalog key of the change buffer tree's entry (a control character first, so it names
/// no table).
pub const CATALOG_KEY: &[u8] = b"\0ibuf";

/// What `change_buffering` lets the change buffer take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeBuffering {
    None = 0,
    Inserts = 1,
    Deletes = 2,
    All = 3,
}

impl ChangeBuffering {
    /// The names `change_buffering` takes, in the order of the variants.
    pub const NAMES: &'static [&'static str] = crate::options::CHANGE_BUFFERING_NAMES;

    pub fn from_index(i: usize) -> ChangeBuffering {
        match i {
            0 => ChangeBuffering::None,
            1 => ChangeBuffering::Inserts,
            2 => ChangeBuffering::Deletes,
            _ => ChangeBuffering::All,
        }
    }

    fn takes(self, op: Op) -> bool {
        matches!(
            (self, op),
            (ChangeBuffering::All, _)
                | (ChangeBuffering::Inserts, Op::Insert)
                | (ChangeBuffering::Deletes, Op::Delete)
        )
    }
}

/// A buffered change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Insert = 1,
    Delete = 2,
}

/// Who merged a leaf's changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MergeBy {
    /// An operation reached the leaf (a get, a scan, a write).
    Read,
    /// The background merge (and the merge of everything at shutdown).
    Background,
}

crate::counter::counter_group! {
    /// The change buffer (btree/ibuf.rs): changes to index-table leaves that were not in the
    /// buffer pool, recorded instead of reading the leaf.
    pub struct ChangeBufferCounters => ChangeBufferCounts named "change_buffer_" {
        /// Inserts recorded in the change buffer instead of reading their leaf.
        inserts_buffered: "changes",
        /// Deletes recorded in the change buffer instead of reading their leaf.
        deletes_buffered: "changes",
        /// Buffered changes applied to their leaves.
        merged: "changes",
        /// Leaves whose buffered changes were merged because an operation reached the leaf.
        merges_by_read: "pages",
        /// Leaves whose buffered changes the background merge applied.
        merges_by_background: "pages",
        /// Index-table changes applied directly because the change buffer was at or near
        /// change_buffer_max_size (all at it, a share rising from none at 9/10 of it; applied
        /// directly whether or not their leaf was in the pool).
        full_skips: "changes",
        /// Buffered inserts of a key the leaf held, or deletes of a key it did not hold, met
        /// at merge (an index table's contract broken by the caller); the leaf ends as the
        /// change says.
        contract_violations: "changes",
        /// Changes in the change buffer now.
        entries: "changes" gauge,
        /// Leaves with buffered changes now.
        pages_with_changes: "pages" gauge,
        /// Pages of the change buffer's tree now.
        tree_pages: "pages" gauge,
        /// Leaves of the change buffer's tree that merges left at most a quarter full, whose
        /// entries moved into a neighbour so the leaf could be freed.
        thin_leaves_joined: "pages",
    }
}

/// Entries one merge mtr applies at most (a leaf with more is merged in several mtrs, each
/// applying the oldest ones, while the stripe keeps new ones out).
const MERGE_BATCH: usize = 256;
/// Leaves `merge_all` merges under one log reservation.
const MERGE_ALL_LEAVES: usize = 8;
/// Pages of redo one leaf's merge may log: the leaf, the change buffer's leaf, and a join or
/// a free of either (its neighbour or the file header).
const MERGE_REDO_PAGES_PER_LEAF: u64 = 4;

/// Shards of the per-page map and stripes of the buffering lock.
const SHARDS: usize = 64;

/// The per-page map's shards: (table id, page number) -> what is known of the leaf.
type PageShards = Box<[Mutex<HashMap<(u32, u32), PageInfo>>]>;

/// What is known about one leaf of a key-set tree.
#[derive(Default, Clone, Copy)]
struct PageInfo {
    /// Free bytes when it was last latched or changed; None: not known since open.
    free: Option<u32>,
    /// Buffered changes.
    entries: u32,
    /// Bytes (cells and slots) the buffered inserts will take.
    reserved: u32,
}

/// The bytes a change buffer entry takes in its leaf (cell and slot).
fn entry_bytes(key: &[u8], value: &[u8]) -> u64 {
    (node::CELL_HEADER + key.len() + value.len() + node::SLOT_SIZE) as u64
}

/// The bytes an insert of `key` (empty value) takes in a leaf.
fn insert_cell(key: &[u8]) -> u32 {
    (node::CELL_HEADER + key.len() + node::SLOT_SIZE) as u32
}

fn entry_prefix(table: u32, pid: PageId) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&table.to_be_bytes());
    k[4..].copy_from_slice(&pid.0.to_be_bytes());
    k
}

fn entry_key(table: u32, pid: PageId, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&entry_prefix(table, pid));
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// (table, page, sequence) of an entry's key.
pub fn decode_key(k: &[u8]) -> Option<(u32, PageId, u64)> {
    if k.len() != 16 {
        return None;
    }
    Some((
        u32::from_be_bytes(k[..4].try_into().ok()?),
        PageId(u32::from_be_bytes(k[4..8].try_into().ok()?)),
        u64::from_be_bytes(k[8..].try_into().ok()?),
    ))
}

/// (operation, key) of an entry's value.
pub(crate) fn decode_value(v: &[u8]) -> Option<(Op, &[u8])> {
    let (&op, key) = v.split_first()?;
    let op = match op {
        1 => Op::Insert,
        2 => Op::Delete,
        _ => return None,
    };
    Some((op, key))
}

/// Whether `v` is a well-formed entry value; (is an insert, the key) when it is.
pub fn decode_entry_value(v: &[u8]) -> Option<(bool, &[u8])> {
    decode_value(v).map(|(op, k)| (op == Op::Insert, k))
}

/// The bytes a buffered insert of `key` reserves in its leaf (for check.rs).
pub fn insert_reservation(key: &[u8]) -> usize {
    insert_cell(key) as usize
}

fn entry_value(op: Op, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + key.len());
    v.push(op as u8);
    v.extend_from_slice(key);
    v
}

/// The change buffer of one open database.
pub struct ChangeBuffer {
    /// The tree of buffered changes.
    pub(crate) tree: Tree,
    tree_counters: Arc<TreeCounters>,
    /// Pages of the tree at open (its counters start at zero then).
    base_pages: u64,
    pages: PageShards,
    stripes: Box<[Mutex<()>]>,
    next_seq: AtomicU64,
    mode: AtomicU8,
    /// The most pages the tree may have before changes are applied directly.
    max_pages: AtomicU64,
    /// Key-set trees by table id (the background merge resolves entries through it).
    trees: RwLock<HashMap<u32, Arc<Tree>>>,
    /// Where the background merge continues (the last entry key it saw).
    cursor: Mutex<Vec<u8>>,
    /// Changes that met the soft limit ([`ChangeBuffer::wants`]): the index of the evenly
    /// spread sequence that decides which are applied directly.
    gate: AtomicU64,
    /// Bytes (cells and slots) and count of every entry buffered since open, and of the
    /// entries found at open: their mean is the size of an entry ([`ChangeBuffer::size`]).
    entry_bytes_seen: AtomicU64,
    entries_seen: AtomicU64,
    /// Bytes of a page a leaf's cells and slots can use.
    page_room: u64,
    writable: bool,
    pub counters: ChangeBufferCounters,
    /// Set at shutdown: the background merge stops.
    pub(crate) stop: AtomicBool,
}

impl ChangeBuffer {
    /// Loads the change buffer whose tree is `(id, root)`: counts every entry per leaf (so a
    /// miss learns from memory that a leaf has nothing buffered) and the tree's pages.
    pub fn load(cx: &Ctx<'_>, id: u32, root: PageId, writable: bool) -> Result<ChangeBuffer> {
        let tree_counters = Arc::new(TreeCounters::default());
        let tree = Tree::new(id, root, tree_counters.clone());
        let pages: PageShards = (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect();
        let counters = ChangeBufferCounters::default();
        let mut max_seq = 0;
        let (mut bytes_seen, mut seen) = (0u64, 0u64);
        let mut lower: Option<Vec<u8>> = None;
        loop {
            let lb = match &lower {
                Some(k) => Bound::Excluded(&k[..]),
                None => Bound::Unbounded,
            };
            let batch = tree.scan_batch(cx, lb, Bound::Unbounded, false, 1024)?;
            for (k, v) in &batch.rows {
                let bad = || {
                    Error::corrupt(
                        cx.pool.file().name(),
                        root.0,
                        "malformed change buffer entry",
                    )
                };
                let (table, pid, seq) = decode_key(k).ok_or_else(bad)?;
                let (op, key) = decode_value(v).ok_or_else(bad)?;
                max_seq = max_seq.max(seq);
                bytes_seen += entry_bytes(k, v);
                seen += 1;
                let mut m = pages[shard_of(pid)].lock();
                let info = m.entry((table, pid.0)).or_default();
                if info.entries == 0 {
                    counters.pages_with_changes.fetch_add(1, Ordering::Relaxed);
                }
                info.entries += 1;
                if op == Op::Insert {
                    info.reserved += insert_cell(key);
                }
                counters.entries.fetch_add(1, Ordering::Relaxed);
            }
            lower = batch.rows.last().map(|(k, _)| k.clone()).or(lower);
            if batch.done {
                break;
            }
        }
        let base_pages = count_pages(cx, &tree)?;
        Ok(ChangeBuffer {
            tree,
            tree_counters,
            base_pages,
            pages,
            stripes: (0..SHARDS).map(|_| Mutex::new(())).collect(),
            next_seq: AtomicU64::new(max_seq + 1),
            mode: AtomicU8::new(ChangeBuffering::All as u8),
            max_pages: AtomicU64::new(u64::MAX),
            trees: RwLock::new(HashMap::new()),
            cursor: Mutex::new(Vec::new()),
            gate: AtomicU64::new(0),
            entry_bytes_seen: AtomicU64::new(bytes_seen),
            entries_seen: AtomicU64::new(seen),
            page_room: (cx.pool.page_size() - PAGE_HEADER_SIZE - PAGE_TRAILER_SIZE) as u64,
            writable,
            counters,
            stop: AtomicBool::new(false),
        })
    }

    /// Applies the options: what may be buffered, and the most pages of the tree
    /// (`max_pct` percent of the `pool_pages` frames).
    pub fn configure(&self, mode: ChangeBuffering, max_pct: u64, pool_pages: u64) {
        self.mode.store(mode as u8, Ordering::Relaxed);
        self.max_pages
            .store(pool_pages * max_pct / 100, Ordering::Relaxed);
    }

    pub fn mode(&self) -> ChangeBuffering {
        ChangeBuffering::from_index(self.mode.load(Ordering::Relaxed) as usize)
    }

    /// The most pages the tree may have before changes are applied directly.
    pub fn max_pages(&self) -> u64 {
        self.max_pages.load(Ordering::Relaxed)
    }

    /// The table id of the change buffer's tree.
    pub fn table_id(&self) -> u32 {
        self.tree.id
    }

    /// Makes a key-set tree's entries mergeable by the background merge.
    pub fn register(&self, t: &Arc<Tree>) {
        if t.key_set {
            self.trees.write().insert(t.id, t.clone());
        }
    }

    pub fn unregister(&self, id: u32) {
        self.trees.write().remove(&id);
    }

    /// Pages of the change buffer's tree now.
    pub fn tree_pages(&self) -> u64 {
        let c = self.tree_counters.snapshot();
        (self.base_pages + c.page_splits + c.root_growths).saturating_sub(c.pages_freed)
    }

    /// Changes buffered now.
    pub fn entries(&self) -> u64 {
        self.counters.entries.load(Ordering::Relaxed)
    }

    /// The change buffer's size against `change_buffer_max_size`, in pages: the pages its
    /// entries would fill at [`ENTRY_FILL`] (their count times the mean entry's bytes).
    ///
    /// The tree's own page count is no measure of what is buffered: a split adds a page, but
    /// entries merged out of a leaf that keeps others free nothing, and a leaf is freed only
    /// when emptied, so the count can hold while the entries fall by half, and a share read
    /// off it keeps reading leaves for entries long merged. The entries fall as they are
    /// merged, so the share answers what is buffered now. The page count stays the hard
    /// bound ([`ChangeBuffer::wants`]).
    pub fn size(&self) -> f64 {
        let seen = self.entries_seen.load(Ordering::Relaxed);
        if seen == 0 {
            return 0.0;
        }
        let mean = self.entry_bytes_seen.load(Ordering::Relaxed) as f64 / seen as f64;
        self.entries() as f64 * mean / (self.page_room as f64 * ENTRY_FILL)
    }

    /// Counts an entry of `bytes` buffered, for the mean entry size.
    fn saw_entry(&self, bytes: u64) {
        self.entry_bytes_seen.fetch_add(bytes, Ordering::Relaxed);
        self.entries_seen.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ChangeBufferCounts {
        self.counters
            .tree_pages
            .store(self.tree_pages(), Ordering::Relaxed);
        self.counters.snapshot()
    }

    fn shard(&self, pid: PageId) -> &Mutex<HashMap<(u32, u32), PageInfo>> {
        &self.pages[shard_of(pid)]
    }

    fn stripe(&self, pid: PageId) -> &Mutex<()> {
        &self.stripes[shard_of(pid)]
    }

    /// `guard_leaf`'s question, asked with the leaf latched: does the change buffer hold
    /// changes for it? If not, notes its free bytes. The fence pairs with the one in
    /// `Tree::buffer_at` (the module comment).
    pub(crate) fn has_changes_latched(&self, table: u32, pid: PageId, free: usize) -> bool {
        fence(Ordering::SeqCst);
        let mut m = self.shard(pid).lock();
        match m.get_mut(&(table, pid.0)) {
            Some(i) if i.entries > 0 => true,
            Some(i) => {
                i.free = Some(free as u32);
                false
            }
            None => {
                if self.writable {
                    m.insert(
                        (table, pid.0),
                        PageInfo {
                            free: Some(free as u32),
                            ..PageInfo::default()
                        },
                    );
                }
                false
            }
        }
    }

    fn has_entries(&self, table: u32, pid: PageId) -> bool {
        self.shard(pid)
            .lock()
            .get(&(table, pid.0))
            .is_some_and(|i| i.entries > 0)
    }

    /// Notes the free bytes of a leaf an mtr changed (`Some`), or forgets a page that is no
    /// longer a leaf of the table (`None`).
    fn note(&self, table: u32, pid: PageId, free: Option<usize>) {
        let mut m = self.shard(pid).lock();
        match free {
            Some(f) => {
                m.entry((table, pid.0)).or_default().free = Some(f as u32);
            }
            None => {
                if m.get(&(table, pid.0)).is_some_and(|i| i.entries == 0) {
                    m.remove(&(table, pid.0));
                }
            }
        }
    }

    /// Whether a change `op` may be buffered now (the mode, the size limit).
    ///
    /// Past [`SOFT_LIMIT`] of the limit a growing share of changes is applied directly, from
    /// none there to all at the limit, spread evenly over the changes ([`refuse_share`]), the
    /// size measured by the entries ([`ChangeBuffer::size`]); all are when the tree's pages
    /// reach the limit.
    /// InnoDB stops buffering at its limit and starts again below it; when the workload
    /// buffers faster than the merge drains, that is a cycle of a second or two in which all
    /// changes are buffered (fast) and then none is (every change reads its leaf), and
    /// throughput follows it. With the share the size settles inside the band, where the
    /// changes applied directly and the merge together keep pace with the buffering, and
    /// each second mixes the two alike.
    pub(crate) fn wants(&self, op: Op) -> bool {
        if !self.writable || !self.mode().takes(op) {
            return false;
        }
        let max = self.max_pages();
        let share = if self.tree_pages() >= max {
            1.0
        } else {
            refuse_share(self.size(), max)
        };
        if share > 0.0 {
            let n = self.gate.fetch_add(1, Ordering::Relaxed);
            if share >= 1.0 || evenly_spread(n) < share {
                self.counters.full_skips.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        true
    }

    /// Counts a change `op` of `cell` bytes for the leaf, if it can take it.
    fn reserve(&self, table: u32, pid: PageId, op: Op, cell: u32) -> bool {
        let mut m = self.shard(pid).lock();
        let i = m.entry((table, pid.0)).or_default();
        if op == Op::Insert {
            match i.free {
                Some(free) if i.reserved + cell <= free => i.reserved += cell,
                _ => return false,
            }
        }
        if i.entries == 0 {
            self.counters
                .pages_with_changes
                .fetch_add(1, Ordering::Relaxed);
        }
        i.entries += 1;
        self.counters.entries.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn unreserve(&self, table: u32, pid: PageId, op: Op, cell: u32) {
        self.applied(table, pid, 1, if op == Op::Insert { cell } else { 0 }, None);
    }

    /// `n` changes of the leaf are gone from the tree, whose inserts had reserved `cells`
    /// bytes; `free` is the leaf's free space after a merge.
    fn applied(&self, table: u32, pid: PageId, n: u32, cells: u32, free: Option<usize>) {
        let mut m = self.shard(pid).lock();
        let i = m.entry((table, pid.0)).or_default();
        let n = n.min(i.entries);
        i.entries -= n;
        i.reserved = i.reserved.saturating_sub(cells);
        if let Some(f) = free {
            i.free = Some(f as u32);
        }
        if i.entries == 0 {
            i.reserved = 0;
            if n > 0 {
                self.counters
                    .pages_with_changes
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.counters
            .entries
            .fetch_sub(u64::from(n), Ordering::Relaxed);
    }

    /// Merges the buffered changes of up to `max_pages` leaves, from where the last call
    /// stopped (in the tree's order, wrapping around). Entries of a table that is gone are
    /// deleted. Returns the leaves merged.
    pub fn merge_some(&self, cx: &Ctx<'_>, max_pages: usize) -> Result<usize> {
        let mut found: Vec<(u32, PageId)> = Vec::new();
        let mut wrapped = false;
        while found.len() < max_pages {
            let from = self.cursor.lock().clone();
            let lower = if from.is_empty() {
                Bound::Unbounded
            } else {
                Bound::Excluded(&from[..])
            };
            let batch = self
                .tree
                .scan_batch(cx, lower, Bound::Unbounded, false, 256)?;
            for (k, _) in &batch.rows {
                if let Some((t, p, _)) = decode_key(k) {
                    if found.last() != Some(&(t, p)) && found.len() < max_pages {
                        found.push((t, p));
                    }
                }
            }
            let next = match batch.rows.last() {
                Some((k, _)) => {
                    // skip the rest of the last page's entries: its merge takes them all
                    let mut k = k.clone();
                    k[8..].fill(0xff);
                    k
                }
                None => Vec::new(),
            };
            *self.cursor.lock() = if batch.done { Vec::new() } else { next };
            if batch.done {
                if wrapped || from.is_empty() {
                    break;
                }
                wrapped = true;
            }
        }
        let mut merged = 0;
        for (table, pid) in found {
            let tree = self.trees.read().get(&table).cloned();
            match tree {
                Some(t) => {
                    if self.has_entries(table, pid) {
                        t.merge_leaf(cx, pid, MergeBy::Background)?;
                        merged += 1;
                    }
                }
                None => self.discard(cx, table, Some(pid))?,
            }
        }
        Ok(merged)
    }

    /// The `n` leaves of registered tables with the most buffered changes, most first (one
    /// pass over the per-page map): what the background merge takes, since a leaf costs one
    /// read and one write however many changes it takes, so the fullest free the most room
    /// per page written. Leaves merged by a read before their turn are skipped then
    /// ([`Self::merge_listed`]).
    pub fn fullest(&self, n: usize) -> Vec<(u32, PageId)> {
        let mut top: Vec<(u32, u32, u32)> = Vec::with_capacity(n + 1);
        if n == 0 {
            return Vec::new();
        }
        // the registered tables, read apart: discard_stale takes the trees' lock inside a
        // shard's, so holding it here while taking shards could deadlock behind a writer
        let live: std::collections::HashSet<u32> = self.trees.read().keys().copied().collect();
        for shard in self.pages.iter() {
            let m = shard.lock();
            for (&(table, pid), i) in m.iter() {
                if i.entries == 0 || top.len() == n && top[n - 1].0 >= i.entries {
                    continue;
                }
                if !live.contains(&table) {
                    continue; // a table gone: merge_some's scan discards its entries
                }
                let at = top.partition_point(|t| t.0 >= i.entries);
                top.insert(at, (i.entries, table, pid));
                top.truncate(n);
            }
        }
        top.into_iter().map(|(_, t, p)| (t, PageId(p))).collect()
    }

    /// Merges the buffered changes of `leaves` ([`Self::fullest`]'s), skipping those that
    /// have none left or whose table is gone. Returns the leaves merged.
    pub fn merge_listed(&self, cx: &Ctx<'_>, leaves: &[(u32, PageId)]) -> Result<usize> {
        let mut merged = 0;
        for &(table, pid) in leaves {
            let tree = self.trees.read().get(&table).cloned();
            if let Some(t) = tree {
                if self.has_entries(table, pid) {
                    t.merge_leaf(cx, pid, MergeBy::Background)?;
                    merged += 1;
                }
            }
        }
        Ok(merged)
    }

    /// Merges every buffered change (a clean shutdown leaves the change buffer empty, so a
    /// read-only open never needs to write a merge), up to [`MERGE_ALL_LEAVES`] leaves at a time,
    /// each group under a log reservation taken before it latches anything
    /// (`LogSpace::with_room`, as the background merge's `admit_background`). Why before: a
    /// merge whose mtr finds the log full at append holds its pages' latches while it waits,
    /// and the change buffer's leaf, which every merge changes, can be the oldest dirty page
    /// the checkpoint has to write (docs/measurements.md, "A writer that waits for log room").
    pub fn merge_all(&self, cx: &Ctx<'_>) -> Result<()> {
        // a group's room at most an eighth of the log, so a nested reservation (a gone
        // table's discard) still fits beside it
        let per_leaf = crate::mtr::redo_bound(cx.pool.page_size(), MERGE_REDO_PAGES_PER_LEAF);
        let leaves =
            ((cx.space.log().capacity() / 8 / per_leaf) as usize).clamp(1, MERGE_ALL_LEAVES);
        let room = leaves as u64 * per_leaf;
        let merge = |max: usize| -> Result<usize> {
            let mut merged = 0;
            cx.space.with_room(room, || {
                merged = self.merge_some(cx, max)?;
                Ok(())
            })?;
            Ok(merged)
        };
        *self.cursor.lock() = Vec::new();
        while self.entries() > 0 {
            let mut merged = merge(leaves)?;
            if merged == 0 && self.entries() > 0 {
                // entries the scan did not meet (a table gone): passes from the start
                *self.cursor.lock() = Vec::new();
                loop {
                    let n = merge(leaves)?;
                    merged += n;
                    if n == 0 || self.cursor.lock().is_empty() {
                        break;
                    }
                }
                if merged == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Deletes the buffered changes of table `table` (of one page, or all of them): the table
    /// was dropped. Safe to run again after a crash.
    pub fn discard(&self, cx: &Ctx<'_>, table: u32, pid: Option<PageId>) -> Result<()> {
        /// Pages one entry's delete may log: the leaf, a merge into its neighbour, the parent,
        /// the file header of a freed page.
        const DISCARD_REDO_PAGES: u64 = 4;
        let (lo, hi) = match pid {
            Some(p) => (entry_key(table, p, 0), entry_key(table, p, u64::MAX)),
            None => (
                entry_key(table, PageId(0), 0),
                entry_key(table, PageId(u32::MAX), u64::MAX),
            ),
        };
        loop {
            let batch =
                self.tree
                    .scan_batch(cx, Bound::Included(&lo), Bound::Included(&hi), false, 256)?;
            for (k, v) in &batch.rows {
                if let (Some((t, p, _)), Some((op, key))) = (decode_key(k), decode_value(v)) {
                    // room first, as for a dropped table's pages (`LogSpace::with_room`): a
                    // delete may merge leaves and free a page, which latches the file header
                    let room = crate::mtr::redo_bound(cx.pool.page_size(), DISCARD_REDO_PAGES);
                    cx.space
                        .with_room(room, || self.tree.delete(cx, k).map(|_| ()))?;
                    let cell = if op == Op::Insert {
                        insert_cell(key)
                    } else {
                        0
                    };
                    self.applied(t, p, 1, cell, None);
                }
            }
            if batch.done || batch.rows.is_empty() {
                break;
            }
        }
        for shard in self.pages.iter() {
            shard.lock().retain(|&(t, p), i| {
                let gone = t == table && pid.is_none_or(|x| x.0 == p);
                if gone && i.entries > 0 {
                    // counted but not met by the scan above (buffered meanwhile): gone too
                    self.counters
                        .entries
                        .fetch_sub(u64::from(i.entries), Ordering::Relaxed);
                    self.counters
                        .pages_with_changes
                        .fetch_sub(1, Ordering::Relaxed);
                }
                !gone
            });
        }
        Ok(())
    }

    /// Deletes the entries of every table that is not a registered key-set tree (left by a
    /// drop a crash cut after the table was gone). Run at open, after dropped tables are
    /// gone.
    pub fn discard_stale(&self, cx: &Ctx<'_>) -> Result<()> {
        let mut stale = Vec::new();
        for shard in self.pages.iter() {
            for (&(t, _), i) in shard.lock().iter() {
                if i.entries > 0 && !self.trees.read().contains_key(&t) && !stale.contains(&t) {
                    stale.push(t);
                }
            }
        }
        for t in stale {
            tracing::info!("change buffer: discarding the changes of dropped table {t}");
            self.discard(cx, t, None)?;
        }
        Ok(())
    }
}

/// Leaves per second the background merge applies buffered changes to: `pct` percent of
/// `io_capacity` while the tree has at most half of `max_pages`, rising linearly from there to
/// `io_capacity` at `max_pages`, and `io_capacity_max` at or past it (buffering has stopped
/// then, and only merging shrinks it). Slow on purpose: a leaf's changes cost one read and one
/// write of it however many they are, so the longer they wait the fewer leaves are written per
/// change; the share applied directly past [`SOFT_LIMIT`] holds the size under the limit.
pub fn merge_rate(
    pct: u64,
    io_capacity: u64,
    io_capacity_max: u64,
    pages: u64,
    max_pages: u64,
) -> f64 {
    let base = io_capacity as f64 * pct as f64 / 100.0;
    if pages >= max_pages {
        return io_capacity_max as f64;
    }
    let half = max_pages / 2;
    if pages <= half {
        return base;
    }
    let x = (pages - half) as f64 / (max_pages - half) as f64;
    base + (io_capacity as f64 - base).max(0.0) * x
}

/// How full [`ChangeBuffer::size`] counts the tree's pages: a B-tree under random inserts
/// keeps its leaves about 70% full, and merges thin them without freeing them, so entries
/// counted at half a page each stay inside the page bound.
pub const ENTRY_FILL: f64 = 0.5;

/// The fraction of `max_pages` past which a share of the changes is applied directly.
pub const SOFT_LIMIT: f64 = 0.9;

/// The share of changes applied directly with the change buffer at `pages` (its size,
/// [`ChangeBuffer::size`]) of `max_pages`: 0 up to [`SOFT_LIMIT`] of the limit, rising
/// linearly to 1 at it.
pub fn refuse_share(pages: f64, max_pages: u64) -> f64 {
    if pages >= max_pages as f64 {
        return 1.0;
    }
    let soft = max_pages as f64 * SOFT_LIMIT;
    if pages <= soft {
        return 0.0;
    }
    (pages - soft) / (max_pages as f64 - soft)
}

/// The n-th point of the golden-ratio sequence in [0, 1): any run of it is spread evenly, so
/// "point < share" picks that share of any run of changes, without randomness.
fn evenly_spread(n: u64) -> f64 {
    const PHI_FRAC: f64 = 0.618_033_988_749_894_9;
    (n as f64 * PHI_FRAC).fract()
}

fn shard_of(pid: PageId) -> usize {
    ((pid.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
}

/// Pages of `tree` (every level).
fn count_pages(cx: &Ctx<'_>, tree: &Tree) -> Result<u64> {
    let mut level = vec![tree.root];
    let mut n = 0u64;
    for _ in 0..MAX_DEPTH {
        if level.is_empty() {
            break;
        }
        let mut below = Vec::new();
        for &pid in &level {
            let g = cx.pool.read(pid)?;
            tree.check_node(cx, &g, pid, None)?;
            if hdr::level(&g) > 0 {
                below.extend((0..node::nslots(&g)).map(|i| node::child(&g, i)));
            }
        }
        n += level.len() as u64;
        level = below;
    }
    Ok(n)
}

/// What one merge mtr did.
#[derive(Default)]
struct MergeStep {
    applied: u32,
    cells: u32,
    violations: u64,
    /// The leaf's free bytes after the step.
    free: usize,
    /// Every change of the leaf is applied.
    done: bool,
    /// A key that led to the leaf, when the step emptied it (it is freed afterwards).
    emptied: Option<Vec<u8>>,
    /// Keys of change buffer leaves the step emptied (freed afterwards).
    ibuf_emptied: Vec<Vec<u8>>,
    /// A key of each change-buffer leaf it left at most a quarter full.
    ibuf_thin: Vec<Vec<u8>>,
}

impl MergeStep {
    /// Notes change-buffer leaf `b` (not the root), which the step deleted entries from up to
    /// `key`: emptied, it is freed afterwards; at most a quarter full, joined to a neighbour.
    fn left_behind(&mut self, b: &[u8], key: &[u8]) {
        let list = if node::nslots(b) == 0 {
            &mut self.ibuf_emptied
        } else if node::used_space(b) <= b.len() / 4 {
            &mut self.ibuf_thin
        } else {
            return;
        };
        if !list.iter().any(|k| k == key) {
            list.push(key.to_vec());
        }
    }
}

impl Tree {
    /// Records `op` of `key` in the change buffer instead of applying it, when the key's leaf
    /// `pid` (not the root) is not in the buffer pool, or is clean and cold there and could be
    /// dropped (the module comment), and, for an insert, is known to have
    /// room. Returns whether it did. The caller holds the SMO latch shared (internal pages
    /// cannot change, so `pid` stays the key's leaf) and no page latch.
    pub(crate) fn buffer_at(
        &self,
        cx: &Ctx<'_>,
        ib: &ChangeBuffer,
        op: Op,
        key: &[u8],
        pid: PageId,
    ) -> Result<bool> {
        if pid == self.root {
            return Ok(false);
        }
        // A cached leaf takes the change directly, unless it is clean and cold: then it is
        // dropped (it costs nothing to drop a clean page) and the change buffered, since
        // applying it would cost a whole page write for one change of a page the LRU is about
        // to evict, while a buffered change is merged with the leaf's others when the leaf is
        // next read. Where the data fits the pool nothing is cold (`Lru::is_cold`).
        if !cx.pool.drop_if_cold(pid) {
            return Ok(false); // the common case, without the stripe
        }
        let _stripe = ib.stripe(pid).lock();
        let cell = insert_cell(key);
        if !ib.reserve(self.id, pid, op, cell) {
            return Ok(false);
        }
        // Dekker with guard_leaf: the count above, then the page table here.
        fence(Ordering::SeqCst);
        if cx.pool.is_resident(pid) {
            ib.unreserve(self.id, pid, op, cell);
            return Ok(false);
        }
        let seq = ib.next_seq.fetch_add(1, Ordering::Relaxed);
        let (ek, ev) = (entry_key(self.id, pid, seq), entry_value(op, key));
        if let Err(e) = ib.tree.put(cx, &ek, &ev) {
            ib.unreserve(self.id, pid, op, cell);
            return Err(e);
        }
        ib.saw_entry(entry_bytes(&ek, &ev));
        let c = match op {
            Op::Insert => &ib.counters.inserts_buffered,
            Op::Delete => &ib.counters.deletes_buffered,
        };
        c.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// What a change `op` to this tree may do: `Some(op)` when this is a key-set tree and the
    /// change buffer would take it (the options, the size), so the descent may buffer it.
    pub(crate) fn bufferable(&self, cx: &Ctx<'_>, op: Op) -> Option<Op> {
        (self.key_set && cx.ibuf.is_some_and(|ib| ib.wants(op))).then_some(op)
    }

    /// The page number of the leaf `key` belongs to, reading only internal pages; None when
    /// the root is a leaf. The caller holds the SMO latch.
    #[cfg(test)]
    fn leaf_pid_for(&self, cx: &Ctx<'_>, key: &[u8]) -> Result<Option<PageId>> {
        let mut pid = self.root;
        let mut level = None;
        for _ in 0..MAX_DEPTH {
            let g = cx.pool.read(pid)?;
            self.check_node(cx, &g, pid, level)?;
            let l = hdr::level(&g);
            if l == 0 {
                return Ok(None);
            }
            let child = node::child(&g, node::child_index(&g, key));
            if l == 1 {
                return Ok(Some(child));
            }
            level = Some(l - 1);
            pid = child;
        }
        Err(Error::corrupt(
            cx.pool.file().name(),
            pid.0,
            format!("tree {} deeper than {MAX_DEPTH} levels (a cycle?)", self.id),
        ))
    }

    /// Before an mtr that changed pages of this key-set tree commits: notes each leaf's free
    /// bytes, and forgets pages it holds that are not leaves of this tree (freed ones).
    pub(crate) fn note_leaves(&self, cx: &Ctx<'_>, mtr: &Mtr<'_>) {
        if !self.key_set {
            return;
        }
        let Some(ib) = cx.ibuf else { return };
        for s in mtr.held_slots() {
            let b = mtr.peek(s);
            let pid = mtr.pid(s);
            if hdr::page_type(b) == Some(PageType::Leaf) && hdr::owner(b) == self.id {
                ib.note(self.id, pid, Some(node::free_space(b)));
            } else {
                // freed, or another kind of page now (or the header, another tree's page)
                ib.note(self.id, pid, None);
            }
        }
    }

    /// Merges every buffered change of leaf `pid` (an operation met it: `Stop::Merge`; or
    /// the background merge), then frees the leaf if that emptied it.
    pub(crate) fn merge_leaf(&self, cx: &Ctx<'_>, pid: PageId, by: MergeBy) -> Result<()> {
        let Some(ib) = cx.ibuf else {
            return Ok(());
        };
        let mut emptied = None;
        let mut ibuf_emptied = Vec::new();
        let mut ibuf_thin = Vec::new();
        {
            let _smo = self.smo_read();
            let _stripe = ib.stripe(pid).lock();
            if !ib.has_entries(self.id, pid) {
                return Ok(()); // merged meanwhile
            }
            if !ib.writable {
                return Err(Error::ReadOnly {
                    location: cx.pool.file().name().to_string(),
                    what: "merging the change buffer into a leaf it reads",
                });
            }
            loop {
                let step = self.merge_step(cx, ib, pid)?;
                ib.applied(self.id, pid, step.applied, step.cells, Some(step.free));
                ib.counters
                    .merged
                    .fetch_add(u64::from(step.applied), Ordering::Relaxed);
                ib.counters
                    .contract_violations
                    .fetch_add(step.violations, Ordering::Relaxed);
                ibuf_emptied.extend(step.ibuf_emptied);
                ibuf_thin.extend(step.ibuf_thin);
                if step.emptied.is_some() {
                    emptied = step.emptied;
                }
                if step.done {
                    // the tree is the truth: nothing of this leaf is left in it
                    let left = ib
                        .shard(pid)
                        .lock()
                        .get(&(self.id, pid.0))
                        .map_or(0, |i| i.entries);
                    if left > 0 {
                        ib.applied(self.id, pid, left, u32::MAX, None);
                    }
                    break;
                }
            }
            let c = match by {
                MergeBy::Read => &ib.counters.merges_by_read,
                MergeBy::Background => &ib.counters.merges_by_background,
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
        for k in ibuf_emptied {
            ib.tree.reclaim_empty_leaf(cx, &k)?;
        }
        for k in ibuf_thin {
            if ib.tree.merge_thin_leaf(cx, &k)? {
                ib.counters
                    .thin_leaves_joined
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(k) = emptied {
            self.reclaim_empty_leaf(cx, &k)?;
        }
        Ok(())
    }

    /// One mtr of a merge: applies the oldest buffered changes of leaf `pid` (at most
    /// MERGE_BATCH) and deletes them from the change buffer. The caller holds the SMO latch
    /// shared and the page's stripe.
    fn merge_step(&self, cx: &Ctx<'_>, ib: &ChangeBuffer, pid: PageId) -> Result<MergeStep> {
        let file = cx.pool.file().name().to_string();
        let mut mtr = Mtr::new(cx.pool, cx.space);
        let leaf = mtr.write(pid)?;
        self.check_node(cx, mtr.peek(leaf), pid, Some(0))?;
        let _ismo = ib.tree.smo_read();
        let prefix = entry_prefix(self.id, pid);
        let start = entry_key(self.id, pid, 0);
        let mut il = match ib.tree.leaf_for_write(cx, &mut mtr, &start, None) {
            Ok(Some(s)) => s,
            Ok(None) => unreachable!("nothing is buffered for the change buffer's own tree"),
            Err(Stop::Fail(e)) => return Err(e),
            Err(Stop::Merge(p)) => {
                return Err(Error::corrupt(
                    file,
                    p.0,
                    "change buffer page taken for an index leaf",
                ))
            }
        };
        let mut i = node::search(mtr.peek(il), &start).unwrap_or_else(|i| i);
        let mut out = MergeStep::default();
        let mut last_key: Option<Vec<u8>> = None;
        let mut last_ibuf_key: Option<Vec<u8>> = None;
        loop {
            if i >= node::nslots(mtr.peek(il)) {
                if mtr.pid(il) != ib.tree.root {
                    if let Some(k) = &last_ibuf_key {
                        out.left_behind(mtr.peek(il), k);
                    }
                }
                let next = hdr::next(mtr.peek(il));
                if next.is_none() {
                    out.done = true;
                    break;
                }
                if out.applied as usize >= MERGE_BATCH {
                    break;
                }
                il = mtr.write(next)?;
                ib.tree.check_node(cx, mtr.peek(il), next, Some(0))?;
                i = 0;
                continue;
            }
            let k = node::key(mtr.peek(il), i);
            if !k.starts_with(&prefix) {
                out.done = true;
                break;
            }
            if out.applied as usize >= MERGE_BATCH {
                break;
            }
            let ikey = k.to_vec();
            let (op, ukey) = match node::leaf_value(mtr.peek(il), i) {
                node::LeafValue::Inline(v) => match decode_value(v) {
                    Some((op, key)) => (op, key.to_vec()),
                    None => {
                        return Err(Error::corrupt(
                            file,
                            mtr.pid(il).0,
                            "malformed change buffer entry",
                        ))
                    }
                },
                node::LeafValue::Overflow { .. } => {
                    return Err(Error::corrupt(
                        file,
                        mtr.pid(il).0,
                        "change buffer entry with an overflow value",
                    ))
                }
            };
            match (op, node::search(mtr.peek(leaf), &ukey)) {
                (Op::Insert, Ok(_)) | (Op::Delete, Err(_)) => out.violations += 1,
                (Op::Insert, Err(p)) => {
                    mtr.make_contiguous(leaf, node::CELL_HEADER + ukey.len());
                    if !mtr.change(leaf, |b, t| {
                        node::insert_leaf_inline_noting(b, p, &ukey, &[], t)
                    }) {
                        // the free space noted when it was buffered was wrong: a bug; the
                        // mtr commits what it applied so far (each change whole)
                        return Err(Error::corrupt(
                            file,
                            pid.0,
                            "a buffered insert does not fit its leaf",
                        ));
                    }
                }
                (Op::Delete, Ok(p)) => mtr.change(leaf, |b, t| node::remove_noting(b, p, t)),
            }
            if op == Op::Insert {
                out.cells += insert_cell(&ukey);
            }
            mtr.change(il, |b, t| node::remove_noting(b, i, t));
            out.applied += 1;
            last_key = Some(ukey);
            last_ibuf_key = Some(ikey);
        }
        if mtr.pid(il) != ib.tree.root {
            if let Some(k) = &last_ibuf_key {
                out.left_behind(mtr.peek(il), k);
            }
        }
        let b = mtr.peek(leaf);
        out.free = node::free_space(b);
        if node::nslots(b) == 0 && pid != self.root {
            out.emptied = last_key;
        }
        mtr.commit()?;
        Ok(out)
    }
}

/// The change buffer's own checks of its counts against its tree (for tests): per leaf, the
/// entries and reserved bytes in memory equal the tree's.
#[cfg(test)]
pub(crate) fn counts_match_tree(cx: &Ctx<'_>, ib: &ChangeBuffer) -> Result<bool> {
    let mut want: HashMap<(u32, u32), (u32, u32)> = HashMap::new();
    let mut lower: Option<Vec<u8>> = None;
    loop {
        let lb = lower.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let batch = ib.tree.scan_batch(cx, lb, Bound::Unbounded, false, 1024)?;
        for (k, v) in &batch.rows {
            let (t, p, _) = decode_key(k).expect("key");
            let (op, key) = decode_value(v).expect("value");
            let e = want.entry((t, p.0)).or_default();
            e.0 += 1;
            if op == Op::Insert {
                e.1 += insert_cell(key);
            }
        }
        lower = batch.rows.last().map(|(k, _)| k.clone()).or(lower);
        if batch.done {
            break;
        }
    }
    for shard in ib.pages.iter() {
        for (k, i) in shard.lock().iter() {
            let w = want.remove(k).unwrap_or_default();
            if (i.entries, i.reserved) != w {
                return Ok(false);
            }
        }
    }
    Ok(want.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::SimStorage;
    use crate::{Database, Options};

    fn db() -> Database {
        let mut o = Options::default();
        o.set("page_size", "4096").unwrap();
        o.set("buffer_pool_size", "256K").unwrap();
        o.set("change_buffer_merge_pct", "0").unwrap();
        o.set("old_blocks_time", "0").unwrap();
        // the whole file is a few extents: read-ahead would bring every leaf back
        o.set("read_ahead", "none").unwrap();
        Database::create_in(Arc::new(SimStorage::new()), o).unwrap()
    }

    fn k(i: u64) -> Vec<u8> {
        let mut k = b"key".to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        k
    }

    /// Deletes the keys k(0), k(2), .. k(2n - 2) of `idx`, 100 per commit, under a change
    /// buffer limit of four times the pool's frames: deletes need no room in their leaf, so
    /// every one is buffered.
    fn buffer_deletes(db: &Database, idx: &crate::Table, n: u64) {
        let ib = db.inner.ibuf.as_deref().unwrap();
        ib.configure(
            ChangeBuffering::All,
            100,
            4 * db.inner.pool.frame_count() as u64,
        );
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let mut txn = db.begin();
            for &i in chunk {
                txn.delete(idx, &k(2 * i)).unwrap();
            }
            txn.commit().unwrap();
        }
    }

    /// An index table of the even keys below 6,000, put in a scrambled order (its leaves split
    /// in the middle and keep room), and a plain table of 100 pages whose rows are each read
    /// twice (made young at once: old_blocks_time 0), which pushes the index's leaves out of
    /// the 64-page pool.
    fn fill_and_churn(db: &Database) {
        let idx = db.create_index_table("idx").unwrap();
        let plain = db.create_table("plain").unwrap();
        let order: Vec<u64> = (0..3000).map(|i| (i * 7919) % 3000).collect();
        for chunk in order.chunks(500) {
            let mut txn = db.begin();
            for &i in chunk {
                txn.put(&idx, &k(2 * i), &[]).unwrap();
            }
            txn.commit().unwrap();
        }
        let mut txn = db.begin();
        for i in 0..400u64 {
            txn.put(&plain, &i.to_be_bytes(), &[7u8; 1000]).unwrap();
        }
        txn.commit().unwrap();
        db.flush().unwrap();
        for i in 0..400u64 {
            for _ in 0..2 {
                assert!(db.begin().get(&plain, &i.to_be_bytes()).unwrap().is_some());
            }
        }
    }

    #[test]
    fn a_change_to_a_clean_cold_cached_leaf_is_buffered_and_the_leaf_dropped() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let inner = &db.inner;
        let ib = inner.ibuf.as_deref().unwrap();
        let leaf_of = |key: &[u8]| {
            let _smo = idx.tree().smo_read();
            idx.tree().leaf_pid_for(&inner.ctx(), key).unwrap().unwrap()
        };
        let (a, b) = (leaf_of(&k(0)), leaf_of(&k(5000)));
        assert_ne!(a, b);
        // leaf a read once: clean, at the midpoint of a full pool
        assert!(db.begin().get(&idx, &k(0)).unwrap().is_some());
        assert!(inner.pool.is_resident(a));
        let buffered = ib.counters.inserts_buffered.load(Ordering::Relaxed);
        let drops = db.status().buffer.cold_drops;
        // reading other leaves (b first) until the pool has evicted a page since a's read: a
        // is now on its way out, and an insert into it is buffered instead of dirtying it. The
        // LRU cleaner may have freed frames ahead (more of them on a busy machine), so one read,
        // or fifty, does not always evict.
        let evicted = || {
            let s = db.status().buffer;
            s.evictions + s.lru_evictions
        };
        let before = evicted();
        for i in 0..500u64 {
            // odd keys are absent (the index holds even ones): their gets read a leaf all the same
            let key = k((5000 + i * 97) as _);
            db.begin().get(&idx, &key).unwrap();
            if evicted() > before {
                break;
            }
        }
        assert!(evicted() > before, "no page was evicted");
        assert!(inner.pool.is_resident(a), "a was evicted already");
        let mut txn = db.begin();
        txn.put(&idx, &k(1), &[]).unwrap();
        txn.commit().unwrap();
        assert_eq!(db.status().buffer.cold_drops, drops + 1);
        assert_eq!(
            ib.counters.inserts_buffered.load(Ordering::Relaxed),
            buffered + 1
        );
        assert!(!inner.pool.is_resident(a));
        // the next read of the leaf merges it
        assert!(db.begin().get(&idx, &k(1)).unwrap().is_some());
        assert!(counts_match_tree(&inner.ctx(), ib).unwrap());
        assert_check_ok(&db);
    }

    #[test]
    fn the_background_merge_takes_the_fullest_leaves_first() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let inner = &db.inner;
        let ib = inner.ibuf.as_deref().unwrap();
        ib.configure(
            ChangeBuffering::All,
            100,
            4 * inner.pool.frame_count() as u64,
        );
        let leaf_of = |key: &[u8]| {
            let _smo = idx.tree().smo_read();
            idx.tree().leaf_pid_for(&inner.ctx(), key).unwrap().unwrap()
        };
        // deletes (always buffered: they need no room): 30 near the start, 1 far away
        let keys: Vec<u64> = (0..30).map(|i| 2 * i).chain([5000]).collect();
        let mut txn = db.begin();
        for &i in &keys {
            txn.delete(&idx, &k(i)).unwrap();
        }
        txn.commit().unwrap();
        let mut per_leaf: HashMap<PageId, u32> = HashMap::new();
        for &i in &keys {
            *per_leaf.entry(leaf_of(&k(i))).or_default() += 1;
        }
        assert_eq!(ib.entries(), keys.len() as u64, "every delete was buffered");
        let far = leaf_of(&k(5000));
        assert_eq!(per_leaf[&far], 1);
        let most = per_leaf.values().copied().max().unwrap();
        let listed = ib.fullest(per_leaf.len());
        assert_eq!(listed.len(), per_leaf.len());
        let counts: Vec<u32> = listed.iter().map(|(_, p)| per_leaf[p]).collect();
        assert_eq!(counts[0], most, "{counts:?}");
        assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
        assert!(listed.iter().any(|l| l.1 == far));
        // merging the first leaf listed leaves the others' changes buffered
        assert_eq!(ib.merge_listed(&inner.ctx(), &listed[..1]).unwrap(), 1);
        assert_eq!(ib.entries(), keys.len() as u64 - u64::from(most));
        assert!(ib.has_entries(idx.id(), far));
        // a leaf merged meanwhile (here: again) is skipped
        assert_eq!(ib.merge_listed(&inner.ctx(), &listed[..1]).unwrap(), 0);
        assert!(counts_match_tree(&inner.ctx(), ib).unwrap());
        assert_check_ok(&db);
    }

    #[test]
    fn a_cached_leaf_of_a_pool_that_evicts_nothing_takes_its_change_directly() {
        let mut o = Options::default();
        o.set("page_size", "4096").unwrap();
        o.set("buffer_pool_size", "16M").unwrap();
        o.set("old_blocks_time", "0").unwrap();
        let db = Database::create_in(Arc::new(SimStorage::new()), o).unwrap();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let ib = db.inner.ibuf.as_deref().unwrap();
        let buffered = ib.counters.inserts_buffered.load(Ordering::Relaxed);
        let mut txn = db.begin();
        for i in (0..3000).step_by(7) {
            txn.put(&idx, &k(2 * i + 1), &[]).unwrap();
        }
        txn.commit().unwrap();
        let st = db.status().buffer;
        assert_eq!(
            st.evictions + st.lru_evictions,
            0,
            "the pool evicted: {st:?}"
        );
        assert_eq!(st.cold_drops, 0);
        assert_eq!(
            ib.counters.inserts_buffered.load(Ordering::Relaxed),
            buffered
        );
        assert_check_ok(&db);
    }

    #[test]
    fn the_counts_in_memory_follow_the_tree_through_buffering_and_merges() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();

        let mut txn = db.begin();
        for i in (0..3000).step_by(5) {
            txn.put(&idx, &k(2 * i + 1), &[]).unwrap();
            txn.delete(&idx, &k(2 * ((i + 2) % 3000))).unwrap();
        }
        txn.commit().unwrap();
        let inner = &db.inner;
        let ib = inner.ibuf.as_deref().unwrap();
        assert!(
            ib.entries() > 0,
            "{:?} {:?}",
            ib.snapshot(),
            db.status().buffer
        );
        assert!(counts_match_tree(&inner.ctx(), ib).unwrap());
        for i in 0..2000 {
            db.begin().get(&idx, &k(i)).unwrap();
        }
        assert!(ib.counters.merges_by_read.load(Ordering::Relaxed) > 0);
        assert!(counts_match_tree(&inner.ctx(), ib).unwrap());
        ib.merge_all(&inner.ctx()).unwrap();
        assert_eq!(ib.entries(), 0);
        assert!(counts_match_tree(&inner.ctx(), ib).unwrap());
    }

    #[test]
    fn leaves_thinned_by_merges_join_a_neighbour_and_the_tree_shrinks() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let inner = &db.inner;
        let cx = inner.ctx();
        let ib = inner.ibuf.as_deref().unwrap();
        // room for every change below (the tree stays far under the pool's frames)
        buffer_deletes(&db, &idx, 3000);
        assert_eq!(ib.entries(), 3000, "{:?}", ib.snapshot());
        // the target leaves with buffered changes, in the change buffer's order
        let mut targets: Vec<PageId> = Vec::new();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let lower = from.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let batch = ib
                .tree
                .scan_batch(&cx, lower, Bound::Unbounded, false, 1024)
                .unwrap();
            for (key, _) in &batch.rows {
                let (_, pid, _) = decode_key(key).unwrap();
                if targets.last() != Some(&pid) {
                    targets.push(pid);
                }
            }
            from = batch.rows.last().map(|(k, _)| k.clone()).or(from);
            if batch.done {
                break;
            }
        }
        let pages_before = ib.tree_pages();
        assert!(
            pages_before >= 4,
            "{pages_before} pages: too few to thin: {:?}",
            ib.snapshot()
        );
        assert!(targets.len() >= 8, "{}", targets.len());
        // merge three of every four leaves' changes: every change-buffer leaf keeps about a
        // quarter of its entries, scattered
        for (n, &pid) in targets.iter().enumerate() {
            if n % 4 != 0 {
                idx.tree().merge_leaf(&cx, pid, MergeBy::Read).unwrap();
            }
        }
        let joined = ib.counters.thin_leaves_joined.load(Ordering::Relaxed);
        assert!(joined > 0, "{:?}", ib.snapshot());
        let pages_after = ib.tree_pages();
        assert!(
            pages_after * 2 <= pages_before + 1,
            "{pages_before} -> {pages_after} pages with {} entries left",
            ib.entries()
        );
        // the tree's own pages say the same as its counters
        assert_eq!(count_pages(&cx, &ib.tree).unwrap(), pages_after);
        assert!(counts_match_tree(&cx, ib).unwrap());
        assert_check_ok(&db);
        // every delete holds, merged or still buffered
        let txn = db.begin();
        for i in 0..3000u64 {
            assert!(txn.get(&idx, &k(2 * i)).unwrap().is_none(), "key {}", 2 * i);
        }
        drop(txn);
        ib.merge_all(&cx).unwrap();
        assert_eq!(ib.entries(), 0);
        assert_check_ok(&db);
    }

    #[test]
    fn the_size_follows_the_entries_and_the_tree_pages_bound_it() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let mut txn = db.begin();
        for i in (0..3000).step_by(3) {
            txn.put(&idx, &k(2 * i + 1), &[]).unwrap();
        }
        txn.commit().unwrap();
        let inner = &db.inner;
        let ib = inner.ibuf.as_deref().unwrap();
        let (entries, size) = (ib.entries(), ib.size());
        assert!(entries > 100, "{entries}");
        // every entry here is the same size: an entry key, the op and a key of k()'s length
        let per_entry = (node::CELL_HEADER + 16 + 1 + k(1).len() + node::SLOT_SIZE) as f64;
        let room = (4096 - PAGE_HEADER_SIZE - PAGE_TRAILER_SIZE) as f64;
        let want = entries as f64 * per_entry / (room * ENTRY_FILL);
        assert!((size - want).abs() < 1e-6 * want, "{size} {want}");
        // merging half the leaves' changes by reads: the size falls with the entries
        for i in 0..3000 {
            db.begin().get(&idx, &k(i)).unwrap();
        }
        let left = ib.entries();
        assert!(left < entries, "{left} {entries}");
        assert!((ib.size() - left as f64 * per_entry / (room * ENTRY_FILL)).abs() < 1e-6 * want);
        ib.merge_all(&inner.ctx()).unwrap();
        assert_eq!(ib.size(), 0.0);
    }

    #[test]
    fn the_share_reads_the_entries_and_the_tree_pages_bound_it() {
        let db = db();
        fill_and_churn(&db);
        let idx = db.table("idx").unwrap();
        let ib = db.inner.ibuf.as_deref().unwrap();
        buffer_deletes(&db, &idx, 3000);
        assert_eq!(ib.entries(), 3000, "{:?}", ib.snapshot());
        // the share: none under 9/10 of the limit, about half at 95%, all once the tree's own
        // pages reach the limit whatever the entries
        let asked = |n: usize| (0..n).filter(|_| ib.wants(Op::Insert)).count();
        let (s, p) = (ib.size(), ib.tree_pages());
        ib.configure(ChangeBuffering::All, 100, (s / 0.5).ceil() as u64 + p);
        assert_eq!(asked(1_000), 1_000);
        ib.configure(ChangeBuffering::All, 100, (s / 0.95).round() as u64);
        // the entries, not the tree's pages, are at 95% of the limit here
        assert!(ib.tree_pages() < ib.max_pages(), "{p} {}", ib.max_pages());
        let taken = asked(1_000) as f64;
        let share = refuse_share(ib.size(), ib.max_pages());
        assert!(
            (taken - (1.0 - share) * 1_000.0).abs() <= 3.0,
            "{taken} {share}"
        );
        assert!(share > 0.3 && share < 0.7, "{share}");
        ib.configure(ChangeBuffering::All, 100, ib.tree_pages());
        assert_eq!(asked(100), 0);
        ib.merge_all(&db.inner.ctx()).unwrap();
        assert_eq!(ib.size(), 0.0);
    }

    #[test]
    fn the_share_applied_directly_rises_from_the_soft_limit() {
        assert_eq!(refuse_share(0.0, 100), 0.0);
        assert_eq!(refuse_share(90.0, 100), 0.0);
        assert!((refuse_share(95.0, 100) - 0.5).abs() < 1e-9);
        assert_eq!(refuse_share(100.0, 100), 1.0);
        assert_eq!(refuse_share(120.0, 100), 1.0);
        assert_eq!(refuse_share(0.0, 0), 1.0);
        // the sequence picks the share of any run of changes, within a change or two
        for share in [0.1, 0.37, 0.5, 0.9] {
            for start in [0u64, 17, 1_000_003] {
                let picked = (start..start + 1_000)
                    .filter(|&n| evenly_spread(n) < share)
                    .count() as f64;
                assert!(
                    (picked - share * 1_000.0).abs() <= 2.0,
                    "{share} {start}: {picked}"
                );
            }
        }
    }

    #[test]
    fn merge_rate_follows_the_size() {
        assert_eq!(merge_rate(5, 200, 2000, 10, 100), 10.0);
        assert_eq!(merge_rate(5, 200, 2000, 50, 100), 10.0);
        assert_eq!(merge_rate(5, 200, 2000, 75, 100), 105.0);
        assert_eq!(merge_rate(5, 200, 2000, 100, 100), 2000.0);
        assert_eq!(merge_rate(0, 200, 2000, 1, 100), 0.0);
        assert_eq!(merge_rate(5, 200, 2000, 0, 0), 2000.0);
    }

    #[test]
    fn check_finds_change_buffer_entries_that_do_not_match_their_leaves() {
        let db = db();
        fill_and_churn(&db);
        let (idx, plain) = (db.table("idx").unwrap(), db.table("plain").unwrap());
        assert_check_ok(&db);
        let inner = &db.inner;
        let cx = inner.ctx();
        let ib = inner.ibuf.as_deref().unwrap();
        let leaf = idx.tree().leaf_pid_for(&cx, &k(10)).unwrap().unwrap();
        // a key of another leaf
        let far = (0..6000)
            .map(k)
            .find(|key| idx.tree().leaf_pid_for(&cx, key).unwrap() != Some(leaf))
            .unwrap();
        let put = |t: u32, p: PageId, seq: u64, v: Vec<u8>| {
            ib.tree.put(&cx, &entry_key(t, p, seq), &v).unwrap();
        };
        put(idx.id(), leaf, 1, entry_value(Op::Insert, &far));
        put(
            plain.id(),
            plain.tree().root,
            2,
            entry_value(Op::Delete, b"x"),
        );
        put(
            idx.id(),
            idx.tree().root,
            3,
            entry_value(Op::Delete, &k(10)),
        );
        put(idx.id(), leaf, 4, vec![9, b'a']);
        // inserts of long keys next to k(10), within its leaf, more than it has room for
        for j in 0..12u8 {
            let mut long = k(10);
            long.extend_from_slice(&[j; 500]);
            put(
                idx.id(),
                leaf,
                10 + u64::from(j),
                entry_value(Op::Insert, &long),
            );
        }
        let r = db.check().unwrap();
        let rules: Vec<&str> = r.problems.iter().map(|p| p.rule.as_str()).collect();
        let has = |what: &str| {
            rules
                .iter()
                .any(|r| r.starts_with("C9") && r.contains(what))
        };
        assert!(has("outside the leaf's bounds"), "{rules:?}");
        assert!(has("is not an index table"), "{rules:?}");
        assert!(has("is not a leaf of table"), "{rules:?}");
        assert!(has("malformed operation"), "{rules:?}");
        assert!(has("free"), "{rules:?}");
        assert_eq!(rules.len(), 5, "{rules:?}");
    }

    fn assert_check_ok(db: &Database) {
        let r = db.check().unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
    }
}
