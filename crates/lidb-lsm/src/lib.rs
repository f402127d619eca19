//! lidb-lsm: an LSM-tree key-value engine whose SSTables are indexed by any family of
//! lidb-index. See docs/ARCHITECTURE.md for the data flow and docs/format/ for the files.
//!
//! Parts (one module each): `batch` (write batches), `hooks` (flush hook and WAL replay filter
//! of an embedding store), `memtable`, `keys` (key images for the models), `table` (SSTable
//! format, builder, reader, Bloom filter), `iter` (merging iterators), `version` (levels),
//! `manifest` (version edits), `compaction` (the pure picker), `db` (the engine). What it stores
//! through (the `Storage` trait, the record log the WAL and the manifest share, the log-tail
//! classifier, the error type, the page cache) is lidb-storage's, shared with every engine.

pub mod batch;
pub mod compaction;
pub mod db;
#[doc(hidden)]
pub mod fuzzing;
pub mod hooks;
pub mod iter;
pub mod keys;
pub mod manifest;
pub mod memtable;
pub mod options;
pub mod repair;
pub mod table;
pub mod types;
pub mod version;

pub use db::{
    CutKind, Db, DbIterator, DbStats, LevelStats, LogCut, MemoryUsage, RecoveryReport, Source,
    Traced,
};
pub use hooks::{FlushHook, ReplayFilter};
pub use lidb_storage::{Error, RecoveryMode, Result};
pub use options::{CacheMode, Granularity, IndexKind, IndexOptions, Options, Unclustered};
pub use types::{EntryKind, ReadStats, SortedIter, TableMeta};
