//! Structure and build-speed figures of the greedy families (plr, fiting, lpa): segments,
//! size_bytes, build keys/s and search ns on 1M uniform and 1M lognormal keys at B = 16 and 64.
//! Ignored by default; run in release:
//!
//! `cargo test --release -p lidb-index --test plr_fiting_lpa_figures -- --ignored --nocapture`

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Instant;

use lidb_index::{Family, Params, build, lower_bound_with};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const N: usize = 1_000_000;
const SEED: u64 = 42;

fn uniform() -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut keys: Vec<u64> = (0..N).map(|_| rng.r#gen()).collect();
    keys.sort_unstable();
    keys
}

/// Lognormal(0, 2) scaled by 1e9 (Box-Muller normals), capped below 2^64.
fn lognormal() -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut keys: Vec<u64> = (0..N)
        .map(|_| {
            let (u, v): (f64, f64) = (rng.r#gen::<f64>().max(1e-300), rng.r#gen());
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            ((2.0 * z).exp() * 1e9).min(1.8e19) as u64
        })
        .collect();
    keys.sort_unstable();
    keys
}

#[test]
#[ignore = "figures for the report; run in release with --ignored --nocapture"]
fn figures() {
    for (dist, keys) in [("uniform", uniform()), ("lognormal", lognormal())] {
        let mut rng = ChaCha8Rng::seed_from_u64(SEED + 1);
        let qs: Vec<u64> = (0..200_000)
            .map(|_| keys[rng.gen_range(0..keys.len())])
            .collect();
        for b in [16u64, 64] {
            for family in [Family::Plr, Family::Fiting, Family::Lpa] {
                let p = Params::new(b);
                let mut best = f64::MAX;
                let mut idx = None;
                for _ in 0..3 {
                    let t = Instant::now();
                    let built = build(family, &keys, &p).unwrap();
                    best = best.min(t.elapsed().as_secs_f64());
                    idx = Some(built);
                }
                let idx = idx.unwrap();
                let t = Instant::now();
                let mut sum = 0u64;
                for &q in &qs {
                    sum = sum.wrapping_add(lower_bound_with(idx.as_ref(), &keys, q));
                }
                black_box(sum);
                let lookup_ns = t.elapsed().as_secs_f64() * 1e9 / qs.len() as f64;
                let t = Instant::now();
                for &q in &qs {
                    sum = sum.wrapping_add(idx.search(q).lo);
                }
                black_box(sum);
                let search_ns = t.elapsed().as_secs_f64() * 1e9 / qs.len() as f64;
                println!(
                    "{dist:9} n={N} B={b:3} {:6}: segments={:6} size_bytes={:8} build={:6.1} Mkeys/s ({:.1} ms) search={search_ns:.0} ns lookup={lookup_ns:.0} ns details={:?}",
                    family.name(),
                    idx.stats().models,
                    idx.size_bytes(),
                    N as f64 / best / 1e6,
                    best * 1e3,
                    idx.stats().details,
                );
            }
        }
    }
}
