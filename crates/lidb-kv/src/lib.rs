//! lidb-kv: LearnedKV, a tiered key-value store (the LearnedKV paper). An LSM (lidb-lsm) maps recent
//! keys to pointers into an append-only value log; a learned index over a sorted, static value
//! log serves everything that has settled. Garbage collection converts the LSM's data into a new
//! static tier without blocking reads or writes. See docs/ARCHITECTURE.md.
//!
//! Modules: `pointer` (value pointers), `vlog` (value logs), `static_tier` (static value log, key
//! list, model), `manifest` (which files form the store), `store` (the store and its GC),
//! `engine` (one trait over every engine the benchmarks compare).

pub mod manifest;
pub mod membloom;
pub mod pointer;
pub mod repair;
pub mod static_tier;
pub mod store;
pub mod vlog;

pub use lidb_storage::{Error, Result};
pub use pointer::Pointer;
pub use store::{
    ReadSource, SpaceUsage, Store, StoreOptions, StoreReads, StoreRecovery, StoreStats, TierKind,
};
