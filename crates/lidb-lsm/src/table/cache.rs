//! The page cache shared by every table reader of an engine: an LRU map from
//! (namespace, table number, page index) to the bytes of that page of the table file, and
//! (issue 13) from (namespace, table number, 64-bit key hash) to an entry: the bytes of one
//! answer (table/window.rs encodes them), so a hot key costs about one slot of cache instead of
//! one or two whole pages.
//!
//! Namespaces let several owners of table numbers share one pool of memory under one capacity
//! (a tiered store's LSMs and static tiers, whose table numbers collide). A [`PageCache`] is a
//! handle on a pool with a namespace of its own: [`PageCache::new`] / [`PageCache::with_mode`]
//! make a pool and its first handle, [`PageCache::new_namespace`] another handle on the same pool
//! with a fresh namespace. `get`, `insert`, the entry methods and `remove_table` act within the
//! handle's namespace; `usage_bytes`, `capacity_bytes`, `set_capacity` and `len` are the pool's.
//! With one handle (every plain `Db`) this is exactly a single cache. Dropping a handle drops its
//! namespace's pages and entries, so a part that goes away leaves nothing behind in the pool.
//! What a handle's table point lookups keep (pages, entries or both) is its [`CacheMode`].
//!
//! Thread-safety: every method takes `&self` and locks the pool's one `Mutex`; readers of any
//! thread share `Arc<PageCache>` handles. Pages and entries are `Arc<[u8]>`, so one evicted while
//! a reader copies from it stays valid for that reader.
//!
//! Invariants: `usage_bytes() <= capacity_bytes()` after every call, for the pool as a whole;
//! usage is the sum of the lengths of the cached pages of every namespace (each at most
//! `PAGE_SIZE`; the last page of a file may be shorter) plus, for each entry, its length and
//! [`ENTRY_OVERHEAD_BYTES`]. Pages and entries share one LRU order and one capacity. A page or
//! entry larger than the capacity is not cached. Tables are immutable, so an entry never goes
//! stale; [`PageCache::remove_table`] drops a table's pages and entries. Entries are keyed by a
//! hash: two keys may share one, so a reader compares the key the entry holds and treats a
//! mismatch as a miss (the cache itself never looks inside). Each namespace has exactly one
//! handle (handles are not `Clone`). The capacity lives under the same lock as the pages, so
//! [`PageCache::set_capacity`] (a benchmark giving the cache what the indexes leave of a memory
//! budget) evicts down to the new capacity before any other call sees it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::options::CacheMode;
use crate::storage::PAGE_SIZE;

/// (namespace, table, page).
type PageKey = (u64, u64, u64);
/// (namespace, table, hash of the key).
type EntryKey = (u64, u64, u64);

/// Bytes charged for each entry beyond its own: the entry map's key and value (24 + 24) and the
/// LRU map's tick and item (8 + 32) in B-tree nodes about 60% full (some 60 bytes each per
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

#[derive(Debug)]
struct Pool {
    inner: Mutex<Inner>,
    next_namespace: AtomicU64,
}

/// An LRU cache of table pages and entries, bounded in bytes: a handle with its own namespace on
/// a pool that other handles may share (see the module documentation).
#[derive(Debug)]
pub struct PageCache {
    pool: Arc<Pool>,
    namespace: u64,
    /// What this handle's table point lookups keep; fixed at construction, read without the lock.
    mode: CacheMode,
}

impl PageCache {
    /// A new pool of `capacity_bytes` and its first handle, whose point lookups keep pages
    /// ([`CacheMode::Pages`]).
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache::with_mode(capacity_bytes, CacheMode::Pages)
    }

    /// A new pool of `capacity_bytes` and its first handle, whose table point lookups keep what
    /// `mode` says.
    pub fn with_mode(capacity_bytes: u64, mode: CacheMode) -> PageCache {
        PageCache {
            pool: Arc::new(Pool {
                inner: Mutex::new(Inner {
                    capacity_bytes,
                    ..Inner::default()
                }),
                next_namespace: AtomicU64::new(1),
            }),
            namespace: 0,
            mode,
        }
    }

    /// Another handle on this pool, with a namespace no other handle has and this handle's mode:
    /// its table numbers never meet another handle's pages, and its pages count against the one
    /// capacity.
    pub fn new_namespace(&self) -> PageCache {
        self.new_namespace_with_mode(self.mode)
    }

    /// [`PageCache::new_namespace`] with point lookups keeping what `mode` says.
    pub fn new_namespace_with_mode(&self, mode: CacheMode) -> PageCache {
        PageCache {
            pool: Arc::clone(&self.pool),
            namespace: self.pool.next_namespace.fetch_add(1, Ordering::Relaxed),
            mode,
        }
    }

    pub fn mode(&self) -> CacheMode {
        self.mode
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

    /// Caches `bytes` (at most `PAGE_SIZE`) as the page, evicting least recently used pages and
    /// entries until it fits. Replaces an existing copy.
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
        inner.lru.insert(tick, Item::Page(key));
        inner.usage_bytes += len;
    }

    /// The entry of `table` under `hash`, marking it most recently used. The caller checks
    /// that it holds its key (another key may share the hash).
    pub fn get_entry(&self, table: u64, hash: u64) -> Option<Arc<[u8]>> {
        self.lock().touch_entry((self.namespace, table, hash))
    }

    /// Caches `bytes` as the entry of `table` under `hash`, evicting least recently used pages
    /// and entries until it fits (with [`ENTRY_OVERHEAD_BYTES`]). Replaces an existing entry.
    pub fn insert_entry(&self, table: u64, hash: u64, bytes: Arc<[u8]>) {
        let charge = bytes.len() as u64 + ENTRY_OVERHEAD_BYTES;
        let key = (self.namespace, table, hash);
        let mut inner = self.lock();
        inner.remove_entry(key);
        if charge > inner.capacity_bytes {
            return;
        }
        inner.evict_for(charge);
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.insert(key, (bytes, tick));
        inner.lru.insert(tick, Item::Entry(key));
        inner.usage_bytes += charge;
    }

    /// Entries cached in the pool (every namespace).
    pub fn entry_count(&self) -> u64 {
        self.lock().entries.len() as u64
    }

    /// Drops every page and entry of `table` in this handle's namespace (its file was deleted or
    /// rewritten).
    pub fn remove_table(&self, table: u64) {
        let ns = self.namespace;
        self.remove_range((ns, table, 0)..=(ns, table, u64::MAX));
    }

    /// Drops every page and entry of this handle's namespace (what `Drop` does).
    pub fn remove_namespace(&self) {
        let ns = self.namespace;
        self.remove_range((ns, 0, 0)..=(ns, u64::MAX, u64::MAX));
    }

    /// Pages and entries share the key shape (namespace, table, page or hash).
    fn remove_range(&self, range: std::ops::RangeInclusive<PageKey>) {
        let mut inner = self.lock();
        let pages: Vec<PageKey> = inner.pages.range(range.clone()).map(|(k, _)| *k).collect();
        for k in pages {
            inner.remove(k);
        }
        let entries: Vec<EntryKey> = inner.entries.range(range).map(|(k, _)| *k).collect();
        for k in entries {
            inner.remove_entry(k);
        }
    }

    /// Bytes of the pages and entries of this handle's namespace (the pool's usage is
    /// `usage_bytes`).
    pub fn namespace_usage_bytes(&self) -> u64 {
        let ns = self.namespace;
        let range = (ns, 0, 0)..=(ns, u64::MAX, u64::MAX);
        let inner = self.lock();
        let pages: u64 = inner
            .pages
            .range(range.clone())
            .map(|(_, (p, _))| p.len() as u64)
            .sum();
        let entries: u64 = inner
            .entries
            .range(range)
            .map(|(_, (e, _))| e.len() as u64 + ENTRY_OVERHEAD_BYTES)
            .sum();
        pages + entries
    }

    /// Namespaces of the pool that hold at least one page or entry.
    pub fn namespaces_cached(&self) -> u64 {
        let inner = self.lock();
        let mut spaces: Vec<u64> = inner
            .pages
            .keys()
            .chain(inner.entries.keys())
            .map(|(ns, _, _)| *ns)
            .collect();
        spaces.sort_unstable();
        spaces.dedup();
        spaces.len() as u64
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

    /// Pages cached in the pool (every namespace).
    pub fn len(&self) -> u64 {
        self.lock().pages.len() as u64
    }

    /// Whether the pool holds no page and no entry.
    pub fn is_empty(&self) -> bool {
        let inner = self.lock();
        inner.pages.is_empty() && inner.entries.is_empty()
    }
}

/// A pool several databases share (`Options::shared_cache`): each takes a handle of its own
/// with [`SharedCache::new_namespace`]. Equal when it is the same pool handle (so `Options` stays
/// `PartialEq`).
#[derive(Debug, Clone)]
pub struct SharedCache(pub Arc<PageCache>);

impl SharedCache {
    /// A handle with a fresh namespace on the pool, for one database whose point lookups keep
    /// what `mode` says.
    pub fn new_namespace(&self, mode: CacheMode) -> Arc<PageCache> {
        Arc::new(self.0.new_namespace_with_mode(mode))
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
