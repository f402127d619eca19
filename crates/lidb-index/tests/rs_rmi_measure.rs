//! Throwaway measurements behind the rs and rmi design choices (ignored by default):
//! radix bits of rs (size vs search time) and the rmi leaf layout, on uniform, lognormal and,
//! where `/tmp/tweetids_10M_uint64` exists (a decompressed SOSD file), real tweet IDs.
//!
//! `cargo test -p lidb-index --test rs_rmi_measure -- --ignored --nocapture --test-threads 1`

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;

use lidb_index::{Family, LearnedIndex, Params, RmiRoot, StatValue, build, lower_bound_with};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn uniform(n: usize) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut k: Vec<u64> = (0..n).map(|_| rng.r#gen()).collect();
    k.sort_unstable();
    k
}

fn lognormal(n: usize) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut k: Vec<u64> = (0..n)
        .map(|_| {
            let s: f64 = (0..12).map(|_| rng.r#gen::<f64>()).sum::<f64>() - 6.0;
            ((2.0 * s).exp() * 1e9).min(1.8e19) as u64
        })
        .collect();
    k.sort_unstable();
    k
}

fn sosd(path: &str) -> Option<Vec<u64>> {
    let bytes = std::fs::read(path).ok()?;
    let n = u64::from_le_bytes(bytes[..8].try_into().ok()?) as usize;
    Some(
        bytes[8..8 + 8 * n]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

fn datasets(sizes: &[usize]) -> Vec<(String, Vec<u64>)> {
    let mut out = Vec::new();
    for &n in sizes {
        out.push((format!("uniform {}M", n / 1_000_000), uniform(n)));
        out.push((format!("lognormal {}M", n / 1_000_000), lognormal(n)));
    }
    if let Some(k) = sosd("/tmp/tweetids_10M_uint64") {
        out.push(("tweetids 10M".into(), k));
    }
    out
}

/// Half present keys, half random values inside the key range.
fn query_set(keys: &[u64]) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (lo, hi) = (keys[0], *keys.last().unwrap());
    (0..1_000_000)
        .map(|i| {
            if i % 2 == 0 {
                keys[rng.gen_range(0..keys.len())]
            } else {
                rng.gen_range(lo..=hi)
            }
        })
        .collect()
}

/// (search ns, full lookup ns) per query.
fn time(idx: &dyn LearnedIndex, keys: &[u64], qs: &[u64]) -> (f64, f64) {
    let t = Instant::now();
    let mut acc = 0u64;
    for &q in qs {
        let b = idx.search(black_box(q));
        acc = acc.wrapping_add(b.lo ^ b.hi);
    }
    black_box(acc);
    let search = t.elapsed().as_nanos() as f64 / qs.len() as f64;
    let t = Instant::now();
    for &q in qs {
        acc = acc.wrapping_add(lower_bound_with(idx, keys, black_box(q)));
    }
    black_box(acc);
    (search, t.elapsed().as_nanos() as f64 / qs.len() as f64)
}

fn detail(idx: &dyn LearnedIndex, name: &str) -> u64 {
    match idx.stats().details.iter().find(|(k, _)| *k == name) {
        Some((_, StatValue::U64(v))) => *v,
        _ => 0,
    }
}

#[test]
#[ignore]
fn rs_radix_bits() {
    println!("dataset | B | r | spline points | bytes | build Mkeys/s | search ns | lookup ns");
    for (name, keys) in datasets(&[1_000_000, 10_000_000]) {
        let qs = query_set(&keys);
        for b in [16u64, 64] {
            for r in [0u32, 1, 2, 4, 8, 12, 16, 18] {
                let mut p = Params::new(b);
                p.rs_radix_bits = r;
                let t = Instant::now();
                let idx = build(Family::Rs, &keys, &p).unwrap();
                let mks = keys.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
                let (s, l) = time(idx.as_ref(), &keys, &qs);
                println!(
                    "{name} | {b} | {} | {} | {} | {mks:.1} | {s:.1} | {l:.1}",
                    detail(idx.as_ref(), "radix_bits"),
                    detail(idx.as_ref(), "spline_points"),
                    idx.size_bytes()
                );
            }
        }
    }
}

#[test]
#[ignore]
fn rmi_layout() {
    println!(
        "dataset | B | root | leaves | hybrid | bytes | build Mkeys/s | search ns | lookup ns"
    );
    for (name, keys) in datasets(&[1_000_000, 10_000_000]) {
        let qs = query_set(&keys);
        for b in [16u64, 64] {
            for root in [RmiRoot::Linear, RmiRoot::Cubic] {
                let mut p = Params::new(b);
                p.rmi_root = root;
                let t = Instant::now();
                let idx = build(Family::Rmi, &keys, &p).unwrap();
                let mks = keys.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
                let (s, l) = time(idx.as_ref(), &keys, &qs);
                println!(
                    "{name} | {b} | {root:?}->{} | {} | {} | {} | {mks:.1} | {s:.1} | {l:.1}",
                    detail(idx.as_ref(), "root"),
                    detail(idx.as_ref(), "leaves"),
                    detail(idx.as_ref(), "hybrid_leaves"),
                    idx.size_bytes()
                );
            }
        }
    }
}
