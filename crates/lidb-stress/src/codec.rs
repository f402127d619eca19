//! Keys and values of a stress run: key `i` is `key:` and 16 zero-padded decimal digits that grow
//! with `i` (so a range of indexes is a range of keys), redis-benchmark's key shape: every key
//! shares its first 11 bytes, which is what engines that index key prefixes (FineStore's layers,
//! the LSM's key images) must get right; and the value written by the put of version `v` names its key
//! and version and carries a filler derived from both, so a read can tell exactly which put it
//! came from, and a torn, stale or misplaced value cannot pass as another.
//!
//! Pure functions; callable from any thread.

/// Key indexes are spread by this stride so keys are not dense integers.
const STRIDE: u64 = 0x9E37;
const MAGIC: u8 = b'V';
/// Magic, key index (u32), version (u32), filler length (u16).
const HEADER: usize = 11;

/// What every key starts with.
const PREFIX: &[u8] = b"key:";
/// Decimal digits after the prefix: room for `(u32::MAX + 1) * STRIDE`.
const DIGITS: usize = 16;

/// The key of index `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("key:{:0DIGITS$}", (u64::from(i) + 1) * STRIDE).into_bytes()
}

/// The index of `key`, if it is the key of an index.
pub fn index_of(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(PREFIX)?;
    if digits.len() != DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    if n == 0 || !n.is_multiple_of(STRIDE) {
        return None;
    }
    u32::try_from(n / STRIDE - 1).ok()
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn filler_byte(seed: u64, j: usize) -> u8 {
    (mix(seed ^ (j as u64 / 8)) >> ((j % 8) * 8)) as u8
}

/// The value the put of `version` writes to key `i`: between `HEADER` and `max_len` bytes
/// (`max_len` at least 16), its length chosen by the key and version.
pub fn value(i: u32, version: u32, max_len: usize) -> Vec<u8> {
    let seed = mix((u64::from(i) << 32) | u64::from(version));
    let span = max_len.max(16) - HEADER;
    let filler = (seed % (span as u64 + 1)) as usize;
    let mut v = Vec::with_capacity(HEADER + filler);
    v.push(MAGIC);
    v.extend_from_slice(&i.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&(filler as u16).to_le_bytes());
    v.extend((0..filler).map(|j| filler_byte(seed, j)));
    v
}

/// The version of the put that wrote `bytes` to key `i`, or a description of what is wrong
/// with them (another key's value, a torn or altered value).
pub fn version_of(i: u32, bytes: &[u8]) -> Result<u32, String> {
    let head = bytes
        .get(..HEADER)
        .ok_or_else(|| format!("value of {} bytes is shorter than a header", bytes.len()))?;
    let word = |at: usize| -> u32 {
        let mut b = [0u8; 4];
        for (k, slot) in b.iter_mut().enumerate() {
            *slot = head.get(at + k).copied().unwrap_or(0);
        }
        u32::from_le_bytes(b)
    };
    if head.first() != Some(&MAGIC) {
        return Err("value does not start with the stress magic".into());
    }
    let (owner, version) = (word(1), word(5));
    if owner != i {
        return Err(format!("value belongs to key index {owner}"));
    }
    // The filler is checked against the length its header records: the length rule depends on
    // the run's --value-size, the bytes on nothing but the key and version.
    let seed = mix((u64::from(i) << 32) | u64::from(version));
    let filler_len = usize::from(u16::from_le_bytes([
        head.get(9).copied().unwrap_or(0),
        head.get(10).copied().unwrap_or(0),
    ]));
    let body = bytes.get(HEADER..).unwrap_or_default();
    if body.len() != filler_len {
        return Err(format!(
            "value of version {version} has {} filler bytes, its header says {filler_len}",
            body.len()
        ));
    }
    if let Some(j) = (0..filler_len).find(|&j| body.get(j) != Some(&filler_byte(seed, j))) {
        return Err(format!(
            "value of version {version} differs at byte {}",
            HEADER + j
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keys_round_trip_and_keep_order(a in 0u32..10_000_000, b in 0u32..10_000_000) {
            prop_assert_eq!(index_of(&key(a)), Some(a));
            prop_assert_eq!(a.cmp(&b), key(a).cmp(&key(b)));
        }

        #[test]
        fn values_name_their_put(i in 0u32..1_000_000, v in 1u32..1_000_000, max in 16usize..400) {
            let bytes = value(i, v, max);
            prop_assert!(bytes.len() <= max.max(16));
            prop_assert_eq!(version_of(i, &bytes), Ok(v));
            prop_assert!(version_of(i.wrapping_add(1), &bytes).is_err());
        }

        #[test]
        fn a_changed_byte_is_caught(i in 0u32..1000, v in 1u32..1000, at in 0usize..64) {
            let mut bytes = value(i, v, 64);
            let len = bytes.len();
            if let Some(b) = bytes.get_mut(at % len) {
                *b ^= 0x5A;
            }
            prop_assert_ne!(version_of(i, &bytes), Ok(v));
        }
    }

    #[test]
    fn foreign_keys_are_not_indexes() {
        assert_eq!(index_of(b"short"), None);
        assert_eq!(index_of(&[0u8; 8]), None);
        assert_eq!(index_of(&(STRIDE * 5).to_be_bytes()), None);
        assert_eq!(
            index_of(format!("key:{:016}", STRIDE * 5 + 1).as_bytes()),
            None
        );
        assert_eq!(
            index_of(format!("key:{:016}", STRIDE * 5).as_bytes()),
            Some(4)
        );
        assert_eq!(
            index_of(format!("key:+{:015}", STRIDE * 5).as_bytes()),
            None
        );
        assert_eq!(key(u32::MAX).len(), PREFIX.len() + DIGITS);
        assert!(version_of(3, value(3, 9, 64).get(..5).unwrap_or_default()).is_err());
    }
}
