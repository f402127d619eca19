//! Hot records in the store's cache: the (key, value) a point read found, kept as an entry of a
//! namespace of its own in the store's one cache pool (`Shared::records`), so a hot key's next
//! read is answered from memory instead of a value-log read.
//!
//! Why: lidb's lsm keeps the answering slot of a hot key (its value inline) in its entries cache,
//! and RocksDB keeps the data block holding it (and its row cache the entry); learnedkv's values
//! live in value logs that point reads used to read from the device every time, so under a
//! zipfian workload its cache held key lists and LSM pages while every get still cost a read
//! (1.0 device reads per get against RocksDB's 0.66 at 16 MiB, with a third of the budget unused).
//!
//! Writes go through: a write's record is cached as the group's pointers reach the LSM, since a
//! key just written is the likeliest to be read next (RocksDB answers it from its memtable, which
//! here holds only the pointer). Under YCSB A the hot keys are rewritten all the time, so a
//! read-filled cache held mostly their dead versions.
//!
//! Keys of the entries: records never change where they are, so a record is cached under where
//! it lies, as RocksDB's row cache keys an entry by its table file:
//! - a value-log record that an LSM pointer names: table = its log's file number, slot = its
//!   offset (exact: one record starts at an offset);
//! - a learned tier's record: table = the tier's generation, slot = the key's 64-bit hash (the
//!   entry holds its key, and a reader treats another key as a miss).
//!
//! Log numbers and tier generations come from one allocator (`Shared::new_number`), so the two
//! never share a table. A GC leaves the entries of the files it retires to age out of the LRU:
//! their numbers are never used again, so they are never hit.
//!
//! Entry bytes: `lidb_storage::cache::record_entry` (the key's length, the key, the value).
//! Threads: the cache's own (any thread; sharded locks, see lidb-storage's cache).

use lidb_storage::cache::{PageCache, record_entry, record_value};

/// The value cached for `key` under (`table`, `slot`), if the entry there holds `key`.
pub(crate) fn get(cache: &PageCache, table: u64, slot: u64, key: &[u8]) -> Option<Vec<u8>> {
    record_value(&cache.get_entry(table, slot)?, key)
}

/// Caches `key`'s `value` under (`table`, `slot`).
pub(crate) fn put(cache: &PageCache, table: u64, slot: u64, key: &[u8], value: &[u8]) {
    if let Some(entry) = record_entry(key, value) {
        cache.insert_entry(table, slot, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lidb_storage::cache::CacheMode;
    use std::sync::Arc;

    #[test]
    fn a_record_comes_back_for_its_key_only() {
        let cache = PageCache::with_mode(1 << 20, CacheMode::Entries);
        put(&cache, 7, 4096, b"key", b"value");
        assert_eq!(get(&cache, 7, 4096, b"key"), Some(b"value".to_vec()));
        // Another key under the same slot (a hash collision) is a miss, as are other slots.
        assert_eq!(get(&cache, 7, 4096, b"kex"), None);
        assert_eq!(get(&cache, 7, 4097, b"key"), None);
        assert_eq!(get(&cache, 8, 4096, b"key"), None);
        // An empty value and an empty key round-trip.
        put(&cache, 7, 1, b"", b"");
        assert_eq!(get(&cache, 7, 1, b""), Some(Vec::new()));
    }

    #[test]
    fn a_short_or_garbled_entry_is_a_miss() {
        let cache = PageCache::with_mode(1 << 20, CacheMode::Entries);
        cache.insert_entry(1, 1, Arc::from(vec![1u8, 0]));
        assert_eq!(get(&cache, 1, 1, b"k"), None);
        // A key length past the entry's end.
        cache.insert_entry(1, 2, Arc::from(vec![200u8, 0, 0, 0, b'k']));
        assert_eq!(get(&cache, 1, 2, b"k"), None);
    }
}
