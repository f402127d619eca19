//! An in-memory Bloom filter that grows with the keys put into it, shared by threads without
//! locks (atomic words). The store keeps two: one over the keys written to its LSMs since the
//! last GC (reads of settled keys skip the LSM when it says no, the paper's section 4.5.2), and
//! one over every key of the store (to tell inserts from updates when estimating live data for
//! the GC trigger).
//!
//! It is a scalable Bloom filter (Almeida et al., "Scalable Bloom Filters"): a list of stages,
//! each a blocked Bloom filter (Putze et al., "Cache-, Hash- and Space-Efficient Bloom Filters":
//! a key's bits all lie in one 64-byte block, so a probe of a stage is one cache line). Only the
//! newest stage takes keys; once it holds its capacity, a stage of twice the capacity and one bit
//! a key more is added. A lookup asks every stage. The filter's memory follows the keys it holds
//! (about 1.2 to 2.5 times their bits at the nominal rate) instead of a capacity guessed at open:
//! a store opened empty and loaded with 200K keys held 2.5 MB of filter sized for a million and
//! gave its cache that much less.
//!
//! Invariant: a key inserted is always reported as possibly present (no false negatives). False
//! positives stay near the sum of the stages' rates (each stage's is lower than the last one's):
//! 0.9% for one stage at 10 bits a key, 2.6% over seven (measured, the unit tests); each costs
//! a wasted LSM probe (the LSM's own table filters then answer) or an underestimate of live
//! data. Tighter later stages would cost more memory than the probes they save.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stages a filter may add: the last one's capacity is the first's times 2^31, far beyond any
/// store; a full last stage keeps taking keys (its false positive rate rises, nothing is lost).
const MAX_STAGES: usize = 32;

/// Bits a probe position takes from the hash (a 512-bit block), and the most probes one 64-bit
/// hash word gives.
const BLOCK_BITS: u64 = 512;
const MAX_PROBES: u32 = 7;

#[derive(Debug)]
#[repr(align(64))]
struct Block([AtomicU64; 8]);

#[derive(Debug)]
struct Stage {
    blocks: Box<[Block]>,
    /// Keys this stage is sized for; the insert that fills it adds the next stage.
    capacity: u64,
    added: AtomicU64,
    probes: u32,
}

impl Stage {
    fn new(capacity: u64, bits_per_key: u32) -> Stage {
        let bits = capacity
            .saturating_mul(u64::from(bits_per_key))
            .max(BLOCK_BITS);
        let blocks = bits.div_ceil(BLOCK_BITS);
        let probes = ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32)
            .clamp(1, MAX_PROBES);
        Stage {
            blocks: (0..blocks)
                .map(|_| Block(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            capacity,
            added: AtomicU64::new(0),
            probes,
        }
    }

    /// The key's block (never None: the index is below the length), and its probes' words and
    /// bit masks inside it (9 bits each of a second hash).
    fn probe(&self, h: u64) -> (Option<&Block>, impl Iterator<Item = (usize, u64)>) {
        // Multiply-shift: an index in [0, blocks) with no division.
        let index = ((u128::from(h) * self.blocks.len() as u128) >> 64) as usize;
        let g = (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let bits = (0..self.probes).map(move |i| {
            let bit = (g >> (9 * i)) & (BLOCK_BITS - 1);
            ((bit / 64) as usize, 1 << (bit % 64))
        });
        (self.blocks.get(index), bits)
    }

    fn set(&self, h: u64) {
        let (block, bits) = self.probe(h);
        for (word, mask) in bits {
            if let Some(w) = block.and_then(|b| b.0.get(word)) {
                w.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// A word that is not there reads as all ones: never a false negative.
    fn may_contain(&self, h: u64) -> bool {
        let (block, mut bits) = self.probe(h);
        bits.all(|(word, mask)| {
            block
                .and_then(|b| b.0.get(word))
                .is_none_or(|w| w.load(Ordering::Relaxed) & mask != 0)
        })
    }

    fn size_bytes(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS / 8
    }
}

/// What `MemBloom::insert` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The filter already said the key may be present; nothing changed.
    Present,
    /// The key was added.
    New,
    /// The key was added and filled its stage: a larger stage was added, so the filter's memory
    /// grew (a store under a memory budget refits its cache).
    Grew,
}

#[derive(Debug)]
pub struct MemBloom {
    stages: [OnceLock<Stage>; MAX_STAGES],
    /// The stage inserts go to; every stage up to it is set.
    newest: AtomicUsize,
    bits_per_key: u32,
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
    /// A filter whose first stage holds `capacity` keys at `bits_per_key`; it grows past that.
    pub fn new(capacity: u64, bits_per_key: u32) -> MemBloom {
        let bits_per_key = bits_per_key.max(1);
        let stages: [OnceLock<Stage>; MAX_STAGES] = std::array::from_fn(|_| OnceLock::new());
        if let Some(first) = stages.first() {
            let _ = first.set(Stage::new(capacity.max(1), bits_per_key));
        }
        MemBloom {
            stages,
            newest: AtomicUsize::new(0),
            bits_per_key,
        }
    }

    fn stages(&self) -> impl Iterator<Item = &Stage> {
        let newest = self.newest.load(Ordering::Acquire);
        self.stages
            .iter()
            .take(newest + 1)
            .filter_map(OnceLock::get)
    }

    /// Adds `key` unless the filter already says it may be present.
    pub fn insert(&self, key: &[u8]) -> Inserted {
        let h = hash(key);
        if self.stages().any(|s| s.may_contain(h)) {
            return Inserted::Present;
        }
        let i = self.newest.load(Ordering::Acquire);
        // Stage i is set before `newest` names it, so this finds it.
        let Some(stage) = self.stages.get(i).and_then(OnceLock::get) else {
            return Inserted::Present;
        };
        stage.set(h);
        // Exactly one insert sees the count reach the capacity: it adds the next stage. Inserts
        // racing with it still land in this stage (a little over its capacity). The last stage
        // has no next one and keeps taking keys.
        let filled = stage.added.fetch_add(1, Ordering::Relaxed) + 1 == stage.capacity;
        let Some(next) = self.stages.get(i + 1).filter(|_| filled) else {
            return Inserted::New;
        };
        let tighter = u32::try_from(i + 1).unwrap_or(u32::MAX);
        next.get_or_init(|| {
            Stage::new(
                stage.capacity.saturating_mul(2),
                self.bits_per_key.saturating_add(tighter),
            )
        });
        self.newest.store(i + 1, Ordering::Release);
        Inserted::Grew
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        let h = hash(key);
        self.stages().any(|s| s.may_contain(h))
    }

    pub fn size_bytes(&self) -> u64 {
        self.stages().map(Stage::size_bytes).sum()
    }

    /// Stages in use (1 until the first stage fills).
    pub fn stage_count(&self) -> usize {
        self.newest.load(Ordering::Acquire) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> [u8; 8] {
        i.to_be_bytes()
    }

    fn false_positive_rate(f: &MemBloom, absent: std::ops::Range<u64>) -> f64 {
        let n = absent.end - absent.start;
        absent.filter(|&i| f.may_contain(&key(i))).count() as f64 / n as f64
    }

    #[test]
    fn no_false_negatives_and_few_false_positives_within_capacity() {
        let f = MemBloom::new(10_000, 10);
        for i in 0..10_000 {
            f.insert(&key(i));
        }
        assert_eq!(f.stage_count(), 1);
        assert!((0..10_000).all(|i| f.may_contain(&key(i))));
        // 10 bits a key in 512-bit blocks: about 1% (0.8% unblocked).
        let fp = false_positive_rate(&f, 1_000_000..1_100_000);
        assert!(fp < 0.02, "false positive rate {:.3}%", fp * 100.0);
    }

    #[test]
    fn it_grows_with_the_keys_and_its_memory_follows_them() {
        let f = MemBloom::new(1_000, 10);
        let first = f.size_bytes();
        let mut grew = 0;
        for i in 0..100_000 {
            if f.insert(&key(i)) == Inserted::Grew {
                grew += 1;
            }
        }
        // Stages of 1K, 2K, 4K, ..., 64K keys hold 127K: 7 stages, 6 growths.
        assert_eq!(grew, 6);
        assert_eq!(f.stage_count(), 7);
        assert!((0..100_000).all(|i| f.may_contain(&key(i))));
        // Bits of every stage: 1K*10 + 2K*11 + ... + 64K*16 = 1.91M bits, about 19 bits for each
        // of the 100K keys (the newest stage is not full), and more than 100 times the first's.
        let bytes = f.size_bytes();
        assert!(
            bytes > 100 * first,
            "{bytes} bytes after growing from {first}"
        );
        assert!(bytes < 100_000 * 20 / 8, "{bytes} bytes for 100K keys");
        let fp = false_positive_rate(&f, 1_000_000..1_200_000);
        assert!(
            fp < 0.03,
            "false positive rate {:.3}% over 7 stages",
            fp * 100.0
        );
    }

    #[test]
    fn a_key_already_reported_is_not_added_again() {
        let f = MemBloom::new(100, 10);
        assert_eq!(f.insert(b"a"), Inserted::New);
        assert_eq!(f.insert(b"a"), Inserted::Present);
        // The repeat did not count toward the stage's capacity: 99 more new keys fill it.
        let mut results = Vec::new();
        let mut i = 0u64;
        while results.len() < 99 {
            match f.insert(&key(i)) {
                Inserted::Present => {}
                r => results.push(r),
            }
            i += 1;
        }
        assert_eq!(results.last(), Some(&Inserted::Grew));
        assert!(results.iter().take(98).all(|&r| r == Inserted::New));
    }

    #[test]
    fn threads_inserting_across_growths_lose_no_key() {
        // A tiny first stage so that many growths race with inserts and lookups.
        let f = std::sync::Arc::new(MemBloom::new(16, 10));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let f = std::sync::Arc::clone(&f);
                std::thread::spawn(move || {
                    let (mut added, mut grew) = (0u64, 0usize);
                    for i in (0..5_000u64).map(|i| i * 8 + t) {
                        match f.insert(&key(i)) {
                            Inserted::Present => {}
                            Inserted::New => added += 1,
                            Inserted::Grew => {
                                added += 1;
                                grew += 1;
                            }
                        }
                        // Visible to its own thread at once, whatever stage it went to.
                        assert!(f.may_contain(&key(i)), "key {i} lost right after insert");
                    }
                    (added, grew)
                })
            })
            .collect();
        let (mut added, mut grew) = (0, 0);
        for t in threads {
            let Ok((a, g)) = t.join() else {
                panic!("an inserting thread panicked")
            };
            added += a;
            grew += g;
        }
        assert!((0..40_000).all(|i| f.may_contain(&key(i))));
        // Every stage up to the newest is set (the newest is published after its stage), each
        // growth added exactly one, and every key added counted in exactly one stage.
        assert_eq!(f.stages().count(), f.stage_count());
        assert_eq!(grew + 1, f.stage_count());
        assert_eq!(
            f.stages()
                .map(|s| s.added.load(Ordering::Relaxed))
                .sum::<u64>(),
            added
        );
        // 16 * (2^10 - 1) = 16,368 keys fill 10 stages: 40,000 (less false positives, and
        // the inserts that raced past a full stage) fill more.
        assert!(f.stage_count() >= 10, "{} stages", f.stage_count());
    }
}
