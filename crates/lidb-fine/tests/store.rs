//! FineStore against a BTreeMap model across reopens and checkpoints (keys whose images collide
//! included), and the damage cases of its files: a torn log tail, a flipped bit mid-log, a
//! corrupt checkpoint. Crash tests are in `store_crash.rs`. Seeds are printed on failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_fine::{Config, FineStore, FineStoreOptions};
use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::tail::{RecoveryMode, TailKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DIR: &str = "/fine";

fn small_bins() -> Config {
    Config {
        root_slots: 2,
        child_slots: 2,
        threshold: 2,
        model_retrain_divisor: 0,
        ..Config::default()
    }
}

fn open(mem: &MemStorage, opts: &FineStoreOptions) -> lidb_storage::Result<FineStore> {
    FineStore::open_with_storage(Arc::new(mem.clone()), Path::new(DIR), opts.clone())
}

/// Keys from a small space where many share their first 8 bytes (equal images), plus short
/// keys whose zero padding collides with a real zero byte ("ab" and "ab\0").
fn random_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    match rng.gen_range(0..4) {
        0 => format!("collide!{}", rng.gen_range(0..40)).into_bytes(),
        1 => {
            let mut k = b"ab".to_vec();
            k.extend(std::iter::repeat_n(0u8, rng.gen_range(0..3)));
            k
        }
        2 => vec![],
        _ => format!("k{:05}", rng.gen_range(0..400)).into_bytes(),
    }
}

fn check_equal(
    store: &FineStore,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut ChaCha8Rng,
    ctx: &str,
) {
    let all = store.scan(&[], None, usize::MAX);
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want, "{ctx}: full scan");
    let bytes: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert_eq!(store.data_bytes(), bytes as u64, "{ctx}: data bytes");
    for _ in 0..20 {
        let (a, b) = (random_key(rng), random_key(rng));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        // A reversed or empty range is empty (and no panic), also inside one bucket.
        assert!(
            store.scan(&hi, Some(&lo), 10).is_empty(),
            "{ctx}: reversed range"
        );
        let limit = rng.gen_range(0..30);
        let got = store.scan(&lo, Some(&hi), limit);
        let want: Vec<_> = model
            .range(lo.clone()..hi.clone())
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "{ctx}: scan {lo:?}..{hi:?} limit {limit}");
        let k = random_key(rng);
        assert_eq!(store.get(&k), model.get(&k).cloned(), "{ctx}: get {k:?}");
    }
}

#[test]
fn model_based_across_reopens_and_checkpoints() {
    for seed in 0..4u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mem = MemStorage::new();
        let opts = FineStoreOptions {
            sync: seed % 2 == 0,
            index: small_bins(),
            ..FineStoreOptions::default()
        };
        let mut model = BTreeMap::new();
        let mut store = open(&mem, &opts).unwrap();
        for step in 0..1500 {
            let ctx = format!("seed {seed} step {step}");
            let k = random_key(&mut rng);
            match rng.gen_range(0..100) {
                0..60 => {
                    let v = format!("v{step}").into_bytes();
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                60..85 => {
                    assert_eq!(
                        store.delete(&k).unwrap(),
                        model.remove(&k).is_some(),
                        "{ctx}"
                    );
                }
                85..97 => assert_eq!(store.get(&k), model.get(&k).cloned(), "{ctx}"),
                97 => store.checkpoint().unwrap(),
                98 => {
                    store.close().unwrap();
                    store = open(&mem, &opts).unwrap();
                    assert!(store.recovery_report().cut.is_none(), "{ctx}");
                }
                _ => {
                    drop(store);
                    store = open(&mem, &opts).unwrap();
                }
            }
            if step % 250 == 0 {
                check_equal(&store, &model, &mut rng, &ctx);
            }
        }
        store.close().unwrap();
        let store = open(&mem, &opts).unwrap();
        check_equal(&store, &model, &mut rng, &format!("seed {seed} end"));
    }
}

/// Puts `n` records of 29 bytes each (key "kNN", value 5 bytes), closes: the log is then the
/// 8-byte header followed by records at 8 + 29 * i.
fn fixed_log(mem: &MemStorage, n: u32) -> PathBuf {
    let store = open(mem, &FineStoreOptions::default()).unwrap();
    for i in 0..n {
        store.put(format!("k{i:02}").as_bytes(), b"value").unwrap();
    }
    let log = PathBuf::from(DIR).join("log-000001");
    store.close().unwrap();
    assert_eq!(mem.file_size(&log).unwrap(), 8 + 29 * u64::from(n));
    log
}

fn snapshot(mem: &MemStorage) -> Vec<(PathBuf, Vec<u8>)> {
    mem.files()
        .into_iter()
        .filter(|p| !p.ends_with("LOCK"))
        .map(|p| {
            let b = mem.read_all(&p).unwrap();
            (p, b)
        })
        .collect()
}

#[test]
fn a_torn_log_tail_is_cut_and_reported() {
    let mem = MemStorage::new();
    let log = fixed_log(&mem, 5);
    // A strict prefix of a record: its header says 100 payload bytes, two landed.
    let mut f = mem.open_append(&log).unwrap();
    f.append(&[1, 2, 3, 4, 100, 0, 0, 0, 9, 9]).unwrap();
    f.sync().unwrap();
    drop(f);
    let absolute = FineStoreOptions {
        recovery_mode: RecoveryMode::Absolute,
        ..FineStoreOptions::default()
    };
    assert!(matches!(
        open(&mem, &absolute),
        Err(Error::Corruption { .. })
    ));
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    let cut = store.recovery_report().cut.clone().expect("a cut");
    assert_eq!(
        (cut.kind, cut.offset, cut.bytes),
        (TailKind::Torn, 8 + 29 * 5, 10)
    );
    assert_eq!(store.recovery_report().log_records, 5);
    let line = store.recovery_report().to_string();
    assert!(
        line.starts_with("recovery: ") && line.contains("offset 153"),
        "{line}"
    );
    assert_eq!(store.scan(&[], None, 100).len(), 5);
    store.put(b"after", b"cut").unwrap();
    store.close().unwrap();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    assert!(store.recovery_report().cut.is_none());
    assert_eq!(store.get(b"after"), Some(b"cut".to_vec()));
}

/// A log cut after a clean close (inside its last record, or at a record boundary) is damage,
/// not a torn tail: the open fails naming the log and writes nothing; point-in-time keeps the
/// intact prefix, reports the damage and saves the cut bytes to `lost/`. Once reopened, the
/// store is no longer "closed": a crash with a torn tail then opens as before.
#[test]
fn a_log_shortened_after_a_clean_close_is_damage() {
    let pit = FineStoreOptions {
        recovery_mode: RecoveryMode::PointInTime,
        ..FineStoreOptions::default()
    };
    for (cut_at, intact) in [(8 + 29 * 5 - 3, 4u64), (8 + 29 * 4, 4)] {
        let mem = MemStorage::new();
        let log = fixed_log(&mem, 5);
        mem.truncate(&log, cut_at).unwrap();
        let before = snapshot(&mem);
        let err = open(&mem, &FineStoreOptions::default()).unwrap_err();
        match &err {
            Error::Corruption { file, detail } => {
                assert_eq!(file, &log, "{err}");
                assert!(detail.contains("closed cleanly"), "{err}");
            }
            other => panic!("cut at {cut_at}: expected Corruption, got {other}"),
        }
        assert!(err.to_string().contains("log-000001"), "{err}");
        assert_eq!(snapshot(&mem), before, "a failed open changed files");

        let store = open(&mem, &pit).unwrap();
        let report = store.recovery_report().clone();
        let cut = report.cut.clone().expect("a cut");
        let valid = 8 + 29 * intact;
        assert_eq!(
            (cut.kind, cut.offset),
            (TailKind::Damage, valid),
            "{report}"
        );
        assert_eq!(cut.bytes, cut_at - valid);
        assert!(report.to_string().contains("closed cleanly"), "{report}");
        assert_eq!(store.scan(&[], None, 100).len() as u64, intact);
        if cut.bytes > 0 {
            let lost = report.lost.clone().expect("saved to lost/");
            assert_eq!(
                lost,
                PathBuf::from(DIR).join(format!("lost/log-000001@{valid}"))
            );
            assert_eq!(mem.read_all(&lost).unwrap().len() as u64, cut.bytes);
        }

        // A crash (no close) after more writes, with a torn tail: cut and reported as before.
        store.put(b"after", b"reopen").unwrap();
        drop(store);
        let mut f = mem.open_append(&log).unwrap();
        f.append(&[1, 2, 3, 4, 100, 0, 0, 0, 9]).unwrap();
        f.sync().unwrap();
        drop(f);
        let store = open(&mem, &FineStoreOptions::default()).unwrap();
        let cut = store.recovery_report().cut.clone().expect("a torn tail");
        assert_eq!(cut.kind, TailKind::Torn);
        assert_eq!(store.get(b"after"), Some(b"reopen".to_vec()));
        store.close().unwrap();
        let store = open(&mem, &FineStoreOptions::default()).unwrap();
        assert!(store.recovery_report().cut.is_none());
    }
}

/// Reopening a cleanly closed store and crashing before any write: the closed length is gone
/// from FINESTATE, so a torn tail written after it reads as a crash's.
#[test]
fn a_reopened_store_is_not_closed_any_more() {
    let mem = MemStorage::new();
    let log = fixed_log(&mem, 3);
    drop(open(&mem, &FineStoreOptions::default()).unwrap());
    let mut f = mem.open_append(&log).unwrap();
    f.append(&[7, 7, 7]).unwrap();
    f.sync().unwrap();
    drop(f);
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    assert_eq!(
        store.recovery_report().cut.as_ref().map(|t| t.kind),
        Some(TailKind::Torn)
    );
    assert_eq!(store.scan(&[], None, 100).len(), 3);
}

#[test]
fn a_flipped_bit_mid_log_fails_the_open_and_changes_nothing() {
    let mem = MemStorage::new();
    let log = fixed_log(&mem, 6);
    let bad_record = 8 + 29 * 2;
    mem.corrupt(&log, bad_record + 20, 0x10).unwrap();
    let before = snapshot(&mem);
    let err = open(&mem, &FineStoreOptions::default()).unwrap_err();
    match &err {
        Error::Corruption { file, detail } => {
            assert_eq!(file, &log, "{err}");
            assert!(detail.contains(&format!("offset {bad_record}")), "{err}");
        }
        other => panic!("expected Corruption, got {other}"),
    }
    assert_eq!(snapshot(&mem), before, "a failed open changed files");
    let pit = FineStoreOptions {
        recovery_mode: RecoveryMode::PointInTime,
        ..FineStoreOptions::default()
    };
    let store = open(&mem, &pit).unwrap();
    let cut = store.recovery_report().cut.clone().unwrap();
    assert_eq!(
        (cut.kind, cut.offset, cut.records_after),
        (TailKind::Damage, bad_record, 3)
    );
    let keys: Vec<_> = store
        .scan(&[], None, 100)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec![b"k00".to_vec(), b"k01".to_vec()]);
    let lost = store.recovery_report().lost.clone().unwrap();
    let log_bytes = &before.iter().find(|(p, _)| *p == log).unwrap().1;
    assert_eq!(
        lost,
        PathBuf::from(DIR).join(format!("lost/log-000001@{bad_record}"))
    );
    assert_eq!(
        mem.read_all(&lost).unwrap(),
        log_bytes[bad_record as usize..]
    );
    assert!(store.recovery_report().to_string().contains("saved to"));
}

#[test]
fn a_corrupt_checkpoint_is_named_in_the_error() {
    let mem = MemStorage::new();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    for i in 0..50u32 {
        store.put(&i.to_be_bytes(), b"v").unwrap();
    }
    store.checkpoint().unwrap();
    store.close().unwrap();
    let ckpt = PathBuf::from(DIR).join("checkpoint-000001");
    assert!(
        !mem.exists(&PathBuf::from(DIR).join("log-000001")),
        "old log kept"
    );
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    assert_eq!(store.recovery_report().checkpoint.as_ref(), Some(&ckpt));
    assert_eq!(store.recovery_report().checkpoint_entries, 50);
    drop(store);
    mem.corrupt(&ckpt, 40, 1).unwrap();
    let before = snapshot(&mem);
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::PointInTime] {
        let opts = FineStoreOptions {
            recovery_mode: mode,
            ..FineStoreOptions::default()
        };
        match open(&mem, &opts) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, ckpt),
            other => panic!("expected Corruption naming the checkpoint, got {other:?}"),
        }
    }
    assert_eq!(snapshot(&mem), before);
}

#[test]
fn a_missing_log_or_checkpoint_is_named_in_the_error() {
    let mem = MemStorage::new();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    store.put(b"a", b"1").unwrap();
    store.checkpoint().unwrap();
    store.close().unwrap();
    for name in ["log-000002", "checkpoint-000001"] {
        let path = PathBuf::from(DIR).join(name);
        let bytes = mem.read_all(&path).unwrap();
        mem.remove(&path).unwrap();
        match open(&mem, &FineStoreOptions::default()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("{name}: expected Corruption, got {other:?}"),
        }
        let mut f = mem.create(&path).unwrap();
        f.append(&bytes).unwrap();
    }
    assert_eq!(
        open(&mem, &FineStoreOptions::default()).unwrap().get(b"a"),
        Some(b"1".to_vec())
    );
}

#[test]
fn a_lost_state_file_is_damage_not_a_new_store() {
    let mem = MemStorage::new();
    fixed_log(&mem, 3);
    mem.remove(&PathBuf::from(DIR).join("FINESTATE")).unwrap();
    assert!(matches!(
        open(&mem, &FineStoreOptions::default()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn concurrent_writers_with_the_logger_thread() {
    let mem = MemStorage::new();
    let opts = FineStoreOptions {
        sync: true,
        index: small_bins(),
        ..FineStoreOptions::default()
    };
    let store = open(&mem, &opts).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let store = &store;
            s.spawn(move || {
                for i in 0..300u32 {
                    // Threads share images: "collide!" + thread + i.
                    let k = format!("collide!{t}-{i:04}");
                    store.put(k.as_bytes(), &i.to_le_bytes()).unwrap();
                    if i % 3 == 0 {
                        assert!(store.delete(k.as_bytes()).unwrap());
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..3 {
                store.checkpoint().unwrap();
                let keys = store.scan(b"collide!", None, usize::MAX);
                assert!(keys.windows(2).all(|w| w[0].0 < w[1].0));
            }
        });
    });
    drop(store);
    mem.crash(7);
    let store = open(&mem, &opts).unwrap();
    for t in 0..4u32 {
        for i in 0..300u32 {
            let k = format!("collide!{t}-{i:04}");
            let want = (i % 3 != 0).then(|| i.to_le_bytes().to_vec());
            assert_eq!(store.get(k.as_bytes()), want, "{k}");
        }
    }
}

/// A store written by format version 1 (`tests/fixtures/finestore-v1`, made with `lidb kv
/// --engine finedex`: five puts, a checkpoint, then a put, a delete and an overwrite in the log)
/// still opens with the same contents. Opened from a copy: the fixture is never written.
#[test]
fn a_version_1_store_still_opens() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/finestore-v1");
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new(DIR)).unwrap();
    for name in ["FINESTATE", "checkpoint-000001", "log-000002"] {
        let mut f = mem.create(&Path::new(DIR).join(name)).unwrap();
        f.append(&std::fs::read(fixture.join(name)).unwrap())
            .unwrap();
        f.sync().unwrap();
    }
    mem.sync_dir(Path::new(DIR)).unwrap();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    let report = store.recovery_report();
    assert_eq!((report.checkpoint_entries, report.log_records), (5, 3));
    let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"ab".to_vec(), b"33".to_vec()),
        (b"ab\0".to_vec(), b"4".to_vec()),
        (b"collide!b".to_vec(), b"2".to_vec()),
        (b"collide!c".to_vec(), b"6".to_vec()),
        (b"k\0\xff".to_vec(), b"5".to_vec()),
    ];
    assert_eq!(store.scan(&[], None, 100), want);
}

/// Keys at both ends of the image space (image 0 and image u64::MAX), several per image.
#[test]
fn extreme_images_keep_every_key() {
    let mem = MemStorage::new();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    let mut keys: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0; 9],
        vec![0xff; 8],
        vec![0xff; 9],
        [vec![0xff; 8], vec![0]].concat(),
    ];
    for (i, k) in keys.iter().enumerate() {
        store.put(k, &[i as u8]).unwrap();
    }
    keys.sort();
    let got: Vec<_> = store
        .scan(&[], None, 100)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(got, keys);
    let tail = store.scan(&[0xff; 8], Some(&[0xff; 9]), 100);
    assert_eq!(tail.len(), 2);
    store.checkpoint().unwrap();
    store.close().unwrap();
    let store = open(&mem, &FineStoreOptions::default()).unwrap();
    let got: Vec<_> = store
        .scan(&[], None, 100)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(got, keys);
    assert_eq!(store.get(&[0xff; 9]), Some(vec![4]));
}

/// redis-benchmark's keys (`key:` and 12 zero-padded digits) share their first 8 bytes: they
/// must spread over small buckets when written, after a reopen that replays the log, and after
/// one that loads a checkpoint.
#[test]
fn prefixed_keys_stay_in_small_buckets_across_reopens() {
    let mem = MemStorage::new();
    let opts = FineStoreOptions::default();
    let key = |n: u64| format!("key:{:012}", n * 7_919 % 100_000).into_bytes();
    let store = open(&mem, &opts).unwrap();
    for n in 0..20_000u64 {
        store.put(&key(n), &n.to_le_bytes()).unwrap();
    }
    let bound = |store: &FineStore, ctx: &str| {
        let s = store.bucket_stats();
        assert_eq!(s.keys, 20_000, "{ctx}: {s}");
        assert!(s.largest < lidb_fine::BUCKET_SPLIT_AT as u64, "{ctx}: {s}");
        assert!(s.layers > 1, "{ctx}: {s}");
        assert_eq!(
            store.get(&key(12_345)),
            Some(12_345u64.to_le_bytes().to_vec()),
            "{ctx}"
        );
    };
    bound(&store, "written");
    store.close().unwrap();
    let store = open(&mem, &opts).unwrap();
    bound(&store, "log replayed");
    store.checkpoint().unwrap();
    store.close().unwrap();
    let store = open(&mem, &opts).unwrap();
    bound(&store, "checkpoint loaded");
    let all = store.scan(b"key:", Some(b"key;"), usize::MAX);
    assert_eq!(all.len(), 20_000);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
}

/// What a killed process leaves: every byte written to the files of `mem`, synced or not, as a
/// new storage (the kernel keeps what a process wrote; only a power cut drops unsynced bytes).
fn as_left_by_a_kill(mem: &MemStorage) -> MemStorage {
    let copy = MemStorage::new();
    copy.create_dir_all(Path::new(DIR)).unwrap();
    for name in mem.list(Path::new(DIR)).unwrap() {
        let path = Path::new(DIR).join(&name);
        let mut f = copy.create(&path).unwrap();
        f.append(&mem.read_all(&path).unwrap()).unwrap();
        f.sync().unwrap();
    }
    copy.sync_dir(Path::new(DIR)).unwrap();
    copy
}

/// Writers of `put_many` batches, writers of single puts (which wake the logger thread) and
/// explicit checkpoints (log switches) at once, over keys every thread writes: the log holds the
/// records in the order they were applied, so the files as a killed process leaves them, and
/// after a clean close, open with exactly the store's contents.
#[test]
fn put_many_writers_with_the_logger_thread_and_checkpoints() {
    let mem = MemStorage::new();
    let opts = FineStoreOptions {
        checkpoint_log_bytes: 0,
        index: small_bins(),
        ..FineStoreOptions::default()
    };
    let store = open(&mem, &opts).unwrap();
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (store, start) = (&store, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..2000u32 {
                    let keys: Vec<Vec<u8>> = (0..8u32)
                        .map(|j| format!("hot:{:04}", (i * 8 + j + t) % 64).into_bytes())
                        .collect();
                    let value = format!("{t}-{i}").into_bytes();
                    if t == 3 {
                        // The single-put writer: its records go through the logger thread.
                        for k in &keys {
                            store.put(k, &value).unwrap();
                        }
                    } else {
                        let refs: Vec<(&[u8], &[u8])> = keys
                            .iter()
                            .map(|k| (k.as_slice(), value.as_slice()))
                            .collect();
                        store.put_many(&refs).unwrap();
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..20 {
                store.checkpoint().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
    });
    // The single puts' last records may still be in the buffer: `flush` writes them.
    store.flush().unwrap();
    let want = store.scan(&[], None, usize::MAX);
    assert_eq!(want.len(), 64);
    let killed = open(&as_left_by_a_kill(&mem), &opts).unwrap();
    assert_eq!(killed.scan(&[], None, usize::MAX), want);
    drop(killed);
    store.close().unwrap();
    let reopened = open(&mem, &opts).unwrap();
    assert_eq!(reopened.scan(&[], None, usize::MAX), want);
}
