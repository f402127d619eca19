//! The record cache (store/record_cache.rs), for the three tiered engines: a hot key's second
//! read costs no device read, whether an LSM pointer or the learned tier answers it, and a key
//! just written costs none at all (writes go through to the cache); an update,
//! a delete and a GC are seen at once (records are cached where they lie, so a new version is a
//! new entry); and gets stay exact against a BTreeMap through random writes and GCs with a cache
//! small enough to evict.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod support;
use support::{learned, open_on, small};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn tiers() -> [(&'static str, TierKind); 3] {
    [
        ("learnedkv", learned()),
        ("lsm+tier", TierKind::Lsm),
        ("lsm+", TierKind::WriteBack),
    ]
}

/// Device reads of every kind (value logs, tables, the tier) since open.
fn reads(store: &Store) -> u64 {
    store.device_reads().reads
}

fn opts(tier: TierKind, cache: u64) -> StoreOptions {
    let mut o = small(tier);
    o.lsm.block_cache_bytes = cache;
    o
}

#[test]
fn a_hot_key_is_read_from_the_device_once() {
    for (name, tier) in tiers() {
        let storage = MemStorage::new();
        let store = open_on(storage.clone(), &opts(tier.clone(), 1 << 20)).unwrap();
        for i in 0..2_000 {
            store.put(&key(i), format!("v{i}").as_bytes()).unwrap();
        }
        // Written through: a key just written is read without a device read.
        let before = reads(&store);
        assert_eq!(store.get(&key(1_999)).unwrap(), Some(b"v1999".to_vec()));
        assert_eq!(reads(&store), before, "{name}: a key just written was read");
        // A reopened store starts with an empty cache.
        store.close().unwrap();
        let store = open_on(storage, &opts(tier, 1 << 20)).unwrap();
        for settled in [false, true] {
            let k = key(if settled { 77 } else { 1_234 });
            let before = reads(&store);
            let first = store.get(&k).unwrap();
            let after_first = reads(&store);
            assert!(first.is_some(), "{name}");
            assert!(
                after_first > before,
                "{name} settled={settled}: a cold get reads"
            );
            for _ in 0..5 {
                assert_eq!(store.get(&k).unwrap(), first, "{name}");
            }
            assert_eq!(
                reads(&store),
                after_first,
                "{name} settled={settled}: a cached record is read again"
            );
            store.gc().unwrap();
        }
        // A new version, then a deletion, are read at once.
        store.put(&key(77), b"new").unwrap();
        assert_eq!(
            store.get(&key(77)).unwrap(),
            Some(b"new".to_vec()),
            "{name}"
        );
        store.delete(&key(77)).unwrap();
        assert_eq!(store.get(&key(77)).unwrap(), None, "{name}");
        store.close().unwrap();
    }
}

#[test]
fn gets_stay_exact_through_writes_gcs_and_evictions() {
    for (name, tier) in tiers() {
        for seed in 0..3u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // 64 KiB of cache against some 300 KB of records: entries are evicted all along.
            let store = open_on(MemStorage::new(), &opts(tier.clone(), 64 << 10)).unwrap();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for n in 0..6_000u32 {
                // A skewed key choice, so some keys are hot and cached.
                let bound = rng.gen_range(1..2_000u32);
                let i = rng.gen_range(0..bound);
                match rng.gen_range(0..10) {
                    0..=3 => {
                        let v = format!("{name} {seed} write {n} {}", "x".repeat(100)).into_bytes();
                        store.put(&key(i), &v).unwrap();
                        model.insert(key(i), v);
                    }
                    4 => {
                        store.delete(&key(i)).unwrap();
                        model.remove(&key(i));
                    }
                    _ => assert_eq!(
                        store.get(&key(i)).unwrap().as_ref(),
                        model.get(&key(i)),
                        "{name} seed {seed} op {n}"
                    ),
                }
                if n % 1_500 == 1_499 {
                    store.gc().unwrap();
                }
            }
            for (k, v) in &model {
                assert_eq!(
                    store.get(k).unwrap().as_ref(),
                    Some(v),
                    "{name} seed {seed}"
                );
            }
            store.close().unwrap();
        }
    }
}
