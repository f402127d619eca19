//! Splits patch the mapping table (learned/patch.rs) while learned lookups race them: a writer
//! fills the gaps between loaded keys (splitting most leaves) while readers check every answer
//! against what the writer has published; with the background rebuild kept off, the table built
//! before the splits then serves every key through its patched slots. The seed is printed in
//! every assertion message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use lidb_btree::{LearnedStats, LearnedStore, LearnedStoreOptions, Options};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Loaded keys are `8 * i`; the writer inserts `8 * i + 1 ..= 8 * i + 6`; `8 * i + 7` is never
/// written.
const LOADED: u64 = 2500;

fn options() -> LearnedStoreOptions {
    let mut o = LearnedStoreOptions {
        tree: Options {
            pool_bytes: 8192 * 4096, // everything resident: the race is about the table
            direct_io: false,
            ..Options::default()
        },
        ..LearnedStoreOptions::default()
    };
    o.wal.sync = false;
    o.wal.checkpoint_log_bytes = 0;
    // No background rebuild: whatever the learned path answers after a split, it answers
    // through the table built before it, patched.
    o.learned.tolerance = f64::INFINITY;
    o
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:010}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(24 + (i % 40) as usize, (i % 251) as u8);
    v
}

/// The counters at four points of a race: before it, after it, after a first full pass and
/// after a second one; and the answers the readers checked during it.
struct Race {
    before: LearnedStats,
    raced: LearnedStats,
    first: LearnedStats,
    second: LearnedStats,
    checked: u64,
}

/// Loads every 8th key, builds the table, then races a writer filling the gaps (splitting most
/// leaves) with two readers checked against what the writer has published; then two full
/// passes over every key, each checked. `skip_patches`: the patches off (the broken variant).
fn race(seed: u64, skip_patches: bool) -> Race {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LearnedStore::open(dir.path(), &options()).unwrap());
    store.set_skip_patches_for_test(skip_patches);
    for i in 0..LOADED {
        store.put(&key(8 * i), &value(8 * i)).unwrap();
    }
    store.retrain_learned().unwrap();
    let before = store.learned_stats();
    let mut inserts: Vec<u64> = (0..LOADED)
        .flat_map(|i| (1..=6).map(move |d| 8 * i + d))
        .collect();
    inserts.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let inserts = Arc::new(inserts);
    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicBool::new(false));

    let writer = {
        let (store, inserts, done) = (store.clone(), inserts.clone(), done.clone());
        std::thread::spawn(move || {
            for (j, &k) in inserts.iter().enumerate() {
                store.put(&key(k), &value(k)).unwrap();
                done.store(j + 1, Ordering::Release);
            }
        })
    };
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (store, inserts) = (store.clone(), inserts.clone());
            let (done, finished) = (done.clone(), finished.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 100 + r);
                let mut checked = 0u64;
                while !finished.load(Ordering::Acquire) {
                    let published = done.load(Ordering::Acquire);
                    let ctx = format!("seed {seed} reader {r} after {published} inserts");
                    match rng.gen_range(0..4) {
                        0 => {
                            let k = 8 * rng.gen_range(0..LOADED);
                            assert_eq!(store.get(&key(k)).unwrap(), Some(value(k)), "{ctx}: {k}");
                        }
                        1 if published > 0 => {
                            let k = inserts[rng.gen_range(0..published)];
                            assert_eq!(store.get(&key(k)).unwrap(), Some(value(k)), "{ctx}: {k}");
                        }
                        2 => {
                            let k = 8 * rng.gen_range(0..LOADED) + 7;
                            assert_eq!(store.get(&key(k)).unwrap(), None, "{ctx}: {k}");
                        }
                        _ => {
                            // Not yet published: absent, or present with its own value.
                            let k = inserts
                                [rng.gen_range(published.min(inserts.len() - 1)..inserts.len())];
                            let got = store.get(&key(k)).unwrap();
                            assert!(got.is_none() || got == Some(value(k)), "{ctx}: {k}");
                        }
                    }
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    writer.join().unwrap();
    finished.store(true, Ordering::Release);
    let checked: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let raced = store.learned_stats();
    let all = |ctx: &str| {
        for i in 0..LOADED * 8 {
            let want = (i % 8 != 7).then(|| value(i));
            assert_eq!(store.get(&key(i)).unwrap(), want, "seed {seed} {ctx}: {i}");
        }
    };
    all("first pass");
    let first = store.learned_stats();
    all("second pass");
    let second = store.learned_stats();
    Race {
        before,
        raced,
        first,
        second,
        checked,
    }
}

#[test]
fn splits_patch_the_table_while_learned_lookups_race_them() {
    let seed = 11u64;
    let Race {
        before,
        raced,
        first,
        second,
        checked,
    } = race(seed, false);
    assert!(
        checked > 1000,
        "seed {seed}: readers checked only {checked} answers"
    );
    assert!(raced.smos > before.smos + 100, "seed {seed}: {raced:?}");
    assert!(raced.table_patches > 0, "seed {seed}: {raced:?}");
    assert_eq!(
        raced.table_retrains, before.table_retrains,
        "seed {seed}: the table was rebuilt"
    );
    assert_eq!(raced.slots, before.slots, "seed {seed}");
    // The first pass patches any slot a split left unpatched (a miss patches); the second is
    // answered by the learned path alone, through a table built before every split.
    assert_eq!(
        second.hits - first.hits,
        second.lookups - first.lookups,
        "seed {seed}: {first:?} -> {second:?}"
    );
    assert_eq!(second.table_retrains, before.table_retrains, "seed {seed}");
    println!(
        "seed {seed}: {checked} raced answers; {} splits patched into {} slots",
        raced.smos - before.smos,
        before.slots
    );
}

/// The same race with the patches switched off (a test-only hook): the answers stay right (the
/// fence check and the walk), but the second pass misses on the keys splits moved out of their
/// slot's leaf, which is what the patches remove; this test asserts that it does.
#[test]
fn without_the_patches_split_leaves_miss_until_a_rebuild() {
    let seed = 11u64;
    let Race {
        before,
        first,
        second,
        ..
    } = race(seed, true);
    assert_eq!(second.table_patches, before.table_patches, "seed {seed}");
    assert_eq!(second.table_retrains, before.table_retrains, "seed {seed}");
    let missed = second.mispredictions - first.mispredictions;
    assert!(
        missed > (second.lookups - first.lookups) / 4,
        "seed {seed}: only {missed} misses without patches: {second:?}"
    );
    println!(
        "seed {seed}, patches off: {missed} of {} lookups missed in the second pass",
        second.lookups - first.lookups
    );
}

/// A table built before a bulk load (one slot: the blob the checkpoint saved) meets a tree of
/// many leaves: the first miss patches the slot with a long split list, which also wakes the
/// full rebuild, so the model, not a binary search over the list, serves the lookups after it.
#[test]
fn a_long_split_list_wakes_the_full_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.learned.tolerance = 1.0;
    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    let pairs = (0..LOADED * 8).map(|i| (key(i), value(i)));
    store.tree().bulk_load(pairs, 0.9).unwrap();
    store.checkpoint().unwrap();
    store.close().unwrap();
    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    let before = store.learned_stats();
    assert_eq!(before.slots, 1, "{before:?}");
    assert_eq!(store.get(&key(5)).unwrap(), Some(value(5)));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while store.learned_stats().table_retrains == before.table_retrains {
        assert!(std::time::Instant::now() < deadline, "no rebuild woke");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let after = store.learned_stats();
    assert!(after.table_patches > before.table_patches, "{after:?}");
    assert!(after.slots > 100, "{after:?}");
    for i in (0..LOADED * 8).step_by(37) {
        assert_eq!(store.get(&key(i)).unwrap(), Some(value(i)), "{i}");
    }
}

/// The checkpoint folds the split lists into the table it saves: after a restart the leaves of
/// patched splits are slots of their own, so every lookup is a hit and none a misprediction
/// (before the fold, the saved table had only the slots from before the splits, and each
/// lookup of a split range missed and walked the tree).
#[test]
fn a_restart_keeps_the_patched_splits() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options();
    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    for i in 0..LOADED {
        store.put(&key(8 * i), &value(8 * i)).unwrap();
    }
    store.retrain_learned().unwrap();
    let before = store.learned_stats();
    for i in 0..LOADED {
        for d in 1..=6 {
            store.put(&key(8 * i + d), &value(8 * i + d)).unwrap();
        }
    }
    let patched = store.learned_stats();
    assert!(patched.table_patches > 0, "{patched:?}");
    assert_eq!(patched.slots, before.slots, "no rebuild ran: {patched:?}");
    store.close().unwrap();

    let store = LearnedStore::open(dir.path(), &opts).unwrap();
    let opened = store.learned_stats();
    assert!(
        matches!(
            store.learned_source(),
            lidb_btree::LearnedSource::Loaded { .. }
        ),
        "{:?}",
        store.learned_source()
    );
    assert!(
        opened.slots > before.slots * 2,
        "the saved table has {} slots, the one before the splits {}",
        opened.slots,
        before.slots
    );
    for i in 0..LOADED * 8 {
        let want = (i % 8 != 7).then(|| value(i));
        assert_eq!(store.get(&key(i)).unwrap(), want, "{i}");
    }
    let after = store.learned_stats();
    assert_eq!(after.mispredictions, opened.mispredictions, "{after:?}");
    assert_eq!(after.fallbacks, opened.fallbacks, "{after:?}");
    assert_eq!(after.hits - opened.hits, LOADED * 8, "{after:?}");
}
