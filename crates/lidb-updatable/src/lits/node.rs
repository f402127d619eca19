//! LITS model nodes and compact leaves.
//!
//! A model node holds the longest common prefix of the keys it was built for, the CDF (from the
//! [`Hpt`]) of its first and last key read past that prefix, and an array of slots. A key's slot
//! compares its head with the prefix (smaller: slot 0; larger: the last slot) and otherwise maps
//! its CDF linearly from `[cdf_first, cdf_last]` onto the slots, so the map is monotone in key
//! order and the first and last built key land in different slots (the HPT separates keys that
//! differ right after the prefix). A slot is empty, a compact leaf (at most [`LEAF_MAX`] pairs
//! packed in key order in one allocation, [`Leaf`]), or a child model node for a larger group.
//!
//! Invariants (checked by [`ModelNode::check`]):
//! 1. every key stored under slot s of node N has `N.slot_of(key) == s`;
//! 2. leaves are non-empty, strictly increasing, at most `LEAF_MAX` long (and [`Leaf::check`]);
//! 3. `size` counts the subtree's keys, and a child node holds more than [`MERGE_AT`] keys.

use std::cmp::Ordering;

use super::hpt::{Hpt, MIN_RESOLUTION};
use super::leaf::Leaf;
use crate::IndexStats;

/// Largest compact leaf; one more key turns it into a child model node.
pub(crate) const LEAF_MAX: usize = 16;
/// A child node left with this many keys by removals becomes a compact leaf again.
pub(crate) const MERGE_AT: u64 = (LEAF_MAX / 2) as u64;
/// Slots of a model node per key it is built for (at least [`MIN_SLOTS`]; the reference's
/// item-array scale factor).
const SLOTS_PER_KEY: usize = 2;
const MIN_SLOTS: usize = 4;
/// A node whose subtree has grown this many times its built size (and past a leaf) is rebuilt.
const REBUILD_GROWTH: u64 = 2;

pub(crate) type Pair = (Box<[u8]>, u64);

#[derive(Debug)]
pub(crate) struct ModelNode {
    prefix: Box<[u8]>,
    cdf_first: u64,
    cdf_last: u64,
    /// The CDF width of one slot, `(cdf_last - cdf_first) / (slots - 1)`, at least
    /// [`MIN_RESOLUTION`]: a lookup's CDF stops reading symbols below it ([`Hpt::cdf_to`]).
    cdf_per_slot: u64,
    pub(super) slots: Vec<Slot>,
    pub(super) size: u64,
    build_size: u64,
}

#[derive(Debug)]
pub(crate) enum Slot {
    Empty,
    Leaf(Leaf),
    Child(Box<ModelNode>),
}

// Slots are most of the index's bytes (two a key at every level): a tag and one thin pointer.
const _: () = assert!(std::mem::size_of::<Slot>() == 16);

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The compact leaf of a group of at most [`LEAF_MAX`] pairs.
fn leaf_of(group: &[Pair]) -> Leaf {
    Leaf::new(group.iter().map(|(k, v)| (&**k, *v)))
}

impl ModelNode {
    /// A node for `pairs` (strictly increasing by key); groups that share a slot become leaves
    /// or, past `LEAF_MAX`, child nodes built the same way.
    pub(crate) fn build(hpt: &Hpt, pairs: Vec<Pair>) -> ModelNode {
        let (prefix, cdf_first, cdf_last) = match (pairs.first(), pairs.last()) {
            (Some(first), Some(last)) if pairs.len() >= 2 => {
                let lcp = common_prefix_len(&first.0, &last.0);
                let prefix: Box<[u8]> = first.0.get(..lcp).unwrap_or_default().into();
                (prefix, hpt.cdf(&first.0, lcp), hpt.cdf(&last.0, lcp))
            }
            _ => (Box::default(), 0, u64::MAX),
        };
        let slot_count = (pairs.len() * SLOTS_PER_KEY).max(MIN_SLOTS);
        let size = pairs.len() as u64;
        let cdf_per_slot = (cdf_last.saturating_sub(cdf_first) / (slot_count as u64 - 1).max(1))
            .max(MIN_RESOLUTION);
        let mut node = ModelNode {
            prefix,
            cdf_first,
            cdf_last,
            cdf_per_slot,
            slots: Vec::with_capacity(slot_count),
            size,
            build_size: size,
        };
        node.slots.resize_with(slot_count, || Slot::Empty);
        let mut group: Vec<Pair> = Vec::new();
        let mut group_slot = 0;
        for pair in pairs {
            let s = node.slot_of(hpt, &pair.0);
            if s != group_slot && !group.is_empty() {
                node.place(hpt, group_slot, std::mem::take(&mut group));
            }
            group_slot = s;
            group.push(pair);
        }
        if !group.is_empty() {
            node.place(hpt, group_slot, group);
        }
        node
    }

    fn place(&mut self, hpt: &Hpt, slot: usize, group: Vec<Pair>) {
        let entry = if group.len() <= LEAF_MAX {
            Slot::Leaf(leaf_of(&group))
        } else {
            Slot::Child(Box::new(ModelNode::build(hpt, group)))
        };
        if let Some(s) = self.slots.get_mut(slot) {
            *s = entry;
        }
    }

    /// The slot `key` belongs to (see the module doc).
    pub(crate) fn slot_of(&self, hpt: &Hpt, key: &[u8]) -> usize {
        let last = self.slots.len().saturating_sub(1);
        let head = key.get(..self.prefix.len()).unwrap_or(key);
        match head.cmp(&self.prefix) {
            Ordering::Less => 0,
            Ordering::Greater => last,
            Ordering::Equal => {
                let cdf = hpt.cdf_to(key, self.prefix.len(), self.cdf_per_slot);
                if cdf <= self.cdf_first {
                    0
                } else if cdf >= self.cdf_last {
                    last
                } else {
                    let span = u128::from(self.cdf_last - self.cdf_first);
                    let at = u128::from(cdf - self.cdf_first) * last as u128 / span;
                    (at as usize).min(last)
                }
            }
        }
    }

    pub(crate) fn get(&self, hpt: &Hpt, key: &[u8]) -> Option<u64> {
        let mut node = self;
        loop {
            match node.slots.get(node.slot_of(hpt, key))? {
                Slot::Empty => return None,
                Slot::Leaf(leaf) => return leaf.get(key),
                Slot::Child(child) => node = child,
            }
        }
    }

    /// Inserts or updates; returns the replaced value. A leaf that overflows becomes a child
    /// node, and a node that has grown past its rebuild threshold is rebuilt.
    pub(crate) fn insert(&mut self, hpt: &Hpt, key: &[u8], value: u64) -> Option<u64> {
        let s = self.slot_of(hpt, key);
        let entry = self.slots.get_mut(s)?;
        let replaced = match entry {
            Slot::Empty => {
                *entry = Slot::Leaf(Leaf::new(std::iter::once((key, value))));
                None
            }
            Slot::Leaf(leaf) => match leaf.find(key) {
                Ok(i) => Some(leaf.set_value(i, value)),
                Err(i) if leaf.len() < LEAF_MAX => {
                    *leaf = leaf.inserted(i, key, value);
                    None
                }
                Err(i) => {
                    let mut group: Vec<Pair> = leaf.iter().map(|(k, v)| (k.into(), v)).collect();
                    group.insert(i, (key.into(), value));
                    *entry = Slot::Child(Box::new(ModelNode::build(hpt, group)));
                    None
                }
            },
            Slot::Child(child) => child.insert(hpt, key, value),
        };
        if replaced.is_none() {
            self.size += 1;
            if self.needs_rebuild() {
                self.rebuild(hpt);
            }
        }
        replaced
    }

    pub(crate) fn needs_rebuild(&self) -> bool {
        self.size > self.build_size.max(LEAF_MAX as u64) * REBUILD_GROWTH
    }

    pub(crate) fn rebuild(&mut self, hpt: &Hpt) {
        *self = ModelNode::build(hpt, self.take_pairs());
    }

    /// Removes `key`; a child left with `MERGE_AT` keys or fewer becomes a leaf.
    pub(crate) fn remove(&mut self, hpt: &Hpt, key: &[u8]) -> Option<u64> {
        let s = self.slot_of(hpt, key);
        let entry = self.slots.get_mut(s)?;
        let removed = match entry {
            Slot::Empty => None,
            Slot::Leaf(leaf) => {
                let i = leaf.find(key).ok()?;
                let value = leaf.value(i);
                *entry = leaf.removed(i).map_or(Slot::Empty, Slot::Leaf);
                Some(value)
            }
            Slot::Child(child) => {
                let removed = child.remove(hpt, key)?;
                if child.size <= MERGE_AT {
                    *entry = Slot::Leaf(leaf_of(&child.take_pairs()));
                }
                Some(removed)
            }
        };
        if removed.is_some() {
            self.size -= 1;
        }
        removed
    }

    /// Moves the subtree's pairs out in key order (the node is left empty).
    pub(crate) fn take_pairs(&mut self) -> Vec<Pair> {
        let mut out = Vec::with_capacity(self.size as usize);
        self.drain_into(&mut out);
        self.size = 0;
        out
    }

    fn drain_into(&mut self, out: &mut Vec<Pair>) {
        for slot in &mut self.slots {
            match std::mem::replace(slot, Slot::Empty) {
                Slot::Empty => {}
                Slot::Leaf(leaf) => out.extend(leaf.iter().map(|(k, v)| (k.into(), v))),
                Slot::Child(mut child) => child.drain_into(out),
            }
        }
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        let own = (self.prefix.len() + self.slots.capacity() * std::mem::size_of::<Slot>()) as u64;
        own + self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::Empty => 0,
                Slot::Leaf(leaf) => leaf.heap_bytes(),
                Slot::Child(c) => std::mem::size_of::<ModelNode>() as u64 + c.heap_bytes(),
            })
            .sum::<u64>()
    }

    /// Adds this subtree's shape to `acc`; a leaf sits one level below its node.
    pub(crate) fn shape(&self, level: u64, acc: &mut IndexStats, key_depth_sum: &mut u64) {
        acc.nodes += 1;
        acc.inner_nodes += 1;
        acc.models += 1;
        for slot in &self.slots {
            match slot {
                Slot::Empty => {}
                Slot::Leaf(leaf) => {
                    acc.nodes += 1;
                    acc.leaf_nodes += 1;
                    acc.depth_max = acc.depth_max.max(level + 1);
                    *key_depth_sum += (level + 1) * leaf.len() as u64;
                }
                Slot::Child(c) => c.shape(level + 1, acc, key_depth_sum),
            }
        }
    }

    /// Checks invariants 1 to 3 below this node, appending its keys in order.
    pub(crate) fn check<'a>(&'a self, hpt: &Hpt, is_root: bool, out: &mut Vec<&'a [u8]>) {
        let from = out.len();
        for (i, slot) in self.slots.iter().enumerate() {
            let start = out.len();
            match slot {
                Slot::Empty => {}
                Slot::Leaf(leaf) => {
                    leaf.check();
                    assert!(leaf.len() <= LEAF_MAX, "lits: leaf of {} keys", leaf.len());
                    out.extend(leaf.iter().map(|(k, _)| k));
                }
                Slot::Child(c) => c.check(hpt, false, out),
            }
            for key in out.iter().skip(start) {
                assert_eq!(
                    self.slot_of(hpt, key),
                    i,
                    "lits: key {key:?} under wrong slot"
                );
            }
        }
        let count = (out.len() - from) as u64;
        assert_eq!(count, self.size, "lits: node size does not match its keys");
        assert!(
            is_root || count > MERGE_AT,
            "lits: child node with {count} keys"
        );
    }
}
