//! The row cache: whole (key, value) records that gets found, kept in memory beside the buffer
//! pool, so a hot key's next get is answered without a leaf, as RocksDB's `row_cache` answers
//! it without a block.
//!
//! Why: the pool caches 4 KiB pages. Under a skewed read load a page is kept for its one hot
//! record and carries its cold neighbours with it, so a pool of P bytes holds about P / 4 KiB hot
//! records; a row cache of the same bytes holds about P / (record + overhead). At 64 MiB, 200K
//! records of 1 KiB and YCSB C zipfian, learnedstore read the device 0.69 times a get with its
//! whole budget as pool, against RocksDB's 0.53 with half of its budget as row cache.
//!
//! Entries: one per key, in a `lidb_storage` cache of its own in entries mode, under the key's
//! 64-bit hash; the entry holds the key (its length as a u32, the key, then the value), so a
//! reader of another key with the same hash sees a miss. Only values found are cached, never an
//! absence.
//!
//! Writes invalidate; they never fill. Coherence without a lock around the tree read:
//! - a writer applies its write to the tree, then adds one to its key's stripe counter
//!   (`STRIPES` counters, chosen by the key's hash), then removes the key's entry;
//! - a reader that missed reads its stripe's counter (the stamp), reads the tree, inserts what
//!   it found, then reads the counter again; if it moved, it removes the entry it inserted.
//!
//! Why no stale entry survives: let a reader insert a value that a writer W has overwritten
//! (the reader read the tree before W's write). Its stamp was read before that tree read, so
//! before W's count. If the reader's second read of the counter comes after W's count, it sees
//! the counter moved and removes its entry. Otherwise W's count, and so W's removal, come after
//! the reader's second read, and so after its insert: W's removal takes the stale entry away.
//! (The counters are `SeqCst`; the cache's shard lock orders the insert and the removal.) Two
//! keys sharing a stripe or a hash only cost extra misses. `interleavings_leave_no_stale_entry`
//! below runs every interleaving of one reader and one writer through these steps.
//!
//! Threads: every method takes `&self`; the cache's shards lock on their own (lidb-storage).

use std::sync::atomic::{AtomicU64, Ordering};

use lidb_storage::cache::{CacheMode, PageCache, entry_hash, record_entry, record_value};
use lidb_sync::Counter;

/// Write counters, one per stripe of key hashes.
const STRIPES: usize = 4096;

/// The row cache (see the module documentation).
#[derive(Debug)]
pub(crate) struct RowCache {
    cache: PageCache,
    stripes: Box<[AtomicU64]>,
    hits: Counter,
    misses: Counter,
}

/// What a reader that missed noted before it read the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    hash: u64,
    count: u64,
}

/// The row cache's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowCacheStats {
    /// Gets answered by the row cache.
    pub hits: u64,
    /// Gets that looked in the row cache and read the tree.
    pub misses: u64,
    /// Bytes the row cache holds (entries and their overhead).
    pub usage_bytes: u64,
    /// Bytes it may hold.
    pub capacity_bytes: u64,
}

impl RowCache {
    /// A row cache of `capacity_bytes` (0: nothing is cached, and gets do not look).
    pub fn new(capacity_bytes: u64) -> RowCache {
        RowCache {
            cache: PageCache::with_mode(capacity_bytes, CacheMode::Entries),
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            hits: Counter::default(),
            misses: Counter::default(),
        }
    }

    fn stripe(&self, hash: u64) -> &AtomicU64 {
        // STRIPES is a power of two and the array has STRIPES counters.
        match self.stripes.get((hash as usize) & (STRIPES - 1)) {
            Some(stripe) => stripe,
            None => unreachable!("row cache: a stripe index past the counters"),
        }
    }

    fn enabled(&self) -> bool {
        self.cache.capacity_bytes() > 0
    }

    /// The cached value of `key`, or, on a miss, the stamp to pass to [`RowCache::fill`] once
    /// the tree has been read. `Err(None)`: the cache is off (capacity 0), nothing to fill.
    pub fn get(&self, key: &[u8]) -> std::result::Result<Vec<u8>, Option<Stamp>> {
        if !self.enabled() {
            return Err(None);
        }
        let hash = entry_hash(key);
        if let Some(value) = self
            .cache
            .get_entry(0, hash)
            .and_then(|e| record_value(&e, key))
        {
            self.hits.incr();
            return Ok(value);
        }
        self.misses.incr();
        Err(Some(self.stamp_of(hash)))
    }

    fn stamp_of(&self, hash: u64) -> Stamp {
        Stamp {
            hash,
            count: self.stripe(hash).load(Ordering::SeqCst),
        }
    }

    /// Caches `key`'s `value`, read from the tree after `stamp` was taken, unless a write to
    /// its stripe came in between.
    pub fn fill(&self, key: &[u8], value: &[u8], stamp: Stamp) {
        self.insert(key, value, stamp);
        self.check(stamp);
    }

    /// The fill's first step: the entry inserted.
    fn insert(&self, key: &[u8], value: &[u8], stamp: Stamp) {
        if let Some(entry) = record_entry(key, value) {
            self.cache.insert_entry(0, stamp.hash, entry);
        }
    }

    /// The fill's second step: the entry removed again if a write counted since the stamp.
    fn check(&self, stamp: Stamp) {
        if self.stripe(stamp.hash).load(Ordering::SeqCst) != stamp.count {
            self.cache.remove_entry(0, stamp.hash);
        }
    }

    /// After a write of `key` was applied to the tree: its stripe counted and its entry gone.
    pub fn invalidate(&self, key: &[u8]) {
        let hash = entry_hash(key);
        self.count_write(hash);
        self.cache.remove_entry(0, hash);
    }

    fn count_write(&self, hash: u64) {
        self.stripe(hash).fetch_add(1, Ordering::SeqCst);
    }

    /// Makes the capacity `bytes` (evicting down to it; 0 turns the cache off).
    pub fn set_capacity(&self, bytes: u64) {
        self.cache.set_capacity(bytes);
    }

    pub fn stats(&self) -> RowCacheStats {
        RowCacheStats {
            hits: self.hits.get(),
            misses: self.misses.get(),
            usage_bytes: self.cache.usage_bytes(),
            capacity_bytes: self.cache.capacity_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn a_filled_value_is_a_hit_for_its_key_and_a_write_takes_it_away() {
        let rc = RowCache::new(1 << 20);
        let Err(Some(stamp)) = rc.get(b"k") else {
            panic!("an empty cache missed")
        };
        rc.fill(b"k", b"v1", stamp);
        assert_eq!(rc.get(b"k"), Ok(b"v1".to_vec()));
        assert!(matches!(rc.get(b"other"), Err(Some(_))));
        rc.invalidate(b"k");
        assert!(matches!(rc.get(b"k"), Err(Some(_))));
        let s = rc.stats();
        assert_eq!((s.hits, s.misses), (1, 3));
        assert_eq!(s.usage_bytes, 0);
    }

    #[test]
    fn a_fill_after_a_write_since_its_stamp_is_dropped() {
        let rc = RowCache::new(1 << 20);
        let Err(Some(stamp)) = rc.get(b"k") else {
            panic!("an empty cache missed")
        };
        rc.invalidate(b"k");
        rc.fill(b"k", b"old", stamp);
        assert!(matches!(rc.get(b"k"), Err(Some(_))));
    }

    #[test]
    fn capacity_zero_caches_nothing_and_does_not_look() {
        let rc = RowCache::new(0);
        assert_eq!(rc.get(b"k"), Err(None));
        rc.set_capacity(1 << 20);
        let Err(Some(stamp)) = rc.get(b"k") else {
            panic!("an empty cache missed")
        };
        rc.fill(b"k", b"v", stamp);
        assert_eq!(rc.get(b"k"), Ok(b"v".to_vec()));
        rc.set_capacity(0);
        assert_eq!(rc.get(b"k"), Err(None));
        assert_eq!(rc.stats().usage_bytes, 0);
    }

    /// One reader that missed and one writer, their steps in every order: the reader takes its
    /// stamp, reads the tree, inserts, checks; the writer writes the tree, counts, removes.
    /// Whatever the order, the cache ends holding the tree's value or nothing. The test fails
    /// if the writer removes before it counts, or the reader checks before it inserts.
    #[test]
    fn interleavings_leave_no_stale_entry() {
        const READER: usize = 4;
        const WRITER: usize = 3;
        let mut orders = 0;
        for mask in 0u32..(1 << (READER + WRITER)) {
            if mask.count_ones() as usize != WRITER {
                continue;
            }
            orders += 1;
            let rc = RowCache::new(1 << 20);
            let tree = RefCell::new(b"old".to_vec());
            let hash = entry_hash(b"k");
            // Replaced by the reader's first step, which comes before its other steps.
            let mut stamp = Stamp {
                hash,
                count: u64::MAX,
            };
            let (mut r, mut w) = (0, 0);
            let mut read = Vec::new();
            for step in 0..READER + WRITER {
                if mask & (1 << step) != 0 {
                    match w {
                        0 => *tree.borrow_mut() = b"new".to_vec(),
                        1 => rc.count_write(hash),
                        _ => rc.cache.remove_entry(0, hash),
                    }
                    w += 1;
                } else {
                    match r {
                        0 => stamp = rc.stamp_of(hash),
                        1 => read = tree.borrow().clone(),
                        2 => rc.insert(b"k", &read, stamp),
                        _ => rc.check(stamp),
                    }
                    r += 1;
                }
            }
            if let Ok(cached) = rc.get(b"k") {
                assert_eq!(cached, *tree.borrow(), "stale entry in order {mask:07b}");
            }
        }
        assert_eq!(orders, 35);
    }

    /// Threads: writers count a key's version up in a model, then invalidate; readers fill
    /// from the model. Once every thread has stopped, a hit must be the model's last value.
    #[test]
    fn racing_readers_and_writers_end_coherent() {
        let rc = RowCache::new(1 << 20);
        let model: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (rc, model) = (&rc, &model);
                s.spawn(move || {
                    let mut x = t + 1;
                    for _ in 0..20_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = x % 8;
                        let (key, Some(version)) = ([k as u8], model.get(k as usize)) else {
                            continue;
                        };
                        if t % 2 == 0 {
                            version.fetch_add(1, Ordering::SeqCst);
                            rc.invalidate(&key);
                        } else if let Err(Some(stamp)) = rc.get(&key) {
                            let v = version.load(Ordering::SeqCst);
                            rc.fill(&key, &v.to_le_bytes(), stamp);
                        }
                    }
                });
            }
        });
        for (k, version) in model.iter().enumerate() {
            if let Ok(v) = rc.get(&[k as u8]) {
                assert_eq!(v, version.load(Ordering::SeqCst).to_le_bytes(), "key {k}");
            }
        }
    }
}
