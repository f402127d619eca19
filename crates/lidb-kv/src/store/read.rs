//! The read path: point lookups newest source first, and scans merging every source, whose LSM
//! pointers' values are read in batches (`scan_batch`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use lidb_lsm::DbIterator;

use lidb_storage::{Result, error::corruption};

use crate::pointer::Pointer;
use crate::static_tier::TierIter;
use crate::store::record_cache;
use crate::store::scan_batch::{self, VlogReadCounters};
use crate::store::scan_gc::ScanScatter;
use crate::store::state::{Tier, Tiers};
use crate::store::{Shared, SpaceUsage};
use crate::vlog::VlogReader;

/// Which source answered a point read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSource {
    /// The active or frozen LSM (a value or a tombstone).
    Lsm,
    /// The tier (learned index, or lsm+'s LSM).
    Tier,
    /// Nothing knew the key.
    Nowhere,
}

/// Reads the record `raw` (an LSM value) points to; checks it holds `key`. One read, counted.
fn resolve(s: &Shared, dir: &std::path::Path, key: &[u8], raw: &[u8]) -> Result<Vec<u8>> {
    let p = Pointer::decode(raw).ok_or_else(|| {
        corruption(
            dir,
            format!("an LSM entry of {} bytes is not a value pointer", raw.len()),
        )
    })?;
    // A cached record of another key falls through to the read, which reports the damage.
    if let Some(v) = record_cache::get(&s.records, p.file, p.offset, key) {
        return Ok(v);
    }
    let (k, v) = s.reader.read(p)?;
    s.vlog_reads
        .count(p.offset, p.offset + u64::from(p.len), s.opts.direct_io);
    if k != key {
        return Err(corruption(
            dir,
            format!(
                "value log {} offset {} holds another key than the LSM says",
                p.file, p.offset
            ),
        ));
    }
    record_cache::put(&s.records, p.file, p.offset, key, &v);
    Ok(v)
}

/// A learned tier's value of `key`: from the record cache, else read (and cached).
fn tier_get(
    s: &Shared,
    t: &crate::static_tier::StaticTier,
    generation: u64,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let slot = lidb_storage::cache::entry_hash(key);
    if let Some(v) = record_cache::get(&s.records, generation, slot, key) {
        return Ok(Some(v));
    }
    let found = t.get(key)?;
    if let Some(v) = &found {
        record_cache::put(&s.records, generation, slot, key, v);
    }
    Ok(found)
}

pub(crate) fn get(s: &Shared, key: &[u8]) -> Result<(Option<Vec<u8>>, ReadSource)> {
    let view = s.view();
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        if part.bloom.as_ref().is_some_and(|b| !b.may_contain(key)) {
            s.counters.lsm_skipped.incr();
            continue;
        }
        if let Some(raw) = part.db().get(key)? {
            s.counters.from_lsm.incr();
            if raw.is_empty() {
                return Ok((None, ReadSource::Lsm));
            }
            return Ok((Some(resolve(s, &part.dir, key, &raw)?), ReadSource::Lsm));
        }
    }
    let found = match view.tier.as_ref().map(|h| (&h.tier, h.generation)) {
        Some((Tier::Learned(t), generation)) => tier_get(s, t, generation, key)?,
        Some((Tier::Lsm(part), _)) => match part.db().get(key)? {
            Some(raw) => Some(resolve(s, &part.dir, key, &raw)?),
            None => None,
        },
        None => None,
    };
    match found {
        Some(v) => {
            s.counters.from_tier.incr();
            Ok((Some(v), ReadSource::Tier))
        }
        None => {
            s.counters.missed.incr();
            Ok((None, ReadSource::Nowhere))
        }
    }
}

/// The learned tier's iterator with its current entry held, so the merge can peek.
pub(crate) struct TierCursor {
    it: TierIter,
    cur: Option<(Vec<u8>, Vec<u8>)>,
}

impl TierCursor {
    pub(crate) fn new(mut it: TierIter) -> Result<TierCursor> {
        let cur = it.next().transpose()?;
        Ok(TierCursor { it, cur })
    }
    pub(crate) fn valid(&self) -> bool {
        self.cur.is_some()
    }
    pub(crate) fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(k, _)| k.as_slice())
    }
    pub(crate) fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(_, v)| v.as_slice())
    }
    pub(crate) fn advance(&mut self) -> Result<()> {
        self.cur = self.it.next().transpose()?;
        Ok(())
    }
}

/// One sorted source of a scan.
enum Source {
    /// An LSM: values are pointers or the empty tombstone.
    Lsm(DbIterator, std::path::PathBuf),
    /// The learned tier: values themselves.
    Learned(TierCursor),
}

impl Source {
    fn current(&self) -> Option<&[u8]> {
        match self {
            Source::Lsm(it, _) => it.valid().then(|| it.key()),
            Source::Learned(it) => it.valid().then(|| it.key()),
        }
    }

    fn advance(&mut self) -> Result<()> {
        match self {
            Source::Lsm(it, _) => it.next(),
            Source::Learned(it) => it.advance(),
        }
    }
}

/// A visible entry merged from the sources, its value not read yet when it is an LSM pointer.
enum Merged {
    /// A learned tier's value, read with its key.
    Value(Vec<u8>),
    /// An LSM's pointer; `source` names the LSM (for error messages).
    Pointer { p: Pointer, source: usize },
}

/// Entries a scan merges ahead before its first value fetch, unless told how many it will take.
const FIRST_BATCH: usize = 16;
/// The most entries merged ahead at once (each later batch doubles, up to this).
const MAX_BATCH: usize = 512;

/// A forward iterator over `[start, end)` merged across the store's sources. It merges a batch
/// of visible entries ahead and fetches the values of their LSM pointers together, sorted by
/// (file, offset) with near records read as one span (`scan_batch`); the first batch is the
/// entries the caller said it will take (`Store::scan_limited`) or `FIRST_BATCH`, each later one
/// twice the last, up to `MAX_BATCH`.
pub struct KvIterator {
    sources: Vec<Source>,
    end: Option<Vec<u8>>,
    reader: Arc<VlogReader>,
    io: Arc<VlogReadCounters>,
    /// A user's scan counts its scattered reads here (`scan_gc`); GC's own scan does not.
    scatter: Option<Arc<ScanScatter>>,
    direct: bool,
    /// Entries merged and read, in key order, after `current`.
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Whether the merge has passed the last entry (or `end`).
    merged_all: bool,
    batch: usize,
    current: Option<(Vec<u8>, Vec<u8>)>,
    /// Keeps the view's files alive while iterating.
    _view: Arc<Tiers>,
}

impl std::fmt::Debug for KvIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvIterator")
            .field("current", &self.current.as_ref().map(|c| &c.0))
            .field("ready", &self.ready.len())
            .finish()
    }
}

impl KvIterator {
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }
    pub fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k.as_slice())
    }
    pub fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v.as_slice())
    }

    #[expect(
        clippy::should_implement_trait,
        reason = "advancing can fail with an I/O error"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.fill()
    }

    /// Moves to the next visible entry, merging and reading the next batch when none is ready.
    fn fill(&mut self) -> Result<()> {
        if self.ready.is_empty() && !self.merged_all {
            self.read_batch()?;
        }
        self.current = self.ready.pop_front();
        Ok(())
    }

    /// Merges up to `batch` visible entries and reads their LSM pointers' values together.
    fn read_batch(&mut self) -> Result<()> {
        let mut merged: Vec<(Vec<u8>, Merged)> = Vec::new();
        while merged.len() < self.batch {
            match self.merge_next()? {
                Some(e) => merged.push(e),
                None => {
                    self.merged_all = true;
                    break;
                }
            }
        }
        self.batch = (self.batch * 2).min(MAX_BATCH);
        // The pointers of each LSM are fetched together (an entry's LSM names it in errors).
        let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(merged.len());
        let mut by_source: Vec<Vec<usize>> = vec![Vec::new(); self.sources.len()];
        for (i, (_, m)) in merged.iter_mut().enumerate() {
            match m {
                Merged::Value(v) => values.push(Some(std::mem::take(v))),
                Merged::Pointer { source, .. } => {
                    values.push(None);
                    if let Some(list) = by_source.get_mut(*source) {
                        list.push(i);
                    }
                }
            }
        }
        for (source, members) in by_source.iter().enumerate() {
            if members.is_empty() {
                continue;
            }
            let dir = match self.sources.get(source) {
                Some(Source::Lsm(_, dir)) => dir.clone(),
                _ => std::path::PathBuf::new(),
            };
            let batch: Vec<(&[u8], Pointer)> = members
                .iter()
                .filter_map(|&i| match merged.get(i) {
                    Some((k, Merged::Pointer { p, .. })) => Some((k.as_slice(), *p)),
                    _ => None,
                })
                .collect();
            let read = scan_batch::fetch(
                &self.reader,
                &self.io,
                self.scatter.as_deref(),
                self.direct,
                &dir,
                &batch,
            )?;
            for (&i, v) in members.iter().zip(read) {
                if let Some(slot) = values.get_mut(i) {
                    *slot = Some(v);
                }
            }
        }
        for ((key, _), value) in merged.into_iter().zip(values) {
            if let Some(v) = value {
                self.ready.push_back((key, v));
            }
        }
        Ok(())
    }

    /// The next visible entry of the merge: the smallest key of all sources, from the first
    /// (newest) source that has it; deletions are skipped. None past the last entry or `end`.
    fn merge_next(&mut self) -> Result<Option<(Vec<u8>, Merged)>> {
        loop {
            let Some(key) = self
                .sources
                .iter()
                .filter_map(Source::current)
                .min()
                .map(<[u8]>::to_vec)
            else {
                return Ok(None);
            };
            if self.end.as_deref().is_some_and(|e| key.as_slice() >= e) {
                return Ok(None);
            }
            let mut value: Option<Option<Merged>> = None;
            for (i, src) in self.sources.iter_mut().enumerate() {
                if src.current() != Some(key.as_slice()) {
                    continue;
                }
                if value.is_none() {
                    value = Some(match src {
                        Source::Lsm(it, _) if it.value().is_empty() => None,
                        Source::Lsm(it, dir) => {
                            let p = Pointer::decode(it.value()).ok_or_else(|| {
                                corruption(
                                    &*dir,
                                    format!(
                                        "an LSM entry of {} bytes is not a value pointer",
                                        it.value().len()
                                    ),
                                )
                            })?;
                            Some(Merged::Pointer { p, source: i })
                        }
                        Source::Learned(it) => Some(Merged::Value(it.value().to_vec())),
                    });
                }
                src.advance()?;
            }
            if let Some(Some(m)) = value {
                return Ok(Some((key, m)));
            }
        }
    }
}

pub(crate) fn scan(
    s: &Shared,
    start: &[u8],
    end: Option<&[u8]>,
    expected: Option<usize>,
) -> Result<KvIterator> {
    scan_view(s, s.current(), start, end, expected, Some(&s.scan_scatter))
}

/// A scan over a given view (GC scans a view without the active LSM). `expected`: how many
/// entries the caller will take, if it knows (the first batch reads their values and one more).
/// `scatter`: where a user's scan counts the reads it wastes on scattered values (`scan_gc`).
pub(crate) fn scan_view(
    s: &Shared,
    view: Arc<Tiers>,
    start: &[u8],
    end: Option<&[u8]>,
    expected: Option<usize>,
    scatter: Option<&Arc<ScanScatter>>,
) -> Result<KvIterator> {
    // A user's scan (it counts scattered reads) fills the LSMs' page cache, as an LSM scan
    // does; GC's scans of a whole view leave it alone.
    let lsm_scan = lidb_lsm::ScanOptions {
        fill_cache: scatter.is_some(),
        limit: expected.map(|n| (n as u64).saturating_add(1)),
    };
    let mut sources = Vec::new();
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        let it = part.db().scan_with(start, end, lsm_scan)?;
        sources.push(Source::Lsm(it, part.dir.clone()));
    }
    match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => {
            // A scan told how many entries it takes sizes the tier's first reads to them (and
            // the entry its last advance moves to); a scan to an end key, to the tier's entries
            // before it, counted by one more seek, of the end (key-list reads, usually cached):
            // a scan of 488 records of 1 KiB to an end key read 1.3 MB in fixed chunks, 2.6
            // times its entries.
            let it = t.iter_to(start, end, expected)?;
            sources.push(Source::Learned(TierCursor::new(it)?));
        }
        Some(Tier::Lsm(part)) => {
            let it = part.db().scan_with(start, end, lsm_scan)?;
            sources.push(Source::Lsm(it, part.dir.clone()));
        }
        None => {}
    }
    let mut it = KvIterator {
        sources,
        end: end.map(<[u8]>::to_vec),
        reader: Arc::clone(&s.reader),
        io: Arc::clone(&s.vlog_reads),
        scatter: scatter.cloned(),
        direct: s.opts.direct_io,
        ready: VecDeque::new(),
        merged_all: false,
        // The caller's entries and the one its last advance moves to.
        batch: expected.map_or(FIRST_BATCH, |n| n.saturating_add(1).clamp(1, MAX_BATCH)),
        current: None,
        _view: view,
    };
    it.fill()?;
    Ok(it)
}

pub(crate) fn space(s: &Shared) -> SpaceUsage {
    let view = s.current();
    let lsm_bytes = |part: &crate::store::state::LsmPart| {
        part.db()
            .stats()
            .levels
            .iter()
            .map(|l| l.bytes)
            .sum::<u64>()
    };
    let mut u = SpaceUsage {
        lsm_bytes: [Some(&view.active), view.frozen.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| lsm_bytes(p))
            .sum(),
        vlog_bytes: s.vlog_bytes.load(Ordering::Relaxed),
        ..SpaceUsage::default()
    };
    match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => {
            u.key_list_bytes = t.keylist_bytes();
            u.model_bytes = t.model_bytes();
        }
        Some(Tier::Lsm(part)) => u.lsm_bytes += lsm_bytes(part),
        None => {}
    }
    u
}

/// What the store holds in memory, measured from the structures held: every LSM part's
/// memtables, table indexes and filters; the parts' in-memory key filters and the every-key
/// filter (and, during a GC, the next one) as filters; a learned tier's model as index, counted
/// twice over because the tier holds it twice (the model file's bytes, which keep the encoded
/// index, and the decoded index); the store's one page cache pool once (every part reports the
/// whole pool's usage). The learned tier's key list is on disk and not counted.
pub(crate) fn memory(s: &Shared) -> lidb_lsm::MemoryUsage {
    let view = s.current();
    let mut m = lidb_lsm::MemoryUsage {
        cache_bytes: s.cache.usage_bytes(),
        ..lidb_lsm::MemoryUsage::default()
    };
    let mut add_part = |part: &crate::store::state::LsmPart| {
        let p = part.db().stats().memory;
        m.index_bytes += p.index_bytes;
        m.filter_bytes += p.filter_bytes + part.bloom.as_ref().map_or(0, |b| b.size_bytes());
        m.memtable_bytes += p.memtable_bytes;
    };
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        add_part(part);
    }
    match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => {
            m.index_bytes += t.model_bytes() + t.index().map_or(0, |i| i.size_bytes());
        }
        Some(Tier::Lsm(part)) => add_part(part),
        None => {}
    }
    m.filter_bytes += s
        .all_keys
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .size_bytes();
    m.filter_bytes += crate::store::state::lock(&s.next_all_keys)
        .as_ref()
        .map_or(0, |b| b.size_bytes());
    m
}

/// Storage reads an LSM part made since it was opened: (reads, bytes) of its tables.
fn lsm_reads(part: &crate::store::state::LsmPart) -> (u64, u64) {
    let r = part.db().stats().read;
    (r.data_reads, r.bytes_read)
}

/// Storage reads a tier made since it was opened: its key list's and svlogs' (learned), or its
/// LSM's tables' (lsm+tier; the values it points to are value-log reads).
fn tier_reads(t: &crate::store::state::TierHandle) -> (u64, u64) {
    match &t.tier {
        Tier::Learned(t) => {
            let r = t.read_stats();
            (
                r.keylist_reads + r.svlog_reads,
                r.keylist_bytes + r.svlog_bytes,
            )
        }
        Tier::Lsm(part) => lsm_reads(part),
    }
}

/// Reads of the parts of `old` that `next` no longer has: what they made since they were opened.
pub(crate) fn reads_retired(old: &Tiers, next: &Tiers) -> (u64, u64) {
    let mut sum = (0, 0);
    let mut add = |(r, b): (u64, u64)| {
        sum.0 += r;
        sum.1 += b;
    };
    for part in [Some(&old.active), old.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        let kept = Arc::ptr_eq(part, &next.active)
            || next.frozen.as_ref().is_some_and(|f| Arc::ptr_eq(part, f));
        if !kept {
            add(lsm_reads(part));
        }
    }
    if let Some(t) = &old.tier
        && !next.tier.as_ref().is_some_and(|n| Arc::ptr_eq(n, t))
    {
        add(tier_reads(t));
    }
    sum
}

/// Storage reads since open (see `Store::device_reads`).
pub(crate) fn device_reads(s: &Shared) -> crate::store::StoreReads {
    let view = s.current();
    let mut tables = (
        s.retired_reads.0.load(Ordering::Relaxed),
        s.retired_reads.1.load(Ordering::Relaxed),
    );
    let mut add = |(r, b): (u64, u64)| {
        tables.0 += r;
        tables.1 += b;
    };
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        add(lsm_reads(part));
    }
    if let Some(t) = &view.tier {
        add(tier_reads(t));
    }
    let vlog_reads = s.vlog_reads.reads.get();
    let vlog_bytes = s.vlog_reads.bytes.get();
    crate::store::StoreReads {
        reads: tables.0 + vlog_reads,
        bytes: tables.1 + vlog_bytes,
        vlog_reads,
        vlog_bytes,
    }
}
