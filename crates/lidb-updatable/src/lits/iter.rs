//! Ordered iteration over a LITS trie from a lower-bound seek.
//!
//! Slot maps are monotone in key order, so the first key `>= q` is in the subtree of q's slot
//! or the first key after it. The seek descends along q's slots; iteration walks a stack of
//! (node, next slot) frames and the rest of the current compact leaf.

use smallvec::SmallVec;

use super::hpt::Hpt;
use super::node::{ModelNode, Pair, Slot};

/// Pairs in increasing key order from a seek (see [`crate::UpdatableBytesIndex::range_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    stack: SmallVec<[(&'a ModelNode, usize); crate::lipp::iter::INLINE_FRAMES]>,
    leaf: std::slice::Iter<'a, Pair>,
}

impl<'a> Iter<'a> {
    pub(super) fn seek(hpt: &Hpt, root: &'a ModelNode, key: &[u8]) -> Iter<'a> {
        let mut stack = SmallVec::new();
        let mut leaf: &'a [Pair] = &[];
        let mut node = root;
        loop {
            let slot = node.slot_of(hpt, key);
            stack.push((node, slot + 1));
            match node.slots.get(slot) {
                Some(Slot::Leaf(pairs)) => {
                    let at = pairs.partition_point(|p| &*p.0 < key);
                    leaf = pairs.get(at..).unwrap_or_default();
                }
                Some(Slot::Child(child)) => {
                    node = child;
                    continue;
                }
                _ => {}
            }
            break;
        }
        Iter {
            stack,
            leaf: leaf.iter(),
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], u64);

    fn next(&mut self) -> Option<(&'a [u8], u64)> {
        loop {
            if let Some((key, value)) = self.leaf.next() {
                return Some((key, *value));
            }
            let (node, next) = self.stack.last_mut()?;
            let Some(slot) = node.slots.get(*next) else {
                self.stack.pop();
                continue;
            };
            *next += 1;
            match slot {
                Slot::Empty => {}
                Slot::Leaf(pairs) => self.leaf = pairs.iter(),
                Slot::Child(child) => self.stack.push((child, 0)),
            }
        }
    }
}
