//! The value log (lidb-kv vlog.rs): the record decoder, a full scan, and the tail check in every
//! recovery mode, over any bytes stored as `000001.vlog`.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lidb_kv::vlog::{VlogReader, VlogWriter, decode_record, vlog_path};
use lidb_storage::RecoveryMode;
use lidb_storage::mem::MemStorage;
use lidb_storage::{ReadMode, Storage};

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_vlog(b));
    if let Ok((_, _, len)) = decode_record(bytes.get(32..).unwrap_or_default()) {
        assert!(len <= bytes.len() as u64);
    }
    let storage = Arc::new(MemStorage::new());
    let dir = Path::new("/db");
    storage.create_dir_all(dir).expect("dir");
    let mut f = storage.create(&vlog_path(dir, 1)).expect("create");
    f.append(&bytes).expect("append");
    drop(f);
    for mode in [
        RecoveryMode::Absolute,
        RecoveryMode::TolerateTornTail,
        RecoveryMode::PointInTime,
    ] {
        if let Ok(Some(cut)) = VlogWriter::check_tail(storage.as_ref(), dir, 1, mode) {
            let _ = cut;
        }
    }
    let reader = VlogReader::new(storage.clone(), dir.to_path_buf(), ReadMode::Buffered);
    if let Ok(scan) = reader.scan(1) {
        for item in scan {
            if item.is_err() {
                break;
            }
        }
    }
});
