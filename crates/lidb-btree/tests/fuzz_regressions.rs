//! Regressions the `btree_page` fuzz target found (fuzz/fuzz_targets/btree_page.rs): page files
//! whose every checksum holds but whose child pointers are not a tree. Reads must end with
//! `Corruption`, not restart forever (the fuzzer's timeout): each test runs the reads on a thread
//! and fails if they take more than 20 seconds.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use lidb_btree::{BTree, MemDevice, Options, PageDevice, node, page};

fn opts() -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 32 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

fn key(i: u64) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

/// A durable tree of 5000 keys (one inner root over its leaves), the first node `want` picks
/// rewritten by `edit` (given its page id) and resealed in place.
fn broken_tree(want: impl Fn(&[u8]) -> bool, edit: impl Fn(&mut [u8], u64)) -> MemDevice {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let pairs = (0..5000u64).map(|i| (key(i), vec![b'v'; 16]));
    tree.bulk_load(pairs, 0.9).unwrap_or_else(|e| panic!("{e}"));
    tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
    drop(tree);
    let dev = dev.snapshot();
    let mut buf = vec![0u8; 4096];
    for slot in 2..dev.slot_count() {
        dev.read(slot, &mut buf).unwrap_or_else(|e| panic!("{e}"));
        if want(&buf) {
            let pid = page::id(&buf);
            edit(&mut buf, pid);
            page::seal(&mut buf);
            dev.write(slot, &buf).unwrap_or_else(|e| panic!("{e}"));
            return dev;
        }
    }
    panic!("no such node");
}

fn root(page: &[u8]) -> bool {
    page::kind(page) == Some(page::PageKind::Inner) && node::count(page) >= 2
}

/// Opens `dev`, then gets every 97th key and scans everything on a thread: the errors.
fn reads(dev: MemDevice) -> Vec<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let tree = BTree::with_device(Arc::new(dev), &opts()).unwrap_or_else(|e| panic!("{e}"));
        let mut errors: Vec<String> = (0..5000u64)
            .step_by(97)
            .filter_map(|i| tree.get(&key(i)).err().map(|e| e.to_string()))
            .collect();
        errors.extend(
            tree.scan(b"", None, usize::MAX)
                .err()
                .map(|e| e.to_string()),
        );
        let _ = tx.send(errors);
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("reads restarted forever"))
}

#[test]
fn a_page_named_by_two_parents_is_corruption_not_a_hang() {
    let dev = broken_tree(root, |root, _| {
        let second = node::child(&*root, 1);
        node::set_child(root, 0, second);
    });
    let errors = reads(dev);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("referenced by two parents")),
        "{errors:?}"
    );
}

#[test]
fn a_node_that_is_its_own_child_is_corruption_not_a_hang() {
    let dev = broken_tree(root, |root, pid| node::set_child(root, 0, pid));
    let errors = reads(dev);
    assert!(!errors.is_empty(), "reads through the loop fail");
}

#[test]
fn a_leaf_fence_below_its_parents_separator_is_corruption_not_an_endless_scan() {
    // The first leaf's upper fence cut to its first byte: a scan that goes on past it comes
    // back to the same leaf.
    let first_leaf = |page: &[u8]| {
        node::is_leaf(page)
            && node::lower_fence(page).is_none()
            && node::upper_fence(page).is_some()
    };
    let dev = broken_tree(first_leaf, |leaf, _| page::put_u16(leaf, 44, 1));
    let errors = reads(dev);
    assert!(
        errors.iter().any(|e| e.contains("not above it")),
        "{errors:?}"
    );
}

#[test]
fn a_huge_next_pid_in_the_header_allocates_nothing_for_it() {
    // `next_pid` (header offset 72) set to 2^39 in both header copies: the open used to size
    // the translation table by it (4 TiB); now by the pids the table names.
    let dev = broken_tree(root, |_, _| {});
    let mut buf = vec![0u8; 4096];
    for slot in 0..2 {
        dev.read(slot, &mut buf).unwrap_or_else(|e| panic!("{e}"));
        page::put_u64(&mut buf, 72, 1 << 39);
        page::seal(&mut buf);
        dev.write(slot, &buf).unwrap_or_else(|e| panic!("{e}"));
    }
    let errors = reads(dev);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn a_huge_slot_count_in_the_header_lists_no_free_slots_for_it() {
    // The slot count (header offset 112) set to 2^40 in both copies: the open used to collect
    // every slot up to it into the free set.
    let dev = broken_tree(root, |_, _| {});
    let mut buf = vec![0u8; 4096];
    for slot in 0..2 {
        dev.read(slot, &mut buf).unwrap_or_else(|e| panic!("{e}"));
        page::put_u64(&mut buf, 112, 1 << 40);
        page::seal(&mut buf);
        dev.write(slot, &buf).unwrap_or_else(|e| panic!("{e}"));
    }
    let errors = reads(dev);
    assert!(errors.is_empty(), "{errors:?}");
}
