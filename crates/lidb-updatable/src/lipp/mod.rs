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
//!
//! Differs from the reference (Jiacheng-WU/lipp) and why: models work on `key - base` in f64 (the
//! reference converts keys to long double); when the chosen model would put a node's first and
//! last key in one slot (keys f64 cannot tell apart), the node uses the model through its two end
//! keys, so every child holds strictly fewer keys and building always ends; removal, which the
//! paper does not describe, empties the slot and pulls a child's last key up into the parent slot;
//! the two tag bits of a slot sit together in one bitmap (the reference keeps a none bitmap and a
//! child bitmap apart, one more line per level read); children live in their parent's array, not
//! behind pointers; the insert path probes once to learn whether the key exists and where it
//! lands, then descends again to count and insert, instead of recording the path; there is no
//! `fixed` flag, so any node may be rebuilt.

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

/// A node: a linear model over `slots` slots. Laid out as the reference implementation lays out
/// its items (16 bytes a slot and two bits), so that a node costs what LIPP's does: one
/// allocation holds every slot's two words, then two bits per slot, occupied and child, side
/// by side (the reference keeps two bitmaps apart, so a read there touches one more line).
/// A data slot's words are its key and value; a child slot's first word is the child's index
/// in `children`, which owns the child nodes (no pointer per child: a 24-byte `enum` slot with
/// a boxed child made our LIPP half again as large as the reference's).
#[derive(Debug)]
pub(crate) struct Node {
    model: LinearModel,
    words: Box<[u64]>,
    children: Vec<Node>,
    slots: u32,
    /// This node's slot in its parent (0 for a root): a child that leaves `children` by
    /// `swap_remove` moves the last child, whose slot this names, into its place.
    parent_slot: u32,
    /// Keys in this subtree.
    size: u64,
    /// Keys in this subtree when the node was built.
    build_size: u64,
    /// Inserts of new keys into this subtree since it was built.
    num_inserts: u32,
    /// Of those, inserts that landed on an occupied data slot (a conflict).
    num_insert_to_data: u32,
    /// How this node's models are chosen (kept so that rebuilds choose the same way).
    fit: build::Fit,
}

/// A slot as read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot<'a> {
    Empty,
    Data { key: u64, value: u64 },
    Child(&'a Node),
}

/// Where an insert of a new key ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Landing {
    Present,
    EmptySlot,
    Conflict,
}

/// Tag bits of a slot.
const OCCUPIED: u64 = 0b01;
const CHILD: u64 = 0b10;

/// A subtree grows this many times its built size before a rebuild is considered.
const REBUILD_GROWTH: u64 = 4;
/// Smallest subtree that is rebuilt.
const REBUILD_MIN_KEYS: u64 = 64;
/// A rebuild needs at least one conflict per this many inserts.
const REBUILD_CONFLICT_RATIO: u64 = 10;

impl Node {
    /// An empty node of `slots` slots (at most `u32::MAX`) routing by `model`, for `size` keys.
    pub(crate) fn empty(model: LinearModel, slots: usize, size: u64, fit: build::Fit) -> Node {
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        let n = slots as usize;
        Node {
            model,
            words: vec![0; 2 * n + (2 * n).div_ceil(64)].into_boxed_slice(),
            children: Vec::new(),
            slots,
            parent_slot: 0,
            size,
            build_size: size,
            num_inserts: 0,
            num_insert_to_data: 0,
            fit,
        }
    }

    /// Drops the child array's spare capacity (after a build: inserts grow it again).
    pub(crate) fn shrink(&mut self) {
        self.children.shrink_to_fit();
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots as usize
    }

    /// The two tag bits of slot `i`: bit 0 occupied, bit 1 child.
    #[inline]
    fn tag(&self, i: usize) -> u64 {
        let bit = 2 * i;
        self.words
            .get(2 * self.slot_count() + bit / 64)
            .map_or(0, |w| (w >> (bit % 64)) & 0b11)
    }

    fn set_tag(&mut self, i: usize, tag: u64) {
        let bit = 2 * i;
        let at = 2 * self.slot_count() + bit / 64;
        if let Some(w) = self.words.get_mut(at) {
            *w = (*w & !(0b11 << (bit % 64))) | (tag << (bit % 64));
        }
    }

    /// Slot `i` (`Empty` past the end).
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> Slot<'_> {
        let tag = self.tag(i);
        if tag & OCCUPIED == 0 {
            return Slot::Empty;
        }
        let (a, b) = (
            self.words.get(2 * i).copied().unwrap_or(0),
            self.words.get(2 * i + 1).copied().unwrap_or(0),
        );
        if tag & CHILD != 0 {
            self.children
                .get(a as usize)
                .map_or(Slot::Empty, Slot::Child)
        } else {
            Slot::Data { key: a, value: b }
        }
    }

    fn set_words(&mut self, i: usize, a: u64, b: u64) {
        if let Some(w) = self.words.get_mut(2 * i) {
            *w = a;
        }
        if let Some(w) = self.words.get_mut(2 * i + 1) {
            *w = b;
        }
    }

    pub(crate) fn set_data(&mut self, i: usize, key: u64, value: u64) {
        self.set_words(i, key, value);
        self.set_tag(i, OCCUPIED);
    }

    fn set_empty(&mut self, i: usize) {
        self.set_words(i, 0, 0);
        self.set_tag(i, 0);
    }

    /// Makes slot `i` (empty or data) a child slot holding `child`.
    pub(crate) fn set_child(&mut self, i: usize, mut child: Node) {
        child.parent_slot = u32::try_from(i).unwrap_or(u32::MAX);
        let index = self.children.len() as u64;
        self.children.push(child);
        self.set_words(i, index, 0);
        self.set_tag(i, OCCUPIED | CHILD);
    }

    /// The index in `children` of child slot `i`.
    fn child_index(&self, i: usize) -> Option<usize> {
        (self.tag(i) == OCCUPIED | CHILD)
            .then(|| self.words.get(2 * i).map(|&w| w as usize))
            .flatten()
    }

    fn child_mut(&mut self, i: usize) -> Option<&mut Node> {
        let index = self.child_index(i)?;
        self.children.get_mut(index)
    }

    /// Empties child slot `i` and returns its node; the last child moves into its place in
    /// `children` and its slot is pointed there.
    fn take_child(&mut self, i: usize) -> Option<Node> {
        let index = self.child_index(i)?;
        if index >= self.children.len() {
            return None;
        }
        let node = self.children.swap_remove(index);
        if let Some(moved) = self.children.get(index) {
            let moved_slot = moved.parent_slot as usize;
            if let Some(w) = self.words.get_mut(2 * moved_slot) {
                *w = index as u64;
            }
        }
        self.set_empty(i);
        Some(node)
    }

    /// The value of `key` in this subtree, if present.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let mut node = self;
        loop {
            match node.slot(node.slot_of(key)) {
                Slot::Empty => return None,
                Slot::Data { key: k, value } => return (k == key).then_some(value),
                Slot::Child(child) => node = child,
            }
        }
    }

    /// The first pair with a key `>= key` in this subtree: the predicted slot's subtree, else
    /// the first pair in a later slot (by monotonicity every key there is larger).
    pub(crate) fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        let slot = self.slot_of(key);
        let here = match self.slot(slot) {
            Slot::Empty => None,
            Slot::Data { key: k, value } => (k >= key).then_some((k, value)),
            Slot::Child(child) => child.first_from(key),
        };
        here.or_else(|| self.first_in(slot + 1))
    }

    /// The smallest pair in slots `from..` (a child is never empty: invariant 2).
    pub(crate) fn first_in(&self, from: usize) -> Option<(u64, u64)> {
        (from..self.slot_count()).find_map(|i| match self.slot(i) {
            Slot::Empty => None,
            Slot::Data { key, value } => Some((key, value)),
            Slot::Child(child) => child.first_in(0),
        })
    }

    pub(crate) fn slot_of(&self, key: u64) -> usize {
        self.model.slot(key, self.slot_count())
    }

    fn needs_rebuild(&self) -> bool {
        self.size >= self.build_size * REBUILD_GROWTH
            && self.size >= REBUILD_MIN_KEYS
            && u64::from(self.num_insert_to_data) * REBUILD_CONFLICT_RATIO
                >= u64::from(self.num_inserts)
    }

    /// Appends the subtree's pairs in key order.
    pub(crate) fn collect(&self, out: &mut Vec<(u64, u64)>) {
        for i in 0..self.slot_count() {
            match self.slot(i) {
                Slot::Empty => {}
                Slot::Data { key, value } => out.push((key, value)),
                Slot::Child(child) => child.collect(out),
            }
        }
    }

    pub(crate) fn landing(&self, key: u64) -> Landing {
        match self.slot(self.slot_of(key)) {
            Slot::Empty => Landing::EmptySlot,
            Slot::Data { key: k, .. } if k == key => Landing::Present,
            Slot::Data { .. } => Landing::Conflict,
            Slot::Child(child) => child.landing(key),
        }
    }

    /// Replaces the value of present `key`.
    pub(crate) fn update(&mut self, key: u64, value: u64) -> Option<u64> {
        let slot = self.slot_of(key);
        match self.slot(slot) {
            Slot::Empty => None,
            Slot::Data { key: k, value: old } => (k == key).then(|| {
                self.set_words(slot, key, value);
                old
            }),
            Slot::Child(_) => self.child_mut(slot)?.update(key, value),
        }
    }

    /// Inserts absent `key`, counting the insert on every node of the path and rebuilding the
    /// topmost node that then needs it.
    pub(crate) fn insert_new(&mut self, key: u64, value: u64, conflict: bool) {
        self.size += 1;
        self.num_inserts = self.num_inserts.saturating_add(1);
        if conflict {
            self.num_insert_to_data = self.num_insert_to_data.saturating_add(1);
        }
        if self.needs_rebuild() {
            let mut pairs = Vec::with_capacity(self.size as usize);
            self.collect(&mut pairs);
            let at = pairs.partition_point(|p| p.0 < key);
            pairs.insert(at, (key, value));
            let parent_slot = self.parent_slot;
            *self = build::build_with(&pairs, self.fit);
            self.parent_slot = parent_slot;
            return;
        }
        let slot = self.slot_of(key);
        match self.slot(slot) {
            Slot::Empty => self.set_data(slot, key, value),
            Slot::Data { key: k, value: v } => {
                let pair = if k < key {
                    [(k, v), (key, value)]
                } else {
                    [(key, value), (k, v)]
                };
                let child = build::build_with(&pair, self.fit);
                self.set_child(slot, child);
            }
            Slot::Child(_) => {
                if let Some(child) = self.child_mut(slot) {
                    child.insert_new(key, value, conflict);
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<u64> {
        let slot = self.slot_of(key);
        let removed = match self.slot(slot) {
            Slot::Empty => None,
            Slot::Data { key: k, value } if k == key => {
                self.set_empty(slot);
                Some(value)
            }
            Slot::Data { .. } => None,
            Slot::Child(_) => {
                let child = self.child_mut(slot)?;
                let removed = child.remove(key)?;
                if child.size <= 1 {
                    let last = child.first_in(0);
                    self.take_child(slot);
                    if let Some((key, value)) = last {
                        self.set_data(slot, key, value);
                    }
                }
                Some(removed)
            }
        };
        if removed.is_some() {
            self.size -= 1;
        }
        removed
    }

    /// Heap bytes of this subtree: each node's words and child array (a child's own fields
    /// are counted in its parent's array).
    pub(crate) fn heap_bytes(&self) -> u64 {
        let own = self.words.len() * std::mem::size_of::<u64>()
            + self.children.capacity() * std::mem::size_of::<Node>();
        own as u64 + self.children.iter().map(Node::heap_bytes).sum::<u64>()
    }

    /// Adds this subtree's shape to `acc` (`level` is this node's level, root 1).
    pub(crate) fn shape(&self, level: u64, acc: &mut IndexStats, key_depth_sum: &mut u64) {
        acc.nodes += 1;
        acc.leaf_nodes += 1;
        acc.models += 1;
        for i in 0..self.slot_count() {
            match self.slot(i) {
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
        let mut child_slots = 0;
        for i in 0..self.slot_count() {
            match self.slot(i) {
                Slot::Empty => {
                    assert_eq!(self.tag(i), 0, "lipp: empty slot {i} marked as a child");
                }
                Slot::Data { key, .. } => {
                    assert_eq!(self.slot_of(key), i, "lipp: key {key} is not in its slot");
                    count += 1;
                }
                Slot::Child(c) => {
                    child_slots += 1;
                    assert_eq!(c.parent_slot as usize, i, "lipp: child's parent slot");
                    let mut keys = Vec::new();
                    c.collect(&mut keys);
                    for (key, _) in &keys {
                        assert_eq!(self.slot_of(*key), i, "lipp: key {key} below wrong slot");
                    }
                    count += c.check(false);
                }
            }
        }
        assert_eq!(
            child_slots,
            self.children.len(),
            "lipp: children not referenced by exactly one slot"
        );
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
