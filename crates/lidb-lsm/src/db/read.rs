//! The read path. `get` consults sources newest first and stops at the first that knows the key;
//! `scan` merges every source into one iterator over a snapshot.
//!
//! Threads: any thread, any number at once. A lookup writes no cache line that another reader
//! writes in this module: it pins the super version through arc-swap (db/current.rs, a debt slot
//! of its own thread) and adds its costs to its thread's shard of `read_stats`.
//! (What it still shares lies below this module: the memtable's lock and the page cache's.) A
//! scan keeps an `Arc` of the super version and one of each table it reads: shared reference
//! count writes, once per scan, not per entry.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::db::state::{Shared, SuperVersion, TableHandle};
use crate::iter::{DbIter, LevelIter, MergingIter};
use crate::options::ScanOptions;
use crate::table::reader::Via;
use crate::types::{EntryKind, ReadStats, SortedIter};
use lidb_storage::error::{Error, Result};

fn answer(kind: EntryKind, value: Vec<u8>) -> Option<Vec<u8>> {
    (kind == EntryKind::Put).then_some(value)
}

/// Where a lookup found its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A memtable (mutable or immutable) knew the key.
    Memtable,
    /// A table of this level knew the key.
    Level(u32),
    /// No source knew the key.
    Nowhere,
}

/// A lookup with what it cost and where it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Traced {
    pub value: Option<Vec<u8>>,
    pub stats: ReadStats,
    pub source: Source,
}

pub(crate) fn get(s: &Shared, key: &[u8]) -> Result<Traced> {
    let sv = s.pin();
    let mut stats = ReadStats::default();
    let result = get_in(&sv, key, Via::Cache, &mut stats);
    drop(sv);
    count(s, &stats);
    let (value, source) = result?;
    Ok(Traced {
        value,
        stats,
        source,
    })
}

/// The memory-only read tier: `Some(answer)` when the memtables, filters, indexes and cached
/// pages answer `key` without a storage read, `None` when the answer needs one (nothing is read
/// then). A caller that must not block (an async worker) tries this first.
pub(crate) fn get_if_in_memory(s: &Shared, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
    let sv = s.pin();
    let mut stats = ReadStats::default();
    let result = get_in(&sv, key, Via::CacheOnly, &mut stats);
    drop(sv);
    match result {
        Ok((value, _)) => {
            count(s, &stats);
            Ok(Some(value))
        }
        Err(Error::NotInMemory) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Adds one lookup and its costs to the calling thread's shards.
fn count(s: &Shared, stats: &ReadStats) {
    s.read_stats.with(|shard| {
        shard.lookups += 1;
        shard.read.add(stats);
    });
}

fn get_in(
    sv: &SuperVersion,
    key: &[u8],
    via: Via,
    st: &mut ReadStats,
) -> Result<(Option<Vec<u8>>, Source)> {
    if let Some((kind, _, v)) = sv.mem.get(key) {
        return Ok((answer(kind, v), Source::Memtable));
    }
    for (m, _) in &sv.imm {
        if let Some((kind, _, v)) = m.get(key) {
            return Ok((answer(kind, v), Source::Memtable));
        }
    }
    let lookup_started = Instant::now();
    let mut in_tables = Duration::ZERO;
    let probe = |t: &TableHandle, st: &mut ReadStats, in_tables: &mut Duration| {
        st.tables_probed += 1;
        let t0 = Instant::now();
        let found = t.table.get_via(key, via, st);
        *in_tables += t0.elapsed();
        found
    };
    let mut result = None;
    'levels: for (level, tables) in sv.tables.levels.iter().enumerate() {
        if level == 0 {
            for t in tables {
                if t.meta.smallest.as_slice() <= key
                    && key <= t.meta.largest.as_slice()
                    && let Some(f) = probe(t, st, &mut in_tables)?
                {
                    result = Some((f, level as u32));
                    break 'levels;
                }
            }
            continue;
        }
        if let Some(Some(li)) = sv.tables.level_indexes.get(level) {
            for (j, lo, hi) in li.locate(key) {
                if let Some(t) = tables.get(j) {
                    st.tables_probed += 1;
                    let t0 = Instant::now();
                    let f = t.table.get_in_range_via(key, lo, hi, via, st);
                    in_tables += t0.elapsed();
                    if let Some(f) = f? {
                        result = Some((f, level as u32));
                        break 'levels;
                    }
                }
            }
            continue;
        }
        if let Some(i) = sv.tables.version.find(level, key)
            && let Some(t) = tables.get(i)
            && let Some(f) = probe(t, st, &mut in_tables)?
        {
            result = Some((f, level as u32));
            break 'levels;
        }
    }
    st.table_lookup_time += lookup_started.elapsed().saturating_sub(in_tables);
    Ok(match result {
        Some((f, level)) => (answer(f.kind, f.value), Source::Level(level)),
        None => (None, Source::Nowhere),
    })
}

/// A forward iterator over a snapshot; it pins the memtables and tables it reads.
pub struct DbIterator {
    inner: DbIter,
    _pinned: Arc<SuperVersion>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("valid", &self.inner.valid())
            .finish()
    }
}

impl DbIterator {
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }
    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }
    pub fn value(&self) -> &[u8] {
        self.inner.value()
    }
    #[expect(
        clippy::should_implement_trait,
        reason = "advancing can fail with an I/O error, which Iterator::next cannot report"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    /// Moves to the first key `>= target` (still bounded by the scan's end).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
}

pub(crate) fn scan(
    s: &Shared,
    start: &[u8],
    end: Option<&[u8]>,
    opts: ScanOptions,
) -> Result<DbIterator> {
    let snapshot = s.last_seq.load(Ordering::SeqCst);
    let sv = s.current();
    let mut sources: Vec<Box<dyn SortedIter>> = vec![Box::new(sv.mem.iter(snapshot))];
    for (m, _) in &sv.imm {
        sources.push(Box::new(m.iter(snapshot)));
    }
    // A scan told its limit expects each sorted run to give it a share of that many entries in
    // proportion to the run's size; each run reads ahead twice its share (at least 2 slots),
    // and its chunks double from there when the keys fall otherwise.
    let total: u64 = sv
        .tables
        .levels
        .iter()
        .flatten()
        .map(|t| t.meta.entries)
        .sum();
    let share = |entries: u64| ScanOptions {
        limit: opts.limit.map(|limit| {
            let part = u128::from(limit) * u128::from(entries) * 2 / u128::from(total.max(1));
            u64::try_from(part).unwrap_or(limit).clamp(2, limit.max(2))
        }),
        ..opts
    };
    for (level, tables) in sv.tables.levels.iter().enumerate() {
        if level == 0 {
            for t in tables {
                let it = t.table.iter_scan(&s.scan_reads, share(t.meta.entries));
                sources.push(Box::new(it));
            }
        } else if !tables.is_empty() {
            let opts = share(tables.iter().map(|t| t.meta.entries).sum());
            let handles: Vec<Arc<TableHandle>> = tables.clone();
            let sink = Arc::clone(&s.scan_reads);
            sources.push(Box::new(LevelIter::new(
                handles,
                move |h: &Arc<TableHandle>| {
                    Ok(Box::new(h.table.iter_scan(&sink, opts)) as Box<dyn SortedIter>)
                },
                |h: &Arc<TableHandle>| h.meta.largest.as_slice(),
            )));
        }
    }
    let mut inner = DbIter::new(MergingIter::new(sources), end.map(<[u8]>::to_vec));
    inner.seek(start)?;
    Ok(DbIterator { inner, _pinned: sv })
}
