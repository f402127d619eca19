//! `alex`, `lipp`, `dili`: the updatable learned indexes of lidb-updatable as peers of
//! `lidb bench concurrent` (FINEdex's paper compares with ALEX among others).
//!
//! They are single-writer structures (`&mut self` to write, `&self` to read, no interior
//! mutability), so each runs behind one `RwLock` around the whole index: reads and scans share
//! the lock, inserts, updates and removes take it alone, as `btree-rwlock` does with a `BTreeMap`.
//! Their rows at more than one thread therefore measure that lock, not a concurrent design of
//! theirs. An update is a lookup then an insert under one write lock. Memory: the index's own
//! `size_bytes()` (taken under the read lock, between phases).
//!
//! LITS (byte-string keys) is not a peer: this benchmark's keys and operations are u64.
//!
//! Threads: any; [`Updatable`] is `Send + Sync` and every method takes `&self`. A poisoned lock
//! (a panic while writing, already reported) is taken over, as in `btree-rwlock`.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use lidb_updatable::UpdatableIndex;

use super::index::{ConcurrentIndex, Footprint};

/// An [`UpdatableIndex`] behind a reader-writer lock.
#[derive(Debug)]
pub struct Updatable<T>(RwLock<T>);

impl<T: UpdatableIndex> Updatable<T> {
    /// Bulk-loads `entries` (keys strictly increasing).
    pub fn bulk_load(entries: &[(u64, u64)]) -> Result<Updatable<T>, String> {
        T::bulk_load(entries)
            .map(|index| Updatable(RwLock::new(index)))
            .map_err(|e| format!("{}: {e}", T::NAME))
    }

    fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: UpdatableIndex + Send + Sync> ConcurrentIndex for Updatable<T> {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        self.write().insert(key, value)
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        let mut index = self.write();
        index.get(key)?;
        index.insert(key, value)
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.read().get(key)
    }
    fn remove(&self, key: u64) -> Option<u64> {
        self.write().remove(key)
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        out.extend(self.read().range_from(from).take(limit));
    }
    fn footprint(&self) -> Footprint {
        Footprint {
            heap_bytes: Some(self.read().size_bytes()),
            ..Footprint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lidb_updatable::{Alex, Dili, Lipp};

    use super::*;

    /// Every operation of the trait against a BTreeMap, and a reported size.
    fn matches_a_map<T: UpdatableIndex + Send + Sync>() {
        let entries: Vec<(u64, u64)> = (0..2_000u64).map(|i| (i * 10, i)).collect();
        let peer = Updatable::<T>::bulk_load(&entries).unwrap_or_else(|e| panic!("{e}"));
        let mut model: BTreeMap<u64, u64> = entries.iter().copied().collect();
        for i in 0..3_000u64 {
            let key = (i * 7_919) % 25_000;
            let got = match i % 4 {
                0 => (peer.insert(key, i), model.insert(key, i)),
                1 => (
                    peer.update(key, i),
                    model.get_mut(&key).map(|v| std::mem::replace(v, i)),
                ),
                2 => (peer.remove(key), model.remove(&key)),
                _ => (peer.get(key), model.get(&key).copied()),
            };
            assert_eq!(got.0, got.1, "{} op {i} key {key}", T::NAME);
        }
        let mut out = Vec::new();
        peer.scan(5_000, 50, &mut out);
        let want: Vec<(u64, u64)> = model
            .range(5_000..)
            .take(50)
            .map(|(&k, &v)| (k, v))
            .collect();
        assert_eq!(out, want, "{}", T::NAME);
        let bytes = peer.footprint().heap_bytes.unwrap_or(0);
        assert!(bytes >= 16 * model.len() as u64, "{} {bytes}", T::NAME);
        assert!(peer.concurrent());
    }

    #[test]
    fn alex_lipp_and_dili_behind_the_lock_match_a_map() {
        matches_a_map::<Alex>();
        matches_a_map::<Lipp>();
        matches_a_map::<Dili>();
    }

    #[test]
    fn unsorted_entries_are_refused_with_the_index_name() {
        let e = Updatable::<Alex>::bulk_load(&[(2, 0), (1, 1)]).err();
        assert!(e.is_some_and(|e| e.starts_with("alex: ")));
    }
}
