//! The serialized learned indexes (lidb-index, docs/format/index.md), every family: decoding any
//! bytes gives Ok or Err; a decoded index answers searches without panicking and re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_index_frames(b));
    let Ok(index) = lidb_index::decode(&bytes) else {
        return;
    };
    let encoded = index.encode();
    let again = lidb_index::decode(&encoded).expect("re-encoded index decodes");
    assert_eq!(again.encode(), encoded);
    let _ = index.stats();
    for q in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        let _ = index.search(q);
    }
    for chunk in data.chunks_exact(8).take(64) {
        let q = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let _ = index.search(q);
    }
});
