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

/// The runner's checks: a correct index gives exact op counts and no errors; one that answers a
/// few reads wrong is caught, and its wrong answers are not counted as throughput.
mod runner {
    use std::time::Duration;

    use lidb_bench::concurrent::{
        BTreeRwLock, ConcurrentIndex, Config, Distribution, IndexKind, KeySplit, Workload, run,
        run_with,
    };

    fn config(workloads: &str) -> Config {
        Config {
            indexes: vec![IndexKind::BTreeRwLock],
            workloads: Workload::parse_list(workloads).unwrap(),
            threads: vec![1, 2],
            records: 2_000,
            ops: 4_000,
            distribution: Distribution::Uniform,
            max_duration: Duration::from_secs(60),
            seed: 3,
            progress: false,
            alloc_counter: None,
        }
    }

    fn split(cfg: &Config) -> KeySplit {
        let keys: Vec<u64> = (0..10_000u64).map(|k| k * 7 + 1).collect();
        KeySplit::new(keys, cfg.records, cfg.fresh_needed(), cfg.seed).unwrap()
    }

    struct Broken(BTreeRwLock);

    impl ConcurrentIndex for Broken {
        fn insert(&self, key: u64, value: u64) -> Option<u64> {
            self.0.insert(key, value)
        }
        fn update(&self, key: u64, value: u64) -> Option<u64> {
            self.0.update(key, value)
        }
        fn get(&self, key: u64) -> Option<u64> {
            // Every key ending in 0 mod 10 (in 7k+1 steps: one in ten) answers wrong.
            self.0
                .get(key)
                .map(|v| if key.is_multiple_of(10) { v ^ 1 } else { v })
        }
        fn remove(&self, key: u64) -> Option<u64> {
            self.0.remove(key)
        }
        fn scan(&self, from: u64, limit: usize, out: &mut Vec<(u64, u64)>) {
            self.0.scan(from, limit, out)
        }
    }

    #[test]
    fn a_correct_index_counts_every_op_and_no_error() {
        let cfg = config("a,b,c,d,e,f,insert");
        let report = run(&cfg, &split(&cfg)).unwrap();
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        for row in report.rows.iter().filter(|r| r.op == "all") {
            assert_eq!(row.ops, 4_000, "{} {}", row.workload, row.threads);
        }
    }

    #[test]
    fn wrong_answers_are_errors_not_throughput() {
        let cfg = config("c");
        let report = run_with(&cfg, &split(&cfg), &|_, e| {
            Ok(Box::new(Broken(BTreeRwLock::bulk_load(e))))
        })
        .unwrap();
        assert!(report.errors > 100, "{}", report.errors);
        assert!(report.first_error.is_some());
        for row in report.rows.iter().filter(|r| r.op == "all") {
            assert_eq!(row.ops + row.errors, 4_000);
        }
    }
}
