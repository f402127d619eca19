//! The synchronisation types the cache's shards use: std's, or loom's when the crate is built
//! with `--cfg loom` so that the loom model in `loom_model.rs` explores the interleavings of hits,
//! inserts and evictions with a re-division of the pool. Nothing else differs between the two builds.

#[cfg(not(loom))]
pub(super) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(super) use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(loom)]
pub(super) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(super) use loom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
