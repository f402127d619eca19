//! Reads one SSTable (docs/format/sstable.md). `Table::open` reads the footer and the whole tail
//! (filter, index, meta) in one read, checks every checksum and every layout equation, and keeps
//! the filter and index in memory; after that a point lookup costs at most one storage read:
//!
//! ```text
//! get(k): [smallest, largest] check ─► Bloom filter ─► index.search(image(k)) = [lo, hi)
//!         ─► ONE read of slots [lo, hi) (through the page cache) ─► binary search of full keys
//! ```
//!
//! Through the page cache the window is read at page granularity (table/window.rs): cached
//! pages of `[lo, hi)` clip it, only the uncached span that can still hold the key is read, and
//! only the page(s) of the slot that answered are cached. With entries on (`CacheMode`, the
//! default) a lookup whose filter passes first asks the cache for the key's entry, which answers
//! with no read; after a miss the answer is cached as an entry (the slot, or the key as absent).
//! Single-slot reads (`probe`, `find_from`) cache the pages they read; a scan's iterator reads
//! through the cache and keeps the pages it returned entries from (table/iter.rs), other
//! iterators (compaction, repair) bypass it.
//!
//! Thread-safety: a `Table` is immutable after `open`; any thread may call `get` concurrently
//! (the page cache locks itself). Iterators hold an `Arc<Table>`.
//!
//! Invariants relied on (checked at open): `entries * W` is the data region; the index covers
//! `entries` images; every slot visited by a lookup has its CRC and padding checked, so a flipped
//! bit gives `Corruption`, never a wrong value.
//!
//! Tables with a mapped-keys block (format version 2; table/mapped.rs) keep a slot index in
//! memory and read exactly the slot that holds the key:
//!
//! ```text
//! mapped keys retained: index.search(image(k)) = [lo, hi) ─► binary search of the retained
//!         images in memory ─► read ONE slot (then the next while the image repeats)
//! unclustered (alex, lipp, dili): get(image(k)) = first slot of the image's run ─► read ONE slot
//!         (then the next while the image repeats) ─► compare the full key
//! unclustered (lits): get(k) = the slot ─► read ONE slot ─► compare the full key
//! ```
//!
//! Ties of key images: for a present key `k` whose image is shared with no other key, the index
//! range holds `k`'s slot. When images tie (`max_image_run > 1` in the meta block) and the binary
//! search ends at `hi`, the key may lie in `[hi, hi - 1 + max_image_run)`, and one more read covers
//! it. Families that do not keep the boundary (`binary`) and tables without an index answer by a
//! binary search that reads one slot per probe (the "no index" baseline).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lidb_index::{Family, LearnedIndex};

use crate::keys::KeyMap;
use crate::options::IndexKind;
use crate::table::filter::BloomFilter;
use crate::table::format::{FOOTER_LEN, Footer, MetaBlock, decode_slot, unframe_block};
use crate::table::mapped::{self, SlotIndex};
use crate::table::window::Keep;
use crate::types::{EntryKind, ReadStats, TableMeta};
use lidb_storage::cache::PageCache;
use lidb_storage::error::{Error, Result, corruption};
use lidb_storage::{PAGE_SIZE, RandomAccessFile, ReadMode, Storage};

/// The newest version of a key, as one table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: EntryKind,
    pub seq: u64,
    pub value: Vec<u8>,
}

/// An open SSTable.
#[derive(Debug)]
pub struct Table {
    path: PathBuf,
    number: u64,
    file: Arc<dyn RandomAccessFile>,
    mode: ReadMode,
    cache: Option<Arc<PageCache>>,
    meta: TableMeta,
    block: MetaBlock,
    filter: Option<BloomFilter>,
    index: Option<Box<dyn LearnedIndex>>,
    /// The retained images or unclustered index, for kinds with a mapped-keys block.
    slots: Option<SlotIndex>,
    kind: IndexKind,
    index_bytes: u64,
    filter_bytes: u64,
    /// Time `open` spent building an unclustered index (ALEX, LIPP, DILI, LITS) from the
    /// mapped-keys block: their training, which compaction charges to its learning time.
    /// Zero for clustered kinds, whose model is decoded, not trained, at open.
    unclustered_build: Duration,
}

/// Whether a slot range read goes through the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Cache,
    Storage,
    /// Through the cache, never the storage: a page not cached (or no cache) is
    /// `Error::NotInMemory` (the memory-only read tier, `Db::get_if_in_memory`).
    CacheOnly,
}

impl Table {
    /// Opens table `number` at `path`; see the module doc for what is checked.
    pub fn open(
        storage: &dyn Storage,
        path: &Path,
        number: u64,
        mode: ReadMode,
        cache: Option<Arc<PageCache>>,
    ) -> Result<Table> {
        Table::open_inner(storage, path, Some(number), mode, cache)
    }

    /// `expected_number: None` takes the number recorded in the table (used by `reindex`).
    pub(crate) fn open_inner(
        storage: &dyn Storage,
        path: &Path,
        expected_number: Option<u64>,
        mode: ReadMode,
        cache: Option<Arc<PageCache>>,
    ) -> Result<Table> {
        let bad = |detail: String| corruption(path, detail);
        let file = storage.open(path, mode)?;
        let size = file.len();
        if size < FOOTER_LEN {
            return Err(bad(format!(
                "file is {size} bytes, shorter than the {FOOTER_LEN}-byte footer"
            )));
        }
        let mut footer_bytes = [0u8; FOOTER_LEN as usize];
        file.read_at(size - FOOTER_LEN, &mut footer_bytes)?;
        let footer = Footer::decode(&footer_bytes, size).map_err(&bad)?;

        let tail_len = size - FOOTER_LEN - footer.filter_offset;
        let mut tail = vec![0u8; tail_len as usize];
        file.read_at(footer.filter_offset, &mut tail)?;
        let (filter_raw, rest) = tail.split_at(footer.filter_len as usize);
        let (index_raw, meta_raw) = rest.split_at(footer.index_len as usize);

        let block = MetaBlock::decode_for(
            unframe_block(meta_raw, "meta").map_err(&bad)?,
            footer.version,
        )
        .map_err(|d| bad(format!("meta block: {d}")))?;
        // The index region: the index block, then the mapped-keys block (version 2).
        let model_len = footer
            .index_len
            .checked_sub(block.keys_len)
            .ok_or_else(|| {
                bad(format!(
                    "mapped-keys block of {} bytes is longer than the {}-byte index region",
                    block.keys_len, footer.index_len
                ))
            })?;
        if model_len != 0 && model_len < crate::table::format::BLOCK_TRAILER_LEN {
            return Err(bad(format!(
                "index block of {model_len} bytes is too short"
            )));
        }
        let (index_raw, keys_raw) = index_raw.split_at(model_len as usize);
        let kind = IndexKind::from_tag(block.index_kind)
            .ok_or_else(|| bad(format!("unknown index kind {}", block.index_kind)))?;
        if let Some(n) = expected_number
            && n != block.number
        {
            return Err(bad(format!(
                "the table records number {}, opened as {n}",
                block.number
            )));
        }
        let data_len = block.entries.checked_mul(u64::from(block.slot_width));
        if data_len != Some(footer.filter_offset) {
            return Err(bad(format!(
                "{} entries of {} bytes do not fill the {}-byte data region",
                block.entries, block.slot_width, footer.filter_offset
            )));
        }

        let filter = if footer.filter_len == 0 {
            if block.bloom_bits_per_key != 0 {
                return Err(bad("the meta block names a filter that is absent".into()));
            }
            None
        } else {
            if block.bloom_bits_per_key == 0 {
                return Err(bad("a filter block is present but not named".into()));
            }
            let payload = unframe_block(filter_raw, "filter").map_err(&bad)?;
            Some(BloomFilter::decode(payload).map_err(|d| bad(format!("filter block: {d}")))?)
        };

        let index = if model_len == 0 {
            if block.index_family_tag != 0 {
                return Err(bad("the meta block names an index that is absent".into()));
            }
            None
        } else {
            let payload = unframe_block(index_raw, "index").map_err(&bad)?;
            let index =
                lidb_index::decode(payload).map_err(|e| bad(format!("index block: {e}")))?;
            if index.family().tag() != block.index_family_tag
                || index.boundary() != block.index_boundary
                || index.key_count() != block.entries
            {
                return Err(bad(format!(
                    "index block ({} over {} keys, B={}) disagrees with the meta block \
                     (tag {} over {} entries, B={})",
                    index.family(),
                    index.key_count(),
                    index.boundary(),
                    block.index_family_tag,
                    block.entries,
                    block.index_boundary
                )));
            }
            Some(index)
        };

        let started = Instant::now();
        let slots = if kind.has_keys_block() {
            let payload = unframe_block(keys_raw, "mapped-keys").map_err(&bad)?;
            Some(
                mapped::decode(kind, payload, block.entries, block.max_key_len)
                    .map_err(|d| bad(format!("mapped-keys block: {d}")))?,
            )
        } else {
            None
        };
        let unclustered_build = if matches!(kind, IndexKind::Unclustered(_)) {
            started.elapsed()
        } else {
            Duration::ZERO
        };

        let index_bytes = index.as_ref().map_or(0, |i| i.size_bytes())
            + slots.as_ref().map_or(0, SlotIndex::size_bytes);
        let filter_bytes = filter.as_ref().map_or(0, BloomFilter::size_bytes);
        Ok(Table {
            path: path.to_path_buf(),
            number: block.number,
            meta: TableMeta {
                number: block.number,
                file_size: size,
                entries: block.entries,
                smallest: block.smallest.clone(),
                largest: block.largest.clone(),
            },
            file,
            mode,
            cache,
            block,
            filter,
            index,
            slots,
            kind,
            index_bytes,
            filter_bytes,
            unclustered_build,
        })
    }

    /// Time `open` spent building this table's unclustered index (zero for other kinds).
    pub fn unclustered_build_time(&self) -> Duration {
        self.unclustered_build
    }

    pub fn meta(&self) -> &TableMeta {
        &self.meta
    }
    pub fn entries(&self) -> u64 {
        self.block.entries
    }
    pub fn slot_width(&self) -> u64 {
        u64::from(self.block.slot_width)
    }
    pub fn index_bytes(&self) -> u64 {
        self.index_bytes
    }
    pub fn filter_bytes(&self) -> u64 {
        self.filter_bytes
    }
    pub fn padding_bytes(&self) -> u64 {
        self.block.padding_bytes
    }
    pub fn keymap(&self) -> KeyMap {
        self.block.keymap
    }
    pub fn number(&self) -> u64 {
        self.number
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn family(&self) -> Option<Family> {
        self.index.as_ref().map(|i| i.family())
    }
    pub fn boundary(&self) -> Option<u64> {
        self.index.as_ref().map(|i| i.boundary())
    }
    /// The longest run of equal key images in the table (1 when all differ).
    pub fn max_image_run(&self) -> u64 {
        self.block.max_image_run
    }
    pub fn max_key_len(&self) -> u32 {
        self.block.max_key_len
    }
    pub fn max_value_len(&self) -> u32 {
        self.block.max_value_len
    }
    /// Smallest and largest sequence numbers, and the number of deletions.
    pub fn seq_range(&self) -> (u64, u64) {
        (self.block.smallest_seq, self.block.largest_seq)
    }
    pub fn deletions(&self) -> u64 {
        self.block.deletions
    }
    pub fn index(&self) -> Option<&dyn LearnedIndex> {
        self.index.as_deref()
    }
    /// Clustered, mapped keys retained, or unclustered (`Clustered` for version-1 tables).
    pub fn index_kind(&self) -> IndexKind {
        self.kind
    }

    /// Whether `key` lies in `[smallest, largest]`.
    pub fn covers(&self, key: &[u8]) -> bool {
        key >= self.block.smallest.as_slice() && key <= self.block.largest.as_slice()
    }

    /// The newest version of `key` in this table. Counts into `stats`: `filter_negatives`,
    /// `data_reads`, `bytes_read`, `cache_hits` and the predict/io/search times (not
    /// `tables_probed` or `table_lookup_time`, which belong to whoever chose the table).
    pub fn get(&self, key: &[u8], stats: &mut ReadStats) -> Result<Option<Found>> {
        self.get_via(key, Via::Cache, stats)
    }

    /// [`Table::get`] reading through `via`.
    pub(crate) fn get_via(
        &self,
        key: &[u8],
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        if !self.covers(key) || !self.passes_filter(key, stats) {
            return Ok(None);
        }
        if let Some(answer) = self.entry_answer(key, via, stats)? {
            return Ok(answer);
        }
        let found = self.get_after_filter(key, via, stats)?;
        if found.is_none() {
            self.keep_entry(key, via, None);
        }
        Ok(found)
    }

    /// [`Table::get_via`] once the filter passed and no entry answered.
    fn get_after_filter(
        &self,
        key: &[u8],
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        let t = Instant::now();
        let range = self.predict(key);
        if let Some(slots) = &self.slots {
            let image = self.block.keymap.image(key);
            let start = slots.candidate(key, image, range);
            stats.predict_time += t.elapsed();
            return match start {
                Some(p) => self.find_from(slots, key, image, p, via, stats),
                None => Ok(None),
            };
        }
        stats.predict_time += t.elapsed();
        match range {
            Some((lo, hi)) => self.find_in(key, lo, hi, true, via, stats),
            None => {
                let p = self.probe(key, 0, self.entries(), via, stats)?;
                self.found_at(key, p, via, stats)
            }
        }
    }

    /// Reads slot `p` alone; while it holds a smaller key of the same image (a run of equal
    /// images), the next one. One read when images are distinct.
    fn find_from(
        &self,
        slots: &SlotIndex,
        key: &[u8],
        image: u64,
        mut p: u64,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        while p < self.entries() {
            let buf = self.read_slots(p, p + 1, via, stats)?;
            let t = Instant::now();
            let s = decode_slot(&buf, p).map_err(|d| corruption(&self.path, d))?;
            stats.search_time += t.elapsed();
            if s.key == key {
                self.keep_entry(key, via, Some((p, &buf)));
                return Ok(Some(Found {
                    kind: s.kind,
                    seq: s.seq,
                    value: s.value.to_vec(),
                }));
            }
            if s.key > key || slots.exact() {
                return Ok(None);
            }
            p += 1;
            // With images in memory, stop before reading a slot of another image; without,
            // the next slot's key decides (a larger image means a larger key).
            if slots.image_at(p).is_some_and(|i| i != image) {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// For tables with a slot index (retained images or unclustered): the first slot whose key
    /// may be `>= key` (every earlier slot holds a smaller key). `None` for other tables.
    pub(crate) fn lower_bound_slot(&self, key: &[u8]) -> Option<u64> {
        let slots = self.slots.as_ref()?;
        Some(slots.lower_bound(key, self.block.keymap.image(key), self.entries()))
    }

    /// Like [`Table::get`] with `[lo, hi)` (positions of this table) supplied by the caller, e.g.
    /// a level model; the range must hold the key's slot if the key is in the table. The table's
    /// own index is not consulted and ties are the caller's business.
    pub fn get_in_range(
        &self,
        key: &[u8],
        lo: u64,
        hi: u64,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        self.get_in_range_via(key, lo, hi, Via::Cache, stats)
    }

    /// [`Table::get_in_range`] reading through `via`.
    pub(crate) fn get_in_range_via(
        &self,
        key: &[u8],
        lo: u64,
        hi: u64,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        if !self.covers(key) || !self.passes_filter(key, stats) {
            return Ok(None);
        }
        if let Some(answer) = self.entry_answer(key, via, stats)? {
            return Ok(answer);
        }
        let hi = hi.min(self.entries());
        let found = self.find_in(key, lo.min(hi), hi, false, via, stats)?;
        if found.is_none() {
            self.keep_entry(key, via, None);
        }
        Ok(found)
    }

    fn passes_filter(&self, key: &[u8], stats: &mut ReadStats) -> bool {
        match &self.filter {
            Some(f) if !f.may_contain(key) => {
                stats.filter_negatives += 1;
                false
            }
            _ => true,
        }
    }

    /// The index's range for `key` (inside `[smallest, largest]`), or `None` when the table has
    /// no index that keeps the boundary.
    pub(crate) fn predict(&self, key: &[u8]) -> Option<(u64, u64)> {
        let index = self.index.as_ref().filter(|i| i.family().is_bounded())?;
        let b = index.search(self.block.keymap.image(key));
        let hi = b.hi.min(self.entries());
        Some((b.lo.min(hi), hi))
    }

    /// The shared cache, if the table was opened with one.
    pub(super) fn cache(&self) -> Option<&PageCache> {
        self.cache.as_deref()
    }

    /// The table file's length in bytes.
    pub(super) fn file_len(&self) -> u64 {
        self.file.len()
    }

    /// Reads `buf.len()` bytes of the table file at `offset` (no counting, no cache).
    pub(super) fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_at(offset, buf)
    }

    /// One read of `[lo, hi)` (through the cache: clipped by its cached pages, see
    /// table/window.rs), binary search, and (with `ties`) the tie fallback.
    fn find_in(
        &self,
        key: &[u8],
        lo: u64,
        hi: u64,
        ties: bool,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        if lo >= hi {
            return Ok(None);
        }
        let (p, found) = match (&self.cache, via) {
            (Some(cache), Via::Cache | Via::CacheOnly) => {
                let (p, found, _) =
                    self.search_window_cached(cache, key, lo, hi, via, Keep::Answer, stats)?;
                (p, found)
            }
            _ => {
                let buf = self.read_slots(lo, hi, via, stats)?;
                let t = Instant::now();
                let p = self.search_buf(&buf, lo, key)?;
                let found = if p < hi {
                    self.match_slot(&buf, lo, p, key)?
                } else {
                    None
                };
                stats.search_time += t.elapsed();
                (p, found)
            }
        };
        let run = self.block.max_image_run;
        if p == hi && ties && run > 1 && hi < self.entries() {
            let hi2 = (hi - 1).saturating_add(run).min(self.entries());
            return self.find_in(key, hi, hi2, false, via, stats);
        }
        Ok(found)
    }

    /// The first position in `[lo, lo + slots in buf]` whose key is `>= key`, checking every
    /// slot it compares.
    pub(crate) fn search_buf(&self, buf: &[u8], lo: u64, key: &[u8]) -> Result<u64> {
        let w = self.slot_width();
        let count = buf.len() as u64 / w;
        let (mut a, mut b) = (0u64, count);
        while a < b {
            let mid = a + (b - a) / 2;
            let slot = self.slot_in(buf, mid)?;
            let s = decode_slot(slot, lo + mid).map_err(|d| corruption(&self.path, d))?;
            if s.key < key {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        Ok(lo + a)
    }

    pub(super) fn match_slot(
        &self,
        buf: &[u8],
        lo: u64,
        p: u64,
        key: &[u8],
    ) -> Result<Option<Found>> {
        let slot = self.slot_in(buf, p - lo)?;
        let s = decode_slot(slot, p).map_err(|d| corruption(&self.path, d))?;
        Ok((s.key == key).then(|| Found {
            kind: s.kind,
            seq: s.seq,
            value: s.value.to_vec(),
        }))
    }

    /// Slot `i` of a buffer of whole slots.
    pub(crate) fn slot_in<'a>(&self, buf: &'a [u8], i: u64) -> Result<&'a [u8]> {
        let w = self.slot_width();
        buf.get((i * w) as usize..((i + 1) * w) as usize)
            .ok_or_else(|| corruption(&self.path, format!("slot {i} is outside the buffer")))
    }

    /// Reads slot `p` alone and returns it if it holds `key`.
    fn found_at(
        &self,
        key: &[u8],
        p: u64,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Option<Found>> {
        if p >= self.entries() {
            return Ok(None);
        }
        let buf = self.read_slots(p, p + 1, via, stats)?;
        let t = Instant::now();
        let r = self.match_slot(&buf, p, p, key)?;
        if r.is_some() {
            self.keep_entry(key, via, Some((p, &buf)));
        }
        stats.search_time += t.elapsed();
        Ok(r)
    }

    /// Binary search over `[lo, hi)` reading one slot per probe: the first position whose key
    /// is `>= key`.
    pub(crate) fn probe(
        &self,
        key: &[u8],
        lo: u64,
        hi: u64,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<u64> {
        let (mut a, mut b) = (lo, hi.min(self.entries()));
        while a < b {
            let mid = a + (b - a) / 2;
            let buf = self.read_slots(mid, mid + 1, via, stats)?;
            let t = Instant::now();
            let s = decode_slot(&buf, mid).map_err(|d| corruption(&self.path, d))?;
            if s.key < key {
                a = mid + 1;
            } else {
                b = mid;
            }
            stats.search_time += t.elapsed();
        }
        Ok(a)
    }

    /// The bytes of slots `[lo, hi)` (which must be inside the table), in one storage read at
    /// most. Through the cache, pages already cached are not read and the span from the first to
    /// the last missing page is read once and cached.
    pub(crate) fn read_slots(
        &self,
        lo: u64,
        hi: u64,
        via: Via,
        stats: &mut ReadStats,
    ) -> Result<Vec<u8>> {
        debug_assert!(
            lo < hi && hi <= self.entries(),
            "slot range inside the table"
        );
        let w = self.slot_width();
        let (start, end) = (lo * w, hi * w);
        let t = Instant::now();
        let cache = match (&self.cache, via) {
            (Some(c), Via::Cache | Via::CacheOnly) => c,
            (None, Via::CacheOnly) => return Err(Error::NotInMemory),
            (_, Via::Cache | Via::Storage) => {
                let mut buf = vec![0u8; (end - start) as usize];
                self.file.read_at(start, &mut buf)?;
                stats.data_reads += 1;
                stats.bytes_read += match self.mode {
                    ReadMode::Buffered => end - start,
                    ReadMode::Direct => {
                        end.next_multiple_of(PAGE_SIZE) - start / PAGE_SIZE * PAGE_SIZE
                    }
                };
                stats.io_time += t.elapsed();
                return Ok(buf);
            }
        };
        let first = start / PAGE_SIZE;
        let last = (end - 1) / PAGE_SIZE;
        let mut pages: Vec<Option<Arc<[u8]>>> =
            (first..=last).map(|p| cache.get(self.number, p)).collect();
        let missing_first = pages.iter().position(Option::is_none);
        let missing_last = pages.iter().rposition(Option::is_none);
        if via == Via::CacheOnly && missing_first.is_some() {
            return Err(Error::NotInMemory);
        }
        if let (Some(mf), Some(ml)) = (missing_first, missing_last) {
            let span_start = (first + mf as u64) * PAGE_SIZE;
            let span_end = ((first + ml as u64 + 1) * PAGE_SIZE).min(self.file.len());
            let mut span = vec![0u8; (span_end - span_start) as usize];
            self.file.read_at(span_start, &mut span)?;
            stats.data_reads += 1;
            stats.bytes_read += span_end - span_start;
            for (i, chunk) in span.chunks(PAGE_SIZE as usize).enumerate() {
                let slot = pages.get_mut(mf + i);
                if let Some(slot @ None) = slot {
                    let page: Arc<[u8]> = chunk.into();
                    cache.insert(self.number, first + (mf + i) as u64, Arc::clone(&page));
                    *slot = Some(page);
                }
            }
        } else {
            stats.cache_hits += 1;
        }
        let mut buf = Vec::with_capacity((end - start) as usize);
        for (i, page) in pages.iter().enumerate() {
            let page_start = (first + i as u64) * PAGE_SIZE;
            let page = page.as_deref().unwrap_or_default();
            let from = start.saturating_sub(page_start) as usize;
            let to = (end - page_start).min(page.len() as u64) as usize;
            buf.extend_from_slice(page.get(from..to).unwrap_or_default());
        }
        stats.io_time += t.elapsed();
        if buf.len() as u64 != end - start {
            return Err(corruption(
                &self.path,
                format!("cached pages of slots [{lo}, {hi}) are short"),
            ));
        }
        Ok(buf)
    }
}
