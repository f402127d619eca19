//! Model-based tests of the tiered store against a BTreeMap across GC cycles and reopens, for
//! LearnedKV and for lsm+, on in-memory storage. The model tests run seeded cases (lidb-testkit's
//! runner): a failure prints the `LIDB_SEED=<n> LIDB_CASES=1 cargo test ...` line that replays
//! its case alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_kv::{ReadSource, Store, StoreOptions, TierKind};
use lidb_storage::mem::MemStorage;
use lidb_testkit::{Cases, cases};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

mod support;
use support::{learned, small};

fn check(store: &Store, model: &Model, ctx: &str) {
    for (k, v) in model {
        assert_eq!(
            store
                .get(k)
                .unwrap_or_else(|e| panic!("{ctx}: get: {e}"))
                .as_ref(),
            Some(v),
            "{ctx}: key {k:?}"
        );
    }
    let mut it = store.scan(b"", None).unwrap();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "{ctx}: scan length");
    assert!(got == want, "{ctx}: scan differs");
}

/// `steps` random operations drawn from `rng` (the generator of `seed`, which messages name).
fn run(rng: &mut ChaCha8Rng, seed: u64, tier: TierKind, steps: usize) {
    let storage = MemStorage::new();
    let open = || {
        Store::open_with_storage(
            Arc::new(storage.clone()),
            Path::new("/kv"),
            small(tier.clone()),
        )
    };
    let mut store = open().unwrap();
    let mut model = Model::new();
    let ctx = format!("seed {seed} tier {tier:?}");
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        let k = format!("key{:05}", rng.gen_range(0..800u32)).into_bytes();
        match rng.gen_range(0..100) {
            0..=54 => {
                let v: Vec<u8> = (0..rng.gen_range(1..300)).map(|_| rng.r#gen()).collect();
                store
                    .put(&k, &v)
                    .unwrap_or_else(|e| panic!("{ctx}: put: {e}"));
                model.insert(k, v);
            }
            55..=64 => {
                store.delete(&k).unwrap();
                model.remove(&k);
            }
            65..=89 => {
                assert_eq!(
                    store.get(&k).unwrap().as_ref(),
                    model.get(&k),
                    "{ctx}: get {k:?}"
                );
            }
            90..=93 => {
                let end = format!("key{:05}", rng.gen_range(0..800u32)).into_bytes();
                let mut it = store.scan(&k, Some(&end)).unwrap();
                let want: Vec<_> = model
                    .range(k.clone()..)
                    .take_while(|(kk, _)| **kk < end)
                    .collect();
                let mut n = 0;
                while it.valid() {
                    assert_eq!(
                        Some((&it.key().to_vec(), &it.value().to_vec())),
                        want.get(n).copied(),
                        "{ctx}: scan"
                    );
                    n += 1;
                    it.next().unwrap();
                }
                assert_eq!(n, want.len(), "{ctx}: scan length");
            }
            94..=97 => store.gc().unwrap_or_else(|e| panic!("{ctx}: gc: {e}")),
            _ => {
                drop(store);
                store = open().unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            }
        }
    }
    check(&store, &model, &ctx);
    store.gc().unwrap();
    check(&store, &model, &format!("{ctx}, after a last GC"));
    assert!(store.stats().gcs > 0);
    drop(store);
    let store = open().unwrap();
    check(&store, &model, &format!("{ctx}, after reopen"));
}

#[test]
fn learnedkv_matches_a_btreemap_across_gc_and_reopens() {
    cases("learnedkv", 3, |rng, seed| run(rng, seed, learned(), 3_000));
}

#[test]
fn lsm_plus_tier_matches_a_btreemap_across_gc_and_reopens() {
    Cases::new("lsm+tier", 2)
        .base_seed(10)
        .run(|rng, seed| run(rng, seed, TierKind::Lsm, 3_000));
}

#[test]
fn write_back_lsm_plus_matches_a_btreemap_across_gc_and_reopens() {
    Cases::new("lsm+", 2)
        .base_seed(20)
        .run(|rng, seed| run(rng, seed, TierKind::WriteBack, 3_000));
}

#[test]
fn every_tier_family_serves_reads_after_gc() {
    for family in Family::ALL {
        let tier = TierKind::Learned {
            family,
            page_boundary: 4,
            params: Params::new(4),
        };
        let store =
            Store::open_with_storage(Arc::new(MemStorage::new()), Path::new("/kv"), small(tier))
                .unwrap();
        for i in 0..3_000u32 {
            store
                .put(format!("{i:08}").as_bytes(), &i.to_le_bytes().repeat(20))
                .unwrap();
        }
        store.gc().unwrap();
        for i in (0..3_000u32).step_by(7) {
            let (v, src) = store.get_traced(format!("{i:08}").as_bytes()).unwrap();
            assert_eq!(v, Some(i.to_le_bytes().repeat(20)), "{family}: key {i}");
            assert_eq!(
                src,
                ReadSource::Tier,
                "{family}: key {i} should be served by the tier"
            );
        }
    }
}

#[test]
fn readers_and_writers_during_gc_see_the_latest_acknowledged_value() {
    for tier in [learned(), TierKind::WriteBack, TierKind::Lsm] {
        concurrent_gc(tier);
    }
}

/// Two writers (one also running GCs), two readers and the background GC thread at once.
fn concurrent_gc(tier: TierKind) {
    let opts = StoreOptions {
        auto_gc: true,
        over_provisioning: 0.2,
        ..small(tier.clone())
    };
    let name = format!("{tier:?}");
    let store = Arc::new(
        Store::open_with_storage(Arc::new(MemStorage::new()), Path::new("/kv"), opts).unwrap(),
    );
    // Each writer owns its keys and publishes its latest acknowledged version in `done`.
    let done: Arc<Vec<std::sync::atomic::AtomicU32>> = Arc::new(
        (0..400)
            .map(|_| std::sync::atomic::AtomicU32::new(0))
            .collect(),
    );
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let (store, done) = (Arc::clone(&store), Arc::clone(&done));
            std::thread::spawn(move || {
                for version in 1..=40u32 {
                    for i in (w..400).step_by(2) {
                        store
                            .put(
                                format!("k{i:04}").as_bytes(),
                                &version.to_le_bytes().repeat(50),
                            )
                            .unwrap();
                        done[i as usize].store(version, std::sync::atomic::Ordering::SeqCst);
                    }
                    if version % 10 == 0 && w == 0 {
                        store.gc().unwrap();
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (store, done, name) = (Arc::clone(&store), Arc::clone(&done), name.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(r);
                for _ in 0..20_000 {
                    let i = rng.gen_range(0..400usize);
                    let floor = done[i].load(std::sync::atomic::Ordering::SeqCst);
                    let got = store.get(format!("k{i:04}").as_bytes()).unwrap();
                    let version = got.map_or(0, |v| u32::from_le_bytes(v[..4].try_into().unwrap()));
                    assert!(
                        version >= floor,
                        "{name} key {i}: read version {version}, {floor} was acknowledged"
                    );
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    assert!(
        store.stats().gcs >= 4,
        "{name}: GCs run: {}",
        store.stats().gcs
    );
    for i in 0..400usize {
        let v = store.get(format!("k{i:04}").as_bytes()).unwrap().unwrap();
        assert_eq!(
            u32::from_le_bytes(v[..4].try_into().unwrap()),
            40,
            "key {i}"
        );
    }
}

#[test]
fn gc_converts_the_lsm_into_the_learned_tier() {
    let store = Store::open_with_storage(
        Arc::new(MemStorage::new()),
        Path::new("/kv"),
        small(learned()),
    )
    .unwrap();
    for i in 0..5_000u32 {
        store.put(format!("{i:08}").as_bytes(), &[1; 200]).unwrap();
    }
    for i in 0..5_000u32 {
        store.put(format!("{i:08}").as_bytes(), &[2; 200]).unwrap();
    }
    let before = store.space();
    store.gc().unwrap();
    let after = store.space();
    assert!(
        after.key_list_bytes > 0 && after.model_bytes > 0,
        "{after:?}"
    );
    assert!(
        after.vlog_bytes < before.vlog_bytes,
        "GC reclaimed nothing: {before:?} -> {after:?}"
    );
    assert_eq!(store.get(b"00004999").unwrap(), Some(vec![2; 200]));
}

#[test]
fn write_back_gc_puts_every_pointer_back_into_the_one_lsm() {
    let store = Store::open_with_storage(
        Arc::new(MemStorage::new()),
        Path::new("/kv"),
        small(TierKind::WriteBack),
    )
    .unwrap();
    for round in 1..=2u8 {
        for i in 0..3_000u32 {
            store
                .put(format!("{i:08}").as_bytes(), &[round; 200])
                .unwrap();
        }
    }
    let before = store.space();
    store.gc().unwrap();
    let after = store.space();
    assert_eq!(
        (after.key_list_bytes, after.model_bytes),
        (0, 0),
        "{after:?}"
    );
    assert!(
        after.vlog_bytes < before.vlog_bytes,
        "GC reclaimed nothing: {before:?} -> {after:?}"
    );
    // Settled keys are answered by the LSM (there is no tier), with the latest value.
    let (v, src) = store.get_traced(b"00001234").unwrap();
    assert_eq!((v, src), (Some(vec![2; 200]), ReadSource::Lsm));
    assert_eq!(store.stats().reads_from_tier, 0);
}

#[test]
fn gc_forgets_deleted_keys_in_the_live_estimate() {
    let store = Store::open_with_storage(
        Arc::new(MemStorage::new()),
        Path::new("/kv"),
        StoreOptions {
            auto_gc: false,
            ..small(learned())
        },
    )
    .unwrap();
    let put_all = |byte: u8| {
        for i in 0..2_000u32 {
            store
                .put(format!("{i:08}").as_bytes(), &[byte; 200])
                .unwrap();
        }
    };
    put_all(1);
    for i in 0..2_000u32 {
        store.delete(format!("{i:08}").as_bytes()).unwrap();
    }
    store.gc().unwrap();
    let emptied = store.stats().live_bytes_estimate;
    // Writing the deleted keys again adds them as new data: the estimate grows by their size.
    // (A filter that still remembered them would count these puts as updates.)
    put_all(2);
    let grown = store.stats().live_bytes_estimate;
    assert!(
        grown >= emptied + 2_000 * 200,
        "re-inserted keys were not counted as live: {emptied} -> {grown}"
    );
}

#[test]
fn a_store_opens_only_with_the_engine_that_wrote_it() {
    let storage = MemStorage::new();
    let open = |tier: TierKind| {
        Store::open_with_storage(Arc::new(storage.clone()), Path::new("/kv"), small(tier))
    };
    let store = open(TierKind::WriteBack).unwrap();
    store.put(b"k", b"v").unwrap();
    drop(store);
    // Even without a tier on disk, lsm+'s files mean something else to the other engines.
    for other in [learned(), TierKind::Lsm] {
        let err = open(other.clone()).unwrap_err().to_string();
        assert!(err.contains("written by lsm+;"), "{other:?}: {err}");
    }
    assert_eq!(
        open(TierKind::WriteBack).unwrap().get(b"k").unwrap(),
        Some(b"v".to_vec())
    );
}
