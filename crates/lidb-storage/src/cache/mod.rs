//! The page cache shared by every table reader of an engine: a map from (namespace, table
//! number, page index) to the bytes of that page of the table file, and from (namespace, table
//! number, 64-bit key hash) to an entry: the bytes of one answer (table/window.rs encodes them),
//! so a hot key costs about one slot of cache instead of one or two whole pages.
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
//! Shards. The pool is split into shards by a hash of the key (namespace, table, page or hash),
//! each under its own `RwLock` on cache lines of its own, so lookups of different keys touch
//! different locks. The capacity is divided among the shards, each holding at most its share, as
//! RocksDB's sharded LRU cache does: a pool of `C` bytes in `n` shards caches at most about
//! `C / n` bytes of keys that hash to one shard, and a page or entry larger than its shard's
//! share is not cached. The shard count is the largest power of two, at most [`MAX_SHARDS`], that
//! leaves each shard at least [`MIN_SHARD_BYTES`] (one shard below twice that), so a small pool
//! is one shard and behaves exactly as a single cache; [`PageCache::set_capacity`] re-divides the
//! pool, moving every page and entry to its new shard when the count changes.
//!
//! Eviction within a shard is LRU, and a hit writes nothing shared when its page or entry is
//! recent: a hit takes its shard's lock for reading, and if the slot is among the most recent
//! moves of its shard (an eighth of the shard's slots; see shard.rs) it clones the `Arc` and is
//! done, writing neither the order nor any bit. Only a hit on an older slot takes the write lock
//! to move it to the front. So hits on one shard run side by side instead of queueing on a
//! mutex, and 16 threads hitting one hot page write only its `Arc` count and the lock's reader
//! count. A shard of fewer than 32 slots (every pool under 128 KiB of pages) is an exact LRU.
//! This is the "touch the order only occasionally" of many LRU caches (memcached bumps an item
//! at most once a minute), bounded by position instead of time.
//! (RocksDB's HyperClockCache takes no lock on a hit at all; that needs a slot whose `Arc` can be
//! read while an evictor replaces it, which safe Rust without `unsafe` does not give us. A CLOCK
//! ring was tried here first: its insert-then-second-chance order let a lookup's own pages be
//! evicted by its later inserts while older hit pages survived, which breaks the guarantee that a
//! point lookup whose pages fit the cache is then answered from memory.)
//!
//! A point lookup that misses (lidb-lsm's table/window.rs) asks for its entry, then peeks at its window's
//! pages: before, two turns of one pool-wide mutex; now read locks of the entry's shard and of
//! each page's shard (in general different shards), one at a time, which queue behind no other
//! reader. One call doing both would still take those same locks, so the two calls stay.
//!
//! Thread-safety: every method takes `&self`; readers of any thread share `Arc<PageCache>`
//! handles. Pages and entries are `Arc<[u8]>`, so one evicted while a reader copies from it
//! stays valid for that reader. Lock order: a call holds at most one shard lock at a time,
//! except `set_capacity` (and the tests' audit), which take every shard's lock in ascending
//! shard order and hold them together.
//!
//! Invariants:
//! 1. `usage_bytes() <= capacity_bytes()` after every call, for the pool as a whole: each shard
//!    keeps its usage within its share and the shares add up to the capacity.
//! 2. Usage is the sum of the lengths of the cached pages of every namespace (each at most
//!    `PAGE_SIZE`; the last page of a file may be shorter) plus, for each entry, its length and
//!    [`ENTRY_OVERHEAD_BYTES`]. Pages and entries of a shard share one LRU order and one share
//!    of the capacity.
//! 3. A key lives only in its home shard, `home(hash, n)` for the current shard count `n`. The
//!    layout word (shard count and a count of re-divisions) changes only while every shard's
//!    write lock is held, so a call holding any shard lock reads it stable: a lookup reads it,
//!    locks the home shard, and looks again, retrying if a re-division slipped in between.
//! 4. Tables are immutable, so an entry never goes stale; [`PageCache::remove_table`] drops a
//!    table's pages and entries. Entries are keyed by a hash: two keys may share one, so a reader
//!    compares the key the entry holds and treats a mismatch as a miss (the cache itself never
//!    looks inside). Each namespace has exactly one handle (handles are not `Clone`).
//! 5. `set_capacity` holds every shard's lock while it evicts down, so no other call sees the
//!    pool between the old capacity and the new.

mod shard;
mod sync;

#[cfg(all(test, loom))]
mod loom_model;
#[cfg(all(test, not(loom)))]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;

use lidb_sync::CachePadded;

use self::shard::{Key, Kind, Lookup, Shard, Slot};
use self::sync::{AtomicU64, Ordering, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::PAGE_SIZE;

/// What a table's point lookup keeps in the page cache (table/window.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// The page(s) of the answering slot (or, for an absent key, of the slots around it).
    Pages,
    /// The answering slot alone (about one slot's bytes), or the key alone for an absent key.
    #[default]
    Entries,
    /// Both: the entry, and the pages as `Pages` keeps them.
    EntriesAndPages,
}

impl CacheMode {
    pub const ALL: [CacheMode; 3] = [
        CacheMode::Pages,
        CacheMode::Entries,
        CacheMode::EntriesAndPages,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Pages => "pages",
            CacheMode::Entries => "entries",
            CacheMode::EntriesAndPages => "entries+pages",
        }
    }

    pub fn from_name(name: &str) -> Option<CacheMode> {
        CacheMode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether point lookups keep entries.
    pub fn keeps_entries(self) -> bool {
        self != CacheMode::Pages
    }

    /// Whether point lookups keep the pages of their answers.
    pub fn keeps_pages(self) -> bool {
        self != CacheMode::Entries
    }
}

/// Bytes charged for each entry beyond its own: its shard's index bucket (a 32-byte key and a
/// 4-byte position, in a table 45% to 87% full: some 60 bytes), its ring slot (56), the `Arc`
/// header (16) and the allocator's rounding of the entry's block (about 20).
pub const ENTRY_OVERHEAD_BYTES: u64 = 160;

/// Shards a pool has at most.
#[cfg(not(all(test, loom)))]
pub const MAX_SHARDS: usize = 64;
#[cfg(all(test, loom))]
pub const MAX_SHARDS: usize = 2;

/// The least capacity a shard is given when the pool has more than one (256 KiB: 64 pages).
#[cfg(not(all(test, loom)))]
pub const MIN_SHARD_BYTES: u64 = 256 << 10;
#[cfg(all(test, loom))]
pub const MIN_SHARD_BYTES: u64 = 64;

/// The 64-bit hash entries are keyed by (the Bloom filter's hash of the key).
pub fn entry_hash(key: &[u8]) -> u64 {
    crate::hash::key_hash(key)
}

/// An entry holding one record: the key's length (u32, little-endian), the key, the value.
/// `None` for a key of 4 GiB or more. Record caches (learnedkv's, learnedstore's) keep records
/// this way under the key's hash, and [`record_value`] reads them back.
pub fn record_entry(key: &[u8], value: &[u8]) -> Option<Arc<[u8]>> {
    let len = u32::try_from(key.len()).ok()?;
    let mut bytes = Vec::with_capacity(4 + key.len() + value.len());
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(value);
    Some(Arc::from(bytes))
}

/// The value in a [`record_entry`] if it holds `key` (another key may share the hash), else
/// `None`, as for an entry too short for what it says it holds.
pub fn record_value(entry: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let (len, rest) = entry.split_first_chunk::<4>()?;
    let (k, v) = rest.split_at_checked(u32::from_le_bytes(*len) as usize)?;
    (k == key).then(|| v.to_vec())
}

/// The shard count for a pool of `capacity_bytes` (a power of two).
fn shards_for(capacity_bytes: u64) -> u64 {
    let fit = (capacity_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS as u64);
    1 << fit.ilog2()
}

/// Shard `i`'s share of `capacity_bytes` over `n` shards: the shares add up to the capacity.
fn share(capacity_bytes: u64, n: u64, i: usize) -> u64 {
    let i = i as u64;
    if i >= n {
        return 0;
    }
    capacity_bytes / n + u64::from(i < capacity_bytes % n)
}

/// The home shard of a key hash among `n` (a power of two) shards.
fn home(hash: u64, n: u64) -> usize {
    ((hash >> 40) & (n - 1)) as usize
}

/// The layout word: the shard count in the low 8 bits, the count of re-divisions above.
fn shard_count(layout: u64) -> u64 {
    layout & 0xff
}

fn read(lock: &RwLock<Shard>) -> RwLockReadGuard<'_, Shard> {
    // A panic while holding the lock leaves the shard consistent (no method panics midway), so
    // a poisoned lock is still usable.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write(lock: &RwLock<Shard>) -> RwLockWriteGuard<'_, Shard> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
struct Pool {
    /// `MAX_SHARDS` shards; those at or past the shard count are empty with no capacity.
    shards: Box<[CachePadded<RwLock<Shard>>]>,
    /// See invariant 3; written only with every shard's write lock held.
    layout: AtomicU64,
    /// The pool's capacity; written only with every shard's write lock held.
    capacity_bytes: AtomicU64,
    next_namespace: AtomicU64,
}

impl Pool {
    fn new(capacity_bytes: u64) -> Pool {
        let n = shards_for(capacity_bytes);
        Pool {
            shards: (0..MAX_SHARDS)
                .map(|i| {
                    CachePadded(RwLock::new(Shard::with_capacity(share(
                        capacity_bytes,
                        n,
                        i,
                    ))))
                })
                .collect(),
            layout: AtomicU64::new(n),
            capacity_bytes: AtomicU64::new(capacity_bytes),
            next_namespace: AtomicU64::new(1),
        }
    }

    fn shard(&self, i: usize) -> &RwLock<Shard> {
        match self.shards.get(i) {
            Some(s) => s,
            None => panic!("shard {i} of {}: home() stays below MAX_SHARDS", MAX_SHARDS),
        }
    }

    /// `key`'s home shard, locked with `lock` (invariant 3).
    fn home_locked<'a, G>(&'a self, key: &Key, lock: impl Fn(&'a RwLock<Shard>) -> G) -> G {
        let hash = key.hash64();
        loop {
            let layout = self.layout.load(Ordering::Relaxed);
            let guard = lock(self.shard(home(hash, shard_count(layout))));
            // Under a shard lock the layout cannot change: equal means `guard` is the home.
            if self.layout.load(Ordering::Relaxed) == layout {
                return guard;
            }
        }
    }

    /// Folds `f` over every shard, each under its read lock in turn, starting over if the pool
    /// is re-divided meanwhile (so no page or entry is seen twice or missed for moving).
    fn fold<A: Clone>(&self, init: A, mut f: impl FnMut(A, &Shard) -> A) -> A {
        'again: loop {
            let mut acc = init.clone();
            let mut layout = None;
            for s in self.shards.iter() {
                let guard = read(s);
                let now = self.layout.load(Ordering::Relaxed);
                if *layout.get_or_insert(now) != now {
                    continue 'again;
                }
                acc = f(acc, &guard);
            }
            return acc;
        }
    }

    /// Drops every page and entry `doomed` picks, shard by shard, starting over if the pool is
    /// re-divided meanwhile (one moved from a shard not yet visited to one visited would stay).
    fn remove_where(&self, doomed: impl Fn(&Key) -> bool) {
        'again: loop {
            let mut layout = None;
            for s in self.shards.iter() {
                let mut guard = write(s);
                let now = self.layout.load(Ordering::Relaxed);
                if *layout.get_or_insert(now) != now {
                    continue 'again;
                }
                guard.remove_where(&doomed);
            }
            return;
        }
    }

    /// Every shard's write lock, in ascending order (the lock order).
    fn lock_all(&self) -> Vec<RwLockWriteGuard<'_, Shard>> {
        self.shards.iter().map(|s| write(s)).collect()
    }

    fn set_capacity(&self, bytes: u64) {
        let mut shards = self.lock_all();
        let layout = self.layout.load(Ordering::Relaxed);
        let n = shards_for(bytes);
        if n != shard_count(layout) {
            let moving: Vec<Slot> = shards.iter_mut().flat_map(|s| s.drain()).collect();
            // The guards' release orders this store before any later holder of a shard lock.
            self.layout
                .store(((layout >> 8) + 1) << 8 | n, Ordering::Relaxed);
            for slot in moving {
                if let Some(s) = shards.get_mut(home(slot.key.hash64(), n)) {
                    s.restore(slot);
                }
            }
        }
        self.capacity_bytes.store(bytes, Ordering::Relaxed);
        for (i, s) in shards.iter_mut().enumerate() {
            s.set_capacity(share(bytes, n, i));
        }
    }
}

/// A cache of table pages and entries, bounded in bytes: a handle with its own namespace on a
/// pool that other handles may share (see the module documentation).
#[derive(Debug)]
pub struct PageCache {
    pool: Arc<Pool>,
    namespace: u64,
    /// What this handle's table point lookups keep; fixed at construction, read without a lock.
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
            pool: Arc::new(Pool::new(capacity_bytes)),
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

    fn key(&self, table: u64, id: u64, kind: Kind) -> Key {
        Key {
            namespace: self.namespace,
            table,
            id,
            kind,
        }
    }

    /// The page, marking it used (its shard's read lock, and the write lock only when it must
    /// move to the front; see the module documentation).
    pub fn get(&self, table: u64, page: u64) -> Option<Arc<[u8]>> {
        self.hit(self.key(table, page, Kind::Page))
    }

    fn hit(&self, key: Key) -> Option<Arc<[u8]>> {
        // One statement: the read guard is gone before the write lock is asked for.
        let found = self.pool.home_locked(&key, read).lookup(&key);
        match found {
            Lookup::Hit(bytes) => Some(bytes),
            Lookup::Stale => self.pool.home_locked(&key, write).touch(&key),
            Lookup::Miss => None,
        }
    }

    /// Pages `first..=last` of `table` as they are cached, without marking any of them used
    /// (each page's shard read-locked in turn). A point lookup looks at a window's cached pages
    /// this way to clip its read, then marks with [`PageCache::get`] only the page(s) that
    /// answered.
    pub fn peek_pages(&self, table: u64, first: u64, last: u64) -> Vec<Option<Arc<[u8]>>> {
        (first..=last)
            .map(|p| {
                let key = self.key(table, p, Kind::Page);
                self.pool.home_locked(&key, read).peek(&key)
            })
            .collect()
    }

    /// Caches `bytes` (at most `PAGE_SIZE`) as the page, evicting pages and entries of its shard
    /// until it fits. Replaces an existing copy.
    pub fn insert(&self, table: u64, page: u64, bytes: Arc<[u8]>) {
        debug_assert!(
            bytes.len() as u64 <= PAGE_SIZE,
            "a page is at most PAGE_SIZE"
        );
        let key = self.key(table, page, Kind::Page);
        self.pool.home_locked(&key, write).insert(key, bytes);
    }

    /// The entry of `table` under `hash`, marking it used. The caller checks that it holds its
    /// key (another key may share the hash).
    pub fn get_entry(&self, table: u64, hash: u64) -> Option<Arc<[u8]>> {
        self.hit(self.key(table, hash, Kind::Entry))
    }

    /// Caches `bytes` as the entry of `table` under `hash`, evicting pages and entries of its
    /// shard until it fits (with [`ENTRY_OVERHEAD_BYTES`]). Replaces an existing entry.
    pub fn insert_entry(&self, table: u64, hash: u64, bytes: Arc<[u8]>) {
        let key = self.key(table, hash, Kind::Entry);
        self.pool.home_locked(&key, write).insert(key, bytes);
    }

    /// Drops the entry of `table` under `hash`, if cached (whatever key it holds).
    pub fn remove_entry(&self, table: u64, hash: u64) {
        let key = self.key(table, hash, Kind::Entry);
        self.pool.home_locked(&key, write).remove(&key);
    }

    /// Entries cached in the pool (every namespace).
    pub fn entry_count(&self) -> u64 {
        self.pool.fold(0, |n, s| n + s.entries)
    }

    /// Drops every page and entry of `table` in this handle's namespace (its file was deleted or
    /// rewritten). Visits every shard: a table's pages are spread over all of them.
    pub fn remove_table(&self, table: u64) {
        let ns = self.namespace;
        self.pool
            .remove_where(|k| k.namespace == ns && k.table == table);
    }

    /// Drops every page and entry of this handle's namespace (what `Drop` does).
    pub fn remove_namespace(&self) {
        let ns = self.namespace;
        self.pool.remove_where(|k| k.namespace == ns);
    }

    /// Bytes of the pages and entries of this handle's namespace (the pool's usage is
    /// `usage_bytes`).
    pub fn namespace_usage_bytes(&self) -> u64 {
        let ns = self.namespace;
        self.pool.fold(0, |n, s| {
            n + s
                .slots()
                .filter(|slot| slot.key.namespace == ns)
                .map(Slot::charge)
                .sum::<u64>()
        })
    }

    /// Namespaces of the pool that hold at least one page or entry.
    pub fn namespaces_cached(&self) -> u64 {
        let spaces = self.pool.fold(BTreeSet::new(), |mut set, s| {
            set.extend(s.slots().map(|slot| slot.key.namespace));
            set
        });
        spaces.len() as u64
    }

    /// The pool's usage: the shards' usages added up (exact when no insert or removal runs
    /// meanwhile).
    pub fn usage_bytes(&self) -> u64 {
        self.pool.fold(0, |n, s| n + s.usage_bytes)
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.pool.capacity_bytes.load(Ordering::Relaxed)
    }

    /// Makes the capacity `bytes`, re-dividing it among the shards (moving pages and entries
    /// when the shard count changes) and evicting in each shard until its usage fits its share.
    pub fn set_capacity(&self, bytes: u64) {
        self.pool.set_capacity(bytes);
    }

    /// Pages cached in the pool (every namespace).
    pub fn len(&self) -> u64 {
        self.pool.fold(0, |n, s| n + s.pages)
    }

    /// Whether the pool holds no page and no entry.
    pub fn is_empty(&self) -> bool {
        self.pool
            .fold(true, |empty, s| empty && s.pages + s.entries == 0)
    }

    /// The pool's shard count now.
    pub fn shard_count(&self) -> u64 {
        shard_count(self.pool.layout.load(Ordering::Relaxed))
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
