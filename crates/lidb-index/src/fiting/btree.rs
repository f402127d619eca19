//! The static B+-tree of a FITing-Tree: a bulk-loaded, read-only tree over the segments' first
//! keys, used by `fiting.rs` to route a query to its segment.
//!
//! Layout: the leaf level is the sorted array of segment keys itself (owned by the caller, not
//! stored here); inner level 1 holds the first key of every node of `fanout` consecutive leaf
//! keys, level 2 the first key of every `fanout` keys of level 1, and so on until a level fits in
//! one node (at most `fanout` keys), which is the root. Nodes are implicit: node `i` of a level
//! is entries `[i * fanout, (i + 1) * fanout)`, and its children are node `i * fanout + c` of the
//! level below. There are no child pointers; the separators are what the tree costs in memory
//! (about `segments / (fanout - 1)` keys), and they are encoded, so `size_bytes` counts them.
//!
//! Invariants (checked by [`StaticTree::read`]): `fanout >= 2`; level `l + 1` is exactly every
//! `fanout`-th key of level `l`; the top level has at most `fanout` keys, and no level above it
//! exists. Lookup then returns exactly what a binary search over the leaf keys returns.

use crate::codec::{PutLe, Reader};
use crate::error::{Result, corrupt};

/// Nodes up to this many keys are searched by a linear count rather than a binary search.
const LINEAR_NODE: usize = 32;

/// Inner levels of separator keys, bottom-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticTree {
    fanout: usize,
    levels: Vec<Vec<u64>>,
}

/// The inner levels a bulk load over `leaves` produces.
fn bulk_load(leaves: &[u64], fanout: usize) -> Vec<Vec<u64>> {
    let mut levels: Vec<Vec<u64>> = Vec::new();
    loop {
        let below = levels.last().map_or(leaves, Vec::as_slice);
        if below.len() <= fanout {
            return levels;
        }
        let level = below.iter().step_by(fanout).copied().collect();
        levels.push(level);
    }
}

impl StaticTree {
    /// Bulk-loads the tree over sorted, strictly increasing `leaves`; `fanout >= 2`.
    pub fn build(leaves: &[u64], fanout: u32) -> StaticTree {
        let fanout = (fanout as usize).max(2);
        StaticTree {
            fanout,
            levels: bulk_load(leaves, fanout),
        }
    }

    /// Number of inner (separator) levels; 0 when the leaves fit in one node.
    pub fn inner_levels(&self) -> usize {
        self.levels.len()
    }

    /// Separator keys over all inner levels.
    pub fn separators(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// The index of the last leaf key `<= q`, or 0 when there is none: the same answer as
    /// `leaves.partition_point(|&k| k <= q).saturating_sub(1)`, found by descending the tree.
    #[inline]
    pub fn route(&self, leaves: &[u64], q: u64) -> usize {
        let f = self.fanout;
        let mut idx = 0usize;
        for level in self.levels.iter().rev().map(Vec::as_slice).chain([leaves]) {
            let start = idx * f;
            let node = level
                .get(start..(start + f).min(level.len()))
                .unwrap_or_default();
            // Small nodes: a branch-free count of the keys <= q; large ones: binary search.
            let le = if f <= LINEAR_NODE {
                node.iter().map(|&k| usize::from(k <= q)).sum::<usize>()
            } else {
                node.partition_point(|&k| k <= q)
            };
            idx = start + le.saturating_sub(1);
        }
        idx
    }

    /// Encoded length: the level count, then each level as a count and its keys.
    pub fn encoded_len(&self) -> u64 {
        8 + self
            .levels
            .iter()
            .map(|l| 8 + 8 * l.len() as u64)
            .sum::<u64>()
    }

    /// Writes the inner levels (the fanout is written by the caller, before the leaves).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.levels.len() as u64);
        for level in &self.levels {
            out.put_u64(level.len() as u64);
            level.iter().for_each(|&k| out.put_u64(k));
        }
    }

    /// Reads the inner levels written by [`StaticTree::write`] over `leaves` and checks they are
    /// exactly the bulk load of `leaves` with `fanout`.
    pub fn read(r: &mut Reader<'_>, leaves: &[u64], fanout: u32) -> Result<StaticTree> {
        if fanout < 2 {
            return Err(corrupt(format!("B+-tree fanout {fanout} is below 2")));
        }
        let count = r.count(8, "B+-tree level")?;
        let mut levels = Vec::with_capacity(count);
        for _ in 0..count {
            let len = r.count(8, "B+-tree key")?;
            levels.push(r.u64_vec(len)?);
        }
        let tree = StaticTree {
            fanout: fanout as usize,
            levels,
        };
        if tree != StaticTree::build(leaves, fanout) {
            return Err(corrupt(format!(
                "B+-tree levels are not the bulk load of {} segment keys with fanout {fanout}",
                leaves.len()
            )));
        }
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn reference(leaves: &[u64], q: u64) -> usize {
        leaves.partition_point(|&k| k <= q).saturating_sub(1)
    }

    fn sorted_unique(rng: &mut ChaCha8Rng, len: usize) -> Vec<u64> {
        let mut keys: Vec<u64> = (0..len).map(|_| rng.r#gen()).collect();
        keys.extend([0, u64::MAX].iter().take(rng.gen_range(0..3)));
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    #[test]
    fn lookup_equals_binary_search_for_every_fanout_and_size() {
        let seed = 0xf17;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut sizes: Vec<usize> = (0..=70).collect();
        sizes.extend([255, 256, 257, 1000, 4095, 4096, 4097, 10_000]);
        for fanout in 2..=64u32 {
            for &size in &sizes {
                let leaves = sorted_unique(&mut rng, size);
                let tree = StaticTree::build(&leaves, fanout);
                let mut qs = vec![0, 1, u64::MAX, u64::MAX - 1];
                let sample = leaves.iter().step_by((leaves.len() / 200).max(1));
                for &k in sample {
                    qs.extend([k.wrapping_sub(1), k, k.wrapping_add(1)]);
                }
                qs.extend((0..50).map(|_| rng.r#gen::<u64>()));
                for q in qs {
                    assert_eq!(
                        tree.route(&leaves, q),
                        reference(&leaves, q),
                        "seed={seed} fanout={fanout} leaves={size} q={q}"
                    );
                }
            }
        }
    }

    #[test]
    fn levels_shrink_by_the_fanout_until_one_node_is_left() {
        let leaves: Vec<u64> = (0..10_000).collect();
        let tree = StaticTree::build(&leaves, 16);
        let lens: Vec<usize> = tree.levels.iter().map(Vec::len).collect();
        assert_eq!(lens, vec![625, 40, 3]);
        assert_eq!(tree.inner_levels(), 3);
        assert_eq!(StaticTree::build(&leaves[..16], 16).inner_levels(), 0);
        assert_eq!(StaticTree::build(&leaves[..17], 16).inner_levels(), 1);
    }

    #[test]
    fn round_trip_and_rejection_of_foreign_levels() {
        let leaves: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        let tree = StaticTree::build(&leaves, 8);
        let mut out = Vec::new();
        tree.write(&mut out);
        assert_eq!(out.len() as u64, tree.encoded_len());
        let back = StaticTree::read(&mut Reader::new(&out), &leaves, 8).unwrap();
        assert_eq!(back, tree);
        assert!(StaticTree::read(&mut Reader::new(&out), &leaves[1..], 8).is_err());
        assert!(StaticTree::read(&mut Reader::new(&out), &leaves, 9).is_err());
        assert!(StaticTree::read(&mut Reader::new(&out), &leaves, 1).is_err());
        assert!(StaticTree::read(&mut Reader::new(&out[..out.len() - 1]), &leaves, 8).is_err());
    }
}
