//! Tests of `zipf.rs`.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 0x21BF;

#[test]
fn fnvhash64_matches_ycsb() {
    // Values of YCSB's Utils.fnvhash64 (FNV-1a over 8 LE bytes, then Math.abs).
    assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
    assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
    assert_eq!(fnvhash64(12345), 1_792_800_413_050_876_852);
}

#[test]
fn zeta_small_values_and_increments() {
    assert_eq!(zeta(0, 0.99), 0.0);
    assert_eq!(zeta(1, 0.99), 1.0);
    let z2 = 1.0 + 0.5f64.powf(0.99);
    assert!((zeta(2, 0.99) - z2).abs() < 1e-15);
    let whole = zeta(1000, 0.8);
    let split = zeta_range(400, 1000, 0.8, zeta(400, 0.8));
    assert!((whole - split).abs() < 1e-9);
}

#[test]
fn zeta_grows_past_the_exact_limit_in_steps() {
    // A Zipfian over more than EXACT_ZETA_LIMIT items that grows (YCSB D's latest distribution
    // over 10M records): the increment starts past the limit. It once recursed without end.
    let theta = 0.99;
    let a = EXACT_ZETA_LIMIT + 5;
    let b = EXACT_ZETA_LIMIT + 2_000_000;
    let whole = zeta(b, theta);
    let stepped = zeta_range(a, b, theta, zeta(a, theta));
    assert!(
        ((whole - stepped) / whole).abs() < 1e-12,
        "{whole} vs {stepped}"
    );
    let tiny = zeta_range(a, a + 1, theta, 0.0);
    let term = ((a + 1) as f64).powf(-theta);
    assert!(((tiny - term) / term).abs() < 1e-6, "{tiny} vs {term}");
}

#[test]
fn euler_maclaurin_tail_matches_exact_sum() {
    for theta in [0.5, 0.9, 0.99] {
        let m = 1_000u64;
        let n = 2_000_000u64;
        let exact: f64 = (m + 1..=n).map(|i| (i as f64).powf(-theta)).sum();
        let approx = euler_maclaurin_tail(m, n, theta);
        assert!(
            ((exact - approx) / exact).abs() < 1e-12,
            "theta {theta}: exact {exact} approx {approx}"
        );
    }
}

#[test]
fn approximated_zeta_reproduces_ycsb_constant() {
    let z = zeta(SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT);
    assert!(
        ((z - SCRAMBLED_ZETAN) / SCRAMBLED_ZETAN).abs() < 1e-9,
        "zeta(1e10, 0.99) = {z}, YCSB says {SCRAMBLED_ZETAN}"
    );
}

#[test]
fn zipfian_head_has_the_expected_share() -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let n = 1_000u64;
    let mut z = Zipfian::new(0, n - 1, 0.99)?;
    let draws = 200_000;
    let mut counts = vec![0u64; n as usize];
    for _ in 0..draws {
        let v = z.next_value(&mut rng);
        assert!(v < n, "out of range {v} seed={SEED}");
        if let Some(c) = counts.get_mut(v as usize) {
            *c += 1;
        }
    }
    let zn = zeta(n, 0.99);
    // Gray's algorithm is exact for the two hottest items and approximates the rest.
    for (i, &count) in counts.iter().take(2).enumerate() {
        let expected = 1.0 / ((i + 1) as f64).powf(0.99) / zn;
        let got = count as f64 / draws as f64;
        assert!(
            (got - expected).abs() < 0.1 * expected,
            "item {i}: share {got:.4}, expected {expected:.4}, seed={SEED}"
        );
    }
    Ok(())
}

#[test]
fn scrambled_zipfian_hottest_item_share() -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let n = 100_000u64;
    let mut z = ScrambledZipfian::new(0, n - 1, ZIPFIAN_CONSTANT)?;
    let draws = 300_000u64;
    let mut counts = std::collections::HashMap::new();
    for _ in 0..draws {
        let v = z.next_value(&mut rng);
        assert!(v < n);
        *counts.entry(v).or_insert(0u64) += 1;
    }
    // Zipfian value 0 has probability 1/zetan = 3.78%; it lands on item fnvhash64(0) % n.
    let hot = fnvhash64(0) % n;
    let share = counts.get(&hot).copied().unwrap_or(0) as f64 / draws as f64;
    let expected = 1.0 / SCRAMBLED_ZETAN;
    assert!(
        (share - expected).abs() < 0.1 * expected,
        "hottest share {share:.4}, expected about {expected:.4}, seed={SEED}"
    );
    let max = counts.values().copied().max().unwrap_or(0);
    assert_eq!(
        counts.get(&hot).copied(),
        Some(max),
        "item {hot} is the hottest"
    );
    Ok(())
}

#[test]
fn zipfian_grows_incrementally() -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut z = Zipfian::new(0, 99, 0.99)?;
    for count in [100u64, 150, 1_000, 500] {
        for _ in 0..1_000 {
            assert!(z.next_long(count, &mut rng) < count);
        }
    }
    // After growing to 1000 the zeta is the full zeta(1000).
    assert!((z.zetan - zeta(1_000, 0.99)).abs() < 1e-9);
    Ok(())
}

#[test]
fn skewed_latest_prefers_recent() -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let last = 9_999u64;
    let mut g = SkewedLatest::new(last, ZIPFIAN_CONSTANT)?;
    let recent = (0..10_000)
        .map(|_| g.next_value(last, &mut rng))
        .filter(|&r| r + 100 > last)
        .count();
    assert!(
        recent > 5_000,
        "only {recent} of 10000 in the newest 1%, seed={SEED}"
    );
    let mut tiny = SkewedLatest::new(0, ZIPFIAN_CONSTANT)?;
    assert_eq!(tiny.next_value(0, &mut rng), 0);
    assert!(tiny.next_value(1, &mut rng) <= 1);
    Ok(())
}

#[test]
fn bad_parameters_are_errors() {
    for theta in [0.0, 1.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
        assert!(Zipfian::new(0, 10, theta).is_err(), "theta {theta}");
        assert!(
            ScrambledZipfian::new(0, 10, theta).is_err(),
            "theta {theta}"
        );
    }
    assert!(Zipfian::new(5, 4, 0.5).is_err());
    let z = Zipfian::with_zetan(0, u64::MAX, 0.5, 1.0);
    assert_eq!(z.items(), u64::MAX, "saturates instead of overflowing");
}
