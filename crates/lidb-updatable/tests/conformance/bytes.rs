//! Byte-string cases, run on LITS through the [`Bytes`] adapter: random binary and text keys of
//! varying lengths, long common prefixes (URLs, YCSB-like `user` keys), chains of keys that are
//! prefixes of each other, the empty key, runs of 0x00 and 0xFF, and the real word list.

use std::collections::BTreeMap;

use lidb_updatable::{BulkLoadError, Lits, UpdatableBytesIndex};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::harness::{Bytes, Case, Fresh, KeyGen, existing_key, run};

fn check_bytes(case: &Case<'_, Vec<u8>>) {
    run(case, "lits", &BytesKeys, |p| Lits::bulk_load(p).map(Bytes));
}

fn case<'a>(name: &'a str, keys: &'a [Vec<u8>], seed: u64, ops: usize) -> Case<'a, Vec<u8>> {
    Case {
        name,
        keys,
        seed,
        ops,
        fresh: Fresh::Mixed,
    }
}

fn random_string(rng: &mut ChaCha8Rng, max_len: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_len);
    if rng.gen_bool(0.5) {
        (0..len).map(|_| rng.r#gen()).collect()
    } else {
        (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
    }
}

fn ycsb_key(n: u64) -> Vec<u8> {
    format!("user{n:019}").into_bytes()
}

/// Draws byte-string keys: random, edits of present keys (extended, truncated, last byte
/// changed), the empty key, runs of 0x00 / 0xFF, and YCSB-like keys.
struct BytesKeys;

impl KeyGen<Vec<u8>> for BytesKeys {
    fn fresh(
        &self,
        rng: &mut ChaCha8Rng,
        model: &BTreeMap<Vec<u8>, u64>,
        _fresh: Fresh,
    ) -> Vec<u8> {
        match rng.gen_range(0..10) {
            0..=2 => random_string(rng, 24),
            3..=5 => {
                let mut key = existing_key(self, rng, model).unwrap_or_default();
                match rng.gen_range(0..4) {
                    0 => key.push(rng.r#gen()),
                    1 => {
                        key.pop();
                    }
                    2 => {
                        if let Some(last) = key.last_mut() {
                            *last = last.wrapping_add(rng.gen_range(1..=2));
                        }
                    }
                    _ => key.push(0),
                }
                key
            }
            6 => Vec::new(),
            7 => {
                let byte = if rng.gen_bool(0.5) { 0 } else { 0xFF };
                vec![byte; rng.gen_range(1..=40)]
            }
            _ => ycsb_key(rng.gen_range(0..1_000_000)),
        }
    }

    fn random(&self, rng: &mut ChaCha8Rng) -> Vec<u8> {
        random_string(rng, 12)
    }

    fn near(&self, rng: &mut ChaCha8Rng, mut key: Vec<u8>) -> Vec<u8> {
        match rng.gen_range(0..3) {
            0 => {}
            1 => key.push(0),
            _ => {
                key.pop();
            }
        }
        key
    }

    fn refill(&self) -> Vec<Vec<u8>> {
        vec![vec![0xFF, 0xFF], Vec::new(), vec![0], b"m".to_vec()]
    }

    fn value_of(&self, key: &Vec<u8>) -> u64 {
        key.iter().fold(key.len() as u64, |h, &b| {
            h.wrapping_mul(31).wrapping_add(u64::from(b))
        })
    }
}

fn sorted_unique(mut keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn random_strings(rng: &mut ChaCha8Rng, n: usize, max_len: usize) -> Vec<Vec<u8>> {
    sorted_unique((0..n).map(|_| random_string(rng, max_len)).collect())
}

fn urls(rng: &mut ChaCha8Rng, n: usize) -> Vec<Vec<u8>> {
    let keys = (0..n).map(|i| {
        let host = rng.gen_range(0..20);
        let depth = rng.gen_range(0..4);
        let mut url = format!("https://www.example{host}.com");
        for _ in 0..depth {
            url.push_str(&format!("/section{}", rng.gen_range(0..5)));
        }
        url.push_str(&format!("/item{i}"));
        url.into_bytes()
    });
    sorted_unique(keys.collect())
}

/// Every prefix of a few long strings, the empty key among them, plus neighbours.
fn prefix_chains(rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for _ in 0..30 {
        let long = random_string(rng, 80);
        for len in 0..=long.len() {
            let prefix: Vec<u8> = long.iter().take(len).copied().collect();
            let mut sibling = prefix.clone();
            sibling.push(rng.r#gen());
            keys.push(prefix);
            keys.push(sibling);
        }
    }
    sorted_unique(keys)
}

fn extreme_bytes() -> Vec<Vec<u8>> {
    let mut keys = vec![Vec::new()];
    for len in 1..=64 {
        keys.push(vec![0; len]);
        keys.push(vec![0xFF; len]);
        let mut mixed = vec![0; len];
        if let Some(last) = mixed.last_mut() {
            *last = 0xFF;
        }
        keys.push(mixed);
        let mut mixed = vec![0xFF; len];
        if let Some(last) = mixed.last_mut() {
            *last = 0;
        }
        keys.push(mixed);
    }
    sorted_unique(keys)
}

const OPS: usize = 3000;

#[test]
fn bytes_random_binary_and_text() {
    let mut rng = ChaCha8Rng::seed_from_u64(201);
    let keys = random_strings(&mut rng, 3000, 32);
    check_bytes(&case("random_strings", &keys, 301, OPS));
}

#[test]
fn bytes_long_common_prefixes() {
    let mut rng = ChaCha8Rng::seed_from_u64(202);
    let keys = urls(&mut rng, 3000);
    check_bytes(&case("urls", &keys, 302, OPS));
    let keys: Vec<Vec<u8>> = (0..3000u64).map(|i| ycsb_key(i * 7919)).collect();
    check_bytes(&case("ycsb", &sorted_unique(keys), 303, OPS));
}

/// Groups of keys that share long runs past any common prefix (more than the 8 symbols a CDF
/// reads), so that model nodes must nest along the runs to separate them.
#[test]
fn bytes_long_shared_runs() {
    let mut keys = Vec::new();
    for group in 0..40u32 {
        let run = "x".repeat(group as usize % 7 * 5);
        for i in 0..60u32 {
            keys.push(format!("{group:03}{run}{i:06}").into_bytes());
            keys.push(format!("{group:03}{run}").into_bytes());
        }
    }
    check_bytes(&case("long_shared_runs", &sorted_unique(keys), 312, OPS));
}

#[test]
fn bytes_prefixes_of_each_other() {
    let mut rng = ChaCha8Rng::seed_from_u64(203);
    let keys = prefix_chains(&mut rng);
    check_bytes(&case("prefix_chains", &keys, 304, OPS));
}

#[test]
fn bytes_zero_and_ff_runs_and_empty_key() {
    let keys = extreme_bytes();
    check_bytes(&case("extreme_bytes", &keys, 305, OPS));
    check_bytes(&case("empty_key_only", &[Vec::new()], 306, 500));
    check_bytes(&case("empty_index", &[], 307, OPS));
}

#[test]
fn bytes_sequential_ycsb_inserts() {
    let mut lits = Lits::bulk_load::<Vec<u8>>(&[]).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..20_000u64 {
        assert_eq!(lits.insert(&ycsb_key(i), i), None);
    }
    lits.assert_invariants();
    let stats = lits.stats();
    eprintln!("lits after 20K sorted inserts {stats:?}");
    assert!(
        stats.depth_max <= 8,
        "lits sorted inserts built a chain: {stats:?}"
    );
    assert_eq!(lits.get(&ycsb_key(12_345)), Some(12_345));
    let from: Vec<u64> = lits
        .range_from(format!("user{:018}", 199).as_bytes())
        .map(|p| p.1)
        .take(3)
        .collect();
    assert_eq!(from, vec![1990, 1991, 1992]);
}

fn words() -> Option<Vec<Vec<u8>>> {
    let name = lidb_data::datadir::WORDS_DATASET;
    let path = lidb_data::datadir::require_dataset("bytes_words", name)?;
    let words = lidb_data::text::read_keys(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some(sorted_unique(words))
}

#[test]
fn bytes_real_words() {
    let Some(all) = words() else {
        return;
    };
    let step = (all.len() / 20_000).max(1);
    let keys: Vec<Vec<u8>> = all.into_iter().step_by(step).collect();
    check_bytes(&case("words_sampled", &keys, 308, OPS));
}

#[test]
fn bytes_bulk_load_rejects_unsorted_and_duplicates() {
    let want = |position| Err(BulkLoadError::NotStrictlyIncreasing { position });
    let unsorted: [(&[u8], u64); 2] = [(b"b", 0), (b"a", 0)];
    let duplicate: [(&[u8], u64); 3] = [(b"", 0), (b"a", 0), (b"a", 1)];
    assert_eq!(Lits::bulk_load(&unsorted).map(|_| ()), want(1));
    assert_eq!(Lits::bulk_load(&duplicate).map(|_| ()), want(2));
}

#[test]
fn bytes_stats_and_size_are_sane() {
    let mut rng = ChaCha8Rng::seed_from_u64(204);
    let keys = urls(&mut rng, 20_000);
    let pairs: Vec<(Vec<u8>, u64)> = keys.iter().map(|k| (k.clone(), 1)).collect();
    let lits = Lits::bulk_load(&pairs).unwrap_or_else(|e| panic!("{e}"));
    let key_bytes: u64 = keys.iter().map(|k| k.len() as u64 + 8).sum();
    let (stats, size) = (lits.stats(), lits.size_bytes());
    eprintln!("lits urls {stats:?} {size} bytes");
    assert!(size >= key_bytes, "{size} bytes cannot hold {key_bytes}");
    assert!(
        stats.nodes >= 2 && stats.models >= 1 && stats.leaf_nodes >= 1,
        "{stats:?}"
    );
    assert!(
        stats.depth_avg >= 2.0 && stats.depth_max as f64 >= stats.depth_avg,
        "{stats:?}"
    );
    let mut shuffled = keys.clone();
    shuffled.shuffle(&mut rng);
    for key in shuffled.iter().take(2000) {
        assert_eq!(lits.get(key), Some(1));
    }
}

#[test]
fn lits_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Lits>();
}

#[test]
#[ignore = "larger run: cargo test -p lidb-updatable --release -- --ignored"]
fn bytes_large() {
    let mut rng = ChaCha8Rng::seed_from_u64(205);
    let keys = random_strings(&mut rng, 200_000, 40);
    check_bytes(&case("large_random_strings", &keys, 309, 200_000));
    let keys = urls(&mut rng, 200_000);
    check_bytes(&case("large_urls", &keys, 310, 200_000));
    if let Some(all) = words() {
        check_bytes(&case("words_all", &all, 311, 200_000));
    }
}
