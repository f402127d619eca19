//! The bytes of docs/format/btree-wal.md, built here by hand from the spec (not by the crate's
//! encoders): what the store writes must be these bytes, and a log and `WALSTATE` made this way
//! must open. A change to the format fails here before it strands a store on disk.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::Arc;

use common::{dir, log_path, open, synced};
use lidb_btree::WalOptions;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;

/// One framed record per the spec: crc32c(len bytes ++ payload), len, payload.
fn record(op: u8, lsn: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut payload = vec![op];
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

fn log_of(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"LIDBLOG\x01".to_vec();
    for r in records {
        out.extend_from_slice(r);
    }
    out
}

#[test]
fn the_store_writes_the_bytes_of_the_spec() {
    let mem = Arc::new(MemStorage::new());
    let opts = WalOptions {
        checkpoint_on_close: false,
        ..synced()
    };
    let store = open(mem.clone(), opts).unwrap();
    store.put(b"key", b"value").unwrap();
    assert!(store.delete(b"key").unwrap());
    store.close().unwrap();
    let want = log_of(&[record(1, 1, b"key", b"value"), record(2, 2, b"key", b"")]);
    assert_eq!(mem.read_all(&log_path(1)).unwrap(), want);

    let mut state = b"BTWALST\x01".to_vec();
    state.extend_from_slice(&1u64.to_le_bytes());
    state.extend_from_slice(&(want.len() as u64).to_le_bytes());
    let crc = crc32c::crc32c(&state);
    state.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(mem.read_all(&dir().join("WALSTATE")).unwrap(), state);
}

#[test]
fn a_log_and_state_made_from_the_spec_open() {
    let mem = Arc::new(MemStorage::new());
    mem.create_dir_all(dir()).unwrap();
    let log = log_of(&[
        record(1, 1, b"a", b"1"),
        record(1, 2, b"b", b"2"),
        record(2, 3, b"a", b""),
        record(1, 4, b"c", b""),
    ]);
    let mut state = b"BTWALST\x01".to_vec();
    state.extend_from_slice(&7u64.to_le_bytes());
    state.extend_from_slice(&(log.len() as u64).to_le_bytes());
    let crc = crc32c::crc32c(&state);
    state.extend_from_slice(&crc.to_le_bytes());
    for (path, bytes) in [(log_path(7), &log), (dir().join("WALSTATE"), &state)] {
        let mut f = mem.create(&path).unwrap();
        f.append(bytes).unwrap();
        f.sync().unwrap();
    }
    mem.sync_dir(dir()).unwrap();
    let store = open(mem.clone(), synced()).unwrap();
    let report = store.recovery_report();
    assert!(
        report.closed_cleanly && report.records_replayed == 4,
        "{report:?}"
    );
    let all = store.scan(&[], None, 10).unwrap();
    assert_eq!(
        all,
        vec![(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), Vec::new())]
    );
    assert_eq!(store.next_lsn(), 5);
}
