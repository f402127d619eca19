//! The order-preserving u64 image of byte keys that learned models see.
//!
//! For a table of byte keys sharing a common prefix of `p` bytes, the image of a key is the 8
//! bytes at `[p, p + 8)` read big-endian, with missing bytes (the key is shorter) taken as zero.
//!
//! Properties, for keys that all start with the same `p`-byte prefix:
//! 1. **Monotone**: `a <= b` in byte order implies `image(a, p) <= image(b, p)`. Comparing the
//!    zero-padded 8-byte windows big-endian is comparing them in byte order, and a byte-order
//!    comparison of `a` and `b` is decided either inside the window (same verdict) or after it
//!    (the windows are then equal).
//! 2. **Not injective**: keys that agree on the window collide. Examples: `"ab"` and `"ab\0"`
//!    (zero padding equals a real zero byte), and any two keys that differ only after byte
//!    `p + 8`. Ties are left to the caller: the position boundary contract handles repeated
//!    images like duplicate keys, and the last-mile search compares full keys.
//!
//! Keys that do not share the prefix get an image, but monotonicity is only promised among
//! keys that do (use [`common_prefix_len`] over the whole table).

/// Length of the longest prefix shared by all `keys` (0 for an empty slice; the whole key for a
/// single key).
pub fn common_prefix_len<K: AsRef<[u8]>>(keys: &[K]) -> usize {
    let mut iter = keys.iter();
    let Some(first) = iter.next() else {
        return 0;
    };
    let first = first.as_ref();
    let mut len = first.len();
    for key in iter {
        let key = key.as_ref();
        len = first
            .iter()
            .take(len)
            .zip(key.iter())
            .take_while(|(a, b)| a == b)
            .count();
        if len == 0 {
            break;
        }
    }
    len
}

/// The image of `key`: bytes `[prefix_len, prefix_len + 8)` big-endian, missing bytes zero.
pub fn image(key: &[u8], prefix_len: usize) -> u64 {
    let mut window = [0u8; 8];
    let tail = key.get(prefix_len..).unwrap_or_default();
    for (dst, src) in window.iter_mut().zip(tail.iter()) {
        *dst = *src;
    }
    u64::from_be_bytes(window)
}

/// The images of all `keys` over their common prefix.
pub fn images<K: AsRef<[u8]>>(keys: &[K]) -> Vec<u64> {
    let prefix_len = common_prefix_len(keys);
    keys.iter().map(|k| image(k.as_ref(), prefix_len)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_lengths() {
        let empty: [&[u8]; 0] = [];
        assert_eq!(common_prefix_len(&empty), 0);
        assert_eq!(common_prefix_len(&[b"abc"]), 3);
        assert_eq!(common_prefix_len(&[&b"user123"[..], b"user9", b"user"]), 4);
        assert_eq!(common_prefix_len(&[&b"a"[..], b"b"]), 0);
        assert_eq!(common_prefix_len(&[&b""[..], b"abc"]), 0);
    }

    #[test]
    fn image_reads_big_endian_window_with_zero_padding() {
        assert_eq!(image(b"", 0), 0);
        assert_eq!(image(b"\x01", 0), 1 << 56);
        assert_eq!(image(b"pre\x01\x02", 3), 0x0102 << 48);
        assert_eq!(image(b"0123456789", 0), u64::from_be_bytes(*b"01234567"));
        assert_eq!(image(b"ab", 5), 0, "key shorter than the prefix");
        assert_eq!(image(b"ab", 0), image(b"ab\0", 0), "not injective");
    }

    #[test]
    fn images_use_the_common_prefix() {
        let keys = [&b"user:0001"[..], b"user:0002", b"user:01"];
        let got = images(&keys);
        assert_eq!(got.len(), 3);
        assert!(got.iter().zip(got.iter().skip(1)).all(|(a, b)| a <= b));
        // The common prefix is "user:0".
        assert_eq!(got.first(), Some(&u64::from_be_bytes(*b"001\0\0\0\0\0")));
    }

    proptest! {
        #[test]
        fn monotone_over_shared_prefix(
            prefix in proptest::collection::vec(any::<u8>(), 0..6),
            a in proptest::collection::vec(any::<u8>(), 0..14),
            b in proptest::collection::vec(any::<u8>(), 0..14),
        ) {
            let ka = [prefix.clone(), a].concat();
            let kb = [prefix.clone(), b].concat();
            let (lo, hi) = if ka <= kb { (ka, kb) } else { (kb, ka) };
            let p = prefix.len();
            prop_assert!(image(&lo, p) <= image(&hi, p));
            // The common prefix of the pair may be longer than `prefix`; monotone there too.
            let q = common_prefix_len(&[&lo, &hi]);
            prop_assert!(image(&lo, q) <= image(&hi, q));
        }

        #[test]
        fn images_of_sorted_keys_are_sorted(
            mut keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..12), 0..40),
        ) {
            keys.sort();
            let got = images(&keys);
            prop_assert!(got.iter().zip(got.iter().skip(1)).all(|(x, y)| x <= y));
        }
    }
}
