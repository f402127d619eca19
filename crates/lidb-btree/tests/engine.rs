//! The engine users open (`LearnedStore`: the tree under its log in one directory) against a
//! BTreeMap model across checkpoints, clean closes and drops without close (the log replays what
//! the last checkpoint lacks), with a pool small enough to evict; a second open of a directory
//! in use is refused; a value over the limit is refused before it is logged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;

use lidb_btree::{Error, LearnedStore, LearnedStoreOptions, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn options(sync: bool) -> LearnedStoreOptions {
    let mut o = LearnedStoreOptions {
        tree: Options {
            pool_bytes: 48 * 4096,
            direct_io: false,
            ..Options::default()
        },
        ..LearnedStoreOptions::default()
    };
    o.wal.sync = sync;
    o.wal.checkpoint_log_bytes = 64 << 10;
    o
}

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    format!("user{:06}", rng.gen_range(0..4000u32)).into_bytes()
}

fn check(store: &LearnedStore, model: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let all = store.scan(b"", None, usize::MAX).unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all.len(), want.len(), "{ctx}: entries");
    assert!(all == want, "{ctx}: full scan differs");
}

#[test]
fn matches_a_btreemap_across_checkpoints_closes_and_drops() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let opts = options(seed % 2 == 0);
        let mut model = BTreeMap::new();
        let mut store = LearnedStore::open(dir.path(), &opts).unwrap();
        for step in 0..6000 {
            let ctx = format!("seed {seed} step {step}");
            let k = key(&mut rng);
            match rng.gen_range(0..1000) {
                0..600 => {
                    let v = vec![(step % 251) as u8; rng.gen_range(0..300)];
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                600..850 => {
                    let had = model.remove(&k).is_some();
                    assert_eq!(store.delete(&k).unwrap(), had, "{ctx}");
                }
                850..995 => assert_eq!(store.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}"),
                995..997 => store.checkpoint().unwrap(),
                997..999 => {
                    store.close().unwrap();
                    store = LearnedStore::open(dir.path(), &opts).unwrap();
                    check(&store, &model, &ctx);
                }
                _ => {
                    // A drop without close: what the log holds is replayed at the next open.
                    store.flush().unwrap();
                    drop(store);
                    store = LearnedStore::open(dir.path(), &opts).unwrap();
                    check(&store, &model, &ctx);
                }
            }
        }
        check(&store, &model, &format!("seed {seed} end"));
        let stats = store.stats();
        assert!(
            stats.pool.evictions > 0,
            "seed {seed}: the pool never evicted"
        );
        store.close().unwrap();
    }
}

#[test]
fn a_directory_in_use_is_refused_and_oversized_values_are_not_logged() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(true);
    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    store.put(b"k", b"v").unwrap();
    assert!(
        LearnedStore::open(dir.path(), &opts).is_err(),
        "a second open must fail"
    );
    let huge = vec![0u8; 4096];
    assert!(matches!(store.put(b"big", &huge), Err(Error::TooLarge(_))));
    store.close().unwrap();
    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(store.get(b"big").unwrap(), None);
    assert_eq!(store.recovery_report().cut, None);
    store.close().unwrap();
}
