//! LearnedStore's pages (lidb-btree page.rs, node.rs, pagefile.rs; docs/format/btree-pagefile.md
//! and btree-node.md), chosen by bit 1 of the first byte:
//! - 0: one 4096-byte page (the input, zero-padded or cut) as read from the device:
//!   `page::verify` (checksum, version, kind, id), then, for a node, the readers the tree uses on
//!   a page it loaded (count, entries, fences, the per-leaf model, `lower_bound`, `child_index`,
//!   `covers`) with keys taken from the page itself;
//! - 1: a whole page file (up to 32 slots of 4096 bytes, each resealed for half of the inputs) on
//!   a `MemDevice`, opened with `BTree::with_device` (both header copies, the translation table,
//!   the extra blob), then gets and a scan that walk its nodes.
//!
//! Errors are allowed, panics not (a node whose bytes pass the checksum yet lie, say keys out
//! of order, may give wrong answers: the checksum is what stands for integrity).
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lidb_btree::page::{self, PageKind};
use lidb_btree::{BTree, MemDevice, Options, PageDevice, node};

const PAGE: usize = 4096;
const MAX_SLOTS: usize = 32;
const KINDS: [PageKind; 5] = [
    PageKind::Leaf,
    PageKind::Inner,
    PageKind::FileHeader,
    PageKind::Table,
    PageKind::Blob,
];

fn one_page(data: &[u8]) {
    let mut bytes = lidb_fuzz::prepare(data, |_| {});
    bytes.resize(PAGE, 0);
    if lidb_fuzz::wants_seal(data) {
        lidb_fuzz::seal_btree_pages(&mut bytes, PAGE);
    }
    let id = page::id(&bytes);
    let Ok(kind) = page::verify(&bytes, Path::new("fuzz"), 7, id, &KINDS) else {
        return;
    };
    if !matches!(kind, PageKind::Leaf | PageKind::Inner) {
        return;
    }
    let n = node::count(bytes.as_slice());
    let entries = node::entries(&bytes);
    assert_eq!(entries.len(), n, "entries disagree with the count");
    let lower = node::lower_fence(bytes.as_slice());
    let upper = node::upper_fence(bytes.as_slice());
    let _ = node::model(bytes.as_slice());
    let _ = node::level(bytes.as_slice());
    let _ = node::free_space(&bytes);
    let _ = node::used_space(&bytes);
    let mut probes: Vec<Vec<u8>> = vec![Vec::new(), vec![0xff; 12]];
    probes.extend(lower.iter().cloned());
    probes.extend(upper.iter().cloned());
    probes.extend(entries.iter().take(8).map(|(k, _)| k.clone()));
    for key in &probes {
        let _ = node::covers(bytes.as_slice(), key);
        let (pos, _) = node::lower_bound(bytes.as_slice(), key);
        assert!(pos <= n, "lower_bound past the count");
        if kind == PageKind::Inner {
            let i = node::child_index(bytes.as_slice(), key);
            assert!(i <= n, "child_index past the rightmost child");
            let _ = node::child(bytes.as_slice(), i);
        }
    }
}

fn whole_file(data: &[u8]) {
    let mut bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_btree_pages(b, PAGE));
    bytes.truncate(PAGE * MAX_SLOTS);
    let Ok(dev) = MemDevice::new(PAGE) else {
        return;
    };
    for (slot, chunk) in bytes.chunks(PAGE).enumerate() {
        let mut page = chunk.to_vec();
        page.resize(PAGE, 0);
        dev.write(slot as u64, &page).expect("write a slot");
    }
    let opts = Options {
        page_size: PAGE,
        pool_bytes: (PAGE * 32) as u64,
        direct_io: false,
        provider_thread: false,
        ..Options::default()
    };
    let Ok(tree) = BTree::with_device(Arc::new(dev), &opts) else {
        return;
    };
    for key in [
        &b""[..],
        b"key000000",
        b"key000350",
        b"key002093",
        b"\xff\xff",
    ] {
        let _ = tree.get(key);
    }
    let _ = tree.scan(b"key0001", Some(b"key0005"), 64);
    let _ = tree.scan(b"", None, 256);
    let _ = tree.close();
}

fuzz_target!(|data: &[u8]| {
    let selector = data.first().copied().unwrap_or(0);
    if (selector >> 1) & 1 == 0 {
        one_page(data);
    } else {
        whole_file(data);
    }
});
