//! Regressions of the `btree_wal` fuzz target's recovery half (fuzz/fuzz_targets/btree_wal.rs:
//! `BTreeStore::open` over fuzzed log bytes and a fresh tree on the memory device). Each test
//! is one finding: the log bytes, made by hand from docs/format/btree-wal.md, and what the open
//! must say.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;

use lidb_btree::{BTree, BTreeStore, Error, Options, TreeTarget, WalOptions};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;

const DIR: &str = "/btree";

/// One framed put record: crc32c(len bytes ++ payload), len, payload.
fn put_record(lsn: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut payload = vec![1u8];
    payload.extend_from_slice(&lsn.to_le_bytes());
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key);
    payload.extend_from_slice(value);
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&len), &payload);
    let mut out = crc.to_le_bytes().to_vec();
    out.extend_from_slice(&len);
    out.extend_from_slice(&payload);
    out
}

fn tree() -> BTree {
    let opts = Options {
        pool_bytes: 64 * 4096,
        direct_io: false,
        provider_thread: false,
        ..Options::default()
    };
    BTree::in_memory(&opts).unwrap()
}

fn open_over(records: &[Vec<u8>]) -> (Arc<MemStorage>, lidb_btree::Result<BTreeStore<TreeTarget>>) {
    let mem = Arc::new(MemStorage::new());
    let dir = Path::new(DIR);
    mem.create_dir_all(dir).unwrap();
    let mut f = mem.create(&dir.join("wal-000002.log")).unwrap();
    let mut bytes = b"LIDBLOG\x01".to_vec();
    for r in records {
        bytes.extend_from_slice(r);
    }
    f.append(&bytes).unwrap();
    f.sync().unwrap();
    let wal = WalOptions {
        checkpoint_log_bytes: 0,
        checkpoint_on_close: false,
        ..WalOptions::default()
    };
    let storage: Arc<dyn Storage> = mem.clone();
    let store = BTreeStore::open(storage, dir, TreeTarget::new(tree()), wal);
    (mem, store)
}

/// A record whose key the tree refuses (over its 256-byte limit at 4 KiB pages; the log allows
/// far more): the replay used to fail with `TooLarge` after applying the records before it, an
/// error that says nothing of the log. Now it is `Corruption` naming the log and the record's
/// offset, found before any write is applied.
#[test]
fn a_logged_key_the_tree_refuses_is_corruption_naming_the_record() {
    let records = [
        put_record(1, b"fine", b"v"),
        put_record(2, &[b'k'; 300], b"v"),
    ];
    let (_, store) = open_over(&records);
    let err = store.err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, Error::Corruption { .. }), "{text}");
    let second = 8 + records.first().map_or(0, Vec::len);
    assert!(
        text.contains("wal-000002.log") && text.contains(&format!("offset {second}")),
        "{text}"
    );
}

/// The same key at the limit opens and is replayed.
#[test]
fn a_logged_key_at_the_limit_is_replayed() {
    let records = [put_record(1, &[b'k'; 256], b"v")];
    let (_, store) = open_over(&records);
    let store = store.unwrap();
    assert_eq!(store.get(&[b'k'; 256]).unwrap(), Some(b"v".to_vec()));
    assert_eq!(store.recovery_report().records_replayed, 1);
}
