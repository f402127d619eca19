//! Every `ConcurrentIndex` implementation against a `BTreeMap`, sequential random operations
//! (insert, update, get, remove, scan) over a bulk-loaded start, keys drawn from a small range so
//! that operations hit present, removed and never-seen keys. Keys and values avoid `u64::MAX`
//! (congee's exclusive range end, li+delta's tombstone). The seed is in every failure message.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;

use lidb_bench::concurrent::{IndexKind, build};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn conform(kind: IndexKind, seed: u64, loaded: usize, ops: usize, key_space: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    while model.len() < loaded {
        model.insert(rng.gen_range(0..key_space) * 3, rng.gen_range(0..u64::MAX));
    }
    let entries: Vec<(u64, u64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    let index = build(kind, &entries).unwrap();
    let ctx = |i: usize| format!("{} seed {seed} op {i}", kind.name());
    let mut out = Vec::new();
    for i in 0..ops {
        let k = rng.gen_range(0..key_space * 3);
        let v = rng.gen_range(0..u64::MAX);
        match rng.gen_range(0..10) {
            0..=2 => assert_eq!(index.insert(k, v), model.insert(k, v), "{}", ctx(i)),
            3 => {
                let want = model.get_mut(&k).map(|x| std::mem::replace(x, v));
                assert_eq!(index.update(k, v), want, "{}", ctx(i));
            }
            4..=5 => assert_eq!(index.get(k), model.get(&k).copied(), "{}", ctx(i)),
            6 => assert_eq!(index.remove(k), model.remove(&k), "{}", ctx(i)),
            _ => {
                let limit = rng.gen_range(1..40);
                out.clear();
                index.scan(k, limit, &mut out);
                let want: Vec<(u64, u64)> = model
                    .range(k..)
                    .take(limit)
                    .map(|(&a, &b)| (a, b))
                    .collect();
                assert_eq!(out, want, "{} scan from {k} limit {limit}", ctx(i));
            }
        }
    }
    for (&k, &v) in &model {
        assert_eq!(index.get(k), Some(v), "{} final get {k}", kind.name());
    }
}

#[test]
fn every_index_matches_a_btreemap() {
    for kind in IndexKind::ALL {
        for seed in 0..3 {
            conform(kind, seed, 2_000, 20_000, 4_000);
        }
    }
}

#[test]
fn every_index_works_from_empty_and_with_inserts_only() {
    for kind in IndexKind::ALL {
        conform(kind, 7, 0, 5_000, 100_000);
    }
}

#[test]
fn parse_list_knows_every_name_and_all() {
    assert_eq!(
        IndexKind::parse_list("all").unwrap(),
        IndexKind::ALL.to_vec()
    );
    for kind in IndexKind::ALL {
        assert_eq!(IndexKind::parse_list(kind.name()).unwrap(), vec![kind]);
    }
    assert!(IndexKind::parse_list("finedex,nope").is_err());
}
