//! The KVSTATE file (lidb-kv manifest.rs): never panics; what decodes re-encodes to an equal state.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_kv::manifest::{decode_state, encode_state};

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_trailer(b));
    if let Ok(state) = decode_state(&bytes) {
        let again = decode_state(&encode_state(&state)).expect("re-encoded state decodes");
        assert_eq!(again, state);
    }
});
