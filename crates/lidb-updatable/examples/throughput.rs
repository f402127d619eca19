//! Bulk-loads 1M keys of a synthetic distribution into ALEX, LIPP and a `BTreeMap`, then times
//! 1M gets of present keys and 1M inserts of new keys (drawn from the same distribution, in
//! random order), in one run, and prints one row per structure.
//!
//! `cargo run --release -p lidb-updatable --example throughput [distribution]`
//! (distribution: a `lidb_data::synthetic` name, default `lognormal`; seed fixed at 42).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use lidb_data::synthetic::{self, Distribution};
use lidb_updatable::{Alex, Lipp, UpdatableIndex};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 42;
const LOADED: usize = 1_000_000;

fn main() {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "lognormal".to_string());
    let dist = match Distribution::from_name(&name) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let mut keys = synthetic::generate(dist, 2 * LOADED as u64, SEED);
    keys.dedup();
    // Every other key is bulk-loaded; the rest are inserted afterwards in random order.
    let loaded: Vec<(u64, u64)> = keys.iter().step_by(2).map(|&k| (k, k ^ 1)).collect();
    let mut inserted: Vec<u64> = keys.iter().skip(1).step_by(2).copied().collect();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    inserted.shuffle(&mut rng);
    let mut probes: Vec<u64> = loaded.iter().map(|p| p.0).collect();
    probes.shuffle(&mut rng);
    println!(
        "distribution {} seed {SEED} loaded {} inserted {}",
        dist.name(),
        loaded.len(),
        inserted.len()
    );
    println!(
        "index\tbuild_ms\tbytes_after_load\tget_ns\tinsert_ns\tbytes_after_insert\tstats_after_insert"
    );
    bench::<Alex>(&loaded, &probes, &inserted);
    bench::<Lipp>(&loaded, &probes, &inserted);
    bench_btree(&loaded, &probes, &inserted);
}

fn bench<I: UpdatableIndex>(loaded: &[(u64, u64)], probes: &[u64], inserted: &[u64]) {
    let start = Instant::now();
    let Ok(mut index) = I::bulk_load(loaded) else {
        eprintln!("error: {} refused the keys", I::NAME);
        std::process::exit(1);
    };
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let bytes_loaded = index.size_bytes();
    eprintln!("{} after load: {:?}", I::NAME, index.stats());
    let start = Instant::now();
    let mut sum = 0u64;
    for &k in probes {
        sum = sum.wrapping_add(index.get(black_box(k)).unwrap_or(0));
    }
    let get_ns = start.elapsed().as_secs_f64() * 1e9 / probes.len() as f64;
    black_box(sum);
    let start = Instant::now();
    for &k in inserted {
        black_box(index.insert(black_box(k), k));
    }
    let insert_ns = start.elapsed().as_secs_f64() * 1e9 / inserted.len() as f64;
    println!(
        "{}\t{build_ms:.1}\t{bytes_loaded}\t{get_ns:.1}\t{insert_ns:.1}\t{}\t{:?}",
        I::NAME,
        index.size_bytes(),
        index.stats()
    );
}

fn bench_btree(loaded: &[(u64, u64)], probes: &[u64], inserted: &[u64]) {
    let start = Instant::now();
    let mut map: BTreeMap<u64, u64> = loaded.iter().copied().collect();
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let mut sum = 0u64;
    for &k in probes {
        sum = sum.wrapping_add(map.get(&black_box(k)).copied().unwrap_or(0));
    }
    let get_ns = start.elapsed().as_secs_f64() * 1e9 / probes.len() as f64;
    black_box(sum);
    let start = Instant::now();
    for &k in inserted {
        black_box(map.insert(black_box(k), k));
    }
    let insert_ns = start.elapsed().as_secs_f64() * 1e9 / inserted.len() as f64;
    println!("btreemap\t{build_ms:.1}\t-\t{get_ns:.1}\t{insert_ns:.1}\t-\t-");
}
