//! The write-batch decoder (lidb-lsm batch.rs): never panics; what decodes re-encodes to the same
//! bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_lsm::EntryKind;
use lidb_lsm::batch::{WriteBatch, decode};

fuzz_target!(|data: &[u8]| {
    if let Ok((first_seq, ops)) = decode(data) {
        let mut batch = WriteBatch::new();
        for op in &ops {
            match op.kind {
                EntryKind::Put => batch.put(&op.key, &op.value),
                EntryKind::Delete => batch.delete(&op.key),
            }
        }
        let again = decode(&batch.encode(first_seq)).expect("re-encoded batch decodes");
        // A delete re-encodes without a value (the format does not forbid one).
        let expected: Vec<_> = ops
            .into_iter()
            .map(|mut op| {
                if op.kind == EntryKind::Delete {
                    op.value.clear();
                }
                op
            })
            .collect();
        assert_eq!(again, (first_seq, expected));
    }
});
