//! The page cache shared by every table reader of an engine: an LRU map from
//! (namespace, table number, page index) to the bytes of that page of the table file.
//!
//! Namespaces let several owners of table numbers share one pool of memory under one capacity
//! (a tiered store's LSMs and static tiers, whose table numbers collide). A [`PageCache`] is a
//! handle on a pool with a namespace of its own: [`PageCache::new`] makes a pool and its first
//! handle, [`PageCache::new_namespace`] another handle on the same pool with a fresh namespace.
//! `get`, `insert` and `remove_table` act within the handle's namespace; `usage_bytes`,
//! `capacity_bytes`, `set_capacity` and `len` are the pool's. With one handle (every plain `Db`)
//! this is exactly the former single cache. Dropping a handle drops its namespace's pages, so a
//! part that goes away (its handle's last `Arc` gone) leaves nothing behind in the pool.
//!
//! Thread-safety: every method takes `&self` and locks the pool's one `Mutex`; readers of any
//! thread share `Arc<PageCache>` handles. Pages are `Arc<[u8]>`, so a page evicted while a reader
//! copies from it stays valid for that reader.
//!
//! Invariants: `usage_bytes() <= capacity_bytes()` after every call, for the pool as a whole;
//! usage is the sum of the lengths of the cached pages of every namespace (each at most
//! `PAGE_SIZE`; the last page of a file may be shorter). A page larger than the capacity is not
//! cached. Each namespace has exactly one handle (handles are not `Clone`). The capacity lives
//! under the same lock as the pages, so [`PageCache::set_capacity`] (a benchmark giving the cache
//! what the indexes leave of a memory budget) evicts down to the new capacity before any other
//! call sees it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::storage::PAGE_SIZE;

/// (namespace, table, page).
type PageKey = (u64, u64, u64);

#[derive(Debug, Default)]
struct Inner {
    /// Page -> (bytes, tick of last use).
    pages: BTreeMap<PageKey, (Arc<[u8]>, u64)>,
    /// Tick of last use -> page; the first entry is the least recently used.
    lru: BTreeMap<u64, PageKey>,
    tick: u64,
    usage_bytes: u64,
    capacity_bytes: u64,
}

impl Inner {
    fn touch(&mut self, key: PageKey) -> Option<Arc<[u8]>> {
        self.tick += 1;
        let tick = self.tick;
        let (page, old) = self.pages.get_mut(&key)?;
        let page = Arc::clone(page);
        let old = std::mem::replace(old, tick);
        self.lru.remove(&old);
        self.lru.insert(tick, key);
        Some(page)
    }

    fn remove(&mut self, key: PageKey) {
        if let Some((page, tick)) = self.pages.remove(&key) {
            self.lru.remove(&tick);
            self.usage_bytes -= page.len() as u64;
        }
    }

    /// Evicts least recently used pages until `extra` more bytes fit within the capacity.
    fn evict_for(&mut self, extra: u64) {
        while self.usage_bytes + extra > self.capacity_bytes {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            if let Some((p, _)) = self.pages.remove(&victim) {
                self.usage_bytes -= p.len() as u64;
            }
        }
    }
}

#[derive(Debug)]
struct Pool {
    inner: Mutex<Inner>,
    next_namespace: AtomicU64,
}

/// An LRU cache of table pages, bounded in bytes: a handle with its own namespace on a pool that
/// other handles may share (see the module documentation).
#[derive(Debug)]
pub struct PageCache {
    pool: Arc<Pool>,
    namespace: u64,
}

impl PageCache {
    /// A new pool of `capacity_bytes` and its first handle.
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache {
            pool: Arc::new(Pool {
                inner: Mutex::new(Inner {
                    capacity_bytes,
                    ..Inner::default()
                }),
                next_namespace: AtomicU64::new(1),
            }),
            namespace: 0,
        }
    }

    /// Another handle on this pool, with a namespace no other handle has: its table numbers
    /// never meet another handle's pages, and its pages count against the one capacity.
    pub fn new_namespace(&self) -> PageCache {
        PageCache {
            pool: Arc::clone(&self.pool),
            namespace: self.pool.next_namespace.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This handle's namespace in its pool.
    pub fn namespace(&self) -> u64 {
        self.namespace
    }

    /// Whether `other` is a handle on the same pool.
    pub fn same_pool(&self, other: &PageCache) -> bool {
        Arc::ptr_eq(&self.pool, &other.pool)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the maps consistent (no method panics midway),
        // so a poisoned lock is still usable.
        self.pool.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page, marking it most recently used.
    pub fn get(&self, table: u64, page: u64) -> Option<Arc<[u8]>> {
        self.lock().touch((self.namespace, table, page))
    }

    /// Pages `first..=last` of `table` as they are cached, without marking any of them used
    /// (one lock). A point lookup looks at a window's cached pages this way to clip its read,
    /// then marks with [`PageCache::get`] only the page(s) that answered.
    pub fn peek_pages(&self, table: u64, first: u64, last: u64) -> Vec<Option<Arc<[u8]>>> {
        let inner = self.lock();
        (first..=last)
            .map(|p| {
                inner
                    .pages
                    .get(&(self.namespace, table, p))
                    .map(|(b, _)| Arc::clone(b))
            })
            .collect()
    }

    /// Caches `bytes` (at most `PAGE_SIZE`) as the page, evicting least recently used pages
    /// until it fits. Replaces an existing copy.
    pub fn insert(&self, table: u64, page: u64, bytes: Arc<[u8]>) {
        debug_assert!(
            bytes.len() as u64 <= PAGE_SIZE,
            "a page is at most PAGE_SIZE"
        );
        let len = bytes.len() as u64;
        let key = (self.namespace, table, page);
        let mut inner = self.lock();
        inner.remove(key);
        if len > inner.capacity_bytes {
            return;
        }
        inner.evict_for(len);
        inner.tick += 1;
        let tick = inner.tick;
        inner.pages.insert(key, (bytes, tick));
        inner.lru.insert(tick, key);
        inner.usage_bytes += len;
    }

    /// Drops every page of `table` in this handle's namespace (its file was deleted or
    /// rewritten).
    pub fn remove_table(&self, table: u64) {
        let ns = self.namespace;
        self.remove_range((ns, table, 0)..=(ns, table, u64::MAX));
    }

    /// Drops every page of this handle's namespace (what `Drop` does).
    pub fn remove_namespace(&self) {
        let ns = self.namespace;
        self.remove_range((ns, 0, 0)..=(ns, u64::MAX, u64::MAX));
    }

    fn remove_range(&self, range: std::ops::RangeInclusive<PageKey>) {
        let mut inner = self.lock();
        let keys: Vec<PageKey> = inner.pages.range(range).map(|(k, _)| *k).collect();
        for k in keys {
            inner.remove(k);
        }
    }

    /// Bytes of the pages of this handle's namespace (the pool's usage is `usage_bytes`).
    pub fn namespace_usage_bytes(&self) -> u64 {
        let ns = self.namespace;
        self.lock()
            .pages
            .range((ns, 0, 0)..=(ns, u64::MAX, u64::MAX))
            .map(|(_, (p, _))| p.len() as u64)
            .sum()
    }

    /// Namespaces of the pool that hold at least one page.
    pub fn namespaces_cached(&self) -> u64 {
        let inner = self.lock();
        let mut count = 0;
        let mut last = None;
        for (ns, _, _) in inner.pages.keys() {
            if last != Some(*ns) {
                count += 1;
                last = Some(*ns);
            }
        }
        count
    }

    pub fn usage_bytes(&self) -> u64 {
        self.lock().usage_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.lock().capacity_bytes
    }

    /// Makes the capacity `bytes`, evicting least recently used pages until the usage fits.
    pub fn set_capacity(&self, bytes: u64) {
        let mut inner = self.lock();
        inner.capacity_bytes = bytes;
        inner.evict_for(0);
    }

    /// Pages cached in the pool (every namespace).
    pub fn len(&self) -> u64 {
        self.lock().pages.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A pool several databases share (`Options::shared_cache`): each takes a handle of its own
/// with [`PageCache::new_namespace`]. Equal when it is the same pool handle (so `Options` stays
/// `PartialEq`).
#[derive(Debug, Clone)]
pub struct SharedCache(pub Arc<PageCache>);

impl SharedCache {
    /// A handle with a fresh namespace on the pool, for one database.
    pub fn new_namespace(&self) -> Arc<PageCache> {
        Arc::new(self.0.new_namespace())
    }
}

impl PartialEq for SharedCache {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        // The last handle takes the whole pool with it; others leave the pool without their pages.
        if Arc::strong_count(&self.pool) > 1 {
            self.remove_namespace();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(len: usize, fill: u8) -> Arc<[u8]> {
        vec![fill; len].into()
    }

    #[test]
    fn eviction_keeps_usage_within_capacity_and_is_lru() {
        let cache = PageCache::new(3 * PAGE_SIZE);
        for p in 0..3 {
            cache.insert(1, p, page(PAGE_SIZE as usize, p as u8));
        }
        assert_eq!(cache.usage_bytes(), 3 * PAGE_SIZE);
        // Touch page 0, so page 1 is the least recently used.
        assert!(cache.get(1, 0).is_some());
        cache.insert(1, 3, page(PAGE_SIZE as usize, 3));
        assert!(cache.get(1, 1).is_none());
        assert!(cache.get(1, 0).is_some());
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        for p in 0..1000u64 {
            cache.insert(p % 7, p, page(((p * 37) % PAGE_SIZE + 1) as usize, 1));
            assert!(cache.usage_bytes() <= cache.capacity_bytes());
        }
    }

    #[test]
    fn peek_does_not_change_the_eviction_order() {
        let cache = PageCache::new(2 * PAGE_SIZE);
        cache.insert(1, 0, page(PAGE_SIZE as usize, 0));
        cache.insert(1, 1, page(PAGE_SIZE as usize, 1));
        let seen: Vec<bool> = cache
            .peek_pages(1, 0, 2)
            .iter()
            .map(Option::is_some)
            .collect();
        assert_eq!(seen, [true, true, false]);
        // Page 0 is still the least recently used: peeking did not touch it.
        cache.insert(1, 2, page(PAGE_SIZE as usize, 2));
        assert_eq!(cache.peek_pages(1, 0, 0).first(), Some(&None));
        assert!(cache.get(1, 1).is_some());
    }

    #[test]
    fn remove_table_and_oversized_pages() {
        let cache = PageCache::new(2 * PAGE_SIZE);
        cache.insert(1, 0, page(100, 1));
        cache.insert(2, 0, page(200, 2));
        cache.insert(1, 5, page(300, 3));
        cache.remove_table(1);
        assert_eq!(cache.usage_bytes(), 200);
        assert_eq!(cache.get(2, 0).as_deref(), Some(&[2u8; 200][..]));
        let tiny = PageCache::new(10);
        tiny.insert(1, 0, page(11, 0));
        assert!(tiny.is_empty());
        assert_eq!(tiny.usage_bytes(), 0);
        // Replacing a page does not double-count it.
        cache.insert(2, 0, page(50, 4));
        assert_eq!(cache.usage_bytes(), 50);
    }

    #[test]
    fn set_capacity_evicts_least_recently_used_down_to_it_and_grows() {
        let cache = PageCache::new(4 * PAGE_SIZE);
        for p in 0..4 {
            cache.insert(1, p, page(PAGE_SIZE as usize, p as u8));
        }
        // Page 0 becomes the most recently used; 1 and 2 are the oldest.
        assert!(cache.get(1, 0).is_some());
        cache.set_capacity(2 * PAGE_SIZE);
        assert_eq!(cache.capacity_bytes(), 2 * PAGE_SIZE);
        assert_eq!(cache.usage_bytes(), 2 * PAGE_SIZE);
        assert!(cache.get(1, 1).is_none() && cache.get(1, 2).is_none());
        assert!(cache.get(1, 3).is_some() && cache.get(1, 0).is_some());
        // Grown again, it holds more pages than before without evicting.
        cache.set_capacity(5 * PAGE_SIZE);
        for p in 10..13 {
            cache.insert(1, p, page(PAGE_SIZE as usize, 9));
        }
        assert_eq!(cache.usage_bytes(), 5 * PAGE_SIZE);
        // Zero caches nothing.
        cache.set_capacity(0);
        assert!(cache.is_empty());
        cache.insert(1, 20, page(1, 1));
        assert!(cache.is_empty());
    }

    #[test]
    fn namespaces_share_one_capacity_and_never_see_each_others_pages() {
        let a = PageCache::new(4 * PAGE_SIZE);
        let b = a.new_namespace();
        assert!(a.same_pool(&b) && a.namespace() != b.namespace());
        // The same table number and page in two namespaces are two pages.
        a.insert(7, 0, page(100, 1));
        b.insert(7, 0, page(200, 2));
        assert_eq!(a.get(7, 0).as_deref(), Some(&[1u8; 100][..]));
        assert_eq!(b.get(7, 0).as_deref(), Some(&[2u8; 200][..]));
        assert_eq!((a.usage_bytes(), b.usage_bytes()), (300, 300));
        assert_eq!(
            (a.namespace_usage_bytes(), b.namespace_usage_bytes()),
            (100, 200)
        );
        // remove_table stays in its namespace.
        b.remove_table(7);
        assert!(b.get(7, 0).is_none());
        assert_eq!(a.get(7, 0).as_deref(), Some(&[1u8; 100][..]));
        // One capacity: b's inserts evict a's pages, never past it.
        for p in 0..20 {
            b.insert(1, p, page(PAGE_SIZE as usize, 3));
            assert!(a.usage_bytes() <= a.capacity_bytes());
        }
        assert!(a.get(7, 0).is_none(), "evicted by the other namespace");
        // set_capacity is the pool's.
        b.set_capacity(PAGE_SIZE);
        assert_eq!(a.capacity_bytes(), PAGE_SIZE);
        assert!(a.usage_bytes() <= PAGE_SIZE);
    }

    #[test]
    fn a_dropped_handle_takes_its_pages_out_of_the_pool() {
        let root = PageCache::new(8 * PAGE_SIZE);
        let part = root.new_namespace();
        root.insert(1, 0, page(10, 1));
        part.insert(1, 0, page(20, 2));
        part.insert(2, 3, page(30, 2));
        assert_eq!(root.namespaces_cached(), 2);
        drop(part);
        assert_eq!(root.usage_bytes(), 10);
        assert_eq!(root.namespaces_cached(), 1);
        assert_eq!(root.get(1, 0).as_deref(), Some(&[1u8; 10][..]));
        // A fresh namespace never reuses a dropped one.
        let next = root.new_namespace();
        assert!(next.get(1, 0).is_none());
        assert_eq!(next.namespace(), 2);
    }
}
