//! The buffer pool resized under a running tree (a memory budget fitted after a load): shrinking
//! evicts until the pool uses no more than its new size, every key still reads back with its
//! newest value (dirty pages written back on the way out), and growing gives the frames back.

use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

use lidb_btree::{BTree, MemDevice, Options};

const PAGE: u64 = 4096;

#[test]
fn a_pool_shrinks_under_load_and_grows_back_with_every_key_intact() {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let opts = Options {
        page_size: 4096,
        pool_bytes: 256 * PAGE,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: true,
    };
    let tree = BTree::with_device(dev, &opts).unwrap_or_else(|e| panic!("{e}"));
    let mut model = BTreeMap::new();
    for i in 0..30_000u32 {
        let k = format!("key{i:07}").into_bytes();
        let v = vec![(i % 253) as u8; 120];
        tree.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
        model.insert(k, v);
    }
    let full = tree.stats().pool;
    assert_eq!(full.frames, 256);
    assert!(full.frames_used > 200, "the load filled the pool: {full:?}");

    let usable = tree
        .resize_pool(40 * PAGE)
        .unwrap_or_else(|e| panic!("shrink: {e}"));
    assert_eq!(usable, 40 * PAGE);
    let small = tree.stats().pool;
    assert_eq!(small.frames, 40, "{small:?}");
    assert!(small.frames_used <= 40, "{small:?}");
    for (k, v) in &model {
        let got = tree.get(k).unwrap_or_else(|e| panic!("get: {e}"));
        assert_eq!(got.as_ref(), Some(v));
        assert!(
            tree.stats().pool.frames_used <= 40,
            "reads stay within the smaller pool"
        );
    }
    // Writes go on in the smaller pool.
    for i in (0..30_000u32).step_by(7) {
        let k = format!("key{i:07}").into_bytes();
        let v = vec![0xAB; 90];
        tree.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
        model.insert(k, v);
    }
    assert!(tree.stats().pool.frames_used <= 40);

    assert_eq!(
        tree.resize_pool(1 << 40)
            .unwrap_or_else(|e| panic!("grow: {e}")),
        256 * PAGE,
        "growing stops at the pool the tree opened with"
    );
    assert_eq!(
        tree.resize_pool(0)
            .unwrap_or_else(|e| panic!("shrink: {e}")),
        16 * PAGE,
        "the pool keeps at least 16 frames"
    );
    common::assert_scan_is(&tree, &model);
}
