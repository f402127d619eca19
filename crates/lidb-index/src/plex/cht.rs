//! The Compact Hist-Tree (CHT) of PLEX: a radix tree over the spline keys that finds, for a
//! query, a run of at most `max_error` spline points that brackets it.
//!
//! Shape. Keys are taken relative to the smallest one, `off = x - min`, an `lg`-bit number
//! (`lg = bitlen(max - min)`). Every node has `2^r` bins (`r = bin_bits`); the root's bins split
//! `off` on bits `[lg - r, lg)` (`shift = lg - r`, 0 when `lg < r`), and each level below takes the
//! next `r` bits (the width saturates at 0, so the last level may reuse a few fixed bits: bins stay
//! ordered and distinct). A bin holding more than `max_error` spline keys becomes a child node;
//! any other bin is a leaf. Keys are distinct, so a bin of width 0 holds at most one key and the
//! tree always ends.
//!
//! Layout. All nodes in one `u32` array, breadth first (the root first, children after their
//! parents): node i's bins are entries `[i * 2^r, (i + 1) * 2^r)`. A leaf entry is
//! `LEAF | begin`, `begin` the index of the first spline key in the bin (for an empty bin, of the
//! first key after it); any other entry is the index of the child node. So a lookup is one array
//! read per level, and the leaf's keys are `[begin, next)` when the next bin of the node is a leaf
//! (`next` its begin), else within `[begin, begin + max_error)`: every key before `begin` is below
//! the bin and every key past the bin's own is above it, which is all the segment search needs
//! (`radix::last_at_most`).
//!
//! Invariants: fewer than 2^31 spline keys and nodes (`LEAF` is bit 31); `bin_bits` in
//! `1..=MAX_BIN_BITS`, `max_error` in `1..=MAX_TREE_ERROR`; the nodes are exactly the ones the keys
//! define (decode rebuilds them, bounded by the stored node count, and compares).

use std::collections::VecDeque;

use crate::error::{Result, corrupt};
use crate::radix::key_range;

/// Marks a leaf entry; the other 31 bits are a spline key index.
pub const LEAF: u32 = 1 << 31;
/// The most radix bits per node the tuner and the decoder accept (a 256 KiB node).
pub const MAX_BIN_BITS: u32 = 16;
/// The largest `max_error` (spline keys per leaf) accepted.
pub const MAX_TREE_ERROR: u32 = 1 << 16;
/// Levels a lookup may descend: `r >= 1` consumes at least one of 64 bits per level.
const MAX_DEPTH: usize = 66;

/// A Compact Hist-Tree over sorted, distinct spline keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cht {
    pub bin_bits: u32,
    pub max_error: u32,
    pub shift: u32,
    pub min_key: u64,
    pub nodes: Vec<u32>,
}

/// One node waiting for its bins: its index, its keys `[begin, end)` and its bin width.
struct Pending {
    node: usize,
    begin: usize,
    end: usize,
    width: u32,
}

impl Cht {
    /// Builds the tree of `xs`, or `None` when it would take more than `max_entries` entries (or
    /// the keys or nodes outgrow 31-bit indices). Needs `1 <= bin_bits <= MAX_BIN_BITS`.
    pub fn build(xs: &[u64], bin_bits: u32, max_error: u32, max_entries: usize) -> Option<Cht> {
        debug_assert!((1..=MAX_BIN_BITS).contains(&bin_bits) && max_error >= 1);
        if xs.len() >= LEAF as usize {
            return None;
        }
        let (min_key, lg) = key_range(xs);
        let fan = 1usize << bin_bits;
        let mask = (fan - 1) as u64;
        let max_entries = max_entries.min(fan.saturating_mul(LEAF as usize - 1));
        let shift = lg.saturating_sub(bin_bits);
        let mut nodes: Vec<u32> = Vec::new();
        let alloc = |nodes: &mut Vec<u32>| -> Option<usize> {
            let at = nodes.len();
            if at + fan > max_entries {
                return None;
            }
            nodes.resize(at + fan, 0);
            Some(at / fan)
        };
        let root = alloc(&mut nodes)?;
        let mut queue = VecDeque::from([Pending {
            node: root,
            begin: 0,
            end: xs.len(),
            width: shift,
        }]);
        while let Some(p) = queue.pop_front() {
            let bin_of = |x: u64| x.wrapping_sub(min_key).checked_shr(p.width).unwrap_or(0) & mask;
            let mut i = p.begin;
            for bin in 0..fan {
                let mut j = i;
                while j < p.end && xs.get(j).is_some_and(|&x| bin_of(x) == bin as u64) {
                    j += 1;
                }
                let entry = if j - i > max_error as usize && p.width > 0 {
                    let child = alloc(&mut nodes)?;
                    queue.push_back(Pending {
                        node: child,
                        begin: i,
                        end: j,
                        width: p.width.saturating_sub(bin_bits),
                    });
                    child as u32
                } else {
                    LEAF | i as u32
                };
                if let Some(slot) = nodes.get_mut(p.node * fan + bin) {
                    *slot = entry;
                }
                i = j;
            }
            debug_assert_eq!(i, p.end, "keys of a node out of bin order");
        }
        Some(Cht {
            bin_bits,
            max_error,
            shift,
            min_key,
            nodes,
        })
    }

    /// Checks stored parts against the tree `xs` defines with the stored parameters; returns it.
    pub fn check(
        xs: &[u64],
        bin_bits: u32,
        max_error: u32,
        shift: u32,
        min_key: u64,
        nodes: Vec<u32>,
    ) -> Result<Cht> {
        if !(1..=MAX_BIN_BITS).contains(&bin_bits) {
            return Err(corrupt(format!(
                "hist-tree bin bits {bin_bits} out of range"
            )));
        }
        if !(1..=MAX_TREE_ERROR).contains(&max_error) {
            return Err(corrupt(format!(
                "hist-tree max error {max_error} out of range"
            )));
        }
        let fan = 1usize << bin_bits;
        if nodes.is_empty() || !nodes.len().is_multiple_of(fan) {
            return Err(corrupt(format!(
                "hist-tree of {} entries for {fan} bins a node",
                nodes.len()
            )));
        }
        let Some(want) = Cht::build(xs, bin_bits, max_error, nodes.len()) else {
            return Err(corrupt(
                "hist-tree has fewer nodes than its spline points need",
            ));
        };
        let stored = Cht {
            bin_bits,
            max_error,
            shift,
            min_key,
            nodes,
        };
        if want != stored {
            return Err(corrupt("hist-tree does not match the spline points"));
        }
        Ok(want)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len() >> self.bin_bits
    }

    /// The spline keys to search for q, `min <= q <= max`: the leaf bin's `[begin, end)`, where
    /// `end` is the next bin's `begin` when that bin is a leaf of the same node (the bin's exact
    /// end), else `min(begin + max_error, m)`.
    #[inline]
    pub fn range(&self, q: u64, m: usize) -> (usize, usize) {
        let off = q.wrapping_sub(self.min_key);
        let mask = (1u64 << self.bin_bits) - 1;
        let mut node = 0usize;
        let mut width = self.shift;
        for _ in 0..MAX_DEPTH {
            let bin = (off.checked_shr(width).unwrap_or(0) & mask) as usize;
            let at = (node << self.bin_bits) | bin;
            let entry = self.nodes.get(at).copied().unwrap_or(LEAF);
            if entry & LEAF != 0 {
                let begin = (entry & !LEAF) as usize;
                let cap = (begin + self.max_error as usize).min(m);
                let next = self.nodes.get(at + 1).copied().unwrap_or(0);
                let end = if bin as u64 != mask && next & LEAF != 0 {
                    ((next & !LEAF) as usize).min(cap)
                } else {
                    cap
                };
                return (begin, end);
            }
            node = entry as usize;
            width = width.saturating_sub(self.bin_bits);
        }
        (0, m)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::radix::last_at_most;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn keys(seed: u64, n: usize, spread: u64) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut k: Vec<u64> = (0..n).map(|_| rng.gen_range(0..spread)).collect();
        k.sort_unstable();
        k.dedup();
        k
    }

    /// The bracket of every query finds the same segment as a binary search over all keys, and
    /// every leaf holds at most `max_error` keys.
    #[test]
    fn lookups_match_binary_search() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let clustered: Vec<u64> = (0..3000u64)
            .map(|i| if i < 1500 { i * 3 } else { (1 << 60) + i * i })
            .collect();
        for xs in [
            keys(1, 5000, u64::MAX),
            keys(2, 5000, 1 << 20),
            keys(3, 300, 1000),
            clustered,
            vec![5, 9],
            vec![0, u64::MAX],
        ] {
            for bin_bits in [1u32, 2, 3, 5, 8, 13] {
                for max_error in [1u32, 2, 3, 7, 64] {
                    let t = Cht::build(&xs, bin_bits, max_error, usize::MAX).unwrap();
                    let again = Cht::check(
                        &xs,
                        bin_bits,
                        max_error,
                        t.shift,
                        t.min_key,
                        t.nodes.clone(),
                    );
                    assert_eq!(again, Ok(t.clone()));
                    let (x0, xl) = (xs[0], *xs.last().unwrap());
                    let qs = (0..500)
                        .map(|_| rng.gen_range(x0..xl))
                        .chain(xs[..xs.len() - 1].iter().copied());
                    for q in qs {
                        let (b, e) = t.range(q, xs.len());
                        let want = xs.partition_point(|&x| x <= q) - 1;
                        let ctx = format!("r={bin_bits} d={max_error} q={q}");
                        assert_eq!(last_at_most(&xs, b, e, q), want, "{ctx}");
                    }
                }
            }
        }
    }

    #[test]
    fn build_respects_the_entry_limit() {
        let xs = keys(5, 4000, u64::MAX);
        let t = Cht::build(&xs, 4, 2, usize::MAX).unwrap();
        assert!(t.node_count() > 1);
        assert!(Cht::build(&xs, 4, 2, t.nodes.len() - 1).is_none());
        assert_eq!(Cht::build(&xs, 4, 2, t.nodes.len()), Some(t.clone()));
        // A stored tree with one node too few or too many is rejected, never rebuilt unbounded.
        let short = t.nodes[16..].to_vec();
        assert!(Cht::check(&xs, 4, 2, t.shift, t.min_key, short).is_err());
        let mut long = t.nodes.clone();
        long.extend([LEAF; 16]);
        assert!(Cht::check(&xs, 4, 2, t.shift, t.min_key, long).is_err());
        assert!(Cht::check(&xs, 0, 2, t.shift, t.min_key, t.nodes.clone()).is_err());
        assert!(Cht::check(&xs, 4, 0, t.shift, t.min_key, t.nodes.clone()).is_err());
    }
}
