//! The 64-bit key hash of lidb: MurmurHash64A with a fixed seed. lidb-lsm's Bloom filters store
//! bits chosen by it (docs/format/sstable.md), so it is part of a file format and never changes;
//! the page cache shards by it. A pure function, callable from any thread.

/// Seed of the key hash ("lidb"). DO NOT CHANGE: filters on disk depend on it.
pub const HASH_SEED: u64 = 0x6c69_6462;

/// The 64-bit hash of a key that the filter uses: MurmurHash64A with [`HASH_SEED`].
pub fn key_hash(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = HASH_SEED ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for chunk in chunks.by_ref() {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let mut k = u64::from_le_bytes(w);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut t = 0u64;
        for (i, &b) in rest.iter().enumerate() {
            t |= u64::from(b) << (8 * i);
        }
        h ^= t;
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_fixed_by_the_format() {
        assert_eq!(key_hash(b""), key_hash(b""));
        assert_ne!(key_hash(b"a"), key_hash(b"b"));
        // Keys of 8 bytes and more go through the word loop, shorter ones through the tail only.
        assert_ne!(key_hash(b"abcdefgh"), key_hash(b"abcdefg"));
    }
}
