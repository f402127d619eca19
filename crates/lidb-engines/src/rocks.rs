//! Real RocksDB (Debian's librocksdb 7.8.3 through the `rocksdb` crate), configured as the
//! LearnedKV paper did and as lidb's engines are: 10-bit Bloom filters, the same memtable size and
//! block cache budget, direct I/O when ours use it, values inline.

use rocksdb::{BlockBasedOptions, Cache, DB, IteratorMode, Options, WriteOptions};

use super::{Engine, EngineConfig, EngineError, EngineResult, MemorySplit, ReadSplit, Space};

fn err(e: rocksdb::Error) -> EngineError {
    EngineError(format!("rocksdb: {e}"))
}

pub struct RocksEngine {
    db: DB,
    write: WriteOptions,
    /// Keeps the shared cache alive as long as the database.
    _cache: Cache,
}

impl RocksEngine {
    pub fn open(cfg: &EngineConfig) -> EngineResult<RocksEngine> {
        let cache = Cache::new_lru_cache(cfg.block_cache_bytes as usize).map_err(err)?;
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(f64::from(cfg.bloom_bits_per_key), false);
        table.set_block_cache(&cache);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(cfg.memtable_bytes as usize);
        opts.set_use_direct_reads(cfg.direct_io);
        opts.set_use_direct_io_for_flush_and_compaction(cfg.direct_io);
        let db = DB::open(&opts, &cfg.dir).map_err(err)?;
        let mut write = WriteOptions::default();
        write.set_sync(cfg.sync);
        Ok(RocksEngine {
            db,
            write,
            _cache: cache,
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
        for item in self.db.iterator(mode) {
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
    fn flush(&self) -> EngineResult<()> {
        self.db.flush().map_err(err)
    }
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
    /// RocksDB's own properties: table readers' memory (indexes and filters, not split by
    /// RocksDB), the block cache's usage and the memtables.
    fn memory(&self) -> MemorySplit {
        let prop = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        MemorySplit {
            index_bytes: prop("rocksdb.estimate-table-readers-mem"),
            cache_bytes: prop("rocksdb.block-cache-usage"),
            memtable_bytes: prop("rocksdb.cur-size-all-mem-tables"),
            ..MemorySplit::default()
        }
    }
    fn read_split(&self) -> ReadSplit {
        ReadSplit::default()
    }
}
