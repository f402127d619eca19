//! The concurrent-index peers (skipmap, scc-tree, congee, li+delta) through lidb-bench's one
//! conformance harness (random operations against a `BTreeMap`; the seed is in every failure),
//! then through the runner's skew workload; and the registration agrees with the names
//! lidb-bench lists as peers (the lean `lidb` tells a peer from a typo by those names).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use lidb_bench::concurrent::{
    Config, Distribution, IndexKind, KeySplit, Workload, conformance, run,
};
use lidb_bench::peers::{INDEX_PEERS, STORE_PEERS};

#[test]
fn every_peer_matches_a_btreemap() {
    for kind in lidb_peers::indexes() {
        for seed in 0..3 {
            conformance::check(kind, seed, 2_000, 20_000, 4_000).unwrap();
        }
        conformance::check(kind, 7, 0, 5_000, 100_000).unwrap();
    }
}

#[test]
fn the_registered_names_are_the_listed_peers() {
    let peers = lidb_peers::peers();
    let indexes: Vec<&str> = peers.indexes.iter().map(|k| k.name()).collect();
    assert_eq!(indexes, INDEX_PEERS);
    let stores: Vec<&str> = peers.stores.iter().map(|s| s.name).collect();
    assert_eq!(stores, STORE_PEERS);
    assert!(peers.complete());
    let all = peers.all_indexes();
    assert_eq!(all.len(), IndexKind::OWN.len() + INDEX_PEERS.len());
    assert_eq!(IndexKind::parse_list("all", &all).unwrap(), all);
    assert_eq!(
        IndexKind::parse_list("congee,finedex", &all).unwrap(),
        [
            all.iter().copied().find(|k| k.name() == "congee").unwrap(),
            IndexKind::FINEDEX
        ]
    );
}

#[test]
fn every_peer_runs_skew_with_insert_and_read_rows() {
    let cfg = Config {
        indexes: lidb_peers::indexes(),
        workloads: vec![Workload::Skew],
        threads: vec![1, 2],
        records: 2_000,
        ops: 2_000,
        distribution: Distribution::Uniform,
        hotspots: vec![0.05, 1.0],
        timeline: None,
        max_duration: Duration::from_secs(60),
        seed: 3,
        progress: false,
        alloc_counter: None,
    };
    let keys: Vec<u64> = (0..10_000u64).map(|k| k * 7 + 1).collect();
    let split = KeySplit::new(keys, cfg.records, cfg.fresh_needed(), cfg.seed).unwrap();
    let report = run(&cfg, &split).unwrap();
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    for kind in &cfg.indexes {
        for hotspot in [0.05, 1.0] {
            for threads in [1, 2] {
                let ops = |op: &str| {
                    report
                        .rows
                        .iter()
                        .find(|r| {
                            r.index == kind.name()
                                && r.hotspot == Some(hotspot)
                                && r.threads == threads
                                && r.op == op
                        })
                        .map(|r| r.ops)
                };
                let ctx = format!("{} R={hotspot} t={threads}", kind.name());
                assert_eq!(ops("insert"), Some(2_000), "{ctx}");
                assert_eq!(ops("read"), Some(2_000), "{ctx}");
                assert_eq!(ops("all"), Some(4_000), "{ctx}");
            }
        }
    }
}
