//! A failed sync (`FaultStorage`'s `sync-fail` over `MemStorage`) stops the store's writes until
//! reopen, deletions included, whatever file failed: the active value log (a writer's sync,
//! `Store::flush`), or a file a GC writes (its new LSM, value log, svlog, `KVSTATE`, the
//! directory) when the GC runs through `Store::gc`. Reads go on, and a reopen on clean storage
//! finds every acknowledged write and takes writes again.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::mem::MemStorage;
use support::{learned, small};

const DIR: &str = "/kv";

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value {i} round {round} {}", "v".repeat(60)).into_bytes()
}

fn opts(tier: TierKind, sync: bool) -> StoreOptions {
    StoreOptions {
        sync,
        ..small(tier)
    }
}

fn spec(s: &str) -> FaultSpec {
    FaultSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn open(storage: &FaultStorage, o: &StoreOptions) -> Store {
    Store::open_with_storage(Arc::new(storage.clone()), Path::new(DIR), o.clone())
        .unwrap_or_else(|e| panic!("open: {e}"))
}

/// Puts keys `0..n` (round 0), overwrites every third (round 1) and deletes every fifth, all
/// acknowledged with injection off.
fn load(store: &Store, n: u32, model: &mut Model) {
    for round in 0..2 {
        for i in (0..n).filter(|i| round == 0 || i % 3 == 0) {
            store
                .put(&key(i), &value(i, round))
                .unwrap_or_else(|e| panic!("put {i}: {e}"));
            model.insert(key(i), Some(value(i, round)));
        }
    }
    for i in (0..n).step_by(5) {
        store
            .delete(&key(i))
            .unwrap_or_else(|e| panic!("delete {i}: {e}"));
        model.insert(key(i), None);
    }
}

fn check_reads(store: &Store, model: &Model, ctx: &str) {
    for (k, v) in model {
        let got = store
            .get(k)
            .unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
        assert_eq!(&got, v, "{ctx}: key {k:?}");
    }
}

/// After a sync failed: with injection off, puts and deletions are refused and retry no sync,
/// reads answer; a reopen on clean storage finds every acknowledged write and takes writes.
fn check_stopped(store: Store, fault: &FaultStorage, ctx: &str) {
    fault.set_enabled(false);
    let syncs_failed = fault.counts().sync_errors;
    let model_key = key(1);
    let put = store.put(&key(90_000), b"after the failure");
    assert!(
        put.is_err(),
        "{ctx}: a put was acknowledged after a failed sync"
    );
    let del = store.delete(&model_key);
    assert!(
        del.is_err(),
        "{ctx}: a deletion was acknowledged after a failed sync"
    );
    assert_eq!(
        fault.counts().sync_errors,
        syncs_failed,
        "{ctx}: a sync was retried"
    );
}

/// Reopens on clean storage over `mem`, checks `model`, and checks that writes are taken again.
fn reopen_and_check(mem: &MemStorage, o: &StoreOptions, model: &Model, ctx: &str) {
    let clean = FaultStorage::new(Arc::new(mem.clone()), FaultSpec::default(), 0);
    let store = open(&clean, o);
    check_reads(&store, model, ctx);
    store
        .put(&key(90_001), b"after reopen")
        .unwrap_or_else(|e| panic!("{ctx}: a reopened store takes writes: {e}"));
}

#[test]
fn a_failed_sync_of_the_active_value_log_stops_puts_and_deletions() {
    let mem = MemStorage::new();
    let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 1);
    fault.set_enabled(false);
    let o = opts(learned(), true);
    let store = open(&fault, &o);
    let mut model = Model::new();
    load(&store, 100, &mut model);
    fault.set_enabled(true);
    let e = store
        .put(&key(5000), b"its sync fails")
        .err()
        .unwrap_or_else(|| panic!("a put whose value-log sync failed was acknowledged"));
    let failed = fault
        .last_failed_sync()
        .unwrap_or_else(|| panic!("no sync failed: {e}"));
    assert!(
        failed.to_string_lossy().ends_with(".vlog"),
        "{}",
        failed.display()
    );
    check_reads(&store, &model, "after the failed put");
    check_stopped(store, &fault, "active log, writer's sync");
    reopen_and_check(&mem, &o, &model, "active log, writer's sync");
}

#[test]
fn a_failed_sync_of_the_active_value_log_in_flush_stops_deletions() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let mem = MemStorage::new();
        let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 2);
        fault.set_enabled(false);
        let o = opts(tier.clone(), false);
        let store = open(&fault, &o);
        let mut model = Model::new();
        load(&store, 100, &mut model);
        store
            .flush()
            .unwrap_or_else(|e| panic!("{tier:?}: flush: {e}"));
        store
            .put(&key(7000), b"unsynced")
            .unwrap_or_else(|e| panic!("{tier:?}: put: {e}"));
        fault.set_enabled(true);
        assert!(
            store.flush().is_err(),
            "{tier:?}: a flush whose sync failed"
        );
        let failed = fault
            .last_failed_sync()
            .unwrap_or_else(|| panic!("{tier:?}: no sync failed"));
        assert!(
            failed.to_string_lossy().ends_with(".vlog"),
            "{}",
            failed.display()
        );
        fault.set_enabled(false);
        check_reads(&store, &model, "after the failed flush");
        check_stopped(store, &fault, &format!("{tier:?}: Store::flush"));
        // The unsynced put may or may not survive; every synced write must.
        model.remove(&key(7000));
        let clean = FaultStorage::new(Arc::new(mem.clone()), FaultSpec::default(), 0);
        let reopened = open(&clean, &o);
        check_reads(&reopened, &model, &format!("{tier:?}: reopened"));
    }
}

/// Runs a GC with each sync failing at `rate`, over seeds, for each engine: a GC that fails
/// stops writes, and a reopen (which finishes the GC the switch began) loses nothing.
#[test]
fn a_gc_that_fails_a_sync_stops_writes_and_loses_nothing() {
    let mut failed_files: Vec<PathBuf> = Vec::new();
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let mut failures = 0;
        for seed in 0..40u64 {
            let mem = MemStorage::new();
            let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=0.08"), seed);
            fault.set_enabled(false);
            let o = opts(tier.clone(), true);
            let store = open(&fault, &o);
            let mut model = Model::new();
            load(&store, 300, &mut model);
            fault.set_enabled(true);
            let gc = store.gc();
            fault.set_enabled(false);
            if gc.is_ok() {
                continue;
            }
            let failed = fault
                .last_failed_sync()
                .unwrap_or_else(|| panic!("{tier:?} seed {seed}: GC failed, no sync did"));
            let ctx = format!("{tier:?} seed {seed}, failed sync of {}", failed.display());
            failures += 1;
            failed_files.push(failed);
            check_reads(&store, &model, &ctx);
            // Nor does a GC run again before reopen (it would write after a failed sync).
            let syncs = fault.counts().sync_errors;
            assert!(store.gc().is_err(), "{ctx}: a GC ran after a failed one");
            assert_eq!(fault.counts().sync_errors, syncs);
            check_stopped(store, &fault, &ctx);
            reopen_and_check(&mem, &o, &model, &ctx);
        }
        assert!(failures > 0, "{tier:?}: no GC failed");
    }
    // The runs reach the files only a GC writes, not only its switch.
    let gc_output = failed_files
        .iter()
        .any(|p| p.to_string_lossy().ends_with(".svlog"));
    assert!(gc_output, "no failure hit a GC's output: {failed_files:?}");
}

/// The LSM a GC retires is dropped when its last reader (here a scan) is done; its files are
/// deleted then, so nothing of it is synced: a failed sync there could only stop writes for a
/// file no acknowledged write depends on.
#[test]
fn a_retired_lsm_is_dropped_without_a_sync() {
    for tier in [learned(), TierKind::Lsm, TierKind::WriteBack] {
        let mem = MemStorage::new();
        let fault = FaultStorage::new(Arc::new(mem.clone()), spec("sync-fail=1"), 4);
        fault.set_enabled(false);
        let o = opts(tier.clone(), true);
        let store = open(&fault, &o);
        let mut model = Model::new();
        load(&store, 200, &mut model);
        let reader = store
            .scan(b"", None)
            .unwrap_or_else(|e| panic!("{tier:?}: scan: {e}"));
        store.gc().unwrap_or_else(|e| panic!("{tier:?}: gc: {e}"));
        fault.set_enabled(true);
        drop(reader);
        assert_eq!(
            fault.counts().sync_errors,
            0,
            "{tier:?}: dropping the retired LSM synced {:?}",
            fault.last_failed_sync()
        );
        fault.set_enabled(false);
        store
            .put(&key(8000), b"after the retirement")
            .unwrap_or_else(|e| panic!("{tier:?}: put: {e}"));
        model.insert(key(8000), Some(b"after the retirement".to_vec()));
        check_reads(&store, &model, &format!("{tier:?}: after the retirement"));
    }
}
