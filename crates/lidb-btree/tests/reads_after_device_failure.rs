//! After the page file stops taking writes (a full disk), the tree keeps answering reads, as
//! RocksDB does after a background error: an eviction whose dirty page cannot be written back
//! leaves that page resident and dirty (its newest contents stay in memory) and evicts a clean
//! page instead. Reads fail only when every frame holds a page that cannot be written back.

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use lidb_btree::{BTree, MemDevice, Options};

fn opts(provider_thread: bool) -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 64 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread,
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

#[test]
fn reads_go_on_when_page_write_backs_fail() {
    reads_go_on(false);
}

/// The same with the background provider thread, which evicts ahead of the readers (as
/// LearnedStore runs): its failed write-back stops it, and the readers evict for themselves.
#[test]
fn reads_go_on_when_the_provider_threads_write_backs_fail() {
    reads_go_on(true);
}

fn reads_go_on(provider_thread: bool) {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree =
        BTree::with_device(dev.clone(), &opts(provider_thread)).unwrap_or_else(|e| panic!("{e}"));
    let mut model = BTreeMap::new();
    // About 20 times the pool: most pages live only on the device.
    for i in 0..40_000u32 {
        let v = vec![(i % 251) as u8; 100];
        tree.put(&key(i), &v)
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
        model.insert(key(i), v);
    }
    tree.checkpoint(1, b"").unwrap_or_else(|e| panic!("{e}"));
    // A few dirty pages in the pool, then the device refuses every write.
    for i in (0..40_000u32).step_by(9_000) {
        let v = vec![0xEE; 100];
        tree.put(&key(i), &v)
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
        model.insert(key(i), v);
    }
    dev.fail_after_writes(Some(0));
    // Two passes over every key: each reads most pages from the device, so the pool evicts
    // over and over, its dirty pages failing to be written back each time they come up.
    for pass in 0..2 {
        for (k, v) in &model {
            let got = tree
                .get(k)
                .unwrap_or_else(|e| panic!("pass {pass}: get {k:?} after the device failed: {e}"));
            assert_eq!(got.as_ref(), Some(v), "pass {pass}: {k:?}");
        }
    }
    common::assert_scan_is(&tree, &model);
    let stats = tree.stats();
    assert!(
        stats.pool.evictions > 0,
        "the reads evicted pages: {stats:?}"
    );
    assert!(
        tree.checkpoint(2, b"").is_err(),
        "a checkpoint needs the device's writes, which fail"
    );
}
