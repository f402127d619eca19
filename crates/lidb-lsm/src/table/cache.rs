//! The page cache shared by every table reader of an engine: an LRU map from
//! (table number, page index) to the bytes of that page of the table file, and (issue 13) from
//! (table number, 64-bit key hash) to an entry: the bytes of one answer (table/window.rs encodes
//! them), so a hot key costs about one slot of cache instead of one or two whole pages.
//!
//! Thread-safety: every method takes `&self` and locks one `Mutex`; readers of any thread share
//! one `Arc<PageCache>`. Pages are `Arc<[u8]>`, so a page evicted while a reader copies from it
//! stays valid for that reader.
//!
//! Invariants: `usage_bytes() <= capacity_bytes()` after every call; usage is the sum of the
//! lengths of the cached pages (each at most `PAGE_SIZE`; the last page of a file may be shorter)
//! plus, for each entry, its length and [`ENTRY_OVERHEAD_BYTES`]. Pages and entries share one
//! LRU order and one capacity. A page or entry larger than the capacity is not cached. Tables are
//! immutable, so an entry never goes stale; [`PageCache::remove_table`] drops a table's pages
//! and entries. Entries are keyed by a hash: two keys may share one, so a reader compares the key
//! the entry holds and treats a mismatch as a miss (the cache itself never looks inside). The capacity lives under the same lock as the
//! pages, so [`PageCache::set_capacity`] (a benchmark giving the cache what the indexes leave of a
//! memory budget) evicts down to the new capacity before any other call sees it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::options::CacheMode;
use crate::storage::PAGE_SIZE;

type PageKey = (u64, u64);
/// (table number, hash of the key).
type EntryKey = (u64, u64);

/// Bytes charged for each entry beyond its own: the entry map's key and value (16 + 24) and the
/// LRU map's tick and item (8 + 24) in B-tree nodes about 60% full (some 60 bytes each per
/// entry), the `Arc` header (16) and the allocator's rounding of the entry's block (about 20).
pub const ENTRY_OVERHEAD_BYTES: u64 = 160;

/// One cached thing, as the shared LRU order names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Page(PageKey),
    Entry(EntryKey),
}

/// The 64-bit hash entries are keyed by (the Bloom filter's hash of the key).
pub fn entry_hash(key: &[u8]) -> u64 {
    crate::table::filter::key_hash(key)
}

#[derive(Debug, Default)]
struct Inner {
    /// Page -> (bytes, tick of last use).
    pages: BTreeMap<PageKey, (Arc<[u8]>, u64)>,
    /// Entry -> (bytes, tick of last use).
    entries: BTreeMap<EntryKey, (Arc<[u8]>, u64)>,
    /// Tick of last use -> page or entry; the first is the least recently used.
    lru: BTreeMap<u64, Item>,
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
        self.lru.insert(tick, Item::Page(key));
        Some(page)
    }

    fn touch_entry(&mut self, key: EntryKey) -> Option<Arc<[u8]>> {
        self.tick += 1;
        let tick = self.tick;
        let (bytes, old) = self.entries.get_mut(&key)?;
        let bytes = Arc::clone(bytes);
        let old = std::mem::replace(old, tick);
        self.lru.remove(&old);
        self.lru.insert(tick, Item::Entry(key));
        Some(bytes)
    }

    fn remove(&mut self, key: PageKey) {
        if let Some((page, tick)) = self.pages.remove(&key) {
            self.lru.remove(&tick);
            self.usage_bytes -= page.len() as u64;
        }
    }

    fn remove_entry(&mut self, key: EntryKey) {
        if let Some((bytes, tick)) = self.entries.remove(&key) {
            self.lru.remove(&tick);
            self.usage_bytes -= bytes.len() as u64 + ENTRY_OVERHEAD_BYTES;
        }
    }

    /// Evicts least recently used pages and entries until `extra` more bytes fit within the
    /// capacity.
    fn evict_for(&mut self, extra: u64) {
        while self.usage_bytes + extra > self.capacity_bytes {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            match victim {
                Item::Page(k) => {
                    if let Some((p, _)) = self.pages.remove(&k) {
                        self.usage_bytes -= p.len() as u64;
                    }
                }
                Item::Entry(k) => {
                    if let Some((e, _)) = self.entries.remove(&k) {
                        self.usage_bytes -= e.len() as u64 + ENTRY_OVERHEAD_BYTES;
                    }
                }
            }
        }
    }
}

/// An LRU cache of table pages and entries, bounded in bytes.
#[derive(Debug)]
pub struct PageCache {
    inner: Mutex<Inner>,
    /// What table point lookups keep here; fixed at construction, read without the lock.
    mode: CacheMode,
}

impl PageCache {
    /// A cache whose point lookups keep pages ([`CacheMode::Pages`]).
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache::with_mode(capacity_bytes, CacheMode::Pages)
    }

    /// A cache whose table point lookups keep what `mode` says.
    pub fn with_mode(capacity_bytes: u64, mode: CacheMode) -> PageCache {
        PageCache {
            inner: Mutex::new(Inner {
                capacity_bytes,
                ..Inner::default()
            }),
            mode,
        }
    }

    pub fn mode(&self) -> CacheMode {
        self.mode
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
        inner.lru.insert(tick, Item::Page((table, page)));
        inner.usage_bytes += len;
    }

    /// The entry of `table` under `hash`, marking it most recently used. The caller checks
    /// that it holds its key (another key may share the hash).
    pub fn get_entry(&self, table: u64, hash: u64) -> Option<Arc<[u8]>> {
        self.lock().touch_entry((table, hash))
    }

    /// Caches `bytes` as the entry of `table` under `hash`, evicting least recently used pages
    /// and entries until it fits (with [`ENTRY_OVERHEAD_BYTES`]). Replaces an existing entry.
    pub fn insert_entry(&self, table: u64, hash: u64, bytes: Arc<[u8]>) {
        let charge = bytes.len() as u64 + ENTRY_OVERHEAD_BYTES;
        let mut inner = self.lock();
        inner.remove_entry((table, hash));
        if charge > inner.capacity_bytes {
            return;
        }
        inner.evict_for(charge);
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.insert((table, hash), (bytes, tick));
        inner.lru.insert(tick, Item::Entry((table, hash)));
        inner.usage_bytes += charge;
    }

    /// Entries cached.
    pub fn entry_count(&self) -> u64 {
        self.lock().entries.len() as u64
    }

    /// Drops every page and entry of `table` (its file was deleted or rewritten).
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
        let keys: Vec<EntryKey> = inner
            .entries
            .range((table, 0)..=(table, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            inner.remove_entry(k);
        }
    }

    pub fn usage_bytes(&self) -> u64 {
        self.lock().usage_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.lock().capacity_bytes
    }

    /// Makes the capacity `bytes`, evicting least recently used pages and entries until the
    /// usage fits.
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

    /// The usage the maps account for, recomputed from what they hold.
    fn recount(cache: &PageCache) -> u64 {
        let inner = cache.lock();
        assert_eq!(
            inner.lru.len(),
            inner.pages.len() + inner.entries.len(),
            "one LRU item per page and entry"
        );
        let pages: u64 = inner.pages.values().map(|(p, _)| p.len() as u64).sum();
        let entries: u64 = inner
            .entries
            .values()
            .map(|(e, _)| e.len() as u64 + ENTRY_OVERHEAD_BYTES)
            .sum();
        pages + entries
    }

    #[test]
    fn pages_and_entries_share_one_capacity_and_one_lru_order() {
        let cache = PageCache::new(2 * PAGE_SIZE);
        cache.insert(1, 0, page(PAGE_SIZE as usize, 0));
        let entry = PAGE_SIZE - ENTRY_OVERHEAD_BYTES;
        cache.insert_entry(1, 99, page(entry as usize, 7));
        assert_eq!(cache.usage_bytes(), 2 * PAGE_SIZE);
        assert_eq!((cache.len(), cache.entry_count()), (1, 1));
        // The page is the least recently used: a new entry evicts it, not the entry.
        cache.insert_entry(2, 5, page(10, 1));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(
            cache.get_entry(1, 99).as_deref(),
            Some(&vec![7u8; entry as usize][..])
        );
        assert_eq!(cache.usage_bytes(), entry + 10 + 2 * ENTRY_OVERHEAD_BYTES);
        // Now entry (2, 5) is the oldest: a page evicts it.
        cache.insert(3, 0, page(PAGE_SIZE as usize - 10, 3));
        assert!(cache.get_entry(2, 5).is_none());
        assert!(cache.get_entry(1, 99).is_some());
        assert_eq!(cache.usage_bytes(), recount(&cache));
        // Replacing an entry does not double-count it; an entry over the capacity is not kept.
        cache.insert_entry(1, 99, page(1, 1));
        assert_eq!(cache.usage_bytes(), recount(&cache));
        cache.insert_entry(4, 1, page(2 * PAGE_SIZE as usize, 1));
        assert!(cache.get_entry(4, 1).is_none());
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
    }

    #[test]
    fn capacity_is_never_exceeded_with_pages_and_entries_mixed() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let cache = PageCache::new(6 * PAGE_SIZE);
        for step in 0..20_000 {
            match next(100) {
                0..=39 => cache.insert(next(4), next(16), page(next(PAGE_SIZE) as usize + 1, 1)),
                40..=79 => cache.insert_entry(next(4), next(64), page(next(1500) as usize, 2)),
                80..=89 => {
                    cache.get_entry(next(4), next(64));
                    cache.get(next(4), next(16));
                }
                90..=94 => cache.remove_table(next(4)),
                _ => cache.set_capacity(next(12 * PAGE_SIZE)),
            }
            assert!(
                cache.usage_bytes() <= cache.capacity_bytes(),
                "step {step}: {} > {}",
                cache.usage_bytes(),
                cache.capacity_bytes()
            );
            assert_eq!(cache.usage_bytes(), recount(&cache), "step {step}");
        }
    }

    #[test]
    fn remove_table_drops_its_entries_too() {
        let cache = PageCache::new(1 << 20);
        cache.insert(1, 0, page(100, 1));
        cache.insert_entry(1, 0, page(50, 1));
        cache.insert_entry(1, u64::MAX, page(60, 1));
        cache.insert_entry(2, 0, page(70, 2));
        cache.insert_entry(0, u64::MAX, page(80, 3));
        cache.remove_table(1);
        assert!(cache.get_entry(1, 0).is_none() && cache.get_entry(1, u64::MAX).is_none());
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.entry_count(), 2);
        assert_eq!(cache.usage_bytes(), 70 + 80 + 2 * ENTRY_OVERHEAD_BYTES);
        assert_eq!(cache.usage_bytes(), recount(&cache));
    }
}
