//! The row cache in front of `LearnedStore`'s gets: against a BTreeMap (learned path on and off,
//! a pool small enough to evict, checkpoints, reopens, the cache resized to nothing and back);
//! and hot keys read while they are written, where every writer reads its own write back and
//! every reader's versions of a key never go backwards, so an entry left stale by a fill racing
//! a write fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;

use lidb_btree::{LearnedStore, LearnedStoreOptions, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn options(learned: bool, row_cache_bytes: u64) -> LearnedStoreOptions {
    let mut o = LearnedStoreOptions {
        tree: Options {
            pool_bytes: 32 * 4096,
            direct_io: false,
            ..Options::default()
        },
        row_cache_bytes,
        ..LearnedStoreOptions::default()
    };
    o.wal.sync = false;
    o.wal.checkpoint_log_bytes = 64 << 10;
    o.learned.enabled = learned;
    o
}

#[test]
fn matches_a_btreemap_with_the_row_cache_on() {
    for seed in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let opts = options(seed % 2 == 0, 64 << 10);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut store = LearnedStore::open(dir.path(), &opts).unwrap();
        let mut hits = 0;
        for step in 0..8000u64 {
            let ctx = format!("seed {seed} step {step}");
            // A few hundred keys, so that gets hit the cache; values up to 600 bytes, so that
            // the leaves split and the pool evicts.
            let k = format!("user{:05}", rng.gen_range(0..400u32)).into_bytes();
            match rng.gen_range(0..1000) {
                0..300 => {
                    let v = vec![(step % 251) as u8; rng.gen_range(0..600)];
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                300..400 => {
                    let had = model.remove(&k).is_some();
                    assert_eq!(store.delete(&k).unwrap(), had, "{ctx}");
                }
                400..700 => assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}"),
                700..990 => {
                    if let Some(v) = store.get_if_in_memory(&k).unwrap() {
                        assert_eq!(v, model.get(&k).cloned(), "{ctx}: memory-only get");
                    }
                }
                990..994 => store.checkpoint().unwrap(),
                994..997 => {
                    store.resize_row_cache(0);
                    assert_eq!(store.row_cache_stats().usage_bytes, 0, "{ctx}");
                    store.resize_row_cache(64 << 10);
                }
                _ => {
                    hits += store.row_cache_stats().hits;
                    store.close().unwrap();
                    store = LearnedStore::open(dir.path(), &opts).unwrap();
                    assert_eq!(store.row_cache_stats().usage_bytes, 0, "{ctx}: reopened");
                }
            }
        }
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "seed {seed} end");
        }
        let s = store.row_cache_stats();
        hits += s.hits;
        assert!(hits > 300, "seed {seed}: {hits} row cache hits");
        assert!(s.usage_bytes <= s.capacity_bytes, "seed {seed}: {s:?}");
        assert!(store.stats().pool.evictions > 0, "seed {seed}: no eviction");
        store.close().unwrap();
    }
}

/// `key`'s value at `version`: the version first, so a reader can order what it read.
fn value(version: u64) -> Vec<u8> {
    let mut v = version.to_le_bytes().to_vec();
    v.resize(64, (version % 251) as u8);
    v
}

fn version_of(value: &[u8]) -> u64 {
    u64::from_le_bytes(value[..8].try_into().unwrap())
}

#[test]
fn hot_keys_read_while_written_are_never_stale() {
    for learned in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LearnedStore::open(dir.path(), &options(learned, 1 << 20)).unwrap());
        const KEYS: u64 = 8;
        const WRITERS: u64 = 2;
        let key = |i: u64| format!("hot{i}").into_bytes();
        for i in 0..KEYS {
            store.put(&key(i), &value(0)).unwrap();
        }
        let handles: Vec<_> = (0..WRITERS + 4)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(t);
                    let mut seen = [0u64; KEYS as usize];
                    for step in 1..=6000u64 {
                        if t < WRITERS {
                            // Writer t owns keys t, t + WRITERS, ...; its versions only grow,
                            // and it reads each write back (through the row cache).
                            let i = t + WRITERS * rng.gen_range(0..KEYS / WRITERS);
                            store.put(&key(i), &value(step)).unwrap();
                            let back = store.get(&key(i)).unwrap().unwrap();
                            assert_eq!(
                                version_of(&back),
                                step,
                                "writer {t} key {i} (learned {learned})"
                            );
                        } else {
                            let i = rng.gen_range(0..KEYS);
                            let v = version_of(&store.get(&key(i)).unwrap().unwrap());
                            assert!(
                                v >= seen[i as usize],
                                "reader {t} key {i}: version {v} after {} (learned {learned})",
                                seen[i as usize]
                            );
                            seen[i as usize] = v;
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = store.row_cache_stats();
        assert!(s.hits > 1000 && s.misses > 100, "learned {learned}: {s:?}");
    }
}
