//! The manifest (lidb-lsm manifest.rs): the version-edit decoder on raw bytes (what decodes
//! re-encodes to an equal edit), and `Manifest::recover` over a whole manifest file.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lidb_lsm::manifest::{Manifest, VersionEdit, manifest_path};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;

fuzz_target!(|data: &[u8]| {
    if let Ok(edit) = VersionEdit::decode(data) {
        let again = VersionEdit::decode(&edit.encode()).expect("re-encoded edit decodes");
        assert_eq!(again, edit);
    }
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_log(b));
    let storage = MemStorage::new();
    let dir = Path::new("/db");
    storage.create_dir_all(dir).expect("dir");
    let mut f = storage.create(&manifest_path(dir, 1)).expect("create");
    f.append(&bytes).expect("append");
    drop(f);
    let mut c = storage.create(&dir.join("CURRENT")).expect("create");
    c.append(b"MANIFEST-000001\n").expect("append");
    drop(c);
    let _ = Manifest::recover(&storage, dir);
});
