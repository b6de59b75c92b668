//! fuzz: entry points that push arbitrary bytes through the engine's real decoders. They are
//! called by the cargo-fuzz targets in `fuzz/` and by the proptest replay in
//! `tests/it/fuzz.rs`; not part of the API.
//!
//! Each entry point takes any bytes and must return without panicking, overflowing, slicing
//! out of bounds or looping for long. Besides "no panic" each one asserts properties that hold
//! for every input the decoder accepts (a decoded record re-encodes to the same record, a page
//! that passed `verify` can be walked and searched, options that parsed print and parse back
//! to themselves); a failed assertion is a bug the fuzzer reports like a crash.
//!
//! Input formats (the seed corpus in `fuzz/corpus/<target>/` holds real ones):
//! - [`data_file`]: `flags u8 | image of a data file`. Flags bit 0: stamp a correct checksum
//!   on every page first (so mutations reach the layout checks behind it). At most
//!   [`MAX_FUZZ_PAGES`] pages are used.
//! - [`log_file`]: `flags u8 | image of ib_logfile0` (header block, two checkpoint slots, data
//!   blocks). Flags bit 0: stamp a correct checksum on every block; bit 1: 4096-byte blocks
//!   (else 512).
//! - [`log_records`]: `page size selector u8 | payload of one log group`.
//! - [`options`]: text (lossily UTF-8), parsed as a TOML file and as `name=value` lines.

use crate::check;
use crate::io::{FileKind, SimStorage, Storage};
use crate::options::Options;
use crate::page::{self, hdr, node, PageType, PAGE_SIZES};
use crate::types::PageId;
use crate::wal::record;

/// Most pages of a data-file image the [`data_file`] target looks at.
pub const MAX_FUZZ_PAGES: usize = 64;

/// A data file image: per-page verification and walk, then the whole-file `check`.
pub fn data_file(data: &[u8]) {
    let Some((&flags, image)) = data.split_first() else {
        return;
    };
    let ps = crate::space::probe_page_size(image).unwrap_or(page::MIN_PAGE_SIZE);
    let pages = image.len().div_ceil(ps).min(MAX_FUZZ_PAGES);
    let mut img = image[..image.len().min(pages * ps)].to_vec();
    img.resize(pages * ps, 0);
    if flags & 1 != 0 {
        for b in img.chunks_mut(ps) {
            page::seal(b);
        }
    }
    for (i, b) in img.chunks(ps).enumerate() {
        walk_page(b, PageId(i as u32));
    }
    let storage = SimStorage::new();
    let Ok(file) = storage.open("fuzz.ibd", FileKind::Data, true) else {
        panic!("the simulated storage refused to create a file");
    };
    if file.write_at(&img, 0).is_err() {
        panic!(
            "the simulated storage refused a write of {} bytes",
            img.len()
        );
    }
    if let Ok(report) = check::check_file(file.as_ref()) {
        assert!(report.page_size == ps, "check used another page size");
        for p in &report.problems {
            assert!(
                !p.rule.is_empty(),
                "a problem without a rule at page {}",
                p.page
            );
        }
    }
}

/// One page as the buffer pool and the B+tree read it: `verify`, then every accessor the tree
/// uses on every slot. A page that passed `verify` must be walkable and searchable.
fn walk_page(b: &[u8], pid: PageId) {
    if let Err(f) = page::verify(b, pid) {
        assert!(!f.to_string().is_empty());
        return;
    }
    match hdr::page_type(b) {
        Some(PageType::Leaf) | Some(PageType::Internal) => {}
        Some(PageType::Overflow) => {
            if let Some(d) = page::overflow::data(b) {
                assert!(d.len() <= page::overflow_capacity(b.len()));
            }
            return;
        }
        _ => return,
    }
    let n = node::nslots(b);
    let leaf = hdr::level(b) == 0;
    let used = node::used_space(b);
    assert!(used + node::free_space(b) == b.len() - page::PAGE_OVERHEAD);
    for i in 0..n {
        let k = node::key(b, i);
        assert!(node::cell_len(b, i) >= node::CELL_HEADER + k.len());
        if leaf {
            match node::leaf_value(b, i) {
                node::LeafValue::Inline(v) => assert!(v.len() <= node::MAX_VALUE_LEN),
                node::LeafValue::Overflow { len, .. } => assert!(len <= node::MAX_VALUE_LEN),
            }
        } else {
            let _ = node::child(b, i);
        }
        // slot 0 of an internal page holds no key (it means -infinity)
        if leaf || i > 0 {
            assert!(
                node::search(b, k) == Ok(i),
                "page {pid}: a verified page's key at slot {i} is not found by search"
            );
            if !leaf {
                assert!(node::child_index(b, k) == i);
            }
        }
    }
    if n >= 2 {
        let s = node::split_point(b);
        assert!((1..n).contains(&s));
    }
}

/// An `ib_logfile0` image: file header, checkpoint slots, and the recovery scan from the
/// newest valid checkpoint, then every group's records decoded and applied.
pub fn log_file(data: &[u8]) {
    crate::wal::fuzz::log_file(data);
}

/// One log group's payload: the record decoder, then what recovery does with each record.
pub fn log_records(data: &[u8]) {
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let ps = PAGE_SIZES[usize::from(sel) % PAGE_SIZES.len()];
    let Some(recs) = record::decode_group(payload, ps) else {
        return;
    };
    crate::wal::fuzz::check_records(&recs, ps);
}

/// Options text: as a TOML file and as `name=value` lines. Whatever parses must validate and
/// print back (`describe`) to text that parses to the same options.
pub fn options(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Options::from_toml_str(&text) {
        Ok(o) => check_options(&o),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let mut o = Options::default();
    match o.apply_pairs(text.lines()) {
        Ok(()) => check_options(&o),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(
                o == Options::default(),
                "a failed apply_pairs changed the options"
            );
        }
    }
    if let Some((name, value)) = text.split_once('=') {
        let mut o = Options::default();
        if let Err(e) = o.set(name, value) {
            assert!(!e.to_string().is_empty());
        }
    }
}

fn check_options(o: &Options) {
    assert!(o.validate().is_ok(), "parsed options fail validate");
    let pairs: Vec<String> = o
        .describe()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut back = Options::default();
    if let Err(e) = back.apply_pairs(&pairs) {
        panic!("describe() printed {pairs:?}, which does not parse back: {e}");
    }
    assert!(&back == o, "describe() does not round-trip: {pairs:?}");
    let toml: String = pairs
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            format!("{k} = \"{v}\"\n")
        })
        .collect();
    match Options::from_toml_str(&toml) {
        Ok(t) => assert!(&t == o, "TOML of describe() does not round-trip"),
        Err(e) => panic!("TOML of describe() does not parse: {e}\n{toml}"),
    }
}
