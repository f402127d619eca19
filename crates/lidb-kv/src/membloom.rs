//! An in-memory Bloom filter that grows by insertion, shared by threads without locks (atomic
//! words). The store keeps two: one over the keys written to its LSMs since the last GC (reads of
//! settled keys skip the LSM when it says no, the paper's section 4.5.2), and one over every key of
//! the store (to tell inserts from updates when estimating live data for the GC trigger).
//!
//! Invariant: a key inserted is always reported as possibly present (no false negatives); false
//! positives grow once more keys than the capacity were inserted, which only costs a wasted LSM
//! probe or an underestimate of live data.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct MemBloom {
    words: Vec<AtomicU64>,
    bits: u64,
    probes: u32,
}

/// 64-bit FNV-1a followed by a finaliser, so nearby keys spread.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl MemBloom {
    /// A filter sized for `capacity` keys at `bits_per_key` (at least 64 bits in all).
    pub fn new(capacity: u64, bits_per_key: u32) -> MemBloom {
        let bits = (capacity.max(1) * u64::from(bits_per_key.max(1))).max(64);
        let words = bits.div_ceil(64);
        let probes =
            ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32).clamp(1, 16);
        MemBloom {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            bits: words * 64,
            probes,
        }
    }

    fn positions(&self, key: &[u8]) -> impl Iterator<Item = u64> + '_ {
        let h = hash(key);
        let (h1, h2) = (h, h.rotate_left(32) | 1);
        (0..u64::from(self.probes)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % self.bits)
    }

    pub fn insert(&self, key: &[u8]) {
        for bit in self.positions(key) {
            if let Some(w) = self.words.get((bit / 64) as usize) {
                w.fetch_or(1 << (bit % 64), Ordering::Relaxed);
            }
        }
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.positions(key).all(|bit| {
            self.words
                .get((bit / 64) as usize)
                .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (bit % 64)) != 0)
        })
    }

    pub fn size_bytes(&self) -> u64 {
        self.bits / 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let f = MemBloom::new(10_000, 10);
        for i in 0..10_000u32 {
            f.insert(&i.to_be_bytes());
        }
        assert!((0..10_000u32).all(|i| f.may_contain(&i.to_be_bytes())));
        let fp = (10_000..110_000u32)
            .filter(|i| f.may_contain(&i.to_be_bytes()))
            .count();
        // 10 bits per key: about 0.8% in theory.
        assert!(fp < 2_000, "false positive rate {}%", fp as f64 / 1_000.0);
    }
}
