//! The store's one page cache: every LSM it opens (active, frozen, lsm+tier's tier)
//! and every static tier reads through a namespace of its own in one pool. Model-based against a
//! BTreeMap over puts, deletes, scans, GC, conversion and reopens, for the three engines, with a
//! tiny and a roomier cache: the answers are the model's (no part is answered from another part's
//! page, though their table numbers collide), the pool never exceeds its capacity, and the pages
//! of a part that went away (a frozen LSM after GC, an old tier) leave the pool. Failure messages
//! name the seed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

mod support;
use support::{learned, small};

/// The cache's invariants with no reader holding an old view: within capacity, and pages of at
/// most the current view's parts (active LSM and tier; no frozen LSM outside a GC).
fn check_cache(store: &Store, capacity: u64, ctx: &str) {
    let usage = store.memory().cache_bytes;
    assert!(
        usage <= capacity,
        "{ctx}: cache {usage} > capacity {capacity}"
    );
    assert_eq!(store.cache_capacity_bytes(), capacity, "{ctx}");
    let parts = store.cached_parts();
    assert!(
        parts <= 2,
        "{ctx}: pages of {parts} parts cached, the view has 2"
    );
}

fn check_all(store: &Store, model: &Model, ctx: &str) {
    for (k, v) in model {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{ctx}: key {k:?}");
    }
    let mut it = store.scan(b"", None).unwrap();
    let mut got = Model::new();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next().unwrap();
    }
    assert!(got == *model, "{ctx}: scan differs from the model");
}

fn run(seed: u64, tier: TierKind, capacity: u64, steps: usize) {
    let storage = MemStorage::new();
    let mut opts: StoreOptions = small(tier.clone());
    opts.lsm.block_cache_bytes = capacity;
    let open =
        || Store::open_with_storage(Arc::new(storage.clone()), Path::new("/kv"), opts.clone());
    let mut store = open().unwrap();
    let mut model = Model::new();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ctx = format!("seed {seed} tier {tier:?} cache {capacity}");
    let converts = matches!(tier, TierKind::Learned { .. });
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        let k = format!("key{:05}", rng.gen_range(0..1500u32)).into_bytes();
        match rng.gen_range(0..100) {
            0..=49 => {
                let v: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.r#gen()).collect();
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            50..=56 => {
                store.delete(&k).unwrap();
                model.remove(&k);
            }
            57..=89 => {
                assert_eq!(
                    store.get(&k).unwrap().as_ref(),
                    model.get(&k),
                    "{ctx}: get {k:?}"
                );
            }
            90..=92 => store.flush().unwrap(),
            93..=95 => store.gc().unwrap_or_else(|e| panic!("{ctx}: gc: {e}")),
            96..=97 if converts => store
                .convert()
                .unwrap_or_else(|e| panic!("{ctx}: convert: {e}")),
            96..=97 => store.compact().unwrap(),
            _ => {
                drop(store);
                store = open().unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            }
        }
        check_cache(&store, capacity, &ctx);
    }
    check_all(&store, &model, &ctx);
    check_cache(&store, capacity, &ctx);
    store.gc().unwrap();
    check_all(&store, &model, &format!("{ctx}, after a last GC"));
    check_cache(&store, capacity, &ctx);
    assert!(store.stats().gcs > 0, "{ctx}: GC ran");
    assert!(
        store.memory().cache_bytes > 0,
        "{ctx}: reads went through the cache"
    );
}

#[test]
fn learnedkv_shares_one_cache_within_its_capacity() {
    for (seed, capacity) in [(1, 16 * 1024), (2, 1 << 20)] {
        run(seed, learned(), capacity, 4_000);
    }
}

#[test]
fn lsm_plus_tier_shares_one_cache_within_its_capacity() {
    for (seed, capacity) in [(11, 16 * 1024), (12, 1 << 20)] {
        run(seed, TierKind::Lsm, capacity, 4_000);
    }
}

#[test]
fn lsm_plus_shares_one_cache_within_its_capacity() {
    for (seed, capacity) in [(21, 16 * 1024), (22, 1 << 20)] {
        run(seed, TierKind::WriteBack, capacity, 4_000);
    }
}

/// A resized cache keeps its capacity across GC: the parts GC makes join the same pool.
#[test]
fn a_resized_cache_keeps_its_capacity_across_gc_and_conversion() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let store = Store::open_with_storage(
            Arc::new(MemStorage::new()),
            Path::new("/kv"),
            small(tier.clone()),
        )
        .unwrap();
        let value = |i: u32, r: u32| (i ^ r).to_le_bytes().repeat(30);
        for r in 0..3u32 {
            for i in 0..2_000u32 {
                store
                    .put(format!("k{i:05}").as_bytes(), &value(i, r))
                    .unwrap();
            }
            store.flush().unwrap();
            if r == 0 {
                store.set_cache_bytes(24 * 1024);
            }
            store.gc().unwrap();
            if matches!(tier, TierKind::Learned { .. }) {
                store.convert().unwrap();
            }
            for i in (0..2_000u32).step_by(3) {
                assert_eq!(
                    store.get(format!("k{i:05}").as_bytes()).unwrap(),
                    Some(value(i, r)),
                    "{tier:?} round {r}"
                );
            }
            check_cache(&store, 24 * 1024, &format!("{tier:?} round {r}"));
        }
    }
}

/// The key filters are sized by the keys known, not by a guess: open gives each a first stage of
/// 64K keys at 10 bits (80 KiB; a million-key floor gave 2.5 MB), and after GC 20,000 keys of
/// 1 KiB values keep them there. The every-key filter still knows every key (updates after the
/// GC are not counted as new live data).
#[test]
fn gc_sizes_the_every_key_filter_by_the_keys_written() {
    let store = Store::open_with_storage(
        Arc::new(MemStorage::new()),
        Path::new("/kv"),
        small(learned()),
    )
    .unwrap();
    let before = store.memory().filter_bytes;
    for i in 0..20_000u32 {
        store.put(&i.to_be_bytes(), &[7u8; 1000]).unwrap();
    }
    store.gc().unwrap();
    let after = store.memory().filter_bytes;
    assert!(
        before <= 2 * 81_920,
        "the open-time filters: {before} bytes"
    );
    assert!(after < 400_000, "after GC: {after} bytes of filters");
    let live = store.stats().live_bytes_estimate;
    for i in 0..20_000u32 {
        store.put(&i.to_be_bytes(), &[8u8; 1000]).unwrap();
    }
    assert_eq!(
        store.stats().live_bytes_estimate,
        live,
        "updates counted as new keys"
    );
    assert_eq!(
        store.get(&7u32.to_be_bytes()).unwrap(),
        Some(vec![8u8; 1000])
    );
}

/// The key filters grow with the keys written (a stage of twice the keys when one fills), and
/// under a held budget the cache gives back what each growth takes, without a GC: 150,000
/// inserts grow the every-key filter from 64K keys to 192K. (A store with no tier yet has no LSM
/// read filter: every key is in its LSM.)
#[test]
fn growing_key_filters_take_their_memory_from_the_cache() {
    let mut opts = small(learned());
    // No flush: the LSM's own tables and filters stay as they are, only the key filters grow.
    opts.lsm.write_buffer_bytes = 64 << 20;
    let store =
        Store::open_with_storage(Arc::new(MemStorage::new()), Path::new("/kv"), opts).unwrap();
    let budget = 8 << 20;
    let opened = store.memory();
    let cache = store.hold_memory_budget(budget);
    assert_eq!(cache, budget - opened.index_bytes - opened.filter_bytes);
    for i in 0..150_000u32 {
        store.put(&i.to_be_bytes(), b"v").unwrap();
    }
    let grown = store.memory();
    // 64K + 128K keys at 10 and 11 bits: 262,144 bytes, from 81,920.
    assert_eq!(
        opened.filter_bytes, 81_920,
        "the every-key filter's first stage, alone"
    );
    assert!(
        grown.filter_bytes >= opened.filter_bytes + 180_224,
        "filters {} bytes at open, {} after 150,000 keys",
        opened.filter_bytes,
        grown.filter_bytes
    );
    assert_eq!(
        store.cache_capacity_bytes(),
        budget - grown.index_bytes - grown.filter_bytes,
        "the cache did not give the grown filters their room"
    );
    assert!(
        (0..150_000u32)
            .step_by(7)
            .all(|i| store.get(&i.to_be_bytes()).unwrap().is_some())
    );
}

/// A held budget is refitted by GC: when a GC changes the resident part (a new LSM, the tier's
/// model, a fresh every-key Bloom), the cache gets what the new resident part leaves, so
/// resident + cache capacity stay at the budget after the GC without a call from outside.
#[test]
fn a_held_budget_is_refitted_when_gc_changes_the_resident_part() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let store = Store::open_with_storage(
            Arc::new(MemStorage::new()),
            Path::new("/kv"),
            small(tier.clone()),
        )
        .unwrap();
        for i in 0..20_000u32 {
            store.put(&i.to_be_bytes(), &[3u8; 200]).unwrap();
        }
        let resident = |s: &Store| {
            let m = s.memory();
            m.index_bytes + m.filter_bytes
        };
        let budget = 4 << 20;
        let before = resident(&store);
        let cache = store.hold_memory_budget(budget);
        assert_eq!(cache, budget - before, "{tier:?}");
        assert_eq!(store.cache_capacity_bytes(), cache, "{tier:?}");
        store.gc().unwrap();
        let after = resident(&store);
        assert_ne!(after, before, "{tier:?}: GC changed the resident part");
        assert_eq!(
            store.cache_capacity_bytes(),
            budget - after,
            "{tier:?}: refitted at the install"
        );
        assert!(after + store.memory().cache_bytes <= budget, "{tier:?}");
        for i in (0..20_000u32).step_by(97) {
            assert_eq!(store.get(&i.to_be_bytes()).unwrap(), Some(vec![3u8; 200]));
        }
    }
}
