//! `memory-reference`: a `BTreeMap` behind [`PagedStore`], so the experiment runners can be
//! tested without any engine. It has no pool and no device: zero device reads, a pool as large
//! as its contents, and a `reopen_cold` that changes nothing. Not offered on the command line.
//!
//! For tests it can also pretend to read: `with_reads_per_get(n)` adds `n` device reads to each
//! `get`, so tests can check that rows divide device reads by operations correctly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::store::{PagedStore, StoreError};

/// The reference store's name in rows.
pub const NAME: &str = "memory-reference";

/// An in-memory ordered map with the store interface.
#[derive(Debug, Default)]
pub struct MemoryReference {
    map: BTreeMap<u64, Vec<u8>>,
    reads: AtomicU64,
    reads_per_get: u64,
    inner_miss: Option<f64>,
}

impl MemoryReference {
    pub fn new() -> MemoryReference {
        MemoryReference::default()
    }

    /// A reference whose every `get` counts `n` device reads.
    pub fn with_reads_per_get(n: u64) -> MemoryReference {
        MemoryReference {
            reads_per_get: n,
            ..MemoryReference::default()
        }
    }

    /// The probability last given to `simulate_inner_miss` (tests check it was passed on).
    pub fn inner_miss(&self) -> Option<f64> {
        self.inner_miss
    }
}

impl PagedStore for MemoryReference {
    fn name(&self) -> &str {
        NAME
    }

    fn bulk_load(
        &mut self,
        records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        self.map.extend(records);
        Ok(())
    }

    fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
        out.clear();
        self.reads.fetch_add(self.reads_per_get, Ordering::Relaxed);
        match self.map.get(&key) {
            Some(v) => {
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
        self.map.insert(key, value.to_vec());
        Ok(())
    }

    fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
        Ok(self.map.remove(&key).is_some())
    }

    fn device_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn pool_bytes(&self) -> u64 {
        self.map.values().map(|v| 8 + v.len() as u64).sum()
    }

    fn reopen_cold(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The reference accepts the hook (and only records it), so the runners' simulation path
    /// is testable.
    fn simulate_inner_miss(&mut self, probability: f64) -> Result<(), StoreError> {
        self.inner_miss = Some(probability);
        Ok(())
    }
}
