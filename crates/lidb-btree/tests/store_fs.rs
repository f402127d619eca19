//! The store on the real file system (lidb-lsm's `FsStorage`): writes survive a clean close and
//! a drop, a torn tail made with `std::fs` is cut, and a second open of a directory in use is
//! refused by its lock.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;

use lidb_btree::testing::MemTarget;
use lidb_btree::{BTreeStore, WalOptions};
use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;
use lidb_testkit::Scratch;

fn open(dir: &Path, opts: &WalOptions) -> lidb_btree::Result<BTreeStore<MemTarget>> {
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    std::fs::create_dir_all(dir).unwrap();
    let target = MemTarget::open(Arc::clone(&storage), &dir.join("tree.snap"))?;
    BTreeStore::open(storage, dir, target, opts.clone())
}

#[test]
fn the_store_works_on_the_file_system() {
    let dir = Scratch::new("btwal");
    let opts = WalOptions {
        sync: true,
        checkpoint_on_close: false,
        ..WalOptions::default()
    };
    let store = open(&dir, &opts).unwrap();
    assert!(open(&dir, &opts).is_err(), "the directory is locked");
    for i in 0..100u32 {
        store.put(&i.to_be_bytes(), b"value").unwrap();
    }
    store.checkpoint().unwrap();
    for i in 100..200u32 {
        store.put(&i.to_be_bytes(), b"value").unwrap();
    }
    store.close().unwrap();
    let store = open(&dir, &opts).unwrap();
    assert!(store.recovery_report().closed_cleanly);
    assert_eq!(store.recovery_report().records_replayed, 100);
    assert_eq!(store.scan(&[], None, usize::MAX).unwrap().len(), 200);
    store.put(b"last", b"one").unwrap();
    drop(store);

    let log = dir.join("wal-000002.log");
    let len = std::fs::metadata(&log).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 2).unwrap();
    drop(f);
    let store = open(&dir, &opts).unwrap();
    assert_eq!(store.recovery_report().cut_bytes(), 8 + 13 + 4 + 3 - 2);
    assert_eq!(store.get(b"last").unwrap(), None);
    assert_eq!(store.scan(&[], None, usize::MAX).unwrap().len(), 200);
}
