//! Entry points for the fuzz targets in `fuzz/` (not part of the API; hidden from the docs).
//!
//! Exists only because the decoder behind it is private: the level-index file (`db/level_index.rs`,
//! docs/format/level-index.md). Every other decoder the fuzz targets reach is already public.

use crate::db::level_index::LevelIndex;

/// Decodes a level-index file, probes its model with `probes`, and returns the file re-encoded.
///
/// Errors: the corruption detail the decoder gives.
pub fn decode_level_index(bytes: &[u8], probes: &[&[u8]]) -> Result<Vec<u8>, String> {
    let level = LevelIndex::decode(bytes, 1)?;
    for key in probes {
        let _ = level.locate(key);
    }
    Ok(level.encode())
}
