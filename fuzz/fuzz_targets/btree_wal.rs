//! LearnedStore's write-ahead log (lidb-btree wal/, docs/format/btree-wal.md), chosen by bits 1-2
//! of the first byte: 0, a record payload (`wal::record::decode`); 1, `WALSTATE`
//! (`wal::files::decode_state`); 2 and 3, a whole log file read through `wal::read::read` over
//! MemStorage (lidb-lsm's record framing and tail classification, then every intact record
//! decoded), then the full recovery: `BTreeStore::open` over that log and a fresh tree on the
//! memory device, in the recovery mode bits 3-4 pick. Never a panic; a payload or `WALSTATE`
//! that decodes re-encodes to the same bytes (the formats have one encoding per value), and a
//! log's records sit in file order inside its valid length and re-encode to payloads that decode
//! to them again. An open fails only with `Corruption` (and only where the read did, or found
//! a record the tree refuses or LSNs out of order); an open that succeeds replayed every record
//! read, holds exactly what they write in order, and takes a write that survives a reopen.
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lidb_btree::wal::files::{decode_state, encode_state, log_name};
use lidb_btree::wal::read::read;
use lidb_btree::wal::record::{self, WalOp};
use lidb_btree::{BTree, BTreeStore, Error, Options, TreeTarget, WalOptions};
use lidb_storage::Storage;
use lidb_storage::mem::MemStorage;
use lidb_storage::tail::RecoveryMode;

const DIR: &str = "/btree";
const LOG_ID: u64 = 2;

fn reencode(op: &WalOp) -> Vec<u8> {
    let mut payload = record::encode(&op.key, op.value.as_deref());
    record::set_lsn(&mut payload, op.lsn);
    payload
}

/// A store over the log in `dir` on `storage` and a fresh tree on the memory device.
fn open(
    storage: &Arc<dyn Storage>,
    mode: RecoveryMode,
) -> lidb_btree::Result<BTreeStore<TreeTarget>> {
    let opts = Options {
        pool_bytes: 64 * 4096,
        direct_io: false,
        provider_thread: false,
        ..Options::default()
    };
    let tree = BTree::in_memory(&opts).expect("a tree on the memory device");
    let wal = WalOptions {
        sync: false,
        recovery_mode: mode,
        checkpoint_log_bytes: 0,
        checkpoint_on_close: false,
    };
    BTreeStore::open(storage.clone(), Path::new(DIR), TreeTarget::new(tree), wal)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn contents(store: &BTreeStore<TreeTarget>) -> Model {
    let all = store.scan(b"", None, usize::MAX).expect("scan");
    all.into_iter().collect()
}

/// The full recovery over the log `read` gave (`None`: the read failed).
fn recover(storage: &Arc<dyn Storage>, mode: RecoveryMode, ops: Option<&[(u64, WalOp)]>) {
    let store = match open(storage, mode) {
        Ok(s) => s,
        Err(Error::Corruption { .. }) => return,
        Err(e) => panic!("recovery failed with an error other than Corruption: {e}"),
    };
    let ops = ops.expect("the open succeeded on a log the reader refused");
    assert_eq!(
        store.recovery_report().records_replayed,
        ops.len() as u64,
        "records replayed"
    );
    let mut model = Model::new();
    for (_, op) in ops {
        match &op.value {
            Some(v) => model.insert(op.key.clone(), v.clone()),
            None => model.remove(&op.key),
        };
    }
    assert_eq!(contents(&store), model, "the replayed tree");
    // A write after the recovery (appended after the kept records) survives a reopen.
    store
        .put(b"after-recovery", b"v")
        .expect("a write after recovery");
    model.insert(b"after-recovery".to_vec(), b"v".to_vec());
    store.close().expect("close");
    let again = open(storage, mode).expect("the reopen of a cleanly closed store");
    assert_eq!(contents(&again), model, "after the reopen");
    drop(again);
}

fuzz_target!(|data: &[u8]| {
    let selector = data.first().copied().unwrap_or(0);
    match (selector >> 1) & 3 {
        0 => {
            let payload = data.get(1..).unwrap_or_default();
            if let Ok(op) = record::decode(payload) {
                assert_eq!(
                    reencode(&op),
                    payload,
                    "a record does not re-encode to itself"
                );
            }
        }
        1 => {
            let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_btree_wal_state(b));
            if let Ok(state) = decode_state(&bytes) {
                assert_eq!(
                    encode_state(state),
                    bytes,
                    "WALSTATE does not re-encode to itself"
                );
            }
        }
        _ => {
            let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_log(b));
            let storage = MemStorage::new();
            let dir = Path::new(DIR);
            storage.create_dir_all(dir).expect("dir");
            let mut f = storage.create(&dir.join(log_name(LOG_ID))).expect("create");
            f.append(&bytes).expect("append");
            f.sync().expect("sync");
            let storage: Arc<dyn Storage> = Arc::new(storage);
            let mode = match (selector >> 3) & 3 {
                1 => RecoveryMode::PointInTime,
                2 => RecoveryMode::Absolute,
                _ => RecoveryMode::TolerateTornTail,
            };
            let Ok(log) = read(storage.as_ref(), dir, LOG_ID) else {
                recover(&storage, mode, None);
                return;
            };
            assert!(
                log.valid_len <= bytes.len() as u64,
                "valid length past the file"
            );
            assert!(
                log.ops.windows(2).all(|w| w[0].0 < w[1].0),
                "records out of file order"
            );
            for (offset, op) in &log.ops {
                assert!(*offset < log.valid_len, "a record past the valid length");
                assert_eq!(record::decode(&reencode(op)).as_ref(), Ok(op), "round trip");
            }
            recover(&storage, mode, Some(&log.ops));
        }
    }
});
