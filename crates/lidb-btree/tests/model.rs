//! Model-based tests: random put/delete/get/scan against a `BTreeMap` with a small pool
//! (constant eviction, splits, merges), random key and value lengths including binary keys,
//! then checkpoint + reopen (memory device and a real file) and compare again. Seeds are
//! printed on failure (the panic message names them).

use std::collections::BTreeMap;
use std::sync::Arc;

use lidb_btree::{BTree, MemDevice, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn small_opts() -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 40 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

fn random_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    match rng.gen_range(0..4) {
        // Dense short keys collide often (updates, deletes of present keys).
        0 => format!("k{:05}", rng.gen_range(0..3000)).into_bytes(),
        // Big-endian u64 images.
        1 => rng.gen_range(0u64..5000).to_be_bytes().to_vec(),
        // Binary keys of any length, with zeros and 0xff.
        2 => (0..rng.gen_range(0..40))
            .map(|_| {
                *[0u8, 1, 0xff, rng.r#gen()]
                    .get(rng.gen_range(0..4))
                    .unwrap_or(&0)
            })
            .collect(),
        // Long keys sharing a prefix (heads tie: full comparisons).
        _ => format!("shared/prefix/{:04}", rng.gen_range(0..500))
            .into_bytes()
            .into_iter()
            .chain(std::iter::repeat_n(b'x', rng.gen_range(0..200)))
            .collect(),
    }
}

fn random_value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => rng.gen_range(300..=1024),
        _ => rng.gen_range(0..100),
    };
    (0..len).map(|_| rng.r#gen()).collect()
}

fn compare(tree: &BTree, model: &Model, seed: u64, when: &str) {
    let all = tree
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("seed {seed} {when}: scan: {e}"));
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all.len(), want.len(), "seed {seed} {when}: scan length");
    let counted = tree
        .count_entries()
        .unwrap_or_else(|e| panic!("seed {seed} {when}: count: {e}"));
    assert_eq!(
        counted,
        want.len() as u64,
        "seed {seed} {when}: count_entries"
    );
    assert!(
        all == want,
        "seed {seed} {when}: scan differs from the model"
    );
    for (k, v) in model {
        let got = tree
            .get(k)
            .unwrap_or_else(|e| panic!("seed {seed} {when}: get: {e}"));
        assert_eq!(got.as_ref(), Some(v), "seed {seed} {when}: get {k:?}");
    }
}

fn run_ops(tree: &BTree, model: &mut Model, rng: &mut ChaCha8Rng, seed: u64, ops: usize) {
    for i in 0..ops {
        let k = random_key(rng);
        match rng.gen_range(0..10) {
            0..=4 => {
                let v = random_value(rng);
                tree.put(&k, &v)
                    .unwrap_or_else(|e| panic!("seed {seed} op {i}: put: {e}"));
                model.insert(k, v);
            }
            5..=7 => {
                let had = tree
                    .delete(&k)
                    .unwrap_or_else(|e| panic!("seed {seed} op {i}: delete: {e}"));
                assert_eq!(
                    had,
                    model.remove(&k).is_some(),
                    "seed {seed} op {i}: delete {k:?}"
                );
            }
            8 => {
                let got = tree
                    .get(&k)
                    .unwrap_or_else(|e| panic!("seed {seed} op {i}: get: {e}"));
                assert_eq!(got.as_ref(), model.get(&k), "seed {seed} op {i}: get {k:?}");
            }
            _ => {
                let end = random_key(rng);
                let limit = rng.gen_range(0..50);
                let got = tree
                    .scan(&k, Some(&end), limit)
                    .unwrap_or_else(|e| panic!("seed {seed} op {i}: scan: {e}"));
                let want: Vec<(Vec<u8>, Vec<u8>)> = if k < end {
                    model
                        .range(k.clone()..end.clone())
                        .take(limit)
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                assert!(
                    got == want,
                    "seed {seed} op {i}: scan {k:?}..{end:?} limit {limit}"
                );
            }
        }
    }
}

#[test]
fn random_ops_match_a_btreemap_across_checkpoints_in_memory() {
    for seed in 0..4u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
        let mut model = Model::new();
        let tree = BTree::with_device(dev.clone(), &small_opts()).unwrap_or_else(|e| panic!("{e}"));
        run_ops(&tree, &mut model, &mut rng, seed, 6000);
        compare(&tree, &model, seed, "before checkpoint");
        let stats = tree.stats();
        assert!(
            stats.pool.evictions > 0,
            "seed {seed}: the small pool evicts: {stats:?}"
        );
        tree.checkpoint(77, b"model blob")
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // Writes after the checkpoint are lost at a crash, kept by a clean snapshot.
        drop(tree);
        let reopened = BTree::with_device(Arc::new(dev.crash(seed)), &small_opts())
            .unwrap_or_else(|e| panic!("seed {seed}: reopen: {e}"));
        assert_eq!(reopened.checkpoint_info().lsn, 77);
        assert_eq!(reopened.checkpoint_info().extra, b"model blob");
        compare(&reopened, &model, seed, "after reopen");
        run_ops(&reopened, &mut model, &mut rng, seed, 2000);
        compare(&reopened, &model, seed, "after more ops");
    }
}

#[test]
fn random_ops_match_a_btreemap_across_reopen_of_a_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("tree.db");
    let seed = 11;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut opts = small_opts();
    opts.provider_thread = true;
    {
        let tree = BTree::create(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
        run_ops(&tree, &mut model, &mut rng, seed, 4000);
        tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
        run_ops(&tree, &mut model, &mut rng, seed, 2000);
        tree.checkpoint(2, &[9; 10000])
            .unwrap_or_else(|e| panic!("{e}"));
        tree.close().unwrap_or_else(|e| panic!("{e}"));
    }
    let tree = BTree::open(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tree.checkpoint_info().lsn, 2);
    assert_eq!(tree.checkpoint_info().extra, vec![9; 10000]);
    compare(&tree, &model, seed, "after reopen of the file");
    let stats = tree.stats();
    assert!(
        stats.file_slots < 4 * (stats.pids_issued + 10),
        "slots are reused: {stats:?}"
    );
}

#[test]
fn bulk_load_then_ops() {
    let tree = BTree::in_memory(&small_opts()).unwrap_or_else(|e| panic!("{e}"));
    let mut model = Model::new();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u64)
        .map(|i| ((i * 3).to_be_bytes().to_vec(), i.to_le_bytes().to_vec()))
        .collect();
    model.extend(pairs.iter().cloned());
    let n = tree.bulk_load(pairs, 0.8).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n, 20_000);
    assert!(tree.tree().height().unwrap_or(0) >= 3);
    compare(&tree, &model, 0, "after bulk load");
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    run_ops(&tree, &mut model, &mut rng, 5, 3000);
    compare(&tree, &model, 5, "after ops on the bulk-loaded tree");
    let leaves = tree.leaf_parents().unwrap_or_else(|e| panic!("{e}"));
    assert!(leaves.len() > 10);
    assert!(leaves.last().is_some_and(|l| l.upper.is_none()));
    let uppers: Vec<Option<Vec<u8>>> = leaves.iter().map(|l| l.upper.clone()).collect();
    let ordered = uppers
        .iter()
        .zip(uppers.iter().skip(1))
        .all(|pair| match pair {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            _ => false,
        });
    assert!(ordered, "leaf uppers in key order");
}

#[test]
fn too_large_keys_and_values_are_rejected() {
    let tree = BTree::in_memory(&small_opts()).unwrap_or_else(|e| panic!("{e}"));
    let (max_key, max_value) = tree.tree().limits();
    let err = tree
        .put(&vec![1; max_key + 1], b"v")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("too large") && err.contains(&format!("{}", max_key + 1)),
        "{err}"
    );
    assert!(tree.put(b"k", &vec![1; max_value + 1]).is_err());
    assert!(tree.put(&vec![1; max_key], &vec![2; max_value]).is_ok());
}

#[test]
fn deleting_most_keys_merges_leaves_and_inner_nodes() {
    let tree = BTree::in_memory(&small_opts()).unwrap_or_else(|e| panic!("{e}"));
    let mut model = Model::new();
    for i in 0..20_000u32 {
        let k = format!("key/{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes();
        tree.put(&k, &[1; 40]).unwrap_or_else(|e| panic!("{e}"));
        model.insert(k, vec![1; 40]);
    }
    let tall = tree.tree().height().unwrap_or(0);
    let pages_before = tree.leaf_parents().map(|l| l.len()).unwrap_or(0);
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 50 != 0 {
            assert!(tree.delete(k).unwrap_or(false));
            model.remove(k);
        }
    }
    compare(&tree, &model, 0, "after deleting most keys");
    let leaves_after = tree.leaf_parents().map(|l| l.len()).unwrap_or(usize::MAX);
    let short = tree.tree().height().unwrap_or(u8::MAX);
    eprintln!("height {tall} -> {short}, leaves {pages_before} -> {leaves_after}");
    assert!(leaves_after * 5 < pages_before, "leaves merged");
    assert!(short < tall, "inner nodes merged and the root collapsed");
}

#[test]
fn the_smallest_pool_still_works() {
    // pool_bytes 0 gives the minimum of 16 frames: every walk evicts.
    let opts = Options {
        pool_bytes: 0,
        provider_thread: true,
        ..small_opts()
    };
    let seed = 21;
    let tree = BTree::in_memory(&opts).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = Model::new();
    run_ops(&tree, &mut model, &mut rng, seed, 4000);
    compare(&tree, &model, seed, "16 frames");
    assert_eq!(tree.stats().pool.frames, 16);
}
