//! salvage: `evenkeel check DIR --salvage --out OUT`, the way out for a damaged database:
//! exports every row that can still be read, one dump file per table, in the line format
//! `load` reads, so `evenkeel load NEW --table T < OUT/T.tsv` rebuilds the table.
//!
//! It trusts no page that fails verification and no tree structure: it reads the data file
//! page by page (never through the engine, so it works when a normal open refuses), and
//! - takes a page that fails `page::verify` from the doublewrite area when a slot holds a valid
//!   copy at least as new as the damaged page claims to be (recovery's own rule), and also
//!   uses a slot copy newer than a valid data page (a lost in-place write);
//! - reads the catalog from every valid catalog leaf (table name -> id); tables whose catalog
//!   entry is unreadable are exported as `table-ID.tsv`;
//! - exports the records of every valid leaf page owned by a table, wherever it lies: a bad
//!   internal page or a broken leaf link loses nothing beyond the bad pages themselves;
//!   a key found in two leaves (a split caught half-written) keeps the copy from the page
//!   with the higher LSN; a value whose overflow chain is broken is skipped and counted;
//! - reports the pages it could not read, as ranges, with the first reasons.
//!
//! - counts the pages the file header says the file holds but the file lacks (cut short) as
//!   unreadable, so a truncated file never reports nothing lost.
//!
//! It reads the data file as it lies and writes nothing to the database directory: when the
//! database was not shut down cleanly, changes that were only in the redo log are missing
//! unless `check --salvage --recover` ran crash recovery first (which writes). Rows of a table
//! are gathered in memory before they are written in key order.

use crate::escape::encode_row;
use crate::failure::{CmdResult, Failure};
use evenkeel::page::{self, hdr, node, PageType};
use evenkeel::types::PageId;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const DWB_MAGIC: &[u8; 4] = b"EKDW";

/// Reasons listed in full before the report only counts.
const MAX_LISTED: usize = 20;

/// Where the usable image of a page comes from.
#[derive(Clone, Copy)]
enum Source {
    Data,
    /// An index into `Pages::copies`.
    Copy(usize),
    Bad,
}

struct Pages {
    data: File,
    /// Valid page images from the doublewrite file.
    copies: Vec<Vec<u8>>,
    ps: usize,
    source: Vec<Source>,
}

impl Pages {
    fn read(&self, p: u32) -> Option<Vec<u8>> {
        let mut b = vec![0u8; self.ps];
        let ok = match self.source.get(p as usize)? {
            Source::Data => self.data.read_exact_at(&mut b, p as u64 * self.ps as u64),
            Source::Copy(i) => {
                b.copy_from_slice(self.copies.get(*i)?);
                Ok(())
            }
            Source::Bad => return None,
        };
        ok.ok()?;
        page::verify(&b, PageId(p)).ok()?;
        Some(b)
    }
}

/// What a salvage did.
pub struct Salvaged {
    pub tables: Vec<TableOut>,
    pub pages: u32,
    pub pages_from_doublewrite: u32,
    pub bad_pages: Vec<(u32, String)>,
    /// Pages the file header counts that the file does not hold whole (it was cut short):
    /// the first and the last, and why.
    pub missing: Option<(u32, u32, String)>,
}

impl Salvaged {
    /// Pages that could not be read: damaged ones and missing ones.
    pub fn unreadable(&self) -> u64 {
        self.bad_pages.len() as u64
            + self
                .missing
                .as_ref()
                .map_or(0, |(a, b, _)| u64::from(b - a) + 1)
    }
}

pub struct TableOut {
    pub name: String,
    pub id: u32,
    pub file: PathBuf,
    pub rows: u64,
    pub rows_skipped: u64,
}

fn page_size_of(dir: &Path, data: &File, len: u64) -> Result<usize, Failure> {
    let mut first = vec![0u8; page::MIN_PAGE_SIZE];
    if data.read_exact_at(&mut first, 0).is_ok() {
        if let Ok(ps) = evenkeel::space::probe_page_size(&first) {
            return Ok(ps);
        }
    }
    // damaged header: the doublewrite header, else the size at which page 1 verifies
    if let Ok(f) = File::open(dir.join(evenkeel::dwb::DWB_FILE_NAME)) {
        let mut h = [0u8; 12];
        if f.read_exact_at(&mut h, 0).is_ok() && &h[..4] == DWB_MAGIC {
            let ps = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            if page::PAGE_SIZES.contains(&ps) {
                return Ok(ps);
            }
        }
    }
    for ps in page::PAGE_SIZES {
        let mut b = vec![0u8; ps];
        if len >= 2 * ps as u64
            && data.read_exact_at(&mut b, ps as u64).is_ok()
            && page::verify(&b, PageId(1)).is_ok()
        {
            return Ok(ps);
        }
    }
    Err(Failure::Damaged(format!(
        "{}: the file header is damaged and no page size gives a valid page 1: nothing can \
         be salvaged",
        dir.join(evenkeel::db::DATA_FILE).display()
    )))
}

/// Newest valid doublewrite copy of each page: page -> (LSN, file offset).
/// The newest valid copy of each page in the doublewrite file: page number to (LSN, index
/// into the returned images).
type Copies = (HashMap<u32, (u64, usize)>, Vec<Vec<u8>>);

fn doublewrite_copies(dwb: &File, ps: usize) -> Copies {
    let mut out: Copies = Default::default();
    let mut h = [0u8; 12];
    if dwb.read_exact_at(&mut h, 0).is_err() || &h[..4] != DWB_MAGIC {
        return out;
    }
    if u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize != ps {
        return out;
    }
    let len = dwb.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = vec![0u8; len as usize];
    if dwb.read_exact_at(&mut bytes, 0).is_err() {
        return out;
    }
    for copy in evenkeel::dwb::copies_in(&bytes, ps) {
        let (Some(lsn), Ok(image)) = (copy.lsn(), copy.image) else {
            continue;
        };
        let i = out.1.len();
        let e = out.0.entry(copy.page).or_insert((lsn.0, i));
        if lsn.0 >= e.0 {
            *e = (lsn.0, i);
        }
        out.1.push(image);
    }
    out
}

/// A file name for table `name` that is safe in any directory: the name itself when it is
/// made of letters, digits, `.`, `_` and `-` (and does not start with `.`), else `table-ID`.
fn file_name(name: Option<&str>, id: u32) -> String {
    match name {
        Some(n)
            if !n.starts_with('.')
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) =>
        {
            format!("{n}.tsv")
        }
        _ => format!("table-{id}.tsv"),
    }
}

/// Salvages the database in `dir` into `out` (created if missing; existing dump files of the
/// same names are replaced).
pub fn salvage(dir: &Path, out: &Path) -> Result<Salvaged, Failure> {
    let data_path = dir.join(evenkeel::db::DATA_FILE);
    let data = File::open(&data_path)
        .map_err(|e| Failure::op(format!("opening {}", data_path.display()), e))?;
    let len = data
        .metadata()
        .map_err(|e| Failure::op(format!("reading {}", data_path.display()), e))?
        .len();
    let ps = page_size_of(dir, &data, len)?;
    let dwb = File::open(dir.join(evenkeel::dwb::DWB_FILE_NAME)).ok();
    let (copies, images) = dwb
        .as_ref()
        .map(|f| doublewrite_copies(f, ps))
        .unwrap_or_default();
    let n = (len / ps as u64) as u32;
    let mut source = Vec::with_capacity(n as usize);
    let mut bad_pages = Vec::new();
    let mut from_dwb = 0u32;
    let mut b = vec![0u8; ps];
    for p in 0..n {
        data.read_exact_at(&mut b, p as u64 * ps as u64)
            .map_err(|e| Failure::op(format!("reading {}", data_path.display()), e))?;
        let copy = copies.get(&p).copied();
        let src = match (page::verify(&b, PageId(p)), copy) {
            (Ok(()), Some((lsn, off))) if lsn > hdr::lsn(&b).0 => Source::Copy(off),
            (Ok(()), _) => Source::Data,
            (Err(fault), Some((lsn, off))) => {
                let (head, trail) = page::lsn_copies(&b);
                if lsn >= head.max(trail) || lsn == head || lsn == trail {
                    Source::Copy(off)
                } else {
                    bad_pages.push((p, format!("{fault} (doublewrite copy older)")));
                    Source::Bad
                }
            }
            (Err(fault), None) => {
                if p > 0 {
                    bad_pages.push((p, fault.to_string()));
                }
                Source::Bad
            }
        };
        if matches!(src, Source::Copy(_)) {
            from_dwb += 1;
        }
        source.push(src);
    }
    let pages = Pages {
        data,
        copies: images,
        ps,
        source,
    };
    // the header (when it reads) counts the pages the file should hold
    let missing = pages.read(0).and_then(|h| {
        let count = evenkeel::space::Header::decode(&h).page_count;
        (count > n).then(|| {
            (
                n,
                count - 1,
                format!(
                    "missing: the file is {len} bytes, {} whole pages of {ps} bytes, but its \
                     header counts {count} pages; the file was cut short",
                    n
                ),
            )
        })
    });

    // catalog entries and each table's leaves, from every usable page
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut leaves: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    // the change buffer's tree (its rows are pending index changes, not a table's rows)
    let mut change_buffer_id = None;
    for p in 1..n {
        let Some(b) = pages.read(p) else { continue };
        if hdr::page_type(&b) != Some(PageType::Leaf) {
            continue;
        }
        let owner = hdr::owner(&b);
        if owner == evenkeel::catalog::CATALOG_TABLE_ID {
            for i in 0..node::nslots(&b) {
                // a drop intent or the change buffer's entry names no table (a dropped table
                // keeps its name's entry, if any)
                if node::key(&b, i) == evenkeel::btree::ibuf::CATALOG_KEY {
                    if let node::LeafValue::Inline(v) = node::leaf_value(&b, i) {
                        change_buffer_id = evenkeel::catalog::decode(v).map(|(id, _)| id);
                    }
                }
                if evenkeel::catalog::is_reserved_key(node::key(&b, i)) {
                    continue;
                }
                if let (Ok(name), node::LeafValue::Inline(v)) = (
                    std::str::from_utf8(node::key(&b, i)),
                    node::leaf_value(&b, i),
                ) {
                    if let Some((id, _root)) = evenkeel::catalog::decode(v) {
                        names.insert(id, name.to_string());
                    }
                }
            }
        } else {
            leaves.entry(owner).or_default().push(p);
        }
    }

    if let Some(id) = change_buffer_id {
        leaves.remove(&id);
    }
    std::fs::create_dir_all(out)
        .map_err(|e| Failure::op(format!("creating {}", out.display()), e))?;
    let mut tables = Vec::new();
    for (id, leaf_pages) in &leaves {
        let mut rows: BTreeMap<Vec<u8>, (u64, Vec<u8>)> = BTreeMap::new();
        let mut skipped = 0u64;
        for &p in leaf_pages {
            let Some(b) = pages.read(p) else { continue };
            let lsn = hdr::lsn(&b).0;
            for i in 0..node::nslots(&b) {
                let key = node::key(&b, i).to_vec();
                if rows.get(&key).is_some_and(|(l, _)| *l >= lsn) {
                    continue;
                }
                let value = match node::leaf_value(&b, i) {
                    node::LeafValue::Inline(v) => Some(v.to_vec()),
                    node::LeafValue::Overflow { len, first } => read_chain(&pages, *id, first, len),
                };
                match value {
                    Some(v) => {
                        rows.insert(key, (lsn, v));
                    }
                    None => skipped += 1,
                }
            }
        }
        let name = names.get(id).cloned();
        let path = out.join(file_name(name.as_deref(), *id));
        let mut buf = Vec::new();
        for (k, (_, v)) in &rows {
            encode_row(&mut buf, k, v);
        }
        let mut f = File::create(&path)
            .map_err(|e| Failure::op(format!("creating {}", path.display()), e))?;
        f.write_all(&buf)
            .and_then(|()| f.sync_all())
            .map_err(|e| Failure::op(format!("writing {}", path.display()), e))?;
        tables.push(TableOut {
            name: name.unwrap_or_else(|| format!("(table id {id}, catalog entry unreadable)")),
            id: *id,
            file: path,
            rows: rows.len() as u64,
            rows_skipped: skipped,
        });
    }
    // tables the catalog names but that have no readable leaf get an empty file too, so the
    // report lists them
    for (id, name) in &names {
        if !leaves.contains_key(id) {
            let path = out.join(file_name(Some(name), *id));
            File::create(&path)
                .map_err(|e| Failure::op(format!("creating {}", path.display()), e))?;
            tables.push(TableOut {
                name: name.clone(),
                id: *id,
                file: path,
                rows: 0,
                rows_skipped: 0,
            });
        }
    }
    tables.sort_by_key(|t| t.id);
    Ok(Salvaged {
        tables,
        pages: n,
        pages_from_doublewrite: from_dwb,
        bad_pages,
        missing,
    })
}

/// The value of an overflow chain, or None when any page of it is unusable or it does not
/// hold exactly `len` bytes of table `owner`.
fn read_chain(pages: &Pages, owner: u32, first: PageId, len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    let mut pid = first;
    let max_pages = len.div_ceil(page::overflow_capacity(pages.ps)).max(1);
    for _ in 0..max_pages {
        let b = pages.read(pid.0)?;
        if hdr::page_type(&b) != Some(PageType::Overflow) || hdr::owner(&b) != owner {
            return None;
        }
        out.extend_from_slice(page::overflow::data(&b)?);
        if out.len() >= len {
            break;
        }
        pid = hdr::next(&b);
    }
    (out.len() == len).then_some(out)
}

/// "3, 7-9, 12": page numbers as ranges.
fn ranges(pages: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let mut j = i;
        while j + 1 < pages.len() && pages[j + 1] == pages[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            pages[i].to_string()
        } else {
            format!("{}-{}", pages[i], pages[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// Runs the salvage and prints its report; exits 3 when anything could not be read.
pub fn run(dir: &Path, out: &Path) -> CmdResult {
    let s = salvage(dir, out)?;
    let data = dir.join(evenkeel::db::DATA_FILE);
    println!(
        "salvage of {}: {} pages, {} unreadable, {} taken from the doublewrite area",
        data.display(),
        s.pages,
        s.unreadable(),
        s.pages_from_doublewrite
    );
    let width = s
        .tables
        .iter()
        .map(|t| t.name.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    println!(
        "{:<width$} {:>12} {:>12}  file",
        "table", "rows", "rows skipped"
    );
    let (mut rows, mut skipped) = (0u64, 0u64);
    for t in &s.tables {
        println!(
            "{:<width$} {:>12} {:>12}  {}",
            t.name,
            t.rows,
            t.rows_skipped,
            t.file.display()
        );
        rows += t.rows;
        skipped += t.rows_skipped;
    }
    if !s.bad_pages.is_empty() {
        let list: Vec<u32> = s.bad_pages.iter().map(|(p, _)| *p).collect();
        println!("unreadable pages (skipped): {}", ranges(&list));
        for (p, why) in s.bad_pages.iter().take(MAX_LISTED) {
            println!("  {}: page {p}: {why}", data.display());
        }
        if s.bad_pages.len() > MAX_LISTED {
            println!("  ... and {} more", s.bad_pages.len() - MAX_LISTED);
        }
    }
    if let Some((first, last, why)) = &s.missing {
        let span = if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        };
        println!("unreadable pages (missing from the file): {span}");
        println!("  {}: pages {first}-{last}: {why}", data.display());
    }
    println!(
        "exported {rows} rows of {} tables to {}; rebuild with: evenkeel load NEWDIR --table T \
         < {}/T.tsv",
        s.tables.len(),
        out.display(),
        out.display()
    );
    if s.unreadable() == 0 && skipped == 0 {
        Ok(())
    } else {
        Err(Failure::Damaged(format!(
            "salvage of {}: {} unreadable pages, {skipped} rows skipped (broken overflow \
             chains); rows on unreadable or missing leaf pages are lost",
            dir.display(),
            s.unreadable()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_file_names() {
        assert_eq!(ranges(&[3, 7, 8, 9, 12]), "3, 7-9, 12");
        assert_eq!(ranges(&[]), "");
        assert_eq!(file_name(Some("orders_2"), 4), "orders_2.tsv");
        assert_eq!(file_name(Some("../x"), 4), "table-4.tsv");
        assert_eq!(file_name(Some(".hidden"), 5), "table-5.tsv");
        assert_eq!(file_name(None, 6), "table-6.tsv");
    }
}
