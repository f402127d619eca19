//! The payload of one write-ahead log record: one logical write (a put or a delete of one key)
//! with its LSN (docs/format/btree-wal.md). DO NOT CHANGE the constants: they are stored on
//! disk.
//!
//! ```text
//! payload: [op u8: 1 put, 2 delete][lsn u64 LE][key_len u32 LE][key][value: the rest, put only]
//! ```
//!
//! Pure functions over bytes, shared by the writer and recovery. [`decode`] never panics on any
//! bytes; it returns the corruption detail as a `String` (the caller names the file and offset).

use lidb_storage::log::MAX_RECORD_BYTES;

/// Op byte of a put. DO NOT CHANGE: stored on disk.
pub const OP_PUT: u8 = 1;
/// Op byte of a delete. DO NOT CHANGE: stored on disk.
pub const OP_DELETE: u8 = 2;
/// Bytes before the key: op u8, lsn u64, key_len u32.
pub const PAYLOAD_HEADER_BYTES: u64 = 13;
/// The first LSN a store gives; 0 means "no write" (the LSN of an empty tree's checkpoint).
pub const FIRST_LSN: u64 = 1;

/// One logical write, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOp {
    pub lsn: u64,
    pub key: Vec<u8>,
    /// `None`: a delete.
    pub value: Option<Vec<u8>>,
}

/// Whether a write of `key` (and `value`, for a put) fits one record of the log.
pub fn fits(key: &[u8], value: Option<&[u8]>) -> bool {
    let len = PAYLOAD_HEADER_BYTES + key.len() as u64 + value.map_or(0, |v| v.len() as u64);
    len <= MAX_RECORD_BYTES
}

/// The payload of a write whose LSN is set later ([`set_lsn`], under the log's lock, so the
/// bytes are copied outside it). The caller checks [`fits`] first.
pub fn encode(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        PAYLOAD_HEADER_BYTES as usize + key.len() + value.map_or(0, <[u8]>::len),
    );
    out.push(if value.is_some() { OP_PUT } else { OP_DELETE });
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
    out
}

/// Writes `lsn` into a payload made by [`encode`].
pub fn set_lsn(payload: &mut [u8], lsn: u64) {
    let slot = payload.get_mut(1..9);
    debug_assert!(slot.is_some(), "a payload made by encode holds an LSN");
    if let Some(slot) = slot {
        slot.copy_from_slice(&lsn.to_le_bytes());
    }
}

/// Decodes a payload. Err: why the bytes are not a write (an intact record whose checksum
/// matched, so no crash left them: the caller reports corruption).
pub fn decode(payload: &[u8]) -> Result<WalOp, String> {
    let (&op, rest) = payload
        .split_first()
        .ok_or_else(|| "an empty record".to_string())?;
    let (lsn, rest) = take_u64(rest).ok_or_else(|| too_short(payload))?;
    let (key_len, rest) = take_u32(rest).ok_or_else(|| too_short(payload))?;
    let (key, after_key) = rest.split_at_checked(key_len as usize).ok_or_else(|| {
        format!(
            "a key of {key_len} bytes runs past the end of a {}-byte record",
            payload.len()
        )
    })?;
    if lsn < FIRST_LSN || lsn == u64::MAX {
        return Err(format!("a record claims LSN {lsn}, outside 1..2^64-1"));
    }
    let value = match op {
        OP_PUT => Some(after_key.to_vec()),
        OP_DELETE if after_key.is_empty() => None,
        OP_DELETE => {
            return Err(format!(
                "a delete record carries {} bytes after its key",
                after_key.len()
            ));
        }
        other => return Err(format!("unknown op {other} (1 put, 2 delete)")),
    };
    Ok(WalOp {
        lsn,
        key: key.to_vec(),
        value,
    })
}

fn too_short(payload: &[u8]) -> String {
    format!(
        "a record of {} bytes is shorter than its {PAYLOAD_HEADER_BYTES}-byte header",
        payload.len()
    )
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_at_checked(8)?;
    Some((u64::from_le_bytes(head.try_into().ok()?), rest))
}

fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = bytes.split_at_checked(4)?;
    Some((u32::from_le_bytes(head.try_into().ok()?), rest))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn round_trip(lsn: u64, key: &[u8], value: Option<&[u8]>) -> Result<WalOp, String> {
        let mut p = encode(key, value);
        set_lsn(&mut p, lsn);
        decode(&p)
    }

    #[test]
    fn puts_and_deletes_round_trip() {
        let op = round_trip(7, b"key", Some(b"value"));
        assert_eq!(
            op,
            Ok(WalOp {
                lsn: 7,
                key: b"key".to_vec(),
                value: Some(b"value".to_vec())
            })
        );
        let op = round_trip(8, b"", None);
        assert_eq!(
            op,
            Ok(WalOp {
                lsn: 8,
                key: Vec::new(),
                value: None
            })
        );
        // An empty value is a put, not a delete.
        assert_eq!(
            round_trip(9, b"k", Some(b"")).map(|o| o.value),
            Ok(Some(Vec::new()))
        );
    }

    #[test]
    fn bad_payloads_are_refused() {
        assert!(round_trip(0, b"k", None).is_err(), "LSN 0 is never given");
        assert!(
            round_trip(u64::MAX, b"k", None).is_err(),
            "no LSN follows u64::MAX"
        );
        let mut p = encode(b"k", None);
        set_lsn(&mut p, 3);
        p.push(0);
        assert!(decode(&p).is_err(), "a delete with trailing bytes");
        let mut p = encode(b"k", Some(b"v"));
        set_lsn(&mut p, 3);
        if let Some(op) = p.first_mut() {
            *op = 9;
        }
        assert!(decode(&p).is_err(), "an unknown op");
        assert!(decode(&[]).is_err());
    }

    proptest! {
        /// The decoder sees bytes whose checksum matched, which damage can still make: it must
        /// refuse them, never panic.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decode_never_panics_near_valid(
            lsn in 1u64..u64::MAX,
            key in proptest::collection::vec(any::<u8>(), 0..16),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            flip in any::<(usize, u8)>(),
            cut in any::<usize>(),
        ) {
            let mut p = encode(&key, value.as_deref());
            set_lsn(&mut p, lsn);
            prop_assert_eq!(
                decode(&p),
                Ok(WalOp { lsn, key: key.clone(), value: value.clone() })
            );
            let len = p.len();
            if let Some(b) = p.get_mut(flip.0 % len) {
                *b ^= flip.1;
            }
            p.truncate(cut % (len + 1));
            let _ = decode(&p);
        }
    }
}
