//! The mapped-keys block (format version 2, docs/format/sstable.md) and the in-memory slot
//! indexes rebuilt from it at open: the retained key images of a clustered table ("mapped keys
//! retained", the LSM study's Figure 7 (C), (F), (I)) or a data-unclustered index of
//! lidb-updatable that maps each key to its exact slot (its Figure 5, right).
//!
//! Block payload, in slot order, one record per entry:
//! - image kinds (`MappedKeys`, `alex`, `lipp`, `dili`): the key image, u64 little-endian;
//!   non-decreasing.
//! - `lits`: key length u32 little-endian, then the key bytes; strictly increasing.
//!
//! Duplicate images: ALEX, LIPP and DILI need distinct keys, so they map each image to the
//! FIRST slot of its run of equal images; a lookup reads from there slot by slot while the
//! image matches (at most `max_image_run` slots). LITS indexes the full keys and needs no run.
//!
//! A `SlotIndex` is immutable after `decode`; any thread may read it. Decoding takes untrusted
//! bytes and never panics: every problem is a detail string for `Corruption`.

use lidb_updatable::{Alex, Dili, Lipp, Lits, UpdatableBytesIndex, UpdatableIndex};

use crate::options::{IndexKind, Unclustered};
use crate::table::format::ByteReader;

/// The in-memory structure a table keeps from its mapped-keys block.
#[derive(Debug)]
pub enum SlotIndex {
    /// Every slot's key image (mapped keys retained beside the clustered model).
    Images(Vec<u64>),
    Alex(Alex),
    Lipp(Lipp),
    Dili(Dili),
    /// Full keys to slots.
    Lits(Lits),
}

/// Encodes the block payload for `kind` from the images and, for `lits`, the keys (both in slot
/// order). Returns an empty vector for the clustered kind, which has no block.
pub fn encode<'a>(
    kind: IndexKind,
    images: &[u64],
    keys: impl Iterator<Item = &'a [u8]>,
) -> Vec<u8> {
    match kind {
        IndexKind::Clustered => Vec::new(),
        IndexKind::Unclustered(Unclustered::Lits) => {
            let mut out = Vec::new();
            for key in keys {
                out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                out.extend_from_slice(key);
            }
            out
        }
        IndexKind::MappedKeys | IndexKind::Unclustered(_) => {
            images.iter().flat_map(|i| i.to_le_bytes()).collect()
        }
    }
}

/// Decodes a payload of `entries` records for `kind` (not `Clustered`) and builds the slot
/// index. `max_key_len` bounds the LITS keys.
pub fn decode(
    kind: IndexKind,
    payload: &[u8],
    entries: u64,
    max_key_len: u32,
) -> Result<SlotIndex, String> {
    if let IndexKind::Unclustered(Unclustered::Lits) = kind {
        return decode_keys(payload, entries, max_key_len);
    }
    if payload.len() as u64 != entries.saturating_mul(8) {
        return Err(format!(
            "{} bytes do not hold {entries} key images",
            payload.len()
        ));
    }
    let mut r = ByteReader::new(payload);
    let mut images = Vec::with_capacity(entries as usize);
    for i in 0..entries {
        let image = r.u64()?;
        if images.last().is_some_and(|&prev| prev > image) {
            return Err(format!("key image {i} is below its predecessor"));
        }
        images.push(image);
    }
    let first_of_runs = || {
        let mut pairs: Vec<(u64, u64)> = Vec::with_capacity(images.len());
        for (slot, &image) in images.iter().enumerate() {
            if pairs.last().is_none_or(|&(prev, _)| prev != image) {
                pairs.push((image, slot as u64));
            }
        }
        pairs
    };
    let built = |e: lidb_updatable::BulkLoadError| e.to_string();
    Ok(match kind {
        IndexKind::Unclustered(Unclustered::Alex) => {
            SlotIndex::Alex(Alex::bulk_load(&first_of_runs()).map_err(built)?)
        }
        IndexKind::Unclustered(Unclustered::Lipp) => {
            SlotIndex::Lipp(Lipp::bulk_load(&first_of_runs()).map_err(built)?)
        }
        IndexKind::Unclustered(Unclustered::Dili) => {
            SlotIndex::Dili(Dili::bulk_load(&first_of_runs()).map_err(built)?)
        }
        _ => SlotIndex::Images(images),
    })
}

fn decode_keys(payload: &[u8], entries: u64, max_key_len: u32) -> Result<SlotIndex, String> {
    let mut r = ByteReader::new(payload);
    let mut pairs: Vec<(&[u8], u64)> = Vec::new();
    for slot in 0..entries {
        let len = r.u32()?;
        if len > max_key_len {
            return Err(format!("key {slot} of {len} bytes is above the maximum"));
        }
        let key = r.bytes(u64::from(len))?;
        if pairs.last().is_some_and(|&(prev, _)| prev >= key) {
            return Err(format!("key {slot} is not above its predecessor"));
        }
        pairs.push((key, slot));
    }
    r.finish("mapped keys")?;
    Lits::bulk_load(&pairs)
        .map(SlotIndex::Lits)
        .map_err(|e| e.to_string())
}

impl SlotIndex {
    /// Heap bytes of the structure (the memory the paper's Observation 3 is about).
    pub fn size_bytes(&self) -> u64 {
        match self {
            SlotIndex::Images(v) => (v.capacity() * std::mem::size_of::<u64>()) as u64,
            SlotIndex::Alex(i) => i.size_bytes(),
            SlotIndex::Lipp(i) => i.size_bytes(),
            SlotIndex::Dili(i) => i.size_bytes(),
            SlotIndex::Lits(i) => i.size_bytes(),
        }
    }

    /// Whether a found slot holds exactly the key looked up (no run of equal images to scan).
    pub fn exact(&self) -> bool {
        matches!(self, SlotIndex::Lits(_))
    }

    /// The image of slot `p` when the images are in memory.
    pub fn image_at(&self, p: u64) -> Option<u64> {
        match self {
            SlotIndex::Images(v) => v.get(p as usize).copied(),
            _ => None,
        }
    }

    /// The first slot that may hold `key` (whose image is `image`), or `None` when the key is
    /// certainly absent. `range` is the clustered model's `[lo, hi)`, which narrows the
    /// in-memory search of retained images.
    pub fn candidate(&self, key: &[u8], image: u64, range: Option<(u64, u64)>) -> Option<u64> {
        match self {
            SlotIndex::Images(v) => {
                let p = first_at_least(v, image, range);
                (v.get(p as usize) == Some(&image)).then_some(p)
            }
            SlotIndex::Alex(i) => i.get(image),
            SlotIndex::Lipp(i) => i.get(image),
            SlotIndex::Dili(i) => i.get(image),
            SlotIndex::Lits(i) => i.get(key),
        }
    }

    /// The first slot whose key may be `>= key`: every slot before it holds a smaller key
    /// (`entries` when there is none). The seek of iterators, by the lower-bound path.
    pub fn lower_bound(&self, key: &[u8], image: u64, entries: u64) -> u64 {
        let next = |it: Option<(u64, u64)>| it.map_or(entries, |(_, slot)| slot);
        match self {
            SlotIndex::Images(v) => first_at_least(v, image, None),
            SlotIndex::Alex(i) => next(i.first_from(image)),
            SlotIndex::Lipp(i) => next(i.first_from(image)),
            SlotIndex::Dili(i) => next(i.first_from(image)),
            SlotIndex::Lits(i) => i.range_from(key).next().map_or(entries, |(_, slot)| slot),
        }
    }
}

/// The first position whose image is `>= image`, searching `range` first (the model's guess)
/// and widening it in memory when the guess is off.
fn first_at_least(images: &[u64], image: u64, range: Option<(u64, u64)>) -> u64 {
    let n = images.len();
    let (lo, hi) = range.map_or((0, n), |(lo, hi)| {
        let hi = (hi as usize).min(n);
        ((lo as usize).min(hi), hi)
    });
    let window = images.get(lo..hi).unwrap_or_default();
    let mut p = lo + window.partition_point(|&x| x < image);
    while p > 0 && images.get(p - 1).is_some_and(|&x| x >= image) {
        p -= 1;
    }
    while images.get(p).is_some_and(|&x| x < image) {
        p += 1;
    }
    p as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_find_first_of_run_and_widen_bad_ranges() {
        let v = vec![1, 3, 3, 3, 7, 9];
        assert_eq!(first_at_least(&v, 3, None), 1);
        assert_eq!(first_at_least(&v, 3, Some((3, 4))), 1);
        assert_eq!(first_at_least(&v, 8, Some((0, 1))), 5);
        assert_eq!(first_at_least(&v, 10, None), 6);
        let idx = SlotIndex::Images(v);
        assert_eq!(idx.candidate(b"", 3, Some((2, 5))), Some(1));
        assert_eq!(idx.candidate(b"", 4, None), None);
    }

    #[test]
    fn every_kind_round_trips_and_truncations_are_errors() {
        let images = [1u64, 5, 5, 9];
        let keys: [&[u8]; 4] = [b"a", b"bb", b"bc", b"d"];
        for kind in [
            IndexKind::MappedKeys,
            IndexKind::Unclustered(Unclustered::Alex),
            IndexKind::Unclustered(Unclustered::Lipp),
            IndexKind::Unclustered(Unclustered::Dili),
            IndexKind::Unclustered(Unclustered::Lits),
        ] {
            let payload = encode(kind, &images, keys.iter().copied());
            let idx = match decode(kind, &payload, 4, 8) {
                Ok(idx) => idx,
                Err(e) => panic!("{kind:?}: {e}"),
            };
            assert_eq!(
                idx.candidate(b"bc", 5, None),
                Some(if idx.exact() { 2 } else { 1 })
            );
            assert_eq!(idx.lower_bound(b"c", 6, 4), 3);
            for len in 0..payload.len() {
                assert!(decode(kind, payload.get(..len).unwrap_or_default(), 4, 8).is_err());
            }
        }
    }
}
