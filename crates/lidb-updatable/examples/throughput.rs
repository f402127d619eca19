//! Bulk-loads 1M keys of a synthetic distribution into ALEX, LIPP, DILI and a `BTreeMap`, then
//! times 1M gets of present keys and 1M inserts of new keys (drawn from the same distribution, in
//! random order), in one run, and prints one row per structure. Then the same for string keys:
//! LITS beside a `BTreeMap<Vec<u8>, u64>` over the word list (`words_663K.txt.zst` from the data
//! directory; 600K YCSB-like `user` keys when it is absent), every other key bulk-loaded and the
//! rest inserted.
//!
//! `cargo run --release -p lidb-updatable --example throughput [distribution]`
//! (distribution: a `lidb_data::synthetic` name, default `lognormal`; seed fixed at 42).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use lidb_data::synthetic::{self, Distribution};
use lidb_updatable::{Alex, Dili, Lipp, Lits, UpdatableBytesIndex, UpdatableIndex};
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
    bench::<Dili>(&loaded, &probes, &inserted);
    bench_btree(&loaded, &probes, &inserted);
    bench_strings();
}

/// The string keys of the second table: the word list, or YCSB-like keys without it.
fn string_keys() -> (String, Vec<Vec<u8>>) {
    let name = lidb_data::datadir::WORDS_DATASET;
    if let Some(path) = lidb_data::datadir::real_dataset(name) {
        match lidb_data::text::read_keys(&path) {
            Ok(mut keys) => {
                keys.sort_unstable();
                keys.dedup();
                return (name.to_string(), keys);
            }
            Err(e) => eprintln!("{name}: {e}; using YCSB-like keys"),
        }
    } else {
        eprintln!("{name} not found in the data directory; using YCSB-like keys");
    }
    let mut keys: Vec<Vec<u8>> = (0..600_000u64)
        .map(|i| format!("user{:019}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8).into_bytes())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    ("ycsb_600K".to_string(), keys)
}

fn bench_strings() {
    let (name, keys) = string_keys();
    let loaded: Vec<(Vec<u8>, u64)> = keys
        .iter()
        .step_by(2)
        .enumerate()
        .map(|(i, k)| (k.clone(), i as u64))
        .collect();
    let mut inserted: Vec<Vec<u8>> = keys.iter().skip(1).step_by(2).cloned().collect();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    inserted.shuffle(&mut rng);
    let mut probes: Vec<Vec<u8>> = loaded.iter().map(|p| p.0.clone()).collect();
    probes.shuffle(&mut rng);
    println!(
        "\nstrings {name} seed {SEED} loaded {} inserted {}",
        loaded.len(),
        inserted.len()
    );
    println!(
        "index\tbuild_ms\tbytes_after_load\tget_ns\tinsert_ns\tbytes_after_insert\tstats_after_insert"
    );
    let start = Instant::now();
    let Ok(mut lits) = Lits::bulk_load(&loaded) else {
        eprintln!("error: lits refused the keys");
        std::process::exit(1);
    };
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let bytes_loaded = lits.size_bytes();
    let start = Instant::now();
    let mut sum = 0u64;
    for k in &probes {
        sum = sum.wrapping_add(lits.get(black_box(k)).unwrap_or(0));
    }
    let get_ns = start.elapsed().as_secs_f64() * 1e9 / probes.len() as f64;
    black_box(sum);
    let start = Instant::now();
    for (i, k) in inserted.iter().enumerate() {
        black_box(lits.insert(black_box(k), i as u64));
    }
    let insert_ns = start.elapsed().as_secs_f64() * 1e9 / inserted.len() as f64;
    println!(
        "{}\t{build_ms:.1}\t{bytes_loaded}\t{get_ns:.1}\t{insert_ns:.1}\t{}\t{:?}",
        Lits::NAME,
        lits.size_bytes(),
        lits.stats()
    );
    let start = Instant::now();
    let mut map: BTreeMap<Vec<u8>, u64> = loaded.iter().cloned().collect();
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let mut sum = 0u64;
    for k in &probes {
        sum = sum.wrapping_add(map.get(black_box(k)).copied().unwrap_or(0));
    }
    let get_ns = start.elapsed().as_secs_f64() * 1e9 / probes.len() as f64;
    black_box(sum);
    let start = Instant::now();
    for (i, k) in inserted.iter().enumerate() {
        black_box(map.insert(black_box(k.clone()), i as u64));
    }
    let insert_ns = start.elapsed().as_secs_f64() * 1e9 / inserted.len() as f64;
    println!("btreemap\t{build_ms:.1}\t-\t{get_ns:.1}\t{insert_ns:.1}\t-\t-");
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
