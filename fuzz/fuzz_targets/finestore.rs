//! FineStore's files (lidb-fine store/, docs/format/finestore-log.md and
//! finestore-checkpoint.md), through `FineStore::open_with_storage` over MemStorage: a real store
//! (FINESTATE naming checkpoint 1 and log 2) is made once; each input replaces its log (record
//! decoding and the tail classification over the whole file), its checkpoint or its FINESTATE,
//! chosen by bits 1-2 of the first byte (0 and 3: the log); bits 3-4 pick the recovery mode.
//! Opening never panics. An open that succeeds serves a scan in strictly increasing key order
//! whose entries `get` agrees with, takes a write (unless its seqs are exhausted), and reopens (in the same mode) with that write.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use lidb_fine::{FineStore, FineStoreOptions};
use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::tail::RecoveryMode;

const DIR: &str = "/fine";
const STATE: &str = "FINESTATE";
const CHECKPOINT: &str = "checkpoint-000001";
const LOG: &str = "log-000002";

/// (FINESTATE, checkpoint-000001, log-000002) of a real store.
fn template() -> &'static [Vec<u8>; 3] {
    static T: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    T.get_or_init(|| {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let dir = Path::new(DIR);
        let store = FineStore::open_with_storage(storage.clone(), dir, FineStoreOptions::default())
            .expect("open");
        for i in 0..40u32 {
            store
                .put(format!("key{i:04}").as_bytes(), &i.to_le_bytes())
                .expect("put");
        }
        store.delete(b"key0007").expect("delete");
        store.checkpoint().expect("checkpoint");
        for i in 30..50u32 {
            store
                .put(format!("key{i:04}").as_bytes(), b"after")
                .expect("put");
        }
        store.delete(b"key0001").expect("delete");
        store.close().expect("close");
        [STATE, CHECKPOINT, LOG].map(|name| storage.read_all(&dir.join(name)).expect("read"))
    })
}

fuzz_target!(|data: &[u8]| {
    let selector = data.first().copied().unwrap_or(0);
    let mut files = template().clone();
    let [state, checkpoint, log] = &mut files;
    match (selector >> 1) & 3 {
        1 => *checkpoint = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_fine_checkpoint(b)),
        2 => *state = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_fine_state(b)),
        _ => *log = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_fine_log(b)),
    }
    let recovery_mode = match (selector >> 3) & 3 {
        1 => RecoveryMode::PointInTime,
        2 => RecoveryMode::Absolute,
        _ => RecoveryMode::TolerateTornTail,
    };
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let dir = Path::new(DIR);
    storage.create_dir_all(dir).expect("dir");
    for (name, bytes) in [STATE, CHECKPOINT, LOG].iter().zip(&files) {
        let mut f = storage.create(&dir.join(name)).expect("create");
        f.append(bytes).expect("append");
        f.sync().expect("sync");
    }
    let opts = FineStoreOptions {
        recovery_mode,
        ..FineStoreOptions::default()
    };
    let Ok(store) = FineStore::open_with_storage(storage.clone(), dir, opts.clone()) else {
        return;
    };
    let all = store.scan(b"", None, usize::MAX);
    assert!(
        all.windows(2).all(|w| w[0].0 < w[1].0),
        "scan out of key order"
    );
    for (k, v) in all.iter().take(64) {
        assert_eq!(store.get(k).as_ref(), Some(v), "get disagrees with scan");
    }
    match store.put(b"fuzz", b"written after open") {
        Ok(()) => {}
        // A checkpoint or record claiming the last seq leaves none for a write.
        Err(Error::Closed(why)) if why.contains("exhausted") => return,
        Err(e) => panic!("put after open: {e}"),
    }
    store.close().expect("close");
    let again = FineStore::open_with_storage(storage, dir, opts).expect("reopen after a write");
    assert_eq!(
        again.get(b"fuzz").as_deref(),
        Some(&b"written after open"[..]),
        "the write after open is lost"
    );
});
