//! Model-based tests: FineIndex against a BTreeMap over seeded random operations (every
//! operation, scans included), with small bins and small thresholds so that level-bin and model
//! retraining run all the time. Each failure prints its seed and step.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::collections::BTreeMap;

use lidb_fine::{Config, FineError, FineIndex, predict_window};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[path = "common/key_shapes.rs"]
mod key_shapes;

/// Tiny bins and models: level-bin retraining after a handful of inserts, and model retraining
/// at the paper's trigger (a small model needs a smaller one) without amortisation.
fn tiny() -> Config {
    Config {
        root_slots: 2,
        child_slots: 2,
        threshold: 2,
        learning_step: 4,
        learning_rate: 0.5,
        model_retrain_after_nested: 1,
        model_retrain_divisor: 0,
    }
}

fn check_all(ix: &FineIndex, model: &BTreeMap<u64, u64>, ctx: &str) {
    let all = ix.range(0, u64::MAX, usize::MAX);
    let want: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(all, want, "{ctx}: full scan");
}

/// Runs `steps` random operations over keys drawn by `key` and compares every answer.
fn run(seed: u64, cfg: Config, steps: usize, key: &dyn Fn(&mut ChaCha8Rng) -> u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let initial: Vec<(u64, u64)> = {
        let mut m = BTreeMap::new();
        for _ in 0..rng.gen_range(0..200) {
            let k = key(&mut rng);
            m.insert(k, k ^ 0xabc);
        }
        m.into_iter().collect()
    };
    let ix = FineIndex::bulk_load(&initial, cfg).unwrap();
    let mut model: BTreeMap<u64, u64> = initial.iter().copied().collect();
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        let k = key(&mut rng);
        let v = rng.r#gen::<u64>();
        match rng.gen_range(0..100) {
            0..=34 => assert_eq!(ix.insert(k, v), model.insert(k, v), "{ctx}: insert {k}"),
            35..=44 => {
                let want = model.get(&k).copied();
                if want.is_some() {
                    model.insert(k, v);
                }
                assert_eq!(ix.update(k, v), want, "{ctx}: update {k}");
            }
            45..=54 => {
                let want = model.get(&k).copied();
                let new = want.map_or(1, |x| x.wrapping_add(1));
                model.insert(k, new);
                assert_eq!(
                    ix.upsert(k, |old| old.map_or(1, |x| x.wrapping_add(1))),
                    want,
                    "{ctx}: upsert {k}"
                );
            }
            55..=69 => assert_eq!(ix.remove(k), model.remove(&k), "{ctx}: remove {k}"),
            70..=89 => assert_eq!(ix.get(k), model.get(&k).copied(), "{ctx}: get {k}"),
            90..=97 => {
                let hi = k.saturating_add(rng.gen_range(0..1000));
                let limit = rng.gen_range(1..50);
                let want: Vec<(u64, u64)> = model
                    .range(k..=hi)
                    .take(limit)
                    .map(|(&k, &v)| (k, v))
                    .collect();
                assert_eq!(
                    ix.range(k, hi, limit),
                    want,
                    "{ctx}: range {k}..={hi} limit {limit}"
                );
            }
            _ => {
                ix.retrain_models();
            }
        }
    }
    check_all(&ix, &model, &format!("seed {seed} end"));
    for (&k, &v) in &model {
        assert_eq!(ix.get(k), Some(v), "seed {seed} end: get {k}");
    }
    let s = ix.stats();
    assert!(s.load_factor <= 1.0, "seed {seed}: {s:?}");
    assert_eq!(
        s.live_trained + s.bin_entries,
        model.len() as u64,
        "seed {seed}: {s:?}"
    );
}

#[test]
fn dense_keys_with_tiny_bins() {
    for seed in 0..40 {
        run(seed, tiny(), 2_000, &|r| r.gen_range(0..300));
    }
}

#[test]
fn sparse_keys_with_tiny_bins() {
    for seed in 100..120 {
        run(seed, tiny(), 2_000, &|r| r.gen_range(0..1_000_000));
    }
}

#[test]
fn extremes_and_clusters() {
    for seed in 200..220 {
        run(seed, tiny(), 2_000, &|r| match r.gen_range(0..4) {
            0 => r.gen_range(0..8),
            1 => u64::MAX - r.gen_range(0..8),
            2 => (1 << 40) + r.gen_range(0..64),
            _ => r.r#gen(),
        });
    }
}

#[test]
fn default_bins_and_paper_parameters() {
    for seed in 300..304 {
        let cfg = Config {
            model_retrain_divisor: 0,
            ..Config::default()
        };
        run(seed, cfg, 20_000, &|r| r.gen_range(0..20_000));
    }
}

#[test]
fn ascending_and_descending_inserts_nest_and_merge() {
    for (name, keys) in [
        ("ascending", (1..3_000u64).collect::<Vec<_>>()),
        ("descending", (1..3_000u64).rev().collect()),
    ] {
        for auto in [0, 1] {
            let cfg = Config {
                model_retrain_after_nested: auto,
                ..tiny()
            };
            let ix = FineIndex::new(cfg).unwrap();
            for &k in &keys {
                assert_eq!(ix.insert(k, k * 3), None, "{name} auto {auto}: {k}");
            }
            let s = ix.stats();
            assert!(s.level_bin_retrains > 0, "{name}: {s:?}");
            if auto == 1 {
                assert!(s.model_retrains > 0, "{name}: {s:?}");
            }
            let all = ix.range(0, u64::MAX, usize::MAX);
            assert_eq!(all.len(), keys.len(), "{name} auto {auto}");
            assert!(all.iter().all(|&(k, v)| v == k * 3));
            assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
            ix.retrain_models();
            let s = ix.stats();
            assert_eq!(s.small_models, 0, "{name}: {s:?}");
            assert_eq!(
                ix.range(0, u64::MAX, usize::MAX),
                all,
                "{name} after retraining"
            );
        }
    }
}

#[test]
fn bulk_load_refuses_bad_input() {
    assert_eq!(
        FineIndex::bulk_load(&[(1, 1), (1, 2)], Config::default()).err(),
        Some(FineError::Unsorted { position: 1 })
    );
    assert!(matches!(
        FineIndex::new(Config {
            root_slots: 1,
            ..Config::default()
        }),
        Err(FineError::InvalidConfig(_))
    ));
    assert!(matches!(
        FineIndex::new(Config {
            root_slots: 8,
            child_slots: 4,
            ..Config::default()
        }),
        Err(FineError::InvalidConfig(_))
    ));
    let ix = FineIndex::new(Config::default()).unwrap();
    assert_eq!(ix.range(5, 4, 10), vec![]);
    assert_eq!(ix.range(0, u64::MAX, 0), vec![]);
    assert_eq!(ix.get(u64::MAX), None);
    assert_eq!(ix.insert(u64::MAX, 1), None);
    assert_eq!(ix.insert(0, 2), None);
    assert_eq!(ix.range(0, u64::MAX, 10), vec![(0, 2), (u64::MAX, 1)]);
}

#[test]
fn load_factor_of_random_inserts_under_default_bins() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let trained: Vec<(u64, u64)> = (0..2_000u64).map(|i| (i * 1_000_000, i)).collect();
    let cfg = Config {
        model_retrain_after_nested: 0,
        ..Config::default()
    };
    let ix = FineIndex::bulk_load(&trained, cfg).unwrap();
    for _ in 0..100_000 {
        let k = rng.gen_range(0..2_000_000_000u64);
        ix.insert(k, k);
    }
    let s = ix.stats();
    println!("load factor after 100k random inserts over 2k trained keys: {s:?}");
    assert!(s.load_factor > 0.5 && s.load_factor <= 1.0, "{s:?}");
}

#[test]
fn a_panicking_upsert_leaves_the_key_as_it_was() {
    let ix = FineIndex::bulk_load(&[(10, 1)], tiny()).unwrap();
    ix.insert(11, 2);
    for k in [10u64, 11, 12] {
        let before = ix.get(k);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ix.upsert(k, |_| panic!("op fails"));
        }));
        assert!(caught.is_err());
        assert_eq!(ix.get(k), before, "key {k}");
        assert_eq!(ix.insert(k, 9), before, "key {k}");
        assert_eq!(ix.get(k), Some(9), "key {k}");
    }
}

#[test]
fn misses_do_not_allocate_bins() {
    let trained: Vec<(u64, u64)> = (0..100u64).map(|i| (i * 10, i)).collect();
    let ix = FineIndex::bulk_load(&trained, Config::default()).unwrap();
    for k in 0..1000u64 {
        if k % 10 != 0 {
            assert_eq!(ix.remove(k), None);
            assert_eq!(ix.update(k, 1), None);
        }
    }
    assert_eq!(ix.stats().bin_sets, 0);
}

#[test]
fn odd_bin_sizes_and_thresholds() {
    let configs = [(3, 2, 0), (5, 3, 1), (8, 5, 4), (2, 16, 32), (16, 9, 8)];
    for (i, &(root_slots, child_slots, threshold)) in configs.iter().enumerate() {
        let cfg = Config {
            root_slots,
            child_slots,
            threshold,
            learning_step: 8,
            ..tiny()
        };
        for seed in 0..6 {
            run(500 + 10 * i as u64 + seed, cfg.clone(), 1_500, &|r| {
                r.gen_range(0..2_000)
            });
        }
    }
}

#[test]
fn dense_ascending_inserts_into_one_gap_of_sparse_trained_keys() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut trained: Vec<u64> = (0..5_000).map(|_| rng.r#gen::<u64>() >> 1).collect();
    trained.sort_unstable();
    trained.dedup();
    let entries: Vec<(u64, u64)> = trained.iter().map(|&k| (k, k)).collect();
    let ix = FineIndex::bulk_load(&entries, Config::default()).unwrap();
    let base = trained[0];
    for i in 1..=20_000u64 {
        ix.insert(base + i, base + i);
    }
    let s = ix.stats();
    println!("{s:?}");
    assert_eq!(
        s.live_trained + s.bin_entries,
        trained.len() as u64 + 20_000
    );
    assert!(s.model_retrains < 200, "{s:?}");
    assert!(s.top_nodes < 100, "one model per dense key again: {s:?}");
    for i in (1..=20_000u64).step_by(7) {
        assert_eq!(ix.get(base + i), Some(base + i));
    }
}

#[test]
fn removed_trained_records_are_reclaimed_by_model_retraining() {
    let entries: Vec<(u64, u64)> = (0..20_000u64).map(|k| (k * 3, k)).collect();
    let cfg = Config::default();
    let ix = FineIndex::bulk_load(&entries, cfg).unwrap();
    let before = ix.stats();
    let mut model: BTreeMap<u64, u64> = entries.iter().copied().collect();
    // Remove nine keys in ten: the removals alone set off model retrainings (a quarter of a
    // node's records removed), which leave the removed records out of the new nodes.
    for &(k, _) in &entries {
        if k % 10 != 0 {
            assert_eq!(ix.remove(k), model.remove(&k), "remove {k}");
        }
    }
    let after = ix.stats();
    assert!(after.model_retrains > 0, "{after:?}");
    check_all(&ix, &model, "after removals");
    // A node is retrained once a quarter of its records (at least 16) are removed, so fewer than
    // that stay in each node (the first record of each node among them).
    assert!(
        after.removed_trained < after.top_records / 4 + 16 * after.top_nodes,
        "removed records left: before {before:?}\nafter {after:?}"
    );
    assert_eq!(after.live_trained, model.len() as u64, "{after:?}");
    assert!(
        after.heap_bytes * 4 < before.heap_bytes,
        "memory not given back: before {before:?}\nafter {after:?}"
    );
    // The reclaimed keys come back through the gaps, and retraining again keeps them.
    for &(k, v) in entries.iter().filter(|e| e.0 % 10 == 3) {
        assert_eq!(ix.insert(k, v + 1), None, "reinsert {k}");
        model.insert(k, v + 1);
    }
    check_all(&ix, &model, "after reinserts");
    // Retraining everything reclaims the removed records below the trigger too, except those
    // whose gap now holds a reinserted key.
    let left = ix.stats().removed_trained;
    let r = ix.retrain_models();
    assert!(r.reclaimed > 0, "{r:?}");
    assert_eq!(ix.stats().removed_trained, left - r.reclaimed);
    check_all(&ix, &model, "after a second retraining");
    for (&k, &v) in &model {
        assert_eq!(ix.get(k), Some(v), "get {k}");
    }
}

/// The bulk-loaded models, as a remote client sees them: every region's window holds the lower
/// bound of every trained key and of its absent neighbours routed there, regions tile the
/// trained keys in nodes of at most 65536 records, and the index finds exactly the keys loaded.
#[test]
fn bulk_loaded_models_hold_every_key_of_every_shape() {
    let small = Config {
        threshold: 0,
        learning_step: 4,
        learning_rate: 0.5,
        ..Config::default()
    };
    for (c, cfg) in [Config::default(), small].into_iter().enumerate() {
        for shape in 0..key_shapes::SHAPES.len() {
            for seed in 0..4 {
                let ctx = format!("shape {shape} seed {seed} config {c}");
                let mut rng = ChaCha8Rng::seed_from_u64(1_000 + seed);
                let keys = key_shapes::keys_of(shape, 20_000, &mut rng);
                let entries: Vec<(u64, u64)> = keys.iter().map(|&k| (k, k ^ 0x5a)).collect();
                let ix = FineIndex::bulk_load(&entries, cfg.clone()).unwrap();
                // The trained keys: the loaded ones, after a placeholder 0 when 0 is not one.
                let mut trained = keys.clone();
                if trained.first() != Some(&0) {
                    trained.insert(0, 0);
                }
                let layout = ix.remote_layout();
                let mut at = 0;
                for (r, region) in layout.regions.iter().enumerate() {
                    let n = region.records() as usize;
                    assert!(
                        (1..=65_536).contains(&n),
                        "{ctx}: region {r} of {n} records"
                    );
                    let own = &trained[at..at + n];
                    assert_eq!(region.first_key(), own[0], "{ctx}: region {r}");
                    assert!(!region.segments().is_empty(), "{ctx}: region {r}");
                    let next = layout.regions.get(r + 1).map(|g| g.first_key());
                    for &k in own {
                        for q in [k, k.wrapping_sub(1), k.wrapping_add(1)] {
                            if q < own[0] || next.is_some_and(|f| q >= f) {
                                continue;
                            }
                            let (lo, hi) =
                                predict_window(region.segments(), layout.eps, n as u64, q);
                            let lb = own.partition_point(|&k| k < q) as u64;
                            assert!(
                                lo <= lb && lb <= hi && (lb == n as u64 || lb < hi),
                                "{ctx}: region {r} window {lo}..{hi} misses q = {q} at {lb}"
                            );
                        }
                    }
                    at += n;
                }
                assert_eq!(at, trained.len(), "{ctx}: regions do not tile the keys");
                for (i, &k) in keys.iter().enumerate() {
                    assert_eq!(ix.get(k), Some(k ^ 0x5a), "{ctx}: get {k}");
                    let below = k.checked_sub(1).filter(|&q| i == 0 || keys[i - 1] != q);
                    let above = k.checked_add(1).filter(|&q| keys.get(i + 1) != Some(&q));
                    for q in [below, above].into_iter().flatten() {
                        assert_eq!(ix.get(q), None, "{ctx}: get absent {q}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_long_linear_run_becomes_nodes_of_one_model_each() {
    let entries: Vec<(u64, u64)> = (0..200_000u64).map(|i| (3 * i, i)).collect();
    let ix = FineIndex::bulk_load(&entries, Config::default()).unwrap();
    let s = ix.stats();
    assert_eq!(s.top_nodes, 4, "{s:?}");
    assert_eq!(s.top_models, 4, "{s:?}");
    for &(k, v) in entries.iter().step_by(101) {
        assert_eq!(ix.get(k), Some(v));
        assert_eq!(ix.get(k + 1), None);
    }
}
