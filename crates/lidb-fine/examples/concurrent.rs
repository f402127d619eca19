//! A first, small concurrent measurement of `FineIndex` beside `RwLock<BTreeMap>` (the floor the
//! issue names). Not the issue's `lidb bench concurrent`: one synthetic data set, two workloads,
//! one std-only peer.
//!
//! `cargo run --release -p lidb-fine --example concurrent -- [records] [ops_per_thread] [threads,..]
//! [read,insert]`
//!
//! Keys: `2 * records` distinct random u64 (ChaCha8, seed 1); the even-indexed half in sorted
//! order is bulk-loaded (the trained data), the other half is what the `insert` workload inserts,
//! split between the threads so that each inserts its own keys. `read`: uniform random gets of
//! loaded keys. `dense`: every thread inserts its own keys of one narrow range right after the
//! first loaded key (all into one gap: level-bin and model retraining all the time). Every
//! answer is checked; one JSON object per line, and retraining figures on stderr.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;
use std::time::Instant;

use lidb_fine::{Config, FineIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

trait Peer: Sync {
    fn name(&self) -> &'static str;
    fn get(&self, k: u64) -> Option<u64>;
    fn insert(&self, k: u64, v: u64);
}

impl Peer for FineIndex {
    fn name(&self) -> &'static str {
        "finedex"
    }
    fn get(&self, k: u64) -> Option<u64> {
        FineIndex::get(self, k)
    }
    fn insert(&self, k: u64, v: u64) {
        FineIndex::insert(self, k, v);
    }
}

struct Locked(RwLock<BTreeMap<u64, u64>>);

impl Peer for Locked {
    fn name(&self) -> &'static str {
        "rwlock-btreemap"
    }
    fn get(&self, k: u64) -> Option<u64> {
        self.0.read().unwrap().get(&k).copied()
    }
    fn insert(&self, k: u64, v: u64) {
        self.0.write().unwrap().insert(k, v);
    }
}

/// The `dense` workload's keys: `ops` per thread, interleaved, right after `base`.
fn dense_key(base: u64, threads: usize, t: usize, i: usize) -> u64 {
    base + 1 + (i * threads + t) as u64
}

fn run(peer: &dyn Peer, workload: &str, threads: usize, loaded: &[u64], fresh: &[u64], ops: usize) {
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(100 + t as u64);
                match workload {
                    "read" => {
                        for _ in 0..ops {
                            let k = loaded[rng.gen_range(0..loaded.len())];
                            assert_eq!(peer.get(k), Some(k ^ 1), "{} lost {k}", peer.name());
                        }
                    }
                    "dense" => {
                        for i in 0..ops {
                            let k = dense_key(loaded[0], threads, t, i);
                            peer.insert(k, k ^ 1);
                        }
                    }
                    _ => {
                        for &k in fresh.iter().skip(t).step_by(threads).take(ops) {
                            peer.insert(k, k ^ 1);
                        }
                    }
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let done = if workload == "read" || workload == "dense" {
        ops * threads
    } else {
        (0..threads)
            .map(|t| fresh.iter().skip(t).step_by(threads).take(ops).count())
            .sum()
    };
    if workload == "dense" {
        for t in 0..threads {
            for i in (0..ops).step_by(97) {
                let k = dense_key(loaded[0], threads, t, i);
                assert_eq!(peer.get(k), Some(k ^ 1), "{} lost {k}", peer.name());
            }
        }
    } else if workload == "insert" {
        for t in 0..threads {
            for &k in fresh.iter().skip(t).step_by(threads).take(ops.min(1000)) {
                assert_eq!(peer.get(k), Some(k ^ 1), "{} lost {k}", peer.name());
            }
        }
    }
    println!(
        "{{\"index\":\"{}\",\"workload\":\"{workload}\",\"threads\":{threads},\"ops\":{done},\"kops_per_s\":{:.1}}}",
        peer.name(),
        done as f64 / secs / 1e3
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let ops: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let threads: Vec<usize> = args
        .get(3)
        .map(|a| a.split(',').filter_map(|t| t.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2]);
    let workloads: Vec<String> = args
        .get(4)
        .map(|a| a.split(',').map(str::to_owned).collect())
        .unwrap_or_else(|| vec!["read".into(), "insert".into()]);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!("cores {cores}, records {records}, ops per thread {ops}");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut set = BTreeSet::new();
    while set.len() < 2 * records {
        set.insert(rng.r#gen::<u64>() >> 1);
    }
    let all: Vec<u64> = set.into_iter().collect();
    let loaded: Vec<u64> = all.iter().step_by(2).copied().collect();
    let mut fresh: Vec<u64> = all.iter().skip(1).step_by(2).copied().collect();
    for i in (1..fresh.len()).rev() {
        fresh.swap(i, rng.gen_range(0..=i));
    }
    let entries: Vec<(u64, u64)> = loaded.iter().map(|&k| (k, k ^ 1)).collect();
    for workload in workloads.iter().map(String::as_str) {
        for &t in &threads {
            let started = Instant::now();
            let fine = FineIndex::bulk_load(&entries, Config::default()).unwrap();
            let stats = fine.stats();
            eprintln!(
                "finedex bulk load {} ms, {} nodes, {} models, {:.1} heap bytes per key (estimate)",
                started.elapsed().as_millis(),
                stats.top_nodes,
                stats.top_models,
                stats.heap_bytes as f64 / records as f64
            );
            run(&fine, workload, t, &loaded, &fresh, ops);
            if workload != "read" {
                let stats = fine.stats();
                let keys = stats.live_trained + stats.bin_entries;
                eprintln!(
                    "finedex after {workload}: {:.1} heap bytes per key (estimate); {} level-bin \
                     retrainings, {:.1} us each; {} model retrainings, {} ms in all",
                    stats.heap_bytes as f64 / keys as f64,
                    stats.level_bin_retrains,
                    stats.level_bin_retrain_ns as f64
                        / 1e3
                        / stats.level_bin_retrains.max(1) as f64,
                    stats.model_retrains,
                    stats.model_retrain_us / 1000
                );
                let r = fine.retrain_models();
                eprintln!(
                    "finedex: retraining every model over {} records took {} ms",
                    r.records,
                    r.took_us / 1000
                );
            }
            drop(fine);
            let locked = Locked(RwLock::new(entries.iter().copied().collect()));
            run(&locked, workload, t, &loaded, &fresh, ops);
        }
    }
}
