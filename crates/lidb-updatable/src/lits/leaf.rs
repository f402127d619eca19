//! LITS compact leaves: up to [`LEAF_MAX`](super::node::LEAF_MAX) (key, value) pairs in key
//! order, packed into one allocation with a one-byte hash tag a key.
//!
//! The reference's compact node (`Cnode` in schencoding/lits) is an array of pointers to
//! key-value records with a hash in each pointer's high bits: a lookup scans the hashes and
//! dereferences only a match. Ours keeps the tags and puts the records themselves in the same
//! allocation (safe Rust has no tagged pointers, and one allocation is one pointer chase where a
//! record per key is one more): a point lookup reads the header's tags and then the one record
//! whose tag matches, in the same buffer; a seek binary-searches the keys in place. Before this,
//! a leaf was a `Vec` of `(Box<[u8]>, u64)`: a lookup's binary search followed a key pointer at
//! every step, and each key cost an allocation and a 24-byte pair. The buffer is a `ThinVec`
//! (its length and capacity in the allocation, one 8-byte pointer in the slot): a model node's
//! slot is then 16 bytes, not the 24 of a boxed slice's pointer and length with the enum's tag,
//! and slots are most of the index (two a key at every level).
//!
//! Layout of the buffer (`n` pairs, `w` = 2, or 4 when the records take over 64 KiB):
//!
//! | bytes | what |
//! |---|---|
//! | 1 | `n`, with bit 7 set when `w` = 4 |
//! | n | tag of each key ([`tag`]) |
//! | n × w | end of each record, from the start of the records, little-endian |
//! | rest | the records in key order: the value (u64, little-endian), then the key's bytes |
//!
//! Invariants (checked by [`Leaf::check`]): 1 ≤ n ≤ 127; keys strictly increasing; each tag is
//! its key's; the ends increase and the last is the records' length.

use thin_vec::ThinVec;

const WIDE: u8 = 0x80;
const VALUE_BYTES: usize = 8;

/// The key's one-byte hash (the top byte of a multiply-xor over its 8-byte words and length).
pub(crate) fn tag(key: &[u8]) -> u8 {
    let mut h = (key.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for chunk in key.chunks(8) {
        let mut word = [0u8; 8];
        for (d, s) in word.iter_mut().zip(chunk) {
            *d = *s;
        }
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    (h >> 56) as u8
}

#[derive(Debug)]
pub(crate) struct Leaf(ThinVec<u8>);

impl Leaf {
    /// A leaf of `pairs` (strictly increasing keys, 1 to 127 of them).
    pub(crate) fn new<'k>(pairs: impl ExactSizeIterator<Item = (&'k [u8], u64)> + Clone) -> Leaf {
        let n = pairs.len();
        debug_assert!((1..=127).contains(&n), "lits: a leaf of {n} pairs");
        let records: usize = pairs.clone().map(|(k, _)| VALUE_BYTES + k.len()).sum();
        let width = if records > usize::from(u16::MAX) {
            4
        } else {
            2
        };
        let mut buf = ThinVec::with_capacity(1 + n * (1 + width) + records);
        buf.push(n as u8 | if width == 4 { WIDE } else { 0 });
        buf.extend(pairs.clone().map(|(k, _)| tag(k)));
        let mut end = 0;
        for (k, _) in pairs.clone() {
            end += VALUE_BYTES + k.len();
            if width == 4 {
                buf.extend_from_slice(&(end as u32).to_le_bytes());
            } else {
                buf.extend_from_slice(&(end as u16).to_le_bytes());
            }
        }
        for (k, v) in pairs {
            buf.extend_from_slice(&v.to_le_bytes());
            buf.extend_from_slice(k);
        }
        Leaf(buf)
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.0.first().map_or(0, |b| b & !WIDE))
    }

    fn width(&self) -> usize {
        if self.0.first().is_some_and(|b| b & WIDE != 0) {
            4
        } else {
            2
        }
    }

    /// End of record `i` from the start of the records (0 for i = -1, as `start`).
    fn end(&self, i: usize) -> usize {
        let n = self.len();
        let at = 1 + n + i * self.width();
        match self.width() {
            4 => self
                .0
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, |b| u32::from_le_bytes(b) as usize),
            _ => self
                .0
                .get(at..at + 2)
                .and_then(|b| b.try_into().ok())
                .map_or(0, |b| usize::from(u16::from_le_bytes(b))),
        }
    }

    /// Record `i`: its value's bytes, then its key's.
    fn record(&self, i: usize) -> &[u8] {
        let n = self.len();
        let records = 1 + n * (1 + self.width());
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        self.0
            .get(records + start..records + self.end(i))
            .unwrap_or_default()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.record(i).get(VALUE_BYTES..).unwrap_or_default()
    }

    pub(crate) fn value(&self, i: usize) -> u64 {
        self.record(i)
            .first_chunk::<VALUE_BYTES>()
            .map_or(0, |b| u64::from_le_bytes(*b))
    }

    /// The value of `key`: the tags first, then the key of each record whose tag matches.
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        let t = tag(key);
        let tags = self.0.get(1..=self.len())?;
        tags.iter()
            .enumerate()
            .filter(|&(_, &x)| x == t)
            .find(|&(i, _)| self.key(i) == key)
            .map(|(i, _)| self.value(i))
    }

    /// `Ok(i)` if record i holds `key`, else `Err(i)` where it would go (binary search).
    pub(crate) fn find(&self, key: &[u8]) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// Replaces record i's value in place; returns the old one.
    pub(crate) fn set_value(&mut self, i: usize, value: u64) -> u64 {
        let old = self.value(i);
        let n = self.len();
        let at = 1 + n * (1 + self.width()) + if i == 0 { 0 } else { self.end(i - 1) };
        if let Some(b) = self.0.get_mut(at..at + VALUE_BYTES) {
            b.copy_from_slice(&value.to_le_bytes());
        }
        old
    }

    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], u64)> + Clone {
        (0..self.len()).map(|i| (self.key(i), self.value(i)))
    }

    /// This leaf with `(key, value)` inserted at `at` (from [`Leaf::find`]'s `Err`).
    pub(crate) fn inserted(&self, at: usize, key: &[u8], value: u64) -> Leaf {
        let before = self.iter().take(at);
        let after = self.iter().skip(at);
        let pairs: Vec<(&[u8], u64)> = before
            .chain(std::iter::once((key, value)))
            .chain(after)
            .collect();
        Leaf::new(pairs.into_iter())
    }

    /// This leaf without record `at` (None if that leaves it empty).
    pub(crate) fn removed(&self, at: usize) -> Option<Leaf> {
        let pairs: Vec<(&[u8], u64)> = self
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != at)
            .map(|(_, p)| p)
            .collect();
        (!pairs.is_empty()).then(|| Leaf::new(pairs.into_iter()))
    }

    /// The allocation: the `ThinVec`'s length and capacity, then the buffer (built at its
    /// exact size).
    pub(crate) fn heap_bytes(&self) -> u64 {
        (2 * std::mem::size_of::<usize>() + self.0.capacity()) as u64
    }

    /// Checks the layout invariants (the module doc).
    pub(crate) fn check(&self) {
        let n = self.len();
        assert!((1..=127).contains(&n), "lits: leaf of {n} keys");
        let records = 1 + n * (1 + self.width());
        assert_eq!(
            self.end(n - 1),
            self.0.len() - records,
            "lits: leaf's last end is not its records' length"
        );
        for i in 0..n {
            let start = if i == 0 { 0 } else { self.end(i - 1) };
            assert!(
                self.end(i) >= start + VALUE_BYTES,
                "lits: leaf record {i} shorter than its value"
            );
            assert_eq!(
                self.0.get(1 + i).copied(),
                Some(tag(self.key(i))),
                "lits: leaf tag {i} is not its key's"
            );
            if i > 0 {
                assert!(
                    self.key(i - 1) < self.key(i),
                    "lits: leaf keys not increasing"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(keys: &[&[u8]]) -> Leaf {
        Leaf::new(keys.iter().enumerate().map(|(i, k)| (*k, i as u64 * 10)))
    }

    #[test]
    fn it_answers_what_it_holds_and_nothing_else() {
        let keys: [&[u8]; 5] = [b"", b"a", b"ab", b"abc", b"b"];
        let l = leaf(&keys);
        l.check();
        assert_eq!(l.len(), 5);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(l.get(k), Some(i as u64 * 10), "{k:?}");
            assert_eq!(l.find(k), Ok(i));
            assert_eq!(l.key(i), *k);
        }
        assert_eq!(l.get(b"aa"), None);
        assert_eq!(l.find(b"aa"), Err(2));
        assert_eq!(l.find(b"c"), Err(5));
        // The ThinVec's 16 bytes, 1 + 5 tags + 5 two-byte ends, 8 bytes a value plus the keys.
        assert_eq!(l.heap_bytes(), 16 + 1 + 5 * 3 + 5 * 8 + 7);
    }

    #[test]
    fn records_over_64_kib_take_four_byte_ends() {
        let long = vec![b'x'; 40_000];
        let longer = vec![b'y'; 40_000];
        let l = leaf(&[b"a", &long, &longer]);
        l.check();
        assert_eq!(l.width(), 4);
        assert_eq!(l.get(&longer), Some(20));
        assert_eq!(l.get(&long), Some(10));
        assert_eq!(l.key(2), &longer[..]);
    }

    #[test]
    fn inserts_removals_and_value_updates_keep_the_layout() {
        let mut l = leaf(&[b"b", b"d"]);
        let Err(at) = l.find(b"c") else {
            panic!("c is not in the leaf")
        };
        l = l.inserted(at, b"c", 7);
        l.check();
        assert_eq!(
            l.iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
            [b"b", b"c", b"d"]
        );
        assert_eq!(l.set_value(1, 9), 7);
        assert_eq!(l.get(b"c"), Some(9));
        assert_eq!(l.get(b"d"), Some(10));
        let Some(shorter) = l.removed(0) else {
            panic!("two records are left")
        };
        l = shorter;
        l.check();
        assert_eq!(l.get(b"b"), None);
        assert_eq!(l.get(b"d"), Some(10));
        assert!(l.removed(0).and_then(|l| l.removed(0)).is_none());
    }

    #[test]
    fn keys_with_one_tag_are_told_apart_by_their_bytes() {
        // Two distinct keys with the same tag (found by search), both in one leaf.
        let keys: Vec<[u8; 4]> = (0u32..1000).map(u32::to_be_bytes).collect();
        let first = [0u8; 4];
        let Some(twin) = keys.iter().skip(1).find(|k| tag(*k) == tag(&first)) else {
            panic!("no second key of 1,000 shares the first's tag")
        };
        let pair = [first.as_slice(), twin.as_slice()];
        let l = leaf(&pair);
        l.check();
        assert_eq!(l.get(pair[0]), Some(0));
        assert_eq!(l.get(pair[1]), Some(10));
    }
}
