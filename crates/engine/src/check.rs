//! check: verifies a data file without the buffer pool: every page's checksum, then every
//! B+tree invariant, the free list, and that each page is used exactly once.
//!
//! Rules checked (each failure names the file, the page and the rule):
//! - C1 every page 0..page_count passes `page::verify` (checksum, LSN copy, page number), and
//!   the file is a whole number of pages, at least page_count of them.
//! - C2 tree pages have the owner and level their parent implies; internal pages have children.
//! - C3 keys inside a page are strictly ascending, and lie within the bounds set by the parent
//!   separators: for child i, [key_i, key_{i+1}).
//! - C4 leaves of a tree form one doubly linked list in key order.
//! - C5 overflow chains hold exactly the length their record states, pages of the same owner.
//! - C6 the free list holds only Free pages and its length equals the header's count.
//! - C7 every page is reachable from exactly one tree or the free list (no leaks, no sharing).
//! - C8 (open database only) no page LSN is beyond the end of the redo log: a page can reach the
//!   file only after the log covering its LSN is durable (WAL), and a new log run starts past
//!   the recovered end, so a page from the future means the log lost acknowledged writes (a
//!   lost fsync, a restored or swapped log file) and its changes are not replayable.
//! - C9 the change buffer (btree/ibuf.rs): each entry is well formed (a 16-byte key, an
//!   operation and a key no longer than a key may be) and names an index table (or one being
//!   dropped) and a leaf of that table whose bounds hold its key; the inserts buffered for a
//!   leaf fit in its free space (a merge never splits); index tables hold only empty values.

use crate::btree::ibuf;
use crate::catalog::{self, CATALOG_TABLE_ID};
use crate::error::{Error, Result};
use crate::io::File;
use crate::page::{self, hdr, node, PageType};
use crate::space::{self, Header};
use crate::types::PageId;
use std::collections::HashMap;

/// Per-table figures.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TableReport {
    pub name: String,
    pub id: u32,
    pub rows: u64,
    pub depth: u32,
    pub leaf_pages: u64,
    pub internal_pages: u64,
    pub overflow_pages: u64,
    /// Mean fill of leaf pages (live bytes / usable bytes), 0..1.
    pub leaf_fill: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Problem {
    pub file: String,
    pub page: u32,
    pub rule: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: page {}: {}", self.file, self.page, self.rule)
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckReport {
    pub page_size: usize,
    pub page_count: u32,
    pub free_pages: u32,
    pub tables: Vec<TableReport>,
    /// The change buffer's tree (its rows are the buffered changes), when the file has one.
    pub change_buffer: Option<TableReport>,
    pub problems: Vec<Problem>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A leaf of an index table, as C9 needs it: its key bounds from its parents and its free
/// bytes.
struct LeafBounds {
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    free: usize,
}

/// Leaves of each index table, by table id, then page number.
type IndexLeaves = HashMap<u32, HashMap<u32, LeafBounds>>;

/// Most problems reported before the check stops listing more.
const MAX_PROBLEMS: usize = 1000;

struct Checker<'f> {
    file: &'f dyn File,
    ps: usize,
    pages: Vec<Option<Vec<u8>>>,
    used_by: HashMap<u32, u32>,
    report: CheckReport,
}

impl Checker<'_> {
    fn problem(&mut self, page: u32, rule: impl Into<String>) {
        if self.report.problems.len() < MAX_PROBLEMS {
            self.report.problems.push(Problem {
                file: self.file.name().to_string(),
                page,
                rule: rule.into(),
            });
        }
    }

    fn page(&self, pid: PageId) -> Option<&[u8]> {
        self.pages.get(pid.0 as usize).and_then(|p| p.as_deref())
    }

    /// Claims `pid` for `owner`; false (and a problem) if it is out of range or already used.
    fn claim(&mut self, pid: PageId, owner: u32, what: &str) -> bool {
        if pid.0 as usize >= self.pages.len() {
            self.problem(pid.0, format!("C7 {what} points past the end of the file"));
            return false;
        }
        if let Some(prev) = self.used_by.insert(pid.0, owner) {
            self.problem(
                pid.0,
                format!("C7 page used twice: by table {prev} and by {what} of table {owner}"),
            );
            return false;
        }
        if self.page(pid).is_none() {
            return false; // C1 already reported
        }
        true
    }
}

/// Runs every check on an open file (whose writers are quiescent).
pub fn check_file(file: &dyn File) -> Result<CheckReport> {
    check_file_with_log(file, None)
}

/// As [`check_file`], and C8 against the end of the redo log, which `log_end` returns; it is
/// called after every page was read (the log only grows, so a page written meanwhile is not
/// taken for one from the future).
///
/// Long because it is the rule list C1-C9 in order over one pass of the file; each rule is a
/// few lines against the same page map, and split they would pass that map around.
pub fn check_file_with_log(
    file: &dyn File,
    log_end: Option<&dyn Fn() -> crate::types::Lsn>,
) -> Result<CheckReport> {
    let len = file.len()?;
    let mut first = vec![0u8; page::MIN_PAGE_SIZE];
    if len < first.len() as u64 {
        return Err(Error::corrupt(
            file.name(),
            0,
            format!("file is truncated: {len} bytes"),
        ));
    }
    file.read_at(&mut first, 0)?;
    let ps = space::probe_page_size(&first).map_err(|r| Error::corrupt(file.name(), 0, r))?;
    if len < ps as u64 {
        return Err(Error::corrupt(
            file.name(),
            0,
            space::truncated_header_page(len, ps),
        ));
    }
    let mut p0 = vec![0u8; ps];
    file.read_at(&mut p0, 0)?;
    page::verify(&p0, PageId(0)).map_err(|f| Error::corrupt(file.name(), 0, f.to_string()))?;
    let h = Header::decode(&p0);
    // Pages the file really holds: a damaged header may claim up to 2^32 pages, which must
    // neither be allocated for nor read one by one.
    let present = (len / ps as u64).min(u64::from(h.page_count)) as u32;
    let mut c = Checker {
        file,
        ps,
        pages: Vec::with_capacity(present as usize),
        used_by: HashMap::new(),
        report: CheckReport {
            page_size: ps,
            page_count: h.page_count,
            free_pages: h.free_count,
            ..Default::default()
        },
    };
    // C1 also covers the file's length: the rule open applies after a clean shutdown
    if let Err(reason) = space::check_file_length(len, ps, &h) {
        c.problem(
            (len / ps as u64).min(u64::from(u32::MAX)) as u32,
            format!("C1 {reason}"),
        );
    }
    // C1: read and verify every page the file holds (pages past its end were reported above)
    for pid in 0..present {
        let mut b = vec![0u8; ps];
        if let Err(e) = file.read_at(&mut b, pid as u64 * ps as u64) {
            c.problem(pid, format!("C1 unreadable: {e}"));
            c.pages.push(None);
            continue;
        }
        match page::verify(&b, PageId(pid)) {
            Ok(()) => c.pages.push(Some(b)),
            Err(f) => {
                c.problem(pid, format!("C1 {f}"));
                c.pages.push(None);
            }
        }
    }
    if let Some(end) = log_end.map(|f| f()) {
        let future: Vec<(u32, u64)> = c
            .pages
            .iter()
            .enumerate()
            .filter_map(|(pid, b)| Some((pid as u32, hdr::lsn(b.as_deref()?).0)))
            .filter(|&(_, lsn)| lsn > end.0)
            .collect();
        for (pid, lsn) in future {
            c.problem(
                pid,
                format!(
                    "C8 page LSN {lsn} is beyond the end of the redo log at LSN {}: the log \
                     lost writes the page already reflects (a lost fsync, or a log file from \
                     elsewhere)",
                    end.0
                ),
            );
        }
    }
    c.used_by.insert(0, u32::MAX);
    // catalog tree, then every table it names
    let mut cat = TableReport {
        name: "(catalog)".into(),
        id: CATALOG_TABLE_ID,
        ..Default::default()
    };
    let mut entries = Vec::new();
    walk_tree(
        &mut c,
        h.catalog_root,
        CATALOG_TABLE_ID,
        &mut cat,
        &mut |k, v| entries.push((k.to_vec(), v.to_vec())),
        None,
    );
    let mut index_leaves = IndexLeaves::new();
    let mut dropping = Vec::new();
    let mut ibuf_entries = None;
    for (k, v) in entries {
        if let Some(id) = catalog::drop_intent_id(&k) {
            // A drop under way (or cut by a crash, before recovery completed it): its pages
            // not yet freed are still the table's, reachable from its root.
            if let Some((_, root)) = catalog::decode(&v) {
                claim_dropping(&mut c, root, id);
            }
            dropping.push(id);
            continue;
        }
        if k[..] == *ibuf::CATALOG_KEY {
            match catalog::decode(&v) {
                Some((id, root)) => {
                    let mut t = TableReport {
                        name: "(change buffer)".into(),
                        id,
                        ..Default::default()
                    };
                    let mut found = Vec::new();
                    walk_tree(
                        &mut c,
                        root,
                        id,
                        &mut t,
                        &mut |k, v| found.push((k.to_vec(), v.to_vec())),
                        None,
                    );
                    c.report.change_buffer = Some(t);
                    ibuf_entries = Some((root, found));
                }
                None => c.problem(
                    h.catalog_root.0,
                    "C9 the change buffer's catalog entry is malformed",
                ),
            }
            continue;
        }
        let name = String::from_utf8_lossy(&k).to_string();
        match catalog::decode_entry(&v) {
            Some((id, root, key_set)) => {
                let mut t = TableReport {
                    name,
                    id,
                    ..Default::default()
                };
                if key_set {
                    let mut leaves = HashMap::new();
                    let mut valued = 0u64;
                    walk_tree(
                        &mut c,
                        root,
                        id,
                        &mut t,
                        &mut |_, v| valued += u64::from(!v.is_empty()),
                        Some(&mut leaves),
                    );
                    if valued > 0 {
                        c.problem(
                            root.0,
                            format!(
                                "C9 index table `{}` holds {valued} keys with a value (an index \
                                 table's values are empty)",
                                t.name
                            ),
                        );
                    }
                    index_leaves.insert(id, leaves);
                } else {
                    walk_tree(&mut c, root, id, &mut t, &mut |_, _| {}, None);
                }
                c.report.tables.push(t);
            }
            None => c.problem(
                h.catalog_root.0,
                format!("catalog entry `{name}` is malformed"),
            ),
        }
    }
    if let Some((root, found)) = ibuf_entries {
        check_change_buffer(&mut c, root, &found, &index_leaves, &dropping);
    }
    // C6: free list
    let mut pid = h.free_head;
    let mut n = 0u32;
    while !pid.is_none() && n <= h.page_count {
        if !c.claim(pid, u32::MAX - 1, "free list") {
            break;
        }
        let Some(b) = c.page(pid) else { break };
        if hdr::page_type(b) != Some(PageType::Free) {
            c.problem(pid.0, "C6 page on the free list is not a free page");
            break;
        }
        pid = hdr::next(b);
        n += 1;
    }
    if n != h.free_count {
        c.problem(
            0,
            format!(
                "C6 free list holds {n} pages, the header counts {}",
                h.free_count
            ),
        );
    }
    // C7: leaks
    for p in 1..present {
        if !c.used_by.contains_key(&p) && c.page(PageId(p)).is_some() {
            c.problem(p, "C7 page is leaked: in no tree and not on the free list");
        }
    }
    Ok(c.report)
}

/// C9: the change buffer's entries (`found`, from its tree at `root`) against the index
/// tables' leaves.
fn check_change_buffer(
    c: &mut Checker<'_>,
    root: PageId,
    found: &[(Vec<u8>, Vec<u8>)],
    index_leaves: &IndexLeaves,
    dropping: &[u32],
) {
    let max_key = crate::page::node::max_key_len(c.ps);
    // per leaf: the bytes its buffered inserts reserve
    let mut reserved: HashMap<(u32, u32), usize> = HashMap::new();
    for (k, v) in found {
        let Some((table, pid, seq)) = ibuf::decode_key(k) else {
            c.problem(root.0, "C9 change buffer entry with a malformed key");
            continue;
        };
        let what = format!(
            "change buffer entry {seq} for page {} of table {table}",
            pid.0
        );
        let Some((insert, key)) = ibuf::decode_entry_value(v) else {
            c.problem(pid.0, format!("C9 {what}: malformed operation"));
            continue;
        };
        if key.len() > max_key {
            c.problem(
                pid.0,
                format!(
                    "C9 {what}: a key of {} bytes, more than {max_key}",
                    key.len()
                ),
            );
            continue;
        }
        let Some(leaves) = index_leaves.get(&table) else {
            if !dropping.contains(&table) {
                c.problem(
                    pid.0,
                    format!("C9 {what}: table {table} is not an index table"),
                );
            }
            continue;
        };
        let Some(leaf) = leaves.get(&pid.0) else {
            c.problem(
                pid.0,
                format!("C9 {what}: the page is not a leaf of table {table}"),
            );
            continue;
        };
        if leaf.lo.as_deref().is_some_and(|lo| key < lo)
            || leaf.hi.as_deref().is_some_and(|hi| key >= hi)
        {
            c.problem(
                pid.0,
                format!("C9 {what}: its key lies outside the leaf's bounds"),
            );
        }
        if insert {
            *reserved.entry((table, pid.0)).or_default() += ibuf::insert_reservation(key);
        }
    }
    for ((table, pid), bytes) in reserved {
        let free = index_leaves[&table][&pid].free;
        if bytes > free {
            c.problem(
                pid,
                format!(
                    "C9 the inserts buffered for this leaf of table {table} take {bytes} bytes, \
                     it has {free} free"
                ),
            );
        }
    }
}

/// Walks one tree depth-first, checking C2-C5 and calling `visit` for each leaf record;
/// `leaves`, when given, receives each leaf's bounds and free bytes (C9).
///
/// Long because C2-C5 are checked on each node as the walk reaches it, with the walk's stack
/// (key bounds, depth, parent) in scope; a rule per function would re-walk the tree.
fn walk_tree(
    c: &mut Checker<'_>,
    root: PageId,
    owner: u32,
    t: &mut TableReport,
    visit: &mut dyn FnMut(&[u8], &[u8]),
    mut leaves_out: Option<&mut HashMap<u32, LeafBounds>>,
) {
    // (page, expected level, lower bound, upper bound)
    type Pending = (PageId, Option<u8>, Option<Vec<u8>>, Option<Vec<u8>>);
    let mut stack: Vec<Pending> = vec![(root, None, None, None)];
    let mut leaves: Vec<PageId> = Vec::new();
    let mut fill_sum = 0.0;
    while let Some((pid, level, lo, hi)) = stack.pop() {
        if !c.claim(pid, owner, "tree") {
            continue;
        }
        let Some(b) = c.page(pid).map(<[u8]>::to_vec) else {
            continue;
        };
        let ty = hdr::page_type(&b);
        let l = hdr::level(&b);
        if !matches!(ty, Some(PageType::Leaf) | Some(PageType::Internal))
            || (ty == Some(PageType::Leaf)) != (l == 0)
        {
            c.problem(
                pid.0,
                format!("C2 expected a B+tree page, found {ty:?} level {l}"),
            );
            continue;
        }
        if hdr::owner(&b) != owner {
            c.problem(
                pid.0,
                format!(
                    "C2 owner is table {}, reached from table {owner}",
                    hdr::owner(&b)
                ),
            );
        }
        if let Some(e) = level {
            if l != e {
                c.problem(pid.0, format!("C2 level {l} where the parent implies {e}"));
            }
        } else {
            t.depth = l as u32 + 1;
        }
        let n = node::nslots(&b);
        let first_checked = if l == 0 { 0 } else { 1 };
        for i in first_checked..n {
            let k = node::key(&b, i);
            if lo.as_deref().is_some_and(|lo| k < lo) || hi.as_deref().is_some_and(|hi| k >= hi) {
                c.problem(
                    pid.0,
                    format!("C3 key at slot {i} lies outside its parent's bounds"),
                );
                break;
            }
        }
        if l == 0 {
            if let Some(out) = leaves_out.as_deref_mut() {
                out.insert(
                    pid.0,
                    LeafBounds {
                        lo: lo.clone(),
                        hi: hi.clone(),
                        free: node::free_space(&b),
                    },
                );
            }
            leaves.push(pid);
            t.leaf_pages += 1;
            t.rows += n as u64;
            fill_sum += node::used_space(&b) as f64 / (c.ps - page::PAGE_OVERHEAD) as f64;
            for i in 0..n {
                let k = node::key(&b, i).to_vec();
                match node::leaf_value(&b, i) {
                    node::LeafValue::Inline(v) => visit(&k, v),
                    node::LeafValue::Overflow { len, first } => {
                        check_chain(c, first, len, owner, t, pid);
                        visit(&k, &[]);
                    }
                }
            }
        } else {
            t.internal_pages += 1;
            if n == 0 {
                c.problem(pid.0, "C2 internal page without children");
            }
            // push right-to-left so leaves are met left-to-right
            for i in (0..n).rev() {
                let clo = if i == 0 {
                    lo.clone()
                } else {
                    Some(node::key(&b, i).to_vec())
                };
                let chi = if i + 1 < n {
                    Some(node::key(&b, i + 1).to_vec())
                } else {
                    hi.clone()
                };
                stack.push((node::child(&b, i), Some(l - 1), clo, chi));
            }
        }
    }
    if t.leaf_pages > 0 {
        t.leaf_fill = fill_sum / t.leaf_pages as f64;
    }
    // C4: sibling links follow the left-to-right order of the leaves
    for (i, &pid) in leaves.iter().enumerate() {
        let Some(b) = c.page(pid) else { continue };
        let want_prev = if i == 0 { PageId::NONE } else { leaves[i - 1] };
        let want_next = leaves.get(i + 1).copied().unwrap_or(PageId::NONE);
        let (p, n) = (hdr::prev(b), hdr::next(b));
        if p != want_prev || n != want_next {
            c.problem(
                pid.0,
                format!(
                    "C4 leaf links prev={p} next={n}, expected prev={want_prev} next={want_next}"
                ),
            );
        }
    }
}

/// Claims the pages of a table being dropped that its drop has not freed yet: the tree pages
/// of table `id` reachable from `root` through pages of table `id` (a freed page is free or
/// belongs to another table), with their overflow chains. Checks nothing else: the tree is
/// being taken apart.
fn claim_dropping(c: &mut Checker<'_>, root: PageId, id: u32) {
    let ours = |b: &[u8], ty: &[PageType]| {
        hdr::page_type(b).is_some_and(|t| ty.contains(&t)) && hdr::owner(b) == id
    };
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        let Some(b) = c.page(pid).map(<[u8]>::to_vec) else {
            continue;
        };
        if !ours(&b, &[PageType::Leaf, PageType::Internal]) || !c.claim(pid, id, "dropping tree") {
            continue;
        }
        let n = node::nslots(&b);
        if hdr::level(&b) > 0 {
            stack.extend((0..n).map(|i| node::child(&b, i)));
            continue;
        }
        for i in 0..n {
            if let node::LeafValue::Overflow { first, .. } = node::leaf_value(&b, i) {
                let mut p = first;
                while c.page(p).is_some_and(|o| ours(o, &[PageType::Overflow]))
                    && c.claim(p, id, "overflow chain of a dropping tree")
                {
                    p = c.page(p).map_or(PageId::NONE, hdr::next);
                }
            }
        }
    }
}

fn check_chain(
    c: &mut Checker<'_>,
    first: PageId,
    len: usize,
    owner: u32,
    t: &mut TableReport,
    leaf: PageId,
) {
    let mut pid = first;
    let mut got = 0usize;
    let max = crate::btree::overflow_pages_for(c.ps, len);
    for _ in 0..max {
        if !c.claim(pid, owner, "overflow chain") {
            return;
        }
        let Some(b) = c.page(pid) else { return };
        if hdr::page_type(b) != Some(PageType::Overflow) || hdr::owner(b) != owner {
            c.problem(pid.0, "C5 expected an overflow page of this table");
            return;
        }
        got += page::overflow::data(b).map_or(0, <[u8]>::len);
        t.overflow_pages += 1;
        pid = hdr::next(b);
    }
    if got != len {
        c.problem(
            leaf.0,
            format!("C5 overflow chain holds {got} bytes, the record says {len}"),
        );
    }
}
