//! The value logs KVSTATE names at open: keys point into each of them, so one that is gone is
//! refused by the open (naming it, before anything is written), not counted as empty and left
//! for a later read to trip over.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::path::Path;
use std::sync::Arc;

use lidb_kv::manifest::read_state;
use lidb_kv::vlog::vlog_path;
use lidb_kv::{Store, TierKind};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;

mod support;
use support::small;

/// The lsm+tier engine: after a GC its tier's values sit in a value log of their own, which
/// KVSTATE keeps next to the active one and nothing but the pointers in the tier refers to.
#[test]
fn an_open_refuses_a_named_value_log_that_is_gone() {
    let storage = MemStorage::new();
    let root = Path::new("/kv");
    let open = || Store::open_with_storage(Arc::new(storage.clone()), root, small(TierKind::Lsm));
    let store = open().expect("open");
    for i in 0..500u32 {
        store
            .put(format!("{i:08}").as_bytes(), &[7; 100])
            .expect("put");
    }
    store.gc().expect("gc");
    store.close().expect("close");
    let state = read_state(&storage, root)
        .expect("read KVSTATE")
        .expect("a state");
    let kept = vlog_path(
        root,
        *state
            .vlogs
            .get(1)
            .expect("a value log next to the active one"),
    );
    storage.remove(&kept).expect("remove");
    let files = storage.files();
    let Err(err) = open() else {
        panic!("the open must fail without {kept:?}");
    };
    assert!(
        err.to_string().contains(&kept.display().to_string()),
        "{err}"
    );
    assert_eq!(storage.files(), files, "the failed open wrote nothing");
}
