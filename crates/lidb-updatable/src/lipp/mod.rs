//! LIPP (Wu et al., "Updatable Learned Index with Precise Positions", VLDB 2021): a tree of
//! nodes, each a linear model over an array of slots; every key sits exactly in the slot its
//! node's model predicts, so a lookup never searches.
//!
//! A slot is empty, holds one (key, value), or holds a child node for the keys that predict that
//! slot. An insert into a free slot fills it; an insert into a slot that holds another key (a
//! conflict) replaces it with a two-key child. Each node counts its subtree's keys, inserts and
//! inserts that conflicted; when a subtree has grown 4x since it was built (and to at least 64
//! keys) and at least a tenth of its inserts conflicted, the topmost such node on the insert
//! path is rebuilt from its keys by FMCD (the paper's adjustment strategy).
//!
//! Invariants (checked by [`Lipp::assert_invariants`]):
//! 1. every key stored in (the subtree of) slot `s` of node `N` has `N.model.slot(key) == s`;
//! 2. `N.size` is the number of keys in `N`'s subtree, and every child holds at least 2 keys
//!    (a removal that leaves one key pulls it up into the parent's slot);
//! 3. models are monotone ([`crate::model`]), so in-order traversal yields increasing keys.
//!
//! Single writer (`&mut self`); readers share `&self`.

pub(crate) mod build;
pub(crate) mod iter;

pub use iter::Iter;

use crate::model::LinearModel;
use crate::{BulkLoadError, IndexStats, UpdatableIndex, check_strictly_increasing};

/// A LIPP index (see the module doc).
#[derive(Debug)]
pub struct Lipp {
    root: Node,
}

#[derive(Debug)]
pub(crate) struct Node {
    model: LinearModel,
    slots: Vec<Slot>,
    /// Keys in this subtree.
    size: u64,
    /// Keys in this subtree when the node was built.
    build_size: u64,
    /// Inserts of new keys into this subtree since it was built.
    num_inserts: u64,
    /// Of those, inserts that landed on an occupied data slot (a conflict).
    num_insert_to_data: u64,
    /// How this node's models are chosen (kept so that rebuilds choose the same way).
    fit: build::Fit,
}

#[derive(Debug)]
pub(crate) enum Slot {
    Empty,
    Data { key: u64, value: u64 },
    Child(Box<Node>),
}

/// Where an insert of a new key ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Landing {
    Present,
    EmptySlot,
    Conflict,
}

/// A subtree grows this many times its built size before a rebuild is considered.
const REBUILD_GROWTH: u64 = 4;
/// Smallest subtree that is rebuilt.
const REBUILD_MIN_KEYS: u64 = 64;
/// A rebuild needs at least one conflict per this many inserts.
const REBUILD_CONFLICT_RATIO: u64 = 10;

impl Node {
    /// The value of `key` in this subtree, if present.
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let mut node = self;
        loop {
            match node.slots.get(node.slot_of(key))? {
                Slot::Empty => return None,
                Slot::Data { key: k, value } => return (*k == key).then_some(*value),
                Slot::Child(child) => node = child,
            }
        }
    }

    /// The first pair with a key `>= key` in this subtree: the predicted slot's subtree, else
    /// the first pair in a later slot (by monotonicity every key there is larger).
    pub(crate) fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        let slot = self.slot_of(key);
        let here = match self.slots.get(slot)? {
            Slot::Empty => None,
            Slot::Data { key: k, value } => (*k >= key).then_some((*k, *value)),
            Slot::Child(child) => child.first_from(key),
        };
        here.or_else(|| self.first_in(slot + 1))
    }

    /// The smallest pair in slots `from..` (a child is never empty: invariant 2).
    pub(crate) fn first_in(&self, from: usize) -> Option<(u64, u64)> {
        self.slots.get(from..)?.iter().find_map(|s| match s {
            Slot::Empty => None,
            Slot::Data { key, value } => Some((*key, *value)),
            Slot::Child(child) => child.first_in(0),
        })
    }

    pub(crate) fn slot_of(&self, key: u64) -> usize {
        self.model.slot(key, self.slots.len())
    }

    fn needs_rebuild(&self) -> bool {
        self.size >= self.build_size * REBUILD_GROWTH
            && self.size >= REBUILD_MIN_KEYS
            && self.num_insert_to_data * REBUILD_CONFLICT_RATIO >= self.num_inserts
    }

    /// Appends the subtree's pairs in key order.
    pub(crate) fn collect(&self, out: &mut Vec<(u64, u64)>) {
        for slot in &self.slots {
            match slot {
                Slot::Empty => {}
                Slot::Data { key, value } => out.push((*key, *value)),
                Slot::Child(child) => child.collect(out),
            }
        }
    }

    pub(crate) fn landing(&self, key: u64) -> Landing {
        match self.slots.get(self.slot_of(key)) {
            None | Some(Slot::Empty) => Landing::EmptySlot,
            Some(Slot::Data { key: k, .. }) if *k == key => Landing::Present,
            Some(Slot::Data { .. }) => Landing::Conflict,
            Some(Slot::Child(child)) => child.landing(key),
        }
    }

    /// Replaces the value of present `key`.
    pub(crate) fn update(&mut self, key: u64, value: u64) -> Option<u64> {
        let slot = self.slot_of(key);
        match self.slots.get_mut(slot)? {
            Slot::Empty => None,
            Slot::Data { key: k, value: v } => (*k == key).then(|| std::mem::replace(v, value)),
            Slot::Child(child) => child.update(key, value),
        }
    }

    /// Inserts absent `key`, counting the insert on every node of the path and rebuilding the
    /// topmost node that then needs it.
    pub(crate) fn insert_new(&mut self, key: u64, value: u64, conflict: bool) {
        self.size += 1;
        self.num_inserts += 1;
        if conflict {
            self.num_insert_to_data += 1;
        }
        if self.needs_rebuild() {
            let mut pairs = Vec::with_capacity(self.size as usize);
            self.collect(&mut pairs);
            let at = pairs.partition_point(|p| p.0 < key);
            pairs.insert(at, (key, value));
            *self = build::build_with(&pairs, self.fit);
            return;
        }
        let slot = self.slot_of(key);
        let Some(entry) = self.slots.get_mut(slot) else {
            return;
        };
        match entry {
            Slot::Empty => *entry = Slot::Data { key, value },
            Slot::Data { key: k, value: v } => {
                let (old, new) = ((*k, *v), (key, value));
                let pair = if old.0 < key { [old, new] } else { [new, old] };
                *entry = Slot::Child(Box::new(build::build_with(&pair, self.fit)));
            }
            Slot::Child(child) => child.insert_new(key, value, conflict),
        }
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<u64> {
        let slot = self.slot_of(key);
        let entry = self.slots.get_mut(slot)?;
        let removed = match entry {
            Slot::Empty => None,
            Slot::Data { key: k, value } if *k == key => {
                let value = *value;
                *entry = Slot::Empty;
                Some(value)
            }
            Slot::Data { .. } => None,
            Slot::Child(child) => {
                let removed = child.remove(key)?;
                if child.size <= 1 {
                    let mut rest = Vec::with_capacity(1);
                    child.collect(&mut rest);
                    *entry = match rest.first() {
                        Some(&(key, value)) => Slot::Data { key, value },
                        None => Slot::Empty,
                    };
                }
                Some(removed)
            }
        };
        if removed.is_some() {
            self.size -= 1;
        }
        removed
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        let own = (self.slots.capacity() * std::mem::size_of::<Slot>()) as u64;
        own + self
            .slots
            .iter()
            .map(|s| match s {
                Slot::Child(c) => std::mem::size_of::<Node>() as u64 + c.heap_bytes(),
                _ => 0,
            })
            .sum::<u64>()
    }

    /// Adds this subtree's shape to `acc` (`level` is this node's level, root 1).
    pub(crate) fn shape(&self, level: u64, acc: &mut IndexStats, key_depth_sum: &mut u64) {
        acc.nodes += 1;
        acc.leaf_nodes += 1;
        acc.models += 1;
        for slot in &self.slots {
            match slot {
                Slot::Empty => {}
                Slot::Data { .. } => {
                    acc.depth_max = acc.depth_max.max(level);
                    *key_depth_sum += level;
                }
                Slot::Child(c) => c.shape(level + 1, acc, key_depth_sum),
            }
        }
    }

    /// Checks invariants 1 and 2 for this subtree; returns its key count.
    pub(crate) fn check(&self, is_root: bool) -> u64 {
        let mut count = 0;
        for (i, slot) in self.slots.iter().enumerate() {
            match slot {
                Slot::Empty => {}
                Slot::Data { key, .. } => {
                    assert_eq!(self.slot_of(*key), i, "lipp: key {key} is not in its slot");
                    count += 1;
                }
                Slot::Child(c) => {
                    let mut keys = Vec::new();
                    c.collect(&mut keys);
                    for (key, _) in &keys {
                        assert_eq!(self.slot_of(*key), i, "lipp: key {key} below wrong slot");
                    }
                    count += c.check(false);
                }
            }
        }
        assert_eq!(count, self.size, "lipp: node size does not match its keys");
        assert!(is_root || count >= 2, "lipp: child node with {count} keys");
        count
    }
}

impl UpdatableIndex for Lipp {
    type Iter<'a> = Iter<'a>;
    const NAME: &'static str = "lipp";

    fn bulk_load(pairs: &[(u64, u64)]) -> Result<Lipp, BulkLoadError> {
        check_strictly_increasing(pairs)?;
        Ok(Lipp {
            root: build::build(pairs),
        })
    }

    fn get(&self, key: u64) -> Option<u64> {
        self.root.get(key)
    }

    fn insert(&mut self, key: u64, value: u64) -> Option<u64> {
        match self.root.landing(key) {
            Landing::Present => self.root.update(key, value),
            landing => {
                self.root
                    .insert_new(key, value, landing == Landing::Conflict);
                None
            }
        }
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        self.root.remove(key)
    }

    fn range_from(&self, key: u64) -> Iter<'_> {
        Iter::seek(&self.root, key)
    }

    fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        self.root.first_from(key)
    }

    fn len(&self) -> u64 {
        self.root.size
    }

    fn size_bytes(&self) -> u64 {
        std::mem::size_of::<Lipp>() as u64 + self.root.heap_bytes()
    }

    fn stats(&self) -> IndexStats {
        let mut stats = IndexStats::default();
        let mut key_depth_sum = 0;
        self.root.shape(1, &mut stats, &mut key_depth_sum);
        if self.root.size > 0 {
            stats.depth_avg = key_depth_sum as f64 / self.root.size as f64;
        }
        stats
    }

    fn assert_invariants(&self) {
        self.root.check(true);
        let mut pairs = Vec::new();
        self.root.collect(&mut pairs);
        assert!(
            pairs.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)),
            "lipp: in-order traversal is not increasing"
        );
    }
}
