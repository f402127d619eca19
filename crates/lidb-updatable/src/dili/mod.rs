//! DILI (Li et al., "DILI: A Distribution-Driven Learned Index", VLDB 2023): internal nodes that
//! divide their key range into equal-width parts, with fanouts taken from a bottom-up tree, over
//! leaves that place every key at its predicted slot.
//!
//! Build, in two phases as in the paper: the BU-tree ([`bu`]) finds node boundaries bottom-up by
//! greedy merging under a cost; then the DILI tree is built top-down: the root spans
//! `[min key, max key]`, and a node at height h over a range gets as many equal-width children as
//! the BU-tree has nodes of height h - 1 starting in that range (a node with one such child is
//! skipped: its range goes one height down). Height 0 is a leaf: a LIPP-style node whose model is
//! the least-squares fit of its keys (the paper's local refinement), where keys that share a slot
//! become a child node built the same way ([`crate::lipp`]'s node with [`Fit::LeastSquares`]).
//!
//! Updates never change internal nodes: an insert goes to the leaf its range routes to (keys
//! beyond the root's range clamp to the first or last child) and takes an empty slot or turns a
//! conflicting slot into a child; when a leaf subtree has grown 4x since its build with at least
//! one conflict per ten inserts, it is rebuilt from its keys (leaf rebuilding). A removal empties
//! the key's slot and pulls a child's last key up.
//!
//! Invariants (checked by [`Dili::assert_invariants`]):
//! 1. every key in child i of an internal node routes to i (`(key - lb) / width`, clamped);
//! 2. every leaf satisfies the LIPP node invariants (keys at their predicted slots, sizes);
//! 3. `len` is the sum of the leaves' sizes, and in-order traversal yields increasing keys.
//!
//! Leaves lie in their parent's child array, not behind a box of their own: a lookup follows
//! one pointer less. An internal node routes by one 64-bit division.
//!
//! Single writer (`&mut self`); readers share `&self`.
//!
//! Differs from the reference (pfl-cs/DILI) and why: the reference's constants are `RHO = 0.1`,
//! `buMinFan = 16`, leaves of at most 8192 keys, fanout threshold 8192, `max_expanding_ratio = 6`
//! and `retrain_threshold = 2`, with a cost model weighted by measured cache-miss ratios; ours is
//! a simpler greedy (one left-to-right pass per level, a cost in search steps), fanouts capped at
//! 2^16, and the leaf retrain rule is LIPP's (4x growth and a conflict ratio), because DILI leaves
//! reuse our LIPP node, whose placement, conflict children, seek and invariants are already
//! tested. The reference's two-key leaves (`fan2Leaf`) are ordinary two-key LIPP children here.
//! Leaves get 2n slots from a least-squares line (the reference's `fanout = max(n, 2) << 1`)
//! rather than the reference's model chosen per leaf to minimise conflicts; LIPP's n x (gap + 1)
//! gave small leaves 6 slots a key. Deletion, which the paper treats lazily, is LIPP's pull-up.

mod bu;
mod iter;

pub use iter::Iter;

use crate::lipp::build::{Fit, build_with};
use crate::lipp::{Landing, Node};
use crate::{BulkLoadError, IndexStats, UpdatableIndex, check_strictly_increasing};

/// Largest fanout of an internal node (bounds the child array of a root over a BU level with
/// very many small segments).
const MAX_FANOUT: usize = 1 << 16;

/// A DILI index (see the module doc).
#[derive(Debug)]
pub struct Dili {
    root: Tree,
    len: u64,
}

#[derive(Debug)]
pub(crate) enum Tree {
    Inner(Inner),
    Leaf(Node),
}

/// An internal node: child i covers `[lb + i * width, lb + (i + 1) * width)`; keys below `lb`
/// go to the first child and keys past the end to the last.
#[derive(Debug)]
pub(crate) struct Inner {
    lb: u64,
    /// At least 1 and at most 2^63: a node has at least two children over a range of at most
    /// 2^64 keys.
    width: u64,
    children: Vec<Tree>,
}

impl Inner {
    fn new(lb: u64, width: u64, children: Vec<Tree>) -> Inner {
        let width = width.max(1);
        Inner {
            lb,
            width,
            children,
        }
    }

    /// `(key - lb) / width`, clamped to the children: one 64-bit division, a single
    /// instruction (the offset and the width both fit 64 bits; it is 128-bit division that is a
    /// slow library call).
    #[inline]
    pub(crate) fn route(&self, key: u64) -> usize {
        let last = self.children.len().saturating_sub(1);
        let i = key.saturating_sub(self.lb) / self.width;
        usize::try_from(i).map_or(last, |i| i.min(last))
    }
}

/// The subtree for `pairs` (sorted, every key in `[lb, ub)` except at the tree's edges) at
/// `height`, with fanouts from the BU `levels`.
fn build_tree(
    pairs: &[(u64, u64)],
    lb: u128,
    ub: u128,
    height: usize,
    levels: &[Vec<u64>],
) -> Tree {
    if height == 0 || pairs.len() <= 1 {
        return Tree::Leaf(build_with(pairs, Fit::LeastSquares));
    }
    let below = levels.get(height - 1).map_or(&[][..], Vec::as_slice);
    let start = below.partition_point(|&b| u128::from(b) < lb);
    let end = below.partition_point(|&b| u128::from(b) < ub);
    let fanout = end.saturating_sub(start).min(MAX_FANOUT);
    if fanout <= 1 {
        return build_tree(pairs, lb, ub, height - 1, levels);
    }
    let width = (ub - lb).div_ceil(fanout as u128).max(1);
    let mut children = Vec::with_capacity(fanout);
    let mut rest = pairs;
    for i in 0..fanout as u128 {
        let child_lb = lb + i * width;
        let child_ub = if i + 1 == fanout as u128 {
            ub.max(child_lb + width)
        } else {
            child_lb + width
        };
        let take = rest.partition_point(|p| u128::from(p.0) < child_ub);
        let (mine, tail) = rest.split_at(take);
        children.push(build_tree(mine, child_lb, child_ub, height - 1, levels));
        rest = tail;
    }
    Tree::Inner(Inner::new(
        u64::try_from(lb).unwrap_or(u64::MAX),
        u64::try_from(width).unwrap_or(u64::MAX),
        children,
    ))
}

impl Tree {
    /// The first pair with a key `>= key` in this subtree: in the child `key` routes to, else
    /// the smallest pair of a later child (children cover increasing key ranges).
    fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        match self {
            Tree::Leaf(node) => node.first_from(key),
            Tree::Inner(inner) => {
                let i = inner.route(key);
                inner
                    .children
                    .get(i)?
                    .first_from(key)
                    .or_else(|| inner.children.get(i + 1..)?.iter().find_map(Tree::first))
            }
        }
    }

    /// The smallest pair of this subtree.
    fn first(&self) -> Option<(u64, u64)> {
        match self {
            Tree::Leaf(node) => node.first_in(0),
            Tree::Inner(inner) => inner.children.iter().find_map(Tree::first),
        }
    }

    fn leaf(&self, key: u64) -> &Node {
        let mut tree = self;
        loop {
            match tree {
                Tree::Leaf(node) => return node,
                Tree::Inner(inner) => match inner.children.get(inner.route(key)) {
                    Some(child) => tree = child,
                    None => unreachable!("dili: internal node without children"),
                },
            }
        }
    }

    fn leaf_mut(&mut self, key: u64) -> &mut Node {
        match self {
            Tree::Leaf(node) => node,
            Tree::Inner(inner) => {
                let i = inner.route(key);
                match inner.children.get_mut(i) {
                    Some(child) => child.leaf_mut(key),
                    None => unreachable!("dili: internal node without children"),
                }
            }
        }
    }

    fn heap_bytes(&self) -> u64 {
        match self {
            // The node itself lies in its parent's child array (or in `Dili`), counted there.
            Tree::Leaf(node) => node.heap_bytes(),
            Tree::Inner(inner) => {
                (inner.children.capacity() * std::mem::size_of::<Tree>()) as u64
                    + inner.children.iter().map(Tree::heap_bytes).sum::<u64>()
            }
        }
    }

    fn shape(&self, level: u64, acc: &mut IndexStats, key_depth_sum: &mut u64) {
        match self {
            Tree::Leaf(node) => node.shape(level, acc, key_depth_sum),
            Tree::Inner(inner) => {
                acc.nodes += 1;
                acc.inner_nodes += 1;
                acc.models += 1;
                for child in &inner.children {
                    child.shape(level + 1, acc, key_depth_sum);
                }
            }
        }
    }

    /// Checks invariants 1 and 2 below this tree and appends its keys in order.
    fn check(&self, out: &mut Vec<(u64, u64)>) {
        match self {
            Tree::Leaf(node) => {
                node.check(true);
                node.collect(out);
            }
            Tree::Inner(inner) => {
                assert!(
                    inner.children.len() >= 2,
                    "dili: internal node with one child"
                );
                for (i, child) in inner.children.iter().enumerate() {
                    let from = out.len();
                    child.check(out);
                    for (key, _) in out.iter().skip(from) {
                        assert_eq!(inner.route(*key), i, "dili: key {key} under wrong child");
                    }
                }
            }
        }
    }
}

impl UpdatableIndex for Dili {
    type Iter<'a> = Iter<'a>;
    const NAME: &'static str = "dili";

    fn bulk_load(pairs: &[(u64, u64)]) -> Result<Dili, BulkLoadError> {
        check_strictly_increasing(pairs)?;
        let (Some(first), Some(last)) = (pairs.first(), pairs.last()) else {
            return Ok(Dili {
                root: Tree::Leaf(build_with(&[], Fit::LeastSquares)),
                len: 0,
            });
        };
        let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        let levels = bu::levels(&keys);
        let height = levels.len().saturating_sub(1);
        let (lb, ub) = (u128::from(first.0), u128::from(last.0) + 1);
        Ok(Dili {
            root: build_tree(pairs, lb, ub, height, &levels),
            len: pairs.len() as u64,
        })
    }

    fn get(&self, key: u64) -> Option<u64> {
        self.root.leaf(key).get(key)
    }

    fn insert(&mut self, key: u64, value: u64) -> Option<u64> {
        let leaf = self.root.leaf_mut(key);
        match leaf.landing(key) {
            Landing::Present => leaf.update(key, value),
            landing => {
                leaf.insert_new(key, value, landing == Landing::Conflict);
                self.len += 1;
                None
            }
        }
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let removed = self.root.leaf_mut(key).remove(key);
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    fn range_from(&self, key: u64) -> Iter<'_> {
        Iter::seek(&self.root, key)
    }

    fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        self.root.first_from(key)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn size_bytes(&self) -> u64 {
        std::mem::size_of::<Dili>() as u64 + self.root.heap_bytes()
    }

    fn stats(&self) -> IndexStats {
        let mut stats = IndexStats::default();
        let mut key_depth_sum = 0;
        self.root.shape(1, &mut stats, &mut key_depth_sum);
        if self.len > 0 {
            stats.depth_avg = key_depth_sum as f64 / self.len as f64;
        }
        stats
    }

    fn assert_invariants(&self) {
        let mut pairs = Vec::new();
        self.root.check(&mut pairs);
        assert_eq!(
            pairs.len() as u64,
            self.len,
            "dili: len differs from the leaves"
        );
        assert!(
            pairs.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)),
            "dili: in-order traversal is not increasing"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multiply-and-correct route equals `(key - lb) / width`, clamped, at the edges of
    /// u64 and across widths where f64 cannot hold the quotient exactly.
    #[test]
    fn route_matches_exact_division() {
        let leaf = || Tree::Leaf(build_with(&[], Fit::LeastSquares));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2_000 {
            let lb = next() >> (next() % 64);
            let width = (next() >> (next() % 64)).max(1);
            let fanout = (next() % 64 + 2) as usize;
            let inner = Inner::new(lb, width, (0..fanout).map(|_| leaf()).collect());
            for key in [0, lb, lb.saturating_add(width), u64::MAX, next(), lb ^ 1] {
                let exact = (key.saturating_sub(lb) / width).min(fanout as u64 - 1) as usize;
                assert_eq!(inner.route(key), exact, "lb {lb} width {width} key {key}");
            }
            for i in 0..fanout as u64 {
                // The first and last key of child i.
                let start = i as u128 * width as u128 + lb as u128;
                if let Ok(start) = u64::try_from(start) {
                    assert_eq!(inner.route(start), i as usize);
                    if start > lb {
                        assert_eq!(inner.route(start - 1), i as usize - 1);
                    }
                }
            }
        }
    }
}
