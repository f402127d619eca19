//! `learnedstore` and `btree`: LearnedStore (lidb-btree) behind the engine trait, with
//! its learned leaf path on (`learnedstore`) and off (`btree`: the same buffer-managed B+-tree,
//! every lookup a tree walk), so one run compares the two.
//!
//! Of [`EngineConfig`] it reads `dir`, `sync` (a write returns once its log record is synced),
//! `direct_io` (O_DIRECT for the page file), `pool_bytes` (the buffer pool), `row_cache_share`
//! (of the pool's bytes, or of a budget's cache, given to the row cache of whole records),
//! `page_size`, and `learned_path` (learnedstore only; btree always runs with the path off).
//! It has no memtable, Bloom filter, SSTable index, learned tier, value-log GC or background
//! compaction, so `memtable_bytes`, `block_cache_bytes`, `bloom_bits_per_key`,
//! `lsm_index`/`lsm_boundary`, `tier_index`/`tier_page_boundary`, `over_provisioning` and
//! `background` are ignored, and [`Engine::notes`] names them with their values.
//!
//! Equal memory: the buffer pool plays the block cache's role, and `pool_bytes` defaults to
//! `block_cache_bytes`'s default (8 MiB). The LSM engines also hold a memtable (64 MiB by
//! default) that has no counterpart here (the tree takes writes in its pool), so at the defaults
//! this engine holds less memory than they do; to compare at equal total memory, set the pool to
//! the LSMs' cache plus memtable. The notes say so.
//!
//! Mapping of the trait:
//! - `get_if_in_memory`: LearnedStore's memory-only read (no device read, else `None`).
//! - `gc()` is a checkpoint: the tree's dirty pages written to the page file and the logs it
//!   covers removed. `convert()` is refused (the default). The store also checkpoints by itself
//!   each 64 MiB of log (WalOptions' default).
//! - `space()`: the page file as `lsm_bytes` (the place of the LSM's tables: the structure that
//!   holds the keys and values), the write-ahead logs and `WALSTATE` as `vlog_bytes`; the other
//!   columns 0.
//! - `memory()`: the pool's resident frames (inner nodes and leaves alike) and the row cache's
//!   records as `cache_bytes`, the learned path's mapping table and model
//!   (`LearnedStats::table_bytes`; 0 for `btree`) as `index_bytes`.
//! - `read_split()`: none (no LSM, no tier), as finedex.
//!
//! Threads: any; LearnedStore takes `&self` everywhere (see `lidb_btree::LearnedStore`).

use std::path::Path;

use serde_json::{Value, json};

use lidb_btree::{LearnedOptions, LearnedStore, LearnedStoreOptions, Options, PAGE_FILE_NAME};

use super::{
    BudgetFit, DeviceReads, Engine, EngineConfig, EngineResult, MemorySplit, Probe, ReadSplit,
    Space,
};
use crate::budget::CachePlan;
use crate::format_size;

/// LearnedStore with its learned path on (`learnedstore`) or off (`btree`).
pub struct BTreeEngine {
    store: LearnedStore,
    name: &'static str,
    page_size: u64,
    /// Whether the learned path is on (its mapping table and model are then index_bytes).
    learned: bool,
    /// What of the configuration does not apply, as one note.
    ignored: String,
    /// The row cache's share of a memory budget's cache.
    row_cache_share: f64,
}

impl BTreeEngine {
    /// Opens `learnedstore` (`learned` true: the path as `cfg.tree.learned_path` says) or `btree`
    /// (`learned` false: the path off whatever the configuration says).
    pub fn open(
        cfg: &EngineConfig,
        learned: bool,
        storage: std::sync::Arc<dyn lidb_storage::Storage>,
    ) -> EngineResult<BTreeEngine> {
        let opts = store_options(cfg, learned && cfg.tree.learned_path);
        let page_size = opts.tree.page_size as u64;
        let learned_on = opts.learned.enabled;
        Ok(BTreeEngine {
            store: LearnedStore::open_with_storage(storage, &cfg.dir, &opts)?,
            name: if learned { "learnedstore" } else { "btree" },
            page_size,
            learned: learned_on,
            ignored: ignored_options(cfg),
            row_cache_share: cfg.tree.row_cache_share,
        })
    }
}

/// The store's options from `cfg`, the learned path on or off.
fn store_options(cfg: &EngineConfig, learned_path: bool) -> LearnedStoreOptions {
    // Under a budget the pool opens at all of it and is fitted after the load, as lsm's cache
    // is (`fit_memory_budget`, which also sizes the row cache).
    let (pool_bytes, row_cache_bytes) = match cfg.memory_budget_bytes {
        Some(budget) => (budget, 0),
        None => {
            let rows = row_share(cfg.tree.pool_bytes, cfg.tree.row_cache_share);
            (cfg.tree.pool_bytes - rows, rows)
        }
    };
    let mut opts = LearnedStoreOptions {
        tree: Options {
            page_size: usize::try_from(cfg.tree.page_size).unwrap_or(usize::MAX),
            pool_bytes,
            direct_io: cfg.direct_io,
            ..Options::default()
        },
        row_cache_bytes,
        learned: LearnedOptions {
            enabled: learned_path,
            ..LearnedOptions::default()
        },
        ..LearnedStoreOptions::default()
    };
    if let Some((family, bound)) = cfg.tree.leaf_model {
        opts.learned.family = family;
        opts.learned.error_bound = bound;
    }
    opts.wal.sync = cfg.sync;
    opts.wal.recovery_mode = cfg.recovery_mode;
    if let Some(bytes) = cfg.tree.checkpoint_log_bytes {
        opts.wal.checkpoint_log_bytes = bytes;
    }
    opts
}

/// The row cache's part of `cache_bytes` at `share` (clamped to 0..=0.9, as the CLI checks).
fn row_share(cache_bytes: u64, share: f64) -> u64 {
    (cache_bytes as f64 * share.clamp(0.0, 0.9)) as u64
}

/// The note naming the options of `cfg` the tree ignores, with their values.
fn ignored_options(cfg: &EngineConfig) -> String {
    format!(
        "a buffer-managed B+-tree under a write-ahead log: memtable={} cache={} bloom_bits={} \
         lsm_index={}/{} tier_index={}/{} over_provisioning={} background_gc={} do not apply and \
         are ignored; pool={} row_cache_share={} page_size={} direct_io={} sync={} apply; gc() \
         is a checkpoint (dirty pages written, covered logs removed)",
        format_size(cfg.lsm.memtable_bytes),
        format_size(cfg.lsm.block_cache_bytes),
        cfg.lsm.bloom_bits_per_key,
        cfg.lsm.index.name(),
        cfg.lsm.boundary,
        cfg.tier.index.name(),
        cfg.tier.page_boundary,
        cfg.tier.over_provisioning,
        cfg.background,
        format_size(cfg.tree.pool_bytes),
        cfg.tree.row_cache_share,
        cfg.tree.page_size,
        cfg.direct_io,
        cfg.sync,
    )
}

impl Engine for BTreeEngine {
    fn name(&self) -> &'static str {
        self.name
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.store.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.store.get(key)?)
    }
    fn get_if_in_memory(&self, key: &[u8]) -> EngineResult<Option<Option<Vec<u8>>>> {
        Ok(self.store.get_if_in_memory(key)?)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        // Whether the key was there does not matter to the trait.
        self.store.delete(key)?;
        Ok(())
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        let entries = self.store.scan(start, end, limit)?;
        for (k, v) in &entries {
            each(k, v);
        }
        Ok(entries.len())
    }
    fn gc(&self) -> EngineResult<()> {
        Ok(self.store.checkpoint()?)
    }
    fn checkpoint(&self) -> EngineResult<()> {
        Ok(self.store.checkpoint()?)
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.store.flush()?)
    }
    fn close(self: Box<Self>) -> EngineResult<()> {
        Ok(self.store.close()?)
    }
}

impl Probe for BTreeEngine {
    /// The pool, the page device's I/O, the file's slots.
    fn stats(&self) -> Value {
        let st = self.store.stats();
        let rows = self.store.row_cache_stats();
        json!({
            "pool_hits": st.pool.hits, "pool_misses": st.pool.misses,
            "pool_write_backs": st.pool.write_backs, "pool_evictions": st.pool.evictions,
            "pool_cooled": st.pool.cooled, "pool_cooling_rehits": st.pool.cooling_rehits,
            "pool_frames_used": st.pool.frames_used, "pool_frames": st.pool.frames,
            "device_reads": st.io.reads, "device_writes": st.io.writes,
            "device_bytes_read": st.io.bytes_read, "device_bytes_written": st.io.bytes_written,
            "device_syncs": st.io.syncs,
            "file_slots": st.file_slots, "file_slots_used": st.file_slots_used,
            "learned_retrain_errors": self.store.learned_stats().retrain_errors,
            "row_cache_hits": rows.hits, "row_cache_misses": rows.misses,
            "row_cache_bytes": rows.usage_bytes, "row_cache_capacity": rows.capacity_bytes,
        })
    }
    fn space(&self) -> Space {
        let (pages, logs) = file_bytes(self.store.dir());
        Space {
            lsm_bytes: pages,
            vlog_bytes: logs,
            ..Space::default()
        }
    }
    fn memory(&self) -> MemorySplit {
        MemorySplit {
            cache_bytes: self.store.stats().pool.frames_used * self.page_size
                + self.store.row_cache_stats().usage_bytes,
            index_bytes: self.store.learned_stats().table_bytes,
            ..MemorySplit::default()
        }
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit::default()
    }
    fn device_reads(&self) -> Option<DeviceReads> {
        let io = self.store.stats().io;
        Some(DeviceReads {
            reads: io.reads,
            bytes: Some(io.bytes_read),
        })
    }
    /// The budget's rule for lidb's engines: the learned path's mapping table and model stay
    /// resident, and the cache (the pool, opened at the whole budget, and the row cache) shrinks
    /// to what they leave, the row cache taking `row_cache_share` of it. The pool keeps at least
    /// 16 pages; a plan it cannot meet is reported over budget.
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        let resident_bytes = self.memory().resident_bytes();
        let wanted = crate::budget::plan(budget_bytes, resident_bytes);
        let rows = row_share(wanted.cache_bytes, self.row_cache_share);
        let pool_bytes = self.store.tree().resize_pool(wanted.cache_bytes - rows)?;
        self.store.resize_row_cache(rows);
        Ok(BudgetFit::Resized(CachePlan {
            budget_bytes,
            resident_bytes,
            cache_bytes: pool_bytes + rows,
            over_bytes: (resident_bytes + pool_bytes + rows).saturating_sub(budget_bytes),
        }))
    }
    fn recovery(&self) -> String {
        self.store.recovery_report().to_string()
    }
    fn notes(&self) -> Vec<String> {
        let stats = self.store.stats();
        let rows = self.store.row_cache_stats();
        let (pages, logs) = file_bytes(self.store.dir());
        let index = if self.learned {
            "the learned path's mapping table and model are index_bytes"
        } else {
            "the learned path is off, so there is no mapping table and index_bytes is 0"
        };
        vec![
            self.ignored.clone(),
            format!(
                "pool {} of {} frames in use ({} bytes each; inner nodes and leaves), row cache \
                 {} of {} bytes ({} hits, {} misses), {} device reads; on disk the page file \
                 {pages} bytes (lsm_bytes) and the logs {logs} bytes (vlog_bytes); {index}; \
                 the pool is the block cache's counterpart and this engine has no memtable: \
                 compare at equal memory with pool = cache + memtable",
                stats.pool.frames_used,
                stats.pool.frames,
                self.page_size,
                rows.usage_bytes,
                rows.capacity_bytes,
                rows.hits,
                rows.misses,
                stats.io.reads
            ),
        ]
    }
}

/// Bytes of the page file, and of every other regular file in `dir` (the logs, `WALSTATE`,
/// `LOCK`); a file that vanishes meanwhile (a checkpoint removing an old log) counts 0.
fn file_bytes(dir: &Path) -> (u64, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    let mut pages = 0;
    let mut logs = 0;
    for entry in entries.filter_map(Result::ok) {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if entry.file_name() == PAGE_FILE_NAME {
            pages += meta.len();
        } else {
            logs += meta.len();
        }
    }
    (pages, logs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget's cache is split between the pool and the row cache by the share, the two
    /// together within the budget, and the row cache then answers repeated gets.
    #[test]
    fn a_budget_splits_its_cache_between_pool_and_row_cache()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mut cfg = EngineConfig::new(dir.path().join("db"));
        cfg.tree.row_cache_share = 0.25;
        cfg.memory_budget_bytes = Some(4 << 20);
        let storage: std::sync::Arc<dyn lidb_storage::Storage> =
            std::sync::Arc::new(lidb_storage::fs::FsStorage);
        let e = BTreeEngine::open(&cfg, true, storage)?;
        for i in 0..2000u32 {
            e.put(format!("key{i:05}").as_bytes(), &[7u8; 200])?;
        }
        let BudgetFit::Resized(plan) = e.fit_memory_budget(4 << 20)? else {
            return Err("learnedstore resizes its cache".into());
        };
        let rows = e.store.row_cache_stats().capacity_bytes;
        let wanted = (4u64 << 20) - plan.resident_bytes;
        assert_eq!(rows, (wanted as f64 * 0.25) as u64, "{plan:?}");
        assert_eq!(plan.cache_bytes, rows + e.store.stats().pool.frames * 4096);
        assert!(plan.fits(), "{plan:?}");
        for _ in 0..3 {
            assert_eq!(e.get(b"key00042")?, Some(vec![7u8; 200]));
        }
        assert_eq!(e.store.row_cache_stats().hits, 2);
        assert!(e.memory().cache_bytes <= 4 << 20);
        Ok(())
    }
}
