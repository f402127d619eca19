//! The record log reader shared by the WAL and the manifest (lidb-lsm log.rs, tail.rs): any bytes
//! give Ok or Err, the intact records are a prefix, and a bad tail starts where they end.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lidb_storage::RecoveryMode;
use lidb_storage::Storage;
use lidb_storage::log::{parse_log, read_log};
use lidb_storage::mem::MemStorage;

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_log(b));
    let parsed = parse_log(&bytes);
    if let Ok(log) = &parsed {
        assert!(log.valid_len <= bytes.len() as u64);
        let framed: u64 = log.records.iter().map(|r| 8 + r.len() as u64).sum();
        if !log.records.is_empty() {
            assert_eq!(log.valid_len, 8 + framed);
        }
        match &log.bad_tail {
            None => assert_eq!(log.valid_len, bytes.len() as u64),
            Some(t) => {
                assert_eq!(t.offset, log.valid_len);
                for mode in [
                    RecoveryMode::Absolute,
                    RecoveryMode::TolerateTornTail,
                    RecoveryMode::PointInTime,
                ] {
                    let _ = mode.allows(t.kind);
                }
            }
        }
    }
    // The same bytes through storage give the same answer.
    let storage = MemStorage::new();
    storage.create_dir_all(Path::new("/db")).expect("dir");
    let path = Path::new("/db/000001.log");
    let mut f = storage.create(path).expect("create");
    f.append(&bytes).expect("append");
    drop(f);
    let read = read_log(&storage, path);
    assert_eq!(read.ok(), parsed.ok());
});
