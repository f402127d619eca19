//! LearnedStore over a log storage that fails: a store whose log failed refuses every write, a
//! delete of a key that is absent included. (`lidb stress --faults` found that a second delete
//! of a key whose first delete failed was acknowledged without touching the failed log, and a
//! reopen then brought the key back.)

use std::sync::Arc;

use lidb_btree::{LearnedStore, LearnedStoreOptions};
use lidb_storage::Storage;
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::fs::FsStorage;

fn open(storage: &FaultStorage, dir: &std::path::Path) -> LearnedStore {
    let mut opts = LearnedStoreOptions::default();
    opts.wal.sync = true;
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    LearnedStore::open_with_storage(s, dir, &opts).unwrap_or_else(|e| panic!("open: {e}"))
}

#[test]
fn a_delete_of_an_absent_key_is_refused_once_the_log_failed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let spec = FaultSpec::parse("sync-fail=1").unwrap_or_else(|e| panic!("{e}"));
    let storage = FaultStorage::new(Arc::new(FsStorage), spec, 1);
    storage.set_enabled(false);
    let store = open(&storage, dir.path());
    store.put(b"k", b"v").unwrap_or_else(|e| panic!("put: {e}"));
    store
        .put(b"kept", b"w")
        .unwrap_or_else(|e| panic!("put: {e}"));
    storage.set_enabled(true);
    assert!(store.delete(b"k").is_err(), "the delete's sync failed");
    let again = store.delete(b"k");
    assert!(
        again.is_err(),
        "a delete on a failed log must not be acknowledged: {again:?}"
    );
    assert!(store.delete(b"never-there").is_err());
    drop(store);
    storage.set_enabled(false);
    let reopened = open(&storage, dir.path());
    // The failed delete may or may not have reached the log; the other put was durable.
    let got = reopened.get(b"kept").unwrap_or_else(|e| panic!("get: {e}"));
    assert_eq!(got.as_deref(), Some(&b"w"[..]));
}

#[test]
fn a_failed_checkpoint_stops_writes_until_reopen() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let spec = FaultSpec::parse("sync-fail=1").unwrap_or_else(|e| panic!("{e}"));
    let storage = FaultStorage::new(Arc::new(FsStorage), spec, 2);
    storage.set_enabled(false);
    let store = open(&storage, dir.path());
    store.put(b"a", b"1").unwrap_or_else(|e| panic!("put: {e}"));
    storage.set_enabled(true);
    assert!(store.checkpoint().is_err(), "its syncs fail");
    storage.set_enabled(false);
    // The storage works again, but a sync failed: the store takes no write until reopened.
    let put = store.put(b"b", b"2");
    assert!(put.is_err(), "a write after a failed checkpoint: {put:?}");
    let got = store.get(b"a").unwrap_or_else(|e| panic!("get: {e}"));
    assert_eq!(got.as_deref(), Some(&b"1"[..]), "reads go on");
    drop(store);
    let reopened = open(&storage, dir.path());
    let got = reopened.get(b"a").unwrap_or_else(|e| panic!("get: {e}"));
    assert_eq!(got.as_deref(), Some(&b"1"[..]));
    reopened
        .put(b"b", b"2")
        .unwrap_or_else(|e| panic!("put after reopen: {e}"));
}
