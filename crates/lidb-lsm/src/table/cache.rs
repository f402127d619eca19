//! The page cache shared by every table reader of an engine: an LRU map from
//! (table number, page index) to the bytes of that page of the table file.
//!
//! Thread-safety: every method takes `&self` and locks one `Mutex`; readers of any thread share
//! one `Arc<PageCache>`. Pages are `Arc<[u8]>`, so a page evicted while a reader copies from it
//! stays valid for that reader.
//!
//! Invariants: `usage_bytes() <= capacity_bytes()` after every call; usage is the sum of the
//! lengths of the cached pages (each at most `PAGE_SIZE`; the last page of a file may be shorter).
//! A page larger than the capacity is not cached. The capacity lives under the same lock as the
//! pages, so [`PageCache::set_capacity`] (a benchmark giving the cache what the indexes leave of a
//! memory budget) evicts down to the new capacity before any other call sees it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::storage::PAGE_SIZE;

type PageKey = (u64, u64);

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

/// An LRU cache of table pages, bounded in bytes.
#[derive(Debug)]
pub struct PageCache {
    inner: Mutex<Inner>,
}

impl PageCache {
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache {
            inner: Mutex::new(Inner {
                capacity_bytes,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the maps consistent (no method panics midway),
        // so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page, marking it most recently used.
    pub fn get(&self, table: u64, page: u64) -> Option<Arc<[u8]>> {
        self.lock().touch((table, page))
    }

    /// Pages `first..=last` of `table` as they are cached, without marking any of them used
    /// (one lock). A point lookup looks at a window's cached pages this way to clip its read,
    /// then marks with [`PageCache::get`] only the page(s) that answered.
    pub fn peek_pages(&self, table: u64, first: u64, last: u64) -> Vec<Option<Arc<[u8]>>> {
        let inner = self.lock();
        (first..=last)
            .map(|p| inner.pages.get(&(table, p)).map(|(b, _)| Arc::clone(b)))
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
        let mut inner = self.lock();
        inner.remove((table, page));
        if len > inner.capacity_bytes {
            return;
        }
        inner.evict_for(len);
        inner.tick += 1;
        let tick = inner.tick;
        inner.pages.insert((table, page), (bytes, tick));
        inner.lru.insert(tick, (table, page));
        inner.usage_bytes += len;
    }

    /// Drops every page of `table` (its file was deleted or rewritten).
    pub fn remove_table(&self, table: u64) {
        let mut inner = self.lock();
        let keys: Vec<PageKey> = inner
            .pages
            .range((table, 0)..=(table, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            inner.remove(k);
        }
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

    /// Pages cached.
    pub fn len(&self) -> u64 {
        self.lock().pages.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
}
