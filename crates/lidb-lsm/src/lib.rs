//! lidb-lsm: an LSM-tree key-value engine whose SSTables are indexed by any family of
//! lidb-index. See docs/ARCHITECTURE.md for the data flow and docs/format/ for the files.
//!
//! Parts (one module each): `storage` (all I/O, fault injection), `log` (the record log shared by
//! the WAL and the manifest), `batch` (write batches), `hooks` (flush hook and WAL replay filter of an embedding store), `memtable`, `keys` (key images for the
//! models), `table` (SSTable format, builder, reader, Bloom filter, page cache), `iter`
//! (merging iterators), `version` (levels), `manifest` (version edits), `compaction` (the pure
//! picker), `db` (the engine).

pub mod batch;
pub mod compaction;
pub mod db;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod hooks;
pub mod iter;
pub mod keys;
pub mod log;
pub mod manifest;
pub mod memtable;
pub mod options;
pub mod repair;
pub mod storage;
pub mod table;
pub mod tail;
pub mod types;
pub mod version;

pub use db::{
    CutKind, Db, DbIterator, DbStats, LevelStats, LogCut, MemoryUsage, RecoveryReport, Source,
    Traced,
};
pub use error::{Error, Result};
pub use hooks::{FlushHook, ReplayFilter};
pub use options::{CacheMode, Granularity, IndexKind, IndexOptions, Options, Unclustered};
pub use tail::RecoveryMode;
pub use types::{EntryKind, ReadStats, SortedIter, TableMeta};
