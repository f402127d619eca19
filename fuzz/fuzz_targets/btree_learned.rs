//! The learned path's checkpoint blob (lidb-btree learned/blob.rs, docs/format/btree-learned.md)
//! through `lidb_btree::fuzzing::decode_learned_blob`: header, key prefix, slots (page ids and
//! upper fences, strictly increasing) and the RadixSpline model (a lidb-index frame, resealed
//! with the blob's trailer). Never a panic; a blob that decodes re-encodes to a blob that decodes
//! to the same bytes again, and a slot the model finds is the one the fences' binary search gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_btree::fuzzing::decode_learned_blob;

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_trailer(b));
    let tail = bytes
        .get(bytes.len().saturating_sub(12)..)
        .unwrap_or_default();
    let middle = bytes.get(bytes.len() / 2..).unwrap_or_default();
    let middle = middle.get(..middle.len().min(10)).unwrap_or_default();
    let probes: [&[u8]; 6] = [b"", b"\0", b"key000350", b"zzzz", tail, middle];
    let Ok(first) = decode_learned_blob(&bytes, &probes) else {
        return;
    };
    for (found, slot) in &first.finds {
        if let Some(found) = found {
            assert_eq!(found, slot, "the model's slot is not the fences' slot");
        }
        assert!(*slot < first.slots.max(1), "slot past the table");
    }
    let again = decode_learned_blob(&first.encoded, &probes).expect("a re-encoded blob decodes");
    assert_eq!(again, first, "re-encoding is not stable");
});
