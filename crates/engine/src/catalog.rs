//! catalog: table names to B+tree roots. The catalog is itself a B+tree (table id 0) whose root
//! is named in the file header; each entry is `name -> table_id u32 | root u32`, followed for
//! an index table by a flags byte (bit 0: a key set, btree/ibuf.rs); an entry without it is a
//! plain table, as every entry written before index tables existed. The change buffer's tree
//! has an entry under a reserved key ([`crate::btree::ibuf::CATALOG_KEY`]) in the same format.
//!
//! DDL (create/drop) is serialised by one mutex; lookups read an in-memory map loaded at open.
//!
//! Dropping a table is one crash-safe unit: a logged intent that recovery completes. First an
//! entry `\0drop:` + table id (big-endian) `-> table_id | root` is put in the catalog (one
//! mtr; table names cannot start with a control character, so it names no table); from then on
//! the drop happens whatever follows. Then the name's entry is deleted, the tree's pages are
//! freed leaves first, one page (with its overflow chains) per mtr, so every page not yet
//! freed stays reachable from the root through pages not yet freed, and finally the intent is
//! deleted. Recovery ([`Catalog::finish_drops`], after the re-apply of cut COMMITs) finds the
//! intents left by a crash and runs the same steps again, skipping pages already freed: a page
//! of the dropped tree is one of its type and owner (table ids are never reused), so a freed
//! page, on the free list or reused by another table since, is told apart.

use crate::btree::{ibuf, Ctx, Tree, TreeCounters};
use crate::error::{Error, Result};
use crate::mtr::Mtr;
use crate::page::PageType;
use crate::space::{self, Header, HEADER_PAGE};
use crate::types::PageId;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const CATALOG_TABLE_ID: u32 = 0;
pub const MAX_TABLE_NAME: usize = 255;
/// Catalog keys of drop intents: this prefix, then the table id (u32, big-endian).
pub const DROP_INTENT_PREFIX: &[u8] = b"\0drop:";

/// The catalog key of the drop intent of table `id`.
pub fn drop_intent_key(id: u32) -> Vec<u8> {
    let mut k = DROP_INTENT_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The table id of a drop intent's key, or None for a table name.
pub fn drop_intent_id(key: &[u8]) -> Option<u32> {
    let id = key.strip_prefix(DROP_INTENT_PREFIX)?;
    Some(u32::from_be_bytes(id.try_into().ok()?))
}

/// Whether a catalog key names no table (a drop intent, the change buffer's tree).
pub fn is_reserved_key(key: &[u8]) -> bool {
    drop_intent_id(key).is_some() || key == ibuf::CATALOG_KEY
}

/// Flag bit of an entry's flags byte: the table is a key set (an index table).
const FLAG_KEY_SET: u8 = 1;

pub struct Catalog {
    pub tree: Tree,
    tables: RwLock<HashMap<String, Arc<Tree>>>,
    /// The change buffer tree's (id, root), when the file has one.
    ibuf_entry: Mutex<Option<(u32, PageId)>>,
    /// Drops a crash interrupted, found at load: (table id, root), for `finish_drops`.
    interrupted_drops: Mutex<Vec<(u32, PageId)>>,
    ddl: Mutex<()>,
    counters: Arc<TreeCounters>,
}

fn encode(id: u32, root: PageId) -> [u8; 8] {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&id.to_le_bytes());
    v[4..].copy_from_slice(&root.0.to_le_bytes());
    v
}

fn encode_flags(id: u32, root: PageId, flags: u8) -> Vec<u8> {
    let mut v = encode(id, root).to_vec();
    if flags != 0 {
        v.push(flags);
    }
    v
}

/// An entry's table id and root (a plain or an index table).
pub fn decode(v: &[u8]) -> Option<(u32, PageId)> {
    decode_entry(v).map(|(id, root, _)| (id, root))
}

/// An entry's table id, root and whether the table is a key set (an index table).
pub fn decode_entry(v: &[u8]) -> Option<(u32, PageId, bool)> {
    let flags = match v.len() {
        8 => 0,
        9 if v[8] & !FLAG_KEY_SET == 0 => v[8],
        _ => return None,
    };
    let id = u32::from_le_bytes(v[..4].try_into().ok()?);
    let root = u32::from_le_bytes(v[4..8].try_into().ok()?);
    Some((id, PageId(root), flags & FLAG_KEY_SET != 0))
}

pub fn validate_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::InvalidTableName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("a table name must not be empty");
    }
    if name.len() > MAX_TABLE_NAME {
        return bad("a table name is at most 255 bytes");
    }
    if name.chars().any(|c| c.is_control()) {
        return bad("a table name must not contain control characters");
    }
    Ok(())
}

impl Catalog {
    /// Loads every entry of the catalog tree.
    pub fn load(cx: &Ctx<'_>, root: PageId, counters: Arc<TreeCounters>) -> Result<Self> {
        let tree = Tree::new(CATALOG_TABLE_ID, root, counters.clone());
        let mut tables = HashMap::new();
        let mut drops = Vec::new();
        let mut ibuf_entry = None;
        let mut lower: Option<Vec<u8>> = None;
        loop {
            let lb = match &lower {
                Some(k) => std::ops::Bound::Excluded(&k[..]),
                None => std::ops::Bound::Unbounded,
            };
            let batch = tree.scan_batch(cx, lb, std::ops::Bound::Unbounded, false, 256)?;
            for (k, v) in &batch.rows {
                if let Some(id) = drop_intent_id(k) {
                    let (_, troot) = decode(v).ok_or_else(|| {
                        Error::corrupt(cx.pool.file().name(), root.0, "drop intent is malformed")
                    })?;
                    drops.push((id, troot));
                    continue;
                }
                if k[..] == *ibuf::CATALOG_KEY {
                    ibuf_entry = Some(decode(v).ok_or_else(|| {
                        Error::corrupt(
                            cx.pool.file().name(),
                            root.0,
                            "the change buffer's catalog entry is malformed",
                        )
                    })?);
                    continue;
                }
                let name = String::from_utf8(k.clone()).map_err(|_| {
                    Error::corrupt(cx.pool.file().name(), root.0, "catalog name is not UTF-8")
                })?;
                let (id, troot, key_set) = decode_entry(v).ok_or_else(|| {
                    Error::corrupt(cx.pool.file().name(), root.0, "catalog entry is malformed")
                })?;
                let t = if key_set {
                    Tree::new_key_set(id, troot, counters.clone())
                } else {
                    Tree::new(id, troot, counters.clone())
                };
                tables.insert(name, Arc::new(t));
            }
            if let Some((k, _)) = batch.rows.last() {
                lower = Some(k.clone());
            }
            if batch.done {
                break;
            }
        }
        // A table whose drop began is gone, even where the crash left its name behind.
        tables.retain(|_, t| !drops.iter().any(|&(id, _)| id == t.id));
        Ok(Catalog {
            tree,
            tables: RwLock::new(tables),
            ibuf_entry: Mutex::new(ibuf_entry),
            interrupted_drops: Mutex::new(drops),
            ddl: Mutex::new(()),
            counters,
        })
    }

    pub fn get(&self, name: &str) -> Option<Arc<Tree>> {
        self.tables.read().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tables.read().keys().cloned().collect();
        v.sort();
        v
    }

    pub fn all(&self) -> Vec<(String, Arc<Tree>)> {
        let mut v: Vec<_> = self
            .tables
            .read()
            .iter()
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Creates table `name`; `key_set`: an index table (btree/ibuf.rs).
    pub fn create(&self, cx: &Ctx<'_>, name: &str, key_set: bool) -> Result<Arc<Tree>> {
        validate_name(name)?;
        let _ddl = self.ddl.lock();
        if self.tables.read().contains_key(name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let (id, root) = self.allocate_tree(cx)?;
        let flags = if key_set { FLAG_KEY_SET } else { 0 };
        self.tree
            .put(cx, name.as_bytes(), &encode_flags(id, root, flags))?;
        let t = Arc::new(if key_set {
            Tree::new_key_set(id, root, self.counters.clone())
        } else {
            Tree::new(id, root, self.counters.clone())
        });
        if let Some(ib) = cx.ibuf {
            ib.register(&t);
        }
        self.tables.write().insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// The change buffer tree's (id, root), creating the tree if the file has none (a file
    /// made before the change buffer existed, opened read-write; None when `create` is false).
    pub fn change_buffer_tree(&self, cx: &Ctx<'_>, create: bool) -> Result<Option<(u32, PageId)>> {
        let _ddl = self.ddl.lock();
        let mut entry = self.ibuf_entry.lock();
        if entry.is_none() && create {
            let (id, root) = self.allocate_tree(cx)?;
            self.tree.put(cx, ibuf::CATALOG_KEY, &encode(id, root))?;
            *entry = Some((id, root));
        }
        Ok(*entry)
    }

    /// A new table id and an empty leaf root owned by it (one mtr).
    fn allocate_tree(&self, cx: &Ctx<'_>) -> Result<(u32, PageId)> {
        let (id, root) = {
            let mut mtr = Mtr::new(cx.pool, cx.space);
            let hs = mtr.write(HEADER_PAGE)?;
            let h = Header::decode(mtr.peek(hs));
            let id = h.next_table_id;
            if id == u32::MAX {
                return Err(Error::SpaceExhausted("no table ids left".into()));
            }
            let rs = space::allocate(&mut mtr, hs, PageType::Leaf, id)?;
            space::set_next_table_id(mtr.pg(hs), id + 1);
            let root = mtr.pid(rs);
            mtr.commit()?;
            (id, root)
        };
        Ok((id, root))
    }

    /// Drops table `name` as one crash-safe unit (see the module comment); returns the pages
    /// freed.
    pub fn drop_table(&self, cx: &Ctx<'_>, name: &str) -> Result<u64> {
        let _ddl = self.ddl.lock();
        let Some(t) = self.tables.read().get(name).cloned() else {
            return Err(Error::TableNotFound(name.to_string()));
        };
        // IMPORTANT: the intent is logged before anything of the table changes; once it is,
        // recovery completes the drop.
        self.tree
            .put(cx, &drop_intent_key(t.id), &encode(t.id, t.root))?;
        self.tables.write().remove(name);
        t.dropped.store(true, Ordering::Release);
        self.tree.delete(cx, name.as_bytes())?;
        if let (true, Some(ib)) = (t.key_set, cx.ibuf) {
            // its buffered changes go first; a crash before they are all gone leaves the rest
            // to the open, which discards the entries of tables that no longer exist
            ib.unregister(t.id);
            ib.discard(cx, t.id, None)?;
        }
        let freed = t.free_all(cx, false)?;
        self.tree.delete(cx, &drop_intent_key(t.id))?;
        Ok(freed)
    }

    /// Recovery: completes the drops a crash interrupted (found at load): deletes the table's
    /// name if the crash left it, frees the pages not yet freed, deletes the intent. Safe to
    /// crash in and run again. Returns the drops completed.
    pub fn finish_drops(&self, cx: &Ctx<'_>) -> Result<usize> {
        let _ddl = self.ddl.lock();
        let drops = std::mem::take(&mut *self.interrupted_drops.lock());
        if drops.is_empty() {
            return Ok(0);
        }
        let names = self.entries(cx)?;
        for &(id, root) in &drops {
            for (name, _) in names
                .iter()
                .filter(|(_, v)| decode(v).map(|d| d.0) == Some(id))
            {
                self.tree.delete(cx, name)?;
            }
            let t = Tree::new(id, root, self.counters.clone());
            let freed = t.free_all(cx, true)?;
            self.tree.delete(cx, &drop_intent_key(id))?;
            tracing::info!("recovery: completed the drop of table {id} ({freed} pages freed)");
        }
        Ok(drops.len())
    }

    /// Every entry of the catalog tree (names and intents), in key order.
    fn entries(&self, cx: &Ctx<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut lower: Option<Vec<u8>> = None;
        loop {
            let lb = match &lower {
                Some(k) => std::ops::Bound::Excluded(&k[..]),
                None => std::ops::Bound::Unbounded,
            };
            let batch = self
                .tree
                .scan_batch(cx, lb, std::ops::Bound::Unbounded, false, 256)?;
            lower = batch.rows.last().map(|(k, _)| k.clone()).or(lower);
            out.extend(batch.rows);
            if batch.done {
                return Ok(out);
            }
        }
    }
}
