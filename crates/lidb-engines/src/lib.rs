//! One trait over every engine the benchmarks compare, so one harness drives them all:
//! `lsm` (lidb-lsm, values inline), `learnedkv` (lidb-kv with the learned tier), `lsm+` (lidb-kv
//! without a tier: one LSM of pointers, GC writes them back, the paper's RocksDB+), `lsm+tier`
//! (lidb-kv with the tier's learned index replaced by an LSM, which isolates the index itself),
//! `finedex` (lidb-fine's FineStore: every key and value in memory over the concurrent learned
//! index FINEdex, a log and checkpoints on disk), `learnedstore` and `btree` (lidb-btree's
//! LearnedStore: a buffer-managed B+-tree under a write-ahead log, its learned leaf path on and
//! off) and `rocksdb` (real RocksDB, behind the `rocksdb` cargo feature).
//!
//! Every engine is configured from one [`EngineConfig`] so they get the same memtable size, the
//! same block cache budget, 10-bit Bloom filters and direct I/O alike. finedex has none of these
//! (only `sync` applies to it) and ignores them, saying so in its [`Engine::notes`]; `gc()` is
//! its checkpoint (see `fine.rs`). learnedstore and btree read the pool size and page size in
//! place of the LSM's options, and `gc()` is their checkpoint too (see `btree.rs`).

mod btree;
pub mod budget;
mod error;
mod fine;
mod kind;
mod lidb;

pub use error::EngineError;
pub use kind::{EngineKind, IndexChoice, Shape};

pub use budget::{BudgetFit, CachePlan};
pub use fine::dir_bytes;
pub use lidb_storage::size::{format_size, human_size};

pub use lidb::{Tiering, tier_kind};
#[cfg(feature = "rocksdb")]
mod rocks;

use std::path::PathBuf;
use std::sync::Arc;

use lidb_index::Family;
use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;

pub type EngineResult<T> = Result<T, EngineError>;

/// A positioned forward iterator: lidb-lsm's `DbIterator` and lidb-kv's `KvIterator` are both
/// one, so a scan drains either the same way.
pub trait Cursor {
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn advance(&mut self) -> lidb_storage::Result<()>;
}

impl Cursor for lidb_lsm::DbIterator {
    fn valid(&self) -> bool {
        lidb_lsm::DbIterator::valid(self)
    }
    fn key(&self) -> &[u8] {
        lidb_lsm::DbIterator::key(self)
    }
    fn value(&self) -> &[u8] {
        lidb_lsm::DbIterator::value(self)
    }
    fn advance(&mut self) -> lidb_storage::Result<()> {
        self.next()
    }
}

impl Cursor for lidb_kv::store::KvIterator {
    fn valid(&self) -> bool {
        lidb_kv::store::KvIterator::valid(self)
    }
    fn key(&self) -> &[u8] {
        lidb_kv::store::KvIterator::key(self)
    }
    fn value(&self) -> &[u8] {
        lidb_kv::store::KvIterator::value(self)
    }
    fn advance(&mut self) -> lidb_storage::Result<()> {
        self.next()
    }
}

/// Calls `each` for up to `limit` entries of `it`, from where it stands; returns how many.
pub fn drain(
    it: &mut impl Cursor,
    limit: usize,
    each: &mut dyn FnMut(&[u8], &[u8]),
) -> lidb_storage::Result<usize> {
    let mut n = 0;
    while it.valid() && n < limit {
        each(it.key(), it.value());
        n += 1;
        it.advance()?;
    }
    Ok(n)
}

/// Bytes on disk, split as the LearnedKV paper's Table 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Space {
    pub lsm_bytes: u64,
    pub key_list_bytes: u64,
    pub model_bytes: u64,
    pub vlog_bytes: u64,
}

/// What an engine holds in memory, in bytes, split by role as every engine reports it (index,
/// filters, cache, memtable) plus the data an in-memory engine holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemorySplit {
    /// Learned (or fence) indexes and models.
    pub index_bytes: u64,
    /// Bloom filters.
    pub filter_bytes: u64,
    /// Cached pages or blocks.
    pub cache_bytes: u64,
    /// Memtables (mutable and immutable).
    pub memtable_bytes: u64,
    /// Keys and values held in memory outside memtables and caches (finedex holds them all).
    pub data_bytes: u64,
}

impl MemorySplit {
    pub fn total_bytes(&self) -> u64 {
        self.index_bytes
            + self.filter_bytes
            + self.cache_bytes
            + self.memtable_bytes
            + self.data_bytes
    }
}

/// Storage reads an engine issued since open (cache misses that went to a file) and the bytes
/// they moved, where the engine counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceReads {
    pub reads: u64,
    /// None where the engine counts reads but not their bytes.
    pub bytes: Option<u64>,
}

/// Which part answered point reads, and how many GCs ran (counters since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadSplit {
    pub from_lsm: u64,
    pub from_tier: u64,
    /// GCs installed (0 for engines without one).
    pub gcs: u64,
}

/// A key-value engine: the serving API every command and the server call. Every method may be
/// called from several threads. The measurement probes are [`Probe`]'s, which every engine
/// also implements.
pub trait Engine: Probe + Send + Sync {
    fn name(&self) -> &'static str;
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>>;
    /// The memory-only read tier: `Some(answer)` when the engine answers `key` from memory
    /// with no storage read (memtables, filters, indexes, cached pages), `None` when it would
    /// have to read (and then it read nothing). A caller that must not block, such as an async
    /// worker of `lidb serve`, tries this before handing the read to a thread that may block.
    /// Engines without such a tier keep the default: always `None`.
    fn get_if_in_memory(&self, key: &[u8]) -> EngineResult<Option<Option<Vec<u8>>>> {
        let _ = key;
        Ok(None)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()>;
    /// Calls `each` for up to `limit` entries with key in `[start, end)`; returns how many.
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize>;
    /// Puts every `(key, value)` in order (a later entry of a key wins), as one write where the
    /// engine has batches (lsm: one WAL record, one sync with `sync`; learnedkv, lsm+ and
    /// lsm+tier: one value-log sync and one WAL record, atomic), one put at a time
    /// otherwise (then an error may leave a prefix written). `lidb serve` writes a pipeline's
    /// consecutive SETs and each MSET through it.
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<()> {
        for (key, value) in entries {
            self.put(key, value)?;
        }
        Ok(())
    }
    /// [`Engine::put_many`] only if that needs no wait: `Ok(true)` when the entries were written
    /// as `put_many` writes them, `Ok(false)` when the write would wait (on another writer, a
    /// memtable switch, a stall, a sync) and then nothing was written. The write tier of
    /// [`Engine::get_if_in_memory`]: `lidb serve` writes a pipeline's SETs this way on its async
    /// worker and hands the others to a thread that may block. Engines without such a path keep
    /// the default: always `Ok(false)`.
    fn try_put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<bool> {
        let _ = entries;
        Ok(false)
    }
    /// Garbage collection with conversion where the engine has one (learnedkv, lsm+,
    /// lsm+tier), a full compaction for lsm and rocksdb, a checkpoint for finedex, learnedstore
    /// and btree: the one call that reclaims space, whatever the engine.
    fn gc(&self) -> EngineResult<()>;
    /// A full compaction of the engine's LSMs (the LSM engines and rocksdb).
    fn compact(&self) -> EngineResult<()> {
        Err(EngineError::Unsupported(format!(
            "compact is an operation of the LSM engines (lsm, learnedkv, lsm+, lsm+tier); {} has \
             checkpoint",
            self.name()
        )))
    }
    /// A checkpoint: every live entry (finedex) or dirty page (learnedstore, btree) written and
    /// the logs it covers dropped.
    fn checkpoint(&self) -> EngineResult<()> {
        Err(EngineError::Unsupported(format!(
            "checkpoint is an operation of finedex, learnedstore and btree, not {}",
            self.name()
        )))
    }
    /// Range-query-assisted conversion (learnedkv only): a learned tier over the data where it
    /// is. Other engines have none and say so.
    fn convert(&self) -> EngineResult<()> {
        Err(EngineError::Unsupported(format!(
            "engine {} has no conversion (learnedkv has)",
            self.name()
        )))
    }
    fn flush(&self) -> EngineResult<()>;
    /// Flushes and closes; an engine whose close can fail (a last checkpoint) says so here
    /// rather than in its drop.
    fn close(self: Box<Self>) -> EngineResult<()> {
        self.flush()
    }
}

/// What a benchmark or INFO reads of an engine: memory, space, reads, budgets, notes. Never on
/// a serving path's critical section; every method may be called from several threads.
pub trait Probe {
    fn space(&self) -> Space;
    /// Bytes held in memory now, split by role (INFO's memory section).
    fn memory(&self) -> MemorySplit;
    fn read_split(&self) -> ReadSplit;
    /// Storage reads since open (lsm: its tables' reads; rocksdb: its statistics' file reads),
    /// or None for an engine that does not count them.
    fn device_reads(&self) -> Option<DeviceReads> {
        None
    }
    /// Fits the engine into `budget_bytes` for index + filters + cache (see [`budget`]): lidb's
    /// LSM measures what its indexes hold and resizes its cache to the rest; RocksDB took the
    /// budget at open ([`EngineConfig::memory_budget_bytes`]). Engines that cannot say why.
    /// Called between phases, never timed.
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        let _ = budget_bytes;
        Ok(BudgetFit::NotApplied(
            "this engine has no read cache that can be resized to a budget".into(),
        ))
    }
    /// What the run's notes should say of this engine: options of the [`EngineConfig`] it
    /// ignores, figures the rows have no column for (finedex's index memory). Called between
    /// phases, never timed.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The version of a peer engine's own library as the library itself records it (rocksdb:
    /// the `rocksdb_version` of its newest OPTIONS file), so rows say which RocksDB they ran;
    /// None for lidb's engines, which are this build.
    fn version(&self) -> Option<String> {
        None
    }
    /// What the open recovered or cut, one `recovery: ...` line per cut (empty when nothing was
    /// cut, and for engines that do not report it).
    fn recovery(&self) -> String {
        String::new()
    }
    /// The engine's own counters and structure as one JSON object (`lidb kv`'s `stats`):
    /// levels and lookups of an LSM, GCs of a tiered store, pool and device counters of the
    /// tree, bucket and model figures of FINEdex.
    fn stats(&self) -> serde_json::Value {
        serde_json::Value::Object(serde_json::Map::new())
    }
}

/// What an engine is configured with: the options every engine reads, then one group per
/// engine family, each read only by the engines it names (the others ignore it, and `lidb`'s
/// commands refuse it for them).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub dir: PathBuf,
    /// Sync every write before acknowledging it (every engine).
    pub sync: bool,
    /// What the open does with a bad record in a log (every lidb engine).
    pub recovery_mode: lidb_storage::RecoveryMode,
    /// O_DIRECT for table reads (the LSM engines, rocksdb) or the page file (learnedstore,
    /// btree).
    pub direct_io: bool,
    /// Background GC and compaction (benchmarks leave it on).
    pub background: bool,
    /// One budget for index + filters + cache (`--memory`; see [`budget`]). RocksDB takes it
    /// at open as its block cache with index and filter blocks inside; lidb's LSM opens with it
    /// as its cache and is fitted after the load ([`Probe::fit_memory_budget`]). None: every
    /// engine gets its own cache option and keeps its indexes outside it.
    pub memory_budget_bytes: Option<u64>,
    /// lsm, learnedkv, lsm+, lsm+tier (their LSMs) and rocksdb (memtable, cache, filters).
    pub lsm: LsmConfig,
    /// learnedkv and lsm+tier: the tier GC builds and when it converts.
    pub tier: TierConfig,
    /// learnedstore and btree.
    pub tree: TreeConfig,
    /// finedex (FineStore).
    pub finedex: FinedexConfig,
}

/// The LSM engines' options (lsm, learnedkv, lsm+, lsm+tier) and rocksdb's memtable, cache and
/// filters.
#[derive(Debug, Clone, PartialEq)]
pub struct LsmConfig {
    /// Memtable size that triggers a flush.
    pub memtable_bytes: u64,
    /// Block cache (without a memory budget).
    pub block_cache_bytes: u64,
    pub bloom_bits_per_key: u32,
    /// Index of lidb's LSM tables: a family, FAMILY+keys or an unclustered index.
    pub index: IndexChoice,
    /// Position boundary of that index.
    pub boundary: u64,
    /// Target size of lidb's LSM tables.
    pub sst_size_bytes: u64,
    /// What lidb's LSM (engine lsm) keeps in its cache for point lookups: pages or entries.
    pub cache_mode: lidb_lsm::CacheMode,
    /// rocksdb: the share (0 to 0.9) of its cache (the memory budget, or the block cache) given
    /// to a row cache of whole entries instead of blocks, its counterpart of lsm's entries
    /// cache; 0: none, all of it to the block cache.
    pub rocksdb_row_cache_share: f64,
}

/// The tier of learnedkv (learned) and lsm+tier (an LSM): how GC builds it and when learnedkv
/// converts by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct TierConfig {
    /// Learned tier of learnedkv: family and error bound in key-list pages.
    pub index: Family,
    pub page_boundary: u64,
    pub over_provisioning: f64,
    /// learnedkv's automatic conversion once the active LSM's tables hold this many bytes
    /// (checked by its background thread); None: off, as in the benchmarks, which measure
    /// GC-triggered conversion.
    pub convert_at_lsm_bytes: Option<u64>,
    /// learnedkv's automatic conversion once the active LSM has this many non-empty levels;
    /// 0: off.
    pub convert_at_lsm_levels: usize,
    /// learnedkv, lsm+ and lsm+tier: GC once scans have wasted this many times its cost in
    /// reads of scattered values (lidb-kv's scan-triggered GC); 0: off. Default 1.
    pub scan_gc_ratio: f64,
}

/// learnedstore's and btree's options.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeConfig {
    /// Buffer pool. Default 8 MiB, the LSM block cache's default: the pool is the block
    /// cache's counterpart, so the two read caches are equal at the defaults (the LSMs'
    /// memtable has no counterpart in the tree; see `btree.rs`).
    pub pool_bytes: u64,
    /// Page size: a power of two in 4096..=65536. Default 4096.
    pub page_size: u64,
    /// learnedstore's learned leaf path (default on); off, it runs as btree. btree ignores it.
    pub learned_path: bool,
    /// learnedstore's model over its leaves' boundary keys: family and error bound in
    /// mapping-table slots. None: its default (RadixSpline, 32).
    pub leaf_model: Option<(Family, u64)>,
    /// Automatic checkpoint once the log holds this many bytes; None: the default (64 MiB).
    pub checkpoint_log_bytes: Option<u64>,
    /// The share of the pool's bytes (or of a memory budget's cache) given to the row cache
    /// of whole records (lidb-btree's `row_cache.rs`), 0 to 0.9; the rest is the pool.
    /// Default 0 (the whole cache is pages).
    pub row_cache_share: f64,
}

/// finedex's (FineStore's) options.
#[derive(Debug, Clone, PartialEq)]
pub struct FinedexConfig {
    /// Automatic checkpoint once the log holds this many bytes; None: the default (64 MiB).
    /// `lidb stress` lowers it so checkpoints run often.
    pub checkpoint_log_bytes: Option<u64>,
}

impl EngineConfig {
    pub fn new(dir: PathBuf) -> EngineConfig {
        EngineConfig {
            dir,
            sync: false,
            recovery_mode: lidb_storage::RecoveryMode::TolerateTornTail,
            direct_io: false,
            background: true,
            memory_budget_bytes: None,
            lsm: LsmConfig {
                memtable_bytes: 64 << 20,
                block_cache_bytes: 8 << 20,
                bloom_bits_per_key: 10,
                index: IndexChoice::default(),
                boundary: 16,
                sst_size_bytes: 64 << 20,
                cache_mode: lidb_lsm::CacheMode::default(),
                rocksdb_row_cache_share: 0.0,
            },
            tier: TierConfig {
                index: Family::Plr,
                page_boundary: 2,
                over_provisioning: 0.3,
                convert_at_lsm_bytes: None,
                convert_at_lsm_levels: 0,
                scan_gc_ratio: 1.0,
            },
            tree: TreeConfig {
                pool_bytes: 8 << 20,
                page_size: 4096,
                learned_path: true,
                leaf_model: None,
                checkpoint_log_bytes: None,
                row_cache_share: 0.0,
            },
            finedex: FinedexConfig {
                checkpoint_log_bytes: None,
            },
        }
    }

    /// Sets the automatic checkpoint threshold of every engine that checkpoints (finedex,
    /// learnedstore, btree).
    pub fn set_checkpoint_log_bytes(&mut self, bytes: Option<u64>) {
        self.tree.checkpoint_log_bytes = bytes;
        self.finedex.checkpoint_log_bytes = bytes;
    }
}

impl EngineKind {
    /// lidb-kv's tiering of a tiered engine; `None` for every other engine.
    pub fn tiering(self) -> Option<Tiering> {
        match self {
            EngineKind::LearnedKv => Some(Tiering::Learned),
            EngineKind::LsmPlus => Some(Tiering::WriteBack),
            EngineKind::LsmPlusTier => Some(Tiering::LsmTier),
            _ => None,
        }
    }
}

/// The engine names `open` accepts in this build.
pub fn names() -> Vec<&'static str> {
    EngineKind::built()
        .into_iter()
        .map(EngineKind::name)
        .collect()
}

/// Opens engine `name` in `cfg.dir` (see [`open_kind`]).
pub fn open(name: &str, cfg: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    open_kind(
        EngineKind::parse(name).map_err(EngineError::InvalidOption)?,
        cfg,
    )
}

/// Opens engine `kind` in `cfg.dir` on the real file system.
pub fn open_kind(kind: EngineKind, cfg: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    if kind == EngineKind::RocksDb {
        return open_rocksdb(cfg);
    }
    open_kind_on(kind, cfg, Arc::new(FsStorage))
}

/// Opens one of lidb's engines in `cfg.dir` with its files on `storage` (see [`open_kind_on`]).
pub fn open_on(
    name: &str,
    cfg: &EngineConfig,
    storage: Arc<dyn Storage>,
) -> EngineResult<Box<dyn Engine>> {
    open_kind_on(
        EngineKind::parse(name).map_err(EngineError::InvalidOption)?,
        cfg,
        storage,
    )
}

/// Opens one of lidb's engines in `cfg.dir` with its files on `storage` (tests and `lidb
/// stress` pass a storage that injects faults or cuts the power). learnedstore and btree keep
/// their page file on the real file system whatever `storage` is: only their log goes through
/// it. rocksdb has its own file layer and is refused.
pub fn open_kind_on(
    kind: EngineKind,
    cfg: &EngineConfig,
    storage: Arc<dyn Storage>,
) -> EngineResult<Box<dyn Engine>> {
    match kind {
        EngineKind::Lsm => Ok(Box::new(lidb::LsmEngine::open(cfg, storage)?)),
        EngineKind::LearnedKv => Ok(Box::new(lidb::TieredEngine::open(
            cfg,
            Tiering::Learned,
            storage,
        )?)),
        EngineKind::LsmPlus => Ok(Box::new(lidb::TieredEngine::open(
            cfg,
            Tiering::WriteBack,
            storage,
        )?)),
        EngineKind::LsmPlusTier => Ok(Box::new(lidb::TieredEngine::open(
            cfg,
            Tiering::LsmTier,
            storage,
        )?)),
        EngineKind::Finedex => Ok(Box::new(fine::FineEngine::open(cfg, storage)?)),
        EngineKind::LearnedStore => Ok(Box::new(btree::BTreeEngine::open(cfg, true, storage)?)),
        EngineKind::Btree => Ok(Box::new(btree::BTreeEngine::open(cfg, false, storage)?)),
        EngineKind::RocksDb => Err(EngineError::Unsupported(
            "engine rocksdb keeps its files through its own Env, not lidb's storage layer".into(),
        )),
    }
}

#[cfg(feature = "rocksdb")]
fn open_rocksdb(cfg: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    Ok(Box::new(rocks::RocksEngine::open(cfg)?))
}

#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(_: &EngineConfig) -> EngineResult<Box<dyn Engine>> {
    Err(EngineError::Unsupported(
        "engine rocksdb is not built in: build with --features rocksdb (see docs/guide.md, \"Real RocksDB\")".into(),
    ))
}
