//! lidb's own engines behind the benchmark trait.

use std::sync::Arc;

use lidb_index::Params;
use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_lsm::{Db, IndexOptions, Options};
use lidb_storage::Storage;

use serde_json::{Value, json};

use super::{
    BudgetFit, DeviceReads, Engine, EngineConfig, EngineResult, MemorySplit, Probe, ReadSplit,
    Space, budget, drain,
};

/// lidb-lsm's options from `cfg`, with `block_cache_bytes` as the page cache.
fn lsm_options(cfg: &EngineConfig, block_cache_bytes: u64) -> Options {
    Options {
        index: IndexOptions {
            family: cfg.lsm.index.family,
            params: Params::new(cfg.lsm.boundary),
            level_boundaries: Vec::new(),
            kind: cfg.lsm.index.kind,
        },
        sst_size_bytes: cfg.lsm.sst_size_bytes,
        recovery_mode: cfg.recovery_mode,
        write_buffer_bytes: cfg.lsm.memtable_bytes,
        block_cache_bytes,
        cache_mode: cfg.lsm.cache_mode,
        bloom_bits_per_key: cfg.lsm.bloom_bits_per_key,
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
    pub fn open(cfg: &EngineConfig, storage: Arc<dyn Storage>) -> EngineResult<LsmEngine> {
        Ok(LsmEngine {
            // Under a budget the cache starts with all of it and is fitted after the load.
            db: Db::open_with_storage(
                storage,
                &cfg.dir,
                lsm_options(
                    cfg,
                    cfg.memory_budget_bytes.unwrap_or(cfg.lsm.block_cache_bytes),
                ),
            )?,
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
        Ok(self.db.write(batch_of(entries))?)
    }
    fn try_put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<bool> {
        Ok(self.db.try_write(&batch_of(entries))?)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        // Told its limit, each table reads ahead that far (and the entry past it), not 64 KiB.
        let opts = lidb_lsm::ScanOptions {
            fill_cache: true,
            limit: Some((limit as u64).saturating_add(1)),
        };
        Ok(drain(
            &mut self.db.scan_with(start, end, opts)?,
            limit,
            each,
        )?)
    }
    fn gc(&self) -> EngineResult<()> {
        Ok(self.db.compact()?)
    }
    fn compact(&self) -> EngineResult<()> {
        Ok(self.db.compact()?)
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.db.flush()?)
    }
    fn close(self: Box<Self>) -> EngineResult<()> {
        Ok(self.db.close()?)
    }
}

impl Probe for LsmEngine {
    fn stats(&self) -> Value {
        lsm_stats(&self.db)
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
    /// Lookups' and finished scans' table reads.
    fn device_reads(&self) -> Option<DeviceReads> {
        let s = self.db.stats();
        Some(DeviceReads {
            reads: s.read.data_reads + s.scan_reads,
            bytes: Some(s.read.bytes_read + s.scan_bytes_read),
        })
    }
    fn recovery(&self) -> String {
        self.db.recovery_report().to_string()
    }
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        let plan = budget::plan(budget_bytes, self.memory().resident_bytes());
        self.db.set_block_cache_bytes(plan.cache_bytes);
        Ok(BudgetFit::Resized(plan))
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

/// The tier lidb-kv opens for `tiering` under `cfg` (the learned tier's family and bound).
pub fn tier_kind(tiering: Tiering, cfg: &EngineConfig) -> TierKind {
    match tiering {
        Tiering::Learned => TierKind::Learned {
            family: cfg.tier.index,
            page_boundary: cfg.tier.page_boundary,
            params: Params::new(cfg.tier.page_boundary),
        },
        Tiering::WriteBack => TierKind::WriteBack,
        Tiering::LsmTier => TierKind::Lsm,
    }
}

/// lidb-kv: learnedkv, lsm+ or lsm+tier.
pub struct TieredEngine {
    store: Arc<Store>,
    tiering: Tiering,
}

impl TieredEngine {
    pub fn open(
        cfg: &EngineConfig,
        tiering: Tiering,
        storage: Arc<dyn Storage>,
    ) -> EngineResult<TieredEngine> {
        let learned = tiering == Tiering::Learned;
        let tier = tier_kind(tiering, cfg);
        let opts = StoreOptions {
            // The store's LSMs (active, frozen, tier) and static tiers share one cache of this
            // size; under a budget it starts with all of it and is fitted after the load.
            lsm: Options {
                // The store's LSMs hold 20-byte value pointers: a cached page holds some 140
                // of them, while an entry costs its slot plus 160 bytes of overhead, so pages
                // keep every pointer of a store in a fraction of the memory (with entries, 200K
                // keys under a 16 MiB budget still read a table page on two gets in three).
                // `--lsm-cache` is lsm's, whose entries carry their values.
                cache_mode: lidb_lsm::CacheMode::Pages,
                ..lsm_options(
                    cfg,
                    cfg.memory_budget_bytes.unwrap_or(cfg.lsm.block_cache_bytes),
                )
            },
            tier,
            over_provisioning: cfg.tier.over_provisioning,
            auto_gc: cfg.background,
            lsm_bloom_bits_per_key: if learned {
                cfg.lsm.bloom_bits_per_key
            } else {
                0
            },
            sync: cfg.sync,
            direct_io: cfg.direct_io,
            // Conversion thresholds stay off unless asked for: the benchmarks measure
            // GC-triggered conversion.
            convert_at_lsm_bytes: if learned {
                cfg.tier.convert_at_lsm_bytes.unwrap_or(0)
            } else {
                0
            },
            convert_at_lsm_levels: if learned {
                cfg.tier.convert_at_lsm_levels
            } else {
                0
            },
            scan_gc_ratio: cfg.tier.scan_gc_ratio,
        };
        Ok(TieredEngine {
            store: Arc::new(Store::open_with_storage(storage, &cfg.dir, opts)?),
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
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> EngineResult<()> {
        Ok(self.store.put_many(entries)?)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        // The store reads the values of `limit` entries' LSM pointers together.
        let mut it = self.store.scan_limited(start, end, limit)?;
        Ok(drain(&mut it, limit, each)?)
    }
    fn gc(&self) -> EngineResult<()> {
        Ok(self.store.gc()?)
    }
    fn compact(&self) -> EngineResult<()> {
        Ok(self.store.compact()?)
    }
    /// Conversion builds a learned tier: lsm+ and lsm+tier have none, and say so as the other
    /// engines do (not as an invalid option of the store).
    fn convert(&self) -> EngineResult<()> {
        if self.tiering != Tiering::Learned {
            return Err(crate::EngineError::Unsupported(format!(
                "engine {} has no conversion (learnedkv has)",
                self.name()
            )));
        }
        Ok(self.store.convert()?)
    }
    fn flush(&self) -> EngineResult<()> {
        Ok(self.store.flush()?)
    }
    fn close(self: Box<Self>) -> EngineResult<()> {
        match Arc::try_unwrap(self.store) {
            Ok(store) => Ok(store.close()?),
            // Another holder (none today) keeps it open: flush what it holds.
            Err(store) => Ok(store.flush()?),
        }
    }
}

impl Probe for TieredEngine {
    fn recovery(&self) -> String {
        self.store.recovery_report().to_string()
    }
    fn stats(&self) -> Value {
        let st = self.store.stats();
        let sp = self.store.space();
        json!({
            "reads_from_lsm": st.reads_from_lsm, "reads_from_tier": st.reads_from_tier,
            "reads_missed": st.reads_missed, "lsm_skipped": st.lsm_skipped, "gcs": st.gcs,
            "scan_gcs": st.scan_gcs, "conversions": st.conversions,
            "live_bytes_estimate": st.live_bytes_estimate,
            "lsm_bytes": sp.lsm_bytes, "key_list_bytes": sp.key_list_bytes,
            "model_bytes": sp.model_bytes, "vlog_bytes": sp.vlog_bytes,
        })
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
    /// Value-log records (a scan's span of nearby records is one read), table reads of every
    /// LSM and the tier's key-list and svlog reads (`Store::device_reads`).
    fn device_reads(&self) -> Option<DeviceReads> {
        let r = self.store.device_reads();
        Some(DeviceReads {
            reads: r.reads,
            bytes: Some(r.bytes),
        })
    }
    fn read_split(&self) -> ReadSplit {
        let s = self.store.stats();
        ReadSplit {
            from_lsm: s.reads_from_lsm,
            from_tier: s.reads_from_tier,
            gcs: s.gcs,
        }
    }
    /// Resident = every part's table indexes and filters, the tier's model, the in-memory key
    /// filters and the every-key Bloom, measured now (`Store::memory`); the store's one cache,
    /// which every part GC makes later shares, gets the rest.
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        let plan = budget::plan(budget_bytes, self.memory().resident_bytes());
        // The store keeps the budget and refits its cache at each GC's switch and install.
        self.store.hold_memory_budget(budget_bytes);
        Ok(BudgetFit::Resized(plan))
    }
}

/// The LSM's levels, memory, lookups and compactions (`lidb kv`'s `stats` for lsm).
fn lsm_stats(db: &Db) -> Value {
    let s = db.stats();
    let levels: Vec<_> = s
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| {
            json!({"level": l.level, "files": l.files, "bytes": l.bytes, "entries": l.entries,
                   "index_bytes": l.index_bytes})
        })
        .collect();
    json!({
        "levels": levels,
        "memory": {"index_bytes": s.memory.index_bytes, "filter_bytes": s.memory.filter_bytes,
                   "cache_bytes": s.memory.cache_bytes, "memtable_bytes": s.memory.memtable_bytes},
        "lookups": s.lookups,
        "tables_probed": s.read.tables_probed,
        "filter_negatives": s.read.filter_negatives,
        "data_reads": s.read.data_reads,
        "bytes_read": s.read.bytes_read,
        "flushes": s.compaction.flushes,
        "compactions": s.compaction.compactions,
        "last_sequence": s.last_sequence,
    })
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

/// One lidb-lsm batch of every `(key, value)`, in order.
fn batch_of(entries: &[(&[u8], &[u8])]) -> lidb_lsm::batch::WriteBatch {
    let mut batch = lidb_lsm::batch::WriteBatch::new();
    for (key, value) in entries {
        batch.put(key, value);
    }
    batch
}

#[cfg(test)]
mod tests {
    use lidb_testkit::Scratch;

    use super::*;

    #[test]
    fn convert_on_an_engine_without_a_learned_tier_is_unsupported()
    -> Result<(), Box<dyn std::error::Error>> {
        for (tiering, name) in [(Tiering::WriteBack, "lsm+"), (Tiering::LsmTier, "lsm+tier")] {
            let scratch = Scratch::new(&format!("engines-convert-{}", name.replace('+', "-plus")));
            let cfg = EngineConfig::new(scratch.join("db"));
            let e = TieredEngine::open(&cfg, tiering, Arc::new(lidb_storage::fs::FsStorage))?;
            e.put(b"k", b"v")?;
            let err = e.convert().err();
            assert!(
                matches!(&err, Some(crate::EngineError::Unsupported(m)) if m.contains(&format!("{name} has no conversion"))),
                "{name}: {err:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn lsm_fitted_to_a_budget_gives_its_cache_what_the_indexes_leave()
    -> Result<(), Box<dyn std::error::Error>> {
        let scratch = Scratch::new("engines-budget");
        let budget = 2 << 20;
        let mut cfg = EngineConfig::new(scratch.join("db"));
        cfg.memory_budget_bytes = Some(budget);
        cfg.lsm.memtable_bytes = 1 << 20;
        cfg.background = false;
        let e = LsmEngine::open(&cfg, Arc::new(lidb_storage::fs::FsStorage))?;
        assert_eq!(
            e.db.block_cache_capacity_bytes(),
            budget,
            "opens with all of it"
        );
        let value = vec![3u8; 1000];
        for i in 0..20_000u64 {
            e.put(&i.to_be_bytes(), &value)?;
        }
        e.flush()?;
        // Fill the cache with reads before fitting, so the fit has to evict.
        for i in 0..20_000u64 {
            assert_eq!(e.get(&i.to_be_bytes())?.as_deref(), Some(&value[..]));
        }
        let resident = e.memory().resident_bytes();
        assert!(resident > 0, "tables have indexes and filters");
        let BudgetFit::Resized(plan) = e.fit_memory_budget(budget)? else {
            panic!("lsm resizes its cache");
        };
        assert_eq!(plan.resident_bytes, resident);
        assert_eq!(plan.cache_bytes, budget - resident);
        assert_eq!(e.db.block_cache_capacity_bytes(), budget - resident);
        let m = e.memory();
        assert!(
            m.budgeted_bytes() <= budget,
            "index+filter+cache within budget: {m:?}"
        );
        // Reads still answer, and the cache never grows past its share.
        for i in (0..20_000u64).step_by(3) {
            assert_eq!(e.get(&i.to_be_bytes())?.as_deref(), Some(&value[..]));
        }
        assert!(e.memory().budgeted_bytes() <= budget);
        let reads = e.device_reads().ok_or("lsm counts its reads")?;
        assert!(reads.reads > 0 && reads.bytes.is_some_and(|b| b >= reads.reads));
        // A budget below the indexes is reported, the cache left empty.
        let BudgetFit::Resized(over) = e.fit_memory_budget(resident / 2)? else {
            panic!("lsm resizes its cache");
        };
        assert!(!over.fits());
        assert_eq!(over.over_bytes, resident - resident / 2);
        assert_eq!(e.memory().cache_bytes, 0);
        Ok(())
    }

    /// learnedkv, lsm+ and lsm+tier under one budget: the fit gives the store's one cache what
    /// the measured resident part leaves, GC's new parts share that cache (its capacity holds),
    /// and a budget below the resident part is reported with its excess.
    #[test]
    fn tiered_engines_fitted_to_a_budget_hold_it_across_gc()
    -> Result<(), Box<dyn std::error::Error>> {
        for tiering in [Tiering::Learned, Tiering::WriteBack, Tiering::LsmTier] {
            let scratch = Scratch::new(&format!("engines-budget-{tiering:?}"));
            let budget = 6 << 20;
            let mut cfg = EngineConfig::new(scratch.join("db"));
            cfg.memory_budget_bytes = Some(budget);
            cfg.lsm.memtable_bytes = 256 << 10;
            cfg.background = false;
            let e = TieredEngine::open(&cfg, tiering, Arc::new(lidb_storage::fs::FsStorage))?;
            let name = e.name();
            assert_eq!(
                e.store.cache_capacity_bytes(),
                budget,
                "{name}: opens with all of it"
            );
            let value = |i: u64, round: u64| vec![(i + round) as u8; 400];
            for i in 0..8_000u64 {
                e.put(&i.to_be_bytes(), &value(i, 0))?;
            }
            e.flush()?;
            e.gc()?;
            for i in (0..8_000u64).step_by(2) {
                e.put(&i.to_be_bytes(), &value(i, 1))?;
            }
            e.flush()?;
            let round = |i: u64| u64::from(i.is_multiple_of(2));
            // Fill the cache before fitting, so the fit has to evict.
            for i in 0..8_000u64 {
                assert_eq!(e.get(&i.to_be_bytes())?, Some(value(i, round(i))), "{name}");
            }
            let resident = e.memory().resident_bytes();
            assert!(resident > 0, "{name}: indexes and filters are measured");
            let BudgetFit::Resized(plan) = e.fit_memory_budget(budget)? else {
                panic!("{name} resizes its cache");
            };
            assert!(plan.fits(), "{name}: {plan:?}");
            assert_eq!(plan.resident_bytes, resident);
            assert_eq!(plan.cache_bytes + plan.resident_bytes, budget);
            assert_eq!(e.store.cache_capacity_bytes(), plan.cache_bytes);
            let m = e.memory();
            assert!(m.budgeted_bytes() <= budget, "{name}: within budget: {m:?}");
            // A GC makes new parts (LSM, tier): they share the one cache, which the store refits
            // to what the new resident part leaves of the budget it holds.
            e.gc()?;
            for i in (0..8_000u64).step_by(3) {
                assert_eq!(e.get(&i.to_be_bytes())?, Some(value(i, round(i))), "{name}");
            }
            let resident = e.memory().resident_bytes();
            assert_eq!(
                e.store.cache_capacity_bytes(),
                budget - resident,
                "{name}: refitted by the GC"
            );
            assert!(e.memory().budgeted_bytes() <= budget, "{name}");
            // Refitted after the GC (as the benchmark does before each phase), still within.
            let BudgetFit::Resized(after) = e.fit_memory_budget(budget)? else {
                panic!("{name} resizes its cache");
            };
            assert!(after.fits());
            assert!(e.memory().budgeted_bytes() <= budget, "{name}");
            // A budget below the resident part: the cache gets nothing, the excess is reported.
            let resident = e.memory().resident_bytes();
            let BudgetFit::Resized(over) = e.fit_memory_budget(resident / 2)? else {
                panic!("{name} resizes its cache");
            };
            assert!(!over.fits(), "{name}");
            assert_eq!(over.over_bytes, resident - resident / 2);
            assert_eq!(e.memory().cache_bytes, 0, "{name}");
            assert_eq!(e.get(&1u64.to_be_bytes())?, Some(value(1, 0)), "{name}");
        }
        Ok(())
    }
}
