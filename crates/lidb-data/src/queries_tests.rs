//! Tests of `queries.rs`.

use super::*;
use crate::synthetic::{Distribution, generate};

const SEED: u64 = 0x0051_EED5;

fn contains(keys: &[u64], q: u64) -> bool {
    keys.binary_search(&q).is_ok()
}

#[test]
fn existing_are_present_and_deterministic() {
    for dist in Distribution::ALL {
        let keys = generate(dist, 10_000, SEED);
        let q = existing(&keys, 5_000, SEED);
        assert_eq!(q.len(), 5_000, "{dist} seed={SEED}");
        assert!(q.iter().all(|&k| contains(&keys, k)), "{dist} seed={SEED}");
        assert_eq!(q, existing(&keys, 5_000, SEED));
    }
    assert!(existing(&[], 10, SEED).is_empty());
}

#[test]
fn absent_are_absent_with_every_kind() {
    for dist in Distribution::ALL {
        let keys = generate(dist, 10_000, SEED);
        let q = absent(&keys, 5_000, SEED);
        assert_eq!(q.len(), 5_000, "{dist} seed={SEED}");
        assert!(q.iter().all(|&k| !contains(&keys, k)), "{dist} seed={SEED}");
        let (min, max) = (keys.first().copied(), keys.last().copied());
        let inside = q
            .iter()
            .filter(|&&k| Some(k) > min && Some(k) < max)
            .count();
        if dist == Distribution::UniformDense {
            assert_eq!(inside, 0, "a dense set has no gaps, seed={SEED}");
        } else {
            assert!(
                inside > 3_000,
                "{dist}: mostly between neighbours, got {inside} seed={SEED}"
            );
        }
        if dist != Distribution::UniformDense {
            assert!(q.iter().any(|&k| Some(k) < min), "{dist}: some below min");
            assert!(q.iter().any(|&k| Some(k) > max), "{dist}: some above max");
        }
        assert_eq!(q, absent(&keys, 5_000, SEED));
    }
}

#[test]
fn absent_on_dense_and_edge_sets() {
    // Dense run with one gap: every between-query must land in it.
    let mut keys: Vec<u64> = (10..10_000).collect();
    keys.retain(|&k| k != 5_000);
    let q = absent(&keys, 1_000, SEED);
    assert_eq!(q.len(), 1_000);
    assert!(q.iter().all(|&k| !contains(&keys, k)), "seed={SEED}");
    assert!(q.contains(&5_000));

    // Set touching both ends of the domain, dense, no gaps inside: only impossible kinds.
    let full_ends = vec![0, 1, 2, u64::MAX - 1, u64::MAX];
    let q = absent(&full_ends, 100, SEED);
    assert_eq!(q.len(), 100);
    assert!(q.iter().all(|&k| !contains(&full_ends, k)));

    let no_room = vec![0, 1, 2];
    let q = absent(&no_room, 50, SEED);
    assert!(q.iter().all(|&k| k > 2) && q.len() == 50);

    let dups = vec![7, 7, 7, 7];
    let q = absent(&dups, 50, SEED);
    assert!(q.iter().all(|&k| k != 7) && q.len() == 50);

    // The empty set: everything is absent.
    assert_eq!(absent(&[], 20, SEED).len(), 20);
}

#[test]
fn mixed_is_half_and_half() {
    let keys = generate(Distribution::UniformSparse, 10_000, SEED);
    let q = mixed(&keys, 1_001, SEED);
    assert_eq!(q.len(), 1_001);
    let present = q.iter().filter(|&&k| contains(&keys, k)).count();
    assert_eq!(present, 500, "seed={SEED}");
    assert_eq!(q, mixed(&keys, 1_001, SEED));
    assert_eq!(mixed(&[], 10, SEED).len(), 5, "only absent ones exist");
}

#[test]
fn extremes_are_sorted_saturated_and_unique() {
    assert_eq!(extremes(&[]), vec![0, 1, u64::MAX - 1, u64::MAX]);
    assert_eq!(
        extremes(&[0, 5, u64::MAX]),
        vec![0, 1, u64::MAX - 1, u64::MAX]
    );
    assert_eq!(
        extremes(&[100, 200, 300]),
        vec![0, 1, 99, 100, 101, 299, 300, 301, u64::MAX - 1, u64::MAX]
    );
}
