//! The Bloom filter of a table: built once from the table's user keys by the builder, decoded by
//! the reader, then only queried (immutable, any thread).
//!
//! Layout and hashing are specified in docs/format/sstable.md ("Filter block payload"):
//! `num_bits = max(64, n * bits_per_key)` rounded up to a byte, `k = round(bits_per_key * ln 2)`
//! clamped to 1..=30, MurmurHash64A of the key and double hashing. Invariant: every key the
//! filter was built from answers `may_contain == true`.

use crate::table::format::ByteReader;
pub use lidb_storage::hash::{HASH_SEED, key_hash};

/// The largest number of probes per key.
pub const MAX_PROBES: u32 = 30;
/// The smallest filter, in bits.
pub const MIN_BITS: u64 = 64;

/// A Bloom filter over byte keys.
#[derive(Clone, PartialEq, Eq)]
pub struct BloomFilter {
    probes: u32,
    num_bits: u64,
    bits: Vec<u8>,
}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("probes", &self.probes)
            .field("num_bits", &self.num_bits)
            .finish()
    }
}

/// Probes per key for `bits_per_key`: `round(bits * ln 2)` clamped to 1..=30.
pub fn probes_for(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round();
    (k as u32).clamp(1, MAX_PROBES)
}

impl BloomFilter {
    /// A filter over `keys` with `bits_per_key` bits each (at least 1).
    pub fn build<K: AsRef<[u8]>>(keys: &[K], bits_per_key: u32) -> BloomFilter {
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k.as_ref())).collect();
        BloomFilter::from_hashes(&hashes, bits_per_key)
    }

    /// A filter over keys given by their [`key_hash`] (the builder hashes while streaming).
    pub fn from_hashes(hashes: &[u64], bits_per_key: u32) -> BloomFilter {
        let bits_per_key = bits_per_key.max(1);
        let wanted = (hashes.len() as u64)
            .saturating_mul(u64::from(bits_per_key))
            .max(MIN_BITS);
        let num_bits = wanted.div_ceil(8) * 8;
        let mut f = BloomFilter {
            probes: probes_for(bits_per_key),
            num_bits,
            bits: vec![0u8; (num_bits / 8) as usize],
        };
        for &h in hashes {
            let h2 = h.rotate_left(32) | 1;
            let mut pos = h;
            for _ in 0..f.probes {
                let bit = pos % f.num_bits;
                if let Some(b) = f.bits.get_mut((bit / 8) as usize) {
                    *b |= 1 << (bit % 8);
                }
                pos = pos.wrapping_add(h2);
            }
        }
        f
    }

    /// False only if `key` was certainly not among the keys the filter was built from.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(key))
    }

    /// [`BloomFilter::may_contain`] for a key already hashed with [`key_hash`].
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let h2 = h.rotate_left(32) | 1;
        let mut pos = h;
        for _ in 0..self.probes {
            let bit = pos % self.num_bits;
            let set = self
                .bits
                .get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0);
            if !set {
                return false;
            }
            pos = pos.wrapping_add(h2);
        }
        true
    }

    pub fn probes(&self) -> u32 {
        self.probes
    }

    pub fn num_bits(&self) -> u64 {
        self.num_bits
    }

    /// Exact length of [`BloomFilter::encode`].
    pub fn size_bytes(&self) -> u64 {
        12 + self.num_bits / 8
    }

    /// `k u8, 3 zero bytes, num_bits u64, bits`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_bytes() as usize);
        out.push(self.probes as u8);
        out.extend_from_slice(&[0u8; 3]);
        out.extend_from_slice(&self.num_bits.to_le_bytes());
        out.extend_from_slice(&self.bits);
        out
    }

    /// Decodes [`BloomFilter::encode`]'s bytes; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<BloomFilter, String> {
        let mut r = ByteReader::new(bytes);
        let probes = u32::from(r.u8()?);
        let reserved = r.bytes(3)?;
        let num_bits = r.u64()?;
        if !(1..=MAX_PROBES).contains(&probes) {
            return Err(format!("filter probe count {probes} is not in 1..=30"));
        }
        if reserved.iter().any(|&b| b != 0) {
            return Err("filter reserved bytes are not zero".into());
        }
        if num_bits < MIN_BITS || num_bits % 8 != 0 {
            return Err(format!("filter size {num_bits} bits is invalid"));
        }
        let bits = r.bytes(num_bits / 8)?.to_vec();
        r.finish("filter")?;
        Ok(BloomFilter {
            probes,
            num_bits,
            bits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> Vec<u8> {
        format!("user{i:020}").into_bytes()
    }

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 100_000u64;
        let keys: Vec<Vec<u8>> = (0..n).map(|i| key(i * 2)).collect();
        let f = BloomFilter::build(&keys, 10);
        assert_eq!(f.probes(), 7);
        assert!(keys.iter().all(|k| f.may_contain(k)));
        let fp = (0..n).filter(|i| f.may_contain(&key(i * 2 + 1))).count();
        let rate = fp as f64 / n as f64;
        // Theory for 10 bits/key and k = 7: 0.82%.
        assert!((0.004..0.015).contains(&rate), "false-positive rate {rate}");
        let decoded = BloomFilter::decode(&f.encode());
        assert_eq!(decoded.as_ref().ok(), Some(&f));
        assert_eq!(f.encode().len() as u64, f.size_bytes());
    }

    #[test]
    fn probes_are_clamped() {
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(64), 30);
    }

    #[test]
    fn decode_rejects_bad_bytes_without_panicking() {
        let f = BloomFilter::build(&[b"a", b"b"], 10);
        let bytes = f.encode();
        for len in 0..bytes.len() {
            assert!(BloomFilter::decode(bytes.get(..len).unwrap_or_default()).is_err());
        }
        let mut b = bytes.clone();
        if let Some(x) = b.first_mut() {
            *x = 31;
        }
        assert!(BloomFilter::decode(&b).is_err());
        let mut b = bytes;
        b.push(0);
        assert!(BloomFilter::decode(&b).is_err());
    }

    #[test]
    fn hash_is_stable() {
        // Pinned values: filters on disk depend on them.
        assert_eq!(key_hash(b""), key_hash(b""));
        assert_ne!(key_hash(b"a"), key_hash(b"b"));
        let pinned = [key_hash(b""), key_hash(b"lidb"), key_hash(b"0123456789")];
        assert_eq!(pinned, PINNED);
    }

    const PINNED: [u64; 3] = [
        4_803_913_545_307_003_487,
        1_163_028_089_902_782_576,
        15_065_744_273_739_816_604,
    ];
}
