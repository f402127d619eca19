//! Model-based tests of the engine against a BTreeMap: random puts, overwrites, deletes, batches,
//! gets, scans, flushes, compactions and reopens, for every index family, on in-memory storage.
//! Each test runs seeded cases (lidb-testkit's runner): a failure prints the command that replays
//! its case alone (`LIDB_SEED=<seed> LIDB_CASES=1 cargo test ...`); `LIDB_CASES=<n>` runs more.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidb_index::{Family, Params};
use lidb_lsm::batch::WriteBatch;
use lidb_lsm::{Db, Granularity, IndexKind, IndexOptions, Options, Unclustered};
use lidb_storage::mem::MemStorage;
use lidb_testkit::{Cases, cases};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

mod support;
use support::small_options;

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    // A small key space so overwrites and deletes hit existing keys; varied lengths.
    let n: u32 = rng.gen_range(0..600);
    match rng.gen_range(0..3) {
        0 => format!("{n:08}").into_bytes(),
        1 => format!("k{n}").into_bytes(),
        _ => n.to_be_bytes().to_vec(),
    }
}

/// Keys of 8 to 24 bytes (the LSM study's section 5.3) drawn from a small space, many of them
/// sharing their 8-byte key image: a 4-digit head of 60 values, then a tail of 4 to 20 bytes of
/// `a`/`b` fixed by the key number.
fn varlen_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n: u64 = rng.gen_range(0..800);
    let mut tail_rng = ChaCha8Rng::seed_from_u64(n);
    let tail_len = tail_rng.gen_range(4..=20);
    let mut k = format!("{:04}", n % 60).into_bytes();
    k.extend((0..tail_len).map(|_| if tail_rng.gen_bool(0.5) { b'a' } else { b'b' }));
    k
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = rng.gen_range(0..120);
    (0..len).map(|_| rng.r#gen()).collect()
}

pub fn check_scan(db: &Db, model: &Model, start: &[u8], end: Option<&[u8]>, ctx: &str) {
    let mut it = db
        .scan(start, end)
        .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    let expected: Vec<(&Vec<u8>, &Vec<u8>)> = model
        .range(start.to_vec()..)
        .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
        .collect();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap_or_else(|e| panic!("{ctx}: next: {e}"));
    }
    let got_keys: Vec<&[u8]> = got.iter().map(|(k, _)| k.as_slice()).collect();
    let exp_keys: Vec<&[u8]> = expected.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(got_keys, exp_keys, "{ctx}: scan keys from {start:?}");
    for ((_, gv), (_, ev)) in got.iter().zip(&expected) {
        assert_eq!(gv, *ev, "{ctx}: scan value");
    }
}

pub fn check_all(db: &Db, model: &Model, ctx: &str) {
    for (k, v) in model {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
        assert_eq!(got.as_ref(), Some(v), "{ctx}: get {k:?}");
    }
    check_scan(db, model, b"", None, ctx);
}

fn run_model(rng: &mut ChaCha8Rng, seed: u64, opts: Options, steps: usize) {
    run_model_with(rng, seed, opts, steps, key);
}

/// `steps` random operations drawn from `rng` (the generator of `seed`, which messages name).
fn run_model_with(
    rng: &mut ChaCha8Rng,
    seed: u64,
    opts: Options,
    steps: usize,
    key: fn(&mut ChaCha8Rng) -> Vec<u8>,
) {
    let storage = MemStorage::new();
    let dir = Path::new("/db");
    let open = |o: &Options| Db::open_with_storage(Arc::new(storage.clone()), dir, o.clone());
    let mut db = open(&opts).unwrap();
    let mut model = Model::new();
    let ctx = format!(
        "seed {seed} family {} kind {:?} B {}",
        opts.index.family, opts.index.kind, opts.index.params.boundary
    );
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        match rng.gen_range(0..100) {
            0..=49 => {
                let (k, v) = (key(rng), value(rng));
                db.put(&k, &v).unwrap_or_else(|e| panic!("{ctx}: put: {e}"));
                model.insert(k, v);
            }
            50..=59 => {
                let k = key(rng);
                db.delete(&k)
                    .unwrap_or_else(|e| panic!("{ctx}: delete: {e}"));
                model.remove(&k);
            }
            60..=64 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(rng);
                    if rng.gen_bool(0.8) {
                        let v = value(rng);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(b).unwrap_or_else(|e| panic!("{ctx}: batch: {e}"));
            }
            65..=84 => {
                let k = key(rng);
                let got = db.get(&k).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
                assert_eq!(got.as_ref(), model.get(&k), "{ctx}: get {k:?}");
            }
            85..=89 => {
                let (a, b) = (key(rng), key(rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                check_scan(&db, &model, &lo, Some(&hi), &ctx);
            }
            90..=93 => db.flush().unwrap_or_else(|e| panic!("{ctx}: flush: {e}")),
            94..=95 => db
                .compact()
                .unwrap_or_else(|e| panic!("{ctx}: compact: {e}")),
            _ => {
                drop(db);
                db = open(&opts).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            }
        }
    }
    check_all(&db, &model, &ctx);
    db.compact().unwrap();
    check_all(&db, &model, &format!("{ctx} after full compaction"));
    drop(db);
    let db = open(&opts).unwrap();
    check_all(&db, &model, &format!("{ctx} after reopen"));
}

#[test]
fn every_family_matches_a_btreemap() {
    for family in Family::ALL {
        cases(&format!("{family}"), 2, |rng, seed| {
            run_model(rng, seed, small_options(family, 16), 3_000);
        });
    }
}

/// The index kinds other than plain clustered: mapped keys retained and every unclustered index.
fn other_kinds() -> Vec<IndexKind> {
    let mut kinds = vec![IndexKind::MappedKeys];
    kinds.extend(Unclustered::ALL.map(IndexKind::Unclustered));
    kinds
}

#[test]
fn every_index_kind_matches_a_btreemap() {
    for kind in other_kinds() {
        cases(&format!("{kind:?}"), 1, |rng, seed| {
            let mut opts = small_options(Family::Pgm, 16);
            opts.index.kind = kind;
            run_model(rng, seed, opts, 3_000);
        });
    }
}

#[test]
fn variable_length_keys_with_equal_images_match_a_btreemap() {
    let mut kinds = vec![IndexKind::Clustered];
    kinds.extend(other_kinds());
    for kind in kinds {
        cases(&format!("{kind:?} variable-length keys"), 1, |rng, seed| {
            let mut opts = small_options(Family::Pgm, 8);
            opts.index.kind = kind;
            run_model_with(rng, seed, opts, 3_000, varlen_key);
        });
    }
}

#[test]
fn small_and_large_boundaries_match_a_btreemap() {
    for (family, b) in [
        (Family::Pgm, 2),
        (Family::Fp, 2),
        (Family::Rmi, 256),
        (Family::Rs, 4096),
    ] {
        let name = format!("{family} B {b}");
        Cases::new(name, 2).base_seed(10).run(|rng, seed| {
            run_model(rng, seed, small_options(family, b), 2_000);
        });
    }
}

#[test]
fn level_granularity_matches_a_btreemap() {
    for family in [Family::Pgm, Family::Fp, Family::Plr] {
        let name = format!("{family} level granularity");
        Cases::new(name, 2).base_seed(20).run(|rng, seed| {
            let opts = Options {
                granularity: Granularity::Level,
                ..small_options(family, 16)
            };
            run_model(rng, seed, opts, 3_000);
        });
    }
}

#[test]
fn level_granularity_serves_deeper_levels_from_one_model_per_level() {
    let opts = Options {
        granularity: Granularity::Level,
        ..small_options(Family::Pgm, 16)
    };
    let db = Db::open_with_storage(Arc::new(MemStorage::new()), Path::new("/db"), opts).unwrap();
    for i in 0..5_000u32 {
        db.put(format!("{i:08}").as_bytes(), &[7; 40]).unwrap();
    }
    db.compact().unwrap();
    let stats = db.stats();
    let deeper: Vec<_> = stats
        .levels
        .iter()
        .filter(|l| l.level >= 1 && l.entries > 0)
        .collect();
    assert!(!deeper.is_empty(), "nothing below L0: {stats:?}");
    for l in &deeper {
        assert!(
            l.files > 1,
            "a level model should span several tables here: {l:?}"
        );
        assert!(l.index_bytes > 0, "no level model at L{}: {l:?}", l.level);
    }
    for i in (0..5_000u32).step_by(13) {
        let (v, st) = db.get_with_stats(format!("{i:08}").as_bytes()).unwrap();
        assert_eq!(v, Some(vec![7; 40]));
        assert!(st.data_reads <= 2, "key {i}: {st:?}");
    }
}

#[test]
fn background_compaction_matches_a_btreemap() {
    Cases::new("background compaction", 2)
        .base_seed(30)
        .run(|rng, seed| {
            let opts = Options {
                background_compaction: true,
                ..small_options(Family::Pgm, 16)
            };
            run_model(rng, seed, opts, 4_000);
        });
}

#[test]
fn a_scan_sees_the_snapshot_it_started_with() {
    let storage = MemStorage::new();
    let db = Db::open_with_storage(
        Arc::new(storage),
        Path::new("/db"),
        small_options(Family::Pgm, 16),
    )
    .unwrap();
    let mut model = Model::new();
    for i in 0..2_000u32 {
        let k = format!("{i:06}").into_bytes();
        db.put(&k, &i.to_le_bytes()).unwrap();
        model.insert(k, i.to_le_bytes().to_vec());
    }
    let mut it = db.scan(b"", None).unwrap();
    // Change everything after the iterator was created, and move it all between levels.
    for i in 0..2_000u32 {
        let k = format!("{i:06}").into_bytes();
        if i % 2 == 0 {
            db.delete(&k).unwrap();
        } else {
            db.put(&k, b"new").unwrap();
        }
    }
    db.flush().unwrap();
    db.compact().unwrap();
    let mut seen = 0;
    while it.valid() {
        let k = it.key().to_vec();
        assert_eq!(Some(&it.value().to_vec()), model.get(&k), "key {k:?}");
        seen += 1;
        it.next().unwrap();
    }
    assert_eq!(seen, 2_000);
    assert_eq!(db.get(b"000001").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"000002").unwrap(), None);
}

#[test]
fn reindexing_keeps_every_answer_and_changes_the_index() {
    let storage = MemStorage::new();
    let db = Db::open_with_storage(
        Arc::new(storage),
        Path::new("/db"),
        small_options(Family::Fp, 16),
    )
    .unwrap();
    let mut model = Model::new();
    for i in 0..4_000u32 {
        let k = format!("{:08}", i * 7919 % 100_003).into_bytes();
        db.put(&k, &i.to_le_bytes()).unwrap();
        model.insert(k, i.to_le_bytes().to_vec());
    }
    db.compact().unwrap();
    let fp_bytes = db.memory_usage().index_bytes;
    let pgm = IndexOptions {
        family: Family::Pgm,
        params: Params::new(16),
        level_boundaries: vec![],
        kind: Default::default(),
    };
    let db = db.reindex(pgm).unwrap();
    let pgm_bytes = db.memory_usage().index_bytes;
    assert!(
        pgm_bytes < fp_bytes,
        "pgm {pgm_bytes} bytes vs fp {fp_bytes}"
    );
    check_all(&db, &model, "after reindex to pgm");
    let db = db
        .reindex(IndexOptions {
            family: Family::Rmi,
            ..small_options(Family::Rmi, 64).index
        })
        .unwrap();
    check_all(&db, &model, "after reindex to rmi");
}

#[test]
fn concurrent_writers_readers_and_scans_during_background_compaction() {
    let opts = Options {
        background_compaction: true,
        ..small_options(Family::Pgm, 16)
    };
    let db = Arc::new(
        Db::open_with_storage(Arc::new(MemStorage::new()), Path::new("/db"), opts).unwrap(),
    );
    let writers: Vec<_> = (0..3u32)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..3_000u32 {
                    let k = format!("w{w}-{i:06}");
                    db.put(k.as_bytes(), format!("v{i}").as_bytes()).unwrap();
                    if i % 3 == 0 && i > 0 {
                        // Overwrite an earlier key: readers must never see it go backwards.
                        let old = format!("w{w}-{:06}", i / 2);
                        db.put(old.as_bytes(), format!("v{}-again", i / 2).as_bytes())
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2u32)
        .map(|r| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(u64::from(r));
                for _ in 0..4_000 {
                    let (w, i) = (rng.gen_range(0..3u32), rng.gen_range(0..3_000u32));
                    if let Some(v) = db.get(format!("w{w}-{i:06}").as_bytes()).unwrap() {
                        let v = String::from_utf8(v).unwrap();
                        assert!(
                            v == format!("v{i}") || v == format!("v{i}-again"),
                            "w{w}-{i}: {v}"
                        );
                    }
                }
                // A scan is sorted and shows each key once.
                let mut it = db.scan(b"w", Some(b"x")).unwrap();
                let mut last: Option<Vec<u8>> = None;
                while it.valid() {
                    assert!(last.as_deref() < Some(it.key()), "scan out of order");
                    last = Some(it.key().to_vec());
                    it.next().unwrap();
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    for w in 0..3u32 {
        for i in 0..3_000u32 {
            let v = db.get(format!("w{w}-{i:06}").as_bytes()).unwrap();
            let again = i <= 1_499 && (2 * i..2 * i + 2).any(|j| j % 3 == 0 && j > 0 && j < 3_000);
            let want = if again {
                format!("v{i}-again")
            } else {
                format!("v{i}")
            };
            assert_eq!(v, Some(want.into_bytes()), "w{w}-{i}");
        }
    }
    assert!(
        db.stats().compaction.compactions > 0,
        "no compaction ran during the test"
    );
}
