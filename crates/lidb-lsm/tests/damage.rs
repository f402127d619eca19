//! Damage is loud: the two silent losses the corruption campaign found are named regression tests
//! here, with the recovery modes and the clean close. The campaign over every engine and file
//! kind is lidb-kv's `damage_campaign` test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::manifest::manifest_path;
use lidb_lsm::{CutKind, Db, Options};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::{Error, RecoveryMode};
use support::small_options;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn opts(mode: RecoveryMode) -> Options {
    Options {
        recovery_mode: mode,
        ..small_options(Family::Pgm, 16)
    }
}

fn open(s: &MemStorage, mode: RecoveryMode) -> Result<Db, Error> {
    Db::open_with_storage(Arc::new(s.clone()), &dir(), opts(mode))
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn files(s: &MemStorage) -> BTreeMap<PathBuf, Vec<u8>> {
    s.files()
        .into_iter()
        .filter(|p| !p.ends_with("LOCK"))
        .map(|p| {
            let b = s.read_all(&p).unwrap();
            (p, b)
        })
        .collect()
}

fn named(dir: &Path, s: &MemStorage, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = s
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| dir.join(n))
        .collect();
    v.sort();
    v
}

/// (offset, payload length) of every record of a record log.
fn records(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 8;
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        out.push((pos, len));
        pos += 8 + len;
    }
    out
}

/// The store: puts, a flush, more puts, and the database dropped (what `lidb kv` did
/// before a clean close flushed).
fn store_with_a_flush(s: &MemStorage) {
    let db = open(s, RecoveryMode::default()).unwrap();
    for i in 0..50 {
        db.put(&key(i), b"v1").unwrap();
    }
    db.flush().unwrap();
    for i in 50..100 {
        db.put(&key(i), b"v2").unwrap();
    }
    drop(db);
}

/// The manifest CURRENT names.
fn current_manifest(s: &MemStorage) -> PathBuf {
    let current = String::from_utf8(s.read_all(&dir().join("CURRENT")).unwrap()).unwrap();
    let n: u64 = current
        .trim()
        .trim_start_matches("MANIFEST-")
        .parse()
        .unwrap();
    manifest_path(&dir(), n)
}

fn expect_corruption_naming(r: Result<Db, Error>, file: &Path, ctx: &str) -> String {
    match r {
        Err(Error::Corruption { file: f, detail }) => {
            assert_eq!(f, file, "{ctx}: {detail}");
            detail
        }
        Err(e) => panic!(
            "{ctx}: expected Corruption naming {}, got {e}",
            file.display()
        ),
        Ok(_) => panic!("{ctx}: the open succeeded"),
    }
}

#[test]
fn regression_a_flipped_bit_in_the_flush_edit_fails_the_open_and_deletes_no_table() {
    let s = MemStorage::new();
    store_with_a_flush(&s);
    let manifest = current_manifest(&s);
    let bytes = s.read_all(&manifest).unwrap();
    let (at, len) = *records(&bytes).last().unwrap();
    s.corrupt(&manifest, (at + 8 + len / 2) as u64, 0x10)
        .unwrap();
    let before = files(&s);
    let detail = expect_corruption_naming(open(&s, RecoveryMode::default()), &manifest, "flip");
    assert!(detail.contains("damage"), "{detail}");
    assert!(
        files(&s) == before,
        "the failed open changed or deleted files"
    );
    assert_eq!(
        named(&dir(), &s, ".sst").len(),
        1,
        "the flushed table is still there"
    );
    // Point-in-time cannot make a consistent state either: the WAL the lost edit retired is gone.
    expect_corruption_naming(
        open(&s, RecoveryMode::PointInTime),
        &manifest,
        "point-in-time",
    );
    assert!(files(&s) == before);
}

#[test]
fn regression_a_truncated_manifest_fails_the_open_and_deletes_no_table() {
    let s = MemStorage::new();
    store_with_a_flush(&s);
    let manifest = current_manifest(&s);
    let bytes = s.read_all(&manifest).unwrap();
    let (at, _) = *records(&bytes).last().unwrap();
    for cut in [at + 3, at + 8, at + 20, bytes.len() - 1] {
        let t = MemStorage::new();
        t.create_dir_all(&dir()).unwrap();
        for (p, b) in files(&s) {
            let mut f = t.create(&p).unwrap();
            f.append(&b).unwrap();
            f.sync().unwrap();
        }
        t.truncate(&manifest, cut as u64).unwrap();
        let before = files(&t);
        let detail = expect_corruption_naming(open(&t, RecoveryMode::default()), &manifest, "cut");
        assert!(detail.contains("is gone"), "cut {cut}: {detail}");
        assert!(
            files(&t) == before,
            "cut {cut}: the failed open changed files"
        );
    }
}

/// A WAL with 100 puts then 100 overwrites, dropped without a flush.
fn store_with_overwrites(s: &MemStorage) -> PathBuf {
    let db = open(s, RecoveryMode::default()).unwrap();
    for round in [b"v1", b"v2"] {
        for i in 0..100 {
            db.put(&key(i), round).unwrap();
        }
    }
    drop(db);
    named(&dir(), s, ".log").pop().unwrap()
}

#[test]
fn regression_a_flipped_bit_mid_wal_fails_the_open_instead_of_rolling_back() {
    let s = MemStorage::new();
    let wal = store_with_overwrites(&s);
    let len = s.file_size(&wal).unwrap();
    s.corrupt(&wal, len / 2, 0x01).unwrap();
    let before = files(&s);
    let detail = expect_corruption_naming(open(&s, RecoveryMode::default()), &wal, "tolerate");
    assert!(detail.contains("intact record(s) follow"), "{detail}");
    assert!(files(&s) == before, "the failed open changed files");
    expect_corruption_naming(open(&s, RecoveryMode::Absolute), &wal, "absolute");

    // Point-in-time keeps the prefix, reports the drop, and saves the dropped bytes in lost/.
    let db = open(&s, RecoveryMode::PointInTime).unwrap();
    let report = db.recovery_report();
    let cut = report
        .wal_cuts
        .first()
        .unwrap_or_else(|| panic!("{report:?}"));
    assert_eq!((cut.kind, &cut.file), (CutKind::Damage, &wal), "{report:?}");
    assert!(cut.records > 0 && cut.bytes > 0, "{cut:?}");
    assert!(
        report.to_string().contains("damage cut at offset"),
        "{report}"
    );
    let lost = named(&dir().join("lost"), &s, "");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(s.file_size(&lost[0]).unwrap(), cut.bytes);
    // The state is that after the first p writes, for some p short of all 200.
    let got: Vec<Option<Vec<u8>>> = (0..100).map(|i| db.get(&key(i)).unwrap()).collect();
    let after = |p: usize| -> Vec<Option<Vec<u8>>> {
        (0..100)
            .map(|i| match (i < p, 100 + i < p) {
                (_, true) => Some(b"v2".to_vec()),
                (true, false) => Some(b"v1".to_vec()),
                _ => None,
            })
            .collect()
    };
    let p = (0..=200).find(|&p| after(p) == got);
    assert!(
        p.is_some_and(|p| p < 200),
        "not a prefix of the writes: {p:?}"
    );
}

#[test]
fn regression_a_zeroed_run_mid_wal_fails_the_open() {
    let s = MemStorage::new();
    let wal = store_with_overwrites(&s);
    let bytes = s.read_all(&wal).unwrap();
    let from = bytes.len() / 3;
    for (i, &b) in bytes.iter().enumerate().skip(from).take(512) {
        if b != 0 {
            s.corrupt(&wal, i as u64, b).unwrap();
        }
    }
    let before = files(&s);
    expect_corruption_naming(open(&s, RecoveryMode::default()), &wal, "zeros");
    assert!(files(&s) == before);
}

#[test]
fn a_crash_torn_tail_is_cut_and_reported_and_absolute_refuses_it() {
    let mut torn = 0;
    for seed in 0..24 {
        let t = MemStorage::new();
        let db = open(&t, RecoveryMode::default()).unwrap();
        for i in 0..40 {
            db.put(&key(i), b"synced").unwrap();
        }
        db.sync_wal().unwrap();
        for i in 0..40 {
            db.put(&key(i), b"unsynced").unwrap();
        }
        std::mem::forget(db); // a crash: no close, no sync
        let wal = named(&dir(), &t, ".log").pop().unwrap();
        let synced = t.durable_len(&wal).unwrap();
        t.crash(seed);
        if t.file_size(&wal).unwrap() == synced {
            continue; // nothing unsynced landed
        }
        let before = files(&t);
        let Err(Error::Corruption { file, .. }) = open(&t, RecoveryMode::Absolute) else {
            continue; // the unsynced records landed whole: nothing is torn
        };
        assert_eq!(file, wal, "seed {seed}");
        assert!(
            files(&t) == before,
            "seed {seed}: the failed open changed files"
        );
        let db = open(&t, RecoveryMode::default()).unwrap();
        let cut = db.recovery_report().wal_cuts.first().cloned().unwrap();
        assert_eq!(cut.kind, CutKind::TornTail, "seed {seed}: {cut:?}");
        for i in 0..40 {
            assert!(
                db.get(&key(i)).unwrap().is_some(),
                "seed {seed}: synced key {i} lost"
            );
        }
        torn += 1;
    }
    assert!(torn > 3, "only {torn} seeds tore the tail");
}

#[test]
fn a_clean_close_leaves_no_tail_to_lose() {
    let s = MemStorage::new();
    let db = open(&s, RecoveryMode::default()).unwrap();
    for i in 0..300 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
    }
    db.close().unwrap();
    // A power cut right after the close loses nothing, and the WALs the manifest still needs
    // hold no record: everything is in tables.
    s.crash(7);
    let db = open(&s, RecoveryMode::Absolute).unwrap();
    assert_eq!(db.recovery_report().wal_records_replayed, 0);
    for i in 0..300 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(format!("v{i}").into_bytes()));
    }
}

/// Found by the campaign: a manifest cut exactly at a record boundary has no bad tail at all,
/// and read as a clean manifest that had lost its last edits.
#[test]
fn regression_a_manifest_cut_at_a_record_boundary_fails_the_open() {
    let s = MemStorage::new();
    store_with_a_flush(&s);
    let manifest = current_manifest(&s);
    let bytes = s.read_all(&manifest).unwrap();
    let (at, _) = *records(&bytes).last().unwrap();
    s.truncate(&manifest, at as u64).unwrap();
    let before = files(&s);
    let detail = expect_corruption_naming(open(&s, RecoveryMode::default()), &manifest, "boundary");
    assert!(
        detail.contains("no bad tail") && detail.contains("is gone"),
        "{detail}"
    );
    assert!(files(&s) == before);
}

/// Versions before the lost-edit check created an open's WAL after its manifest: a crash in
/// between leaves a manifest of one snapshot naming the missing WAL numbered after it. Nothing
/// was lost, and such a store still opens.
#[test]
fn a_missing_wal_from_an_older_versions_open_crash_is_not_damage() {
    use lidb_lsm::manifest::{Manifest, VersionEdit};
    let s = MemStorage::new();
    s.create_dir_all(&dir()).unwrap();
    let snapshot = VersionEdit {
        log_number: Some(8),
        next_file_number: Some(9),
        last_sequence: Some(0),
        ..VersionEdit::default()
    };
    drop(Manifest::create(Arc::new(s.clone()), &dir(), 7, &snapshot).unwrap());
    let db = open(&s, RecoveryMode::Absolute).unwrap();
    db.put(b"a", b"1").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    // The same manifest naming a WAL an edit would have retired is damage.
    let t = MemStorage::new();
    t.create_dir_all(&dir()).unwrap();
    let snapshot = VersionEdit {
        log_number: Some(5),
        ..snapshot
    };
    drop(Manifest::create(Arc::new(t.clone()), &dir(), 7, &snapshot).unwrap());
    expect_corruption_naming(
        open(&t, RecoveryMode::default()),
        &manifest_path(&dir(), 7),
        "old",
    );
}
