//! The KVSTATE file (lidb-kv manifest.rs): never panics; what decodes re-encodes to an equal state
//! (a version-1 file has no engine field and is rewritten as version 2 naming learnedkv, the only
//! engine version 1 knew).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lidb_kv::manifest::{ENGINE_LEARNED, decode_state, encode_state};

fuzz_target!(|data: &[u8]| {
    let bytes = lidb_fuzz::prepare(data, |b| lidb_fuzz::seal_trailer(b));
    if let Ok(mut state) = decode_state(&bytes) {
        let again = decode_state(&encode_state(&state)).expect("re-encoded state decodes");
        state.engine = Some(state.engine.unwrap_or(ENGINE_LEARNED));
        assert_eq!(again, state);
    }
});
