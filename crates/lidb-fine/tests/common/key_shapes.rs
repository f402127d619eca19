//! Sorted key sets of many shapes, for the model tests of lidb-fine (the unit tests in
//! `src/model_tests.rs` and `tests/model.rs` both include this file with `#[path]`).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Shapes of key sets: dense runs, sparse, log-uniform (lognormal-like skew), near u64::MAX,
/// tiny sets of 1 to 3 keys, dense clusters among sparse keys, a convex curve (every point on
/// the lower hull).
pub const SHAPES: [&str; 7] = [
    "dense runs",
    "sparse",
    "log-uniform",
    "near u64::MAX",
    "tiny",
    "clusters",
    "convex",
];

/// A sorted set of distinct keys of shape `SHAPES[shape]`, at most `max_n` of them.
pub fn keys_of(shape: usize, max_n: usize, rng: &mut ChaCha8Rng) -> Vec<u64> {
    let n = rng.gen_range(1..=max_n);
    let mut keys: Vec<u64> = match shape {
        0 => {
            let mut k = rng.r#gen::<u64>() >> 8;
            (0..n)
                .map(|_| {
                    k += if rng.gen_bool(0.02) {
                        rng.gen_range(2..1_000_000)
                    } else {
                        1
                    };
                    k
                })
                .collect()
        }
        1 => (0..n).map(|_| rng.r#gen()).collect(),
        2 => (0..n)
            .map(|_| (rng.r#gen::<f64>() * 40.0).exp() as u64)
            .collect(),
        3 => (0..n)
            .map(|_| u64::MAX - rng.gen_range(0..4 * n as u64))
            .collect(),
        4 => {
            let picks = [0, 1, 2, u64::MAX - 1, u64::MAX, rng.r#gen()];
            (0..rng.gen_range(1..=3))
                .map(|_| picks[rng.gen_range(0..picks.len())])
                .collect()
        }
        5 => (0..n)
            .map(|_| {
                let centre = rng.gen_range(0..8u64) << 58;
                centre
                    + if rng.gen_bool(0.8) {
                        rng.gen_range(0..n as u64)
                    } else {
                        rng.r#gen::<u64>() >> 6
                    }
            })
            .collect(),
        _ => (0..n as u64).map(|i| 1_000 + i * i * 7 + i * 13).collect(),
    };
    keys.sort_unstable();
    keys.dedup();
    keys
}
