//! `FineStore::repair` (`lidb repair --engine finedex`): a store that does not open because of
//! damage mid-log or a corrupt checkpoint opens after the repair with every write that reads
//! cleanly; the dropped bytes are in `lost/`; a clean store keeps its contents.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_fine::{FineStore, FineStoreOptions};
use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DIR: &str = "/fine";

fn open(mem: &MemStorage) -> lidb_storage::Result<FineStore> {
    FineStore::open_with_storage(
        Arc::new(mem.clone()),
        Path::new(DIR),
        FineStoreOptions::default(),
    )
}

fn dir(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(name)
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn contents(mem: &MemStorage) -> Entries {
    open(mem).unwrap().scan(&[], None, usize::MAX)
}

/// Six puts of 29-byte records (key "kNN", value 5 bytes) at 8 + 29 * i, closed.
fn six_puts(mem: &MemStorage) -> PathBuf {
    let store = open(mem).unwrap();
    for i in 0..6 {
        store.put(format!("k{i:02}").as_bytes(), b"value").unwrap();
    }
    store.close().unwrap();
    dir("log-000001")
}

#[test]
fn damage_mid_log_is_skipped_and_the_records_after_it_kept() {
    let mem = MemStorage::new();
    let log = six_puts(&mem);
    let bad = 8 + 29 * 2;
    mem.corrupt(&log, bad + 20, 0x10).unwrap();
    let log_bytes = mem.read_all(&log).unwrap();
    assert!(matches!(open(&mem), Err(Error::Corruption { .. })));

    let report = FineStore::repair_with_storage(&mem, Path::new(DIR)).unwrap();
    assert!(report.set_aside_anything());
    assert_eq!(report.log_records, 5, "{report}");
    assert_eq!(report.log_set_aside.len(), 1, "{report}");
    let s = &report.log_set_aside[0];
    assert_eq!(
        (s.file.as_str(), s.offset, s.bytes),
        ("log-000001", bad, 29)
    );
    let lost = dir(&format!("lost/log-000001@{bad}"));
    assert_eq!(s.saved_as.as_deref(), Some(lost.to_str().unwrap()));
    assert_eq!(
        mem.read_all(&lost).unwrap(),
        log_bytes[bad as usize..bad as usize + 29]
    );
    assert_eq!(report.missing_seqs, vec![(3, 4)]);
    let text = report.to_string();
    assert!(
        text.contains("set aside 29 bytes of log log-000001 from offset 66"),
        "{text}"
    );
    assert!(text.contains("seq 3 to 3"), "{text}");

    let keys: Vec<Vec<u8>> = contents(&mem).into_iter().map(|(k, _)| k).collect();
    let want: Vec<Vec<u8>> = [0, 1, 3, 4, 5]
        .iter()
        .map(|i| format!("k{i:02}").into_bytes())
        .collect();
    assert_eq!(keys, want);
    // The repaired store takes writes and opens cleanly again; only the new pair remains.
    let store = open(&mem).unwrap();
    assert!(store.recovery_report().cut.is_none());
    store.put(b"k02", b"again").unwrap();
    store.close().unwrap();
    assert_eq!(contents(&mem).len(), 6);
    assert!(!mem.exists(&log));
}

#[test]
fn a_corrupt_checkpoint_is_set_aside_and_the_log_replayed() {
    let mem = MemStorage::new();
    let store = open(&mem).unwrap();
    for i in 0..50u32 {
        store.put(&i.to_be_bytes(), b"old").unwrap();
    }
    store.checkpoint().unwrap();
    for i in 45..55u32 {
        store.put(&i.to_be_bytes(), b"new").unwrap();
    }
    store.delete(&0u32.to_be_bytes()).unwrap();
    store.close().unwrap();
    let ckpt = dir("checkpoint-000001");
    mem.corrupt(&ckpt, 40, 1).unwrap();
    assert!(matches!(open(&mem), Err(Error::Corruption { .. })));

    let report = FineStore::repair_with_storage(&mem, Path::new(DIR)).unwrap();
    assert_eq!(report.checkpoint_kept, None, "{report}");
    assert_eq!(report.checkpoints_set_aside.len(), 1);
    assert!(mem.exists(&dir("lost/checkpoint-000001@0")));
    assert_eq!(report.log_records, 11);
    // The writes before the checkpoint had no log left: reported as lost.
    assert_eq!(report.missing_seqs, vec![(1, 51)], "{report}");
    assert!(report.to_string().contains("kept no checkpoint"));
    let want: Entries = (45..55u32)
        .map(|i| (i.to_be_bytes().to_vec(), b"new".to_vec()))
        .collect();
    assert_eq!(contents(&mem), want);
}

#[test]
fn a_lost_state_file_is_rebuilt_from_the_listing() {
    let mem = MemStorage::new();
    let store = open(&mem).unwrap();
    store.put(b"a", b"1").unwrap();
    store.checkpoint().unwrap();
    store.put(b"b", b"2").unwrap();
    store.close().unwrap();
    let state = dir("FINESTATE");
    mem.corrupt(&state, 3, 1).unwrap();
    assert!(matches!(open(&mem), Err(Error::Corruption { .. })));
    let report = FineStore::repair_with_storage(&mem, Path::new(DIR)).unwrap();
    assert!(report.state_set_aside.is_some(), "{report}");
    assert!(mem.exists(&dir("lost/FINESTATE@0")));
    assert_eq!(
        contents(&mem),
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ]
    );
}

/// Random writes, deletes and checkpoints, closed or dropped: repair sets nothing aside and
/// keeps the contents; a second repair too.
#[test]
fn repairing_a_clean_store_changes_nothing_logically() {
    for seed in 0..6u64 {
        let mem = MemStorage::new();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let store = open(&mem).unwrap();
        for _ in 0..400 {
            let k = format!("k{:03}", rng.gen_range(0..120)).into_bytes();
            match rng.gen_range(0..10) {
                0 => drop(store.delete(&k).unwrap()),
                1 if rng.gen_bool(0.1) => store.checkpoint().unwrap(),
                _ => store
                    .put(&k, format!("v{}", rng.r#gen::<u32>()).as_bytes())
                    .unwrap(),
            }
        }
        if seed % 2 == 0 {
            store.close().unwrap();
        } else {
            drop(store);
        }
        let before = contents(&mem);
        for round in 0..2 {
            let report = FineStore::repair_with_storage(&mem, Path::new(DIR)).unwrap();
            assert!(
                !report.set_aside_anything(),
                "seed {seed} round {round}: {report}"
            );
            assert_eq!(report.entries_written, before.len() as u64);
            assert_eq!(contents(&mem), before, "seed {seed} round {round}");
        }
    }
}

#[test]
fn a_directory_without_a_store_is_refused() {
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new(DIR)).unwrap();
    let err = FineStore::repair_with_storage(&mem, Path::new(DIR)).unwrap_err();
    assert!(err.to_string().contains("holds no FineStore"), "{err}");
}
