//! Entry points for the fuzz targets in `fuzz/` (not part of the API; hidden from the docs).
//!
//! Exists only because the decoder behind it is private: the learned path's checkpoint blob
//! (`learned/blob.rs`, docs/format/btree-learned.md). The other decoders the fuzz targets reach
//! (WAL records, `WALSTATE`, page headers, nodes, the page file) are already public.
//!
//! Pure functions; any thread.

use crate::learned::blob;
use crate::learned::table::SlotFind;

/// What a blob decoded into, as the fuzz target checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedBlob {
    /// The table encoded again.
    pub encoded: Vec<u8>,
    /// Slots of the table.
    pub slots: u64,
    /// For each probe, the slot the model's window and the fences give (`None`: a miss), and
    /// the slot of the fences' binary search.
    pub finds: Vec<(Option<u64>, u64)>,
}

/// Decodes a learned-path blob, finds `probes` in its table, and returns the table re-encoded.
///
/// Errors: the detail the decoder gives.
pub fn decode_learned_blob(bytes: &[u8], probes: &[&[u8]]) -> Result<DecodedBlob, String> {
    let table = blob::decode(bytes)?;
    let finds = probes
        .iter()
        .map(|key| {
            let found = match table.find(key) {
                SlotFind::Slot(i) => Some(i as u64),
                SlotFind::Miss => None,
            };
            (found, table.slot_of(key) as u64)
        })
        .collect();
    Ok(DecodedBlob {
        encoded: blob::encode(&table),
        slots: table.leaf_refs().len() as u64,
        finds,
    })
}
