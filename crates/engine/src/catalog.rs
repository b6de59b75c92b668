//! catalog: table names to B+tree roots. The catalog is itself a B+tree (table id 0) whose root
//! is named in the file header; each entry is `name -> table_id u32 | root u32`.
//!
//! DDL (create/drop) is serialised by one mutex; lookups read an in-memory map loaded at open.

use crate::btree::{Ctx, Tree, TreeCounters};
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

pub struct Catalog {
    pub tree: Tree,
    tables: RwLock<HashMap<String, Arc<Tree>>>,
    ddl: Mutex<()>,
    counters: Arc<TreeCounters>,
}

fn encode(id: u32, root: PageId) -> [u8; 8] {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&id.to_le_bytes());
    v[4..].copy_from_slice(&root.0.to_le_bytes());
    v
}

pub fn decode(v: &[u8]) -> Option<(u32, PageId)> {
    if v.len() != 8 {
        return None;
    }
    let id = u32::from_le_bytes(v[..4].try_into().ok()?);
    let root = u32::from_le_bytes(v[4..].try_into().ok()?);
    Some((id, PageId(root)))
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
        let mut lower: Option<Vec<u8>> = None;
        loop {
            let lb = match &lower {
                Some(k) => std::ops::Bound::Excluded(&k[..]),
                None => std::ops::Bound::Unbounded,
            };
            let batch = tree.scan_batch(cx, lb, std::ops::Bound::Unbounded, false, 256)?;
            for (k, v) in &batch.rows {
                let name = String::from_utf8(k.clone()).map_err(|_| {
                    Error::corrupt(cx.pool.file().name(), root.0, "catalog name is not UTF-8")
                })?;
                let (id, troot) = decode(v).ok_or_else(|| {
                    Error::corrupt(cx.pool.file().name(), root.0, "catalog entry is malformed")
                })?;
                tables.insert(name, Arc::new(Tree::new(id, troot, counters.clone())));
            }
            if let Some((k, _)) = batch.rows.last() {
                lower = Some(k.clone());
            }
            if batch.done {
                break;
            }
        }
        Ok(Catalog {
            tree,
            tables: RwLock::new(tables),
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

    pub fn create(&self, cx: &Ctx<'_>, name: &str) -> Result<Arc<Tree>> {
        validate_name(name)?;
        let _ddl = self.ddl.lock();
        if self.tables.read().contains_key(name) {
            return Err(Error::TableExists(name.to_string()));
        }
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
        self.tree.put(cx, name.as_bytes(), &encode(id, root))?;
        let t = Arc::new(Tree::new(id, root, self.counters.clone()));
        self.tables.write().insert(name.to_string(), t.clone());
        Ok(t)
    }

    pub fn drop_table(&self, cx: &Ctx<'_>, name: &str) -> Result<u64> {
        let _ddl = self.ddl.lock();
        let Some(t) = self.tables.write().remove(name) else {
            return Err(Error::TableNotFound(name.to_string()));
        };
        t.dropped.store(true, Ordering::Release);
        self.tree.delete(cx, name.as_bytes())?;
        t.free_all(cx)
    }
}
