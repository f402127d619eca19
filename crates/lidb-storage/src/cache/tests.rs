//! The cache's unit tests: its behaviours one call at a time (the single-shard ones see exact
//! LRU-like order: a small pool is one shard), then shards and threads.

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

/// The pool's usage recomputed from what the shards hold, with every shard's invariants checked
/// (all shards read-locked together, in the lock order, so the sum is one moment's).
pub(super) fn recount(cache: &PageCache) -> u64 {
    let shards: Vec<_> = cache.pool.shards.iter().map(|s| read(s)).collect();
    let n = cache.shard_count();
    let mut usage = 0;
    for (i, s) in shards.iter().enumerate() {
        s.check();
        for slot in s.slots() {
            assert_eq!(
                home(slot.key.hash64(), n),
                i,
                "{:?} lives in its home shard",
                slot.key
            );
        }
        assert_eq!(
            s.capacity_bytes,
            share(cache.capacity_bytes(), n, i),
            "shard {i}'s share"
        );
        usage += s.usage_bytes;
    }
    assert!(
        usage <= cache.capacity_bytes(),
        "{usage} > {}",
        cache.capacity_bytes()
    );
    usage
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

#[test]
fn the_shard_count_follows_the_capacity_and_shares_add_up() {
    assert_eq!(shards_for(0), 1);
    assert_eq!(shards_for(2 * MIN_SHARD_BYTES - 1), 1);
    assert_eq!(shards_for(2 * MIN_SHARD_BYTES), 2);
    assert_eq!(shards_for(7 * MIN_SHARD_BYTES), 4);
    assert_eq!(shards_for(u64::MAX), MAX_SHARDS as u64);
    for (capacity, n) in [(0, 1), (7, 4), (1 << 20, 4), (u64::MAX, 64)] {
        let shares: u128 = (0..MAX_SHARDS)
            .map(|i| u128::from(share(capacity, n, i)))
            .sum();
        assert_eq!(shares, u128::from(capacity), "capacity {capacity} over {n}");
    }
    let cache = PageCache::new(64 << 20);
    assert_eq!(cache.shard_count(), 64);
    cache.set_capacity(MIN_SHARD_BYTES);
    assert_eq!(cache.shard_count(), 1);
    assert_eq!(recount(&cache), 0);
}

#[test]
fn many_shards_keep_every_behaviour_and_a_redivision_moves_pages_home() {
    let a = PageCache::new(64 << 20);
    let b = a.new_namespace_with_mode(CacheMode::Entries);
    for p in 0..512 {
        a.insert(p % 3, p, page(100, (p % 251) as u8));
        b.insert_entry(p % 3, p.wrapping_mul(0x9e37_79b9_7f4a_7c15), page(10, 1));
    }
    assert_eq!((a.len(), a.entry_count()), (512, 512));
    assert_eq!(a.namespace_usage_bytes(), 512 * 100);
    assert_eq!(b.namespace_usage_bytes(), 512 * (10 + ENTRY_OVERHEAD_BYTES));
    assert_eq!(a.usage_bytes(), recount(&a));
    assert_eq!(a.namespaces_cached(), 2);
    // Down to two shards and back to 64: every page moves home twice and is still found.
    a.set_capacity(2 * MIN_SHARD_BYTES);
    assert_eq!(a.shard_count(), 2);
    a.set_capacity(64 << 20);
    assert_eq!(a.shard_count(), 64);
    assert_eq!(a.usage_bytes(), recount(&a));
    for p in 0..512 {
        assert_eq!(
            a.get(p % 3, p).as_deref(),
            Some(&[(p % 251) as u8; 100][..])
        );
    }
    // remove_table reaches every shard, and only its namespace.
    a.remove_table(1);
    assert_eq!(a.len(), 512 - 171);
    assert!(
        (0..512)
            .filter(|p| p % 3 == 1)
            .all(|p| a.get(1, p).is_none())
    );
    assert_eq!(a.entry_count(), 512);
    drop(b);
    assert_eq!((a.entry_count(), a.namespaces_cached()), (0, 1));
    assert_eq!(a.usage_bytes(), recount(&a));
}

/// A random walk over a few keys and capacities that cross shard counts, against a model of the
/// bytes last inserted under each key: a hit returns exactly those bytes, never another key's or
/// an older copy, and a removed table is never found.
#[test]
fn hits_return_the_bytes_last_inserted_across_redivisions() {
    use std::collections::HashMap;
    let mut x = 0x853c_49e6_748f_ea9bu64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let cache = PageCache::new(8 * MIN_SHARD_BYTES);
    let mut model: HashMap<(u64, u64, bool), Arc<[u8]>> = HashMap::new();
    for step in 0..20_000u64 {
        let (table, id, entry) = (next(4), next(64), next(2) == 0);
        match next(100) {
            0..=44 => {
                let bytes = page(next(PAGE_SIZE) as usize + 1, (step % 251) as u8);
                if entry {
                    cache.insert_entry(table, id, Arc::clone(&bytes));
                } else {
                    cache.insert(table, id, Arc::clone(&bytes));
                }
                model.insert((table, id, entry), bytes);
            }
            45..=89 => {
                let got = if entry {
                    cache.get_entry(table, id)
                } else {
                    cache.get(table, id)
                };
                if let Some(got) = got {
                    let want = model.get(&(table, id, entry));
                    assert_eq!(Some(&got), want, "step {step}: a hit is the last insert");
                }
            }
            90..=94 => {
                cache.remove_table(table);
                model.retain(|k, _| k.0 != table);
            }
            _ => cache.set_capacity(next(16 * MIN_SHARD_BYTES)),
        }
        if step % 64 == 0 {
            assert_eq!(cache.usage_bytes(), recount(&cache), "step {step}");
        }
    }
}

/// 12 threads of inserts, hits, removals and capacity changes (crossing shard counts) over a few
/// keys. Every page inserted names its key and its writer in its bytes, so a hit must return a
/// page of its own key, whole; an audit between rounds (every shard locked) finds the pool within
/// its capacity and every page in its home shard. Bounded in rounds and in time.
#[test]
fn threads_hit_their_own_keys_bytes_and_the_pool_stays_within_capacity() {
    const THREADS: u64 = 12;
    const OPS: u64 = 4_000;
    let cache = Arc::new(PageCache::new(4 * MIN_SHARD_BYTES));
    let start = std::time::Instant::now();
    let stamp = |table: u64, p: u64, writer: u64, len: usize| -> Arc<[u8]> {
        let mut b = vec![writer as u8; len.max(16)];
        b.iter_mut()
            .zip(table.to_le_bytes().into_iter().chain(p.to_le_bytes()))
            .for_each(|(d, s)| *d = s);
        b.into()
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let cache = Arc::clone(&cache);
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                let mut hits = 0u64;
                for op in 0..OPS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (table, p) = (x % 3, (x >> 8) % 40);
                    match (x >> 20) % 100 {
                        0..=29 => {
                            let len = ((x >> 32) % PAGE_SIZE) as usize + 1;
                            cache.insert(table, p, stamp(table, p, t, len));
                        }
                        30..=94 => {
                            if let Some(b) = cache.get(table, p) {
                                let (head, body) = b.split_at(16);
                                assert_eq!(head, &stamp(table, p, 0, 16)[..], "its own key");
                                let w = body.first().copied().unwrap_or(0);
                                assert!(body.iter().all(|&c| c == w), "one writer's page");
                                hits += 1;
                            }
                        }
                        95..=97 => cache.remove_table(table),
                        _ => cache.set_capacity(((x >> 40) % 8 + 1) * MIN_SHARD_BYTES / 2),
                    }
                    if op % 500 == 0 {
                        recount(&cache);
                    }
                    if start.elapsed().as_secs() > 60 {
                        break;
                    }
                }
                hits
            })
        })
        .collect();
    let hits: u64 = workers
        .into_iter()
        .map(|w| w.join().unwrap_or_else(|_| panic!("a worker failed")))
        .sum();
    assert!(hits > 0, "some gets hit");
    assert_eq!(cache.usage_bytes(), recount(&cache));
    assert!(cache.usage_bytes() <= cache.capacity_bytes());
}

/// A hit on a slot among its shard's most recent moves answers under the read lock and writes
/// nothing (the order stays as it was); an older one asks for the write lock, and moving it makes
/// it recent. Below 32 slots every hit but the front's moves: an exact LRU.
#[test]
fn a_recent_hit_writes_nothing_and_an_old_one_moves_to_the_front() {
    let key = |id| Key {
        namespace: 0,
        table: 1,
        id,
        kind: Kind::Page,
    };
    let mut shard = Shard::with_capacity(1 << 20);
    for id in 0..64 {
        shard.insert(key(id), page(10, id as u8));
    }
    assert_eq!(shard.recent_window(), 8);
    for id in [63, 59, 55] {
        assert!(matches!(shard.lookup(&key(id)), Lookup::Hit(b) if b.first() == Some(&(id as u8))));
    }
    assert!(matches!(shard.lookup(&key(54)), Lookup::Stale));
    assert!(matches!(shard.lookup(&key(99)), Lookup::Miss));
    assert_eq!(shard.touch(&key(0)).as_deref(), Some(&[0u8; 10][..]));
    assert!(matches!(shard.lookup(&key(0)), Lookup::Hit(_)));
    assert!(
        matches!(shard.lookup(&key(55)), Lookup::Stale),
        "one move went in front"
    );
    shard.check();
    // Evicting down takes the least recent first: 1, 2, ... (0 was moved to the front).
    shard.set_capacity(10 * 10);
    let kept: Vec<u64> = (0..64)
        .filter(|&id| shard.peek(&key(id)).is_some())
        .collect();
    assert_eq!(kept, [0, 55, 56, 57, 58, 59, 60, 61, 62, 63]);
    shard.check();
    let small = PageCache::new(1 << 20);
    small.insert(1, 0, page(10, 0));
    small.insert(1, 1, page(10, 1));
    let n = small.shard_count();
    let s = read(
        small.pool.shard(home(
            Key {
                namespace: 0,
                table: 1,
                id: 0,
                kind: Kind::Page,
            }
            .hash64(),
            n,
        )),
    );
    assert_eq!(s.recent_window(), 0, "a small shard is an exact LRU");
}

#[test]
fn an_entry_removed_is_gone_and_no_longer_charged() {
    let cache = PageCache::new(4 * PAGE_SIZE);
    cache.insert_entry(1, 99, page(100, 7));
    cache.insert_entry(1, 98, page(50, 8));
    cache.insert(1, 99, page(PAGE_SIZE as usize, 9));
    cache.remove_entry(1, 99);
    assert!(cache.get_entry(1, 99).is_none());
    // The other entry and the page of the same number stay.
    assert!(cache.get_entry(1, 98).is_some());
    assert!(cache.get(1, 99).is_some());
    assert_eq!(cache.usage_bytes(), 50 + ENTRY_OVERHEAD_BYTES + PAGE_SIZE);
    assert_eq!(cache.usage_bytes(), recount(&cache));
    // Removing what is not cached changes nothing.
    cache.remove_entry(1, 99);
    cache.remove_entry(7, 1);
    assert_eq!(cache.entry_count(), 1);
}
