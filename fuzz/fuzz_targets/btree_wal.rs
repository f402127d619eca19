//! LearnedStore's write-ahead log (lidb-btree wal/, docs/format/btree-wal.md), chosen by bits 1-2
//! of the first byte: 0, a record payload (`wal::record::decode`); 1, `WALSTATE`
//! (`wal::files::decode_state`); 2 and 3, a whole log file read through `wal::read::read` over
//! MemStorage (lidb-lsm's record framing and tail classification, then every intact record
//! decoded). Never a panic; a payload or `WALSTATE` that decodes re-encodes to the same bytes
//! (the formats have one encoding per value), and a log's records sit in file order inside its
//! valid length and re-encode to payloads that decode to them again.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use lidb_btree::wal::files::{decode_state, encode_state, log_name};
use lidb_btree::wal::read::read;
use lidb_btree::wal::record::{self, WalOp};
use lidb_lsm::storage::Storage;
use lidb_lsm::storage::mem::MemStorage;

const DIR: &str = "/btree";
const LOG_ID: u64 = 2;

fn reencode(op: &WalOp) -> Vec<u8> {
    let mut payload = record::encode(&op.key, op.value.as_deref());
    record::set_lsn(&mut payload, op.lsn);
    payload
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
            let Ok(log) = read(storage.as_ref(), dir, LOG_ID) else {
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
        }
    }
});
