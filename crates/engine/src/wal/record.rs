//! record: the redo records inside an mtr group. Type codes are on disk: frozen, never reused.
//!
//! A group payload is a sequence of records, each `type u8 | len u32 | body`:
//!
//! ```text
//! 1 PageDiff   page u32 | flags u8 (bit 0: fresh, bit 1: compacted, bit 2: moves) |
//!              nranges u16 | { off u16 | len u16 | bytes }*
//!              the bytes of the page that the mtr changed; "fresh" pages were all zeros before
//!              (a page beyond the old end of the file), so redo starts from zeros; "compacted"
//!              pages are compacted first (page::node::compact), and the ranges are relative to
//!              that: an mtr that compacts a node logs the compaction, not every moved cell.
//!              With "moves", the ranges start with moves: a range whose len has bit 15 set
//!              is `off u16 | (0x8000 | len) u16 | src u16`, and copies the page's bytes
//!              src..src+len to off..off+len as they are when it is applied; every move comes
//!              before the first range of bytes, and ranges apply in order. What a move is
//!              for: an insert or a removal in a B+tree node shifts every slot after it by two
//!              bytes, on average half the slot array (a few hundred bytes in a leaf of short
//!              index entries), and a move logs that shift in six
//! 2 Commit     txn u64 | nwrites u32 | { table u32 | klen u16 | kind u8 | vlen u32 | key | v }*
//!              the logical write set of a transaction, written before any page changes; by
//!              kind: 0 delete (vlen 0, no v), 1 put (v: the value's vlen bytes), 2 patch (the
//!              new value is the key's value before the write, also vlen bytes long, with runs
//!              written over it; v: nruns u16 | { off u16 | len u16 | bytes }*, the runs
//!              ascending and apart, len > 0, off + len <= vlen <= 65535)
//! 3 ApplyDone  commit_lsn u64: every change of the transaction whose COMMIT group starts at
//!              commit_lsn is in mtr groups before this one
//! 4 CommitContinued
//!              prev u64 | then as Commit: txn u64 | nwrites u32 | writes
//!              the writes a transaction had still to apply when its apply had logged what its
//!              commit reserved; it replaces the COMMIT (or continuation) whose group starts at
//!              prev: recovery re-applies these writes, and the ApplyDone that ends the
//!              transaction names this record's LSN
//! ```
//!
//! Page diffs never include the LSN fields (header bytes 8..16 and the 8-byte trailer): redo
//! stamps the group's end LSN itself. Decoding never panics on bad bytes; it returns None.

use crate::types::PageId;

pub const REC_PAGE_DIFF: u8 = 1;
pub const REC_COMMIT: u8 = 2;
pub const REC_APPLY_DONE: u8 = 3;
pub const REC_COMMIT_CONTINUED: u8 = 4;

/// PageDiff flags.
const FLAG_FRESH: u8 = 1;
const FLAG_COMPACTED: u8 = 2;
const FLAG_MOVES: u8 = 4;
/// In a PageDiff with [`FLAG_MOVES`], the bit of a range's len that makes it a move.
const MOVE_BIT: u16 = 0x8000;
/// The longest move one entry describes.
pub const MAX_MOVE: usize = (MOVE_BIT - 1) as usize;

/// Two changed runs closer than this are logged as one (saves the 4-byte range header).
const MERGE_GAP: usize = 12;
/// Longest range in one entry (len is a u16 whose bit 15 marks a move where moves are on).
const MAX_RANGE: usize = 16 * 1024;

/// The kinds of a write in a COMMIT record (on disk).
const WRITE_DELETE: u8 = 0;
const WRITE_PUT: u8 = 1;
const WRITE_PATCH: u8 = 2;
/// The longest value a patch describes (its offsets and lengths are u16).
pub const PATCH_MAX_VALUE: usize = u16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOp {
    pub table: u32,
    pub key: Vec<u8>,
    pub value: WriteValue,
}

/// What a write of a COMMIT record does to its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteValue {
    Delete,
    Put(Vec<u8>),
    /// The new value is the key's value before the write, `len` bytes like it, with each run
    /// `(offset, bytes)` written over it.
    Patch {
        len: usize,
        runs: Vec<(usize, Vec<u8>)>,
    },
}

impl WriteValue {
    /// The key's new value given its value `before` the write (`Some(None)`: deleted). None
    /// when a patch does not fit `before` (absent, or of another length).
    pub fn new_value(self, before: Option<&[u8]>) -> Option<Option<Vec<u8>>> {
        match self {
            WriteValue::Delete => Some(None),
            WriteValue::Put(v) => Some(Some(v)),
            WriteValue::Patch { len, runs } => {
                let mut v = before.filter(|b| b.len() == len)?.to_vec();
                for (off, bytes) in runs {
                    v.get_mut(off..off + bytes.len())?.copy_from_slice(&bytes);
                }
                Some(Some(v))
            }
        }
    }
}

/// A move of a PageDiff: the page's bytes `src..src + len` copied to `dst..dst + len`, as they
/// are when the move is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub dst: usize,
    pub src: usize,
    pub len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    PageDiff {
        page: PageId,
        fresh: bool,
        /// Compact the page (page::node::compact) before applying `moves` and `ranges`.
        compacted: bool,
        /// Applied in order, before `ranges`.
        moves: Vec<Move>,
        ranges: Vec<(usize, Vec<u8>)>,
    },
    Commit {
        txn: u64,
        writes: Vec<WriteOp>,
    },
    ApplyDone {
        commit_lsn: u64,
    },
    CommitContinued {
        prev: u64,
        txn: u64,
        writes: Vec<WriteOp>,
    },
}

fn is_lsn_byte(i: usize, ps: usize) -> bool {
    (8..16).contains(&i) || i >= ps - 8
}

/// Bytes compared at once, within a stretch that differs, before looking at 8-byte words.
const SCAN_BLOCK: usize = 64;

/// Bytes skipped at once when a whole stretch is unchanged: most of a page is, after most
/// changes, and a bytewise slice compare of this many bytes runs as vector instructions.
const SKIP_STRETCH: usize = 1024;

/// Whether `after[i..i + len]` equals `before`'s bytes there (zeros when None).
fn stretch_same(before: Option<&[u8]>, after: &[u8], i: usize, len: usize) -> bool {
    let a = &after[i..i + len];
    match before {
        Some(b) => a == &b[i..i + len],
        None => a.iter().all(|&x| x == 0),
    }
}

/// The first byte at or after `from` that differs between `before` (zeros when None) and
/// `after`, LSN bytes aside: whole equal blocks are skipped without looking at their bytes.
fn next_changed(before: Option<&[u8]>, after: &[u8], from: usize) -> Option<usize> {
    let ps = after.len();
    // Words and blocks are compared only where they hold no LSN byte: from byte 16 to the
    // trailer's last 8 bytes.
    let words_end = ps.saturating_sub(8);
    let word = |x: &[u8], at: usize| u64::from_le_bytes(x[at..at + 8].try_into().unwrap_or([0; 8]));
    let mut i = from;
    while i < ps {
        if i < 16 || !i.is_multiple_of(8) || i + 8 > words_end {
            if !is_lsn_byte(i, ps) && before.map_or(after[i] != 0, |b| b[i] != after[i]) {
                return Some(i);
            }
            i += 1;
            continue;
        }
        if i.is_multiple_of(SKIP_STRETCH)
            && i + SKIP_STRETCH <= words_end
            && stretch_same(before, after, i, SKIP_STRETCH)
        {
            i += SKIP_STRETCH;
            continue;
        }
        if i.is_multiple_of(SCAN_BLOCK)
            && i + SCAN_BLOCK <= words_end
            && stretch_same(before, after, i, SCAN_BLOCK)
        {
            i += SCAN_BLOCK;
            continue;
        }
        // Little-endian words: the lowest set bit of the difference is in its first byte.
        let diff = word(after, i) ^ before.map_or(0, |b| word(b, i));
        if diff != 0 {
            return Some(i + diff.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    None
}

/// Appends a PageDiff record for `after` relative to `before` (None: fresh, all zeros).
/// Returns false (and appends nothing) when nothing but LSN bytes changed. Its ranges are the
/// changed bytes grouped so that fewer than MERGE_GAP unchanged bytes separate two changed
/// bytes of one range; each range runs from its first changed byte to its last.
pub fn encode_page_diff(
    out: &mut Vec<u8>,
    page: PageId,
    before: Option<&[u8]>,
    after: &[u8],
) -> bool {
    encode_diff(out, page, before, after, false)
}

/// Appends a PageDiff record that compacts the page, then changes `compacted` (the page just
/// after its compaction) into `after`. Always appends: the compaction is a change.
pub fn encode_compacted_page_diff(out: &mut Vec<u8>, page: PageId, compacted: &[u8], after: &[u8]) {
    encode_diff(out, page, Some(compacted), after, true);
}

/// Appends a PageDiff record that logs `after`'s bytes in `ranges` (in any order; they may
/// overlap and may hold LSN bytes, which are left out), compacting the page first when
/// `compacted` and applying `moves` (in order) before the ranges: what an mtr logs for a page
/// it changed only through changes that noted every range they wrote and every shift they made
/// (page::Touch). The caller answers for the moves: applied in order to the page as it was
/// before (after the compaction), each must read what it read when it was made, which holds
/// when no range written before it overlaps its source (mtr.rs keeps that). Ranges closer
/// than MERGE_GAP are logged as one, as in [`encode_page_diff`]. Returns false (and appends
/// nothing) when there is nothing to log.
pub fn encode_page_ranges(
    out: &mut Vec<u8>,
    page: PageId,
    compacted: bool,
    after: &[u8],
    ranges: &mut [(usize, usize)],
    moves: &[Move],
) -> bool {
    let ps = after.len();
    ranges.sort_unstable();
    // merged in place into ranges[..m]
    let mut m = 0;
    for k in 0..ranges.len() {
        let (s, e) = (ranges[k].0, ranges[k].1.min(ps));
        if s >= e {
            continue;
        }
        if m > 0 && s < ranges[m - 1].1 + MERGE_GAP {
            ranges[m - 1].1 = ranges[m - 1].1.max(e);
        } else {
            ranges[m] = (s, e);
            m += 1;
        }
    }
    if m == 0 && moves.is_empty() && !compacted {
        return false;
    }
    out.push(REC_PAGE_DIFF);
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&page.0.to_le_bytes());
    let mut flags = if compacted { FLAG_COMPACTED } else { 0 };
    if !moves.is_empty() {
        flags |= FLAG_MOVES;
    }
    out.push(flags);
    let count_at = out.len();
    out.extend_from_slice(&[0; 2]);
    let mut count = 0u16;
    for mv in moves {
        debug_assert!(mv.len > 0 && mv.len < MOVE_BIT as usize);
        debug_assert!(mv.dst.max(mv.src) + mv.len <= ps - 8 && mv.dst.min(mv.src) >= 16);
        out.extend_from_slice(&(mv.dst as u16).to_le_bytes());
        out.extend_from_slice(&(mv.len as u16 | MOVE_BIT).to_le_bytes());
        out.extend_from_slice(&(mv.src as u16).to_le_bytes());
        count += 1;
    }
    let mut put = |out: &mut Vec<u8>, s: usize, e: usize| {
        for a in (s..e).step_by(MAX_RANGE) {
            let b = (a + MAX_RANGE).min(e);
            out.extend_from_slice(&(a as u16).to_le_bytes());
            out.extend_from_slice(&((b - a) as u16).to_le_bytes());
            out.extend_from_slice(&after[a..b]);
            count += 1;
        }
    };
    // the LSN fields, in page order: header bytes 8..16 and the trailer
    let lsn_fields = [(8, 16), (ps - 8, ps)];
    for &(s, e) in &ranges[..m] {
        let mut a = s;
        for &(ls, le) in &lsn_fields {
            if ls >= e {
                break;
            }
            if le <= a {
                continue;
            }
            if a < ls {
                put(&mut *out, a, ls);
            }
            a = le;
        }
        if a < e {
            put(&mut *out, a, e);
        }
    }
    out[count_at..count_at + 2].copy_from_slice(&count.to_le_bytes());
    let body = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&body.to_le_bytes());
    true
}

fn encode_diff(
    out: &mut Vec<u8>,
    page: PageId,
    before: Option<&[u8]>,
    after: &[u8],
    compacted: bool,
) -> bool {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(d) = next_changed(before, after, from) {
        match ranges.last_mut() {
            Some(last) if d - last.1 < MERGE_GAP => last.1 = d + 1,
            _ => ranges.push((d, d + 1)),
        }
        from = d + 1;
    }
    if ranges.is_empty() && before.is_some() && !compacted {
        return false;
    }
    let split: Vec<(usize, usize)> = ranges
        .into_iter()
        .flat_map(|(s, e)| {
            (s..e)
                .step_by(MAX_RANGE)
                .map(move |a| (a, (a + MAX_RANGE).min(e)))
        })
        .collect();
    out.push(REC_PAGE_DIFF);
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&page.0.to_le_bytes());
    let flags = if before.is_none() {
        FLAG_FRESH
    } else if compacted {
        FLAG_COMPACTED
    } else {
        0
    };
    out.push(flags);
    out.extend_from_slice(&(split.len() as u16).to_le_bytes());
    for (s, e) in split {
        out.extend_from_slice(&(s as u16).to_le_bytes());
        out.extend_from_slice(&((e - s) as u16).to_le_bytes());
        out.extend_from_slice(&after[s..e]);
    }
    let body = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&body.to_le_bytes());
    true
}

/// One write of a COMMIT record: table id, key, value (None deletes).
pub type WriteRef<'a> = (u32, &'a [u8], Option<&'a [u8]>);

pub fn encode_commit(out: &mut Vec<u8>, txn: u64, writes: &[WriteRef<'_>]) {
    encode_writes(out, None, txn, writes, &[]);
}

/// A COMMIT record whose puts are patches where that is shorter: `befores[i]`, when given,
/// is the value write `i`'s key holds before the commit (what a crash's re-apply will find
/// there unless the write is already in place). At most [`commit_size`] bytes. Returns how
/// many writes it logged as patches.
pub fn encode_commit_patched(
    out: &mut Vec<u8>,
    txn: u64,
    writes: &[WriteRef<'_>],
    befores: &[Option<&[u8]>],
) -> usize {
    encode_writes(out, None, txn, writes, befores)
}

/// A CommitContinued record: the `writes` transaction `txn` has still to apply, replacing the
/// COMMIT (or continuation) whose group starts at `prev`. [`commit_size`] of them plus 8 bytes.
pub fn encode_commit_continued(out: &mut Vec<u8>, prev: u64, txn: u64, writes: &[WriteRef<'_>]) {
    encode_writes(out, Some(prev), txn, writes, &[]);
}

/// A COMMIT (`prev` None) or CommitContinued record of decoded writes, byte for byte as
/// they were encoded (patches stay patches).
pub fn encode_ops(out: &mut Vec<u8>, prev: Option<u64>, txn: u64, ops: &[WriteOp]) {
    let len_at = begin_writes(out, prev, txn, ops.len());
    for op in ops {
        let (kind, vlen) = match &op.value {
            WriteValue::Delete => (WRITE_DELETE, 0),
            WriteValue::Put(v) => (WRITE_PUT, v.len()),
            WriteValue::Patch { len, .. } => (WRITE_PATCH, *len),
        };
        write_head(out, op.table, &op.key, kind, vlen);
        match &op.value {
            WriteValue::Delete => {}
            WriteValue::Put(v) => out.extend_from_slice(v),
            WriteValue::Patch { runs, .. } => {
                write_runs(out, runs.iter().map(|(off, b)| (*off, &b[..])));
            }
        }
    }
    end_record(out, len_at);
}

/// The record's type, a length to fill in (its offset is returned), and the fields before
/// the writes.
fn begin_writes(out: &mut Vec<u8>, prev: Option<u64>, txn: u64, n: usize) -> usize {
    out.push(if prev.is_some() {
        REC_COMMIT_CONTINUED
    } else {
        REC_COMMIT
    });
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    if let Some(prev) = prev {
        out.extend_from_slice(&prev.to_le_bytes());
    }
    out.extend_from_slice(&txn.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    len_at
}

fn write_head(out: &mut Vec<u8>, table: u32, key: &[u8], kind: u8, vlen: usize) {
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&(vlen as u32).to_le_bytes());
    out.extend_from_slice(key);
}

/// A patch's runs as logged: `nruns u16 | { off u16 | len u16 | bytes }*`.
fn write_runs<'a>(out: &mut Vec<u8>, runs: impl ExactSizeIterator<Item = (usize, &'a [u8])>) {
    out.extend_from_slice(&(runs.len() as u16).to_le_bytes());
    for (off, bytes) in runs {
        out.extend_from_slice(&(off as u16).to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

fn end_record(out: &mut [u8], len_at: usize) {
    let body = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&body.to_le_bytes());
}

fn encode_writes(
    out: &mut Vec<u8>,
    prev: Option<u64>,
    txn: u64,
    writes: &[WriteRef<'_>],
    befores: &[Option<&[u8]>],
) -> usize {
    let len_at = begin_writes(out, prev, txn, writes.len());
    let mut patches = 0;
    for (i, &(table, key, value)) in writes.iter().enumerate() {
        let Some(v) = value else {
            write_head(out, table, key, WRITE_DELETE, 0);
            continue;
        };
        match befores
            .get(i)
            .copied()
            .flatten()
            .and_then(|old| patch_runs(old, v))
        {
            Some(runs) => {
                patches += 1;
                write_head(out, table, key, WRITE_PATCH, v.len());
                write_runs(out, runs.into_iter().map(|(s, e)| (s, &v[s..e])));
            }
            None => {
                write_head(out, table, key, WRITE_PUT, v.len());
                out.extend_from_slice(v);
            }
        }
    }
    end_record(out, len_at);
    patches
}

/// The runs `[s, e)` where `new` differs from `old`, two runs less than [`MERGE_GAP`] apart
/// logged as one, when the patch they make (a u16 count, and each run's offset, length and
/// bytes) is shorter than `new`; None when it is not, or when the lengths differ or exceed
/// [`PATCH_MAX_VALUE`]. An update of a few columns of a wide row logs those columns.
fn patch_runs(old: &[u8], new: &[u8]) -> Option<Vec<(usize, usize)>> {
    if old.len() != new.len() || new.len() > PATCH_MAX_VALUE {
        return None;
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut size = 2;
    let mut j = 0;
    while let Some((s, e)) = crate::page::changed_run(old, new, j) {
        j = e;
        match runs.last_mut() {
            Some(last) if s - last.1 < MERGE_GAP => {
                size += j - last.1;
                last.1 = j;
            }
            _ => {
                size += 4 + j - s;
                runs.push((s, j));
            }
        }
        if size >= new.len() {
            return None;
        }
    }
    (size < new.len()).then_some(runs)
}

/// Bytes of a COMMIT record besides its writes (type, length, txn, count).
pub const COMMIT_FIXED_SIZE: usize = 1 + 4 + 8 + 4;
/// Bytes a CommitContinued record adds to a COMMIT of the same writes (`prev`).
pub const CONTINUED_EXTRA_SIZE: usize = 8;

/// Bytes one write of these key and value lengths takes in a COMMIT record.
pub fn commit_write_size(key_len: usize, value_len: usize) -> usize {
    4 + 2 + 1 + 4 + key_len + value_len
}

/// Bytes `encode_commit` will produce for writes of these key and value lengths.
pub fn commit_size(writes: impl Iterator<Item = (usize, usize)>) -> usize {
    COMMIT_FIXED_SIZE + writes.map(|(k, v)| commit_write_size(k, v)).sum::<usize>()
}

pub fn encode_apply_done(out: &mut Vec<u8>, commit_lsn: u64) {
    out.push(REC_APPLY_DONE);
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&commit_lsn.to_le_bytes());
}

struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
}

/// One entry of a PageDiff's range list.
enum Entry<'a> {
    Bytes(usize, &'a [u8]),
    Move(Move),
}

/// One entry of a PageDiff's range list, checked against the page size: a range of bytes, or
/// where `moves` (the record's [`FLAG_MOVES`]) a move when its len has [`MOVE_BIT`] set, whose
/// source and destination lie inside the page and off its LSN fields.
fn read_entry<'a>(b: &mut Rd<'a>, page_size: usize, moves: bool) -> Option<Entry<'a>> {
    let off = b.u16()? as usize;
    let l = b.u16()?;
    if moves && l & MOVE_BIT != 0 {
        let len = (l & !MOVE_BIT) as usize;
        let src = b.u16()? as usize;
        let inside = |a: usize| a >= 16 && a + len <= page_size.saturating_sub(8);
        if len == 0 || !inside(off) || !inside(src) {
            return None;
        }
        return Some(Entry::Move(Move { dst: off, src, len }));
    }
    let l = l as usize;
    if off + l > page_size {
        return None;
    }
    Some(Entry::Bytes(off, b.take(l)?))
}

/// Checks a PageDiff's `n` entries: the moves, then the ranges of bytes (a move after a range
/// is malformed).
fn read_entries(b: &mut Rd<'_>, n: u16, page_size: usize, moves: bool) -> Option<()> {
    let mut bytes_seen = false;
    for _ in 0..n {
        match read_entry(b, page_size, moves)? {
            Entry::Move(_) if bytes_seen => return None,
            Entry::Bytes(..) => bytes_seen = true,
            Entry::Move(_) => {}
        }
    }
    Some(())
}

/// What one write of a COMMIT does, borrowed from the record.
enum ValueRef<'a> {
    Delete,
    Put(&'a [u8]),
    /// `runs`: the encoded `nruns u16 | { off u16 | len u16 | bytes }*`, checked against
    /// `len`.
    Patch {
        len: usize,
        runs: &'a [u8],
    },
}

/// One write of a COMMIT, borrowed: table, key, and what it does to the key.
fn read_write<'a>(b: &mut Rd<'a>) -> Option<(u32, &'a [u8], ValueRef<'a>)> {
    let table = b.u32()?;
    let klen = b.u16()? as usize;
    let kind = b.u8()?;
    let vlen = b.u32()? as usize;
    let key = b.take(klen)?;
    let value = match kind {
        WRITE_PUT => ValueRef::Put(b.take(vlen)?),
        WRITE_DELETE if vlen == 0 => ValueRef::Delete,
        WRITE_PATCH if vlen <= PATCH_MAX_VALUE => {
            let from = b.at;
            let n = b.u16()?;
            let mut end = 0;
            for _ in 0..n {
                let off = b.u16()? as usize;
                let l = b.u16()? as usize;
                if off < end || l == 0 || off + l > vlen {
                    return None;
                }
                b.take(l)?;
                end = off + l;
            }
            let all: &'a [u8] = b.b;
            ValueRef::Patch {
                len: vlen,
                runs: &all[from..b.at],
            }
        }
        _ => return None,
    };
    Some((table, key, value))
}

/// Decodes every record of a group payload into owned records; None if any byte is out of
/// place. The records are walked and checked by [`walk_group`], then copied out.
pub fn decode_group(payload: &[u8], page_size: usize) -> Option<Vec<Record>> {
    walk_group(payload, page_size)?
        .into_iter()
        .map(|r| {
            Some(match r {
                RecordRef::PageDiff {
                    page,
                    fresh,
                    compacted,
                    moves,
                    ranges,
                } => {
                    let mut b = Rd { b: ranges, at: 0 };
                    let mut out = Vec::new();
                    let mut mv = Vec::new();
                    while b.at < ranges.len() {
                        match read_entry(&mut b, page_size, moves)? {
                            Entry::Bytes(off, bytes) => out.push((off, bytes.to_vec())),
                            Entry::Move(m) => mv.push(m),
                        }
                    }
                    Record::PageDiff {
                        page,
                        fresh,
                        compacted,
                        moves: mv,
                        ranges: out,
                    }
                }
                RecordRef::Commit { txn, writes } => Record::Commit {
                    txn,
                    writes: owned_writes(writes)?,
                },
                RecordRef::CommitContinued { prev, txn, writes } => Record::CommitContinued {
                    prev,
                    txn,
                    writes: owned_writes(writes)?,
                },
                RecordRef::ApplyDone { commit_lsn } => Record::ApplyDone { commit_lsn },
            })
        })
        .collect()
}

/// Encoded writes (checked by [`walk_group`]) copied out.
fn owned_writes(writes: &[u8]) -> Option<Vec<WriteOp>> {
    let mut b = Rd { b: writes, at: 0 };
    let mut out = Vec::new();
    while b.at < writes.len() {
        let (table, key, value) = read_write(&mut b)?;
        let value = match value {
            ValueRef::Delete => WriteValue::Delete,
            ValueRef::Put(v) => WriteValue::Put(v.to_vec()),
            ValueRef::Patch { len, runs } => {
                let mut r = Rd { b: runs, at: 0 };
                let n = r.u16()?;
                let mut out = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let off = r.u16()? as usize;
                    let l = r.u16()? as usize;
                    out.push((off, r.take(l)?.to_vec()));
                }
                WriteValue::Patch { len, runs: out }
            }
        };
        out.push(WriteOp {
            table,
            key: key.to_vec(),
            value,
        });
    }
    Some(out)
}

/// A record of a group payload, borrowed from it (recovery's streaming pass: nothing copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordRef<'a> {
    /// `ranges`: the encoded `{ off u16 | len u16 | bytes }*` (with moves first where
    /// `moves`), checked against the page size.
    PageDiff {
        page: PageId,
        fresh: bool,
        /// Compact the page (page::node::compact) before applying `ranges`.
        compacted: bool,
        /// The record's [`FLAG_MOVES`]: `ranges` may start with moves.
        moves: bool,
        ranges: &'a [u8],
    },
    /// `writes`: the encoded writes, each checked.
    Commit {
        txn: u64,
        writes: &'a [u8],
    },
    ApplyDone {
        commit_lsn: u64,
    },
    /// `writes` as in `Commit`.
    CommitContinued {
        prev: u64,
        txn: u64,
        writes: &'a [u8],
    },
}

/// Walks the records of a group payload without copying, checking every byte of every one;
/// None if any byte is out of place (then none is returned).
pub fn walk_group(payload: &[u8], page_size: usize) -> Option<Vec<RecordRef<'_>>> {
    let mut r = Rd { b: payload, at: 0 };
    let mut out = Vec::new();
    while r.at < payload.len() {
        let ty = r.u8()?;
        let len = r.u32()? as usize;
        let body = r.take(len)?;
        let mut b = Rd { b: body, at: 0 };
        let rec = match ty {
            REC_PAGE_DIFF => {
                let page = PageId(b.u32()?);
                let flags = b.u8()?;
                let moves = flags & FLAG_MOVES != 0;
                let rest = flags & !FLAG_MOVES;
                if rest > FLAG_COMPACTED || (moves && rest == FLAG_FRESH) {
                    // unknown bits, fresh and compacted at once, or moves over zeros
                    return None;
                }
                let n = b.u16()?;
                let from = b.at;
                read_entries(&mut b, n, page_size, moves)?;
                RecordRef::PageDiff {
                    page,
                    fresh: rest == FLAG_FRESH,
                    compacted: rest == FLAG_COMPACTED,
                    moves,
                    ranges: &body[from..b.at],
                }
            }
            REC_COMMIT | REC_COMMIT_CONTINUED => {
                let prev = if ty == REC_COMMIT_CONTINUED {
                    Some(b.u64()?)
                } else {
                    None
                };
                let txn = b.u64()?;
                let n = b.u32()?;
                let from = b.at;
                for _ in 0..n {
                    read_write(&mut b)?;
                }
                let writes = &body[from..b.at];
                match prev {
                    Some(prev) => RecordRef::CommitContinued { prev, txn, writes },
                    None => RecordRef::Commit { txn, writes },
                }
            }
            REC_APPLY_DONE => RecordRef::ApplyDone {
                commit_lsn: b.u64()?,
            },
            _ => return None,
        };
        if b.at != body.len() {
            return None;
        }
        out.push(rec);
    }
    Some(out)
}

/// Applies the encoded ranges of a [`RecordRef::PageDiff`] (checked by [`walk_group`]) to a
/// page image, zeroing it first when fresh. Bytes that do not parse are left unapplied (they
/// cannot occur after `walk_group`'s checks).
pub fn apply_page_diff_ranges(page: &mut [u8], fresh: bool, moves: bool, ranges: &[u8]) {
    if fresh {
        page.fill(0);
    }
    let mut r = Rd { b: ranges, at: 0 };
    while r.at < ranges.len() {
        match read_entry(&mut r, page.len(), moves) {
            Some(Entry::Bytes(off, src)) => page[off..off + src.len()].copy_from_slice(src),
            Some(Entry::Move(m)) => page.copy_within(m.src..m.src + m.len, m.dst),
            None => return,
        }
    }
}

/// Applies a PageDiff to a page image (zeroing it first when fresh): the moves in order, then
/// the ranges.
pub fn apply_page_diff(page: &mut [u8], fresh: bool, moves: &[Move], ranges: &[(usize, Vec<u8>)]) {
    if fresh {
        page.fill(0);
    }
    for m in moves {
        page.copy_within(m.src..m.src + m.len, m.dst);
    }
    for (off, bytes) in ranges {
        page[*off..*off + bytes.len()].copy_from_slice(bytes);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte-at-a-time ranges encode_page_diff must produce: changed bytes grouped while
    /// fewer than MERGE_GAP unchanged bytes separate them.
    fn reference_ranges(before: Option<&[u8]>, after: &[u8]) -> Vec<(usize, usize)> {
        let ps = after.len();
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for i in 0..ps {
            if is_lsn_byte(i, ps) || before.map_or(after[i] == 0, |b| b[i] == after[i]) {
                continue;
            }
            match ranges.last_mut() {
                Some(last) if i - last.1 < MERGE_GAP => last.1 = i + 1,
                _ => ranges.push((i, i + 1)),
            }
        }
        ranges
    }

    proptest! {
        #[test]
        fn diff_ranges_are_the_byte_at_a_time_ones(
            before in prop::collection::vec(any::<u8>(), 4096),
            edits in prop::collection::vec((0usize..4096, any::<u8>()), 0..200),
            runs in prop::collection::vec((0usize..4096, 1usize..300, any::<u8>()), 0..4),
            fresh in any::<bool>(),
        ) {
            let mut after = if fresh { vec![0u8; 4096] } else { before.clone() };
            for (i, v) in edits { after[i] = v; }
            for (at, len, v) in runs {
                for b in &mut after[at..(at + len).min(4096)] { *b = v; }
            }
            let b = if fresh { None } else { Some(&before[..]) };
            let want = reference_ranges(b, &after);
            let mut out = Vec::new();
            let wrote = encode_page_diff(&mut out, PageId(9), b, &after);
            prop_assert_eq!(wrote, !want.is_empty() || fresh);
            if wrote {
                let got: Vec<(usize, usize)> = match &decode_group(&out, 4096).unwrap()[..] {
                    [Record::PageDiff { ranges, .. }] => {
                        ranges.iter().map(|(o, v)| (*o, *o + v.len())).collect()
                    }
                    _ => Vec::new(),
                };
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn diff_roundtrip(before in prop::collection::vec(any::<u8>(), 4096),
                          edits in prop::collection::vec((0usize..4096, any::<u8>()), 0..200),
                          fresh in any::<bool>()) {
            let mut after = if fresh { vec![0u8; 4096] } else { before.clone() };
            for (i, v) in edits { after[i] = v; }
            let mut out = Vec::new();
            let wrote = encode_page_diff(&mut out, PageId(9), if fresh { None } else { Some(&before) }, &after);
            let mut img = if fresh { vec![0xEEu8; 4096] } else { before.clone() };
            if wrote {
                let recs = decode_group(&out, 4096).unwrap();
                match &recs[..] {
                    [Record::PageDiff { page, fresh: f, compacted, moves, ranges }] => {
                        prop_assert_eq!(*page, PageId(9));
                        prop_assert_eq!(*f, fresh);
                        prop_assert!(!compacted);
                        prop_assert!(moves.is_empty());
                        apply_page_diff(&mut img, *f, moves, ranges);
                    }
                    _ => prop_assert!(false, "one record expected"),
                }
            }
            for i in 0..4096 {
                if !is_lsn_byte(i, 4096) {
                    prop_assert_eq!(img[i], after[i], "byte {}", i);
                }
            }
        }

        /// A node page changed by inserts, removes, same-length overwrites and raw writes that
        /// note what they write (page::Touch): the record logged from the noted ranges turns
        /// the page before into the page after, the LSN fields aside, with the compacted flag
        /// carried, and is no longer than the page plus a range header per noted range.
        #[test]
        fn noted_ranges_redo_the_page(
            ops in prop::collection::vec((0u8..4, any::<u8>(), 0usize..300, any::<u8>()), 1..60),
            raw in prop::collection::vec((0usize..4096, 1usize..64), 0..4),
            compacted in any::<bool>(),
        ) {
            use crate::page::{init, node, PageType, Touch};
            let ps = 4096;
            let mut page = vec![0u8; ps];
            init(&mut page, PageId(4), PageType::Leaf, 1);
            for k in 0..20u8 {
                node::insert_leaf_inline(&mut page, k as usize, &[k * 8, 0], &[k; 40]);
            }
            let before = page.clone();
            let mut noted = crate::mtr::Noting::new();
            for (kind, k, vlen, fill) in ops {
                let key = [k, 1];
                let n = node::nslots(&page);
                match kind {
                    0 => {
                        let i = node::search(&page, &key).unwrap_or_else(|i| i);
                        if node::search(&page, &key).is_err() {
                            node::insert_leaf_inline_noting(&mut page, i, &key, &vec![fill; vlen], &mut noted);
                        }
                    }
                    1 if n > 0 => node::remove_noting(&mut page, k as usize % n, &mut noted),
                    2 if n > 0 => {
                        let i = k as usize % n;
                        if let node::LeafValue::Inline(v) = node::leaf_value(&page, i) {
                            let mut v = v.to_vec();
                            for (j, b) in v.iter_mut().enumerate() {
                                if (j + fill as usize).is_multiple_of(7) { *b = b.wrapping_add(fill); }
                            }
                            prop_assert!(node::overwrite_inline_value_noting(&mut page, i, &v, &mut noted));
                        }
                    }
                    _ => {}
                }
            }
            for &(at, len) in &raw {
                let end = (at + len).min(ps);
                // a raw shift (as a node's slots move) of what lies at `at`, then a write
                if at >= 16 && end + 64 <= ps - 8 {
                    page.copy_within(at..end, at + 64);
                    noted.moved(at + 64, at, end - at);
                }
                for b in &mut page[at..end] { *b ^= 0x5A; }
                noted.touch(at, end);
            }
            let count = noted.ranges.len();
            let moves = noted.moves.clone();
            let mut out = Vec::new();
            let wrote =
                encode_page_ranges(&mut out, PageId(4), compacted, &page, &mut noted.ranges, &moves);
            prop_assert!(out.len() <= 12 + ps + 4 * (count + 2) + 6 * moves.len());
            let mut redone = before.clone();
            let mut walked = before.clone();
            if wrote {
                match &decode_group(&out, ps).unwrap()[..] {
                    [Record::PageDiff { page: p, fresh, compacted: c, moves: m, ranges }] => {
                        prop_assert_eq!(*p, PageId(4));
                        prop_assert!(!fresh);
                        prop_assert_eq!(*c, compacted);
                        prop_assert_eq!(m, &moves);
                        for (off, bytes) in ranges {
                            prop_assert!(off + bytes.len() <= 8 || *off >= 16);
                            prop_assert!(off + bytes.len() <= ps - 8);
                        }
                        apply_page_diff(&mut redone, false, m, ranges);
                    }
                    _ => prop_assert!(false, "one record expected"),
                }
                for r in walk_group(&out, ps).unwrap() {
                    if let RecordRef::PageDiff { fresh, moves, ranges, .. } = r {
                        apply_page_diff_ranges(&mut walked, fresh, moves, ranges);
                    }
                }
                prop_assert_eq!(&walked, &redone);
            } else {
                prop_assert!(!compacted && out.is_empty());
            }
            for i in 0..ps {
                if !is_lsn_byte(i, ps) {
                    prop_assert_eq!(redone[i], page[i], "byte {}", i);
                }
            }
        }

        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let decoded = decode_group(&bytes, 4096);
            // the borrowed walk accepts exactly what the decoder accepts
            prop_assert_eq!(walk_group(&bytes, 4096).is_some(), decoded.is_some());
        }

        #[test]
        fn borrowed_walk_applies_as_the_decoder(before in prop::collection::vec(any::<u8>(), 4096),
                          edits in prop::collection::vec((0usize..4096, any::<u8>()), 1..200)) {
            let mut after = before.clone();
            for (i, v) in edits { after[i] = v; }
            let mut out = Vec::new();
            encode_page_diff(&mut out, PageId(3), Some(&before), &after);
            encode_apply_done(&mut out, 77);
            let (mut a, mut b) = (before.clone(), before.clone());
            for r in decode_group(&out, 4096).unwrap() {
                if let Record::PageDiff { fresh, moves, ranges, .. } = r {
                    apply_page_diff(&mut a, fresh, &moves, &ranges);
                }
            }
            let walked = walk_group(&out, 4096).unwrap();
            for r in &walked {
                if let RecordRef::PageDiff { fresh, moves, ranges, .. } = *r {
                    apply_page_diff_ranges(&mut b, fresh, moves, ranges);
                }
            }
            prop_assert_eq!(a, b);
            prop_assert_eq!(walked.last(), Some(&RecordRef::ApplyDone { commit_lsn: 77 }));
        }
    }

    /// An insert at the front of a leaf of short entries and a removal from it log their slot
    /// shifts as moves: the records are a small part of what logging the shifted slots took,
    /// and redo them. A move after a range of bytes, a move of nothing, and a move that would
    /// reach an LSN field do not decode.
    #[test]
    fn a_node_shift_is_logged_as_a_move() {
        use crate::mtr::Noting;
        use crate::page::{init, node, PageType};
        let ps = 16 * 1024;
        let mut page = vec![0u8; ps];
        init(&mut page, PageId(7), PageType::Leaf, 1);
        for k in 0..300u16 {
            let key = (k * 2 + 2).to_be_bytes();
            assert!(node::insert_leaf_inline(
                &mut page, k as usize, &key, &[1; 20]
            ));
        }
        let before = page.clone();
        let lsn = |i: usize| is_lsn_byte(i, ps);
        // the record of what `noting` noted on `page`: its length, and whether it redoes it
        let log = |page: &[u8], noting: &mut Noting| {
            let moves = noting.moves.clone();
            let mut out = Vec::new();
            encode_page_ranges(&mut out, PageId(7), false, page, &mut noting.ranges, &moves);
            let mut redone = before.clone();
            for r in walk_group(&out, ps).unwrap() {
                if let RecordRef::PageDiff {
                    fresh,
                    moves,
                    ranges,
                    ..
                } = r
                {
                    assert!(moves);
                    apply_page_diff_ranges(&mut redone, fresh, moves, ranges);
                }
            }
            let same = (0..ps).all(|i| lsn(i) || redone[i] == page[i]);
            (out.len(), same)
        };
        // two inserts, at the front and in the middle
        let mut noting = Noting::new();
        assert!(node::insert_leaf_inline_noting(
            &mut page,
            0,
            &[0, 1],
            &[2; 20],
            &mut noting
        ));
        assert!(node::insert_leaf_inline_noting(
            &mut page,
            100,
            &[0, 201],
            &[3; 20],
            &mut noting
        ));
        assert_eq!(noting.moves.len(), 2);
        let mut plain = Vec::new();
        encode_page_diff(&mut plain, PageId(7), Some(&before), &page);
        let (len, same) = log(&page, &mut noting);
        assert!(same);
        assert!(
            len < 120 && plain.len() > 500,
            "{len} bytes, {} plain",
            plain.len()
        );
        // a removal near the front
        let mut page = before.clone();
        let mut noting = Noting::new();
        node::remove_noting(&mut page, 5, &mut noting);
        assert_eq!(noting.moves.len(), 1);
        let (len, same) = log(&page, &mut noting);
        assert!(same && len < 60, "{len} bytes");

        // type u8 | len u32 | page u32 | flags u8 | n u16 | entries
        let record = |flags: u8, entries: &[u8], n: u16| {
            let mut b = vec![REC_PAGE_DIFF];
            b.extend_from_slice(&(7 + entries.len() as u32).to_le_bytes());
            b.extend_from_slice(&7u32.to_le_bytes());
            b.push(flags);
            b.extend_from_slice(&n.to_le_bytes());
            b.extend_from_slice(entries);
            b
        };
        let mv = |dst: u16, len: u16, src: u16| {
            [
                dst.to_le_bytes(),
                (len | MOVE_BIT).to_le_bytes(),
                src.to_le_bytes(),
            ]
            .concat()
        };
        let bytes = [100u16.to_le_bytes(), 2u16.to_le_bytes(), [9, 9]].concat();
        let good = [mv(42, 10, 40), bytes.clone()].concat();
        assert!(decode_group(&record(FLAG_MOVES, &good, 2), ps).is_some());
        for (what, entries) in [
            (
                "a move after bytes",
                [bytes.clone(), mv(42, 10, 40)].concat(),
            ),
            ("a move of nothing", mv(42, 0, 40)),
            ("a move into the header's LSN", mv(8, 10, 40)),
            ("a move from the trailer", mv(40, 10, (ps - 12) as u16)),
        ] {
            let n = if entries.len() > 6 { 2 } else { 1 };
            let r = record(FLAG_MOVES, &entries, n);
            assert!(decode_group(&r, ps).is_none(), "{what}");
            assert!(walk_group(&r, ps).is_none(), "{what}");
        }
        // without the flag, the same entry is a range of 0x800a bytes, past the record's end
        assert!(decode_group(&record(0, &good, 2), ps).is_none());
    }

    /// A compacted diff is written even when nothing changed after the compaction (the
    /// compaction is the change), carries the flag through both decoders, and a flags byte
    /// with unknown bits, or fresh and compacted at once, is refused.
    #[test]
    fn compacted_flag_roundtrip() {
        let img = vec![7u8; 4096];
        let mut after = img.clone();
        after[100] = 8;
        let mut out = Vec::new();
        encode_compacted_page_diff(&mut out, PageId(5), &img, &img);
        encode_compacted_page_diff(&mut out, PageId(5), &img, &after);
        assert!(encode_page_diff(&mut out, PageId(6), Some(&img), &after));
        let recs = decode_group(&out, 4096).unwrap();
        let flags: Vec<(bool, bool, usize)> = recs
            .iter()
            .map(|r| match r {
                Record::PageDiff {
                    fresh,
                    compacted,
                    ranges,
                    ..
                } => (*fresh, *compacted, ranges.len()),
                _ => panic!("page diffs only"),
            })
            .collect();
        assert_eq!(
            flags,
            [(false, true, 0), (false, true, 1), (false, false, 1)]
        );
        let walked: Vec<bool> = walk_group(&out, 4096)
            .unwrap()
            .iter()
            .map(|r| {
                matches!(
                    r,
                    RecordRef::PageDiff {
                        compacted: true,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(walked, [true, true, false]);
        // the flags byte of the first record: type u8, len u32, page u32, then flags
        for bad in [
            FLAG_FRESH | FLAG_COMPACTED,
            FLAG_FRESH | FLAG_MOVES,
            8,
            0x80,
        ] {
            let mut b = out.clone();
            b[9] = bad;
            assert!(decode_group(&b, 4096).is_none(), "flags {bad:#x}");
            assert!(walk_group(&b, 4096).is_none(), "flags {bad:#x}");
        }
    }

    #[test]
    fn commit_roundtrip_and_size() {
        let writes: Vec<WriteRef<'_>> = vec![
            (3, b"k1", Some(b"v1v1")),
            (3, b"k2", None),
            (4, b"", Some(b"")),
        ];
        let mut out = Vec::new();
        encode_commit(&mut out, 77, &writes);
        encode_apply_done(&mut out, 12345);
        assert_eq!(
            commit_size(
                writes
                    .iter()
                    .map(|w| (w.1.len(), w.2.map_or(0, <[u8]>::len)))
            ) + 13,
            out.len()
        );
        let recs = decode_group(&out, 4096).unwrap();
        assert_eq!(
            recs[0],
            Record::Commit {
                txn: 77,
                writes: vec![
                    WriteOp {
                        table: 3,
                        key: b"k1".to_vec(),
                        value: WriteValue::Put(b"v1v1".to_vec())
                    },
                    WriteOp {
                        table: 3,
                        key: b"k2".to_vec(),
                        value: WriteValue::Delete
                    },
                    WriteOp {
                        table: 4,
                        key: vec![],
                        value: WriteValue::Put(vec![])
                    },
                ]
            }
        );
        assert_eq!(recs[1], Record::ApplyDone { commit_lsn: 12345 });
    }

    #[test]
    fn a_put_over_a_known_value_is_logged_as_its_changed_runs() {
        let old: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let mut new = old.clone();
        new[10] = 0xEE; // run 1
        new[15] = 0xEE; // within MERGE_GAP of run 1: joined to it
        new[200..204].copy_from_slice(&[1, 2, 3, 4]); // run 2
        let short = b"ab";
        let writes: Vec<WriteRef<'_>> = vec![
            (1, b"patched", Some(&new)),
            (1, b"other length", Some(&new[..299])),
            (1, b"no before", Some(&new)),
            (1, b"too short to patch", Some(short)),
            (1, b"deleted", None),
        ];
        let befores = [
            Some(&old[..]),
            Some(&old[..]),
            None,
            Some(&b"ba"[..]),
            Some(&old[..]),
        ];
        let mut out = Vec::new();
        assert_eq!(encode_commit_patched(&mut out, 9, &writes, &befores), 1);
        let mut full = Vec::new();
        encode_commit(&mut full, 9, &writes);
        // the patch: count, two runs of 6 and 4 bytes with their headers
        assert_eq!(full.len() - out.len(), 300 - (2 + 4 + 6 + 4 + 4));
        let Some(recs) = decode_group(&out, 4096) else {
            panic!("the patched record does not decode");
        };
        let Record::Commit {
            txn: 9,
            writes: ops,
        } = &recs[0]
        else {
            panic!("not a commit: {recs:?}");
        };
        assert_eq!(
            ops[0].value,
            WriteValue::Patch {
                len: 300,
                runs: vec![(10, new[10..16].to_vec()), (200, vec![1, 2, 3, 4])]
            }
        );
        // applied over the old value or over the new one (a re-apply after the write landed)
        for base in [&old, &new] {
            assert_eq!(
                ops[0].value.clone().new_value(Some(base)),
                Some(Some(new.clone()))
            );
        }
        assert_eq!(ops[0].value.clone().new_value(None), None);
        assert_eq!(ops[0].value.clone().new_value(Some(&old[..299])), None);
        assert_eq!(ops[1].value, WriteValue::Put(new[..299].to_vec()));
        assert_eq!(ops[2].value, WriteValue::Put(new.clone()));
        assert_eq!(ops[3].value, WriteValue::Put(short.to_vec()));
        assert_eq!(ops[4].value, WriteValue::Delete);
        // decoded writes encode back to the same bytes
        let mut again = Vec::new();
        encode_ops(&mut again, None, 9, ops);
        assert_eq!(again, out);
        // runs out of order, empty, or past the value are refused
        for bad in [
            vec![(200, vec![1u8]), (10, vec![2])],
            vec![(10, vec![])],
            vec![(299, vec![1, 2])],
        ] {
            let op = WriteOp {
                table: 1,
                key: b"k".to_vec(),
                value: WriteValue::Patch {
                    len: 300,
                    runs: bad,
                },
            };
            let mut b = Vec::new();
            encode_ops(&mut b, None, 1, &[op]);
            assert!(decode_group(&b, 4096).is_none());
        }
    }

    #[test]
    fn small_change_small_diff() {
        let before = vec![7u8; 16384];
        let mut after = before.clone();
        after[100..120].copy_from_slice(&[1; 20]);
        after[8..16].copy_from_slice(&[9; 8]); // LSN bytes are not logged
        let mut out = Vec::new();
        assert!(encode_page_diff(&mut out, PageId(1), Some(&before), &after));
        assert_eq!(out.len(), 1 + 4 + 4 + 1 + 2 + 4 + 20);
        let mut only_lsn = before.clone();
        only_lsn[16380] = 0;
        assert!(!encode_page_diff(
            &mut Vec::new(),
            PageId(1),
            Some(&before),
            &only_lsn
        ));
    }
}
