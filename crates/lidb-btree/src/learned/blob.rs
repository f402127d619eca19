//! The learned path's checkpoint blob: the mapping table and its model, saved with every
//! checkpoint (the store's `set_checkpoint_extra`) and decoded at open, so a restart serves
//! learned lookups before any inner node is read. Format: docs/format/btree-learned.md.
//!
//! The decoder takes untrusted bytes: anything malformed is an error value, never a panic, and
//! the caller then rebuilds the table from the tree (the blob is optional).

use super::table::Table;
use crate::tree::LeafRef;
use lidb_storage::bytes::ByteReader;

/// The blob's first bytes. DO NOT CHANGE: files written with it exist.
pub(crate) const MAGIC: [u8; 8] = *b"LIDBLRN\0";
/// The format version written; decoders refuse others.
pub(crate) const VERSION: u32 = 1;
/// A slot's upper length meaning "no upper fence" (plus infinity, the last leaf).
const NO_UPPER: u32 = u32::MAX;

/// Encodes `table` (slots, key prefix, model).
pub(crate) fn encode(table: &Table) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(table.prefix.len() as u32).to_le_bytes());
    out.extend_from_slice(&table.prefix);
    out.extend_from_slice(&(table.slots.len() as u64).to_le_bytes());
    for s in &table.slots {
        out.extend_from_slice(&s.pid.to_le_bytes());
        match &s.upper {
            Some(u) => {
                out.extend_from_slice(&(u.len() as u32).to_le_bytes());
                out.extend_from_slice(u);
            }
            None => out.extend_from_slice(&NO_UPPER.to_le_bytes()),
        }
    }
    let model = table.model().encode();
    out.extend_from_slice(&(model.len() as u64).to_le_bytes());
    out.extend_from_slice(&model);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a blob into a table; `Err` says what is wrong with it.
pub(crate) fn decode(bytes: &[u8]) -> Result<Table, String> {
    let body_len = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes: shorter than the checksum", bytes.len()))?;
    let (body, crc) = bytes.split_at(body_len);
    let stored = u32::from_le_bytes(crc.try_into().map_err(|_| "checksum".to_string())?);
    if crc32c::crc32c(body) != stored {
        return Err("checksum mismatch".into());
    }
    let mut r = ByteReader::new(body);
    if r.take(8)? != MAGIC {
        return Err("not a learned-path blob (magic)".into());
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!(
            "format version {version}; this build reads {VERSION}"
        ));
    }
    let prefix_len = r.u32()? as usize;
    let prefix = r.take(prefix_len)?.to_vec();
    let count = r.u64()?;
    // Each slot takes at least 12 bytes: a count beyond what the blob holds is damage.
    if count == 0 || count > (r.remaining() / 12) as u64 {
        return Err(format!("slot count {count} does not fit the blob"));
    }
    let mut leaves = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let pid = r.u64()?;
        let len = r.u32()?;
        let upper = (len != NO_UPPER)
            .then(|| r.take(len as usize).map(<[u8]>::to_vec))
            .transpose()?;
        leaves.push(LeafRef {
            upper,
            pid,
            frame: None,
        });
    }
    let sorted = leaves.windows(2).all(|w| match w {
        [a, b] => match (&a.upper, &b.upper) {
            (Some(x), Some(y)) => x < y,
            (Some(_), None) => true,
            (None, _) => false,
        },
        _ => true,
    });
    if !sorted || leaves.last().is_some_and(|l| l.upper.is_some()) {
        return Err("slots out of order".into());
    }
    let model_len = r.u64()?;
    let model_bytes = r.take(usize::try_from(model_len).map_err(|_| "model length")?)?;
    if r.remaining() != 0 {
        return Err(format!("{} bytes after the model", r.remaining()));
    }
    let model = lidb_index::decode(model_bytes).map_err(|e| format!("model: {e}"))?;
    Table::with_model(leaves, prefix, model).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn table(n: u64) -> Table {
        let leaves = (0..n)
            .map(|i| LeafRef {
                upper: (i + 1 < n).then(|| format!("key{:05}", i * 10).into_bytes()),
                pid: 100 + i,
                frame: None,
            })
            .collect();
        Table::build(leaves, lidb_index::Family::Rs, 32).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn round_trips_and_rejects_every_truncation_and_flip() {
        for n in [1u64, 2, 57] {
            let t = table(n);
            let bytes = encode(&t);
            let back = decode(&bytes).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(back.slots.len(), t.slots.len());
            for (a, b) in back.slots.iter().zip(&t.slots) {
                assert_eq!((&a.upper, a.pid), (&b.upper, b.pid));
            }
            assert_eq!(back.prefix, t.prefix);
            assert_eq!(encode(&back), bytes);
            for len in 0..bytes.len() {
                assert!(
                    decode(bytes.get(..len).unwrap_or_default()).is_err(),
                    "{n} {len}"
                );
            }
            for i in 0..bytes.len() {
                let mut b = bytes.clone();
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1;
                }
                assert!(decode(&b).is_err(), "{n}: flip at {i}");
            }
        }
    }

    /// Writes the version-1 fixture when `LIDB_WRITE_FIXTURES` is set; always checks that
    /// it still decodes to the table it was made from (old formats keep opening).
    #[test]
    fn version_1_fixture_still_decodes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/learned-blob-v1.bin"
        );
        if std::env::var_os("LIDB_WRITE_FIXTURES").is_some() {
            std::fs::write(path, encode(&table(57))).unwrap_or_else(|e| panic!("{e}"));
        }
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let t = decode(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let want = table(57);
        assert_eq!(t.slots.len(), want.slots.len());
        for (a, b) in t.slots.iter().zip(&want.slots) {
            assert_eq!((&a.upper, a.pid), (&b.upper, b.pid));
        }
        assert_eq!(t.model().boundary(), 32);
    }

    /// A body with its checksum made right again, so the structure checks behind it run.
    fn resealed(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
            let _ = decode(&resealed(bytes));
        }

        /// Damage behind a matching checksum (a bug in a writer, not a torn write) is refused
        /// or decodes to a table whose slots are in order; never a panic.
        #[test]
        fn resealed_damage_never_panics(
            n in 1u64..40,
            flips in proptest::collection::vec(any::<(usize, u8)>(), 1..4),
            cut in any::<usize>(),
        ) {
            let bytes = encode(&table(n));
            let mut body = bytes.get(..bytes.len() - 4).unwrap_or_default().to_vec();
            let len = body.len();
            for (at, mask) in flips {
                if let Some(b) = body.get_mut(at % len) {
                    *b ^= mask;
                }
            }
            body.truncate(cut % (len + 1));
            if let Ok(t) = decode(&resealed(body)) {
                prop_assert!(!t.slots.is_empty());
                prop_assert!(t.slots.last().is_some_and(|s| s.upper.is_none()));
            }
        }
    }
}
