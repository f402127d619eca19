//! `LearnedStore::repair` (src/repair.rs): a store whose log was damaged in the middle (a byte
//! flipped, intact records after it) does not open; the repair cuts the log at its last good
//! record (the bytes saved under lost/), rebuilds the learned table from the tree and
//! checkpoints, and then the store opens normally holding exactly the writes before the damage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use lidb_btree::{Error, LearnedSource, LearnedStore, LearnedStoreOptions, Options};

fn opts() -> LearnedStoreOptions {
    let mut o = LearnedStoreOptions {
        tree: Options {
            pool_bytes: 256 * 4096,
            direct_io: false,
            ..Options::default()
        },
        ..LearnedStoreOptions::default()
    };
    o.wal.sync = false;
    o.wal.checkpoint_log_bytes = 0;
    o.wal.checkpoint_on_close = false;
    o
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; 40 + (i % 17) as usize]
}

fn newest_log(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wal-") && n.ends_with(".log"))
        })
        .collect();
    logs.sort();
    logs.pop().expect("a log")
}

#[test]
fn repair_cuts_a_damaged_log_at_its_last_good_record_and_rebuilds_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let (checkpointed, logged) = (2000u64, 600u64);
    let store = LearnedStore::open(dir.path(), &opts()).unwrap();
    for i in 0..checkpointed {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.checkpoint().unwrap();
    for i in checkpointed..checkpointed + logged {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap(); // no checkpoint on close: the log holds the last 600 writes

    let log = newest_log(dir.path());
    let mut bytes = std::fs::read(&log).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&log, &bytes).unwrap();
    let refused = LearnedStore::open(dir.path(), &opts()).err();
    assert!(
        matches!(refused, Some(Error::Corruption { .. })),
        "{refused:?}"
    );

    let report = LearnedStore::repair(dir.path(), &opts()).unwrap();
    let text = report.to_string();
    let cut = report.wal.cut.clone().expect("a cut");
    assert!(cut.offset <= at as u64 && cut.records_after > 0, "{text}");
    let lost = report.wal.lost.clone().expect("the cut bytes saved");
    assert!(lost.exists(), "{text}");
    assert!(report.slots > 10, "{text}");
    assert!(
        text.contains(&format!(
            "kept the {} records before offset {}",
            report.wal.records_replayed, cut.offset
        )),
        "{text}"
    );
    assert!(text.contains("learned mapping table rebuilt"), "{text}");
    let kept = report.wal.records_replayed;
    assert!(kept > 0 && kept < logged, "{text}");

    let store = LearnedStore::open(dir.path(), &opts()).unwrap();
    assert!(store.recovery_report().cut.is_none());
    assert_eq!(
        store.learned_source(),
        &LearnedSource::Loaded {
            slots: report.slots
        }
    );
    for i in 0..checkpointed + logged {
        let want = (i < checkpointed + kept).then(|| value(i));
        assert_eq!(store.get(&key(i)).unwrap(), want, "key {i}");
    }
    store.close().unwrap();
}

#[test]
fn repair_of_an_intact_store_changes_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = LearnedStore::open(dir.path(), &opts()).unwrap();
    for i in 0..500 {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    let report = LearnedStore::repair(dir.path(), &opts()).unwrap();
    assert!(report.wal.cut.is_none(), "{report}");
    assert!(
        report
            .to_string()
            .contains("the logs are intact: kept 500 records")
    );
    let store = LearnedStore::open(dir.path(), &opts()).unwrap();
    for i in 0..500 {
        assert_eq!(store.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

/// The repair reads the page size from the page file's header: a store of 8 KiB pages repairs
/// with options that say 4 KiB (as `lidb repair`, which takes no --page-size, gives).
#[test]
fn repair_finds_the_page_size_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut big = opts();
    big.tree.page_size = 8192;
    let store = LearnedStore::open(dir.path(), &big).unwrap();
    for i in 0..300 {
        store.put(&key(i), &value(i)).unwrap();
    }
    store.close().unwrap();
    let report = LearnedStore::repair(dir.path(), &opts()).unwrap();
    assert!(report.to_string().contains("kept 300 records"), "{report}");
    let store = LearnedStore::open(dir.path(), &big).unwrap();
    assert_eq!(store.get(&key(299)).unwrap(), Some(value(299)));
}
