//! The SSTable format: constants shared by reader and writer, and the pure encoders/decoders of
//! slots, blocks, the meta block and the footer. The byte layout is specified in
//! docs/format/sstable.md; this file is its only implementation.
//!
//! DO NOT CHANGE THE CONSTANTS OR LAYOUTS BELOW: they are on disk. A change needs a new format
//! version, a reader for the old one, and an old-format fixture test.
//!
//! Decoders take untrusted bytes and never panic; they return a detail string that the caller
//! wraps into `Error::Corruption` with the file name. Every function here is pure and may be
//! called from any thread.

pub use lidb_storage::bytes::ByteReader;

use crate::keys::KeyMap;
use crate::types::EntryKind;

/// The footer's magic: "LIDBSST1" read big-endian, stored little-endian.
pub const MAGIC: u64 = 0x4c49_4442_5353_5431;
/// The format version this build writes. Version 2 added the index kind and the mapped-keys
/// block (two fields at the end of the meta block); it also reads version 1 (no such fields:
/// clustered index, no mapped-keys block).
pub const FORMAT_VERSION: u32 = 2;
/// The first format version, still read.
pub const FORMAT_VERSION_V1: u32 = 1;
/// Bytes of the footer at the end of the file.
pub const FOOTER_LEN: u64 = 64;
/// Bytes of the footer covered by its CRC.
pub const FOOTER_CRC_COVERS: usize = 52;
/// Bytes of a slot before the key: crc u32, key_len u32, value_len u32, kind u8, seq u64.
pub const SLOT_HEADER_LEN: u64 = 21;
/// The CRC-32C that ends every present block.
pub const BLOCK_TRAILER_LEN: u64 = 4;
/// The largest slot width a builder accepts (and a reader believes).
pub const MAX_SLOT_WIDTH: u64 = 1 << 30;
/// The largest entry count (a lidb-index index covers at most 2^32 - 1 keys).
pub const MAX_ENTRIES: u64 = u32::MAX as u64;

/// Where the blocks are, as the footer records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// [`FORMAT_VERSION`] or [`FORMAT_VERSION_V1`].
    pub version: u32,
    pub filter_offset: u64,
    pub filter_len: u64,
    pub index_offset: u64,
    pub index_len: u64,
    pub meta_offset: u64,
    pub meta_len: u64,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_LEN as usize] {
        let mut out = [0u8; FOOTER_LEN as usize];
        let fields = [
            self.filter_offset,
            self.filter_len,
            self.index_offset,
            self.index_len,
            self.meta_offset,
            self.meta_len,
        ];
        let mut bytes = Vec::with_capacity(FOOTER_LEN as usize);
        for f in fields {
            bytes.extend_from_slice(&f.to_le_bytes());
        }
        bytes.extend_from_slice(&self.version.to_le_bytes());
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(&MAGIC.to_le_bytes());
        for (dst, src) in out.iter_mut().zip(bytes.iter()) {
            *dst = *src;
        }
        out
    }

    /// Decodes the last 64 bytes of a file of `file_size` bytes and checks the layout equations.
    pub fn decode(bytes: &[u8], file_size: u64) -> Result<Footer, String> {
        let mut r = ByteReader::new(bytes);
        let fields = [r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        let version = r.u32()?;
        let crc = r.u32()?;
        let magic = r.u64()?;
        r.finish("footer")?;
        if magic != MAGIC {
            return Err(format!("bad magic {magic:#018x}: not an SSTable"));
        }
        if version != FORMAT_VERSION && version != FORMAT_VERSION_V1 {
            return Err(format!(
                "format version {version} is not supported (this build reads \
                 {FORMAT_VERSION_V1} and {FORMAT_VERSION})"
            ));
        }
        debug_assert!(
            bytes.len() >= FOOTER_CRC_COVERS,
            "finish() above checked the footer is whole"
        );
        let covered = bytes.get(..FOOTER_CRC_COVERS).unwrap_or_default();
        if crc32c::crc32c(covered) != crc {
            return Err("footer checksum mismatch".into());
        }
        let [
            filter_offset,
            filter_len,
            index_offset,
            index_len,
            meta_offset,
            meta_len,
        ] = fields;
        let f = Footer {
            version,
            filter_offset,
            filter_len,
            index_offset,
            index_len,
            meta_offset,
            meta_len,
        };
        let tail_start = file_size.checked_sub(FOOTER_LEN);
        let ok = filter_offset.checked_add(filter_len) == Some(index_offset)
            && index_offset.checked_add(index_len) == Some(meta_offset)
            && meta_offset.checked_add(meta_len) == tail_start;
        if !ok {
            return Err(format!(
                "footer layout does not add up: filter {filter_offset}+{filter_len}, index \
                 {index_offset}+{index_len}, meta {meta_offset}+{meta_len}, file {file_size} bytes"
            ));
        }
        for (name, len) in [("filter", filter_len), ("index", index_len)] {
            if len != 0 && len < BLOCK_TRAILER_LEN {
                return Err(format!("{name} block of {len} bytes is too short"));
            }
        }
        if meta_len < BLOCK_TRAILER_LEN {
            return Err(format!("meta block of {meta_len} bytes is too short"));
        }
        Ok(f)
    }
}

/// `payload || crc32c(payload)`.
pub fn frame_block(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + BLOCK_TRAILER_LEN as usize);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out
}

/// The payload of a framed block, after checking its CRC. `name` is for the error.
pub fn unframe_block<'a>(block: &'a [u8], name: &str) -> Result<&'a [u8], String> {
    let split = block
        .len()
        .checked_sub(BLOCK_TRAILER_LEN as usize)
        .ok_or_else(|| format!("{name} block of {} bytes is too short", block.len()))?;
    let (payload, trailer) = block.split_at(split);
    let mut crc = [0u8; 4];
    for (d, s) in crc.iter_mut().zip(trailer.iter()) {
        *d = *s;
    }
    if crc32c::crc32c(payload) != u32::from_le_bytes(crc) {
        return Err(format!("{name} block checksum mismatch"));
    }
    Ok(payload)
}

/// The meta block payload: what the table says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaBlock {
    pub number: u64,
    pub entries: u64,
    pub slot_width: u32,
    pub max_key_len: u32,
    pub max_value_len: u32,
    pub padding_bytes: u64,
    pub keymap: KeyMap,
    /// lidb-index family tag, 0 when the table has no index block.
    pub index_family_tag: u8,
    /// B of the index, 0 when there is none.
    pub index_boundary: u64,
    /// 0 when the table has no filter block.
    pub bloom_bits_per_key: u32,
    pub max_image_run: u64,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    pub deletions: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// Version 2: [`crate::options::IndexKind::tag`] (0, clustered, in version 1).
    pub index_kind: u8,
    /// Version 2: bytes of the mapped-keys block (framed) at the end of the index region; 0
    /// when absent (always in version 1).
    pub keys_len: u64,
}

impl MetaBlock {
    /// The version-2 encoding.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_for(FORMAT_VERSION)
    }

    /// The encoding of format `version` (version 1 drops the index kind and keys length).
    pub fn encode_for(&self, version: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(105 + self.smallest.len() + self.largest.len());
        out.extend_from_slice(&self.number.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&self.slot_width.to_le_bytes());
        out.extend_from_slice(&self.max_key_len.to_le_bytes());
        out.extend_from_slice(&self.max_value_len.to_le_bytes());
        out.extend_from_slice(&self.padding_bytes.to_le_bytes());
        out.extend_from_slice(&self.keymap.encode());
        out.push(self.index_family_tag);
        out.extend_from_slice(&self.index_boundary.to_le_bytes());
        out.extend_from_slice(&self.bloom_bits_per_key.to_le_bytes());
        out.extend_from_slice(&self.max_image_run.to_le_bytes());
        out.extend_from_slice(&self.smallest_seq.to_le_bytes());
        out.extend_from_slice(&self.largest_seq.to_le_bytes());
        out.extend_from_slice(&self.deletions.to_le_bytes());
        for key in [&self.smallest, &self.largest] {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
        }
        if version >= FORMAT_VERSION {
            out.push(self.index_kind);
            out.extend_from_slice(&self.keys_len.to_le_bytes());
        }
        out
    }

    /// Decodes a version-2 meta block (see [`MetaBlock::decode_for`]).
    pub fn decode(payload: &[u8]) -> Result<MetaBlock, String> {
        MetaBlock::decode_for(payload, FORMAT_VERSION)
    }

    /// Decodes the meta block of format `version` and checks its own invariants (not those
    /// against other blocks).
    pub fn decode_for(payload: &[u8], version: u32) -> Result<MetaBlock, String> {
        let mut r = ByteReader::new(payload);
        let m = MetaBlock {
            number: r.u64()?,
            entries: r.u64()?,
            slot_width: r.u32()?,
            max_key_len: r.u32()?,
            max_value_len: r.u32()?,
            padding_bytes: r.u64()?,
            keymap: KeyMap::decode(r.bytes(KeyMap::ENCODED_LEN as u64)?)?,
            index_family_tag: r.u8()?,
            index_boundary: r.u64()?,
            bloom_bits_per_key: r.u32()?,
            max_image_run: r.u64()?,
            smallest_seq: r.u64()?,
            largest_seq: r.u64()?,
            deletions: r.u64()?,
            smallest: {
                let n = r.u32()?;
                r.bytes(u64::from(n))?.to_vec()
            },
            largest: {
                let n = r.u32()?;
                r.bytes(u64::from(n))?.to_vec()
            },
            index_kind: 0,
            keys_len: 0,
        };
        let mut m = m;
        if version >= FORMAT_VERSION {
            m.index_kind = r.u8()?;
            m.keys_len = r.u64()?;
        }
        r.finish("meta block")?;
        let width = SLOT_HEADER_LEN + u64::from(m.max_key_len) + u64::from(m.max_value_len);
        if u64::from(m.slot_width) != width || width > MAX_SLOT_WIDTH {
            return Err(format!(
                "slot width {} does not match 21 + {} + {}",
                m.slot_width, m.max_key_len, m.max_value_len
            ));
        }
        if m.entries == 0 || m.entries > MAX_ENTRIES {
            return Err(format!("entry count {} is out of range", m.entries));
        }
        if m.smallest > m.largest {
            return Err("smallest key is above the largest".into());
        }
        let max_key = u64::from(m.max_key_len);
        if m.smallest.len() as u64 > max_key || m.largest.len() as u64 > max_key {
            return Err("a boundary key is longer than the maximum key length".into());
        }
        if m.keymap.prefix_len() as usize > m.smallest.len() {
            return Err(format!(
                "key map prefix {} is longer than the smallest key",
                m.keymap.prefix_len()
            ));
        }
        if m.max_image_run == 0 || m.max_image_run > m.entries {
            return Err(format!("image run {} is out of range", m.max_image_run));
        }
        if m.deletions > m.entries || m.smallest_seq > m.largest_seq {
            return Err("entry statistics are inconsistent".into());
        }
        if (m.index_family_tag == 0) != (m.index_boundary == 0) {
            return Err("index family and boundary disagree".into());
        }
        let kind = crate::options::IndexKind::from_tag(m.index_kind)
            .ok_or_else(|| format!("unknown index kind {}", m.index_kind))?;
        if kind.has_keys_block() != (m.keys_len != 0) {
            return Err(format!(
                "index kind {} and mapped-keys block of {} bytes disagree",
                m.index_kind, m.keys_len
            ));
        }
        if m.keys_len != 0 && m.keys_len < BLOCK_TRAILER_LEN {
            return Err(format!(
                "mapped-keys block of {} bytes is too short",
                m.keys_len
            ));
        }
        if matches!(kind, crate::options::IndexKind::Unclustered(_)) && m.index_family_tag != 0 {
            return Err("an unclustered table names a clustered index family".into());
        }
        Ok(m)
    }
}

/// One decoded slot, borrowing its key and value from the slot bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRef<'a> {
    pub kind: EntryKind,
    pub seq: u64,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Writes the slot of entry `index` into `out` (exactly `width` bytes, padding zeroed). The
/// caller guarantees `21 + key.len() + value.len() <= width`.
pub fn encode_slot(
    out: &mut Vec<u8>,
    index: u64,
    width: u64,
    key: &[u8],
    seq: u64,
    kind: EntryKind,
    value: &[u8],
) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = slot_crc(index, out.get(start + 4..).unwrap_or_default());
    if let Some(dst) = out.get_mut(start..start + 4) {
        dst.copy_from_slice(&crc.to_le_bytes());
    }
    out.resize(start + width as usize, 0);
}

fn slot_crc(index: u64, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&index.to_le_bytes()), body)
}

/// The key of a slot without checking its CRC (for the binary search, which checks the slots it
/// decides on with [`decode_slot`]). `None` when the lengths do not fit the slot.
pub fn slot_key(slot: &[u8]) -> Option<&[u8]> {
    let klen = u32::from_le_bytes(slot.get(4..8)?.try_into().ok()?) as usize;
    slot.get(SLOT_HEADER_LEN as usize..SLOT_HEADER_LEN as usize + klen)
}

/// Decodes and fully checks slot `index` (CRC, lengths, kind, zero padding).
pub fn decode_slot(slot: &[u8], index: u64) -> Result<SlotRef<'_>, String> {
    let bad = |what: &str| format!("slot {index}: {what}");
    let mut r = ByteReader::new(slot);
    let crc = r.u32().map_err(|_| bad("shorter than its header"))?;
    let klen = r.u32().map_err(|_| bad("shorter than its header"))?;
    let vlen = r.u32().map_err(|_| bad("shorter than its header"))?;
    let kind = r.u8().map_err(|_| bad("shorter than its header"))?;
    let seq = r.u64().map_err(|_| bad("shorter than its header"))?;
    let end = SLOT_HEADER_LEN + u64::from(klen) + u64::from(vlen);
    if end > slot.len() as u64 {
        return Err(bad("key and value lengths exceed the slot width"));
    }
    debug_assert!(
        end <= slot.len() as u64,
        "checked against the slot width above"
    );
    let body = slot.get(4..end as usize).unwrap_or_default();
    if slot_crc(index, body) != crc {
        return Err(bad("checksum mismatch"));
    }
    let kind = EntryKind::from_u8(kind).ok_or_else(|| bad("unknown entry kind"))?;
    if slot
        .get(end as usize..)
        .unwrap_or_default()
        .iter()
        .any(|&b| b != 0)
    {
        return Err(bad("non-zero padding"));
    }
    let key = r.bytes(u64::from(klen)).map_err(|e| bad(&e.to_string()))?;
    let value = r.bytes(u64::from(vlen)).map_err(|e| bad(&e.to_string()))?;
    Ok(SlotRef {
        kind,
        seq,
        key,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_spells_the_name() {
        assert_eq!(&MAGIC.to_be_bytes(), b"LIDBSST1");
    }

    #[test]
    fn footer_round_trip_and_checks() {
        let f = Footer {
            version: FORMAT_VERSION,
            filter_offset: 100,
            filter_len: 10,
            index_offset: 110,
            index_len: 0,
            meta_offset: 110,
            meta_len: 20,
        };
        let bytes = f.encode();
        assert_eq!(Footer::decode(&bytes, 130 + FOOTER_LEN), Ok(f));
        assert!(Footer::decode(&bytes, 131 + FOOTER_LEN).is_err());
        for bit in 0..(FOOTER_LEN * 8) {
            let mut b = bytes;
            if let Some(x) = b.get_mut((bit / 8) as usize) {
                *x ^= 1 << (bit % 8);
            }
            assert!(Footer::decode(&b, 130 + FOOTER_LEN).is_err(), "bit {bit}");
        }
        assert!(Footer::decode(bytes.get(..63).unwrap_or_default(), 130 + FOOTER_LEN).is_err());
    }

    #[test]
    fn meta_round_trip_truncations_and_flips_never_panic() {
        let m = MetaBlock {
            number: 3,
            entries: 10,
            slot_width: 21 + 8 + 100,
            max_key_len: 8,
            max_value_len: 100,
            padding_bytes: 5,
            keymap: KeyMap::Decimal { prefix_len: 2 },
            index_family_tag: 5,
            index_boundary: 16,
            bloom_bits_per_key: 10,
            max_image_run: 1,
            smallest_seq: 1,
            largest_seq: 9,
            deletions: 2,
            smallest: b"0012".to_vec(),
            largest: b"0099".to_vec(),
            index_kind: 1,
            keys_len: 84,
        };
        let v1 = MetaBlock {
            index_kind: 0,
            keys_len: 0,
            ..m.clone()
        };
        let v1_bytes = m.encode_for(FORMAT_VERSION_V1);
        assert_eq!(MetaBlock::decode_for(&v1_bytes, FORMAT_VERSION_V1), Ok(v1));
        assert!(
            MetaBlock::decode(&v1_bytes).is_err(),
            "v1 bytes are short for v2"
        );
        let bytes = m.encode();
        assert_eq!(MetaBlock::decode(&bytes), Ok(m.clone()));
        for len in 0..bytes.len() {
            assert!(MetaBlock::decode(bytes.get(..len).unwrap_or_default()).is_err());
        }
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            if let Some(x) = b.get_mut(bit / 8) {
                *x ^= 1 << (bit % 8);
            }
            // Either rejected or a different, self-consistent meta block; never a panic.
            if let Ok(d) = MetaBlock::decode(&b) {
                assert_ne!(d, m);
            }
        }
        let mut longer = bytes;
        longer.push(0);
        assert!(MetaBlock::decode(&longer).is_err());
    }

    #[test]
    fn slot_round_trip_and_flips() {
        let mut out = Vec::new();
        encode_slot(&mut out, 7, 40, b"key", 9, EntryKind::Put, b"value");
        assert_eq!(out.len(), 40);
        let s = decode_slot(&out, 7).ok();
        assert_eq!(
            s,
            Some(SlotRef {
                kind: EntryKind::Put,
                seq: 9,
                key: b"key",
                value: b"value"
            })
        );
        assert_eq!(slot_key(&out), Some(&b"key"[..]));
        assert!(
            decode_slot(&out, 8).is_err(),
            "slot index is in the checksum"
        );
        for bit in 0..out.len() * 8 {
            let mut b = out.clone();
            if let Some(x) = b.get_mut(bit / 8) {
                *x ^= 1 << (bit % 8);
            }
            assert!(decode_slot(&b, 7).is_err(), "bit {bit}");
        }
    }
}
