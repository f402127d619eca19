//! Concurrency: writers on disjoint key ranges and readers (gets and scans) on others, with a
//! small pool and the provider thread cooling and evicting all along. The final state equals
//! the writers' models; readers never see a value that was not written or a key outside what
//! was written; scans are sorted and duplicate-free.

use std::collections::BTreeMap;
use std::sync::Arc;

use lidb_btree::{BTree, Options};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn key(range: u8, i: u32) -> Vec<u8> {
    let mut k = vec![range];
    k.extend_from_slice(format!("/{i:06}").as_bytes());
    k
}

/// The value of `key` at version `v`: self-describing, so a reader can check it.
fn value(k: &[u8], v: u32, len: usize) -> Vec<u8> {
    let mut out = k.to_vec();
    out.extend_from_slice(&v.to_le_bytes());
    out.resize(len.max(out.len()), (v % 251) as u8);
    out
}

fn plausible(k: &[u8], val: &[u8]) -> bool {
    val.starts_with(k) && val.len() >= k.len() + 4 && {
        let v = val
            .get(k.len()..k.len() + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes);
        val.iter().skip(k.len() + 4).all(|b| *b == (v % 251) as u8)
    }
}

#[test]
fn writers_and_readers_with_the_provider_running() {
    let opts = Options {
        page_size: 4096,
        pool_bytes: 64 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: true,
    };
    let tree = Arc::new(BTree::in_memory(&opts).unwrap_or_else(|e| panic!("{e}")));
    // A static range for the readers.
    for i in 0..3000 {
        let k = key(b'r', i);
        tree.put(&k, &value(&k, 0, 40))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let writers: Vec<_> = (0..3u8)
        .map(|w| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let seed = u64::from(w) + 100;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut model = BTreeMap::new();
                for step in 0..6000u32 {
                    let k = key(b'a' + w, rng.gen_range(0..2500));
                    if rng.gen_bool(0.7) {
                        let v = value(&k, step, rng.gen_range(0..300));
                        tree.put(&k, &v)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        model.insert(k, v);
                    } else {
                        let had = tree
                            .delete(&k)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        assert_eq!(had, model.remove(&k).is_some(), "seed {seed}: delete");
                    }
                }
                model
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(r + 200);
                for _ in 0..4000 {
                    let i = rng.gen_range(0..3000);
                    let k = key(b'r', i);
                    let got = tree.get(&k).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(got, Some(value(&k, 0, 40)), "static key {i}");
                    // A scan across a writer's range: sorted, in range, plausible values.
                    let w = b'a' + rng.gen_range(0..3u8);
                    let start = key(w, rng.gen_range(0..2500));
                    let end = vec![w + 1];
                    let got = tree
                        .scan(&start, Some(&end), 20)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let mut prev: Option<&Vec<u8>> = None;
                    for (k, v) in &got {
                        assert!(*k >= start && *k < end, "scan left its range");
                        assert!(prev.is_none_or(|p| p < k), "scan not strictly sorted");
                        assert!(plausible(k, v), "value never written: {k:?}");
                        prev = Some(k);
                    }
                }
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for w in writers {
        model.extend(w.join().unwrap_or_else(|_| panic!("a writer panicked")));
    }
    for r in readers {
        r.join().unwrap_or_else(|_| panic!("a reader panicked"));
    }
    for i in 0..3000 {
        let k = key(b'r', i);
        model.insert(k.clone(), value(&k, 0, 40));
    }
    let all: BTreeMap<Vec<u8>, Vec<u8>> = tree
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .collect();
    assert!(all == model, "final state differs from the writers' models");
    let stats = tree.stats();
    assert!(
        stats.pool.evictions > 0 && stats.pool.cooled > 0,
        "{stats:?}"
    );
    eprintln!("{stats:?}");
}

#[test]
fn splits_merges_checkpoints_and_probes_under_concurrency() {
    let opts = Options {
        page_size: 4096,
        pool_bytes: 24 * 4096,
        cooling_share: 0.2,
        direct_io: false,
        provider_thread: true,
    };
    let dev = Arc::new(lidb_btree::MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree = Arc::new(BTree::with_device(dev.clone(), &opts).unwrap_or_else(|e| panic!("{e}")));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..3u8)
        .map(|w| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let seed = u64::from(w) + 300;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut model = BTreeMap::new();
                for round in 0..3u32 {
                    for i in 0..1500 {
                        let k = key(b'a' + w, i);
                        let v = value(&k, round, rng.gen_range(0..200));
                        tree.put(&k, &v)
                            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                        model.insert(k, v);
                    }
                    for i in 0..1500 {
                        if rng.gen_bool(0.9) {
                            let k = key(b'a' + w, i);
                            let had = tree
                                .delete(&k)
                                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                            assert_eq!(had, model.remove(&k).is_some(), "seed {seed}");
                        }
                    }
                }
                model
            })
        })
        .collect();
    let checkpointer = {
        let (tree, stop) = (tree.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                tree.checkpoint(n, &n.to_le_bytes())
                    .unwrap_or_else(|e| panic!("{e}"));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            n
        })
    };
    let prober = {
        let (tree, stop) = (tree.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(400);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let leaves = tree.leaf_parents().unwrap_or_else(|e| panic!("{e}"));
                for _ in 0..200 {
                    let k = key(b'a' + rng.gen_range(0..3u8), rng.gen_range(0..1500));
                    let i = leaves
                        .partition_point(|l| l.upper.as_deref().is_some_and(|u| u < k.as_slice()));
                    let Some(leaf) = leaves.get(i) else { continue };
                    match tree
                        .probe_leaf(leaf.pid, None, &k)
                        .unwrap_or_else(|e| panic!("{e}"))
                    {
                        lidb_btree::LeafProbe::Found { value, .. } => {
                            assert!(
                                plausible(&k, &value),
                                "probe returned a value never written"
                            );
                        }
                        lidb_btree::LeafProbe::Absent { .. } | lidb_btree::LeafProbe::Miss => {}
                    }
                }
            }
        })
    };
    let mut model = BTreeMap::new();
    for w in writers {
        model.extend(w.join().unwrap_or_else(|_| panic!("a writer panicked")));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let checkpoints = checkpointer
        .join()
        .unwrap_or_else(|_| panic!("the checkpointer panicked"));
    prober
        .join()
        .unwrap_or_else(|_| panic!("the prober panicked"));
    tree.checkpoint(u64::MAX, b"last")
        .unwrap_or_else(|e| panic!("{e}"));
    let reopened =
        BTree::with_device(Arc::new(dev.crash(1)), &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reopened.checkpoint_info().lsn, u64::MAX);
    let all: BTreeMap<Vec<u8>, Vec<u8>> = reopened
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .collect();
    assert!(all == model, "state after checkpoint and reopen differs");
    eprintln!(
        "{checkpoints} checkpoints during the run; {:?}",
        tree.stats()
    );
}

#[test]
fn four_threads_on_the_smallest_pool() {
    let opts = Options {
        page_size: 4096,
        pool_bytes: 0,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: true,
    };
    let tree = Arc::new(BTree::in_memory(&opts).unwrap_or_else(|e| panic!("{e}")));
    let threads: Vec<_> = (0..4u8)
        .map(|w| {
            let tree = tree.clone();
            std::thread::spawn(move || {
                let seed = u64::from(w) + 500;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut model = BTreeMap::new();
                for step in 0..3000u32 {
                    let k = key(b'a' + w, rng.gen_range(0..1000));
                    match rng.gen_range(0..4) {
                        0 | 1 => {
                            let v = value(&k, step, rng.gen_range(0..400));
                            tree.put(&k, &v)
                                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                            model.insert(k, v);
                        }
                        2 => {
                            let had = tree
                                .delete(&k)
                                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                            assert_eq!(had, model.remove(&k).is_some(), "seed {seed}");
                        }
                        _ => {
                            let got = tree.get(&k).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                            assert_eq!(got.as_ref(), model.get(&k), "seed {seed}");
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for t in threads {
        model.extend(t.join().unwrap_or_else(|_| panic!("a thread panicked")));
    }
    let all: BTreeMap<Vec<u8>, Vec<u8>> = tree
        .scan(b"", None, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .collect();
    assert!(all == model, "final state differs");
}
