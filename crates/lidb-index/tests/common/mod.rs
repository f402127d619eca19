//! Key sets and queries shared by the index tests. Every set is seeded; the seed is part of the
//! case so a failure message is enough to replay it.

#![allow(dead_code, clippy::unwrap_used, clippy::indexing_slicing)]

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub seed: u64,
    pub keys: Vec<u64>,
}

fn case(name: &str, seed: u64, mut keys: Vec<u64>) -> Case {
    keys.sort_unstable();
    Case {
        name: name.into(),
        seed,
        keys,
    }
}

/// The synthetic distributions of the harness: edge cases first, then generated sets.
pub fn cases() -> Vec<Case> {
    let mut out = vec![
        case("empty", 0, vec![]),
        case("one key 0", 0, vec![0]),
        case("one key 42", 0, vec![42]),
        case("one key max", 0, vec![u64::MAX]),
        case("all equal", 0, vec![7; 1000]),
        case("all equal max", 0, vec![u64::MAX; 300]),
        case("all equal zero", 0, vec![0; 300]),
        case(
            "0 and max present",
            0,
            vec![0, 1, 2, 3, 1000, u64::MAX - 2, u64::MAX - 1, u64::MAX],
        ),
        case(
            "huge gaps",
            0,
            (0..64)
                .map(|i| if i == 0 { 0 } else { (1u64 << i) - 1 })
                .chain([u64::MAX])
                .collect(),
        ),
        case("dense 0..5000", 0, (0..5000).collect()),
        case(
            "dense at the top",
            0,
            (0..5000).map(|i| u64::MAX - i).collect(),
        ),
        case(
            "two far clusters",
            0,
            (0..3000)
                .chain((0..3000).map(|i| (1 << 62) + 3 * i))
                .collect(),
        ),
    ];
    let n = 40_000;
    for seed in [1u64, 2] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        out.push(case(
            "uniform sparse",
            seed,
            (0..n).map(|_| rng.r#gen()).collect(),
        ));
        let start: u64 = rng.gen_range(0..1 << 40);
        out.push(case(
            "uniform dense gaps",
            seed,
            (0..n)
                .map(|i| start + i * 3 + rng.gen_range(0..3))
                .collect(),
        ));
        out.push(case(
            "normal",
            seed,
            (0..n)
                .map(|_| {
                    // Sum of uniforms: close enough to normal, with rounding duplicates at the peak.
                    let s: f64 = (0..12).map(|_| rng.r#gen::<f64>()).sum::<f64>() - 6.0;
                    (1e12 + s * 1e5).max(0.0) as u64
                })
                .collect(),
        ));
        out.push(case(
            "lognormal",
            seed,
            (0..n)
                .map(|_| {
                    let s: f64 = (0..12).map(|_| rng.r#gen::<f64>()).sum::<f64>() - 6.0;
                    ((2.0 * s).exp() * 1e9).min(1.8e19) as u64
                })
                .collect(),
        ));
        out.push(case("duplicate runs", seed, dup_runs(&mut rng, n as usize)));
        out.push(case("piecewise", seed, piecewise(&mut rng, n as usize)));
    }
    out
}

/// Runs of duplicates of random lengths (some far longer than any B/2 tested), random gaps.
fn dup_runs(rng: &mut ChaCha8Rng, n: usize) -> Vec<u64> {
    let mut keys = Vec::with_capacity(n);
    let mut k: u64 = rng.gen_range(0..1000);
    while keys.len() < n {
        let run = match rng.gen_range(0..10) {
            0 => rng.gen_range(100..3000),
            1..=3 => rng.gen_range(2..20),
            _ => 1,
        };
        keys.extend(std::iter::repeat_n(k, run.min(n - keys.len())));
        k = k.saturating_add(rng.gen_range(1..1_000_000));
    }
    keys
}

/// A CDF of linear pieces of very different densities.
fn piecewise(rng: &mut ChaCha8Rng, n: usize) -> Vec<u64> {
    let mut keys = Vec::with_capacity(n);
    let mut k: u64 = 0;
    while keys.len() < n {
        let gap: u64 = 1 << rng.gen_range(0..40);
        for _ in 0..rng.gen_range(10..5000).min(n - keys.len()) {
            k = k.saturating_add(gap);
            keys.push(k);
        }
    }
    keys
}

/// Present keys (all for small sets, a sample otherwise), their neighbours, gap midpoints,
/// random values and the extremes of the domain and of the set.
pub fn queries(keys: &[u64], seed: u64) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9);
    let mut qs = vec![0, 1, 2, u64::MAX, u64::MAX - 1, 1 << 63];
    let sample: Vec<usize> = if keys.len() <= 6000 {
        (0..keys.len()).collect()
    } else {
        (0..6000).map(|_| rng.gen_range(0..keys.len())).collect()
    };
    for i in sample {
        let k = keys[i];
        qs.extend([k, k.wrapping_sub(1), k.wrapping_add(1)]);
        if let Some(&next) = keys.get(i + 1) {
            qs.push(k + (next - k) / 2);
        }
    }
    qs.extend((0..500).map(|_| rng.r#gen::<u64>()));
    if let (Some(&lo), Some(&hi)) = (keys.first(), keys.last()) {
        qs.extend((0..500).map(|_| rng.gen_range(lo..=hi)));
    }
    qs
}

/// Sorted key arrays for property tests: from a narrow range (many duplicates), a wide one, or
/// around the top of the domain.
pub fn sorted_keys() -> impl Strategy<Value = Vec<u64>> {
    let narrow = proptest::collection::vec(0u64..64, 0..400);
    let wide = proptest::collection::vec(any::<u64>(), 0..2000);
    let top = proptest::collection::vec(u64::MAX - 5000..=u64::MAX, 0..1000);
    let walk = proptest::collection::vec(0u64..1 << 20, 0..2000).prop_map(|gaps| {
        gaps.iter()
            .scan(0u64, |acc, &g| {
                *acc = acc.saturating_add(g);
                Some(*acc)
            })
            .collect()
    });
    prop_oneof![narrow, wide, top, walk].prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

/// Real datasets, cut to test size: the whole of osm_cellids, and of each 10M set a contiguous
/// slice from the middle plus a strided sample across the whole range. Prints a visible SKIPPED
/// line and returns None where the data directory is absent.
pub fn real_cases(test: &str) -> Option<Vec<Case>> {
    const CUT: usize = 150_000;
    let dir = lidb_data::datadir::require_data(test)?;
    let mut out = Vec::new();
    for name in lidb_data::datadir::REAL_U64_DATASETS {
        let path = dir.join(name);
        let keys = match lidb_data::sosd::read_u64(&path) {
            Ok(keys) => keys,
            Err(e) => panic!("{test}: cannot load {}: {e}", path.display()),
        };
        if keys.len() <= 2 * CUT {
            out.push(Case {
                name: name.into(),
                seed: 0,
                keys,
            });
            continue;
        }
        let mid = keys.len() / 2;
        let slice = keys[mid..mid + CUT].to_vec();
        let stride = keys.len() / CUT;
        let sample = keys.iter().step_by(stride).copied().collect();
        out.push(Case {
            name: format!("{name} slice"),
            seed: 0,
            keys: slice,
        });
        out.push(Case {
            name: format!("{name} strided"),
            seed: 0,
            keys: sample,
        });
    }
    // String keys reach models through their order-preserving u64 image; the words share
    // images often (about 250K ties), which makes this a real duplicate-heavy set.
    let words = dir.join(lidb_data::datadir::WORDS_DATASET);
    match lidb_data::text::read_keys(&words) {
        Ok(words) => {
            let images = lidb_data::keymap::images(&words);
            let stride = (images.len() / CUT).max(1);
            let sample = images.iter().step_by(stride).copied().collect();
            out.push(Case {
                name: "words images strided".into(),
                seed: 0,
                keys: sample,
            });
        }
        Err(e) => panic!("{test}: cannot load {}: {e}", words.display()),
    }
    Some(out)
}
