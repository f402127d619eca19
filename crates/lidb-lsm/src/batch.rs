//! Write batches: the unit of atomic writes, and their encoding as one WAL record payload
//! (format: docs/format/wal.md, section "Batch payload").
//!
//! ```text
//! payload: [first seq u64 LE][count u32 LE] op*count
//! op:      [kind u8][key_len u32 LE][key][value_len u32 LE][value]
//! ```
//!
//! Op i of the batch gets sequence number `first_seq + i`.
//!
//! Callers: applications build a `WriteBatch` on their own thread; the DB's write path validates,
//! encodes and logs it; recovery decodes WAL records with [`decode`].
//!
//! Invariants of a batch that passed [`WriteBatch::validate`] (and of every decoded batch): keys
//! are at most [`MAX_KEY_BYTES`], values at most [`MAX_VALUE_BYTES`], deletions have empty values,
//! the encoded payload fits one log record, and `first_seq + count - 1` does not overflow.

use crate::types::EntryKind;
use lidb_storage::bytes::{ByteReader, Truncated};
use lidb_storage::error::{Error, Result};
use lidb_storage::log::MAX_RECORD_BYTES;

/// Longest key: tables store key lengths as u16.
pub const MAX_KEY_BYTES: u64 = (1 << 16) - 1;
/// Longest value (1 GiB).
pub const MAX_VALUE_BYTES: u64 = 1 << 30;
/// Bytes of the payload header: first seq u64 + count u32.
pub const BATCH_HEADER_BYTES: u64 = 12;
/// Bytes an op adds besides its key and value: kind u8 + two u32 lengths.
pub const OP_OVERHEAD_BYTES: u64 = 9;

/// One operation of a batch. Deletions have an empty value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOp {
    pub kind: EntryKind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Puts and deletes applied atomically, in order (a later op on a key wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    /// Encoded size of the payload, header included.
    encoded_bytes: u64,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl WriteBatch {
    pub fn new() -> WriteBatch {
        WriteBatch {
            ops: Vec::new(),
            encoded_bytes: BATCH_HEADER_BYTES,
        }
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.push(EntryKind::Put, key, value);
    }

    pub fn delete(&mut self, key: &[u8]) {
        self.push(EntryKind::Delete, key, &[]);
    }

    fn push(&mut self, kind: EntryKind, key: &[u8], value: &[u8]) {
        self.encoded_bytes += OP_OVERHEAD_BYTES + key.len() as u64 + value.len() as u64;
        self.ops.push(BatchOp {
            kind,
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of the encoded payload (what the WAL record will hold).
    pub fn approximate_bytes(&self) -> u64 {
        self.encoded_bytes
    }

    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.encoded_bytes = BATCH_HEADER_BYTES;
    }

    /// Checks the limits; the error names the op and the limit it breaks.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidOption(m));
        if self.ops.len() as u64 > u64::from(u32::MAX) {
            return bad(format!(
                "a batch of {} ops exceeds the limit of {} ops",
                self.ops.len(),
                u32::MAX
            ));
        }
        for (i, op) in self.ops.iter().enumerate() {
            if op.key.len() as u64 > MAX_KEY_BYTES {
                return bad(format!(
                    "key of op {i} is {} bytes, above the limit of {MAX_KEY_BYTES} bytes",
                    op.key.len()
                ));
            }
            if op.value.len() as u64 > MAX_VALUE_BYTES {
                return bad(format!(
                    "value of op {i} is {} bytes, above the limit of {MAX_VALUE_BYTES} bytes \
                     (1 GiB)",
                    op.value.len()
                ));
            }
        }
        if self.approximate_bytes() > MAX_RECORD_BYTES {
            return bad(format!(
                "the batch encodes to {} bytes, above the log record limit of \
                 {MAX_RECORD_BYTES} bytes; split it",
                self.approximate_bytes()
            ));
        }
        Ok(())
    }

    /// The WAL record payload; op i gets sequence number `first_seq + i`. Call
    /// [`WriteBatch::validate`] first: lengths above the u32 range would not be representable.
    pub fn encode(&self, first_seq: u64) -> Vec<u8> {
        debug_assert!(self.validate().is_ok(), "encode of an invalid batch");
        let mut out = Vec::with_capacity(self.approximate_bytes() as usize);
        out.extend_from_slice(&first_seq.to_le_bytes());
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            out.push(op.kind as u8);
            out.extend_from_slice(&(op.key.len() as u32).to_le_bytes());
            out.extend_from_slice(&op.key);
            out.extend_from_slice(&(op.value.len() as u32).to_le_bytes());
            out.extend_from_slice(&op.value);
        }
        out
    }
}

/// Names what a short batch ended inside, for the error the caller puts beside the WAL's name.
fn inside<T>(
    read: std::result::Result<T, Truncated>,
    what: &str,
) -> std::result::Result<T, String> {
    read.map_err(|t| {
        format!(
            "batch ends inside {what} at byte {} (needs {} bytes, {} left)",
            t.at,
            t.wanted,
            t.len.saturating_sub(t.at)
        )
    })
}

/// Decodes a WAL record payload into its first sequence number and ops. Never panics; the
/// error describes the first violation (the caller names the WAL file).
pub fn decode(payload: &[u8]) -> std::result::Result<(u64, Vec<BatchOp>), String> {
    let mut r = ByteReader::new(payload);
    let first_seq = inside(r.u64(), "the first sequence number")?;
    let count = inside(r.u32(), "the op count")?;
    // Every op takes at least OP_OVERHEAD_BYTES, which bounds the allocation below.
    if u64::from(count) * OP_OVERHEAD_BYTES > r.remaining() as u64 {
        return Err(format!(
            "op count {count} does not fit in the {} bytes that follow",
            r.remaining()
        ));
    }
    if count > 0 && first_seq.checked_add(u64::from(count) - 1).is_none() {
        return Err(format!(
            "sequence numbers {first_seq} + {count} ops overflow u64"
        ));
    }
    let mut ops = Vec::with_capacity(count as usize);
    for i in 0..count {
        let kind = inside(r.u8(), "an op kind")?;
        let kind =
            EntryKind::from_u8(kind).ok_or_else(|| format!("op {i}: unknown kind {kind}"))?;
        let key_len = inside(r.u32(), "a key length")?;
        if u64::from(key_len) > MAX_KEY_BYTES {
            return Err(format!(
                "op {i}: key length {key_len} exceeds the limit of {MAX_KEY_BYTES}"
            ));
        }
        let key = inside(r.take(key_len as usize), "a key")?.to_vec();
        let value_len = inside(r.u32(), "a value length")?;
        if u64::from(value_len) > MAX_VALUE_BYTES {
            return Err(format!(
                "op {i}: value length {value_len} exceeds the limit of {MAX_VALUE_BYTES}"
            ));
        }
        if kind == EntryKind::Delete && value_len != 0 {
            return Err(format!(
                "op {i}: a deletion carries a {value_len}-byte value"
            ));
        }
        let value = inside(r.take(value_len as usize), "a value")?.to_vec();
        ops.push(BatchOp { kind, key, value });
    }
    if r.remaining() != 0 {
        return Err(format!("{} bytes follow the last op", r.remaining()));
    }
    Ok((first_seq, ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op_strategy() -> impl Strategy<Value = (bool, Vec<u8>, Vec<u8>)> {
        (
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
    }

    fn build(ops: &[(bool, Vec<u8>, Vec<u8>)]) -> WriteBatch {
        let mut b = WriteBatch::new();
        for (is_put, k, v) in ops {
            if *is_put {
                b.put(k, v);
            } else {
                b.delete(k);
            }
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

        #[test]
        fn round_trip(ops in proptest::collection::vec(op_strategy(), 0..30), seq in any::<u64>()) {
            let seq = seq.min(u64::MAX - 40);
            let b = build(&ops);
            prop_assert!(b.validate().is_ok());
            let bytes = b.encode(seq);
            prop_assert_eq!(bytes.len() as u64, b.approximate_bytes());
            let (got_seq, got_ops) = decode(&bytes).map_err(TestCaseError::fail)?;
            prop_assert_eq!(got_seq, seq);
            prop_assert_eq!(got_ops.as_slice(), b.ops());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn mutations_never_panic(ops in proptest::collection::vec(op_strategy(), 1..10),
                                 flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..4)) {
            let mut bytes = build(&ops).encode(5);
            for (at, mask) in flips {
                let at = at % bytes.len();
                if let Some(b) = bytes.get_mut(at) { *b ^= mask; }
            }
            let _ = decode(&bytes);
            for cut in 0..bytes.len() {
                prop_assert!(decode(bytes.get(..cut).unwrap_or_default()).is_err());
            }
        }
    }

    #[test]
    fn limits_are_named() {
        let mut b = WriteBatch::new();
        b.put(&vec![0u8; MAX_KEY_BYTES as usize + 1], b"v");
        let msg = b
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("65535"), "{msg}");
        let mut b = WriteBatch::new();
        b.put(&vec![0u8; MAX_KEY_BYTES as usize], b"v");
        assert!(b.validate().is_ok());
    }

    #[test]
    fn strict_decoding() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        let mut bytes = b.encode(1);
        bytes.push(0);
        assert!(decode(&bytes).is_err_and(|e| e.contains("follow the last op")));
        // A deletion with a value.
        let mut d = WriteBatch::new();
        d.put(b"k", b"v");
        let mut bytes = d.encode(1);
        if let Some(kind) = bytes.get_mut(12) {
            *kind = EntryKind::Delete as u8;
        }
        assert!(decode(&bytes).is_err_and(|e| e.contains("deletion")));
        // Overflowing sequence numbers.
        let bytes = d.encode(u64::MAX);
        assert!(decode(&bytes).is_ok());
        let mut two = d.clone();
        two.delete(b"x");
        assert!(decode(&two.encode(u64::MAX)).is_err_and(|e| e.contains("overflow")));
        // A huge count with few bytes is refused before allocating.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bytes).is_err_and(|e| e.contains("does not fit")));
    }

    #[test]
    fn empty_batch() {
        let b = WriteBatch::default();
        assert!(b.is_empty());
        assert_eq!(b.approximate_bytes(), BATCH_HEADER_BYTES);
        assert_eq!(decode(&b.encode(9)), Ok((9, Vec::new())));
    }
}
