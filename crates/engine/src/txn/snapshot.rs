//! snapshot: a read-only view of the whole database as of one moment ([`Snapshot`]), for
//! long reads beside writers: a dump, a report, a consistency check. It takes no lock, never
//! waits for a writer and never makes one wait; what it costs is the old row versions kept
//! while it is open (see mvcc.rs, `max_history_size`).

use super::scan::{KeyRange, Scan};
use crate::error::Result;
use crate::mvcc::View;
use crate::page::node;
use crate::shared::{DbInner, Table};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Every table as it was when [`crate::Database::snapshot`] returned: commits after that are
/// not seen, commits before it wholly. Cheap to clone (the clones share one view); the view
/// closes when the last clone drops. Reads fail with [`crate::Error::SnapshotTooOld`] once the
/// history it needs grew past `max_history_size` and was purged.
#[derive(Clone)]
pub struct Snapshot {
    db: Arc<DbInner>,
    view: Arc<View>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("database", &self.db.location)
            .field("at", &self.view.at())
            .finish()
    }
}

impl Snapshot {
    pub(crate) fn new(db: Arc<DbInner>) -> Snapshot {
        let view = Arc::new(db.dur.versions.open_view());
        Snapshot { db, view }
    }

    /// The commit number this snapshot sees up to.
    pub fn at(&self) -> u64 {
        self.view.at()
    }

    /// Seconds since the snapshot was taken.
    pub fn age_s(&self) -> f64 {
        self.view.age_s()
    }

    /// The value of `key` in `t` as of the snapshot.
    pub fn get(&self, t: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.check_open()?;
        t.check_usable(&self.db)?;
        if key.len() > node::max_key_len(self.db.pool.page_size()) {
            return Ok(None); // no such key can be stored
        }
        let latest = t.tree().get(&self.db.ctx(), key)?;
        self.view.resolve(t.id(), key, latest)
    }

    /// Rows of `t` with keys in `range` as of the snapshot, in key order; `.rev()` walks
    /// them from the top.
    pub fn range<R: KeyRange>(&self, t: &Table, range: R) -> Result<Scan> {
        let (lower, upper) = range.key_bounds();
        self.scan(t, lower, upper, false)
    }

    /// Rows of `t` with keys in (`lower`, `upper`), ascending, or descending when `reverse`.
    pub fn scan(
        &self,
        t: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Scan> {
        self.db.check_open()?;
        t.check_usable(&self.db)?;
        Ok(Scan::new(
            self.db.clone(),
            t.clone(),
            lower,
            upper,
            VecDeque::new(),
            reverse,
            Some(self.view.clone()),
        ))
    }
}
