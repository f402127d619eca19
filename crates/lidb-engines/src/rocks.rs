//! Real RocksDB through the `rocksdb` crate, configured as the LearnedKV paper did and as lidb's
//! engines are: 10-bit Bloom filters, the same memtable size and block cache budget, direct I/O
//! when ours use it, values inline. Two builds compile this file: the workspace's (feature
//! `rocksdb`: crate 0.20.1 over Debian's librocksdb 7.8.3, linked in seconds, for the tests) and
//! `rocksdb-current/`'s (feature `rocksdb-current`: crate 0.25 over RocksDB 11.8.1 built from its
//! sources, the benchmark anchor), which adds the tuning only the current RocksDB has (below).
//!
//! Under a memory budget (`EngineConfig::memory_budget_bytes`) it runs RocksDB's documented
//! setting for bounded memory: the budget is the block cache, index and filter blocks are cached
//! in it (`cache_index_and_filter_blocks`) with L0's pinned (`pin_l0_filter_and_index_blocks_in_cache`),
//! so everything it reads with lives in one bounded cache. The index and filters are partitioned
//! (`kTwoLevelIndexSearch`, `partition_filters`, 4 KiB partitions, the top level pinned), as the
//! RocksDB wiki's "Partitioned Index/Filters" page recommends when they live in a cache too small
//! for all of them: without it a miss re-reads a table's whole index or filter block (32 to
//! 43 KB per device read at 2M records and 16 MiB, docs/bench-log/08-device-limit.md). Statistics are on in every run:
//! device reads per operation come from its file-read tickers.
//!
//! The current RocksDB adds what its tuning guide recommends for these workloads:
//! - `optimize_filters_for_hits`: no Bloom filters in the last level, which holds about 90% of
//!   the data; YCSB reads keys that exist, so those filters would only cost cache space.
//! - the HyperClockCache (`new_hyper_clock_cache` with an automatic entry charge) in place of the
//!   LRU cache: the block cache the RocksDB wiki recommends since 8.x, lock-free on hits.
//! - scans with an upper bound get it as `iterate_upper_bound` (both builds), which turns on
//!   `auto_readahead_size` (default on in the current RocksDB): readahead trimmed to the range.
//!
//! A row cache (`row_cache`, whole entries, LRU) takes `rocksdb_row_cache_share` of the same
//! budget when asked (`lidb bench ycsb --rocksdb-row-cache`), RocksDB's counterpart of lsm's
//! entries cache for point reads; its usage is counted in `cache_bytes`.
//!
//! Compression is off in both builds (the bundled build has no compression libraries; Debian's
//! is set to none): lidb's engines do not compress, and YCSB's values are random bytes.

use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DB, DBCompressionType, IteratorMode, Options,
    ReadOptions, WriteOptions,
};

use super::{
    BudgetFit, DeviceReads, Engine, EngineConfig, EngineError, EngineResult, MemorySplit, Probe,
    ReadSplit, Space,
};

fn err(e: rocksdb::Error) -> EngineError {
    EngineError::Other(format!("rocksdb: {e}"))
}

pub struct RocksEngine {
    db: DB,
    write: WriteOptions,
    /// Holds the statistics object the database records into.
    opts: Options,
    /// The budget given at open, if any.
    budget_bytes: Option<u64>,
    /// The database directory (its OPTIONS files name RocksDB's version).
    dir: std::path::PathBuf,
    /// Keeps the shared cache alive as long as the database.
    _cache: Cache,
    /// The row cache, where the configuration gives it a share.
    row_cache: Option<Cache>,
}

impl RocksEngine {
    pub fn open(cfg: &EngineConfig) -> EngineResult<RocksEngine> {
        let total_bytes = cfg.memory_budget_bytes.unwrap_or(cfg.lsm.block_cache_bytes);
        let share = cfg.lsm.rocksdb_row_cache_share;
        if !(0.0..=0.9).contains(&share) {
            return Err(EngineError::InvalidOption(format!(
                "rocksdb row cache share {share}: give 0 to 0.9 of the cache"
            )));
        }
        let row_bytes = (total_bytes as f64 * share) as usize;
        let cache_bytes = total_bytes as usize - row_bytes;
        #[cfg(not(feature = "rocksdb-current"))]
        let cache = Cache::new_lru_cache(cache_bytes).map_err(err)?;
        // 0: the entry charge is estimated as the cache fills (RocksDB's AutoHyperClockCache).
        #[cfg(feature = "rocksdb-current")]
        let cache = Cache::new_hyper_clock_cache(cache_bytes, 0);
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(f64::from(cfg.lsm.bloom_bits_per_key), false);
        table.set_block_cache(&cache);
        if cfg.memory_budget_bytes.is_some() {
            table.set_cache_index_and_filter_blocks(true);
            table.set_pin_l0_filter_and_index_blocks_in_cache(true);
            table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
            table.set_partition_filters(true);
            table.set_metadata_block_size(4096);
            table.set_pin_top_level_index_and_filter(true);
        }
        let mut opts = Options::default();
        opts.enable_statistics();
        opts.set_compression_type(DBCompressionType::None);
        #[cfg(feature = "rocksdb-current")]
        opts.set_optimize_filters_for_hits(true);
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        // The row cache holds whole entries, so it is an LRU cache in both builds (the
        // HyperClockCache takes only the block cache's fixed-size keys).
        #[cfg(not(feature = "rocksdb-current"))]
        let row_cache = (row_bytes > 0)
            .then(|| Cache::new_lru_cache(row_bytes))
            .transpose()
            .map_err(err)?;
        #[cfg(feature = "rocksdb-current")]
        let row_cache = (row_bytes > 0).then(|| Cache::new_lru_cache(row_bytes));
        if let Some(rc) = &row_cache {
            opts.set_row_cache(rc);
        }
        opts.set_write_buffer_size(cfg.lsm.memtable_bytes as usize);
        opts.set_use_direct_reads(cfg.direct_io);
        opts.set_use_direct_io_for_flush_and_compaction(cfg.direct_io);
        let db = DB::open(&opts, &cfg.dir).map_err(err)?;
        let mut write = WriteOptions::default();
        write.set_sync(cfg.sync);
        Ok(RocksEngine {
            db,
            write,
            opts,
            budget_bytes: cfg.memory_budget_bytes,
            dir: cfg.dir.clone(),
            _cache: cache,
            row_cache,
        })
    }
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        "rocksdb"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db.put_opt(key, value, &self.write).map_err(err)
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.db.get_pinned(key).map_err(err)?.map(|v| v.to_vec()))
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.db.delete_opt(key, &self.write).map_err(err)
    }
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EngineResult<usize> {
        let mut n = 0;
        let mode = IteratorMode::From(start, rocksdb::Direction::Forward);
        let mut read = ReadOptions::default();
        if let Some(end) = end {
            read.set_iterate_upper_bound(end);
        }
        for item in self.db.iterator_opt(mode, read) {
            let (k, v) = item.map_err(err)?;
            if n >= limit || end.is_some_and(|e| k.as_ref() >= e) {
                break;
            }
            each(&k, &v);
            n += 1;
        }
        Ok(n)
    }
    fn gc(&self) -> EngineResult<()> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }
    fn compact(&self) -> EngineResult<()> {
        self.gc()
    }
    fn flush(&self) -> EngineResult<()> {
        self.db.flush().map_err(err)
    }
}

impl Probe for RocksEngine {
    fn space(&self) -> Space {
        let sst = self
            .db
            .property_int_value("rocksdb.total-sst-files-size")
            .ok()
            .flatten();
        Space {
            lsm_bytes: sst.unwrap_or(0),
            ..Space::default()
        }
    }
    /// RocksDB's own properties: table readers' memory (indexes and filters held outside the
    /// cache, not split by RocksDB; near 0 under a budget, where they are cached), the block
    /// cache's usage (under a budget: index and filter blocks included) and the memtables.
    fn memory(&self) -> MemorySplit {
        let prop = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        MemorySplit {
            index_bytes: prop("rocksdb.estimate-table-readers-mem"),
            cache_bytes: prop("rocksdb.block-cache-usage")
                + self.row_cache.as_ref().map_or(0, |c| c.get_usage() as u64),
            memtable_bytes: prop("rocksdb.cur-size-all-mem-tables"),
            ..MemorySplit::default()
        }
    }
    /// Reads of table files, from the statistics' last-level and non-last-level read tickers
    /// (every read RocksDB's file reader issues: gets, iterators and compactions).
    fn device_reads(&self) -> Option<DeviceReads> {
        let text = self.opts.get_statistics()?;
        let tick = |name: &str| ticker(&text, name);
        Some(DeviceReads {
            reads: tick("rocksdb.last.level.read.count")?
                + tick("rocksdb.non.last.level.read.count")?,
            bytes: Some(
                tick("rocksdb.last.level.read.bytes")? + tick("rocksdb.non.last.level.read.bytes")?,
            ),
        })
    }
    fn fit_memory_budget(&self, budget_bytes: u64) -> EngineResult<BudgetFit> {
        Ok(match self.budget_bytes {
            Some(b) if b == budget_bytes => BudgetFit::AtOpen { budget_bytes },
            _ => BudgetFit::NotApplied(format!(
                "opened with a {} block cache, not this budget",
                crate::human_size(self.budget_bytes.unwrap_or(0))
            )),
        })
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit::default()
    }
    /// `rocksdb_version` of the newest OPTIONS file RocksDB wrote at open.
    fn version(&self) -> Option<String> {
        let newest = std::fs::read_dir(&self.dir)
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let number: u64 = name.strip_prefix("OPTIONS-")?.parse().ok()?;
                Some((number, e.path()))
            })
            .max()?;
        options_version(&std::fs::read_to_string(newest.1).ok()?)
    }
}

/// The `rocksdb_version=X.Y.Z` of an OPTIONS file's text.
fn options_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("rocksdb_version="))
        .map(|v| v.trim().to_string())
}

/// The count of ticker `name` in RocksDB's statistics text ("NAME COUNT : N" lines).
fn ticker(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(name)?.trim_start();
        rest.strip_prefix("COUNT :")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_options_file_text() {
        let text = "[Version]\n  rocksdb_version=11.8.1\n  options_file_version=1.1\n";
        assert_eq!(options_version(text).as_deref(), Some("11.8.1"));
        assert_eq!(options_version("[DBOptions]\n"), None);
    }

    #[test]
    fn ticker_reads_the_named_count_and_not_a_longer_name() {
        let text = "rocksdb.block.cache.miss COUNT : 7\n\
                    rocksdb.non.last.level.read.count COUNT : 12\n\
                    rocksdb.last.level.read.count COUNT : 30\n\
                    rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 COUNT : 99 SUM : 5\n";
        assert_eq!(ticker(text, "rocksdb.last.level.read.count"), Some(30));
        assert_eq!(ticker(text, "rocksdb.non.last.level.read.count"), Some(12));
        assert_eq!(ticker(text, "rocksdb.db.get.micros"), None);
        assert_eq!(ticker(text, "rocksdb.missing"), None);
    }

    #[test]
    fn under_a_budget_reads_are_counted_and_memory_stays_in_the_cache()
    -> Result<(), Box<dyn std::error::Error>> {
        let scratch = lidb_testkit::Scratch::new("rocks-budget");
        let mut cfg = EngineConfig::new(scratch.join("db"));
        cfg.memory_budget_bytes = Some(1 << 20);
        cfg.lsm.memtable_bytes = 1 << 20;
        let e = RocksEngine::open(&cfg)?;
        let value = vec![7u8; 1000];
        for i in 0..5000u64 {
            e.put(&i.to_be_bytes(), &value)?;
        }
        e.flush()?;
        let before = e.device_reads().ok_or("statistics are on")?.reads;
        for i in (0..5000u64).step_by(7) {
            assert_eq!(e.get(&i.to_be_bytes())?.as_deref(), Some(&value[..]));
        }
        let after = e.device_reads().ok_or("statistics are on")?;
        assert!(
            after.reads > before,
            "gets of flushed keys read table files"
        );
        assert!(after.bytes.is_some_and(|b| b > 0));
        let m = e.memory();
        assert!(
            m.cache_bytes <= 1 << 20,
            "the block cache is the budget: {m:?}"
        );
        assert_eq!(
            e.fit_memory_budget(1 << 20)?,
            BudgetFit::AtOpen {
                budget_bytes: 1 << 20
            }
        );
        Ok(())
    }
}
