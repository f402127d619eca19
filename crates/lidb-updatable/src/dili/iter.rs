//! Ordered iteration over a DILI tree from a lower-bound seek.
//!
//! Internal nodes route by monotone equal-width ranges, so every key under an earlier child is
//! smaller than every key under a later one. The seek descends along the query's route, seeks
//! inside the leaf it reaches (the LIPP seek), and iteration goes on through the later children
//! of each internal node on the path, from a stack of (node, next child), inline up to
//! [`lipp::iter::INLINE_FRAMES`] deep so that a seek allocates nothing.

use smallvec::SmallVec;

use super::{Inner, Tree};
use crate::lipp;

/// Pairs in increasing key order from a seek (see [`crate::UpdatableIndex::range_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    stack: SmallVec<[(&'a Inner, usize); lipp::iter::INLINE_FRAMES]>,
    leaf: Option<lipp::Iter<'a>>,
}

impl<'a> Iter<'a> {
    pub(super) fn seek(root: &'a Tree, key: u64) -> Iter<'a> {
        let mut iter = Iter {
            stack: SmallVec::new(),
            leaf: None,
        };
        iter.descend(root, key);
        iter
    }

    /// Walks from `tree` to the leaf `key` routes to, then seeks there.
    fn descend(&mut self, mut tree: &'a Tree, key: u64) {
        loop {
            match tree {
                Tree::Leaf(node) => {
                    self.leaf = Some(lipp::Iter::seek(node, key));
                    return;
                }
                Tree::Inner(inner) => {
                    let i = inner.route(key);
                    self.stack.push((inner, i + 1));
                    match inner.children.get(i) {
                        Some(child) => tree = child,
                        None => return,
                    }
                }
            }
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        loop {
            if let Some(pair) = self.leaf.as_mut().and_then(Iterator::next) {
                return Some(pair);
            }
            self.leaf = None;
            let (inner, next) = self.stack.last_mut()?;
            let Some(child) = inner.children.get(*next) else {
                self.stack.pop();
                continue;
            };
            *next += 1;
            // Key 0 routes to the first child everywhere and seeks a leaf from its first slot.
            self.descend(child, 0);
        }
    }
}
