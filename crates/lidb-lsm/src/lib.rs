//! lidb-lsm: an LSM-tree key-value engine whose SSTables are indexed by any family of
//! lidb-index. See docs/ARCHITECTURE.md for the data flow and docs/format/ for the files.
//!
//! The API: [`Db`] and what it takes and returns (re-exported here), `options`, `batch` (write
//! batches), `hooks` (flush hook and WAL replay filter of an embedding store), `types`, `keys`
//! (the key images of the models, which lidb-kv's static tier shares) and `repair` (offline
//! repair). Internals, one module each: `memtable`, `table` (SSTable format, builder, reader,
//! Bloom filter), `iter` (merging iterators), `version` (levels), `manifest` (version edits),
//! `compaction` (the pure picker), `db` (the engine). What it stores
//! through (the `Storage` trait, the record log the WAL and the manifest share, the log-tail
//! classifier, the error type, the page cache) is lidb-storage's, shared with every engine.

pub mod batch;
mod db;
pub mod hooks;
pub mod keys;
pub mod options;
pub mod repair;
pub mod types;

// The engine's internals. Public only so this crate's component tests (tests/) and the fuzz
// targets (fuzz/) can reach the parts they exercise; hidden from the docs, and no other
// workspace crate names them (lidb-cli's tests/crate_map.rs checks).
#[doc(hidden)]
pub mod compaction;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod iter;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod memtable;
#[doc(hidden)]
pub mod table;
#[doc(hidden)]
pub mod version;

pub use db::{
    CutKind, Db, DbIterator, DbStats, LevelStats, LogCut, MemoryUsage, RecoveryReport, Source,
    Traced,
};
pub use hooks::{FlushHook, ReplayFilter};
pub use lidb_storage::{Error, RecoveryMode, Result};
pub use options::{
    CacheMode, Granularity, IndexKind, IndexOptions, Options, ScanOptions, Unclustered,
};
pub use types::{EntryKind, ReadStats, SortedIter, TableMeta};
