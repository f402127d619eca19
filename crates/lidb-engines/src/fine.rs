//! `finedex`: FineStore (lidb-fine, the FineStore paper) behind the benchmark trait.
//!
//! FineStore keeps every key and value in memory, over the concurrent learned index FINEdex, and
//! on disk only in a log and a checkpoint it replays on open. So of [`EngineConfig`] only `dir`
//! and `sync` apply (`sync` is FineStoreOptions' `sync`: a write returns once its batch is
//! synced). It has no memtable, block cache, Bloom filter, SSTable index, learned tier, value-log
//! GC or background compaction, and never reads its files after open, so `memtable_bytes`,
//! `block_cache_bytes`, `bloom_bits_per_key`, `direct_io`, `lsm_index`/`lsm_boundary`,
//! `tier_index`/`tier_page_boundary`, `over_provisioning` and `background` are ignored, as the
//! other engines ignore options that are not theirs, but not silently: [`Engine::notes`] names
//! them, with their values, for the run's notes.
//!
//! Mapping of the trait:
//! - `gc()` is a checkpoint: every live entry written to a new checkpoint file and a new empty
//!   log started, which is what reclaims the space of overwritten and deleted values. It does not
//!   change the in-memory index, so reads after it run as before. `convert()` is refused.
//!   FineStore also checkpoints by itself, in its own thread, each time its log reaches
//!   FineStoreOptions' default `checkpoint_log_bytes` (64 MiB), kept here so the engine runs as
//!   a user's store would; those checkpoints count in the phases' times, not as GCs.
//! - `space()`: the bytes of the store's files (log, checkpoint, `FINESTATE`) as `vlog_bytes`,
//!   the place of LearnedKV's value log (the files hold the values); other columns are 0. Bytes
//!   the logger thread has not written yet are not counted.
//! - `read_split()`: none (no LSM, no tier), as rocksdb.
//! - `notes()`: the ignored options and the index's heap bytes (FINEdex's own estimate; the keys
//!   and values, also in memory, are not counted). Its automatic checkpoints keep the log
//!   (in vlog_bytes) near 64 MiB in write workloads, beside the checkpoint of the live data; the
//!   note says so.
//!
//! Threads: any; FineStore takes `&self` everywhere (see `lidb_fine::store`).

use lidb_fine::{FineStore, FineStoreOptions};

use serde_json::{Value, json};

use super::{BudgetFit, Engine, EngineConfig, EngineResult, MemorySplit, Probe, ReadSplit, Space};
use crate::{format_size, human_size};

pub struct FineEngine {
    store: FineStore,
    /// Writes wait for their sync (`EngineConfig::sync`).
    sync: bool,
    dir: std::path::PathBuf,
    /// What of the configuration does not apply, as one note.
    ignored: String,
}

impl FineEngine {
    pub fn open(
        cfg: &EngineConfig,
        storage: std::sync::Arc<dyn lidb_storage::Storage>,
    ) -> EngineResult<FineEngine> {
        // The default automatic checkpoint threshold (64 MiB of log) stays unless asked for.
        let defaults = FineStoreOptions::default();
        let opts = FineStoreOptions {
            sync: cfg.sync,
            recovery_mode: cfg.recovery_mode,
            checkpoint_log_bytes: cfg
                .finedex
                .checkpoint_log_bytes
                .unwrap_or(defaults.checkpoint_log_bytes),
            ..defaults
        };
        Ok(FineEngine {
            store: FineStore::open_with_storage(storage, &cfg.dir, opts)?,
            sync: cfg.sync,
            dir: cfg.dir.clone(),
            ignored: ignored_options(cfg),
        })
    }
}

/// The note naming the options of `cfg` FineStore ignores, with their values.
fn ignored_options(cfg: &EngineConfig) -> String {
    format!(
        "an in-memory index with a log: memtable={} cache={} bloom_bits={} direct_io={} \
         lsm_index={}/{} tier_index={}/{} over_provisioning={} background_gc={} do not apply and \
         are ignored; sync={} applies; gc() is a checkpoint (a new checkpoint and an empty log; \
         the index in memory is unchanged)",
        format_size(cfg.lsm.memtable_bytes),
        format_size(cfg.lsm.block_cache_bytes),
        cfg.lsm.bloom_bits_per_key,
        cfg.direct_io,
        cfg.lsm.index.name(),
        cfg.lsm.boundary,
        cfg.tier.index.name(),
        cfg.tier.page_boundary,
        cfg.tier.over_provisioning,
        cfg.background,
        cfg.sync,
    )
}

impl Engine for FineEngine {
    fn name(&self) -> &'static str {
        "finedex"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.store.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.store.get(key))
    }
    /// `FineStore::put_many`: with `sync` one put at a time, without one append of the log
    /// buffer on this thread for the lot. An error may leave a prefix written.
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<()> {
        Ok(self.store.put_many(entries)?)
    }
    /// FineStore holds every key and value in memory; its log is only written.
    fn get_if_in_memory(&self, key: &[u8]) -> EngineResult<Option<Option<Vec<u8>>>> {
        Ok(Some(self.store.get(key)))
    }
    /// Without `sync`, a FineStore write never waits on a sync: it buffers its log record and
    /// updates its bucket in memory (a bucket's lock is only ever held for memory work; a
    /// checkpoint copies entries out before it writes them), and `FineStore::put_many` then
    /// writes the batch's records to the log file on this thread, one `write`, or leaves them
    /// to the logger thread when another thread is writing the log. With `sync` each write
    /// waits for its record's sync, so it declines. An error (a failed or closed log) may leave
    /// a prefix written.
    fn try_put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<bool> {
        if self.sync {
            return Ok(false);
        }
        self.store.put_many(entries)?;
        Ok(true)
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
        let entries = self.store.scan(start, end, limit);
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

impl Probe for FineEngine {
    fn stats(&self) -> Value {
        let st = self.store.index_stats();
        let b = self.store.bucket_stats();
        json!({
            "keys": b.keys, "buckets": b.buckets, "bucket_mean": b.mean(),
            "bucket_largest": b.largest, "layers": b.layers, "layers_deep": b.deepest,
            "layers_index_heap_bytes": b.index_heap_bytes,
            "index_top_nodes": st.top_nodes, "index_small_models": st.small_models,
            "index_load_factor": st.load_factor,
            "level_bin_retrains": st.level_bin_retrains,
            "model_retrains": st.model_retrains, "index_heap_bytes": st.heap_bytes,
        })
    }
    fn space(&self) -> Space {
        Space {
            vlog_bytes: dir_bytes(&self.dir),
            ..Space::default()
        }
    }
    /// The index's heap is FINEdex's own estimate (`FineStats::heap_bytes`, summed over the
    /// store's layers); the keys and values are counted exactly.
    fn memory(&self) -> MemorySplit {
        MemorySplit {
            index_bytes: self.store.bucket_stats().index_heap_bytes,
            data_bytes: self.store.data_bytes(),
            ..MemorySplit::default()
        }
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit::default()
    }
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        let _ = budget_bytes;
        Ok(BudgetFit::NotApplied(
            "it holds every key and value in memory; its reads never touch the device".into(),
        ))
    }
    fn recovery(&self) -> String {
        self.store.recovery_report().to_string()
    }
    fn notes(&self) -> Vec<String> {
        let buckets = self.store.bucket_stats();
        let heap = buckets.index_heap_bytes;
        vec![
            self.ignored.clone(),
            format!(
                "key layout: {buckets} (a bucket is the keys sharing one 8-byte slice at its \
                 layer; one that fills becomes a layer over the next slice)"
            ),
            format!(
                "index heap {} ({heap} bytes, FINEdex's estimate; keys and values are held in \
                 memory too, not counted); on disk {} bytes of log and checkpoint (vlog_bytes; \
                 it checkpoints by itself each time its log reaches {}, and on gc())",
                human_size(heap),
                dir_bytes(&self.dir),
                human_size(FineStoreOptions::DEFAULT_CHECKPOINT_LOG_BYTES)
            ),
        ]
    }
}

/// Bytes of the regular files directly in `dir` (FineStore makes no subdirectories); a file
/// that vanishes meanwhile (a checkpoint removing the old log) counts 0. Also the RESP face of
/// a fine-wire shard (lidb-fine-net), whose directory is a FineStore's.
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}
