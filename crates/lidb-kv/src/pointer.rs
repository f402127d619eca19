//! Value pointers: where a record lives in a value log. The LSM of the tiered store maps each key
//! to the encoding of a pointer; the key list of the static tier holds one per key.

/// A record's place: value log file number, byte offset of the record, and its whole length
/// (header included), so one read fetches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pointer {
    pub file: u64,
    pub offset: u64,
    pub len: u32,
}

/// Bytes of an encoded pointer.
pub const POINTER_BYTES: usize = 20;

impl Pointer {
    /// Little-endian: file u64, offset u64, len u32. DO NOT CHANGE: stored in LSM values.
    pub fn encode(&self) -> [u8; POINTER_BYTES] {
        let mut b = [0u8; POINTER_BYTES];
        b[..8].copy_from_slice(&self.file.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// None unless `bytes` is exactly one encoded pointer.
    pub fn decode(bytes: &[u8]) -> Option<Pointer> {
        let file = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        let offset = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
        let len = u32::from_le_bytes(bytes.get(16..20)?.try_into().ok()?);
        (bytes.len() == POINTER_BYTES).then_some(Pointer { file, offset, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_wrong_lengths() {
        let p = Pointer {
            file: 7,
            offset: u64::MAX - 3,
            len: 1040,
        };
        assert_eq!(Pointer::decode(&p.encode()), Some(p));
        assert_eq!(Pointer::decode(&p.encode()[..19]), None);
        assert_eq!(Pointer::decode(&[0; 21]), None);
    }
}
