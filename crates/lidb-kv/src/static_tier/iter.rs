//! Range scans of the static tier: seek with the model, then read the key list forward in chunks
//! of pages. A packed tier (GC-built: every record in its own svlog, in key order) reads the svlog
//! forward in large chunks (the records of consecutive keys are contiguous); a converted tier
//! reads each record where its entry points (one read per value).
//!
//! Chunk sizes: a scan that says how many entries it will take (`StaticTier::iter_limited`, from
//! `Store::scan_limited`) reads, first, the key-list pages and the svlog bytes of those entries
//! alone (the svlog chunk ends where the last one's record ends, read off the key list), and each
//! later chunk covers twice the entries of the one before, up to the fixed chunks
//! (`SCAN_KEYLIST_PAGES`, `SCAN_SVLOG_BYTES`) an unsized scan reads from the start. A YCSB E scan
//! of 50 records of 1 KiB reads about 50 KiB of svlog and a page or two of key list, not 1 MiB
//! and 256 KiB (RocksDB's readahead grows the same way, from one block). A store's scan to an end
//! key counts the tier's entries before it (`StaticTier::iter_to`: one more seek, of the end key)
//! and sizes its reads to them the same way. A `TierIter` is used by one
//! thread; many may run over one tier. An iterator holds its tier by one `Arc` taken when it is
//! made; its steps borrow the tier and its own fields apart, so a step writes no reference count
//! that other readers of the tier write.

use std::sync::Arc;

use lidb_storage::error::corruption;

use super::StaticTier;
use super::format::{PAGE_BYTES, TierFile};
use super::reader::PageRun;
use crate::Result;
use crate::vlog::decode_pointed;

/// Key-list pages read per chunk by a scan.
pub const SCAN_KEYLIST_PAGES: u64 = 64;
/// Least bytes of the svlog read per chunk by a scan.
pub const SCAN_SVLOG_BYTES: u64 = 1 << 20;

/// Sorted `(key, value)` pairs of a tier from the first key `>= start`. Stops after the first
/// error.
#[derive(Debug)]
pub struct TierIter {
    tier: Arc<StaticTier>,
    next: u64,
    pages: PageRun,
    values: Vec<u8>,
    values_start: u64,
    done: bool,
    /// Yield keys with empty values and never read the svlog (`StaticTier::keys`).
    keys_only: bool,
    /// Entries the next key-list chunk and the next svlog chunk should cover (None: the fixed
    /// chunks); each doubles after its chunk is read.
    want_pages: Option<u64>,
    want_svlog: Option<u64>,
}

/// An entry with where its record is, without the value (`TierIter::next_entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierEntry {
    pub key: Vec<u8>,
    /// The file-table row of the record's file.
    pub file: TierFile,
    pub offset: u64,
    pub len: u32,
}

impl StaticTier {
    /// Sorted `(key, value)` pairs from the first key `>= start`.
    pub fn iter(self: &Arc<Self>, start: &[u8]) -> Result<TierIter> {
        let (next, run) = self.seek(start)?;
        Ok(self.iter_at(next, run))
    }

    /// An iterator from entry `next`, whose key-list pages `run` holds (what a seek returned).
    fn iter_at(self: &Arc<Self>, next: u64, run: Option<PageRun>) -> TierIter {
        TierIter {
            tier: Arc::clone(self),
            next,
            pages: run.unwrap_or_default(),
            values: Vec::new(),
            values_start: 0,
            done: false,
            keys_only: false,
            want_pages: None,
            want_svlog: None,
        }
    }

    /// A store's scan from `start`: to `end` if given, expecting to take about `expected`
    /// entries if given. Its first reads are sized to the fewer of `expected` and the tier's
    /// entries before `end` (and the entry its last advance moves to); those are counted by
    /// seeking `end`, while the start is sought once, for both (`entries_between` and
    /// `iter_limited` would seek it twice).
    pub fn iter_to(
        self: &Arc<Self>,
        start: &[u8],
        end: Option<&[u8]>,
        expected: Option<usize>,
    ) -> Result<TierIter> {
        let (next, run) = self.seek(start)?;
        let before_end = match end {
            Some(e) => Some(self.seek(e)?.0.saturating_sub(next)),
            None => None,
        };
        let expected = expected.map(|n| u64::try_from(n).unwrap_or(u64::MAX));
        let take = match (expected, before_end) {
            (Some(n), Some(b)) => Some(n.min(b)),
            (n, b) => n.or(b),
        };
        let it = self.iter_at(next, run);
        Ok(match take {
            Some(n) => it.sized(n.saturating_add(1)),
            None => it,
        })
    }

    /// [`StaticTier::iter`] for a scan that expects to take about `entries` entries: its first
    /// reads are sized to them (see the module documentation). A scan of more entries than the fixed key-list chunk holds (one told `usize::MAX`: a scan
    /// to an end key) reads the fixed chunks.
    pub fn iter_limited(self: &Arc<Self>, start: &[u8], entries: usize) -> Result<TierIter> {
        let entries = u64::try_from(entries).unwrap_or(u64::MAX);
        Ok(self.iter(start)?.sized(entries))
    }

    /// Every key in order, with empty values: reads the key list only (rebuilding in-memory
    /// filters at open must not read gigabytes of values).
    pub fn keys(self: &Arc<Self>) -> Result<TierIter> {
        Ok(TierIter {
            keys_only: true,
            ..self.iter(b"")?
        })
    }
}

impl TierIter {
    /// This iterator with its first chunks sized to `entries` entries, or the fixed chunks if
    /// they are more than a fixed key-list chunk holds (module documentation).
    fn sized(self, entries: u64) -> TierIter {
        let per = u64::from(self.tier.header().layout.entries_per_page);
        let want = (entries < per.saturating_mul(SCAN_KEYLIST_PAGES)).then_some(entries.max(1));
        TierIter {
            want_pages: want,
            want_svlog: want,
            ..self
        }
    }
}

/// Whether `pages` holds key-list page `page`.
fn page_loaded(pages: &PageRun, page: u64) -> bool {
    let held = pages.bytes.len() as u64 / super::format::PAGE_BYTES;
    page >= pages.first_page && page < pages.first_page + held
}

/// Makes `pages` hold the key-list page of entry `next`: a chunk of the pages of the `want`
/// entries from `next` (then doubled), or of `SCAN_KEYLIST_PAGES`.
fn load_page(
    tier: &StaticTier,
    next: u64,
    pages: &mut PageRun,
    want: &mut Option<u64>,
) -> Result<()> {
    let per = u64::from(tier.header().layout.entries_per_page).max(1);
    let page = next / per;
    if !page_loaded(pages, page) {
        let count = match want {
            Some(w) => {
                let count = (next % per).saturating_add(*w).div_ceil(per);
                *w = w.saturating_mul(2);
                count.clamp(1, SCAN_KEYLIST_PAGES)
            }
            None => SCAN_KEYLIST_PAGES,
        };
        *pages = tier.read_pages_uncached(page, page + count)?;
    }
    Ok(())
}

/// The svlog chunk a packed scan holds: `bytes` from file offset `start`.
struct Chunk<'a> {
    bytes: &'a mut Vec<u8>,
    start: &'a mut u64,
}

impl TierIter {
    /// The next entry and where its record is, without reading the value (conversion merges
    /// these with a frozen LSM's pointers). Not to be mixed with `next` on one iterator.
    pub fn next_entry(&mut self) -> Result<Option<TierEntry>> {
        let tier = &*self.tier;
        if self.next >= tier.header().entries {
            return Ok(None);
        }
        load_page(tier, self.next, &mut self.pages, &mut self.want_pages)?;
        let (key, e) = tier.entry(&self.pages, self.next)?;
        let file = tier
            .header()
            .files
            .get(usize::from(e.file_idx))
            .copied()
            .ok_or_else(|| corruption(tier.file_path(usize::MAX), "entry past the file table"))?;
        self.next += 1;
        Ok(Some(TierEntry {
            key: key.to_vec(),
            file,
            offset: e.offset,
            len: e.len,
        }))
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let tier = &*self.tier;
        if self.next >= tier.header().entries {
            return Ok(None);
        }
        load_page(tier, self.next, &mut self.pages, &mut self.want_pages)?;
        let (key, e) = tier.entry(&self.pages, self.next)?;
        let key = key.to_vec();
        if self.keys_only {
            self.next += 1;
            return Ok(Some((key, Vec::new())));
        }
        let idx = usize::from(e.file_idx);
        let (k, v) = if tier.packed() {
            let chunk = Chunk {
                bytes: &mut self.values,
                start: &mut self.values_start,
            };
            let sized = SizedBy {
                pages: &self.pages,
                next: self.next,
                want: &mut self.want_svlog,
            };
            read_chunked(tier, chunk, idx, e.offset, e.len, sized)?
        } else {
            tier.read_record(idx, e.offset, e.len)?
        };
        if k != key {
            return Err(corruption(
                tier.file_path(idx),
                format!(
                    "record at offset {}: holds another key than its entry",
                    e.offset
                ),
            ));
        }
        self.next += 1;
        Ok(Some((k, v)))
    }
}

/// What sizes a packed scan's next svlog chunk: the key-list pages held, the entry being read
/// and the entries the chunk should cover (None: `SCAN_SVLOG_BYTES`).
struct SizedBy<'a> {
    pages: &'a PageRun,
    next: u64,
    want: &'a mut Option<u64>,
}

/// Bytes of the next svlog chunk from `offset` (the record of entry `sized.next`, `len` bytes):
/// to the end of the record of the last wanted entry the held key-list pages show (then the
/// wanted entries double), or `SCAN_SVLOG_BYTES`; never less than the record.
fn chunk_bytes(tier: &StaticTier, idx: usize, offset: u64, len: u32, sized: SizedBy<'_>) -> u64 {
    let Some(want) = sized.want.as_mut() else {
        return u64::from(len).max(SCAN_SVLOG_BYTES);
    };
    let per = u64::from(tier.header().layout.entries_per_page).max(1);
    let held_end = (sized.pages.first_page + sized.pages.bytes.len() as u64 / PAGE_BYTES) * per;
    let last = sized
        .next
        .saturating_add(*want - 1)
        .min(held_end.saturating_sub(1))
        .min(tier.header().entries.saturating_sub(1))
        .max(sized.next);
    *want = want.saturating_mul(2);
    // A packed tier's records follow their entries' order in one file; anything else (which
    // the decode of the wanted entry reports, if damaged) falls back to the record alone.
    let end = match tier.entry(sized.pages, last) {
        Ok((_, e)) if usize::from(e.file_idx) == idx && e.offset >= offset => {
            e.offset + u64::from(e.len)
        }
        _ => offset + u64::from(len),
    };
    (end - offset).clamp(u64::from(len), u64::from(len).max(SCAN_SVLOG_BYTES))
}

/// The record at `offset` of row `idx`, from the chunk held or a new chunk read from `offset` on
/// (`chunk_bytes` long).
fn read_chunked(
    tier: &StaticTier,
    chunk: Chunk<'_>,
    idx: usize,
    offset: u64,
    len: u32,
    sized: SizedBy<'_>,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let p = tier.pointer(super::format::EntryRef {
        file_idx: idx as u16,
        offset,
        len,
    });
    let file_bytes = tier.header().files.get(idx).map_or(0, |f| f.bytes);
    let end = offset + u64::from(len);
    let held_end = *chunk.start + chunk.bytes.len() as u64;
    if offset < *chunk.start || end > held_end {
        let n = chunk_bytes(tier, idx, offset, len, sized).min(file_bytes.saturating_sub(offset));
        let mut buf = vec![0u8; n as usize];
        let handle = tier
            .file_handle(idx)
            .ok_or_else(|| corruption(tier.file_path(idx), "file index past the table"))?;
        handle.read_at(offset, &mut buf)?;
        tier.count_svlog(n);
        *chunk.bytes = buf;
        *chunk.start = offset;
    }
    // decode_entry checked `offset + len` against the file table's size, which bounds the chunk
    // read above: the record is whole in the chunk.
    let at = (offset - *chunk.start) as usize;
    let rec = chunk.bytes.get(at..at + len as usize).ok_or_else(|| {
        corruption(
            tier.file_path(idx),
            format!("record at offset {offset}: {len} bytes run past the chunk read"),
        )
    })?;
    let (k, v) = decode_pointed(rec, p).map_err(|d| corruption(tier.file_path(idx), d))?;
    Ok((k.to_vec(), v.to_vec()))
}

impl Iterator for TierIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step();
        crate::vlog::fused(&mut self.done, step)
    }
}
