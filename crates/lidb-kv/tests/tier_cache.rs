//! The learned tier's page cache: one-read point lookups reuse cached svlog pages and
//! `get_pointer` reuses cached key-list pages (no read the second time), answers are the same as
//! without the cache, and scans do not fill it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::static_tier::{StaticTier, StaticTierBuilder, TierOptions};
use lidb_lsm::storage::ReadMode;
use lidb_lsm::storage::mem::MemStorage;
use lidb_lsm::table::cache::PageCache;

#[test]
fn cached_lookups_read_each_page_once_and_answer_the_same() {
    let storage: Arc<dyn lidb_lsm::storage::Storage> = Arc::new(MemStorage::new());
    let dir = Path::new("/t");
    storage.create_dir_all(dir).unwrap();
    let opts = TierOptions {
        family: Family::Pgm,
        page_boundary: 2,
        params: Params::new(2),
    };
    let mut b = StaticTierBuilder::new(Arc::clone(&storage), dir, 5, opts).unwrap();
    for i in 0..20_000u32 {
        b.add(format!("{i:08}").as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    b.finish().unwrap();
    let cache = Arc::new(PageCache::new(1 << 20));
    let tier = StaticTier::open(Arc::clone(&storage), dir, 5, ReadMode::Buffered)
        .unwrap()
        .with_cache(Arc::clone(&cache));
    for i in (0..20_000u32).step_by(37) {
        assert_eq!(
            tier.get(format!("{i:08}").as_bytes()).unwrap(),
            Some(i.to_le_bytes().to_vec()),
            "key {i}"
        );
    }
    assert_eq!(tier.get(b"zzzz").unwrap(), None);
    assert!(tier.reads_once());
    let before = tier.read_stats();
    assert!(before.svlog_reads > 0);
    assert_eq!(
        before.keylist_reads, 0,
        "one-read lookups do not read the key list"
    );
    for i in (0..20_000u32).step_by(37) {
        assert_eq!(
            tier.get(format!("{i:08}").as_bytes()).unwrap(),
            Some(i.to_le_bytes().to_vec())
        );
    }
    assert_eq!(
        tier.read_stats(),
        before,
        "cached svlog pages were read again"
    );
    // The key list's pages, through get_pointer, are cached the same way: the first pass reads
    // them, the second reads nothing.
    let mut reads = Vec::new();
    for _ in 0..2 {
        let before = tier.read_stats().keylist_reads;
        for i in (0..20_000u32).step_by(37) {
            let p = tier.get_pointer(format!("{i:08}").as_bytes()).unwrap();
            assert_eq!(
                tier.read_value(p.unwrap()).unwrap(),
                i.to_le_bytes().to_vec()
            );
        }
        reads.push(tier.read_stats().keylist_reads - before);
    }
    assert!(
        reads[0] > 0 && reads[1] == 0,
        "key-list reads per pass: {reads:?}"
    );
    // A full scan reads the key list in bulk and leaves the cache as it was.
    let used = cache.usage_bytes();
    let tier = Arc::new(tier);
    assert_eq!(tier.iter(b"").unwrap().count(), 20_000);
    assert!(
        cache.usage_bytes() <= used + 4 * 4096,
        "a scan filled the cache"
    );
}
