//! The level-index file (lidb-lsm db/level_index.rs, docs/format/level-index.md): any bytes give
//! Ok or Err; a decoded file answers lookups and re-encodes to bytes that decode equally.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_lsm::fuzzing::decode_level_index;

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_trailer(b));
    let probes: Vec<&[u8]> = vec![
        b"",
        b"a",
        b"key000100",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ];
    if let Ok(encoded) = decode_level_index(&bytes, &probes) {
        let again = decode_level_index(&encoded, &probes).expect("re-encoded level index decodes");
        assert_eq!(again, encoded);
    }
});
