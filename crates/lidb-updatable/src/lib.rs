//! lidb-updatable: in-memory updatable learned indexes that hold their keys and values.
//!
//! These are the *data-unclustered* indexes: unlike `lidb-index`, whose models only
//! point into a sorted array the caller owns, every index here stores the (key, value) pairs in
//! its own nodes and places each key where its models predict. Each is a real index: bulk load,
//! point get, insert, remove, ordered iteration from a lower-bound seek, its heap size and its
//! shape ([`IndexStats`]).
//!
//! | module | paper | structure |
//! |---|---|---|
//! | [`alex`] | ALEX (Ding et al., SIGMOD 2020) | model nodes over gapped-array data nodes; cost-model driven expansion and splits |
//! | [`lipp`] | LIPP (Wu et al., VLDB 2021) | every key at its precise predicted slot; conflicts become child nodes; FMCD models |
//! | [`dili`] | DILI (Li et al., VLDB 2023) | BU-tree boundaries by greedy cost merging; top-down tree of equal-width internal nodes; least-squares LIPP-style leaves, rebuilt as conflicts grow |
//! | [`lits`] | LITS (Yang et al., VLDB 2024) | byte-string keys; global hash-enhanced prefix table; model nodes over the keys' common prefix; compact leaves of up to 16 keys |
//!
//! Keys: ALEX, LIPP and DILI take u64 keys ([`UpdatableIndex`]). LITS indexes byte strings and
//! implements a second trait, [`UpdatableBytesIndex`], with the same methods over `&[u8]` keys
//! (values stay u64). We chose a second trait over a generic key type because the u64 indexes
//! do arithmetic on keys (linear models over `key - base`), which a generic key would have to
//! hide behind a conversion trait on every hot path, while LITS's models (its hash-enhanced
//! prefix table and per-node string models) never see a number; the conformance harness is
//! generic over a small adapter, so one harness drives both traits.
//!
//! Threads: every index is a plain single-writer structure (`&mut self` to write). Reads take
//! `&self` and mutate nothing (the ALEX cost statistics are counted on the write path only), so
//! an index is `Sync` and may be read from many threads at once behind a reader-writer lock.
//!
//! Safe Rust only; no I/O.

#![forbid(unsafe_code)]

pub mod alex;
pub mod dili;
pub mod lipp;
pub mod lits;
mod model;

pub use alex::{Alex, AlexConfig};
pub use dili::Dili;
pub use lipp::Lipp;
pub use lits::Lits;

use std::fmt;

/// Shape of an index, for reports: how many nodes and models it holds and how deep keys sit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IndexStats {
    /// All nodes (inner and leaf).
    pub nodes: u64,
    /// Nodes that only route (ALEX model nodes, DILI internal nodes, LITS model nodes). LIPP
    /// has none: every node routes and holds.
    pub inner_nodes: u64,
    /// Nodes that hold keys (ALEX data nodes; every LIPP node; DILI's LIPP-style leaf nodes,
    /// conflict children included; LITS compact leaves).
    pub leaf_nodes: u64,
    /// Models in the structure (one per node for ALEX, LIPP and DILI; one per model node for
    /// LITS, whose shared HPT is not counted).
    pub models: u64,
    /// Deepest level at which a key is stored; the root is level 1.
    pub depth_max: u64,
    /// Mean level of the stored keys (0 when empty).
    pub depth_avg: f64,
}

/// Why a bulk load refused its input.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BulkLoadError {
    /// `pairs[position].0` is not greater than the key before it: input must be strictly
    /// increasing by key (sorted, no duplicates).
    NotStrictlyIncreasing { position: u64 },
}

impl fmt::Display for BulkLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BulkLoadError::NotStrictlyIncreasing { position } => write!(
                f,
                "bulk load input is not strictly increasing by key at position {position}"
            ),
        }
    }
}

impl std::error::Error for BulkLoadError {}

/// Position of the first pair whose key is not greater than its predecessor's.
pub fn check_strictly_increasing(pairs: &[(u64, u64)]) -> Result<(), BulkLoadError> {
    match pairs
        .windows(2)
        .position(|w| matches!(w, [a, b] if a.0 >= b.0))
    {
        Some(i) => Err(BulkLoadError::NotStrictlyIncreasing {
            position: i as u64 + 1,
        }),
        None => Ok(()),
    }
}

/// Position of the first pair whose byte-string key is not greater than its predecessor's.
pub fn check_strictly_increasing_bytes<K: AsRef<[u8]>>(
    pairs: &[(K, u64)],
) -> Result<(), BulkLoadError> {
    match pairs
        .windows(2)
        .position(|w| matches!(w, [a, b] if a.0.as_ref() >= b.0.as_ref()))
    {
        Some(i) => Err(BulkLoadError::NotStrictlyIncreasing {
            position: i as u64 + 1,
        }),
        None => Ok(()),
    }
}

/// An in-memory updatable ordered map from u64 keys to u64 values, indexed by learned models.
///
/// Keys are unique: `insert` of a present key replaces its value. Every key of the u64 domain is
/// valid, 0 and `u64::MAX` included.
pub trait UpdatableIndex: Sized {
    /// Iterator of [`UpdatableIndex::range_from`].
    type Iter<'a>: Iterator<Item = (u64, u64)>
    where
        Self: 'a;

    /// Short name for reports (`alex`, `lipp`).
    const NAME: &'static str;

    /// Builds the index from pairs strictly increasing by key (an empty slice gives an empty
    /// index).
    fn bulk_load(pairs: &[(u64, u64)]) -> Result<Self, BulkLoadError>;

    /// The value of `key`, if present.
    fn get(&self, key: u64) -> Option<u64>;

    /// Maps `key` to `value`; returns the value it replaced, if any.
    fn insert(&mut self, key: u64, value: u64) -> Option<u64>;

    /// Removes `key`; returns its value, if it was present.
    fn remove(&mut self, key: u64) -> Option<u64>;

    /// The pairs with keys `>= key`, in increasing key order: the seek of a range scan.
    fn range_from(&self, key: u64) -> Self::Iter<'_>;

    /// The first pair whose key is `>= key` (the lower bound), without setting up an iterator.
    /// Equal to `range_from(key).next()`; indexes whose iterator keeps a stack override it.
    fn first_from(&self, key: u64) -> Option<(u64, u64)> {
        self.range_from(key).next()
    }

    /// Number of keys.
    fn len(&self) -> u64;

    /// Whether the index holds no key.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes the structure holds: the capacity of each of its allocations times the size
    /// of their elements, plus the inline size of the top-level value. Allocator overhead is
    /// not counted.
    fn size_bytes(&self) -> u64;

    /// Node, model and depth counts.
    fn stats(&self) -> IndexStats;

    /// Walks the whole structure and panics with a description if one of the index's invariants
    /// is broken (a bug, never an input error). For tests; linear time.
    fn assert_invariants(&self);
}

/// An in-memory updatable ordered map from byte-string keys to u64 values: the methods of
/// [`UpdatableIndex`] over `&[u8]` keys, ordered bytewise (a key sorts before the keys it is a
/// proper prefix of). Every byte string is a valid key, the empty one included.
pub trait UpdatableBytesIndex: Sized {
    /// Iterator of [`UpdatableBytesIndex::range_from`], borrowing the stored keys.
    type Iter<'a>: Iterator<Item = (&'a [u8], u64)>
    where
        Self: 'a;

    /// Short name for reports (`lits`).
    const NAME: &'static str;

    /// Builds the index from pairs strictly increasing by key (an empty slice gives an empty
    /// index).
    fn bulk_load<K: AsRef<[u8]>>(pairs: &[(K, u64)]) -> Result<Self, BulkLoadError>;

    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Option<u64>;

    /// Maps `key` to `value`; returns the value it replaced, if any.
    fn insert(&mut self, key: &[u8], value: u64) -> Option<u64>;

    /// Removes `key`; returns its value, if it was present.
    fn remove(&mut self, key: &[u8]) -> Option<u64>;

    /// The pairs with keys `>= key`, in increasing key order.
    fn range_from(&self, key: &[u8]) -> Self::Iter<'_>;

    /// Number of keys.
    fn len(&self) -> u64;

    /// Whether the index holds no key.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes the structure holds (allocations' capacities times element sizes, key bytes
    /// included, plus the inline size of the top-level value).
    fn size_bytes(&self) -> u64;

    /// Node, model and depth counts.
    fn stats(&self) -> IndexStats;

    /// Walks the whole structure and panics with a description if an invariant is broken.
    fn assert_invariants(&self);
}
