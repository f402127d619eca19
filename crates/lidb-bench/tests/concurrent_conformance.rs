//! lidb's own `ConcurrentIndex` implementations through the one conformance harness
//! (`concurrent::conformance::check`: random operations against a `BTreeMap`; the seed is in
//! every failure message; lidb-peers' tests run the third-party peers through it).
//! Then the runner: exact op counts, wrong answers caught, the skew workload (hot window, fresh
//! keys, insert and read rows) and the throughput timeline.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use lidb_bench::concurrent::{IndexKind, conformance};
use lidb_bench::peers::{INDEX_PEERS, Peers};

#[test]
fn every_index_matches_a_btreemap() {
    for kind in IndexKind::OWN {
        for seed in 0..3 {
            conformance::check(kind, seed, 2_000, 20_000, 4_000).unwrap();
        }
    }
}

#[test]
fn every_index_works_from_empty_and_with_inserts_only() {
    for kind in IndexKind::OWN {
        conformance::check(kind, 7, 0, 5_000, 100_000).unwrap();
    }
}

/// The harness catches a wrong answer (a `btree-rwlock` whose gets are off by one, registered
/// under its own name), naming the index and the seed.
#[test]
fn the_harness_catches_a_wrong_index() {
    let broken = IndexKind::new("broken", |e| {
        Ok(Box::new(runner::Broken(
            lidb_bench::concurrent::BTreeRwLock::bulk_load(e),
        )))
    });
    let e = conformance::check(broken, 5, 2_000, 20_000, 4_000).unwrap_err();
    assert!(e.starts_with("broken seed 5 op "), "{e}");
}

#[test]
fn parse_list_knows_every_name_and_all() {
    let own = Peers::none().all_indexes();
    assert_eq!(own, IndexKind::OWN.to_vec());
    assert_eq!(IndexKind::parse_list("all", &own).unwrap(), own);
    for kind in IndexKind::OWN {
        assert_eq!(
            IndexKind::parse_list(kind.name(), &own).unwrap(),
            vec![kind]
        );
    }
    assert!(IndexKind::parse_list("finedex,nope", &own).is_err());
    // Without their registration the peers are names this binary lacks, not typos.
    for name in INDEX_PEERS {
        assert!(IndexKind::parse_list(name, &own).is_err());
        assert!(Peers::none().lacks(name), "{name}");
    }
    assert!(!Peers::none().lacks("nope") && !Peers::none().complete());
}

/// The runner's checks: a correct index gives exact op counts and no errors; one that answers a
/// few reads wrong is caught, and its wrong answers are not counted as throughput.
mod runner {
    use std::time::Duration;

    use lidb_bench::concurrent::{
        BTreeRwLock, ConcurrentIndex, Config, Distribution, IndexKind, KeySplit, Workload, run,
        run_with,
    };

    pub fn config(workloads: &str) -> Config {
        Config {
            indexes: vec![IndexKind::BTREE_RWLOCK],
            workloads: Workload::parse_list(workloads).unwrap(),
            threads: vec![1, 2],
            records: 2_000,
            ops: 4_000,
            distribution: Distribution::Uniform,
            hotspots: vec![],
            timeline: None,
            max_duration: Duration::from_secs(60),
            seed: 3,
            progress: false,
            alloc_counter: None,
        }
    }

    pub fn split(cfg: &Config) -> KeySplit {
        let keys: Vec<u64> = (0..10_000u64).map(|k| k * 7 + 1).collect();
        KeySplit::new(keys, cfg.records, cfg.fresh_needed(), cfg.seed).unwrap()
    }

    pub struct Broken(pub BTreeRwLock);

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

/// The skew workload: a seeded hot window of width R * (loaded range) inside the loaded range,
/// fresh keys inside it that are not loaded, insert and read rows per ratio, every answer checked.
mod skew {
    use std::collections::{BTreeSet, HashSet};

    use lidb_bench::concurrent::{HotWindow, IndexKind, Workload, parse_hotspots, run};

    use super::runner::{config, split};

    #[test]
    fn hotspot_lists_parse_and_bad_ratios_are_refused() {
        assert_eq!(parse_hotspots("0.01,0.1,1").unwrap(), vec![0.01, 0.1, 1.0]);
        for bad in ["0", "-0.5", "1.5", "abc", "", "nan", "inf", "0.5,0"] {
            assert!(parse_hotspots(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_window_is_inside_and_its_fresh_keys_are_new_and_distinct() {
        let loaded: Vec<u64> = (0..5_000u64).map(|k| k * 1_000 + 17).collect();
        let (min, max) = (loaded[0], loaded[loaded.len() - 1]);
        for (ratio, count) in [(0.01, 2_000), (0.001, 4_000), (0.5, 10_000), (1.0, 100)] {
            for seed in 0..4 {
                let w = HotWindow::new(&loaded, ratio, seed).unwrap();
                assert!(min <= w.lo && w.lo <= w.hi && w.hi <= max, "{w:?}");
                assert_eq!(w.hi - w.lo, ((max - min) as f64 * ratio) as u64);
                let keys = w.fresh_keys(&loaded, count, ratio, seed).unwrap();
                assert_eq!(keys.len(), count);
                let set: HashSet<u64> = keys.iter().copied().collect();
                assert_eq!(set.len(), count, "duplicates at R={ratio} seed {seed}");
                for k in &keys {
                    assert!(w.contains(*k), "{k} outside {w:?}");
                    assert!(loaded.binary_search(k).is_err(), "{k} is loaded");
                }
                // Deterministic from the seed.
                assert_eq!(keys, w.fresh_keys(&loaded, count, ratio, seed).unwrap());
                assert_eq!(w, HotWindow::new(&loaded, ratio, seed).unwrap());
            }
        }
        assert_eq!(HotWindow::new(&[], 0.5, 1), None);
    }

    #[test]
    fn a_window_too_small_names_its_shortfall() {
        // Dense keys: a window of width 19 holds 20 keys, all loaded.
        let loaded: Vec<u64> = (0..2_000).collect();
        let w = HotWindow::new(&loaded, 0.01, 3).unwrap();
        let e = w.fresh_keys(&loaded, 10, 0.01, 3).unwrap_err();
        assert!(
            e.contains("10 short") && e.contains("--hotspot 0.01"),
            "{e}"
        );
        // Every other key loaded: exactly the free ones can be had, one more cannot.
        let loaded: Vec<u64> = (0..2_000).map(|k| k * 2).collect();
        let w = HotWindow::new(&loaded, 0.05, 3).unwrap();
        let free = (w.lo..=w.hi).filter(|k| k % 2 == 1).count();
        let keys = w.fresh_keys(&loaded, free, 0.05, 3).unwrap();
        assert_eq!(keys.iter().copied().collect::<BTreeSet<u64>>().len(), free);
        let e = w.fresh_keys(&loaded, free + 1, 0.05, 3).unwrap_err();
        assert!(e.contains("1 short"), "{e}");
        // Through the runner: fails before any run.
        let mut cfg = config("skew");
        cfg.hotspots = vec![0.000_01];
        assert!(run(&cfg, &split(&cfg)).unwrap_err().contains("short"));
    }

    #[test]
    fn every_index_runs_skew_with_insert_and_read_rows() {
        let mut cfg = config("skew");
        cfg.indexes = IndexKind::OWN.to_vec();
        cfg.hotspots = vec![0.05, 1.0];
        cfg.ops = 2_000;
        let report = run(&cfg, &split(&cfg)).unwrap();
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        for kind in IndexKind::OWN {
            let finedex = kind == IndexKind::FINEDEX;
            for hotspot in [0.05, 1.0] {
                for threads in [1, 2] {
                    let rows: Vec<_> = report
                        .rows
                        .iter()
                        .filter(|r| {
                            r.index == kind.name()
                                && r.hotspot == Some(hotspot)
                                && r.threads == threads
                        })
                        .collect();
                    if threads > 1 && rows.iter().any(|r| !r.concurrent) {
                        continue;
                    }
                    let ops = |op: &str| rows.iter().find(|r| r.op == op).map(|r| r.ops);
                    let ctx = format!("{} R={hotspot} t={threads}", kind.name());
                    assert_eq!(ops("insert"), Some(2_000), "{ctx}");
                    assert_eq!(ops("read"), Some(2_000), "{ctx}");
                    assert_eq!(ops("all"), Some(4_000), "{ctx}");
                    for r in &rows {
                        assert_eq!(r.workload, Workload::Skew.name());
                        assert!(r.hot_lo.is_some() && r.hot_lo <= r.hot_hi, "{ctx}");
                        // The models alone: finedex only, part of its heap estimate.
                        let heap = r.bytes_per_key.unwrap_or(0.0) * 2_000.0;
                        match (finedex, r.model_bytes) {
                            (true, Some(b)) => {
                                assert!(b > 0 && (b as f64) < heap, "{ctx}: {b} of {heap}");
                            }
                            (true, None) => panic!("{ctx}: no model_bytes"),
                            (false, b) => assert_eq!(b, None, "{ctx}"),
                        }
                        // 2,000 inserts into a narrow window fill level bins: finedex reports
                        // their load factor, the others have none.
                        match (finedex, r.end_bin_load_factor) {
                            (true, Some(f)) => {
                                assert!(f > 0.0 && f <= 1.0, "{ctx}: load factor {f}");
                            }
                            (true, None) => panic!("{ctx}: no bin load factor"),
                            (false, f) => assert_eq!(f, None, "{ctx}"),
                        }
                    }
                }
            }
        }
    }
}

/// The timeline: the ops of a phase's intervals add up exactly to the operations its workers
/// ran (checked ones plus errors), for every workload and a broken index too.
mod timeline {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use lidb_bench::concurrent::{BTreeRwLock, IndexKind, Report, run, run_with};

    use super::runner::{Broken, config, split};

    /// Sums of timeline ops per (index, workload, hotspot, threads, phase).
    fn sums(report: &Report) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in &report.timeline {
            assert_eq!(t.row, "timeline");
            assert!(t.interval >= 1 && t.t_ms >= 0.0);
            let key = format!(
                "{} {} {:?} {} {}",
                t.index, t.workload, t.hotspot, t.threads, t.op
            );
            *m.entry(key).or_insert(0) += t.ops;
        }
        m
    }

    #[test]
    fn interval_ops_add_up_to_the_ops_of_each_phase() {
        let mut cfg = config("c,insert,skew");
        cfg.indexes = vec![IndexKind::FINEDEX, IndexKind::BTREE_RWLOCK];
        cfg.hotspots = vec![0.1];
        cfg.timeline = Some(Duration::from_millis(1));
        let report = run(&cfg, &split(&cfg)).unwrap();
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        let sums = sums(&report);
        let mut phases = 0;
        for r in &report.rows {
            let phase = match (r.workload.as_str(), r.op.as_str()) {
                ("skew", "insert" | "read") => r.op.as_str(),
                ("skew", _) | (_, "read" | "insert") => continue,
                (_, _) => "all",
            };
            assert_eq!(r.row, "result");
            let key = format!(
                "{} {} {:?} {} {phase}",
                r.index, r.workload, r.hotspot, r.threads
            );
            assert_eq!(sums.get(&key), Some(&(r.ops + r.errors)), "{key}");
            phases += 1;
        }
        // finedex and btree: c and insert at 1 and 2 threads, skew's two phases at each.
        assert_eq!(phases, 2 * (2 + 2 + 4));
        assert!(
            report
                .timeline
                .iter()
                .all(|t| (t.index == "finedex") == t.model_retrains.is_some())
        );
    }

    #[test]
    fn wrong_answers_count_in_the_timeline_as_operations() {
        let mut cfg = config("c");
        cfg.timeline = Some(Duration::from_millis(1));
        let report = run_with(&cfg, &split(&cfg), &|_, e| {
            Ok(Box::new(Broken(BTreeRwLock::bulk_load(e))))
        })
        .unwrap();
        assert!(report.errors > 0);
        let sums = sums(&report);
        for r in report.rows.iter().filter(|r| r.op == "all") {
            let key = format!("btree-rwlock c None {} all", r.threads);
            assert_eq!(sums.get(&key), Some(&4_000), "{key}");
            assert_eq!(r.ops + r.errors, 4_000);
        }
    }
}
