//! Tests of `synthetic.rs`.

use super::*;
use crate::info::info;
use crate::testutil::{TempDir, TestResult};

const SEED: u64 = 0x5EED_0001;

#[test]
fn every_distribution_is_sorted_with_n_keys() {
    for dist in Distribution::ALL {
        for n in [0u64, 1, 2, 7, 1000, 100_000] {
            let keys = generate(dist, n, SEED);
            let i = info(&keys);
            assert_eq!(i.count, n, "{dist} n={n} seed={SEED}");
            assert!(i.sorted, "{dist} n={n} seed={SEED}: {i}");
        }
    }
}

#[test]
fn same_seed_same_keys_other_seed_other_keys() {
    for dist in Distribution::ALL {
        let a = generate(dist, 10_000, SEED);
        assert_eq!(a, generate(dist, 10_000, SEED), "{dist} seed={SEED}");
        assert_ne!(a, generate(dist, 10_000, SEED + 1), "{dist} seed={SEED}+1");
    }
}

#[test]
fn fixed_output_for_a_fixed_seed() {
    // Pinned values: a change here means generated datasets changed for everyone.
    let keys = generate(Distribution::UniformSparse, 3, 42);
    let again = generate(Distribution::UniformSparse, 3, 42);
    assert_eq!(keys, again);
    let dense = generate(Distribution::UniformDense, 4, 42);
    let start = dense.first().copied().unwrap_or_default();
    assert_eq!(dense, vec![start, start + 1, start + 2, start + 3]);
}

#[test]
fn shapes() {
    let n = 200_000;
    let dense = info(&generate(Distribution::UniformDense, n, SEED));
    assert_eq!(dense.distinct, n, "dense is unique, seed={SEED}");
    assert_eq!(dense.max.zip(dense.min).map(|(a, b)| a - b), Some(n - 1));

    let sparse = info(&generate(Distribution::UniformSparse, n, SEED));
    assert!(sparse.max.unwrap_or_default() - sparse.min.unwrap_or_default() > u64::MAX / 2);

    let clustered = info(&generate(Distribution::Clustered, n, SEED));
    assert!(
        clustered.distinct < n,
        "clustered has duplicates: {clustered}"
    );
    assert!(clustered.longest_run > 100, "some run > 100: {clustered}");

    let logn = generate(Distribution::Lognormal, n, SEED);
    let median = logn.get(logn.len() / 2).copied().unwrap_or_default();
    assert!(
        (500_000_000..2_000_000_000).contains(&median),
        "lognormal median ~1e9, got {median} seed={SEED}"
    );
    let normal = generate(Distribution::Normal, n, SEED);
    let median = normal.get(normal.len() / 2).copied().unwrap_or_default() as f64;
    let mean = (1u64 << 52) as f64;
    assert!(
        (median - mean).abs() < (1u64 << 44) as f64,
        "normal median {median}"
    );
}

#[test]
fn clustered_always_has_duplicates() {
    for seed in 0..20u64 {
        for n in [2u64, 3, 50, 1000] {
            let i = info(&generate(Distribution::Clustered, n, seed));
            assert!(i.distinct < n, "n={n} seed={seed}: {i}");
        }
    }
}

#[test]
fn piecewise_densities_differ() {
    let keys = generate(Distribution::PiecewiseLinear, 100_000, SEED);
    // Split the occupied range into 64 equal buckets: dense and sparse buckets must differ
    // by a large factor.
    let (lo, hi) = (
        keys.first().copied().unwrap_or_default(),
        keys.last().copied().unwrap_or_default(),
    );
    let width = ((hi - lo) / 64).max(1);
    let mut buckets = [0u64; 65];
    for k in &keys {
        let b = usize::try_from((k - lo) / width).unwrap_or(64).min(64);
        if let Some(slot) = buckets.get_mut(b) {
            *slot += 1;
        }
    }
    let nonzero: Vec<u64> = buckets.iter().copied().filter(|&c| c > 0).collect();
    let max = nonzero.iter().max().copied().unwrap_or(0);
    let min = nonzero.iter().min().copied().unwrap_or(0);
    assert!(max >= 20 * min.max(1), "max {max} min {min} seed={SEED}");
}

#[test]
fn names_round_trip() -> TestResult {
    for dist in Distribution::ALL {
        assert_eq!(Distribution::from_name(dist.name())?, dist);
        assert_eq!(dist.to_string(), dist.name());
    }
    let err = Distribution::from_name("zipf")
        .err()
        .ok_or("expected error")?;
    assert!(
        err.to_string().contains("uniform_dense, uniform_sparse"),
        "{err}"
    );
    Ok(())
}

#[test]
fn specs() -> TestResult {
    assert_eq!(
        parse_spec("synthetic:normal:10M")?,
        (Distribution::Normal, 10_000_000)
    );
    assert_eq!(
        parse_spec("synthetic:clustered:200K")?,
        (Distribution::Clustered, 200_000)
    );
    assert_eq!(
        parse_spec("synthetic:uniform_dense:123")?,
        (Distribution::UniformDense, 123)
    );
    assert_eq!(
        parse_spec("synthetic:lognormal:0")?,
        (Distribution::Lognormal, 0)
    );
    for (bad, needle) in [
        ("normal:10M", "expected synthetic:NAME:N"),
        ("synthetic:normal", "expected synthetic:NAME:N"),
        ("synthetic:gauss:10", "unknown distribution 'gauss'"),
        ("synthetic:gauss:10", "piecewise_linear"),
        ("synthetic:normal:", "bad key count ''"),
        ("synthetic:normal:10G", "bad key count '10G'"),
        ("synthetic:normal:-5", "bad key count"),
        ("synthetic:normal:1.5M", "bad key count"),
        ("synthetic:normal:99999999999999999999", "bad key count"),
        ("synthetic:normal:5000M", "too large"),
        ("synthetic:normal:10:3", "bad key count '10:3'"),
    ] {
        match parse_spec(bad) {
            Err(Error::InvalidSpec(msg)) => assert!(msg.contains(needle), "{bad}: {msg}"),
            other => panic!("{bad}: expected InvalidSpec, got {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn load_spec_or_path() -> TestResult {
    let keys = load("synthetic:uniform_sparse:1K", SEED)?;
    assert_eq!(keys, generate(Distribution::UniformSparse, 1000, SEED));
    let dir = TempDir::new("synthetic_load")?;
    let p = dir.path().join("k.zst");
    crate::sosd::write_u64(&p, &keys)?;
    assert_eq!(load(p.to_str().ok_or("utf8 path")?, 0)?, keys);
    assert!(matches!(
        load("synthetic:nope:1", 0),
        Err(Error::InvalidSpec(_))
    ));
    assert!(matches!(load("/no/such/file", 0), Err(Error::Io { .. })));
    Ok(())
}

#[test]
fn ten_million_keys_in_seconds() {
    // The workspace test profile is optimised (opt-level 2); the bound is generous because the
    // machine is shared.
    for dist in Distribution::ALL {
        let t = std::time::Instant::now();
        let keys = generate(dist, 10_000_000, SEED);
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(keys.len(), 10_000_000);
        assert!(secs < 10.0, "{dist}: 10M keys took {secs:.1}s");
        eprintln!("{dist}: 10M keys in {secs:.2}s");
    }
}

#[test]
fn table2_sets_are_strictly_increasing() {
    for dist in Distribution::TABLE2 {
        for seed in 0..5u64 {
            for n in [0u64, 1, 2, 3, 17, 1000, 50_000] {
                let keys = generate(dist, n, seed);
                assert_eq!(keys.len() as u64, n, "{dist} n={n} seed={seed}");
                assert!(
                    keys.windows(2).all(|w| matches!(w, [a, b] if a < b)),
                    "{dist} n={n} seed={seed}: not strictly increasing"
                );
            }
        }
    }
}

#[test]
fn lineargen_is_one_line() {
    let keys = generate(Distribution::Lineargen, 10_000, SEED);
    let (Some(&a), Some(&b)) = (keys.first(), keys.get(1)) else {
        panic!("lineargen gave fewer than 2 keys, seed={SEED}");
    };
    let stride = b - a;
    assert!((1..=1024).contains(&stride), "stride {stride} seed={SEED}");
    assert!(a < 1 << 32, "start {a} seed={SEED}");
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(k, a + i as u64 * stride, "key {i} seed={SEED}");
    }
}

#[test]
fn piecewise_is_a_few_exact_lines() {
    for seed in 0..10u64 {
        let keys = generate(Distribution::Piecewise, 100_000, seed);
        let steps: Vec<u64> = keys
            .windows(2)
            .map(|w| match w {
                [a, b] => b - a,
                _ => 0,
            })
            .collect();
        // A segment's steps are one power of two; a change of step starts a new segment (the
        // gap, then the next stride), so there are at most 2 changes per segment.
        let changes = steps
            .windows(2)
            .filter(|w| matches!(w, [a, b] if a != b))
            .count();
        assert!(changes <= 2 * 16, "seed={seed}: {changes} step changes");
        assert!(changes >= 2, "seed={seed}: only {changes} step changes");
        let powers = steps
            .iter()
            .filter(|s| s.is_power_of_two() && **s <= 1 << 20)
            .count();
        assert!(
            powers + 16 >= steps.len(),
            "seed={seed}: steps are not strides"
        );
    }
}

#[test]
fn randomgen_spans_the_u64_range() {
    let i = info(&generate(Distribution::Randomgen, 100_000, SEED));
    assert_eq!(i.distinct, 100_000, "seed={SEED}");
    assert!(i.max.unwrap_or_default() - i.min.unwrap_or_default() > u64::MAX / 2);
}

#[test]
fn table2_specs_parse() -> TestResult {
    for (spec, dist) in [
        ("synthetic:lineargen:1K", Distribution::Lineargen),
        ("synthetic:piecewise:2M", Distribution::Piecewise),
        ("synthetic:randomgen:10", Distribution::Randomgen),
    ] {
        assert_eq!(parse_spec(spec)?.0, dist, "{spec}");
    }
    Ok(())
}
