//! An open generation of the static tier: point lookups and the seek of range scans. Immutable
//! once open; every method may be called from any thread. Values are read through the key list's
//! file table: the generation's own svlog, or (a converted tier) `.vlog` and older `.svlog` files,
//! each opened once at open and checked against its row (kind, number, size).

use lidb_sync::Counter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lidb_index::{Family, LearnedIndex};
use lidb_storage::cache::PageCache;
use lidb_storage::error::corruption;
use lidb_storage::{RandomAccessFile, ReadMode, Storage};

use super::format::{
    EntryRef, KeyListHeader, ModelFile, PAGE_BYTES, TierFile, TierFileKind, check_page,
    decode_entry,
};
use super::{TierMeta, keys_path, model_path, svlog_path};
use crate::vlog::{VLOG_HEADER_BYTES, VlogKind, check_header, decode_pointed, vlog_path};
use crate::{Pointer, Result};

/// Reads done by a tier since it was opened (machine-independent benchmark counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TierReadStats {
    pub keylist_reads: u64,
    pub keylist_bytes: u64,
    pub svlog_reads: u64,
    pub svlog_bytes: u64,
    /// One-read lookups whose window held a damaged record or page-start entry, answered again
    /// through the key list (docs/format/static-tier.md, "Lookup" 6).
    pub one_read_fallbacks: u64,
}

/// Per-thread shards: a settled get counts its svlog read here, from every reader thread.
#[derive(Debug, Default)]
struct Counters {
    keylist_reads: Counter,
    keylist_bytes: Counter,
    svlog_reads: Counter,
    svlog_bytes: Counter,
    one_read_fallbacks: Counter,
}

/// Consecutive data pages of the key list held in memory, checked.
#[derive(Debug, Default)]
pub(super) struct PageRun {
    pub first_page: u64,
    pub bytes: Vec<u8>,
}

/// A file of the file table, open.
#[derive(Debug)]
struct OpenFile {
    row: TierFile,
    path: PathBuf,
    handle: Arc<dyn RandomAccessFile>,
}

/// One open generation. See the module docs of `static_tier`.
#[derive(Debug)]
pub struct StaticTier {
    generation: u64,
    header: KeyListHeader,
    model: ModelFile,
    /// None when the tier is empty.
    index: Option<Box<dyn LearnedIndex>>,
    /// The index of the svlog page model (`model.svlog`): set when gets read once.
    svlog_index: Option<Box<dyn LearnedIndex>>,
    keylist: Arc<dyn RandomAccessFile>,
    /// The file table's files, in row order.
    files: Vec<OpenFile>,
    /// The key list and the model.
    paths: [PathBuf; 2],
    model_bytes: u64,
    counters: Counters,
    /// Key-list pages of point lookups (scans bypass it), keyed by (generation, page).
    cache: Option<Arc<PageCache>>,
    /// The svlog pages of one-read lookups, keyed by (generation, page): a namespace of its own
    /// in the same pool, so they never meet the key list's pages.
    svlog_cache: Option<PageCache>,
}

impl StaticTier {
    /// Opens generation `generation` of `dir`: loads the model and the key list header and checks
    /// them, the svlog header, and that the three files agree.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        generation: u64,
        mode: ReadMode,
    ) -> Result<StaticTier> {
        let (mpath, kpath) = (model_path(dir, generation), keys_path(dir, generation));
        let raw = storage.read_all(&mpath)?;
        let model = ModelFile::decode(&raw).map_err(|d| corruption(&mpath, d))?;
        let bad_model = |d: String| corruption(&mpath, d);
        if model.generation != generation {
            return Err(bad_model(format!(
                "model is of generation {}, expected {generation}",
                model.generation
            )));
        }
        let index = if model.entries == 0 {
            None
        } else {
            let index =
                lidb_index::decode(&model.index).map_err(|e| bad_model(format!("index: {e}")))?;
            let family =
                Family::from_tag(model.family_tag).map_err(|e| bad_model(format!("index: {e}")))?;
            if index.family() != family
                || index.key_count() != model.pages
                || index.boundary() != model.page_boundary
            {
                return Err(bad_model(format!(
                    "index ({} over {} positions, B {}) does not match the model header",
                    index.family(),
                    index.key_count(),
                    index.boundary()
                )));
            }
            Some(index)
        };

        let keylist = storage.open(&kpath, mode)?;
        let bad_keys = |d: String| corruption(&kpath, d);
        if keylist.len() < PAGE_BYTES {
            return Err(bad_keys(format!(
                "file of {} bytes has no header page",
                keylist.len()
            )));
        }
        let mut page = vec![0u8; PAGE_BYTES as usize];
        keylist.read_at(0, &mut page)?;
        let header = KeyListHeader::decode(&page).map_err(bad_keys)?;
        if header.generation != generation
            || header.entries != model.entries
            || header.pages != model.pages
            || header.layout.key_width != model.key_width
        {
            return Err(bad_keys(format!(
                "header (generation {}, {} entries, {} pages, key width {}) disagrees with the \
                 model (generation {generation}, {} entries, {} pages, key width {})",
                header.generation,
                header.entries,
                header.pages,
                header.layout.key_width,
                model.entries,
                model.pages,
                model.key_width
            )));
        }
        if keylist.len() != header.file_bytes() {
            return Err(bad_keys(format!(
                "file is {} bytes, its header says {}",
                keylist.len(),
                header.file_bytes()
            )));
        }

        let mut files = Vec::with_capacity(header.files.len());
        for row in &header.files {
            let (path, kind) = match row.kind {
                TierFileKind::Vlog => (vlog_path(dir, row.number), VlogKind::Log),
                TierFileKind::Svlog => (svlog_path(dir, row.number), VlogKind::Static),
            };
            let handle = storage.open(&path, mode)?;
            if handle.len() != row.bytes || handle.len() < VLOG_HEADER_BYTES {
                return Err(corruption(
                    &path,
                    format!(
                        "file is {} bytes, the key list of generation {generation} says {}",
                        handle.len(),
                        row.bytes
                    ),
                ));
            }
            let mut h = [0u8; VLOG_HEADER_BYTES as usize];
            handle.read_at(0, &mut h)?;
            check_header(&h, kind, row.number).map_err(|d| corruption(&path, d))?;
            files.push(OpenFile {
                row: *row,
                path,
                handle,
            });
        }
        let svlog_index = match &model.svlog {
            None => None,
            Some(sm) => {
                let svlog_bytes = files.first().map_or(0, |f| f.row.bytes);
                if !header.packed() || sm.pages != svlog_bytes.div_ceil(PAGE_BYTES) {
                    return Err(bad_model(format!(
                        "svlog page model of {} pages for a {} generation with an svlog of \
                         {svlog_bytes} bytes",
                        sm.pages,
                        if header.packed() {
                            "packed"
                        } else {
                            "converted"
                        }
                    )));
                }
                let index = lidb_index::decode(&sm.index)
                    .map_err(|e| bad_model(format!("svlog index: {e}")))?;
                let family = Family::from_tag(sm.family_tag)
                    .map_err(|e| bad_model(format!("svlog index: {e}")))?;
                if index.family() != family
                    || index.key_count() != sm.pages
                    || index.boundary() != sm.page_boundary
                {
                    return Err(bad_model(format!(
                        "svlog index ({} over {} positions, B {}) does not match its header",
                        index.family(),
                        index.key_count(),
                        index.boundary()
                    )));
                }
                Some(index)
            }
        };
        Ok(StaticTier {
            generation,
            header,
            model,
            index,
            svlog_index,
            keylist,
            files,
            paths: [kpath, mpath],
            model_bytes: raw.len() as u64,
            counters: Counters::default(),
            cache: None,
            svlog_cache: None,
        })
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn entries(&self) -> u64 {
        self.header.entries
    }

    pub fn meta(&self) -> TierMeta {
        TierMeta {
            generation: self.generation,
            entries: self.header.entries,
            svlog_bytes: self.svlog_bytes(),
            keylist_bytes: self.header.file_bytes(),
            model_bytes: self.model_bytes,
            train_time: Duration::from_nanos(self.model.train_nanos),
        }
    }

    /// Bytes of the model file (the memory the tier's index needs, plus its small header).
    pub fn model_bytes(&self) -> u64 {
        self.model_bytes
    }

    pub fn keylist_bytes(&self) -> u64 {
        self.header.file_bytes()
    }

    /// Bytes of the static value logs the tier reads (its own and, when converted, older ones).
    pub fn svlog_bytes(&self) -> u64 {
        self.rows(TierFileKind::Svlog).map(|r| r.bytes).sum()
    }

    /// Bytes of the value logs (`.vlog`) a converted tier reads (0 for a GC-built tier).
    pub fn vlog_bytes(&self) -> u64 {
        self.rows(TierFileKind::Vlog).map(|r| r.bytes).sum()
    }

    /// The key list's file table: every file the tier reads values from.
    pub fn file_table(&self) -> &[TierFile] {
        &self.header.files
    }

    /// Numbers of the `.svlog` files of the file table.
    pub fn svlog_numbers(&self) -> Vec<u64> {
        self.rows(TierFileKind::Svlog).map(|r| r.number).collect()
    }

    fn rows(&self, kind: TierFileKind) -> impl Iterator<Item = &TierFile> {
        self.header.files.iter().filter(move |r| r.kind == kind)
    }

    /// Whether every entry is in the generation's own svlog, in order (see `KeyListHeader::packed`).
    pub fn packed(&self) -> bool {
        self.header.packed()
    }

    /// The generation's own files: its svlog (if it has one), key list and model.
    pub fn files(&self) -> Vec<PathBuf> {
        let own = self
            .files
            .iter()
            .filter(|f| f.row.kind == TierFileKind::Svlog && f.row.number == self.generation)
            .map(|f| f.path.clone());
        own.chain(self.paths.iter().cloned()).collect()
    }

    /// The key list and model paths: the files only this generation reads (its svlog may be
    /// read by a later converted tier too).
    pub fn index_files(&self) -> Vec<PathBuf> {
        self.paths.to_vec()
    }

    /// The index over the key list's pages, if the tier is not empty.
    pub fn index(&self) -> Option<&dyn LearnedIndex> {
        self.index.as_deref()
    }

    pub fn read_stats(&self) -> TierReadStats {
        let c = &self.counters;
        TierReadStats {
            keylist_reads: c.keylist_reads.get(),
            keylist_bytes: c.keylist_bytes.get(),
            svlog_reads: c.svlog_reads.get(),
            svlog_bytes: c.svlog_bytes.get(),
            one_read_fallbacks: c.one_read_fallbacks.get(),
        }
    }

    fn keys_file(&self) -> &Path {
        self.paths.first().map_or(Path::new(""), PathBuf::as_path)
    }

    /// Gives point lookups a page cache for key-list pages and, in one-read lookups, svlog pages
    /// (the same budget the LSM's tables get).
    pub fn with_cache(mut self, cache: Arc<PageCache>) -> StaticTier {
        self.svlog_cache = Some(cache.new_namespace());
        self.cache = Some(cache);
        self
    }

    /// Data pages `[lo, hi)` for a point lookup: pages in the cache are not read; the span from
    /// the first to the last missing page is one read, whose pages then join the cache.
    pub(super) fn read_pages(&self, lo: u64, hi: u64) -> Result<PageRun> {
        let Some(cache) = &self.cache else {
            return self.read_pages_uncached(lo, hi);
        };
        let hi = hi.min(self.header.pages);
        let lo = lo.min(hi);
        let bytes = pages_through_cache(
            cache,
            self.generation,
            lo,
            hi,
            |_| PAGE_BYTES as usize,
            |a, b| Ok(self.read_pages_uncached(a, b)?.bytes),
        )?;
        Ok(PageRun {
            first_page: lo,
            bytes,
        })
    }

    /// Reads data pages `[lo, hi)` in one read and checks their CRCs.
    pub(super) fn read_pages_uncached(&self, lo: u64, hi: u64) -> Result<PageRun> {
        let hi = hi.min(self.header.pages);
        let lo = lo.min(hi);
        let mut bytes = vec![0u8; ((hi - lo) * PAGE_BYTES) as usize];
        self.keylist.read_at((1 + lo) * PAGE_BYTES, &mut bytes)?;
        self.counters.keylist_reads.incr();
        self.counters.keylist_bytes.add(bytes.len() as u64);
        for (i, page) in bytes.chunks(PAGE_BYTES as usize).enumerate() {
            check_page(page, lo + i as u64).map_err(|d| corruption(self.keys_file(), d))?;
        }
        Ok(PageRun {
            first_page: lo,
            bytes,
        })
    }

    /// Entry `i` (global index) from `run`, which must hold its page.
    pub(super) fn entry<'a>(&self, run: &'a PageRun, i: u64) -> Result<(&'a [u8], EntryRef)> {
        let l = &self.header.layout;
        let per = u64::from(l.entries_per_page);
        let page = i / per;
        let missing = || {
            corruption(
                self.keys_file(),
                format!("entry {i} is not in the pages read"),
            )
        };
        let rel = page
            .checked_sub(run.first_page)
            .filter(|_| i < self.header.entries)
            .ok_or_else(missing)?;
        let at = (rel * PAGE_BYTES + (i % per) * u64::from(l.entry_width)) as usize;
        let bytes = run
            .bytes
            .get(at..at + l.entry_width as usize)
            .ok_or_else(missing)?;
        decode_entry(bytes, l, &self.header.files)
            .map_err(|d| corruption(self.keys_file(), format!("entry {i}: {d}")))
    }

    /// Where `key` would be: the first entry `>= key` (`entries()` if none), with the pages read
    /// to find it (None when no read was needed).
    pub(super) fn seek(&self, key: &[u8]) -> Result<(u64, Option<PageRun>)> {
        let n = self.header.entries;
        let Some(index) = self.index.as_deref() else {
            return Ok((n, None));
        };
        if key <= self.model.smallest.as_slice() {
            return Ok((0, None));
        }
        if key > self.model.largest.as_slice() {
            return Ok((n, None));
        }
        let b = index.search(self.model.keymap.image(key));
        // T (the first page whose last key is >= key) is in [L, L + r], where L =
        // lower_bound(image) < b.hi and r <= max_image_run counts pages whose image ties with
        // the key's (docs/format/static-tier.md, "Lookup").
        let hi =
            b.hi.saturating_add(self.model.max_image_run)
                .min(self.header.pages);
        let run = self.read_pages(b.lo, hi)?;
        let per = u64::from(self.header.layout.entries_per_page);
        let (mut lo_i, mut hi_i) = (run.first_page * per, (hi * per).min(n));
        let end = hi_i;
        // Invariant: entries before lo_i are < key, entries from hi_i on (inside the run) >= key.
        while lo_i < hi_i {
            let mid = lo_i + (hi_i - lo_i) / 2;
            let (k, _) = self.entry(&run, mid)?;
            if k < key {
                lo_i = mid + 1;
            } else {
                hi_i = mid;
            }
        }
        if lo_i == end && end < n {
            // The contract puts the first key >= `key` inside the pages read.
            return Err(corruption(
                self.paths.get(1).map_or(Path::new(""), PathBuf::as_path),
                format!(
                    "the model's pages [{}, {hi}) do not hold the key sought",
                    b.lo
                ),
            ));
        }
        Ok((lo_i, Some(run)))
    }

    /// Entries with `start <= key < end` (no end: to the last): two seeks, each a read of the
    /// key list's pages through the cache, or none where a bound lies outside the tier's keys. A
    /// scan to an end key sizes its reads with it (`iter.rs`).
    pub fn entries_between(&self, start: &[u8], end: Option<&[u8]>) -> Result<u64> {
        let (from, _) = self.seek(start)?;
        let to = match end {
            Some(e) => self.seek(e)?.0,
            None => self.header.entries,
        };
        Ok(to.saturating_sub(from))
    }

    /// The entry of `key`: ONE read of the key list's pages (none when `key` is out of the
    /// tier's range).
    fn find(&self, key: &[u8]) -> Result<Option<EntryRef>> {
        let (i, run) = self.seek(key)?;
        if i >= self.header.entries {
            return Ok(None);
        }
        let run = match run {
            Some(r) => r,
            // `key <= smallest`: only entry 0 can match.
            None if key == self.model.smallest.as_slice() => self.read_pages(0, 1)?,
            None => return Ok(None),
        };
        let (k, e) = self.entry(&run, i)?;
        Ok((k == key).then_some(e))
    }

    /// The pointer of `key`'s record (`file` is the number of its file): ONE read of the key
    /// list's pages (none when `key` is out of the tier's range).
    pub fn get_pointer(&self, key: &[u8]) -> Result<Option<Pointer>> {
        Ok(self.find(key)?.map(|e| self.pointer(e)))
    }

    /// The pointer form of an entry: `file` is the number of its file-table row.
    pub(super) fn pointer(&self, e: EntryRef) -> Pointer {
        Pointer {
            file: self
                .files
                .get(usize::from(e.file_idx))
                .map_or(u64::MAX, |f| f.row.number),
            offset: e.offset,
            len: e.len,
        }
    }

    /// The value of `key`. A packed generation with an svlog page model (model version 3) and
    /// no page cache that holds its whole key list: ONE read of svlog pages (a second only for
    /// a record spanning more than 16 pages). Else, or when that window holds damage (which may
    /// be another key's record), the key list's pages (cached when a cache holds them) and one
    /// read of the key's own record, so damage to one record fails only its own key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(index) = self.svlog_index.as_deref()
            && !self.key_list_fits_cache()
        {
            match self.get_one_read(index, key) {
                Err(crate::Error::Corruption { .. }) => {
                    self.counters.one_read_fallbacks.incr();
                }
                answer => return answer,
            }
        }
        let Some(e) = self.find(key)? else {
            return Ok(None);
        };
        let idx = usize::from(e.file_idx);
        let (k, v) = self.read_record(idx, e.offset, e.len)?;
        if k != key {
            return Err(corruption(
                self.file_path(idx),
                format!(
                    "record at offset {}: holds another key than its entry",
                    e.offset
                ),
            ));
        }
        Ok(Some(v))
    }

    /// The value of the record `p` (from `get_pointer`) points to (ONE read).
    pub fn read_value(&self, p: Pointer) -> Result<Vec<u8>> {
        let idx = self
            .files
            .iter()
            .position(|f| f.row.number == p.file)
            .ok_or_else(|| {
                corruption(
                    self.keys_file(),
                    format!("pointer to file {}: not in the file table", p.file),
                )
            })?;
        Ok(self.read_record(idx, p.offset, p.len)?.1)
    }

    /// The record of `len` bytes at `offset` of file-table row `idx`.
    pub(super) fn read_record(
        &self,
        idx: usize,
        offset: u64,
        len: u32,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        let Some(f) = self.files.get(idx) else {
            return Err(corruption(
                self.keys_file(),
                format!("file index {idx} is past the file table"),
            ));
        };
        let p = Pointer {
            file: f.row.number,
            offset,
            len,
        };
        let end = offset.checked_add(u64::from(len));
        if end.is_none_or(|e| e > f.row.bytes) || offset < VLOG_HEADER_BYTES {
            return Err(corruption(
                &f.path,
                format!(
                    "record at offset {offset}: {len} bytes are not inside the file ({} bytes)",
                    f.row.bytes
                ),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        f.handle.read_at(offset, &mut buf)?;
        self.count_svlog(buf.len() as u64);
        let (k, v) = decode_pointed(&buf, p).map_err(|d| corruption(&f.path, d))?;
        Ok((k.to_vec(), v.to_vec()))
    }

    pub(super) fn count_svlog(&self, bytes: u64) {
        self.counters.svlog_reads.incr();
        self.counters.svlog_bytes.add(bytes);
    }

    pub(super) fn file_handle(&self, idx: usize) -> Option<&dyn RandomAccessFile> {
        self.files.get(idx).map(|f| f.handle.as_ref())
    }

    pub(super) fn header(&self) -> &KeyListHeader {
        &self.header
    }

    /// The cache of one-read lookups' svlog pages (with `with_cache`).
    pub(super) fn svlog_cache(&self) -> Option<&PageCache> {
        self.svlog_cache.as_ref()
    }

    pub(super) fn model(&self) -> &ModelFile {
        &self.model
    }

    /// Whether point lookups read once: the svlog page model was loaded and no page cache holds
    /// the whole key list (docs/format/static-tier.md, "Which lookup a get takes").
    pub fn reads_once(&self) -> bool {
        self.svlog_index.is_some() && !self.key_list_fits_cache()
    }

    /// Whether the tier's page cache can hold every data page of the key list: then a settled
    /// get costs one read of its record alone (the key list's pages come from the cache), a
    /// smaller read than the one-read lookup's window of svlog pages.
    fn key_list_fits_cache(&self) -> bool {
        let pages_bytes = self.header.pages * PAGE_BYTES;
        self.cache
            .as_ref()
            .is_some_and(|c| pages_bytes > 0 && c.capacity_bytes() >= pages_bytes)
    }

    pub(super) fn file_path(&self, idx: usize) -> &Path {
        self.files
            .get(idx)
            .map_or(self.keys_file(), |f| f.path.as_path())
    }
}

/// Pages `[lo, hi)` of `table` through `cache` (keyed (table, page)): cached pages of the
/// expected length (`page_len`; a file's last page may be short) are not read; the span from the
/// first to the last missing page is ONE read (`read(a, b)`: the bytes of pages `[a, b)`), whose
/// pages then join the cache. Shared by the key list's and the svlog's point lookups.
pub(super) fn pages_through_cache(
    cache: &PageCache,
    table: u64,
    lo: u64,
    hi: u64,
    page_len: impl Fn(u64) -> usize,
    read: impl FnOnce(u64, u64) -> Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    let cached: Vec<Option<Arc<[u8]>>> = (lo..hi)
        .map(|p| cache.get(table, p).filter(|c| c.len() == page_len(p)))
        .collect();
    let fresh = match (
        cached.iter().position(Option::is_none),
        cached.iter().rposition(Option::is_none),
    ) {
        (Some(a), Some(b)) => {
            let (a, b) = (lo + a as u64, lo + b as u64);
            Some((a, read(a, b + 1)?))
        }
        _ => None,
    };
    let mut out = Vec::with_capacity(((hi - lo) * PAGE_BYTES) as usize);
    for (i, hit) in cached.iter().enumerate() {
        let p = lo + i as u64;
        match (hit, &fresh) {
            (Some(c), _) => out.extend_from_slice(c),
            (None, Some((first, bytes))) => {
                let at = ((p - first) * PAGE_BYTES) as usize;
                let page = bytes.get(at..at + page_len(p));
                debug_assert!(
                    page.is_some(),
                    "`read` returns every byte of the pages asked"
                );
                let page = page.unwrap_or_default();
                cache.insert(table, p, Arc::from(page));
                out.extend_from_slice(page);
            }
            (None, None) => {}
        }
    }
    Ok(out)
}
