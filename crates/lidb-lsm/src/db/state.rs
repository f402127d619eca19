//! The engine's shared state: the current super version (memtables + tables), the write state,
//! the manifest, counters. Everything here is reached through `Arc<Shared>`.
//!
//! Threads: every field is safe to reach from any thread. The read path (`get`, `scan`) writes no
//! cache line another reader writes: it pins the current version through [`CurrentVersion`]
//! (db/current.rs) and counts into per-thread shards (`read_stats`, lidb-sync); every
//! `Mutex` here is taken by writers, flushes, compactions or `stats()`, never by a lookup.
//!
//! Lock order: the update lock inside `current` is innermost (a memtable switch takes it under
//! `write`, flush and compaction installs under `manifest`); the statistics locks
//! (`compaction_stats`, the shards of `read_stats`) are leaves held for one addition.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use lidb_sync::Sharded;

use crate::db::current::{CurrentVersion, Pinned};
use crate::db::level_index::LevelIndex;
use crate::manifest::Manifest;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table::reader::Table;
use crate::types::{ReadStats, TableMeta};
use crate::version::Version;
use lidb_storage::Storage;
use lidb_storage::cache::PageCache;
use lidb_storage::log::LogWriter;

/// Locks a mutex, recovering the data if another thread panicked while holding it (the data of
/// every mutex here stays consistent at each unlock point).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An open table, shared by every snapshot that includes it. When the last snapshot lets go of a
/// table the compaction made obsolete, its file is deleted.
#[derive(Debug)]
pub(crate) struct TableHandle {
    pub table: Arc<Table>,
    pub meta: TableMeta,
    pub path: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub obsolete: AtomicBool,
    pub cache: Arc<PageCache>,
}

impl Drop for TableHandle {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::SeqCst) {
            self.cache.remove_table(self.meta.number);
            // A failed delete leaves a file the next open removes (it is not in the manifest).
            let _ = self.storage.remove(&self.path);
        }
    }
}

/// The table set of one version: table handles per level, L0 newest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    pub version: Version,
    pub levels: Vec<Vec<Arc<TableHandle>>>,
    /// Level models (granularity Level), by level.
    pub level_indexes: Vec<Option<Arc<LevelIndex>>>,
}

impl Tables {
    /// The table set after an edit: `added` handles join their levels, `removed` leave (and are
    /// marked obsolete, so their files go when the last snapshot lets go), level models change.
    /// The caller has already made the matching manifest edit durable.
    pub fn apply(
        &self,
        added: &[(u32, Arc<TableHandle>)],
        removed: &[(u32, u64)],
        level_indexes: &[(u32, Option<Arc<LevelIndex>>)],
    ) -> Result<Tables, String> {
        let metas: Vec<(u32, TableMeta)> =
            added.iter().map(|(l, h)| (*l, h.meta.clone())).collect();
        let version = self.version.apply(&metas, removed)?;
        let mut levels = self.levels.clone();
        let needed = version.levels.len().max(levels.len());
        levels.resize_with(needed, Vec::new);
        for &(level, number) in removed {
            if let Some(tables) = levels.get_mut(level as usize) {
                tables.retain(|t| {
                    let gone = t.meta.number == number;
                    if gone {
                        t.obsolete.store(true, Ordering::SeqCst);
                    }
                    !gone
                });
            }
        }
        for (level, handle) in added {
            if let Some(tables) = levels.get_mut(*level as usize) {
                tables.push(Arc::clone(handle));
            }
        }
        // Order each level like the version: L0 newest first, deeper levels by smallest key.
        for (i, tables) in levels.iter_mut().enumerate() {
            let order: Vec<u64> = version
                .levels
                .get(i)
                .map(|metas| metas.iter().map(|m| m.number).collect())
                .unwrap_or_default();
            tables.sort_by_key(|t| order.iter().position(|&n| n == t.meta.number));
        }
        let mut indexes = self.level_indexes.clone();
        for (level, li) in level_indexes {
            let l = *level as usize;
            if indexes.len() <= l {
                indexes.resize(l + 1, None);
            }
            if let Some(slot) = indexes.get_mut(l) {
                slot.clone_from(li);
            }
        }
        Ok(Tables {
            version,
            levels,
            level_indexes: indexes,
        })
    }
}

/// An immutable snapshot of everything a read needs. A lookup pins it (`Shared::pin`), an
/// iterator keeps an `Arc` of it.
#[derive(Debug, Clone)]
pub(crate) struct SuperVersion {
    pub mem: Arc<MemTable>,
    /// The WAL holding `mem`'s writes.
    pub mem_wal: u64,
    /// Immutable memtables waiting for flush, newest first, with their WAL numbers.
    pub imm: Vec<(Arc<MemTable>, u64)>,
    pub tables: Arc<Tables>,
}

/// What writers share, under the write mutex.
#[derive(Debug)]
pub(crate) struct WriteState {
    pub wal: LogWriter,
    pub wal_number: u64,
}

/// What the manifest writer shares, under its mutex (held by flush and compaction installs).
#[derive(Debug)]
pub(crate) struct ManifestState {
    pub manifest: Manifest,
    pub next_file_number: u64,
}

impl ManifestState {
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }
}

/// Counters of the compaction path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CompactionStats {
    pub compactions: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_time: Duration,
    pub merge_time: Duration,
    pub write_time: Duration,
    pub train_time: Duration,
    pub index_write_time: Duration,
    /// Time writers waited because L0 was too deep or the memtables were full.
    pub stall_time: Duration,
}

pub use lidb_storage::report::RecoveryReport;

/// One thread's share of the lookup counters: the count and the costs in one shard, so a lookup
/// takes one uncontended lock of its own line instead of that and an atomic add.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LookupStats {
    pub lookups: u64,
    pub read: ReadStats,
}

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub opts: Options,
    pub cache: Arc<PageCache>,
    pub _lock: Box<dyn Send + Sync + std::fmt::Debug>,
    pub current: CurrentVersion,
    pub write: Mutex<WriteState>,
    /// Writers waiting to join a write group (see `db::write`).
    pub writers: crate::db::write::WriteQueue,
    pub manifest: Mutex<ManifestState>,
    /// Sequence number of the last write applied to the memtable.
    pub last_seq: AtomicU64,
    /// Wakes the background thread (new work) and stalled writers (work done).
    pub work: Mutex<()>,
    pub work_cv: Condvar,
    pub closing: AtomicBool,
    /// The first background error; once set, writes fail with it.
    pub bg_error: Mutex<Option<String>>,
    /// Lookups served and what they cost, per thread (summed by `stats()`).
    pub read_stats: Sharded<LookupStats>,
    /// Storage reads of scans (their table iterators report here as they drop).
    pub scan_reads: Arc<crate::table::iter::ScanReads>,
    pub compaction_stats: Mutex<CompactionStats>,
    pub recovery: Mutex<RecoveryReport>,
    /// Round-robin compaction cursors per level.
    pub cursors: Mutex<Vec<Vec<u8>>>,
    /// One flush at a time (background thread and `flush()` may both try).
    pub flush_lock: Mutex<()>,
    /// One compaction at a time.
    pub compaction_lock: Mutex<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The current super version as an owned `Arc` (a shared reference count write): for
    /// iterators, writers and background work. A point lookup uses [`Shared::pin`].
    pub fn current(&self) -> Arc<SuperVersion> {
        self.current.load()
    }

    /// Pins the current super version for one lookup, writing only the caller's own line.
    pub fn pin(&self) -> Pinned {
        self.current.pin()
    }

    /// Replaces the current super version with `f(current)`, atomically with respect to other
    /// updates (a memtable switch and a flush landing together both take effect). `f` must not
    /// take any lock of `Shared`.
    pub fn update(&self, f: impl FnOnce(&SuperVersion) -> SuperVersion) {
        self.current.update(f);
    }

    pub fn table_path(&self, number: u64) -> PathBuf {
        table_path(&self.dir, number)
    }

    pub fn wal_path(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{number:06}.log"))
    }

    /// Records a background failure: from now on writes fail with it.
    pub fn set_bg_error(&self, e: &crate::Error) {
        let mut slot = lock(&self.bg_error);
        if slot.is_none() {
            *slot = Some(e.to_string());
        }
        self.work_cv.notify_all();
    }

    pub fn notify(&self) {
        let _g = lock(&self.work);
        self.work_cv.notify_all();
    }

    /// `notify` for a caller that already holds the `work` mutex.
    pub fn notify_locked(&self) {
        self.work_cv.notify_all();
    }
}

pub(crate) fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// Memory held by the engine, split as the papers report it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Learned (or fence) index bytes of every live table and level model.
    pub index_bytes: u64,
    pub filter_bytes: u64,
    /// Page cache in use (with `Options::shared_cache`, the whole shared pool's: count it once).
    pub cache_bytes: u64,
    /// Memtables (mutable and immutable).
    pub memtable_bytes: u64,
}

/// Per-level figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelStats {
    pub level: u32,
    pub files: u64,
    pub bytes: u64,
    pub entries: u64,
    pub index_bytes: u64,
}

/// Everything `stats()` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DbStats {
    pub levels: Vec<LevelStats>,
    /// Lookups served since open, and what they cost in total.
    pub lookups: u64,
    pub read: ReadStats,
    /// Storage reads of scans since open (finished scans), and the bytes they moved; apart
    /// from `read`, which is per lookup.
    pub scan_reads: u64,
    pub scan_bytes_read: u64,
    pub compaction: CompactionStats,
    pub memory: MemoryUsage,
    pub last_sequence: u64,
}

pub(crate) fn memory_usage(s: &Shared) -> MemoryUsage {
    let sv = s.current();
    let mut m = MemoryUsage {
        memtable_bytes: sv.mem.approximate_bytes()
            + sv.imm
                .iter()
                .map(|(t, _)| t.approximate_bytes())
                .sum::<u64>(),
        cache_bytes: s.cache.usage_bytes(),
        ..MemoryUsage::default()
    };
    for t in sv.tables.levels.iter().flatten() {
        m.index_bytes += t.table.index_bytes();
        m.filter_bytes += t.table.filter_bytes();
    }
    for li in sv.tables.level_indexes.iter().flatten() {
        m.index_bytes += li.size_bytes();
    }
    m
}

pub(crate) fn stats(s: &Shared) -> DbStats {
    let sv = s.current();
    let levels = sv
        .tables
        .levels
        .iter()
        .enumerate()
        .map(|(i, tables)| LevelStats {
            level: i as u32,
            files: tables.len() as u64,
            bytes: tables.iter().map(|t| t.meta.file_size).sum(),
            entries: tables.iter().map(|t| t.meta.entries).sum(),
            index_bytes: tables.iter().map(|t| t.table.index_bytes()).sum::<u64>()
                + sv.tables
                    .level_indexes
                    .get(i)
                    .and_then(|l| l.as_ref())
                    .map_or(0, |l| l.size_bytes()),
        })
        .collect();
    let (lookups, read) = s
        .read_stats
        .fold((0, ReadStats::default()), |(n, mut sum), shard| {
            sum.add(&shard.read);
            (n + shard.lookups, sum)
        });
    let (scan_reads, scan_bytes_read) = s.scan_reads.get();
    DbStats {
        levels,
        lookups,
        read,
        scan_reads,
        scan_bytes_read,
        compaction: *lock(&s.compaction_stats),
        memory: memory_usage(s),
        last_sequence: s.last_seq.load(Ordering::SeqCst),
    }
}
