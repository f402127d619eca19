//! lidb's own engines behind the benchmark trait.

use std::sync::Arc;

use lidb_index::Params;
use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_lsm::{Db, IndexOptions, Options};

use super::{Engine, EngineConfig, EngineResult, MemorySplit, ReadSplit, Space, drain};

fn lsm_options(cfg: &EngineConfig) -> Options {
    Options {
        index: IndexOptions {
            family: cfg.lsm_index,
            params: Params::new(cfg.lsm_boundary),
            level_boundaries: Vec::new(),
            kind: lidb_lsm::IndexKind::Clustered,
        },
        write_buffer_bytes: cfg.memtable_bytes,
        block_cache_bytes: cfg.block_cache_bytes,
        bloom_bits_per_key: cfg.bloom_bits_per_key,
        direct_io: cfg.direct_io,
        sync: cfg.sync,
        background_compaction: cfg.background,
        ..Options::default()
    }
}

/// lidb-lsm with values inline.
pub struct LsmEngine {
    db: Db,
}

impl LsmEngine {
    pub fn open(cfg: &EngineConfig) -> EngineResult<LsmEngine> {
        Ok(LsmEngine {
            db: Db::open(&cfg.dir, lsm_options(cfg))?,
        })
    }
}

impl Engine for LsmEngine {
    fn name(&self) -> &'static str {
        "lsm"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }
    fn get_if_in_memory(&self, key: &[u8]) -> EngineResult<Option<Option<Vec<u8>>>> {
        Ok(self.db.get_if_in_memory(key)?)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        Ok(self.db.delete(key)?)
    }
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<()> {
        let mut batch = lidb_lsm::batch::WriteBatch::new();
        for (key, value) in entries {
            batch.put(key, value);
        }
        Ok(self.db.write(batch)?)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        Ok(drain(&mut self.db.scan(start, end)?, limit, each)?)
    }
    fn gc(&self) -> EngineResult<()> {
        Ok(self.db.compact()?)
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.db.flush()?)
    }
    fn space(&self) -> Space {
        let s = self.db.stats();
        Space {
            lsm_bytes: s.levels.iter().map(|l| l.bytes).sum(),
            ..Space::default()
        }
    }
    fn memory(&self) -> MemorySplit {
        split_of(self.db.stats().memory)
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit {
            from_lsm: self.db.stats().lookups,
            from_tier: 0,
            gcs: 0,
        }
    }
}

/// Which lidb-kv engine a [`TieredEngine`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tiering {
    /// `learnedkv`: the learned tier.
    Learned,
    /// `lsm+` (the paper's RocksDB+): no tier, GC writes pointers back into the one LSM.
    WriteBack,
    /// `lsm+tier`: the tier is an LSM over the sorted value log.
    LsmTier,
}

/// lidb-kv: learnedkv, lsm+ or lsm+tier.
pub struct TieredEngine {
    store: Arc<Store>,
    tiering: Tiering,
}

impl TieredEngine {
    pub fn open(cfg: &EngineConfig, tiering: Tiering) -> EngineResult<TieredEngine> {
        let learned = tiering == Tiering::Learned;
        let tier = match tiering {
            Tiering::Learned => TierKind::Learned {
                family: cfg.tier_index,
                page_boundary: cfg.tier_page_boundary,
                params: Params::new(cfg.tier_page_boundary),
            },
            Tiering::WriteBack => TierKind::WriteBack,
            Tiering::LsmTier => TierKind::Lsm,
        };
        let opts = StoreOptions {
            lsm: lsm_options(cfg),
            tier,
            over_provisioning: cfg.over_provisioning,
            auto_gc: cfg.background,
            lsm_bloom_bits_per_key: if learned { cfg.bloom_bits_per_key } else { 0 },
            sync: cfg.sync,
            direct_io: cfg.direct_io,
            // Conversion thresholds stay off: the benchmarks measure GC-triggered conversion.
            ..StoreOptions::default()
        };
        Ok(TieredEngine {
            store: Arc::new(Store::open(&cfg.dir, opts)?),
            tiering,
        })
    }
}

impl Engine for TieredEngine {
    fn name(&self) -> &'static str {
        match self.tiering {
            Tiering::Learned => "learnedkv",
            Tiering::WriteBack => "lsm+",
            Tiering::LsmTier => "lsm+tier",
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.store.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.store.get(key)?)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        Ok(self.store.delete(key)?)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        Ok(drain(&mut self.store.scan(start, end)?, limit, each)?)
    }
    fn gc(&self) -> EngineResult<()> {
        Ok(self.store.gc()?)
    }
    fn convert(&self) -> EngineResult<()> {
        Ok(self.store.convert()?)
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.store.flush()?)
    }
    fn space(&self) -> Space {
        let s = self.store.space();
        Space {
            lsm_bytes: s.lsm_bytes,
            key_list_bytes: s.key_list_bytes,
            model_bytes: s.model_bytes,
            vlog_bytes: s.vlog_bytes,
        }
    }
    fn memory(&self) -> MemorySplit {
        split_of(self.store.memory())
    }
    fn read_split(&self) -> ReadSplit {
        let s = self.store.stats();
        ReadSplit {
            from_lsm: s.reads_from_lsm,
            from_tier: s.reads_from_tier,
            gcs: s.gcs,
        }
    }
}

fn split_of(m: lidb_lsm::MemoryUsage) -> MemorySplit {
    MemorySplit {
        index_bytes: m.index_bytes,
        filter_bytes: m.filter_bytes,
        cache_bytes: m.cache_bytes,
        memtable_bytes: m.memtable_bytes,
        data_bytes: 0,
    }
}
