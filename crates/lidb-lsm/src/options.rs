//! Options of a database. Defaults follow the papers' LevelDB setup: leveling with size ratio 10,
//! 10-bit Bloom filters, an 8 MiB block cache, 64 MiB SSTables and write buffer.

use lidb_index::{Family, Params};

use crate::hooks::{FlushHook, ReplayFilter};
pub use lidb_storage::cache::CacheMode;
use lidb_storage::cache::SharedCache;
use lidb_storage::error::{Error, Result};
use lidb_storage::tail::RecoveryMode;

/// Whether learned models cover one table each, or a whole level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Granularity {
    /// One index per SSTable (the default; works with partial compactions).
    #[default]
    Table,
    /// One index per level (Bourbon's level model). Valid only with whole-level merges, which
    /// this option turns on: every compaction into a level rewrites the whole level.
    Level,
}

/// How a table's index finds a key's slot: the two classes of the LSM study's Figure 5, plus
/// the clustered families' "mapped keys retained" variant (its Figure 7 (C), (F), (I)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexKind {
    /// Data-clustered: the `family` model gives a range `[lo, hi)` of at most B slots, read
    /// once, then a last-mile binary search over the full keys.
    #[default]
    Clustered,
    /// Data-clustered with every slot's key image kept in memory beside the model: the model's
    /// range is searched in memory and only the slot holding the key is read.
    MappedKeys,
    /// Data-unclustered: an updatable index holding every key (image) with its exact slot; no
    /// model of `family` is built and no last-mile search is done.
    Unclustered(Unclustered),
}

/// The data-unclustered indexes of lidb-updatable an SSTable can be indexed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unclustered {
    /// ALEX over the u64 key images.
    Alex,
    /// LIPP over the u64 key images.
    Lipp,
    /// DILI over the u64 key images.
    Dili,
    /// LITS over the full byte keys (variable length, natively).
    Lits,
}

impl Unclustered {
    pub const ALL: [Unclustered; 4] = [
        Unclustered::Alex,
        Unclustered::Lipp,
        Unclustered::Dili,
        Unclustered::Lits,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Unclustered::Alex => "alex",
            Unclustered::Lipp => "lipp",
            Unclustered::Dili => "dili",
            Unclustered::Lits => "lits",
        }
    }

    pub fn from_name(name: &str) -> Option<Unclustered> {
        Unclustered::ALL.into_iter().find(|u| u.name() == name)
    }
}

impl IndexKind {
    /// The on-disk tag of the kind (meta block, format version 2).
    pub fn tag(self) -> u8 {
        match self {
            IndexKind::Clustered => 0,
            IndexKind::MappedKeys => 1,
            IndexKind::Unclustered(Unclustered::Alex) => 2,
            IndexKind::Unclustered(Unclustered::Lipp) => 3,
            IndexKind::Unclustered(Unclustered::Dili) => 4,
            IndexKind::Unclustered(Unclustered::Lits) => 5,
        }
    }

    pub fn from_tag(tag: u8) -> Option<IndexKind> {
        Some(match tag {
            0 => IndexKind::Clustered,
            1 => IndexKind::MappedKeys,
            2 => IndexKind::Unclustered(Unclustered::Alex),
            3 => IndexKind::Unclustered(Unclustered::Lipp),
            4 => IndexKind::Unclustered(Unclustered::Dili),
            5 => IndexKind::Unclustered(Unclustered::Lits),
            _ => return None,
        })
    }

    /// Whether a table of this kind carries a mapped-keys block.
    pub fn has_keys_block(self) -> bool {
        self != IndexKind::Clustered
    }
}

/// The learned index of SSTables.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexOptions {
    /// The clustered family (used by `Clustered` and `MappedKeys`; ignored by unclustered kinds).
    pub family: Family,
    /// Parameters of the family; `params.boundary` is the position boundary B in entries.
    pub params: Params,
    /// Per-level boundary overrides: `level_boundaries[L]`, where present, replaces B at level L.
    pub level_boundaries: Vec<Option<u64>>,
    /// Clustered (default), clustered with mapped keys retained, or an unclustered index.
    pub kind: IndexKind,
}

impl IndexOptions {
    /// The boundary at `level`.
    pub fn boundary_at(&self, level: usize) -> u64 {
        self.level_boundaries
            .get(level)
            .copied()
            .flatten()
            .unwrap_or(self.params.boundary)
    }

    /// Parameters with the boundary of `level`.
    pub fn params_at(&self, level: usize) -> Params {
        Params {
            boundary: self.boundary_at(level),
            ..self.params.clone()
        }
    }
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            family: Family::Pgm,
            params: Params::new(16),
            level_boundaries: Vec::new(),
            kind: IndexKind::Clustered,
        }
    }
}

/// Options of [`crate::Db::open`].
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub index: IndexOptions,
    /// The most bytes a point lookup's window may span in a table with a per-table index: a
    /// table whose slots are wide gets a smaller boundary than `index`'s B, halved (down to 2)
    /// until B slots fit; the table records the boundary it got. 0 keeps B for every table.
    /// Default 8 KiB, two pages: with B = 16 a table of 1 KiB entries read 21 KB a miss
    /// (five pages) where RocksDB reads one 4 KiB block; with B = 4 it reads 8 KB, and YCSB C
    /// at a 64 MiB budget ran 1.2x faster (docs/bench-log/12-rocksdb-current.md). Entries of
    /// 512 bytes or less keep B = 16. A level model (`Granularity::Level`) keeps B.
    pub max_window_bytes: u64,
    pub granularity: Granularity,
    /// Target SSTable size in bytes (4 MiB to 128 MiB).
    pub sst_size_bytes: u64,
    /// Memtable size that triggers a flush.
    pub write_buffer_bytes: u64,
    /// Size ratio between consecutive levels.
    pub size_ratio: u64,
    /// L0 files that trigger a compaction into L1.
    pub l0_compaction_trigger: usize,
    /// L0 files at which writes stall until compaction catches up.
    pub l0_stop_writes: usize,
    /// Bloom filter bits per key (0 disables filters).
    pub bloom_bits_per_key: u32,
    /// Page cache for table reads, in bytes (ignored with `shared_cache`).
    pub block_cache_bytes: u64,
    /// A page cache pool shared with other databases (a tiered store's LSMs): the database takes
    /// a namespace of its own in it instead of making a cache of `block_cache_bytes`. Its pages
    /// leave the pool when the database is dropped.
    pub shared_cache: Option<SharedCache>,
    /// What point lookups keep in that cache: pages, entries (the default), or both.
    pub cache_mode: CacheMode,
    /// O_DIRECT for table reads.
    pub direct_io: bool,
    /// Sync the write-ahead log on every write.
    pub sync: bool,
    /// Create the database if the directory has none.
    pub create_if_missing: bool,
    /// Run compactions in a background thread (tests may turn it off and call `compact`).
    pub background_compaction: bool,
    /// Called before each memtable (flushed or replayed at open) is written to a table; an error
    /// fails the flush and keeps the memtable (see `hooks`).
    pub before_flush: Option<FlushHook>,
    /// Consulted for each entry replayed from a WAL at open; replay stops at the first batch
    /// holding a rejected entry (see `hooks`).
    pub replay_filter: Option<ReplayFilter>,
    /// What open does with a bad record in a WAL or the manifest: cut a torn tail and fail on
    /// damage (the default), keep the prefix before any bad record, or fail on any.
    pub recovery_mode: RecoveryMode,
}

pub const MIB: u64 = 1 << 20;

/// How one scan reads its tables (RocksDB's `ReadOptions` for an iterator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions {
    /// Read through the page cache and keep the pages the scan returns entries from (the
    /// default, as RocksDB's `fill_cache`). Off, the scan reads past the cache and evicts
    /// nothing: a one-off scan of a whole database beside a hot point-read set.
    pub fill_cache: bool,
    /// The entries the caller will take at most, if it knows: each table's first read-ahead
    /// after a seek covers that many slots instead of 64 KiB, and doubles from there.
    pub limit: Option<u64>,
}

impl ScanOptions {
    /// A scan of a whole database by the engine's own machinery (a conversion, a repair, filling
    /// filters at open): no cache filled, full read-ahead.
    pub const WHOLE: ScanOptions = ScanOptions {
        fill_cache: false,
        limit: None,
    };
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            fill_cache: true,
            limit: None,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            index: IndexOptions::default(),
            max_window_bytes: 8 << 10,
            granularity: Granularity::Table,
            sst_size_bytes: 64 * MIB,
            write_buffer_bytes: 64 * MIB,
            size_ratio: 10,
            l0_compaction_trigger: 4,
            l0_stop_writes: 12,
            bloom_bits_per_key: 10,
            block_cache_bytes: 8 * MIB,
            shared_cache: None,
            cache_mode: CacheMode::default(),
            direct_io: false,
            sync: false,
            create_if_missing: true,
            background_compaction: true,
            before_flush: None,
            replay_filter: None,
            recovery_mode: RecoveryMode::TolerateTornTail,
        }
    }
}

impl Options {
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidOption(m));
        self.index.params.validate()?;
        for (level, b) in self.index.level_boundaries.iter().enumerate() {
            if let Some(b) = b {
                self.index.params_at(level).validate().map_err(|_| {
                    Error::InvalidOption(format!("boundary {b} at level {level} is below 2"))
                })?;
            }
        }
        if self.granularity == Granularity::Level && self.index.kind != IndexKind::Clustered {
            return bad(
                "level granularity needs the clustered index kind (one model per level, \
                        no per-table index)"
                    .into(),
            );
        }
        // The CLI accepts 4 MiB to 128 MiB; the library also takes smaller tables, for tests.
        if !(16 * 1024..=128 * MIB).contains(&self.sst_size_bytes) {
            return bad(format!(
                "sst size {} bytes is outside 16 KiB..=128 MiB",
                self.sst_size_bytes
            ));
        }
        if self.write_buffer_bytes < 64 * 1024 {
            return bad(format!(
                "write buffer {} bytes is below 64 KiB",
                self.write_buffer_bytes
            ));
        }
        if self.size_ratio < 2 {
            return bad(format!("size ratio {} is below 2", self.size_ratio));
        }
        if self.l0_compaction_trigger < 1 || self.l0_stop_writes <= self.l0_compaction_trigger {
            return bad(format!(
                "L0 trigger {} and stop {} must satisfy 1 <= trigger < stop",
                self.l0_compaction_trigger, self.l0_stop_writes
            ));
        }
        if self.bloom_bits_per_key > 64 {
            return bad(format!(
                "bloom bits per key {} is above 64",
                self.bloom_bits_per_key
            ));
        }
        Ok(())
    }
}
