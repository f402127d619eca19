//! A failed sync of a file that a flush or a compaction writes (an output table, the directory,
//! the MANIFEST), whichever thread ran the job (here the caller of `Db::flush` and
//! `Db::compact`): the job installs nothing, the manifest never names a table whose sync
//! failed, writes stop until reopen while reads go on, and a reopen finds every acknowledged put.
//!
//! The faults are switched on at the right moment: by the `before_flush` hook for a flush (after
//! the memtable switch synced the WAL, so the first sync that fails is the flush's own), and just
//! before `Db::compact` for a compaction (no WAL sync on that path).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_index::Family;
use lidb_lsm::manifest::Manifest;
use lidb_lsm::{Db, FlushHook, Options};
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::mem::MemStorage;
use support::small_options;

const DIR: &str = "/db";

fn opts(hook: Option<FlushHook>) -> Options {
    Options {
        sync: true,
        before_flush: hook,
        ..small_options(Family::Pgm, 16)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i} {}", "v".repeat(80)).into_bytes()
}

/// A database over `fault` (injection off) whose flushes switch injection on first.
fn open_arming(fault: &FaultStorage) -> Db {
    let arm = fault.clone();
    let hook = FlushHook::new(move || {
        arm.set_enabled(true);
        Ok(())
    });
    fault.set_enabled(false);
    Db::open_with_storage(Arc::new(fault.clone()), Path::new(DIR), opts(Some(hook)))
        .unwrap_or_else(|e| panic!("open: {e}"))
}

fn put_acked(db: &Db, range: std::ops::Range<u32>, acked: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in range {
        db.put(&key(i), &value(i))
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
        acked.insert(key(i), value(i));
    }
}

/// Table numbers every intact edit of the current manifest adds.
fn tables_named(mem: &MemStorage) -> Vec<u64> {
    let m = Manifest::recover(mem, Path::new(DIR))
        .unwrap_or_else(|e| panic!("manifest: {e}"))
        .unwrap_or_else(|| panic!("no manifest"));
    m.edits
        .iter()
        .flat_map(|e| e.added.iter().map(|(_, t)| t.number))
        .collect()
}

/// The number of `path` if it is a table (`000123.sst`).
fn table_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".sst")?.parse().ok()
}

/// After the failed sync of `failed`: writes are refused (with injection off too, nothing
/// retried), reads answer, the manifest names no table whose sync failed, and a reopen on clean
/// storage finds every acknowledged put.
fn check_after_failure(
    db: Db,
    fault: &FaultStorage,
    mem: &MemStorage,
    failed: &Path,
    acked: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    fault.set_enabled(false);
    let syncs_failed = fault.counts().sync_errors;
    for i in 9000..9010 {
        assert!(
            db.put(&key(i), &value(i)).is_err(),
            "put {i} acknowledged after the failed sync of {}",
            failed.display()
        );
    }
    assert_eq!(fault.counts().sync_errors, syncs_failed);
    for (k, v) in acked {
        let got = db.get(k).unwrap_or_else(|e| panic!("get {k:?}: {e}"));
        assert_eq!(got.as_ref(), Some(v), "read of {k:?} after the failure");
    }
    if let Some(n) = table_number(failed) {
        assert!(
            !tables_named(mem).contains(&n),
            "the manifest names table {n}, whose sync failed"
        );
    }
    drop(db);
    let clean = FaultStorage::new(Arc::new(mem.clone()), FaultSpec::default(), 0);
    let db = Db::open_with_storage(Arc::new(clean), Path::new(DIR), opts(None))
        .unwrap_or_else(|e| panic!("reopen after the failed sync of {}: {e}", failed.display()));
    for (k, v) in acked {
        let got = db.get(k).unwrap_or_else(|e| panic!("get {k:?}: {e}"));
        assert_eq!(got.as_ref(), Some(v), "acknowledged {k:?} after reopen");
    }
    db.put(&key(9100), &value(9100))
        .unwrap_or_else(|e| panic!("a reopened database takes writes: {e}"));
}

fn spec(s: &str) -> FaultSpec {
    FaultSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn a_flush_whose_table_sync_fails_installs_nothing_and_stops_writes() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 3);
    let db = open_arming(&fault);
    let mut acked = BTreeMap::new();
    put_acked(&db, 0..60, &mut acked);
    assert!(db.flush().is_err(), "a flush whose table sync failed");
    let failed = fault
        .last_failed_sync()
        .unwrap_or_else(|| panic!("no sync failed"));
    assert!(table_number(&failed).is_some(), "{}", failed.display());
    check_after_failure(db, &fault, &mem, &failed, &acked);
}

#[test]
fn a_compaction_whose_output_sync_fails_installs_nothing_and_stops_writes() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 5);
    fault.set_enabled(false);
    let db = Db::open_with_storage(Arc::new(fault.clone()), Path::new(DIR), opts(None))
        .unwrap_or_else(|e| panic!("open: {e}"));
    let mut acked = BTreeMap::new();
    for round in 0..2 {
        put_acked(&db, round * 40..round * 40 + 60, &mut acked);
        db.flush().unwrap_or_else(|e| panic!("flush {round}: {e}"));
    }
    let named_before = tables_named(&mem);
    fault.set_enabled(true);
    assert!(db.compact().is_err(), "a compaction whose output failed");
    let failed = fault
        .last_failed_sync()
        .unwrap_or_else(|| panic!("no sync failed"));
    let n = table_number(&failed).unwrap_or_else(|| panic!("{}", failed.display()));
    assert!(!named_before.contains(&n), "table {n} is a new output");
    check_after_failure(db, &fault, &mem, &failed, &acked);
}

/// Seeds whose flush fails at the MANIFEST's sync (after the table's and the directory's
/// succeeded) are found by trying: with a failure rate of one half, about one seed in eight.
#[test]
fn a_flush_whose_manifest_sync_fails_stops_writes() {
    let mut manifest_failures = 0;
    let mut failed_files: Vec<PathBuf> = Vec::new();
    for seed in 0..48u64 {
        let mem = MemStorage::new();
        let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=0.5"), seed);
        let db = open_arming(&fault);
        let mut acked = BTreeMap::new();
        put_acked(&db, 0..60, &mut acked);
        if db.flush().is_ok() {
            continue;
        }
        let failed = fault
            .last_failed_sync()
            .unwrap_or_else(|| panic!("seed {seed}: no sync failed"));
        let is_manifest = failed
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("MANIFEST-"));
        manifest_failures += u32::from(is_manifest);
        failed_files.push(failed.clone());
        check_after_failure(db, &fault, &mem, &failed, &acked);
    }
    assert!(
        manifest_failures > 0,
        "no seed failed at the manifest: {failed_files:?}"
    );
}
