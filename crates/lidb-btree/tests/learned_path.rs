//! The learned path's entry points: `leaf_parents` lists every leaf from the level-1 nodes
//! without reading a leaf, and `probe_leaf` reaches a leaf by page id without its parent (an
//! UNLINKED frame), checks its fences, and answers exactly or says `Miss`.

use std::sync::Arc;

use lidb_btree::{BTree, LeafProbe, LeafRef, MemDevice, Options};

fn opts() -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 64 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

fn leaf_for<'a>(leaves: &'a [LeafRef], key: &[u8]) -> Option<&'a LeafRef> {
    let i = leaves.partition_point(|l| l.upper.as_deref().is_some_and(|u| u < key));
    leaves.get(i)
}

#[test]
fn probes_through_the_mapping_match_the_tree() {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let pairs = (0..30_000u64).map(|i| ((i * 7).to_be_bytes().to_vec(), i.to_le_bytes().to_vec()));
    tree.bulk_load(pairs, 0.9).unwrap_or_else(|e| panic!("{e}"));
    tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
    drop(tree);
    // Reopen cold: nothing resident.
    let tree =
        BTree::with_device(Arc::new(dev.snapshot()), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let before = tree.stats().io.reads;
    let leaves = tree.leaf_parents().unwrap_or_else(|e| panic!("{e}"));
    let reads = tree.stats().io.reads - before;
    let inner_pages = tree.stats().pids_issued - leaves.len() as u64;
    assert!(
        reads <= inner_pages,
        "leaf_parents read {reads} pages, only {inner_pages} are inner"
    );
    assert!(leaves.len() > 100);
    let mut hints = std::collections::HashMap::new();
    for i in (0..30_000u64).step_by(37) {
        let k = (i * 7).to_be_bytes();
        let leaf = leaf_for(&leaves, &k).unwrap_or_else(|| panic!("no leaf for {i}"));
        let hint = hints.get(&leaf.pid).copied();
        match tree
            .probe_leaf(leaf.pid, hint, &k)
            .unwrap_or_else(|e| panic!("{e}"))
        {
            LeafProbe::Found { value, frame } => {
                assert_eq!(value, i.to_le_bytes());
                hints.insert(leaf.pid, frame);
            }
            other => panic!("key {i}: {other:?}"),
        }
        let absent = (i * 7 + 1).to_be_bytes();
        let leaf = leaf_for(&leaves, &absent).unwrap_or_else(|| panic!("no leaf"));
        assert!(matches!(
            tree.probe_leaf(leaf.pid, None, &absent)
                .unwrap_or_else(|e| panic!("{e}")),
            LeafProbe::Absent { .. }
        ));
    }
    // A leaf that does not cover the key, and a page id that does not exist: Miss.
    let first = leaves.first().map_or(0, |l| l.pid);
    let far = u64::MAX.to_be_bytes();
    assert_eq!(
        tree.probe_leaf(first, None, &far)
            .unwrap_or_else(|e| panic!("{e}")),
        LeafProbe::Miss
    );
    assert_eq!(
        tree.probe_leaf(1 << 40, None, &far)
            .unwrap_or_else(|e| panic!("{e}")),
        LeafProbe::Miss
    );
    // Tree walks link the unlinked leaves, and writes through the tree are seen by probes.
    for i in (0..30_000u64).step_by(37) {
        let k = (i * 7).to_be_bytes();
        tree.put(&k, b"new").unwrap_or_else(|e| panic!("{e}"));
    }
    let (slope, _) = tree
        .refit_leaf(&7u64.to_be_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(slope > 0.0, "a leaf of increasing keys has a rising model");
    let rehits = tree.stats().pool.cooling_rehits;
    assert!(rehits > 0, "walks linked unlinked leaves");
    for i in (0..30_000u64).step_by(37) {
        let k = (i * 7).to_be_bytes();
        let leaf = leaf_for(&leaves, &k).unwrap_or_else(|| panic!("no leaf"));
        match tree
            .probe_leaf(leaf.pid, hints.get(&leaf.pid).copied(), &k)
            .unwrap_or_else(|e| panic!("{e}"))
        {
            LeafProbe::Found { value, .. } => assert_eq!(value, b"new"),
            LeafProbe::Miss => assert_eq!(
                tree.get(&k).unwrap_or_else(|e| panic!("{e}")),
                Some(b"new".to_vec())
            ),
            LeafProbe::Absent { .. } => panic!("key {i} absent"),
        }
    }
}

fn cold_tree(n: u64) -> (BTree, Vec<LeafRef>) {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let pairs = (0..n).map(|i| (i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec()));
    tree.bulk_load(pairs, 0.9).unwrap_or_else(|e| panic!("{e}"));
    tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
    drop(tree);
    let tree =
        BTree::with_device(Arc::new(dev.snapshot()), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let leaves = tree.leaf_parents().unwrap_or_else(|e| panic!("{e}"));
    (tree, leaves)
}

#[test]
fn a_fixed_leaf_answers_until_a_writer_changes_it() {
    let (tree, leaves) = cold_tree(10_000);
    let leaf = leaves
        .get(3)
        .cloned()
        .unwrap_or_else(|| panic!("few leaves"));
    let guard = tree
        .fix_leaf(leaf.pid, leaf.frame)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("leaf {} not fixed", leaf.pid));
    let (lower, upper) = guard.fences().unwrap_or_else(|| panic!("changed"));
    assert_eq!(upper, leaf.upper);
    let lower = lower.unwrap_or_default();
    let inside = u64::from_be_bytes(lower.clone().try_into().unwrap_or([0; 8])) + 1;
    match guard.lookup(&inside.to_be_bytes()) {
        LeafProbe::Found { value, .. } => assert_eq!(value, inside.to_le_bytes()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        guard.lookup(&lower),
        LeafProbe::Miss,
        "the lower fence is outside"
    );
    // A write to the leaf makes the guard stale: Miss, and a new fix sees the write.
    tree.put(&inside.to_be_bytes(), b"changed")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!guard.is_current());
    assert_eq!(guard.lookup(&inside.to_be_bytes()), LeafProbe::Miss);
    let again = tree
        .fix_leaf(leaf.pid, Some(guard.frame()))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("not fixed again"));
    assert!(
        matches!(again.lookup(&inside.to_be_bytes()), LeafProbe::Found { value, .. } if value == b"changed")
    );
    // An inner page is not a leaf.
    let inner = tree.stats().pids_issued - 1;
    assert!(
        tree.fix_leaf(inner, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
}

#[test]
fn concurrent_misses_of_one_page_read_it_once() {
    let (tree, leaves) = cold_tree(10_000);
    let tree = Arc::new(tree);
    let leaf = leaves
        .get(5)
        .cloned()
        .unwrap_or_else(|| panic!("few leaves"));
    let before = tree.stats().io.reads;
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (tree, barrier, pid) = (tree.clone(), barrier.clone(), leaf.pid);
            std::thread::spawn(move || {
                barrier.wait();
                tree.fix_leaf(pid, None)
                    .map(|g| g.is_some())
                    .unwrap_or(false)
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap_or(false));
    }
    assert_eq!(
        tree.stats().io.reads - before,
        1,
        "one read for eight concurrent misses"
    );
    assert_eq!(tree.count_entries().unwrap_or(0), 10_000);
}
