//! Hooks an embedding store installs in [`crate::Options`] to keep its own files consistent with
//! the LSM's (the tiered store of lidb-kv keeps values in value logs and pointers here).
//!
//! - [`FlushHook`] runs on the thread that flushes a memtable (the background thread, a caller of
//!   `flush`, or a stalled writer when background compaction is off), before the table is
//!   written, while the flush holds the engine's flush lock but not its write mutex. It must not
//!   write to this database or wait for anything that does. An error fails the flush: the
//!   memtable stays (readable, and its WAL kept), and the error is returned or, on the background
//!   thread, stops writes like any background error.
//! - [`ReplayFilter`] runs at open, single-threaded, for every entry replayed from a WAL. The first
//!   batch holding an entry it rejects ends the replay: that batch and everything after it (the
//!   rest of that WAL and every later WAL) is dropped like a torn tail and reported.
//!
//! Both wrap an `Arc`, so `Options` stays `Clone`; two hooks are equal when they are the same
//! `Arc` (closures cannot be compared).

use std::sync::Arc;

use crate::types::EntryKind;
use lidb_storage::error::Result;

type FlushFn = dyn Fn() -> Result<()> + Send + Sync;
type ReplayFn = dyn Fn(EntryKind, &[u8], &[u8]) -> std::result::Result<(), String> + Send + Sync;

/// Called before a memtable is written to a table (see the module documentation).
#[derive(Clone)]
pub struct FlushHook(Arc<FlushFn>);

impl FlushHook {
    pub fn new(f: impl Fn() -> Result<()> + Send + Sync + 'static) -> FlushHook {
        FlushHook(Arc::new(f))
    }

    pub fn call(&self) -> Result<()> {
        (self.0)()
    }
}

impl std::fmt::Debug for FlushHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlushHook")
    }
}

impl PartialEq for FlushHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Decides whether a WAL entry may be replayed at open: `Err(why)` rejects it (see the module
/// documentation). Arguments: the entry's kind, key and value.
#[derive(Clone)]
pub struct ReplayFilter(Arc<ReplayFn>);

impl ReplayFilter {
    pub fn new(
        f: impl Fn(EntryKind, &[u8], &[u8]) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) -> ReplayFilter {
        ReplayFilter(Arc::new(f))
    }

    pub fn check(
        &self,
        kind: EntryKind,
        key: &[u8],
        value: &[u8],
    ) -> std::result::Result<(), String> {
        (self.0)(kind, key, value)
    }
}

impl std::fmt::Debug for ReplayFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplayFilter")
    }
}

impl PartialEq for ReplayFilter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
