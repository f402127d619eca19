//! Key images: the order-preserving u64 that learned models see for each byte key of a table.
//!
//! A [`KeyMap`] is chosen per table (or per level) when the keys are known, stored in the table's
//! meta block, and used unchanged by every reader. Two kinds (docs/format/sstable.md, "Key
//! images"):
//! - `Bytes { prefix_len }`: the 8 bytes after the prefix, big-endian, zero-padded
//!   (`lidb_data::keymap::image`).
//! - `Decimal { prefix_len }`: for tables whose keys are all ASCII-digit strings of one length, the
//!   19 positions after the prefix read as a base-10 number (missing positions are 0). Linear in
//!   the number the digits spell, so zero-padded numeric keys (the papers' 24-byte keys) give a
//!   near-linear CDF.
//!
//! Invariants: both images are monotone (non-decreasing) over byte strings that carry the prefix,
//! and the decimal image is monotone over all byte strings. Images may tie; callers handle ties
//! with the position boundary rule and compare full keys in the last mile.
//!
//! [`KeyMapBuilder`] picks the map while keys stream by; [`KeyTails`] remembers just enough of
//! each key (at most 24 bytes) to compute its image once the map is known. Both are plain values
//! used by one thread (the table builder's).

/// Positions read by the decimal image: 19 digits always fit a u64 (10^19 - 1 < 2^64).
pub const DECIMAL_DIGITS: usize = 19;

/// Bytes of a key past the prefix that any image reads.
pub const IMAGE_WINDOW: usize = DECIMAL_DIGITS;

const TAG_BYTES: u8 = 1;
const TAG_DECIMAL: u8 = 2;

/// How a table maps its keys to u64 images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyMap {
    /// The 8 bytes after the prefix, big-endian, zero-padded.
    Bytes { prefix_len: u32 },
    /// The 19 positions after the prefix as a base-10 number (see the module doc).
    Decimal { prefix_len: u32 },
}

impl KeyMap {
    /// Length of [`KeyMap::encode`].
    pub const ENCODED_LEN: usize = 5;

    pub fn prefix_len(&self) -> u32 {
        match *self {
            KeyMap::Bytes { prefix_len } | KeyMap::Decimal { prefix_len } => prefix_len,
        }
    }

    /// The image of `key`. Keys shorter than the prefix have the image of an empty tail.
    pub fn image(&self, key: &[u8]) -> u64 {
        let tail = key.get(self.prefix_len() as usize..).unwrap_or_default();
        self.image_of_tail(tail)
    }

    /// The image of the bytes that follow the prefix.
    pub fn image_of_tail(&self, tail: &[u8]) -> u64 {
        match self {
            KeyMap::Bytes { .. } => lidb_data::keymap::image(tail, 0),
            KeyMap::Decimal { .. } => decimal_image(tail),
        }
    }

    /// Kind tag (1 bytes, 2 decimal) and prefix length, little-endian.
    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let tag = match self {
            KeyMap::Bytes { .. } => TAG_BYTES,
            KeyMap::Decimal { .. } => TAG_DECIMAL,
        };
        let p = self.prefix_len().to_le_bytes();
        [tag, p[0], p[1], p[2], p[3]]
    }

    /// Decodes exactly [`KeyMap::ENCODED_LEN`] bytes; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<KeyMap, String> {
        let [tag, a, b, c, d] = bytes else {
            return Err(format!(
                "key map is {} bytes, expected {}",
                bytes.len(),
                Self::ENCODED_LEN
            ));
        };
        let prefix_len = u32::from_le_bytes([*a, *b, *c, *d]);
        match *tag {
            TAG_BYTES => Ok(KeyMap::Bytes { prefix_len }),
            TAG_DECIMAL => Ok(KeyMap::Decimal { prefix_len }),
            t => Err(format!("unknown key map kind {t}")),
        }
    }
}

/// The decimal image of a tail: 19 positions, base 10; see the module doc for non-digits.
fn decimal_image(tail: &[u8]) -> u64 {
    let mut value: u64 = 0;
    let mut fill: Option<u64> = None;
    for i in 0..DECIMAL_DIGITS {
        let digit = match (fill, tail.get(i)) {
            (Some(f), _) => f,
            (None, None) => {
                fill = Some(0);
                0
            }
            (None, Some(&b)) if b < b'0' => {
                fill = Some(0);
                0
            }
            (None, Some(&b)) if b > b'9' => {
                fill = Some(9);
                9
            }
            (None, Some(&b)) => u64::from(b - b'0'),
        };
        // At most 19 digits: the value stays below 10^19 < 2^64.
        value = value * 10 + digit;
    }
    value
}

/// Chooses a table's [`KeyMap`] while its keys stream by in increasing order.
#[derive(Debug, Clone, Default)]
pub struct KeyMapBuilder {
    first: Option<Vec<u8>>,
    all_digits_one_length: bool,
}

impl KeyMapBuilder {
    pub fn new() -> KeyMapBuilder {
        KeyMapBuilder {
            first: None,
            all_digits_one_length: true,
        }
    }

    /// Records one key (keys must arrive in increasing order).
    pub fn observe(&mut self, key: &[u8]) {
        let first = self.first.get_or_insert_with(|| key.to_vec());
        if self.all_digits_one_length
            && (key.len() != first.len() || !key.iter().all(u8::is_ascii_digit))
        {
            self.all_digits_one_length = false;
        }
    }

    /// The first key observed, if any.
    pub fn first_key(&self) -> Option<&[u8]> {
        self.first.as_deref()
    }

    /// The map for the keys observed, `last_key` being the largest: the prefix is the common
    /// prefix of the first and last key (hence of every key), decimal when every key was an
    /// ASCII-digit string of one length (and at least one key was seen).
    pub fn finish(&self, last_key: &[u8]) -> KeyMap {
        let first = self.first.as_deref().unwrap_or(last_key);
        let prefix_len = common_prefix(first, last_key) as u32;
        if self.first.is_some() && self.all_digits_one_length {
            KeyMap::Decimal { prefix_len }
        } else {
            KeyMap::Bytes { prefix_len }
        }
    }
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count()
}

/// What [`KeyTails`] keeps of one key: where it leaves the first key, and up to
/// [`IMAGE_WINDOW`] bytes from there (fewer only when the key ends).
#[derive(Debug, Clone, Copy)]
struct Tail {
    diverge: u32,
    len: u8,
    bytes: [u8; IMAGE_WINDOW],
}

/// Remembers, for each key of a table in increasing order, enough to compute its image under the
/// map chosen at the end: 24 bytes per key, whatever the key length.
///
/// Why it works: the final prefix `p` is the common prefix of the first and last key, which is at
/// most the point `d` where any key leaves the first key. The window `[p, p + 19)` of a key is
/// then the first key's bytes `[p, d)` followed by the key's own bytes from `d`.
#[derive(Debug, Clone, Default)]
pub struct KeyTails {
    first: Vec<u8>,
    tails: Vec<Tail>,
}

impl KeyTails {
    pub fn new() -> KeyTails {
        KeyTails::default()
    }

    pub fn len(&self) -> usize {
        self.tails.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tails.is_empty()
    }

    /// Records the next key (keys must arrive in increasing order).
    pub fn push(&mut self, key: &[u8]) {
        if self.tails.is_empty() {
            self.first = key.to_vec();
        }
        let diverge = common_prefix(&self.first, key);
        let rest = key.get(diverge..).unwrap_or_default();
        let mut bytes = [0u8; IMAGE_WINDOW];
        let n = rest.len().min(IMAGE_WINDOW);
        for (dst, src) in bytes.iter_mut().zip(rest.iter()) {
            *dst = *src;
        }
        self.tails.push(Tail {
            diverge: diverge as u32,
            len: n as u8,
            bytes,
        });
    }

    /// The images of every key pushed, under `map` (whose prefix must be at most the common
    /// prefix of the keys, as [`KeyMapBuilder::finish`] gives).
    pub fn images(&self, map: &KeyMap) -> Vec<u64> {
        let p = map.prefix_len() as usize;
        let mut window = [0u8; IMAGE_WINDOW];
        self.tails
            .iter()
            .map(|t| {
                let d = (t.diverge as usize).max(p);
                let from_first = self.first.get(p..d).unwrap_or_default();
                let own = t.bytes.get(..t.len as usize).unwrap_or_default();
                let mut n = 0;
                for (dst, src) in window.iter_mut().zip(from_first.iter().chain(own.iter())) {
                    *dst = *src;
                    n += 1;
                }
                map.image_of_tail(window.get(..n).unwrap_or_default())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn padded(v: u64, width: usize) -> Vec<u8> {
        format!("{v:0width$}").into_bytes()
    }

    #[test]
    fn decimal_picked_for_equal_length_digit_keys() {
        let mut b = KeyMapBuilder::new();
        for v in [5u64, 17, 900] {
            b.observe(&padded(v, 24));
        }
        let map = b.finish(&padded(900, 24));
        assert_eq!(map, KeyMap::Decimal { prefix_len: 21 });
        // Three digits after the prefix, scaled to 19 positions.
        assert_eq!(map.image(&padded(17, 24)), 17 * 10u64.pow(16));

        let mut b = KeyMapBuilder::new();
        b.observe(b"123");
        b.observe(b"1234");
        assert_eq!(b.finish(b"1234"), KeyMap::Bytes { prefix_len: 3 });
        let mut b = KeyMapBuilder::new();
        b.observe(b"12a");
        assert!(matches!(b.finish(b"12a"), KeyMap::Bytes { .. }));
    }

    #[test]
    fn decimal_images_strictly_increase_for_distinct_padded_numbers() {
        let keys: Vec<Vec<u8>> = (0..20_000u64).map(|i| padded(i * 7919 + 3, 24)).collect();
        let mut b = KeyMapBuilder::new();
        for k in &keys {
            b.observe(k);
        }
        let map = b.finish(keys.last().map(Vec::as_slice).unwrap_or_default());
        assert!(matches!(map, KeyMap::Decimal { .. }));
        let imgs: Vec<u64> = keys.iter().map(|k| map.image(k)).collect();
        assert!(imgs.windows(2).all(|w| matches!(w, [a, b] if a < b)));
        // Linear: equal steps of the numbers give equal steps of the images.
        let steps: Vec<u64> = imgs
            .iter()
            .zip(imgs.iter().skip(1))
            .map(|(a, b)| b - a)
            .collect();
        assert!(steps.iter().all(|s| Some(s) == steps.first()));
    }

    #[test]
    fn encode_round_trip_and_errors() {
        for m in [
            KeyMap::Bytes { prefix_len: 0 },
            KeyMap::Decimal { prefix_len: 77 },
        ] {
            assert_eq!(KeyMap::decode(&m.encode()), Ok(m));
        }
        assert!(KeyMap::decode(&[1, 0, 0]).is_err());
        assert!(KeyMap::decode(&[9, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn decimal_image_saturates_non_digits() {
        let m = KeyMap::Decimal { prefix_len: 0 };
        assert_eq!(m.image(b""), 0);
        assert_eq!(m.image(b"5/"), 5 * 10u64.pow(18));
        assert_eq!(m.image(b"5:"), 5 * 10u64.pow(18) + (10u64.pow(18) - 1));
        assert_eq!(m.image(b"99999999999999999999999"), 10u64.pow(19) - 1);
    }

    proptest! {
        #[test]
        fn decimal_image_is_monotone_over_all_bytes(
            a in proptest::collection::vec(prop_oneof![b'0'..=b'9', any::<u8>()], 0..24),
            b in proptest::collection::vec(prop_oneof![b'0'..=b'9', any::<u8>()], 0..24),
        ) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let m = KeyMap::Decimal { prefix_len: 0 };
            prop_assert!(m.image(&lo) <= m.image(&hi));
        }

        #[test]
        fn tails_give_the_same_images_as_full_keys(
            mut keys in proptest::collection::btree_set(
                proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), b'0'..=b'9'], 0..40),
                1..60,
            ).prop_map(|s| s.into_iter().collect::<Vec<_>>()),
            decimal in any::<bool>(),
        ) {
            keys.sort();
            let mut b = KeyMapBuilder::new();
            let mut t = KeyTails::new();
            for k in &keys {
                b.observe(k);
                t.push(k);
            }
            let last = keys.last().cloned().unwrap_or_default();
            let map = b.finish(&last);
            let p = map.prefix_len();
            let map = if decimal { KeyMap::Decimal { prefix_len: p } } else { KeyMap::Bytes { prefix_len: p } };
            let want: Vec<u64> = keys.iter().map(|k| map.image(k)).collect();
            prop_assert_eq!(t.images(&map), want.clone());
            prop_assert!(want.windows(2).all(|w| matches!(w, [x, y] if x <= y)));
        }
    }
}
