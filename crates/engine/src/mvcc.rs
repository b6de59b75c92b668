//! mvcc: read views over the B+trees, which hold only the newest committed value of each key.
//!
//! The shape, and why: a commit applies its write set under exclusive key locks, key by key.
//! Just before it changes a key it records the key's value before the change (its
//! *before-image*, `None` for a key that did not exist) in the [`VersionStore`], tagged with the
//! transaction's commit number. A read view sees every commit that had finished applying when
//! it was taken: the numbers up to the last one handed out, less those still applying then
//! (InnoDB's read view: the newest id, and the ids active at creation). A read through a view
//! reads the tree first, then looks for the key's oldest version the view must not see; it
//! holds the value the view sees (the value before the first change it must not see). No such
//! version means the tree's value is the view's. Per key the versions a view must not see are
//! always the newest ones: a commit still applying holds its keys' locks, so no later commit
//! of the same key can have finished before the view was taken.
//!
//! - Old versions serve read views only, and no view survives a crash, so the store is memory:
//!   nothing here is logged or reaches a page, and the redo format, recovery and the on-disk
//!   layout are unchanged ("no undo on disk" holds). InnoDB keeps undo in pages through redo
//!   because its rollback and crash recovery need it; ours need only the write set and the
//!   COMMIT record.
//! - A reader never waits for a writer and a writer never waits for a reader: readers take the
//!   store's lock shared for one lookup, writers take it exclusively to add a commit's versions
//!   once, before changing any key.
//! - Order is what makes a read right without a latch across the tree and the store: a writer
//!   records a version before it changes the key, and a reader reads the tree before the store.
//!   If the reader's tree read saw the new value, the version is already recorded; if it saw the
//!   old one, the version (when recorded) holds that same old value, since the key lock let no
//!   one else change the key in between.
//! - Commit numbers are handed out just before the apply, so per key they rise in commit order
//!   (a key's next writer waits for the previous one's lock). A view leaves out every commit
//!   still applying when it is taken, so it never sees half a transaction, and sees every
//!   commit that returned before it was taken (reads are strict in real time).
//! - **Purge** drops the versions no view can need: those numbered at or below both the lowest
//!   number below which every open view sees every commit, and [`VersionStore::visible`]. It runs in the committing thread after each apply and
//!   when a view closes, in chunks that release the lock between them, so it keeps up with
//!   commits by construction and never holds writers for long.
//! - **Views opened while no commit applies** (every read-only transaction of a read-mostly
//!   load, most of the time) register in a per-thread slot without the clock's lock: see
//!   [`LightSlot`] for why purge and expiry stay exact.
//! - **Bound**: the versions' bytes are limited by `max_history_size`. Past it the oldest
//!   views are *expired*: their versions are purged, and their next read fails with
//!   [`Error::SnapshotTooOld`] naming the view's age, the history size and the option, as
//!   Oracle's ORA-01555 does. Writers are never slowed by a reader; an engine without the bound
//!   (InnoDB's undo history) grows on disk until purge catches up, which is the production
//!   trouble we chose not to have.

use crate::error::{Error, Result};
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How a transaction's plain reads (`get`, scans) see other transactions' commits. Locking
/// reads (`get_for_update`) and writes always act on the newest committed value under an
/// exclusive key lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Each read sees what is committed when it runs: a `get` the newest committed value, a
    /// scan one view taken when the scan starts (InnoDB's READ COMMITTED).
    ReadCommitted,
    /// Every plain read sees one view, taken at the transaction's first plain read (InnoDB's
    /// REPEATABLE READ, its default and ours).
    RepeatableRead,
    /// As `RepeatableRead`, and a write or locking read of a key that another transaction
    /// committed after the view was taken fails with [`Error::SerializationFailure`]
    /// (first committer wins): snapshot isolation, whose one anomaly is write skew.
    Snapshot,
}

impl Isolation {
    /// The names `transaction_isolation` takes, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["read_committed", "repeatable_read", "snapshot"];
    pub const ALL: [Isolation; 3] = [
        Isolation::ReadCommitted,
        Isolation::RepeatableRead,
        Isolation::Snapshot,
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether plain reads use one view for the whole transaction.
    pub fn holds_view(self) -> bool {
        self != Isolation::ReadCommitted
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

crate::counter::counter_group! {
    /// Old row versions kept for read views, and their purge.
    pub struct HistoryCounters => HistoryStats {
        /// Row versions (before-images) kept for read views now.
        history_versions: "versions" gauge,
        /// Bytes of keys and before-images kept for read views now.
        history_bytes: "bytes" gauge,
        /// Commits whose versions are kept, not yet purged (InnoDB's history list length).
        purge_lag: "commits" gauge,
        /// Read views open now.
        views_open: "views" gauge hot,
        /// Age of the oldest open read view.
        oldest_view_age_ms: "ms" gauge,
        /// Row versions recorded by commits.
        versions_recorded: "versions",
        /// Row versions purged.
        versions_purged: "versions",
        /// Read views opened.
        views_opened: "views" hot,
        /// Read views expired because the history passed max_history_size.
        views_expired: "views",
    }
}

/// One version of a key: its value before commit `cno` changed it.
struct Version {
    cno: u64,
    before: Option<Vec<u8>>,
}

/// A key of the store: its table's id and the key.
pub type VersionKey = (u32, Vec<u8>);

/// A key and the value a view sees for it (`None`: absent in the view).
pub type SeenRow = (Vec<u8>, Option<Vec<u8>>);

/// A key's versions in commit order (oldest first). Most keys hold one version at a time (a
/// key's versions are purged soon after the next commit of it), so the first is kept inline:
/// recording it allocates nothing beyond the map's own node.
type Chain = SmallVec<[Version; 1]>;

#[derive(Default)]
struct Chains {
    /// Per table, per key, its versions in commit order (oldest first).
    tables: BTreeMap<u32, BTreeMap<Vec<u8>, Chain>>,
    /// Per commit whose versions are kept, its keys: purge walks this in commit order.
    commits: BTreeMap<u64, Vec<VersionKey>>,
    bytes: u64,
    versions: u64,
}

/// Bytes a version is charged: its key, its before-image and a fixed share for the maps.
fn charge(key_len: usize, before: &Option<Vec<u8>>) -> u64 {
    (key_len + before.as_ref().map_or(0, Vec::len) + 64) as u64
}

impl Chains {
    /// Drops every version of commit `cno` (the oldest kept); returns how many. What it
    /// takes out of the maps goes to `dead`, for the caller to free once the lock is released.
    fn purge_commit(&mut self, cno: u64, dead: &mut Dead) -> u64 {
        let Some(keys) = self.commits.remove(&cno) else {
            return 0;
        };
        let mut n = 0;
        for (table, key) in keys {
            if let Some(t) = self.tables.get_mut(&table) {
                if let Some(chain) = t.get_mut(key.as_slice()) {
                    // per key, commits purge in order, so this commit's version is the chain's
                    // oldest
                    if chain.first().is_some_and(|v| v.cno == cno) {
                        let v = chain.remove(0);
                        self.bytes = self.bytes.saturating_sub(charge(key.len(), &v.before));
                        self.versions -= 1;
                        n += 1;
                        dead.versions.push(v);
                    }
                    if chain.is_empty() {
                        if let Some((k, _)) = t.remove_entry(key.as_slice()) {
                            dead.keys.push(k);
                        }
                        if t.is_empty() {
                            self.tables.remove(&table);
                        }
                    }
                }
            }
            dead.keys.push(key);
        }
        n
    }
}

/// What a purge took out of the store, freed after its lock is released so that readers and
/// committers do not wait while it returns memory to the allocator.
#[derive(Default)]
struct Dead {
    versions: Vec<Version>,
    keys: Vec<Vec<u8>>,
}

/// Open views, grouped by their floor (every commit at or below it is visible to them).
struct ViewGroup {
    count: usize,
    /// The id of the group's newest view: every view of the group has an id at or below it.
    last_view: u64,
    /// When the first view of the group opened ([`coarse_now_ms`]).
    opened_ms: u64,
}

/// Milliseconds on a monotonic clock that may lag by a few ms, from an arbitrary start: what
/// read views time their age with (status's oldest view age, a too-old snapshot's error, in
/// ms and s). Every transaction that reads opens a view, so this read is on every point
/// get's path. Linux: CLOCK_MONOTONIC_COARSE, the time of the last timer tick, read from
/// the vDSO without reading the TSC; it lags the precise clock by one tick at most (1-10
/// ms). Elsewhere: `Instant`, from the first call.
fn coarse_now_ms() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes only through the pointer it is given, here a valid,
        // exclusively borrowed, initialised local timespec; on an error (rc != 0) `ts` is not
        // read. (The clock id is one Linux has had since 2.6.32, and clock_gettime fails only
        // for an unknown id, so the fallback below is not mixed with it in one process.)
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        if rc == 0 {
            return ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000;
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[derive(Default)]
struct Clock {
    /// The last commit number handed out.
    last: u64,
    /// Commits numbered and not yet wholly applied.
    applying: BTreeSet<u64>,
    views: BTreeMap<u64, ViewGroup>,
    /// The last view id handed out (ids rise in opening order, as floors do).
    last_view: u64,
}

impl Clock {
    fn visible(&self) -> u64 {
        self.applying.first().map_or(self.last, |c| c - 1)
    }

    /// Versions numbered at or below this serve no view registered in the clock: the oldest
    /// such view's floor, or the visible number when none is open. The light views' floors
    /// can only lower it (`VersionStore::purge` reads them after this).
    fn purge_limit(&self) -> u64 {
        let v = self.visible();
        self.views.first_key_value().map_or(v, |(&at, _)| at.min(v))
    }
}

/// Slots for views opened while no commit was applying: as many as `counter::stripe` hands
/// out, so threads up to that many never share one.
const LIGHT_SLOTS: usize = 16;
/// A light slot's state: the floor of its views above these bits, their count in them.
const LIGHT_COUNT_BITS: u32 = 16;
const LIGHT_COUNT_MAX: u64 = (1 << LIGHT_COUNT_BITS) - 1;
/// `quiet` when a commit is applying; also above every floor a light slot can hold.
const NOT_QUIET: u64 = u64::MAX;

/// Views opened while no commit was applying, registered without the clock's lock. Such a
/// view is the newest state, with nothing left out: `at` = `floor` = the last commit number,
/// `applying` empty. Each thread registers its light views in its own slot (one floor and a
/// count, in one atomic word); purge and expiry read the slots besides the clock's groups.
/// With the clock's lock taken twice per view (open and close), two threads doing point gets
/// wrote its cache line four times per get and did no more gets than one.
///
/// Why purge never drops what a light view needs. The opener reads `quiet` (the last commit
/// number, or [`NOT_QUIET`]), registers that floor in its slot, then reads `last` again and
/// keeps the view only if no commit began in between; else it leaves the slot and takes the
/// clock's lock. A purge reads its limit from the clock (at most the visible number), then
/// reads every slot (`VersionStore::purge`); all of these are SeqCst. A purge that missed the registration read the
/// slot before it was written, and its clock read came before that; if the view was kept,
/// `last` was still its floor after the registration, so it was at the purge's clock read too,
/// and the purge's limit is at most the floor. A purge that saw the registration has the
/// floor as its limit at most. The view needs only versions numbered above its floor.
///
/// Expiry marks light views by floor: every light view with a floor below
/// `light_expired_below` is expired. Expiry runs inside a commit (numbered above every floor
/// it expires), so a light view kept after the mark has a floor above it: its opener saw no
/// commit begin between its reads, and that commit had begun before the mark.
#[derive(Default)]
struct LightSlot {
    state: AtomicU64,
    /// When the slot's floor got its first view ([`coarse_now_ms`]; status's oldest view age).
    opened_ms: AtomicU64,
}

fn light_unpack(state: u64) -> (u64, u64) {
    (state >> LIGHT_COUNT_BITS, state & LIGHT_COUNT_MAX)
}

/// The versions kept for read views, the commit numbers and the open views.
pub struct VersionStore {
    clock: Mutex<Clock>,
    /// The last commit number while no commit is applying, [`NOT_QUIET`] while one is. Stored
    /// under the clock's lock.
    quiet: AtomicU64,
    light: Box<[crossbeam::utils::CachePadded<LightSlot>]>,
    /// Light views with a floor below this were expired (0: none).
    light_expired_below: AtomicU64,
    chains: RwLock<Chains>,
    /// The last commit number handed out (a view at or above it needs no lookup).
    last: AtomicU64,
    /// Views whose id is at or below this were expired (their versions may be purged). Stored
    /// under the clock's lock, in the section that takes their group out of the clock.
    expired_through: AtomicU64,
    /// max_history_size.
    limit: AtomicU64,
    /// The lowest commit number whose versions are kept (u64::MAX: none), stored under the
    /// chains' lock whenever the kept commits change: a purge whose limit is below it has
    /// nothing to drop and skips the exclusive lock.
    oldest_kept: AtomicU64,
    pub counters: HistoryCounters,
}

/// Versions purged per chunk; the store's lock is released between chunks.
const PURGE_CHUNK: u64 = 4096;

/// A read view: sees every commit numbered at or below [`View::at`] except those still
/// applying when it was taken. Closing (dropping) it lets purge drop what only it needed.
pub struct View {
    store: Arc<VersionStore>,
    /// The last commit number handed out when the view was taken.
    at: u64,
    /// Commits numbered at or below `at` that were still applying then (ascending).
    applying: Vec<u64>,
    /// Every commit at or below this is visible to the view.
    floor: u64,
    /// The view's id, handed out in opening order (what expiry marks); 0 for a light view.
    id: u64,
    /// The light slot it is registered in, if it is a light view ([`LightSlot`]).
    light: Option<usize>,
    /// When the view opened ([`coarse_now_ms`]).
    opened_ms: u64,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("at", &self.at)
            .field("applying", &self.applying)
            .finish()
    }
}

impl View {
    /// The newest commit number this view may see (those still applying when it was taken
    /// excepted).
    pub fn at(&self) -> u64 {
        self.at
    }

    /// Seconds since the view opened (to the coarse clock's tick).
    pub fn age_s(&self) -> f64 {
        coarse_now_ms().saturating_sub(self.opened_ms) as f64 / 1000.0
    }

    fn sees(&self, cno: u64) -> bool {
        cno <= self.at && self.applying.binary_search(&cno).is_err()
    }

    /// Whether every commit numbered so far is visible to the view (reads need no lookup).
    fn is_newest(&self) -> bool {
        self.applying.is_empty() && self.at >= self.store.last.load(Ordering::SeqCst)
    }

    fn is_expired(&self) -> bool {
        match self.light {
            Some(_) => self.floor < self.store.light_expired_below.load(Ordering::SeqCst),
            None => self.id <= self.store.expired_through.load(Ordering::SeqCst),
        }
    }

    fn check_live(&self, chains: &Chains) -> Result<()> {
        if self.is_expired() {
            return Err(Error::SnapshotTooOld {
                age_s: self.age_s(),
                history_bytes: chains.bytes,
                limit: self.store.limit.load(Ordering::Relaxed),
            });
        }
        Ok(())
    }

    /// The value of `key` in `table` as this view sees it, given `latest`, the tree's value read
    /// before this call.
    pub fn resolve(
        &self,
        table: u32,
        key: &[u8],
        latest: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        if self.is_newest() {
            return Ok(latest);
        }
        let chains = self.store.chains.read();
        self.check_live(&chains)?;
        let hidden = chains
            .tables
            .get(&table)
            .and_then(|t| t.get(key))
            .and_then(|chain| chain.iter().find(|v| !self.sees(v.cno)));
        Ok(match hidden {
            Some(v) => v.before.clone(),
            None => latest,
        })
    }

    /// The keys of `table` within (`lower`, `upper`) whose value in this view is not the
    /// tree's, ascending, each with the value the view sees (`None`: absent in the view). Call
    /// it after reading the tree's rows of the same range.
    pub fn hidden_in(
        &self,
        table: u32,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<Vec<SeenRow>> {
        if self.is_newest() || range_is_empty(lower, upper) {
            return Ok(Vec::new());
        }
        let chains = self.store.chains.read();
        self.check_live(&chains)?;
        let Some(t) = chains.tables.get(&table) else {
            return Ok(Vec::new());
        };
        Ok(t.range::<[u8], _>((lower, upper))
            .filter_map(|(k, chain)| {
                let v = chain.iter().find(|v| !self.sees(v.cno))?;
                Some((k.clone(), v.before.clone()))
            })
            .collect())
    }

    /// Whether a transaction numbered above this view has changed `key` of `table` (the
    /// first-committer-wins check of [`Isolation::Snapshot`]). Call it holding the key's lock.
    pub fn changed_since(&self, table: u32, key: &[u8]) -> Result<bool> {
        if self.is_newest() {
            return Ok(false);
        }
        let chains = self.store.chains.read();
        self.check_live(&chains)?;
        Ok(chains
            .tables
            .get(&table)
            .and_then(|t| t.get(key))
            .is_some_and(|chain| chain.iter().any(|v| !self.sees(v.cno))))
    }
}

impl Drop for View {
    fn drop(&mut self) {
        if let Some(k) = self.light {
            // the count is in the low bits and is at least this view
            self.store.light[k].state.fetch_sub(1, Ordering::SeqCst);
        } else {
            let mut clock = self.store.clock.lock();
            // An expired view's group left the clock when it expired, and a group of the same
            // floor opened since holds other views only. Exact under the clock's lock, which
            // expiry holds while it marks.
            if self.id > self.store.expired_through.load(Ordering::Relaxed) {
                if let Some(g) = clock.views.get_mut(&self.floor) {
                    g.count -= 1;
                    if g.count == 0 {
                        clock.views.remove(&self.floor);
                    }
                }
            }
        }
        self.store
            .counters
            .views_open
            .fetch_sub(1, Ordering::Relaxed);
        // Nothing kept, nothing to purge. Read after this view left the clock: a commit whose
        // versions were published before that (under the chains lock, before its end_commit
        // took the clock) shows here; one published later purges them itself at its
        // end_commit, which no longer counts this view.
        // (SeqCst for a light view, which left no lock: with `publish`'s SeqCst store, a purge
        // that still counted this view's slot read it after that store, so this load sees it)
        if self.store.counters.purge_lag.load(Ordering::SeqCst) > 0 {
            self.store.purge();
        }
    }
}

/// True when no key can lie between the bounds (BTreeMap::range panics on such ranges).
pub fn range_is_empty(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u))
        | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

impl VersionStore {
    /// An empty store whose versions may take `limit` bytes (max_history_size).
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(VersionStore {
            clock: Mutex::new(Clock::default()),
            quiet: AtomicU64::new(0),
            light: (0..LIGHT_SLOTS).map(|_| Default::default()).collect(),
            light_expired_below: AtomicU64::new(0),
            chains: RwLock::new(Chains::default()),
            last: AtomicU64::new(0),
            expired_through: AtomicU64::new(0),
            limit: AtomicU64::new(limit),
            oldest_kept: AtomicU64::new(u64::MAX),
            counters: HistoryCounters::default(),
        })
    }

    /// Changes max_history_size (takes effect at the next commit).
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The highest commit number below every commit still applying: every view taken from now
    /// on sees every transaction numbered up to it.
    pub fn visible(&self) -> u64 {
        self.clock.lock().visible()
    }

    /// Opens a read view of every commit that has finished applying.
    pub fn open_view(self: &Arc<Self>) -> View {
        let opened_ms = coarse_now_ms();
        self.counters.views_opened.fetch_add(1, Ordering::Relaxed);
        self.counters.views_open.fetch_add(1, Ordering::Relaxed);
        if let Some(v) = self.open_light(opened_ms) {
            return v;
        }
        let (at, applying, floor, id) = {
            let mut clock = self.clock.lock();
            let floor = clock.visible();
            let applying: Vec<u64> = clock.applying.iter().copied().collect();
            clock.last_view += 1;
            let id = clock.last_view;
            let group = clock.views.entry(floor).or_insert(ViewGroup {
                count: 0,
                last_view: id,
                opened_ms,
            });
            group.count += 1;
            group.last_view = id;
            (clock.last, applying, floor, id)
        };
        View {
            store: self.clone(),
            at,
            applying,
            floor,
            id,
            light: None,
            opened_ms,
        }
    }

    /// A light view ([`LightSlot`]), if no commit is applying and this thread's slot is free
    /// or holds the same floor.
    fn open_light(self: &Arc<Self>, opened_ms: u64) -> Option<View> {
        let at = self.quiet.load(Ordering::SeqCst);
        if at > (u64::MAX >> LIGHT_COUNT_BITS) {
            return None; // NOT_QUIET (or a floor the slot cannot hold)
        }
        let k = crate::counter::stripe() % LIGHT_SLOTS;
        let slot = &self.light[k];
        let mut state = slot.state.load(Ordering::Relaxed);
        loop {
            let (floor, count) = light_unpack(state);
            if count == LIGHT_COUNT_MAX || (count > 0 && floor != at) {
                return None;
            }
            let next = (at << LIGHT_COUNT_BITS) | (count + 1);
            match slot
                .state
                .compare_exchange_weak(state, next, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => {
                    if count == 0 {
                        slot.opened_ms.store(opened_ms, Ordering::Relaxed);
                    }
                    break;
                }
                Err(now) => state = now,
            }
        }
        if self.last.load(Ordering::SeqCst) != at {
            // a commit began since `quiet` was read: a purge may have missed the slot
            slot.state.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(View {
            store: self.clone(),
            at,
            applying: Vec::new(),
            floor: at,
            id: 0,
            light: Some(k),
            opened_ms,
        })
    }

    /// The lowest floor of the light views not expired, with their count at it and when the
    /// first of them opened.
    fn light_oldest(&self) -> Option<(u64, u64, u64)> {
        let below = self.light_expired_below.load(Ordering::SeqCst);
        let mut oldest: Option<(u64, u64, u64)> = None;
        for slot in self.light.iter() {
            let (floor, count) = light_unpack(slot.state.load(Ordering::SeqCst));
            if count == 0 || floor < below {
                continue;
            }
            let opened = slot.opened_ms.load(Ordering::Relaxed);
            oldest = Some(match oldest {
                Some((f, _, _)) if f < floor => continue,
                Some((f, n, o)) if f == floor => (f, n + count, o.min(opened)),
                _ => (floor, count, opened),
            });
        }
        oldest
    }

    /// Numbers a commit about to apply its writes; views taken until [`Self::end_commit`] do
    /// not see it.
    pub fn begin_commit(&self) -> u64 {
        let mut clock = self.clock.lock();
        clock.last += 1;
        let cno = clock.last;
        clock.applying.insert(cno);
        self.quiet.store(NOT_QUIET, Ordering::SeqCst);
        self.last.store(cno, Ordering::SeqCst);
        cno
    }

    /// Records commit `cno`'s before-images, before any of its keys changes. Past
    /// max_history_size, the oldest views are expired and their versions purged.
    pub fn record(&self, cno: u64, versions: Vec<(VersionKey, Option<Vec<u8>>)>) {
        if versions.is_empty() {
            return;
        }
        let n = versions.len() as u64;
        // the keys' copies and the byte count before the lock: under it, only the maps
        let mut keys = Vec::with_capacity(versions.len());
        let mut bytes = 0;
        let mut entries = Vec::with_capacity(versions.len());
        for ((table, key), before) in versions {
            bytes += charge(key.len(), &before);
            keys.push((table, key.clone()));
            entries.push((table, key, Version { cno, before }));
        }
        let over = {
            let mut chains = self.chains.write();
            for (table, key, version) in entries {
                chains
                    .tables
                    .entry(table)
                    .or_default()
                    .entry(key)
                    .or_default()
                    .push(version);
            }
            chains.bytes += bytes;
            chains.versions += n;
            chains.commits.insert(cno, keys);
            self.publish(&chains);
            chains.bytes > self.limit.load(Ordering::Relaxed)
        };
        self.counters
            .versions_recorded
            .fetch_add(n, Ordering::Relaxed);
        if over {
            self.expire_oldest_views();
        }
    }

    /// Commit `cno` is wholly applied: views taken from now on see it. Purges what no view
    /// needs any more.
    pub fn end_commit(&self, cno: u64) {
        {
            let mut clock = self.clock.lock();
            clock.applying.remove(&cno);
            if clock.applying.is_empty() {
                self.quiet.store(clock.last, Ordering::SeqCst);
            }
        }
        self.purge();
    }

    /// Purges every version no view needs, in chunks of [`PURGE_CHUNK`] (the lock released
    /// between chunks).
    fn purge(&self) {
        loop {
            // Nothing kept is numbered at or below the limit. A commit that records after
            // this load was still applying when the limit was read, so it is numbered above.
            // The clock's limit first: the light slots can only lower it, and reading them
            // costs a cache line each.
            let clock_limit = self.clock.lock().purge_limit();
            let oldest_kept = self.oldest_kept.load(Ordering::Acquire);
            if oldest_kept > clock_limit {
                return;
            }
            let limit = self
                .light_oldest()
                .map_or(clock_limit, |(f, _, _)| f.min(clock_limit));
            if oldest_kept > limit {
                return;
            }
            let mut dead = Dead::default();
            let mut chains = self.chains.write();
            let mut chunk = 0;
            while chunk < PURGE_CHUNK {
                match chains.commits.first_key_value() {
                    Some((&cno, _)) if cno <= limit => {
                        chunk += chains.purge_commit(cno, &mut dead).max(1)
                    }
                    _ => break,
                }
            }
            self.publish(&chains);
            drop(chains);
            drop(dead);
            self.counters
                .versions_purged
                .fetch_add(chunk, Ordering::Relaxed);
            if chunk < PURGE_CHUNK {
                return;
            }
        }
    }

    /// The history is over max_history_size: expire the oldest view groups until purging up to
    /// the next one would bring it under (or no view is left to expire), then purge.
    fn expire_oldest_views(&self) {
        let limit = self.limit.load(Ordering::Relaxed);
        loop {
            {
                let mut clock = self.clock.lock();
                let group = clock.views.first_key_value().map(|(&f, _)| f);
                match (group, self.light_oldest()) {
                    (None, None) => return,
                    (g, Some((floor, count, _))) if g.is_none_or(|g| floor <= g) => {
                        // the oldest views are light: marked by floor (see LightSlot)
                        self.light_expired_below
                            .fetch_max(floor + 1, Ordering::SeqCst);
                        self.counters
                            .views_expired
                            .fetch_add(count, Ordering::Relaxed);
                        drop(clock);
                        self.purge();
                        if self.chains.read().bytes <= limit {
                            return;
                        }
                        continue;
                    }
                    _ => {}
                }
                let Some((_, g)) = clock.views.pop_first() else {
                    return;
                };
                // Marked in the section that takes the group out of the clock: a purge that no
                // longer counts these views read its limit after this store, so it drops their
                // versions only after it, and a reader that no longer finds them sees the mark.
                // Views have ids rising with their floors, so every view at or below the
                // group's newest id was in this group or an older one (expired or closed); a
                // view opened later with the same floor is not marked.
                self.expired_through
                    .fetch_max(g.last_view, Ordering::SeqCst);
                self.counters
                    .views_expired
                    .fetch_add(g.count as u64, Ordering::Relaxed);
            }
            self.purge();
            if self.chains.read().bytes <= limit {
                return;
            }
        }
    }

    /// Stores the history gauges.
    fn publish(&self, chains: &Chains) {
        let c = &self.counters;
        c.history_versions.store(chains.versions, Ordering::Relaxed);
        c.history_bytes.store(chains.bytes, Ordering::Relaxed);
        c.purge_lag
            .store(chains.commits.len() as u64, Ordering::SeqCst);
        let oldest = chains
            .commits
            .first_key_value()
            .map_or(u64::MAX, |(&c, _)| c);
        self.oldest_kept.store(oldest, Ordering::Release);
    }

    /// The history's figures now.
    pub fn stats(&self) -> HistoryStats {
        let group = self
            .clock
            .lock()
            .views
            .first_key_value()
            .map(|(_, g)| g.opened_ms);
        let light = self.light_oldest().map(|(_, _, opened)| opened);
        let oldest = match (group, light) {
            (Some(g), Some(l)) => Some(g.min(l)),
            (g, l) => g.or(l),
        }
        .map_or(0, |opened| coarse_now_ms().saturating_sub(opened));
        self.counters
            .oldest_view_age_ms
            .store(oldest, Ordering::Relaxed);
        self.counters.snapshot()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn put(store: &VersionStore, key: &[u8], before: Option<&[u8]>) -> u64 {
        let cno = store.begin_commit();
        store.record(cno, vec![((1, key.to_vec()), before.map(<[u8]>::to_vec))]);
        cno
    }

    #[test]
    fn a_view_sees_the_value_before_the_first_commit_it_must_not_see() {
        let store = VersionStore::new(1 << 20);
        let c1 = put(&store, b"k", None); // inserts k = a
        store.end_commit(c1);
        let view = store.open_view();
        let c2 = put(&store, b"k", Some(b"a")); // k = b
        store.end_commit(c2);
        let c3 = put(&store, b"k", Some(b"b")); // k = c
        store.end_commit(c3);
        assert_eq!(
            view.resolve(1, b"k", Some(b"c".to_vec())).unwrap(),
            Some(b"a".to_vec())
        );
        let later = store.open_view();
        assert_eq!(
            later.resolve(1, b"k", Some(b"c".to_vec())).unwrap(),
            Some(b"c".to_vec())
        );
        assert!(view.changed_since(1, b"k").unwrap());
        assert!(!later.changed_since(1, b"k").unwrap());
        // versions c2 and c3 are kept for `view` only
        assert_eq!(store.stats().history_versions, 2);
        drop(view);
        assert_eq!(store.stats().history_versions, 0);
        assert_eq!(store.stats().purge_lag, 0);
    }

    #[test]
    fn a_view_does_not_see_a_commit_still_applying() {
        let store = VersionStore::new(1 << 20);
        let c1 = store.begin_commit();
        let view = store.open_view();
        assert_eq!(view.at(), c1);
        let c2 = store.begin_commit();
        store.record(c2, vec![((1, b"y".to_vec()), None)]);
        store.end_commit(c2); // finished before `second` opened: it sees c2, not c1
        let second = store.open_view();
        store.record(c1, vec![((1, b"x".to_vec()), None)]);
        store.end_commit(c1);
        for v in [&view, &second] {
            assert_eq!(v.resolve(1, b"x", Some(b"new".to_vec())).unwrap(), None);
        }
        assert_eq!(view.resolve(1, b"y", Some(b"y2".to_vec())).unwrap(), None);
        assert_eq!(
            second.resolve(1, b"y", Some(b"y2".to_vec())).unwrap(),
            Some(b"y2".to_vec())
        );
        let hidden = view
            .hidden_in(1, Bound::Unbounded, Bound::Unbounded)
            .unwrap();
        assert_eq!(hidden, vec![(b"x".to_vec(), None), (b"y".to_vec(), None)]);
        let third = store.open_view();
        assert_eq!(third.at(), c2);
        assert_eq!(
            third.resolve(1, b"x", Some(b"new".to_vec())).unwrap(),
            Some(b"new".to_vec())
        );
        drop((view, second));
        // only `third` is open, and it sees everything: nothing is kept
        assert_eq!(store.stats().history_versions, 0);
    }

    #[test]
    fn past_the_limit_the_oldest_view_expires_and_its_versions_go() {
        let store = VersionStore::new(4096);
        let old = store.open_view();
        for i in 0..100u32 {
            let c = put(&store, &i.to_be_bytes(), Some(&[0u8; 100]));
            store.end_commit(c);
        }
        let err = old.resolve(1, b"k", None).unwrap_err();
        assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err}");
        let s = store.stats();
        assert!(s.history_bytes <= 4096, "{s:?}");
        assert_eq!(s.views_expired, 1);
        drop(old);
        assert_eq!(store.stats().views_open, 0);
    }

    /// The oldest view expires while the commit that took the history past the bound is still
    /// applying, so the purge limit stays at the view's floor: the view must still fail rather
    /// than read past the commit's purged version.
    #[test]
    fn a_view_expired_at_its_own_floor_fails_its_next_read() {
        let store = VersionStore::new(100);
        let c1 = store.begin_commit();
        let view = store.open_view(); // floor 0: c1 is applying
        store.record(c1, vec![((1, b"k".to_vec()), Some(vec![7u8; 200]))]);
        store.end_commit(c1);
        let err = view.resolve(1, b"k", Some(b"new".to_vec())).unwrap_err();
        assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err}");
        assert_eq!(store.stats().views_expired, 1);
        assert_eq!(store.stats().history_versions, 0);
    }

    /// A thread's second view at another floor cannot share its light slot: it registers in
    /// the clock, and each view keeps what it needs until it closes.
    #[test]
    fn a_light_view_and_a_clock_view_of_one_thread_each_keep_their_versions() {
        let store = VersionStore::new(1 << 20);
        let first = store.open_view(); // no commit yet: light, floor 0
        assert!(first.light.is_some());
        let c1 = put(&store, b"k", None);
        store.end_commit(c1);
        let second = store.open_view(); // the slot holds floor 0: through the clock
        assert!(second.light.is_none());
        let c2 = put(&store, b"k", Some(b"one"));
        store.end_commit(c2);
        let latest = Some(b"two".to_vec());
        assert_eq!(first.resolve(1, b"k", latest.clone()).unwrap(), None);
        assert_eq!(
            second.resolve(1, b"k", latest.clone()).unwrap(),
            Some(b"one".to_vec())
        );
        drop(first);
        assert_eq!(store.stats().history_versions, 1);
        assert_eq!(
            second.resolve(1, b"k", latest).unwrap(),
            Some(b"one".to_vec())
        );
        drop(second);
        assert_eq!(store.stats().history_versions, 0);
        assert_eq!(store.stats().views_open, 0);
        // the slot is free again: the next view is light
        assert!(store.open_view().light.is_some());
    }

    /// One writer commits a key's value as its commit number, one commit at a time, while
    /// readers open views (light ones when no commit applies, else through the clock) and
    /// read the key: each must read the newest commit its view sees, whatever purge dropped
    /// meanwhile.
    #[test]
    fn views_opened_beside_commits_and_purges_read_their_own_state() {
        let store = VersionStore::new(1 << 30);
        let tree = AtomicU64::new(0);
        let done = std::sync::atomic::AtomicBool::new(false);
        let light = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    while !done.load(Ordering::Relaxed) {
                        let view = store.open_view();
                        if view.light.is_some() {
                            light.fetch_add(1, Ordering::Relaxed);
                        }
                        for _ in 0..3 {
                            let latest = tree.load(Ordering::SeqCst);
                            let got = view
                                .resolve(1, b"k", Some(latest.to_be_bytes().to_vec()))
                                .unwrap()
                                .expect("the key exists from commit 0 on");
                            let want = if view.sees(view.at()) {
                                view.at()
                            } else {
                                view.at() - 1
                            };
                            assert_eq!(u64::from_be_bytes(got.try_into().unwrap()), want);
                            std::thread::yield_now();
                        }
                    }
                });
            }
            for _ in 0..100_000 {
                let cno = store.begin_commit();
                let before = tree.load(Ordering::SeqCst);
                store.record(
                    cno,
                    vec![((1, b"k".to_vec()), Some(before.to_be_bytes().to_vec()))],
                );
                tree.store(cno, Ordering::SeqCst);
                store.end_commit(cno);
            }
            done.store(true, Ordering::Relaxed);
        });
        assert!(
            light.load(Ordering::Relaxed) > 0,
            "no light view was opened"
        );
        assert_eq!(store.stats().views_open, 0);
        assert_eq!(store.stats().history_versions, 0);
    }

    /// A view opened with the same floor as one that expired joins a new group: closing the
    /// expired view must not take the new one's count, or purge drops what the new one needs.
    #[test]
    fn closing_an_expired_view_leaves_a_newer_view_of_the_same_floor_counted() {
        let store = VersionStore::new(100);
        let c1 = store.begin_commit();
        let expired = store.open_view();
        store.record(c1, vec![((1, b"k".to_vec()), Some(vec![7u8; 200]))]);
        let fresh = store.open_view(); // floor 0 again: c1 is still applying
        drop(expired);
        store.end_commit(c1);
        assert_eq!(
            fresh.resolve(1, b"k", Some(b"new".to_vec())).unwrap(),
            Some(vec![7u8; 200])
        );
        assert_eq!(store.stats().history_versions, 1);
        drop(fresh);
        assert_eq!(store.stats().history_versions, 0);
    }
}
