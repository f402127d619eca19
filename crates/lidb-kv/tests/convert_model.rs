//! Range-query-assisted conversion (the LearnedKV paper, section 4.5.1): the store against a BTreeMap
//! with conversions interleaved with GCs, deletes and reopens; conversion moves no values; reads
//! during background conversions; the size threshold fires; lsm+ refuses it. The model test runs
//! seeded cases (lidb-testkit's runner): a failure prints the `LIDB_SEED=<n> LIDB_CASES=1 cargo
//! test ...` line that replays its case alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lidb_kv::{Error, ReadSource, Store, StoreOptions, TierKind};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_testkit::cases;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod support;
use support::{learned, small};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn open(storage: &MemStorage, opts: StoreOptions) -> Store {
    Store::open_with_storage(Arc::new(storage.clone()), Path::new("/kv"), opts).unwrap()
}

fn check(store: &Store, model: &Model, ctx: &str) {
    for (k, v) in model {
        let got = store.get(k).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
        assert_eq!(got.as_ref(), Some(v), "{ctx}: key {k:?}");
    }
    let mut it = store.scan(b"", None).unwrap();
    let mut n = 0;
    let mut want = model.iter();
    while it.valid() {
        let (k, v) = want
            .next()
            .unwrap_or_else(|| panic!("{ctx}: scan too long"));
        assert_eq!(
            (it.key(), it.value()),
            (k.as_slice(), v.as_slice()),
            "{ctx}: scan"
        );
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, model.len(), "{ctx}: scan length");
}

/// `steps` random operations drawn from `rng` (the generator of `seed`, which messages name).
fn run(rng: &mut ChaCha8Rng, seed: u64, steps: usize) {
    let storage = MemStorage::new();
    let mut store = open(&storage, small(learned()));
    let mut model = Model::new();
    let ctx = format!("seed {seed}");
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        let k = format!("key{:05}", rng.gen_range(0..600u32)).into_bytes();
        match rng.gen_range(0..100) {
            0..=59 => {
                let v: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.r#gen()).collect();
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            60..=71 => {
                store.delete(&k).unwrap();
                model.remove(&k);
            }
            72..=89 => assert_eq!(
                store.get(&k).unwrap().as_ref(),
                model.get(&k),
                "{ctx}: get {k:?}"
            ),
            90..=94 => store
                .convert()
                .unwrap_or_else(|e| panic!("{ctx}: convert: {e}")),
            95..=96 => store.gc().unwrap_or_else(|e| panic!("{ctx}: gc: {e}")),
            97 => check(&store, &model, &ctx),
            _ => {
                drop(store);
                store = open(&storage, small(learned()));
            }
        }
    }
    check(&store, &model, &ctx);
    store.convert().unwrap();
    check(&store, &model, &format!("{ctx}, after a last conversion"));
    assert!(store.stats().conversions > 0);
    drop(store);
    let store = open(&storage, small(learned()));
    check(&store, &model, &format!("{ctx}, after reopen"));
    store.gc().unwrap();
    check(&store, &model, &format!("{ctx}, after a GC"));
}

#[test]
fn conversions_gcs_deletes_and_reopens_match_a_btreemap() {
    cases("conversions", 3, |rng, seed| run(rng, seed, 2_500));
}

fn files_with(storage: &MemStorage, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = storage
        .files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn contents(storage: &MemStorage, files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|p| storage.read_all(p).unwrap()).collect()
}

#[test]
fn a_conversion_moves_no_values_and_indexes_every_lsm_key() {
    let storage = MemStorage::new();
    let store = open(&storage, small(learned()));
    let key = |i: u32| format!("{i:08}").into_bytes();
    for i in 0..2_000u32 {
        store.put(&key(i), &[1; 150]).unwrap();
    }
    store.gc().unwrap();
    for i in (0..3_000u32).step_by(3) {
        store.put(&key(i), &[2; 150]).unwrap();
    }
    for i in (1..2_000u32).step_by(50) {
        store.delete(&key(i)).unwrap();
    }
    let (svlogs, vlogs) = (files_with(&storage, "svlog"), files_with(&storage, "vlog"));
    let (sv_bytes, v_bytes) = (contents(&storage, &svlogs), contents(&storage, &vlogs));
    store.convert().unwrap();
    assert_eq!(store.stats().conversions, 1);
    assert_eq!(
        files_with(&storage, "svlog"),
        svlogs,
        "a new svlog was written"
    );
    assert_eq!(contents(&storage, &svlogs), sv_bytes, "svlog bytes changed");
    let vlogs_now = files_with(&storage, "vlog");
    for (p, bytes) in vlogs.iter().zip(&v_bytes) {
        assert!(
            vlogs_now.contains(p),
            "{p:?} deleted while the tier reads it"
        );
        assert_eq!(&storage.read_all(p).unwrap(), bytes, "{p:?} changed");
    }
    assert_eq!(
        vlogs_now.len(),
        vlogs.len() + 1,
        "only the new active log is added"
    );
    let keys = files_with(&storage, "keys");
    assert_eq!(keys.len(), 1, "the old key list is gone: {keys:?}");
    // Every live key, written to the LSM or not, is served by the new tier.
    for i in 0..3_000u32 {
        let (v, src) = store.get_traced(&key(i)).unwrap();
        let want = if i % 50 == 1 && i < 2_000 {
            None
        } else if i % 3 == 0 {
            Some(vec![2; 150])
        } else if i < 2_000 {
            Some(vec![1; 150])
        } else {
            None
        };
        assert_eq!(v, want, "key {i}");
        if want.is_some() {
            assert_eq!(src, ReadSource::Tier, "key {i}");
        }
    }
    // Reopen keeps the old svlog (named in KVSTATE); a GC then copies and frees everything old.
    drop(store);
    let store = open(&storage, small(learned()));
    assert_eq!(store.get(&key(2)).unwrap(), Some(vec![1; 150]));
    store.gc().unwrap();
    let after = files_with(&storage, "svlog");
    assert_eq!(after.len(), 1);
    assert!(!svlogs.contains(&after[0]), "the GC wrote a fresh svlog");
    assert_eq!(
        files_with(&storage, "vlog").len(),
        1,
        "old value logs freed"
    );
    assert_eq!(store.get(&key(2)).unwrap(), Some(vec![1; 150]));
    assert_eq!(store.get(&key(3)).unwrap(), Some(vec![2; 150]));
}

#[test]
fn conversions_chain_over_converted_tiers_and_an_empty_store() {
    let storage = MemStorage::new();
    let store = open(&storage, small(learned()));
    store.convert().unwrap();
    let mut model = Model::new();
    for round in 0..5u8 {
        for i in (u32::from(round)..800).step_by(3) {
            let (k, v) = (format!("k{i:04}").into_bytes(), vec![round; 40]);
            store.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        store.convert().unwrap();
        check(&store, &model, &format!("round {round}"));
        assert!(files_with(&storage, "svlog").is_empty());
    }
    drop(store);
    let store = open(&storage, small(learned()));
    check(&store, &model, "reopened");
    assert_eq!(store.stats().conversions, 0, "counters are per open");
}

#[test]
fn readers_and_writers_during_conversions_see_the_latest_acknowledged_value() {
    let storage = MemStorage::new();
    let store = Arc::new(open(&storage, small(learned())));
    let done: Arc<Vec<AtomicU32>> = Arc::new((0..300).map(|_| AtomicU32::new(0)).collect());
    let writer = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            for version in 1..=30u32 {
                for i in 0..300usize {
                    store
                        .put(
                            format!("k{i:04}").as_bytes(),
                            &version.to_le_bytes().repeat(30),
                        )
                        .unwrap();
                    done[i].store(version, Ordering::SeqCst);
                }
            }
        })
    };
    let converter = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            for n in 0..12 {
                if n % 4 == 3 {
                    store.gc().unwrap();
                } else {
                    store.convert().unwrap();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let reader = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            for _ in 0..15_000 {
                let i = rng.gen_range(0..300usize);
                let floor = done[i].load(Ordering::SeqCst);
                let got = store.get(format!("k{i:04}").as_bytes()).unwrap();
                let version = got.map_or(0, |v| u32::from_le_bytes(v[..4].try_into().unwrap()));
                assert!(
                    version >= floor,
                    "key {i}: read {version}, {floor} acknowledged"
                );
            }
        })
    };
    for t in [writer, converter, reader] {
        t.join().unwrap();
    }
    assert!(store.stats().conversions >= 9);
    for i in 0..300usize {
        let v = store.get(format!("k{i:04}").as_bytes()).unwrap().unwrap();
        assert_eq!(
            u32::from_le_bytes(v[..4].try_into().unwrap()),
            30,
            "key {i}"
        );
    }
}

#[test]
fn the_lsm_size_threshold_triggers_a_background_conversion() {
    let storage = MemStorage::new();
    let opts = StoreOptions {
        auto_gc: true,
        over_provisioning: 10.0,
        convert_at_lsm_bytes: 32 * 1024,
        ..small(learned())
    };
    let store = open(&storage, opts);
    for i in 0..3_000u32 {
        store.put(format!("{i:08}").as_bytes(), &[7; 64]).unwrap();
    }
    store.flush().unwrap();
    let started = Instant::now();
    while store.stats().conversions == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no conversion: {:?}",
            store.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(store.stats().gcs, 0, "the GC policy did not fire");
    let (v, src) = store.get_traced(b"00000001").unwrap();
    assert_eq!(v, Some(vec![7; 64]));
    assert_eq!(src, ReadSource::Tier);
}

#[test]
fn the_level_threshold_is_off_below_it_and_lsm_plus_refuses_conversion() {
    let storage = MemStorage::new();
    let opts = StoreOptions {
        auto_gc: true,
        convert_at_lsm_levels: 7,
        ..small(learned())
    };
    let store = open(&storage, opts);
    for i in 0..500u32 {
        store.put(format!("{i:08}").as_bytes(), &[7; 64]).unwrap();
    }
    store.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(store.stats().conversions, 0);
    drop(store);

    let lsm_plus = open(&MemStorage::new(), small(TierKind::Lsm));
    match lsm_plus.convert() {
        Err(Error::InvalidOption(m)) => assert!(m.contains("lsm+"), "{m}"),
        other => panic!("expected InvalidOption, got {other:?}"),
    }
    let opts = StoreOptions {
        convert_at_lsm_bytes: 1,
        ..small(TierKind::Lsm)
    };
    assert!(matches!(
        Store::open_with_storage(Arc::new(MemStorage::new()), Path::new("/kv"), opts),
        Err(Error::InvalidOption(_))
    ));
}
