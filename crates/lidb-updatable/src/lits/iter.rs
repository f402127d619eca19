//! Ordered iteration over a LITS trie from a lower-bound seek.
//!
//! Slot maps are monotone in key order, so the first key `>= q` is in the subtree of q's slot
//! or the first key after it. The seek descends along q's slots; iteration walks a stack of
//! (node, next slot) frames and the rest of the current compact leaf (a leaf and a position).

use smallvec::SmallVec;

use super::hpt::Hpt;
use super::leaf::Leaf;
use super::node::{ModelNode, Slot};

/// Pairs in increasing key order from a seek (see [`crate::UpdatableBytesIndex::range_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    stack: SmallVec<[(&'a ModelNode, usize); crate::lipp::iter::INLINE_FRAMES]>,
    leaf: Option<(&'a Leaf, usize)>,
}

impl<'a> Iter<'a> {
    pub(super) fn seek(hpt: &Hpt, root: &'a ModelNode, key: &[u8]) -> Iter<'a> {
        let mut stack = SmallVec::new();
        let mut leaf = None;
        let mut node = root;
        loop {
            let slot = node.slot_of(hpt, key);
            stack.push((node, slot + 1));
            match node.slots.get(slot) {
                Some(Slot::Leaf(l)) => {
                    let at = l.find(key).unwrap_or_else(|at| at);
                    leaf = Some((l, at));
                }
                Some(Slot::Child(child)) => {
                    node = child;
                    continue;
                }
                _ => {}
            }
            break;
        }
        Iter { stack, leaf }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], u64);

    fn next(&mut self) -> Option<(&'a [u8], u64)> {
        loop {
            if let Some((leaf, at)) = &mut self.leaf {
                if *at < leaf.len() {
                    *at += 1;
                    return Some((leaf.key(*at - 1), leaf.value(*at - 1)));
                }
                self.leaf = None;
            }
            let (node, next) = self.stack.last_mut()?;
            let Some(slot) = node.slots.get(*next) else {
                self.stack.pop();
                continue;
            };
            *next += 1;
            match slot {
                Slot::Empty => {}
                Slot::Leaf(l) => self.leaf = Some((l, 0)),
                Slot::Child(child) => self.stack.push((child, 0)),
            }
        }
    }
}
