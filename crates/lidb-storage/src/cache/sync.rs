//! The synchronisation types the cache's shards use: std's, or loom's when the crate's unit
//! tests are built with `--cfg loom`, so that the loom model in `loom_model.rs` explores the
//! interleavings of hits and inserts with a re-division of the pool (the library itself, even
//! under `--cfg loom`, keeps std's). Nothing else differs between the builds but the shard
//! count and size limits (`MAX_SHARDS`, `MIN_SHARD_BYTES`), small enough for a model.

#[cfg(not(all(test, loom)))]
pub(super) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(all(test, loom)))]
pub(super) use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(all(test, loom))]
pub(super) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(all(test, loom))]
pub(super) use loom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
