//! `btree-rwlock`: `RwLock<BTreeMap>` behind [`ConcurrentIndex`], the floor every concurrent
//! index should beat; readers share the lock, writers take it alone. It stays in lidb-bench (it
//! needs nothing beyond std) so the lean `lidb` binary has a baseline beside FINEdex; the
//! third-party peers are in the lidb-peers crate.
//!
//! Threads: any; every method takes `&self`.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::index::ConcurrentIndex;

/// `RwLock<BTreeMap>`.
#[derive(Debug, Default)]
pub struct BTreeRwLock(RwLock<BTreeMap<u64, u64>>);

impl BTreeRwLock {
    /// A map holding `entries`.
    pub fn bulk_load(entries: &[(u64, u64)]) -> BTreeRwLock {
        BTreeRwLock(RwLock::new(entries.iter().copied().collect()))
    }
}

impl ConcurrentIndex for BTreeRwLock {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        // A poisoned lock means a panic while writing, a bug already reported: keep going.
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, value)
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.get_mut(&key).map(|v| std::mem::replace(v, value))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied()
    }
    fn remove(&self, key: u64) -> Option<u64> {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key)
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        out.extend(map.range(from..).take(limit).map(|(&k, &v)| (k, v)));
    }
}
