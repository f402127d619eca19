//! The conformance harness of the benchmark engine trait: every engine `engines::names()` offers
//! (rocksdb too when built with `--features rocksdb`) runs the same random puts, overwrites,
//! deletes, gets, scans, GCs and reopens, checked against a BTreeMap (learnedstore and btree
//! among them); then what finedex's and LearnedStore's mappings of the trait promise (gc is a
//! checkpoint, ignored options are said).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;

use lidb_bench::engines::{self, EngineConfig};
use lidb_testkit::Scratch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn config(dir: std::path::PathBuf) -> EngineConfig {
    let mut cfg = EngineConfig::new(dir);
    cfg.lsm.memtable_bytes = 64 * 1024;
    cfg.lsm.block_cache_bytes = 256 * 1024;
    cfg
}

#[test]
fn every_engine_matches_a_btreemap() {
    for name in engines::names() {
        let scratch = Scratch::new(&format!("engines-{name}"));
        let dir = scratch.join("db");
        let mut engine = engines::open(name, &config(dir.clone())).unwrap();
        // Only a peer's library has a version of its own, which RocksDB records at open.
        match (name, engine.version()) {
            ("rocksdb", Some(v)) => assert!(
                v.split('.').count() == 3 && v.split('.').all(|p| p.parse::<u32>().is_ok()),
                "rocksdb's version: {v}"
            ),
            ("rocksdb", None) => panic!("rocksdb's OPTIONS file names no version"),
            (_, v) => assert_eq!(v, None, "{name}"),
        }
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for step in 0..6_000 {
            let ctx = format!("engine {name} step {step}");
            let k = format!("key{:05}", rng.gen_range(0..1500u32)).into_bytes();
            match rng.gen_range(0..100) {
                0..=49 => {
                    let v = vec![(step % 253) as u8; rng.gen_range(1..400)];
                    engine.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                50..=59 => {
                    engine.delete(&k).unwrap();
                    model.remove(&k);
                }
                60..=89 => assert_eq!(engine.get(&k).unwrap().as_ref(), model.get(&k), "{ctx}"),
                90..=95 => {
                    let mut got = Vec::new();
                    engine
                        .scan(&k, None, 20, &mut |kk, vv| {
                            got.push((kk.to_vec(), vv.to_vec()))
                        })
                        .unwrap();
                    let want: Vec<_> = model
                        .range(k.clone()..)
                        .take(20)
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect();
                    assert!(got == want, "{ctx}: scan from {k:?}");
                }
                96..=98 => engine.gc().unwrap(),
                _ => {
                    drop(engine);
                    engine = engines::open(name, &config(dir.clone())).unwrap();
                }
            }
        }
        for (k, v) in &model {
            assert_eq!(
                engine.get(k).unwrap().as_ref(),
                Some(v),
                "engine {name}: final {k:?}"
            );
        }
    }
}

#[test]
fn unknown_and_missing_engines_are_one_line_errors() {
    let scratch = Scratch::new("engines-none");
    let dir = scratch.join("db");
    let e = engines::open("bplustree", &config(dir.clone()))
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|m| m.contains("unknown engine") && !m.contains('\n')));
    if !cfg!(feature = "rocksdb") {
        let e = engines::open("rocksdb", &config(dir))
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|m| m.contains("--features rocksdb")));
    }
}

/// finedex's gc() is a checkpoint: after overwrites it shrinks the files to about one copy of
/// the data, keeps every answer and the reopen; convert is refused; its notes name every option
/// it ignores and its index memory.
#[test]
fn finedex_gc_is_a_checkpoint_and_its_notes_say_what_it_ignores() {
    let scratch = Scratch::new("engines-fine-gc");
    let cfg = config(scratch.join("db"));
    let engine = engines::open("finedex", &cfg).unwrap();
    assert_eq!(engine.name(), "finedex");
    for round in 0..4u8 {
        for i in 0..500u32 {
            engine
                .put(format!("k{i:04}").as_bytes(), &[round; 100])
                .unwrap();
        }
    }
    engine.flush().unwrap();
    let before = engine.space();
    assert!(before.vlog_bytes >= 4 * 500 * 100, "{before:?}");
    assert_eq!(
        (before.lsm_bytes, before.key_list_bytes, before.model_bytes),
        (0, 0, 0)
    );
    engine.gc().unwrap();
    let after = engine.space();
    assert!(
        after.vlog_bytes >= 500 * 100 && after.vlog_bytes < 2 * 500 * 100,
        "{after:?}"
    );
    assert_eq!(engine.get(b"k0007").unwrap(), Some(vec![3; 100]));
    let e = engine.convert().unwrap_err().to_string();
    assert!(e.contains("finedex has no conversion"), "{e}");
    let notes = engine.notes().join("\n");
    for option in [
        "memtable=64KiB",
        "cache=256KiB",
        "bloom_bits=10",
        "direct_io=false",
        "lsm_index=",
        "tier_index=",
        "over_provisioning=",
        "background_gc=",
        "do not apply and are ignored; sync=false applies",
        "gc() is a checkpoint",
        "index heap",
        "it checkpoints by itself each time its log reaches 64.0MiB",
    ] {
        assert!(notes.contains(option), "{option}: {notes}");
    }
    drop(engine);
    let engine = engines::open("finedex", &cfg).unwrap();
    assert_eq!(engine.get(b"k0499").unwrap(), Some(vec![3; 100]));
}

/// learnedstore and btree: gc() is a checkpoint (the logs it covers removed, every answer kept
/// across a reopen), the page file is lsm_bytes and the logs vlog_bytes, the pool's resident
/// frames are the cache memory, convert is refused, and the notes name what is ignored and
/// what is not counted.
#[test]
fn learnedstore_and_btree_gc_is_a_checkpoint_and_their_notes_say_what_they_ignore() {
    for name in ["learnedstore", "btree"] {
        let scratch = Scratch::new(&format!("engines-{name}-gc"));
        let mut cfg = config(scratch.join("db"));
        cfg.tree.pool_bytes = 1 << 20;
        let engine = engines::open(name, &cfg).unwrap();
        assert_eq!(engine.name(), name);
        for round in 0..4u8 {
            for i in 0..500u32 {
                engine
                    .put(format!("k{i:04}").as_bytes(), &[round; 100])
                    .unwrap();
            }
        }
        engine.flush().unwrap();
        let before = engine.space();
        assert!(before.vlog_bytes >= 4 * 500 * 100, "{name}: {before:?}");
        assert!(before.lsm_bytes > 0, "{name}: {before:?}");
        assert_eq!((before.key_list_bytes, before.model_bytes), (0, 0));
        engine.gc().unwrap();
        let after = engine.space();
        assert!(after.vlog_bytes < 500 * 100, "{name}: {after:?}");
        assert!(after.lsm_bytes >= 500 * 100, "{name}: {after:?}");
        let memory = engine.memory();
        assert!(
            memory.cache_bytes > 0 && memory.cache_bytes <= 1 << 20,
            "{memory:?}"
        );
        // The learned path's table and model are the index; btree has none.
        if name == "btree" {
            assert_eq!(memory.index_bytes, 0, "{name}: {memory:?}");
        } else {
            assert!(memory.index_bytes > 0, "{name}: {memory:?}");
        }
        assert_eq!(engine.get(b"k0007").unwrap(), Some(vec![3; 100]));
        let e = engine.convert().unwrap_err().to_string();
        assert!(e.contains(&format!("{name} has no conversion")), "{e}");
        let notes = engine.notes().join("\n");
        for option in [
            "memtable=64KiB",
            "cache=256KiB",
            "bloom_bits=10",
            "lsm_index=",
            "tier_index=",
            "do not apply and are ignored; pool=1MiB row_cache_share=0 page_size=4096 \
             direct_io=false sync=false apply",
            "gc() is a checkpoint",
            "pool = cache + memtable",
        ] {
            assert!(notes.contains(option), "{name}: {option}: {notes}");
        }
        // The note on index_bytes says what it holds, or that the path is off.
        let index_note = if name == "btree" {
            "learned path is off, so there is no mapping table and index_bytes is 0"
        } else {
            "mapping table and model are index_bytes"
        };
        assert!(notes.contains(index_note), "{name}: {notes}");
        drop(engine);
        let engine = engines::open(name, &cfg).unwrap();
        assert_eq!(engine.get(b"k0499").unwrap(), Some(vec![3; 100]));
    }
}

/// `--memory`: every engine either fits itself to one budget for index + filters + cache or
/// says why not. lsm resizes its cache to what its indexes and filters leave and stays within the
/// budget under reads; learnedkv, lsm+ and lsm+tier do the same with their store's one cache (or
/// report the excess); learnedstore and btree shrink their buffer pool to what the learned
/// path's table leaves; rocksdb took the budget at open (its index and filter blocks inside its
/// block cache, which never exceeds it); the others say they did not apply it.
#[test]
fn every_engine_fits_a_memory_budget_or_says_why_not() {
    let budget: u64 = 1 << 20;
    for name in engines::names() {
        let scratch = Scratch::new(&format!("engines-{name}-budget"));
        let cfg = EngineConfig {
            memory_budget_bytes: Some(budget),
            ..config(scratch.join("db"))
        };
        let engine = engines::open(name, &cfg).unwrap();
        let value = vec![9u8; 500];
        for i in 0..8_000u32 {
            engine.put(format!("k{i:06}").as_bytes(), &value).unwrap();
        }
        engine.flush().unwrap();
        let fit = engine.fit_memory_budget(budget).unwrap();
        // The resident part as the fit found it: learnedstore's reads below may retrain its
        // model on mispredictions, which moves its resident bytes a little afterwards.
        let at_fit = engine.memory();
        for i in (0..8_000u32).step_by(5) {
            let got = engine.get(format!("k{i:06}").as_bytes()).unwrap();
            assert_eq!(got.as_deref(), Some(&value[..]), "{name} key {i}");
        }
        let m = engine.memory();
        match name {
            "lsm" => {
                let engines::BudgetFit::Resized(plan) = fit else {
                    panic!("lsm: {fit:?}");
                };
                assert!(plan.fits(), "lsm: {plan:?}");
                assert_eq!(plan.cache_bytes, budget - plan.resident_bytes);
                assert!(m.budgeted_bytes() <= budget, "lsm over budget: {m:?}");
                assert!(m.cache_bytes > 0, "lsm: reads fill the cache it was given");
            }
            "rocksdb" => {
                assert_eq!(fit.status(), "at-open", "rocksdb: {fit:?}");
                assert!(m.cache_bytes <= budget, "rocksdb: {m:?}");
            }
            // One cache per store, fitted like lsm's. 1 MiB is below their every-key
            // Bloom (sized for at least a million keys), so they report the excess instead.
            "learnedkv" | "lsm+" | "lsm+tier" => {
                let engines::BudgetFit::Resized(plan) = fit else {
                    panic!("{name}: {fit:?}");
                };
                assert_eq!(plan.cache_bytes, budget.saturating_sub(plan.resident_bytes));
                assert_eq!(plan.over_bytes, plan.resident_bytes.saturating_sub(budget));
                assert!(m.cache_bytes <= plan.cache_bytes, "{name}: {m:?} {plan:?}");
                if plan.fits() {
                    assert!(m.budgeted_bytes() <= budget, "{name} over budget: {m:?}");
                } else {
                    assert_eq!(fit.status(), "over", "{name}");
                    assert_eq!(
                        m.cache_bytes, 0,
                        "{name}: an over-budget cache holds nothing"
                    );
                }
            }
            // The pool shrinks to what the learned path's table and model leave (at least 16
            // pages), and reads stay within it.
            "learnedstore" | "btree" => {
                let engines::BudgetFit::Resized(plan) = fit else {
                    panic!("{name}: {fit:?}");
                };
                assert_eq!(plan.resident_bytes, at_fit.resident_bytes(), "{name}");
                assert!(plan.cache_bytes >= 16 * 4096, "{name}: {plan:?}");
                assert!(m.cache_bytes <= plan.cache_bytes, "{name}: {m:?} {plan:?}");
                assert!(
                    plan.fits(),
                    "{name}: 8,000 keys' table fits 1 MiB: {plan:?}"
                );
                assert!(m.budgeted_bytes() <= budget, "{name} over budget: {m:?}");
            }
            _ => assert_eq!(fit.status(), "not-applied", "{name}: {fit:?}"),
        }
    }
}

/// rocksdb's row cache takes its share of the one budget: reads of hot keys fill it, the block
/// cache and the row cache together stay within the budget, and a share outside 0 to 0.9 is an
/// invalid option.
#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_row_cache_shares_the_budget() {
    let budget: u64 = 1 << 20;
    let scratch = Scratch::new("engines-rocksdb-row-cache");
    let mut cfg = config(scratch.join("db"));
    cfg.memory_budget_bytes = Some(budget);
    cfg.lsm.rocksdb_row_cache_share = 0.5;
    let engine = engines::open("rocksdb", &cfg).unwrap();
    let value = vec![5u8; 300];
    for i in 0..4_000u32 {
        engine.put(format!("k{i:06}").as_bytes(), &value).unwrap();
    }
    engine.flush().unwrap();
    let before = engine.memory().cache_bytes;
    for _ in 0..3 {
        for i in 0..200u32 {
            let got = engine.get(format!("k{i:06}").as_bytes()).unwrap();
            assert_eq!(got.as_deref(), Some(&value[..]));
        }
    }
    let m = engine.memory();
    assert!(
        m.cache_bytes > before,
        "hot reads fill the caches: {before} -> {m:?}"
    );
    assert!(m.cache_bytes <= budget, "{m:?}");
    drop(engine);

    cfg.lsm.rocksdb_row_cache_share = 1.5;
    cfg.dir = scratch.join("db2");
    let refused = engines::open("rocksdb", &cfg).err().map(|e| e.to_string());
    assert!(
        refused
            .as_deref()
            .is_some_and(|e| e.contains("row cache share")),
        "{refused:?}"
    );
}
