//! One conformance harness over every updatable index (STYLE items 6 and 7): each index is
//! bulk-loaded from a key set, then driven by a seeded random sequence of inserts, updates,
//! removes, gets and seeks, and compared after every operation with a `BTreeMap`; the whole
//! content, `len` and the index's own invariant check are compared periodically. Every
//! assertion names the case, the index and the seed, so any failure can be replayed.
//!
//! The harness (`conformance/harness.rs`) is generic over an adapter, so the u64 indexes (here)
//! and the byte-string index LITS (`conformance/bytes.rs`) run through the same code.

#[path = "conformance/bytes.rs"]
mod bytes;
#[path = "conformance/harness.rs"]
mod harness;

use std::collections::BTreeMap;

use harness::{Case, Fresh, KeyGen, U64, existing_key, run};
use lidb_data::synthetic::{self, Distribution};
use lidb_updatable::{Alex, AlexConfig, BulkLoadError, Dili, Lipp, UpdatableIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// ALEX with tiny nodes, so that expansions, sideways splits, parent doublings and splits down
/// all happen on small key sets.
const SMALL_ALEX: AlexConfig = AlexConfig {
    max_data_node_slots: 64,
    max_fanout: 16,
    expected_insert_frac: 1.0,
};

fn value_of(key: u64) -> u64 {
    key.wrapping_mul(31).wrapping_add(7)
}

fn pairs_of(keys: &[u64]) -> Vec<(u64, u64)> {
    keys.iter().map(|&k| (k, value_of(k))).collect()
}

/// Runs `case` against every u64 index.
fn check_all(case: &Case<'_, u64>) {
    run(case, "alex", &U64Keys, |p| Alex::bulk_load(p).map(U64));
    run(case, "alex_small", &U64Keys, |p| {
        Alex::with_config(SMALL_ALEX, p).map(U64)
    });
    run(case, "lipp", &U64Keys, |p| Lipp::bulk_load(p).map(U64));
    run(case, "dili", &U64Keys, |p| Dili::bulk_load(p).map(U64));
}

/// Draws u64 keys: anywhere, near present keys, at the extremes, or sorted runs.
struct U64Keys;

impl KeyGen<u64> for U64Keys {
    fn fresh(&self, rng: &mut ChaCha8Rng, model: &BTreeMap<u64, u64>, fresh: Fresh) -> u64 {
        match fresh {
            Fresh::Ascending => {
                let top = model.last_key_value().map_or(0, |(k, _)| *k);
                top.saturating_add(rng.gen_range(1..=100))
            }
            Fresh::Descending => {
                let bottom = model.first_key_value().map_or(u64::MAX, |(k, _)| *k);
                bottom.saturating_sub(rng.gen_range(1..=100))
            }
            Fresh::Mixed => match rng.gen_range(0..10) {
                0..=3 => {
                    let anchor = existing_key(self, rng, model).unwrap_or(0);
                    let delta = rng.gen_range(1..=1000u64);
                    if rng.gen_bool(0.5) {
                        anchor.saturating_add(delta)
                    } else {
                        anchor.saturating_sub(delta)
                    }
                }
                4..=7 => rng.r#gen(),
                _ => [0, 1, 2, u64::MAX, u64::MAX - 1, u64::MAX / 2]
                    .get(rng.gen_range(0..6))
                    .copied()
                    .unwrap_or(0),
            },
        }
    }

    fn random(&self, rng: &mut ChaCha8Rng) -> u64 {
        rng.r#gen()
    }

    fn near(&self, rng: &mut ChaCha8Rng, key: u64) -> u64 {
        key.wrapping_add(rng.gen_range(0..3))
    }

    fn refill(&self) -> Vec<u64> {
        vec![u64::MAX, 0, 5, u64::MAX - 5]
    }

    fn value_of(&self, key: &u64) -> u64 {
        value_of(*key)
    }
}

fn random_keys(rng: &mut ChaCha8Rng, n: usize) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n).map(|_| rng.r#gen()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn sorted_unique(mut keys: Vec<u64>) -> Vec<u64> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn clusters(rng: &mut ChaCha8Rng, clusters: usize, per: usize) -> Vec<u64> {
    let mut keys = Vec::new();
    for _ in 0..clusters {
        let center: u64 = rng.r#gen();
        let spacing = rng.gen_range(1..=16u64);
        for i in 0..per as u64 {
            keys.push(center.saturating_add(i * spacing));
        }
    }
    sorted_unique(keys)
}

fn huge_gaps() -> Vec<u64> {
    let mut keys: Vec<u64> = (0..64).map(|i| 1u64 << i).collect();
    keys.extend((0..500u64).map(|i| i << 40));
    keys.extend((0..500u64).map(|i| u64::MAX - i * 3));
    keys.extend([0, u64::MAX / 2, u64::MAX / 2 + 1]);
    sorted_unique(keys)
}

fn extremes(rng: &mut ChaCha8Rng) -> Vec<u64> {
    let mut keys = random_keys(rng, 1000);
    keys.extend([0, 1, 2, 3, u64::MAX, u64::MAX - 1, u64::MAX - 2]);
    sorted_unique(keys)
}

const OPS: usize = 3000;

#[test]
fn uniform_random() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let keys = random_keys(&mut rng, 2000);
    check_all(&Case {
        name: "uniform",
        keys: &keys,
        seed: 101,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn dense_consecutive() {
    let keys: Vec<u64> = (0..2000).collect();
    check_all(&Case {
        name: "dense",
        keys: &keys,
        seed: 102,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn clustered() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let keys = clusters(&mut rng, 12, 150);
    check_all(&Case {
        name: "clusters",
        keys: &keys,
        seed: 103,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn huge_gaps_and_powers_of_two() {
    let keys = huge_gaps();
    check_all(&Case {
        name: "huge_gaps",
        keys: &keys,
        seed: 104,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

/// Keys that f64 cannot tell apart when converted whole (runs of consecutive keys near 2^63 and
/// `u64::MAX` beside 0), and pairs 2^i, 2^i + 1 at every scale: models must work on offsets
/// and still separate every key.
#[test]
fn float_colliding_keys() {
    let mut keys: Vec<u64> = vec![0, 1];
    keys.extend((0..1000u64).map(|i| (1 << 63) + i));
    keys.extend((0..1000u64).map(|i| u64::MAX - i));
    keys.extend((1..64).flat_map(|i| [1u64 << i, (1u64 << i) + 1]));
    let keys = sorted_unique(keys);
    check_all(&Case {
        name: "float_collisions",
        keys: &keys,
        seed: 111,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn zero_and_max_present() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let keys = extremes(&mut rng);
    check_all(&Case {
        name: "extremes",
        keys: &keys,
        seed: 105,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn empty_then_random_inserts() {
    check_all(&Case {
        name: "empty",
        keys: &[],
        seed: 106,
        ops: OPS,
        fresh: Fresh::Mixed,
    });
}

#[test]
fn single_key_bulk() {
    for key in [0, 42, u64::MAX] {
        check_all(&Case {
            name: "single",
            keys: &[key],
            seed: 107 + key % 5,
            ops: 500,
            fresh: Fresh::Mixed,
        });
    }
}

#[test]
fn sequential_appends() {
    let keys: Vec<u64> = (0..200).map(|i| i * 10).collect();
    check_all(&Case {
        name: "ascending",
        keys: &keys,
        seed: 108,
        ops: 6000,
        fresh: Fresh::Ascending,
    });
    check_all(&Case {
        name: "ascending_empty",
        keys: &[],
        seed: 109,
        ops: 6000,
        fresh: Fresh::Ascending,
    });
}

#[test]
fn sequential_prepends() {
    let keys: Vec<u64> = (0..200).map(|i| u64::MAX - 1_000_000 + i * 10).collect();
    check_all(&Case {
        name: "descending",
        keys: &keys,
        seed: 110,
        ops: 6000,
        fresh: Fresh::Descending,
    });
}

#[test]
fn synthetic_distributions() {
    for (i, dist) in Distribution::ALL.into_iter().enumerate() {
        let keys = sorted_unique(synthetic::generate(dist, 4000, 20 + i as u64));
        check_all(&Case {
            name: dist.name(),
            keys: &keys,
            seed: 120 + i as u64,
            ops: 2000,
            fresh: Fresh::Mixed,
        });
    }
}

#[test]
fn real_datasets() {
    for name in lidb_data::datadir::REAL_U64_DATASETS {
        let Some(path) = lidb_data::datadir::require_dataset("real_datasets", name) else {
            continue;
        };
        let all = lidb_data::sosd::read_u64(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let step = (all.len() / 20_000).max(1);
        let keys = sorted_unique(all.into_iter().step_by(step).collect());
        check_all(&Case {
            name,
            keys: &keys,
            seed: 130,
            ops: 3000,
            fresh: Fresh::Mixed,
        });
    }
}

#[test]
fn bulk_load_rejects_unsorted_and_duplicates() {
    let unsorted = [(5, 0), (3, 0)];
    let duplicate = [(1, 0), (2, 0), (2, 1)];
    let want = |position| Err(BulkLoadError::NotStrictlyIncreasing { position });
    assert_eq!(Alex::bulk_load(&unsorted).map(|_| ()), want(1));
    assert_eq!(Lipp::bulk_load(&unsorted).map(|_| ()), want(1));
    assert_eq!(Alex::bulk_load(&duplicate).map(|_| ()), want(2));
    assert_eq!(Lipp::bulk_load(&duplicate).map(|_| ()), want(2));
    assert_eq!(Dili::bulk_load(&unsorted).map(|_| ()), want(1));
    assert_eq!(Dili::bulk_load(&duplicate).map(|_| ()), want(2));
}

#[test]
fn stats_and_size_are_sane() {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let pairs = pairs_of(&random_keys(&mut rng, 50_000));
    let alex = Alex::with_config(SMALL_ALEX, &pairs).unwrap_or_else(|e| panic!("{e}"));
    let lipp = Lipp::bulk_load(&pairs).unwrap_or_else(|e| panic!("{e}"));
    let dili = Dili::bulk_load(&pairs).unwrap_or_else(|e| panic!("{e}"));
    let floor = pairs.len() as u64 * 16;
    for (name, stats, size) in [
        ("alex", alex.stats(), alex.size_bytes()),
        ("lipp", lipp.stats(), lipp.size_bytes()),
        ("dili", dili.stats(), dili.size_bytes()),
    ] {
        assert!(
            size >= floor,
            "{name}: {size} bytes cannot hold {} pairs",
            pairs.len()
        );
        assert!(stats.nodes >= 1 && stats.models >= 1, "{name}: {stats:?}");
        assert!(
            stats.depth_avg >= 1.0 && stats.depth_max as f64 >= stats.depth_avg,
            "{name}: {stats:?}"
        );
    }
    assert!(
        alex.stats().inner_nodes >= 1,
        "small ALEX nodes force model nodes"
    );
}

#[test]
#[ignore = "larger run: cargo test -p lidb-updatable --release -- --ignored"]
fn large_random() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let keys = random_keys(&mut rng, 200_000);
    check_all(&Case {
        name: "large_uniform",
        keys: &keys,
        seed: 140,
        ops: 200_000,
        fresh: Fresh::Mixed,
    });
    let keys = clusters(&mut rng, 100, 2000);
    check_all(&Case {
        name: "large_clusters",
        keys: &keys,
        seed: 141,
        ops: 200_000,
        fresh: Fresh::Mixed,
    });
    check_all(&Case {
        name: "large_ascending",
        keys: &[],
        seed: 142,
        ops: 200_000,
        fresh: Fresh::Ascending,
    });
}

/// Inserts change the shape as the papers describe: ALEX grows from one data node into a tree
/// of model nodes by splits, and its root-domain expansion and range-dividing splits down keep
/// sorted inserts from building a chain of model nodes; LIPP's rebuilds keep the depth of sequential inserts small
/// (without them nearly every append would deepen one chain of conflict children; with them the
/// appends still form a chain along the last slots, as in the reference code, but most keys
/// sit near the root).
#[test]
fn inserts_reshape_the_structure() {
    let mut alex = Alex::with_config(SMALL_ALEX, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut lipp = Lipp::bulk_load(&[]).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    for key in random_keys(&mut rng, 20_000) {
        alex.insert(key, key);
    }
    for key in 0..20_000u64 {
        lipp.insert(key * 3, key);
    }
    let (a, l) = (alex.stats(), lipp.stats());
    eprintln!("alex {a:?}\nlipp {l:?}");
    alex.assert_invariants();
    lipp.assert_invariants();
    assert!(
        a.inner_nodes >= 2 && a.leaf_nodes >= 100,
        "alex did not split: {a:?}"
    );
    assert!(
        l.depth_avg < 2.0 && l.depth_max <= 64,
        "lipp did not rebuild: {l:?}"
    );
    assert!(a.depth_max <= 16, "alex appends built a chain: {a:?}");
    for (name, config) in [("small", SMALL_ALEX), ("default", AlexConfig::default())] {
        let mut alex = Alex::with_config(config, &[]).unwrap_or_else(|e| panic!("{e}"));
        for key in (0..20_000u64).rev() {
            alex.insert(u64::MAX / 2 + key * 1_000_003, key);
        }
        alex.assert_invariants();
        let d = alex.stats();
        eprintln!("alex {name} descending {d:?}");
        assert!(
            d.depth_max <= 16,
            "alex {name}: prepends built a chain: {d:?}"
        );
        // A dense cluster bulk-loaded, then keys from the whole domain: the root's domain
        // must grow to the new keys at once, not by one doubling level per few inserts.
        let dense = pairs_of(&(0..2000u64).collect::<Vec<_>>());
        let mut alex = Alex::with_config(config, &dense).unwrap_or_else(|e| panic!("{e}"));
        for key in random_keys(&mut rng, 20_000) {
            alex.insert(key.rotate_left(17), key);
        }
        alex.assert_invariants();
        let w = alex.stats();
        eprintln!("alex {name} dense then wide {w:?}");
        assert!(
            w.depth_max <= 8,
            "alex {name}: wide inserts built a chain: {w:?}"
        );
    }
}

/// Readers share `&self` across threads (the planned `lidb bench concurrent` peers put an index
/// behind a reader-writer lock), so every index must be `Send + Sync`.
#[test]
fn indexes_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Alex>();
    check::<Lipp>();
    check::<Dili>();
}

/// DILI's internal nodes are fixed after the bulk load, so its shape under updates comes from
/// its leaves: a bulk-loaded tree keeps its keys near the leaf roots under random inserts, and
/// sorted appends past the root's range (all routed to the last leaf) stay shallow thanks to
/// leaf rebuilding.
#[test]
fn dili_shape_under_inserts() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let keys = random_keys(&mut rng, 50_000);
    let (loaded, rest): (Vec<u64>, Vec<u64>) = keys.iter().partition(|&&k| k % 2 == 0);
    let mut dili = Dili::bulk_load(&pairs_of(&loaded)).unwrap_or_else(|e| panic!("{e}"));
    let built = dili.stats();
    for &key in &rest {
        dili.insert(key, key);
    }
    dili.assert_invariants();
    let grown = dili.stats();
    eprintln!("dili built {built:?}\ndili after random inserts {grown:?}");
    assert!(
        built.inner_nodes >= 1,
        "dili built no internal node: {built:?}"
    );
    assert!(
        grown.depth_avg < 4.0,
        "dili random inserts went deep: {grown:?}"
    );
    let mut dili = Dili::bulk_load(&pairs_of(&(0..1000u64).collect::<Vec<_>>()))
        .unwrap_or_else(|e| panic!("{e}"));
    for key in 1000..21_000u64 {
        dili.insert(key * 3, key);
    }
    dili.assert_invariants();
    let appended = dili.stats();
    eprintln!("dili after 20K appends {appended:?}");
    assert!(
        appended.depth_avg < 3.0 && appended.depth_max <= 64,
        "dili appends built a chain: {appended:?}"
    );
}

/// Keys shaped like tweet IDs in one SSTable (a millisecond timestamp above 22 low bits, a few
/// keys a millisecond, milliseconds far apart): ALEX's bulk load picks a wide fanout to split
/// the clusters, and the empty slots between them must join their neighbours instead of each
/// becoming a data node (before, such a table of 4,009 keys built 4,667 data nodes).
#[test]
fn alex_bulk_load_of_narrow_clusters_keeps_few_empty_nodes() {
    let mut rng = ChaCha8Rng::seed_from_u64(6528);
    let mut ms = 1u64 << 40;
    let mut keys = Vec::new();
    for _ in 0..2_000 {
        ms += rng.gen_range(1..5_000u64);
        for _ in 0..rng.gen_range(1..4usize) {
            keys.push((ms << 22) | rng.gen_range(0..1u64 << 22));
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let alex = alex_over_positions(&keys);
    let st = alex.stats();
    eprintln!("{} keys: {st:?}, {} bytes", keys.len(), alex.size_bytes());
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(alex.get(k), Some(i as u64), "key {k}");
    }
    assert!(
        (st.leaf_nodes as usize) < keys.len() / 2,
        "{} data nodes for {} keys",
        st.leaf_nodes,
        keys.len()
    );
}

/// ALEX bulk-loaded from each of `keys` (sorted, distinct) with its position, invariants checked.
fn alex_over_positions(keys: &[u64]) -> Alex {
    let pairs: Vec<(u64, u64)> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, i as u64))
        .collect();
    let alex = Alex::bulk_load(&pairs).unwrap_or_else(|e| panic!("{e}"));
    alex.assert_invariants();
    alex
}

/// The reference implementation's bulk load sizes data nodes by its cost model: on uniform keys
/// a few large nodes at 0.7 density (about 16 / 0.7 bytes per key plus headers), not a node per
/// handful of keys as a least-squares model per node with a split's merge rule made (170 bytes
/// per key on OSM cell ids and tweet ids).
#[test]
fn alex_bulk_load_builds_few_dense_data_nodes() {
    for dist in [Distribution::UniformSparse, Distribution::UniformDense] {
        let keys = sorted_unique(synthetic::generate(dist, 200_000, 11));
        let alex = alex_over_positions(&keys);
        let st = alex.stats();
        let per_key = alex.size_bytes() as f64 / keys.len() as f64;
        eprintln!("{dist:?}: {st:?}, {per_key:.1} bytes per key");
        assert!(
            (st.leaf_nodes as usize) < keys.len() / 100,
            "{dist:?}: {} data nodes for {} keys",
            st.leaf_nodes,
            keys.len()
        );
        assert!(per_key < 32.0, "{dist:?}: {per_key:.1} bytes per key");
        for (i, &k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(alex.get(k), Some(i as u64), "{dist:?}: key {k}");
        }
    }
}
