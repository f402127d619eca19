//! Ordered iteration over ALEX: from a lower-bound seek in one data node along the leaf links.

use super::{Alex, NodeId};

/// Pairs in increasing key order from a seek (see [`crate::UpdatableIndex::range_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    alex: &'a Alex,
    leaf: Option<NodeId>,
    slot: usize,
}

impl<'a> Iter<'a> {
    pub(super) fn new(alex: &'a Alex, leaf: Option<NodeId>, slot: usize) -> Iter<'a> {
        Iter { alex, leaf, slot }
    }
}

impl Iterator for Iter<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        loop {
            let node = self.alex.data(self.leaf?)?;
            match node.next_occupied(self.slot) {
                Some(slot) => {
                    self.slot = slot + 1;
                    return node.pair_at(slot);
                }
                None => {
                    self.leaf = node.next;
                    self.slot = 0;
                }
            }
        }
    }
}
