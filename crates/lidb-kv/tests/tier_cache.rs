//! The learned tier's page cache. A cache that holds the whole key list: point lookups read the
//! key list's pages once, then only records (one small read per get). A smaller cache: one-read
//! lookups, whose svlog pages are cached (no read the second time). Answers are the same as
//! without the cache, and scans do not fill it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions};
use lidb_storage::ReadMode;
use lidb_storage::cache::PageCache;
use lidb_storage::mem::MemStorage;

const KEYS: u32 = 20_000;

fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

/// A packed generation of 20 000 keys (a key list of 118 pages, 483 KB) with a cache.
fn tier(cache_bytes: u64) -> (StaticTier, Arc<PageCache>) {
    let storage: Arc<dyn lidb_storage::Storage> = Arc::new(MemStorage::new());
    let dir = Path::new("/t");
    storage.create_dir_all(dir).unwrap();
    let opts = TierOptions {
        family: Family::Pgm,
        page_boundary: 2,
        params: Params::new(2),
    };
    let mut b = StaticTierBuilder::new(Arc::clone(&storage), dir, 5, opts).unwrap();
    for i in 0..KEYS {
        b.add(&key(i), &i.to_le_bytes()).unwrap();
    }
    b.finish().unwrap();
    let cache = Arc::new(PageCache::new(cache_bytes));
    let tier = StaticTier::open(Arc::clone(&storage), dir, 5, ReadMode::Buffered)
        .unwrap()
        .with_cache(Arc::clone(&cache));
    assert_eq!(tier.keylist_bytes(), 119 * 4096);
    (tier, cache)
}

fn get_all(tier: &StaticTier, keys: impl Iterator<Item = u32>) -> u64 {
    let mut n = 0;
    for i in keys {
        assert_eq!(
            tier.get(&key(i)).unwrap(),
            Some(i.to_le_bytes().to_vec()),
            "key {i}"
        );
        n += 1;
    }
    n
}

#[test]
fn a_cache_that_holds_the_key_list_leaves_one_record_read_per_get() {
    let (tier, cache) = tier(1 << 20);
    assert!(
        !tier.reads_once(),
        "the cached key list is the smaller read"
    );
    get_all(&tier, (0..KEYS).step_by(37));
    assert_eq!(tier.get(b"zzzz").unwrap(), None);
    let before = tier.read_stats();
    assert!(before.keylist_reads > 0);
    let gets = get_all(&tier, (0..KEYS).step_by(37));
    let after = tier.read_stats();
    assert_eq!(
        after.keylist_reads, before.keylist_reads,
        "cached pages were read again"
    );
    assert_eq!(
        after.svlog_reads - before.svlog_reads,
        gets,
        "one record read per get"
    );
    // A full scan reads the key list in bulk and leaves the cache as it was.
    let used = cache.usage_bytes();
    let tier = Arc::new(tier);
    assert_eq!(tier.iter(b"").unwrap().count(), KEYS as usize);
    assert!(
        cache.usage_bytes() <= used + 4 * 4096,
        "a scan filled the cache"
    );
}

#[test]
fn a_smaller_cache_keeps_one_read_gets_and_caches_their_svlog_pages() {
    // 64 KiB: 16 pages, far less than the key list; the first 300 keys' windows fit.
    let (tier, cache) = tier(64 << 10);
    assert!(tier.reads_once());
    get_all(&tier, 0..300);
    let before = tier.read_stats();
    assert!(before.svlog_reads > 0);
    assert_eq!(
        before.keylist_reads, 0,
        "one-read lookups do not read the key list"
    );
    get_all(&tier, 0..300);
    assert_eq!(
        tier.read_stats(),
        before,
        "cached svlog pages were read again"
    );
    assert!(cache.usage_bytes() <= 64 << 10);
    // Every key still answers through a cache that keeps evicting.
    get_all(&tier, (0..KEYS).step_by(13));
    assert_eq!(tier.read_stats().keylist_reads, 0);
}
