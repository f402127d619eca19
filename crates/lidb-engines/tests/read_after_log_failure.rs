//! After its log fails (the disk fills, a sync or a write fails), an engine refuses writes but
//! keeps answering reads of what it holds, as RocksDB does after a background error: every lidb
//! engine, the same check. The trees' pool (16 pages) is far smaller than the data, so their
//! reads evict pages meanwhile. Their page file is not on the injected storage: a page file
//! that also refuses write-backs is lidb-btree's `tests/reads_after_device_failure.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use lidb_engines::{EngineConfig, EngineKind};
use lidb_storage::Storage;
use lidb_storage::fault::{FaultSpec, FaultStorage};
use lidb_storage::fs::FsStorage;

#[test]
fn reads_go_on_after_the_disk_fills() {
    reads_go_on_after("enospc=1MiB");
}

#[test]
fn reads_go_on_after_a_sync_fails() {
    reads_go_on_after("sync-fail=1");
}

#[test]
fn reads_go_on_after_writes_fail() {
    reads_go_on_after("write-eio=1");
}

fn reads_go_on_after(faults: &str) {
    let root = tempfile::tempdir().unwrap();
    for kind in [
        EngineKind::Lsm,
        EngineKind::LearnedKv,
        EngineKind::Finedex,
        EngineKind::LearnedStore,
        EngineKind::Btree,
    ] {
        let mut cfg = EngineConfig::new(root.path().join(kind.name().replace('+', "p")));
        cfg.sync = true;
        cfg.tree.pool_bytes = 16 * 4096;
        let storage = FaultStorage::new(Arc::new(FsStorage), FaultSpec::parse(faults).unwrap(), 7);
        storage.set_enabled(false);
        let shared: Arc<dyn Storage> = Arc::new(storage.clone());
        let engine = lidb_engines::open_kind_on(kind, &cfg, shared).unwrap();
        let value = vec![7u8; 100];
        for i in 0..5_000u32 {
            engine.put(&i.to_be_bytes(), &value).unwrap();
        }
        storage.set_enabled(true);
        let mut failed = false;
        for i in 5_000..200_000u32 {
            if engine.put(&i.to_be_bytes(), &value).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "{kind}: {faults} never failed a write");
        for i in 0..5_000u32 {
            let got = engine.get(&i.to_be_bytes());
            assert_eq!(
                got,
                Ok(Some(value.clone())),
                "{kind}: key {i} after {faults} failed a write"
            );
        }
    }
}
