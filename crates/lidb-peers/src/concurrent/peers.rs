//! The peers from well-kept crates, behind [`ConcurrentIndex`], each configured as its
//! documentation suggests (no tuning in either direction; the `btree-rwlock` floor is lidb-bench's
//! own):
//! - `skipmap`: crossbeam-skiplist's lock-free `SkipMap<u64, AtomicU64>`; an update swaps the
//!   value in place; an insert of a present key swaps too, else inserts.
//! - `scc-tree`: scc's `TreeIndex<u64, u64>`, whose entries are immutable: an update is a peek
//!   then an upsert (not atomic against a remove of the same key; the benchmark never does that).
//! - `congee`: congee's concurrent ART over 8-byte keys and values; an update is its
//!   `compute_if_present`. Its range end is exclusive, so a scan never returns key `u64::MAX`.
//!
//! Threads: any; each type is `Send + Sync` and every method takes `&self`.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_skiplist::SkipMap;

use lidb_bench::concurrent::ConcurrentIndex;

/// crossbeam-skiplist's `SkipMap`.
#[derive(Debug, Default)]
pub struct SkipMapPeer(SkipMap<u64, AtomicU64>);

impl SkipMapPeer {
    /// A map holding `entries`.
    pub fn bulk_load(entries: &[(u64, u64)]) -> SkipMapPeer {
        let map = SkipMap::new();
        for &(k, v) in entries {
            map.insert(k, AtomicU64::new(v));
        }
        SkipMapPeer(map)
    }
}

/// Insert-or-swap on a `SkipMap<u64, AtomicU64>` (also the delta buffer of `li+delta`).
pub(crate) fn skipmap_insert(map: &SkipMap<u64, AtomicU64>, key: u64, value: u64) -> Option<u64> {
    if let Some(e) = map.get(&key) {
        return Some(e.value().swap(value, Ordering::AcqRel));
    }
    map.insert(key, AtomicU64::new(value));
    None
}

impl ConcurrentIndex for SkipMapPeer {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        skipmap_insert(&self.0, key, value)
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        self.0
            .get(&key)
            .map(|e| e.value().swap(value, Ordering::AcqRel))
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.get(&key).map(|e| e.value().load(Ordering::Acquire))
    }
    fn remove(&self, key: u64) -> Option<u64> {
        self.0
            .remove(&key)
            .map(|e| e.value().load(Ordering::Acquire))
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        out.extend(
            self.0
                .range(from..)
                .take(limit)
                .map(|e| (*e.key(), e.value().load(Ordering::Acquire))),
        );
    }
}

/// scc's `TreeIndex`.
#[derive(Debug, Default)]
pub struct SccTree(scc::TreeIndex<u64, u64>);

impl SccTree {
    /// A tree holding `entries`.
    pub fn bulk_load(entries: &[(u64, u64)]) -> SccTree {
        let tree = scc::TreeIndex::new();
        for &(k, v) in entries {
            tree.upsert_sync(k, v);
        }
        SccTree(tree)
    }
}

impl ConcurrentIndex for SccTree {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        let old = self.get(key);
        self.0.upsert_sync(key, value);
        old
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        let old = self.get(key)?;
        self.0.upsert_sync(key, value);
        Some(old)
    }
    fn get(&self, key: u64) -> Option<u64> {
        self.0.peek_with(&key, |_, &v| v)
    }
    fn remove(&self, key: u64) -> Option<u64> {
        let old = self.get(key)?;
        self.0.remove_sync(&key).then_some(old)
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        let guard = scc::Guard::new();
        out.extend(
            self.0
                .range((Bound::Included(from), Bound::Unbounded), &guard)
                .take(limit)
                .map(|(&k, &v)| (k, v)),
        );
    }
}

/// congee's concurrent ART.
pub struct CongeePeer(congee::Congee<usize, usize>);

impl std::fmt::Debug for CongeePeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CongeePeer")
    }
}

impl CongeePeer {
    /// A tree holding `entries`.
    pub fn bulk_load(entries: &[(u64, u64)]) -> CongeePeer {
        let peer = CongeePeer(congee::Congee::default());
        for &(k, v) in entries {
            peer.insert(k, v);
        }
        peer
    }
}

impl ConcurrentIndex for CongeePeer {
    fn insert(&self, key: u64, value: u64) -> Option<u64> {
        let guard = self.0.pin();
        // Err is an allocation failure of a custom allocator; the default one aborts instead.
        match self.0.insert(key as usize, value as usize, &guard) {
            Ok(old) => old.map(|v| v as u64),
            Err(_) => None,
        }
    }
    fn update(&self, key: u64, value: u64) -> Option<u64> {
        let guard = self.0.pin();
        self.0
            .compute_if_present(&(key as usize), |_| Some(value as usize), &guard)
            .map(|(old, _)| old as u64)
    }
    fn get(&self, key: u64) -> Option<u64> {
        let guard = self.0.pin();
        self.0.get(&(key as usize), &guard).map(|v| v as u64)
    }
    fn remove(&self, key: u64) -> Option<u64> {
        let guard = self.0.pin();
        self.0.remove(&(key as usize), &guard).map(|v| v as u64)
    }
    fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
        let guard = self.0.pin();
        let mut buf = vec![(0usize, 0usize); limit];
        let n = self
            .0
            .range(&(from as usize), &usize::MAX, &mut buf, &guard);
        out.extend(buf.iter().take(n).map(|&(k, v)| (k as u64, v as u64)));
    }
}
