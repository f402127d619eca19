//! A forward iterator over one table's entries. `seek` asks the learned index for the range that
//! holds the first slot `>= target`, reads that range once and binary-searches it; from there the
//! iterator reads forward sequentially in chunks of about [`SCAN_CHUNK_BYTES`]. Its reads are
//! counted in the iterator's own [`ReadStats`] ([`TableIter::stats`]), and an iterator made with
//! a [`ScanReads`] sink adds its reads there when it drops (the database's scan counter).
//!
//! A plain iterator ([`Table::iter`]: compaction, repair) reads past the page cache. A scan's
//! ([`Table::iter_scan`] with `ScanOptions::fill_cache`, as RocksDB's `ReadOptions::fill_cache`)
//! reads through it, so a range scanned again, or a key looked up in it, costs no read:
//!
//! ```text
//! seek: the window's lookup through the cache (table/window.rs): cached pages clip it, and the
//!       pages of the slots on both sides of the target are cached (a repeated seek reads
//!       nothing); the window's pages from the target's slot on become the iterator's buffer
//! chunk [p, p + n): the cached pages from p's first on, with no read when they hold slot p;
//!       otherwise ONE read of the pages after them, straight into the buffer. A page read is
//!       cached only once the scan has returned an entry lying in it, so read-ahead the scan
//!       never reached evicts nothing
//! ```
//!
//! `n` is [`SCAN_CHUNK_BYTES`] of slots, or, for a scan told its limit (`ScanOptions::limit`,
//! which the database splits among its sorted runs by size), that many slots for the first
//! chunk after a seek, doubling with each chunk up to [`SCAN_CHUNK_BYTES`].
//!
//! Tables with a slot index (mapped keys retained, or unclustered) seek by its lower-bound
//! path instead: the first slot whose image is `>= image(target)` (LITS: whose key is
//! `>= target`), then forward past keys of an equal image that are still smaller.
//!
//! One iterator belongs to one thread at a time (`Send`); it pins its table with an `Arc`.
//! Invariant: while valid, slot `pos` lies wholly inside `buf`, which holds the table file's
//! bytes from offset `buf_off`, and `cur` is the decoded, checksum-verified slot `pos`. The pages
//! in `unkept` are pages of `buf` this iterator read and has not cached yet.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::options::ScanOptions;
use crate::table::format::decode_slot;
use crate::table::reader::{Table, Via};
use crate::table::window::SeekPages;
use crate::types::{EntryKind, ReadStats, SortedIter};
use lidb_storage::PAGE_SIZE;
use lidb_storage::error::{Result, corruption};

/// Bytes read per sequential step of a scan (at least one slot), at most.
pub const SCAN_CHUNK_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy)]
struct Current {
    kind: EntryKind,
    seq: u64,
    key: (usize, usize),
    value: (usize, usize),
}

/// Storage reads of scans and the bytes they moved, summed over every iterator that reports
/// here (any thread; relaxed counters, read for statistics only).
#[derive(Debug, Default)]
pub struct ScanReads {
    reads: AtomicU64,
    bytes: AtomicU64,
}

impl ScanReads {
    fn add(&self, stats: &ReadStats) {
        self.reads.fetch_add(stats.data_reads, Ordering::Relaxed);
        self.bytes.fetch_add(stats.bytes_read, Ordering::Relaxed);
    }

    /// (reads, bytes) so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Iterator over a table; see the module doc.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    buf: Vec<u8>,
    /// File offset of `buf`'s first byte.
    buf_off: u64,
    pos: u64,
    cur: Option<Current>,
    stats: ReadStats,
    /// Where the reads go when the iterator drops (scans of the database).
    sink: Option<Arc<ScanReads>>,
    /// Whether reads go through the table's page cache (a scan's, when the table has one).
    fill_cache: bool,
    /// Slots the first chunk after a seek reads (a scan's limit), at most a full chunk.
    first_chunk: u64,
    /// Slots the next chunk reads: `first_chunk` after a seek, doubled by each chunk read.
    next_chunk: u64,
    /// Pages of `buf` read from storage by this iterator and not cached yet.
    unkept: Vec<u64>,
    /// End offset of the furthest slot returned from `buf`: pages before it are cached.
    returned_end: u64,
}

impl Table {
    /// An iterator over the table, not positioned yet (call `seek` or `seek_to_first`); its reads
    /// bypass the page cache.
    pub fn iter(self: &Arc<Table>) -> TableIter {
        TableIter {
            table: Arc::clone(self),
            buf: Vec::new(),
            buf_off: 0,
            pos: 0,
            cur: None,
            stats: ReadStats::default(),
            sink: None,
            fill_cache: false,
            first_chunk: u64::MAX,
            next_chunk: u64::MAX,
            unkept: Vec::new(),
            returned_end: 0,
        }
    }

    /// A scan's iterator: its reads are added to `sink` when it drops; with `fill_cache` (and a
    /// page cache) they go through the cache as the module doc says, and with a `limit` the
    /// first chunk after a seek reads that many slots.
    pub fn iter_scan(self: &Arc<Table>, sink: &Arc<ScanReads>, opts: ScanOptions) -> TableIter {
        let mut it = self.iter();
        it.sink = Some(Arc::clone(sink));
        it.fill_cache = opts.fill_cache && self.cache().is_some();
        it.first_chunk = opts.limit.unwrap_or(u64::MAX).max(1);
        it.next_chunk = it.first_chunk;
        it
    }
}

impl Drop for TableIter {
    fn drop(&mut self) {
        self.keep_returned_pages();
        if let Some(sink) = &self.sink {
            sink.add(&self.stats);
        }
    }
}

impl TableIter {
    /// Reads done by this iterator so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Slot position of the current entry (only meaningful while valid).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether slot `p` lies wholly inside the buffer.
    fn buffered(&self, p: u64) -> bool {
        let w = self.table.slot_width();
        p * w >= self.buf_off && (p + 1) * w <= self.buf_off + self.buf.len() as u64
    }

    /// Caches the pages this iterator read that hold an entry it returned (see the module doc).
    fn keep_returned_pages(&mut self) {
        let Some(cache) = self.table.cache() else {
            return;
        };
        let (number, end) = (self.table.number(), self.returned_end);
        let (buf, buf_off) = (&self.buf, self.buf_off);
        self.unkept.retain(|&page| {
            let returned = page * PAGE_SIZE < end;
            let from = (page * PAGE_SIZE).saturating_sub(buf_off) as usize;
            let bytes = buf.get(from..buf.len().min(from + PAGE_SIZE as usize));
            if let Some(bytes) = bytes.filter(|_| returned) {
                cache.insert(number, page, bytes.into());
            }
            !returned
        });
    }

    /// Makes `buf` the pages the seek's window lookup had from the target's slot on: the scan
    /// goes on from them.
    fn adopt(&mut self, run: SeekPages) {
        self.buf.clear();
        self.unkept.clear();
        self.buf_off = run.first * PAGE_SIZE;
        for ((bytes, fresh), page) in run.pages.into_iter().zip(run.first..) {
            self.buf.extend_from_slice(&bytes);
            if fresh {
                self.unkept.push(page);
            }
            if (bytes.len() as u64) < PAGE_SIZE {
                break;
            }
        }
    }

    /// Makes `buf` hold slots `[lo, hi)` (inside the table), through the cache when the
    /// iterator fills it: the cached pages from the first one on, and when they do not hold slot
    /// `lo` whole, ONE read of the rest, straight into `buf`.
    fn load(&mut self, lo: u64, hi: u64) -> Result<()> {
        self.keep_returned_pages();
        let w = self.table.slot_width();
        let cache = if self.fill_cache {
            self.table.cache()
        } else {
            None
        };
        let Some(cache) = cache else {
            self.buf = self
                .table
                .read_slots(lo, hi, Via::Storage, &mut self.stats)?;
            self.buf_off = lo * w;
            return Ok(());
        };
        let t = Instant::now();
        let number = self.table.number();
        let (first, last) = (lo * w / PAGE_SIZE, (hi * w - 1) / PAGE_SIZE);
        let cached: Vec<Arc<[u8]>> = (first..=last)
            .map_while(|page| cache.get(number, page))
            .collect();
        let mut buf = Vec::with_capacity(((last + 1 - first) * PAGE_SIZE) as usize);
        for page in &cached {
            buf.extend_from_slice(page);
        }
        self.buf_off = first * PAGE_SIZE;
        let missing = first + cached.len() as u64;
        if buf.is_empty() || self.buf_off + (buf.len() as u64) < (lo + 1) * w {
            // Only the file's last page is short, so the cached ones end where the read starts.
            let end = ((last + 1) * PAGE_SIZE).min(self.table.file_len());
            let start = missing * PAGE_SIZE;
            if self.buf_off + buf.len() as u64 != start || start >= end {
                return Err(corruption(
                    self.table.path(),
                    format!("pages of slots [{lo}, {hi}) are short"),
                ));
            }
            let at = buf.len();
            buf.resize((end - self.buf_off) as usize, 0);
            let span = buf.get_mut(at..).unwrap_or_default();
            self.table.read_exact_at(start, span)?;
            self.stats.data_reads += 1;
            self.stats.bytes_read += end - start;
            self.unkept = (missing..=last).collect();
        } else {
            self.stats.cache_hits += 1;
            self.unkept.clear();
        }
        self.buf = buf;
        self.stats.io_time += t.elapsed();
        Ok(())
    }

    /// Loads the chunk starting at slot `p` (which must be inside the table).
    fn load_chunk(&mut self, p: u64) -> Result<()> {
        let per_chunk = (SCAN_CHUNK_BYTES / self.table.slot_width()).max(1);
        let slots = self.next_chunk.min(per_chunk);
        self.next_chunk = slots.saturating_mul(2);
        let hi = p.saturating_add(slots).min(self.table.entries());
        self.load(p, hi)
    }

    /// Positions at slot `p`, reading a new chunk if `p` is outside the buffer.
    fn go_to(&mut self, p: u64) -> Result<()> {
        self.cur = None;
        self.pos = p;
        if p >= self.table.entries() {
            return Ok(());
        }
        if !self.buffered(p) {
            self.load_chunk(p)?;
        }
        let w = self.table.slot_width();
        let off = (p * w - self.buf_off) as usize;
        let slot = self
            .buf
            .get(off..off + w as usize)
            .ok_or_else(|| corruption(self.table.path(), format!("slot {p} outside the buffer")))?;
        let s = decode_slot(slot, p).map_err(|d| corruption(self.table.path(), d))?;
        let key_off = off + crate::table::format::SLOT_HEADER_LEN as usize;
        let value_off = key_off + s.key.len();
        self.cur = Some(Current {
            kind: s.kind,
            seq: s.seq,
            key: (key_off, s.key.len()),
            value: (value_off, s.value.len()),
        });
        self.returned_end = self.returned_end.max((p + 1) * w);
        Ok(())
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        self.keep_returned_pages();
        self.returned_end = 0;
        self.next_chunk = self.first_chunk;
        let table = Arc::clone(&self.table);
        let meta = table.meta();
        if target <= meta.smallest.as_slice() {
            return self.go_to(0);
        }
        if target > meta.largest.as_slice() {
            return self.go_to(table.entries());
        }
        if let Some(p) = table.lower_bound_slot(target) {
            self.go_to(p)?;
            while self.valid() && self.key() < target {
                self.go_to(self.pos + 1)?;
            }
            return Ok(());
        }
        let start = match table.predict(target) {
            Some((lo, hi)) if lo < hi => match table.cache().filter(|_| self.fill_cache) {
                Some(cache) => {
                    let (p, run) =
                        table.seek_window_cached(cache, target, lo, hi, &mut self.stats)?;
                    self.adopt(run);
                    p
                }
                None => {
                    self.load(lo, hi)?;
                    let w = table.slot_width();
                    let from = (lo * w - self.buf_off) as usize;
                    let window = self.buf.get(from..from + ((hi - lo) * w) as usize);
                    let window = window.ok_or_else(|| {
                        corruption(table.path(), format!("window [{lo}, {hi}) is short"))
                    })?;
                    table.search_buf(window, lo, target)?
                }
            },
            Some((lo, _)) => lo,
            None => {
                let via = if self.fill_cache {
                    Via::Cache
                } else {
                    Via::Storage
                };
                table.probe(target, 0, table.entries(), via, &mut self.stats)?
            }
        };
        self.go_to(start)?;
        // Keys whose image ties with the target's may precede it past the index range.
        while self.valid() && self.key() < target {
            self.go_to(self.pos + 1)?;
        }
        Ok(())
    }
}

impl SortedIter for TableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.keep_returned_pages();
        self.returned_end = 0;
        self.next_chunk = self.first_chunk;
        let r = self.go_to(0);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn next(&mut self) -> Result<()> {
        if self.cur.is_none() {
            return Ok(());
        }
        let r = self.go_to(self.pos + 1);
        if r.is_err() {
            self.cur = None;
        }
        r
    }

    fn key(&self) -> &[u8] {
        let (off, len) = self.cur.map_or((0, 0), |c| c.key);
        self.buf.get(off..off + len).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        let (off, len) = self.cur.map_or((0, 0), |c| c.value);
        self.buf.get(off..off + len).unwrap_or_default()
    }

    fn kind(&self) -> EntryKind {
        self.cur.map_or(EntryKind::Put, |c| c.kind)
    }

    fn seq(&self) -> u64 {
        self.cur.map_or(0, |c| c.seq)
    }
}
