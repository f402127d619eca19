//! The u64 image of a key the model sees: the 8 bytes after the prefix every boundary key of the
//! table shares, big-endian, zero-padded. Keys outside the prefix map to 0 (below it) or
//! `u64::MAX` (above it). The image is order-preserving up to ties: `a <= b` implies
//! `image(a) <= image(b)`. Ties (keys that differ only after those 8 bytes) are resolved by the
//! byte comparisons over slots and by the fence check, never by the image.

use std::cmp::Ordering;

use crate::node::key_head;

/// The image of `key` under a table whose boundary keys share `prefix`.
pub(crate) fn image(prefix: &[u8], key: &[u8]) -> u64 {
    let n = prefix.len().min(key.len());
    match key.get(..n).unwrap_or_default().cmp(prefix) {
        Ordering::Less => 0,
        Ordering::Greater => u64::MAX,
        // A key shorter than the prefix is a prefix of it: below every key extending it.
        Ordering::Equal if key.len() < prefix.len() => 0,
        Ordering::Equal => key_head(key.get(n..).unwrap_or_default()),
    }
}

/// The longest prefix all `keys` share (empty for none).
pub(crate) fn common_prefix<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let Some(first) = keys.next() else {
        return Vec::new();
    };
    let mut len = first.len();
    for k in keys {
        len = first
            .iter()
            .zip(k)
            .take(len)
            .take_while(|(a, b)| a == b)
            .count();
    }
    first.get(..len).unwrap_or_default().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_preserves_order() {
        let prefix = b"user".to_vec();
        let keys: Vec<&[u8]> = vec![
            b"",
            b"a",
            b"us",
            b"user",
            b"user\0",
            b"user0001",
            b"user00010",
            b"user9",
            b"v",
        ];
        for pair in keys.windows(2) {
            if let [a, b] = pair {
                assert!(a < b);
                assert!(image(&prefix, a) <= image(&prefix, b), "{a:?} {b:?}");
            }
        }
        assert_eq!(
            common_prefix([b"user1".as_slice(), b"user22", b"user3"].into_iter()),
            b"user"
        );
    }
}
