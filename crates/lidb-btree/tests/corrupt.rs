//! Corrupt pages: a flipped byte in a leaf's slot makes the read that reaches it fail with
//! `Corruption` naming the file, slot and page, never a panic; with page verification turned
//! off on purpose the same flip returns a wrong value, which shows the check matters.

use std::sync::Arc;

use lidb_btree::{BTree, Error, MemDevice, Options, PageDevice};

fn opts() -> Options {
    Options {
        page_size: 4096,
        pool_bytes: 32 * 4096,
        cooling_share: 0.1,
        direct_io: false,
        provider_thread: false,
    }
}

/// A durable tree of 5000 keys, each leaf written once: (device, a live leaf's slot, a key in
/// it and its value offset in the slot).
fn build() -> (MemDevice, u64, Vec<u8>, usize) {
    let dev = Arc::new(MemDevice::new(4096).unwrap_or_else(|e| panic!("{e}")));
    let tree = BTree::with_device(dev.clone(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let pairs = (0..5000u64).map(|i| (i.to_be_bytes().to_vec(), vec![b'v'; 16]));
    tree.bulk_load(pairs, 0.9).unwrap_or_else(|e| panic!("{e}"));
    tree.checkpoint(1, &[]).unwrap_or_else(|e| panic!("{e}"));
    drop(tree);
    let dev = dev.snapshot();
    let mut page = vec![0u8; 4096];
    for slot in 2..dev.slot_count() {
        dev.read(slot, &mut page).unwrap_or_else(|e| panic!("{e}"));
        let kind = page.get(6).copied();
        let pid = u64::from_le_bytes(
            page.get(8..16)
                .and_then(|b| b.try_into().ok())
                .unwrap_or([0; 8]),
        );
        let count = u16::from_le_bytes(
            page.get(32..34)
                .and_then(|b| b.try_into().ok())
                .unwrap_or([0; 2]),
        );
        if kind == Some(1) && pid != 0 && count > 0 {
            let field = |at: usize, n: usize| -> usize {
                page.get(at..at + n).map_or(0, |b| {
                    b.iter().rev().fold(0usize, |a, x| a << 8 | *x as usize)
                })
            };
            let (off, key_len) = (field(96 + 8, 4), field(96 + 12, 2));
            let key = page.get(off..off + key_len).unwrap_or_default().to_vec();
            return (dev, slot, key, off + key_len);
        }
    }
    panic!("no leaf found");
}

#[test]
fn a_flipped_byte_is_named_corruption() {
    let (dev, slot, key, value_at) = build();
    dev.corrupt(slot, value_at, 0x01);
    let tree = BTree::with_device(Arc::new(dev), &opts()).unwrap_or_else(|e| panic!("{e}"));
    match tree.get(&key) {
        Err(Error::Corruption { detail, .. }) => {
            assert!(detail.contains(&format!("slot {slot}")), "{detail}");
            assert!(
                detail.contains("page ") && detail.contains("checksum"),
                "{detail}"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // Other leaves still read.
    assert!(tree.get(&4999u64.to_be_bytes()).is_ok() || key == 4999u64.to_be_bytes());
}

#[test]
fn without_the_checksum_the_flip_goes_unnoticed() {
    let (dev, slot, key, value_at) = build();
    dev.corrupt(slot, value_at, 0x01);
    let tree = BTree::with_device(Arc::new(dev), &opts()).unwrap_or_else(|e| panic!("{e}"));
    tree.set_verify_pages_for_test(false);
    let got = tree.get(&key).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(
        got,
        Some(vec![b'v'; 16]),
        "the flipped value is returned as if it were right"
    );
}

#[test]
fn a_corrupt_header_copy_falls_back_to_the_other() {
    let (dev, _, key, _) = build();
    // Checkpoint seq 2 (the bulk load's) is in slot 0; break it: seq 1 (empty tree) remains.
    dev.corrupt(0, 100, 0xff);
    let tree = BTree::with_device(Arc::new(dev), &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tree.checkpoint_info().seq, 1);
    assert_eq!(tree.get(&key).unwrap_or_else(|e| panic!("{e}")), None);
}

#[test]
fn both_header_copies_corrupt_is_an_error_not_a_panic() {
    let (dev, _, _, _) = build();
    dev.corrupt(0, 100, 0xff);
    dev.corrupt(1, 100, 0xff);
    match BTree::with_device(Arc::new(dev), &opts()) {
        Err(Error::Corruption { detail, .. }) => {
            assert!(detail.contains("no valid header"), "{detail}")
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn garbage_files_never_panic() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (good, _, _, _) = build();
    for round in 0..200u64 {
        // A real file with random damage: random bytes, whole slots of noise, or a swapped slot.
        let dev = good.snapshot();
        for _ in 0..(1 + next() % 8) {
            let slot = next() % dev.slot_count();
            match next() % 3 {
                0 => dev.corrupt(slot, (next() % 4096) as usize, (next() % 255 + 1) as u8),
                1 => {
                    for off in (0..4096).step_by(7) {
                        dev.corrupt(slot, off, next() as u8);
                    }
                }
                _ => {
                    let mut page = vec![0u8; 4096];
                    let other = next() % dev.slot_count();
                    if dev.read(other, &mut page).is_ok() {
                        dev.write(slot, &page).ok();
                    }
                }
            }
        }
        let Ok(tree) = BTree::with_device(Arc::new(dev), &opts()) else {
            continue;
        };
        // Reads end in values or errors, never a panic or a hang.
        for i in (0..5000u64).step_by(97) {
            let _ = tree.get(&i.to_be_bytes());
        }
        let _ = tree.scan(b"", None, 10_000);
        let _ = tree.leaf_parents();
        assert!(round < 200);
    }
}
