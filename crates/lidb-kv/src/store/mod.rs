//! The tiered store (LearnedKV, and `lsm+` with the learned tier replaced by an LSM).
//!
//! Threads: every method may be called from any thread. Writers are serialised by the write mutex
//! (value-log order = LSM WAL order); one GC or conversion at a time (the GC mutex), from the
//! background thread, `gc()` or `convert()`.
//!
//! Readers write nothing other readers write: a point read pins
//! the current `Tiers` with an `ArcSwap` load (a guard in a slot of the calling thread, no shared
//! reference count), counts in per-thread shards (`lidb_sync::Counter`), and reads value logs
//! through a handle map published the same way (`VlogReader`). A scan holds its view for its
//! whole life, so it takes one reference count on it per scan (not per entry). What the LSM
//! parts do inside a `get` is lidb-lsm's.
//!
//! Invariants:
//! 1. A key's value is found through the newest source that knows the key: active LSM, frozen LSM
//!    (only during GC), then the tier. An LSM entry is either an encoded pointer or the empty
//!    tombstone (a deletion shadowing older sources).
//! 2. With `sync`, a write's value-log record is durable before its pointer is in the LSM, and
//!    both are durable before the write is acknowledged.
//! 3. Without `sync`, a crash loses at most a suffix of the writes since the last `flush` and
//!    never leaves a pointer to a lost record: an LSM table only points to durable value-log
//!    records (every flush first syncs the active log through the LSM's `before_flush` hook; see
//!    `active_vlog` for its lock order), WAL replay at open stops at the first pointer past the
//!    active log's recovered end (`open::with_vlog_hooks`), and a GC's switch makes the old log
//!    and the frozen LSM's WAL durable before writes go to the new ones.
//! 4. `KVSTATE` names exactly the live LSMs, value logs and tier; files it does not name are
//!    removed at open; files a retired view names are removed when its last reader is done.

mod active_vlog;
mod convert;
pub(crate) mod gc;
mod open;
mod read;
mod record_cache;
pub mod recovery;
mod scan_batch;
mod scan_gc;
mod write;
mod writeback;

pub mod options;
pub(crate) mod state;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use lidb_sync::Counter;

use lidb_storage::Result;
use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;

pub use options::{StoreOptions, TierKind};
pub use read::{KvIterator, ReadSource};
pub use recovery::StoreRecovery;
use state::{Tiers, lock};

use crate::membloom::MemBloom;
use crate::vlog::VlogReader;
use active_vlog::ActiveVlog;

/// Counters a benchmark reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Point reads answered by an LSM (active or frozen).
    pub reads_from_lsm: u64,
    /// Point reads answered by the tier.
    pub reads_from_tier: u64,
    /// Point reads that found nothing.
    pub reads_missed: u64,
    /// LSM probes skipped because the in-memory Bloom filter said no.
    pub lsm_skipped: u64,
    pub gcs: u64,
    /// Of `gcs`, those started because scans wasted reads on scattered values.
    pub scan_gcs: u64,
    /// Range-query-assisted conversions installed (`Store::convert` or a threshold).
    pub conversions: u64,
    /// Live bytes of the value logs as of the last GC, plus new keys since.
    pub live_bytes_estimate: u64,
    pub vlog_bytes: u64,
    /// Device reads of the current learned tier since it was opened (zero without one): once
    /// the cache is warm, a settled get of a GC-built generation is one `svlog_reads` (its
    /// window, or its record alone when the cache holds the key list) and no `keylist_reads`.
    pub tier_reads: crate::static_tier::TierReadStats,
}

/// Storage reads since open, machine-independent benchmark counters: value-log records read by
/// point reads and scans (a scan's span of nearby records is one read), plus the reads of the
/// LSMs' tables and of the tier (key list and svlogs, or lsm+tier's LSM). The reads of a part a
/// GC retired are kept, as of the install (reads through the old view after it are not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreReads {
    pub reads: u64,
    /// Bytes read (rounded out to pages with direct I/O).
    pub bytes: u64,
    /// Of which value-log reads.
    pub vlog_reads: u64,
    pub vlog_bytes: u64,
}

/// Bytes on disk, as the paper's Table 1 splits them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceUsage {
    /// Tables of the LSMs (pointers and tombstones).
    pub lsm_bytes: u64,
    /// The tier's key list (learned) or, for lsm+, nothing (its LSM is in `lsm_bytes`).
    pub key_list_bytes: u64,
    /// The tier's model.
    pub model_bytes: u64,
    /// Every value log, the tier's sorted one included.
    pub vlog_bytes: u64,
}

pub(crate) struct WriteState {
    /// Appended to only under the write mutex; synced also by the LSMs' flush hook.
    pub vlog: ActiveVlog,
}

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub opts: StoreOptions,
    /// The view readers use. Replaced only by [`Shared::install`], under the write mutex.
    pub current: ArcSwap<Tiers>,
    pub write: Mutex<WriteState>,
    /// Writers waiting for the leader of a write group (write.rs): a group shares one value-log
    /// sync and one WAL sync.
    pub write_queue: write::WriteQueue,
    pub reader: Arc<VlogReader>,
    /// The store's one page cache pool (`opts.lsm.shared_cache` names it): the active, frozen and
    /// tier LSMs and the static tiers each read through a namespace of their own in it, so the
    /// store's cache is one capacity however many parts GC makes. A part's pages leave the pool
    /// when the part is dropped.
    pub cache: Arc<lidb_storage::cache::PageCache>,
    /// Hot records of point reads: a namespace of `cache`'s pool (`record_cache`).
    pub records: lidb_storage::cache::PageCache,
    /// Value-log reads of point reads and scans.
    pub vlog_reads: Arc<scan_batch::VlogReadCounters>,
    /// (reads, bytes) the parts GC retired had made (see `StoreReads`).
    pub retired_reads: (AtomicU64, AtomicU64),
    /// Every key of the store (inserts vs updates, for the live-data estimate).
    pub all_keys: RwLock<Arc<MemBloom>>,
    /// During a GC: the every-key filter that replaces `all_keys` at install, filled with the
    /// keys GC keeps and the keys written since its switch.
    pub next_all_keys: Mutex<Option<Arc<MemBloom>>>,
    pub live_bytes: AtomicU64,
    /// (records, bytes) appended to value logs since open: their mean record size turns
    /// `live_bytes` into a key count when GC sizes its filters (`gc::live_keys`).
    pub appended_records: (AtomicU64, AtomicU64),
    /// Bytes appended to the active value log since the last GC's switch: the records a GC
    /// would read one by one (the scan-GC trigger reads it without the write mutex), and the
    /// writes a GC's install counts live. Changed only under the write mutex, so a reader
    /// holding it sees it exact.
    pub active_vlog_bytes: AtomicU64,
    /// Reads scans wasted on scattered values (`scan_gc`).
    pub scan_scatter: Arc<scan_gc::ScanScatter>,
    /// The memory budget the store holds its resident part and cache to (`u64::MAX`: none);
    /// GC refits the cache whenever it changes the resident part (`gc::refit`).
    pub memory_budget: AtomicU64,
    /// Value-log bytes of the current view (live and dead).
    pub vlog_bytes: AtomicU64,
    /// Allocates LSM, value-log and tier numbers.
    pub next_number: AtomicU64,
    pub gc_lock: Mutex<()>,
    pub gc_wake: Mutex<bool>,
    pub gc_cv: Condvar,
    pub closing: AtomicBool,
    /// The first failed GC or conversion (background or called): once set, writes fail with it.
    pub bg_error: Mutex<Option<String>>,
    pub counters: Counters,
    /// What the open found and cut.
    pub recovery: StoreRecovery,
}

/// Read counters are per-thread shards: every get bumps one, and a shared word would be a line
/// that every reader writes.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub from_lsm: Counter,
    pub from_tier: Counter,
    pub missed: Counter,
    pub lsm_skipped: Counter,
    pub gcs: AtomicU64,
    /// Of `gcs`, those the scans started (`scan_gc`).
    pub scan_gcs: AtomicU64,
    pub conversions: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Dead bytes below which no GC is due, whatever the ratio.
pub(crate) const GC_MIN_DEAD_BYTES: u64 = 4096;

/// Bits per key of the every-key filter.
pub(crate) const ALL_KEYS_BITS: u32 = 10;

impl Shared {
    /// Records that `key` is live after the running GC (it goes into the next every-key filter).
    /// True if that filter grew (a stage added), which the caller refits the cache for (not
    /// here: the caller may hold what a refit takes).
    pub fn note_live_key(&self, key: &[u8]) -> bool {
        state::lock(&self.next_all_keys)
            .as_ref()
            .is_some_and(|next| next.insert(key) == crate::membloom::Inserted::Grew)
    }

    /// The current view, owned (a reference count): for a caller that keeps it beyond a short
    /// call (a scan, GC, writers).
    pub fn current(&self) -> Arc<Tiers> {
        self.current.load_full()
    }

    /// The current view for the length of one short read: a guard held in a slot of the calling
    /// thread, so pinning it writes no line another reader writes. Hold it briefly (arc-swap
    /// gives each thread a few such slots; more fall back to a reference count).
    pub fn view(&self) -> arc_swap::Guard<Arc<Tiers>> {
        self.current.load()
    }

    /// Replaces the view. The caller holds the write mutex (`WriteState`), so installs never
    /// race one another and the view retired is the one `next` was made from.
    pub fn install(&self, _writers: &WriteState, next: Tiers) {
        let cur = self.current.load_full();
        cur.retire_unused(&next);
        let (reads, bytes) = read::reads_retired(&cur, &next);
        self.retired_reads.0.fetch_add(reads, Ordering::Relaxed);
        self.retired_reads.1.fetch_add(bytes, Ordering::Relaxed);
        self.current.store(Arc::new(next));
    }

    /// Records the failure of a GC or conversion: from now on writes fail naming it (the first
    /// one is kept). Taken alone or under the write mutex (write mutex -> `bg_error`).
    pub fn stop_writes(&self, e: &lidb_storage::Error) {
        let mut slot = lock(&self.bg_error);
        if slot.is_none() {
            *slot = Some(e.to_string());
        }
    }

    pub fn new_number(&self) -> u64 {
        self.next_number.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether the value logs have outgrown the live data by more than the over-provisioning
    /// (and by more than `GC_MIN_DEAD_BYTES`, so that a tiny store whose files are mostly headers
    /// does not collect again and again).
    pub fn gc_due(&self) -> bool {
        let live = self.live_bytes.load(Ordering::Relaxed) as f64;
        let total = self.vlog_bytes.load(Ordering::Relaxed) as f64;
        live > 0.0
            && total > live * (1.0 + self.opts.over_provisioning)
            && total - live > GC_MIN_DEAD_BYTES as f64
    }

    /// Whether scans have wasted, on values scattered through the active value log, what a GC
    /// that puts them in key order costs (`scan_gc`; `scan_gc_ratio` 0: never).
    pub fn scan_gc_due(&self) -> bool {
        let active = self.active_vlog_bytes.load(Ordering::Relaxed) / gc::mean_record_bytes(self);
        scan_gc::due(
            self.opts.scan_gc_ratio,
            self.scan_scatter.since_switch(),
            active,
            self.live_bytes.load(Ordering::Relaxed),
        )
    }
}

/// A tiered store. Dropping it stops the GC thread (waiting for a running GC).
#[derive(Debug)]
pub struct Store {
    shared: Arc<Shared>,
    gc_thread: Option<JoinHandle<()>>,
}

impl Store {
    /// Opens (creating if missing) the store in `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        Store::open_with_storage(Arc::new(FsStorage), dir.as_ref(), opts)
    }

    pub fn open_with_storage(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: StoreOptions,
    ) -> Result<Store> {
        opts.validate()?;
        let shared = Arc::new(open::open(storage, dir, opts)?);
        // A GC a crash interrupted is finished before anything else.
        if shared.current().frozen.is_some() {
            gc::run(&shared)?;
        }
        let gc_thread = if shared.opts.auto_gc {
            let s = Arc::clone(&shared);
            Some(
                std::thread::Builder::new()
                    .name("lidb-kv-gc".into())
                    .spawn(move || gc::background(&s))
                    .map_err(lidb_storage::error::io_err(dir))?,
            )
        } else {
            None
        };
        Ok(Store { shared, gc_thread })
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        write::put(&self.shared, key, Some(value))
    }

    pub fn delete(&self, key: &[u8]) -> Result<()> {
        write::put(&self.shared, key, None)
    }

    /// Puts every `(key, value)` in order (a later entry of a key wins) as one atomic write:
    /// after a crash all or none are there. It shares its syncs with concurrent writers.
    pub fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        let owned = entries
            .iter()
            .map(|(k, v)| (k.to_vec(), Some(v.to_vec())))
            .collect();
        write::write(&self.shared, owned)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(read::get(&self.shared, key)?.0)
    }

    /// `get`, also saying which source answered.
    pub fn get_traced(&self, key: &[u8]) -> Result<(Option<Vec<u8>>, ReadSource)> {
        read::get(&self.shared, key)
    }

    /// Keys in `[start, end)` with their values, merged across the LSMs and the tier (newest
    /// wins, deletions hidden), over the view at the time of the call.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>) -> Result<KvIterator> {
        read::scan(&self.shared, start, end, None)
    }

    /// `scan` for a caller that will take about `expected` entries: the first batch of values
    /// it reads together is that many (and the one its last advance moves to) instead of a
    /// small first batch that doubles.
    pub fn scan_limited(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        expected: usize,
    ) -> Result<KvIterator> {
        read::scan(&self.shared, start, end, Some(expected))
    }

    /// Storage reads since open (see [`StoreReads`]).
    pub fn device_reads(&self) -> StoreReads {
        read::device_reads(&self.shared)
    }

    /// Runs a GC (with conversion) now and returns when its result is installed.
    pub fn gc(&self) -> Result<()> {
        gc::run(&self.shared)
    }

    /// Runs a range-query-assisted conversion now (the LearnedKV paper, section 4.5.1): a new learned
    /// tier over the LSM and the old tier, pointing at the values where they are (no value is
    /// rewritten, no space reclaimed); returns when it is installed. `InvalidOption` for the
    /// engines without a learned tier (lsm+, lsm+tier).
    pub fn convert(&self) -> Result<()> {
        convert::run(&self.shared)
    }

    /// Syncs the value log and flushes the active LSM's memtables: without `sync`, every write
    /// acknowledged before this returns survives a crash.
    pub fn flush(&self) -> Result<()> {
        write::flush(&self.shared)
    }

    /// Compacts the active LSM (the tier is rebuilt only by GC).
    pub fn compact(&self) -> Result<()> {
        self.shared.current().active.db().compact()
    }

    pub fn stats(&self) -> StoreStats {
        let c = &self.shared.counters;
        StoreStats {
            reads_from_lsm: c.from_lsm.get(),
            reads_from_tier: c.from_tier.get(),
            reads_missed: c.missed.get(),
            lsm_skipped: c.lsm_skipped.get(),
            gcs: c.gcs.load(Ordering::Relaxed),
            scan_gcs: c.scan_gcs.load(Ordering::Relaxed),
            conversions: c.conversions.load(Ordering::Relaxed),
            live_bytes_estimate: self.shared.live_bytes.load(Ordering::Relaxed),
            vlog_bytes: self.shared.vlog_bytes.load(Ordering::Relaxed),
            tier_reads: match self.shared.current().tier.as_ref().map(|h| &h.tier) {
                Some(state::Tier::Learned(t)) => t.read_stats(),
                _ => crate::static_tier::TierReadStats::default(),
            },
        }
    }

    pub fn space(&self) -> SpaceUsage {
        read::space(&self.shared)
    }

    /// Bytes held in memory, split as lidb-lsm splits them (see `read::memory`).
    pub fn memory(&self) -> lidb_lsm::MemoryUsage {
        read::memory(&self.shared)
    }

    /// Holds indexes + filters + cache to `budget_bytes` from now on: the cache gets what the
    /// resident part (indexes, filters, tier models, every-key Blooms) leaves, now and again each
    /// time a GC changes that part (at its switch, when a new LSM and a second every-key Bloom
    /// appear, and at its install). Returns the cache's capacity now.
    pub fn hold_memory_budget(&self, budget_bytes: u64) -> u64 {
        self.shared
            .memory_budget
            .store(budget_bytes, Ordering::Relaxed);
        gc::refit(&self.shared)
    }

    /// Resizes the store's one page cache (every LSM's and the tier's pages together) to
    /// `bytes`, evicting least recently used pages down to it; parts GC makes later share it.
    pub fn set_cache_bytes(&self, bytes: u64) {
        self.shared.cache.set_capacity(bytes);
    }

    /// The capacity of the store's one page cache now.
    pub fn cache_capacity_bytes(&self) -> u64 {
        self.shared.cache.capacity_bytes()
    }

    /// Namespaces (LSMs, static tiers) holding pages in the store's cache now: at most the parts
    /// of the current view and of views readers still hold. The record cache's namespace (hot
    /// records of point reads, `record_cache`) is not a part and is not counted.
    pub fn cached_parts(&self) -> u64 {
        let records = u64::from(self.shared.records.namespace_usage_bytes() > 0);
        self.shared.cache.namespaces_cached() - records
    }

    /// What the open found and cut (torn tails, and damage in point-in-time mode).
    pub fn recovery_report(&self) -> StoreRecovery {
        self.shared.recovery.clone()
    }

    /// Closes the store cleanly: stops the GC thread (waiting for a running GC), syncs the
    /// value log and flushes the active LSM, so every write is in the value log and in a table a
    /// manifest names. Dropping a `Store` only syncs the value log and the WALs.
    pub fn close(mut self) -> Result<()> {
        let stopped = self.shutdown();
        let flushed = write::flush(&self.shared);
        stopped.and(flushed)
    }

    fn shutdown(&mut self) -> Result<()> {
        self.shared.closing.store(true, Ordering::SeqCst);
        {
            let mut wake = lock(&self.shared.gc_wake);
            *wake = true;
            self.shared.gc_cv.notify_all();
        }
        if let Some(h) = self.gc_thread.take() {
            let _ = h.join();
        }
        write::flush_vlog(&self.shared)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
