//! The read path: point lookups newest source first, and scans merging every source.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lidb_lsm::{DbIterator, Result, error::corruption};

use crate::pointer::Pointer;
use crate::static_tier::TierIter;
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

/// Reads the record `raw` (an LSM value) points to; checks it holds `key`.
fn resolve(reader: &VlogReader, dir: &std::path::Path, key: &[u8], raw: &[u8]) -> Result<Vec<u8>> {
    let p = Pointer::decode(raw).ok_or_else(|| {
        corruption(
            dir,
            format!("an LSM entry of {} bytes is not a value pointer", raw.len()),
        )
    })?;
    let (k, v) = reader.read(p)?;
    if k != key {
        return Err(corruption(
            dir,
            format!(
                "value log {} offset {} holds another key than the LSM says",
                p.file, p.offset
            ),
        ));
    }
    Ok(v)
}

pub(crate) fn get(s: &Shared, key: &[u8]) -> Result<(Option<Vec<u8>>, ReadSource)> {
    let view = s.current();
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        if part.bloom.as_ref().is_some_and(|b| !b.may_contain(key)) {
            s.counters.lsm_skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if let Some(raw) = part.db().get(key)? {
            s.counters.from_lsm.fetch_add(1, Ordering::Relaxed);
            if raw.is_empty() {
                return Ok((None, ReadSource::Lsm));
            }
            return Ok((
                Some(resolve(&s.reader, &part.dir, key, &raw)?),
                ReadSource::Lsm,
            ));
        }
    }
    let found = match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => t.get(key)?,
        Some(Tier::Lsm(part)) => match part.db().get(key)? {
            Some(raw) => Some(resolve(&s.reader, &part.dir, key, &raw)?),
            None => None,
        },
        None => None,
    };
    match found {
        Some(v) => {
            s.counters.from_tier.fetch_add(1, Ordering::Relaxed);
            Ok((Some(v), ReadSource::Tier))
        }
        None => {
            s.counters.missed.fetch_add(1, Ordering::Relaxed);
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

/// A forward iterator over `[start, end)` merged across the store's sources.
pub struct KvIterator {
    sources: Vec<Source>,
    end: Option<Vec<u8>>,
    reader: Arc<VlogReader>,
    current: Option<(Vec<u8>, Vec<u8>)>,
    /// Keeps the view's files alive while iterating.
    _view: Arc<Tiers>,
}

impl std::fmt::Debug for KvIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvIterator")
            .field("current", &self.current.as_ref().map(|c| &c.0))
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

    /// Moves to the next visible entry: the smallest key of all sources, from the first (newest)
    /// source that has it; deletions are skipped.
    fn fill(&mut self) -> Result<()> {
        loop {
            let Some(key) = self
                .sources
                .iter()
                .filter_map(Source::current)
                .min()
                .map(<[u8]>::to_vec)
            else {
                self.current = None;
                return Ok(());
            };
            if self.end.as_deref().is_some_and(|e| key.as_slice() >= e) {
                self.current = None;
                return Ok(());
            }
            let mut value: Option<Option<Vec<u8>>> = None;
            for src in &mut self.sources {
                if src.current() != Some(key.as_slice()) {
                    continue;
                }
                if value.is_none() {
                    value = Some(match src {
                        Source::Lsm(it, dir) if it.value().is_empty() => None,
                        Source::Lsm(it, dir) => Some(resolve(&self.reader, dir, &key, it.value())?),
                        Source::Learned(it) => Some(it.value().to_vec()),
                    });
                }
                src.advance()?;
            }
            if let Some(Some(v)) = value {
                self.current = Some((key, v));
                return Ok(());
            }
        }
    }
}

pub(crate) fn scan(s: &Shared, start: &[u8], end: Option<&[u8]>) -> Result<KvIterator> {
    scan_view(s, s.current(), start, end)
}

/// A scan over a given view (GC scans a view without the active LSM).
pub(crate) fn scan_view(
    s: &Shared,
    view: Arc<Tiers>,
    start: &[u8],
    end: Option<&[u8]>,
) -> Result<KvIterator> {
    let mut sources = Vec::new();
    for part in [Some(&view.active), view.frozen.as_ref()]
        .into_iter()
        .flatten()
    {
        sources.push(Source::Lsm(part.db().scan(start, end)?, part.dir.clone()));
    }
    match view.tier.as_ref().map(|h| &h.tier) {
        Some(Tier::Learned(t)) => sources.push(Source::Learned(TierCursor::new(t.iter(start)?)?)),
        Some(Tier::Lsm(part)) => {
            sources.push(Source::Lsm(part.db().scan(start, end)?, part.dir.clone()));
        }
        None => {}
    }
    let mut it = KvIterator {
        sources,
        end: end.map(<[u8]>::to_vec),
        reader: Arc::clone(&s.reader),
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
