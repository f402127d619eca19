//! LITS (Yang et al., "LITS: An Optimized Learned Index for Strings", VLDB 2024): a trie of
//! model nodes over byte-string keys, whose models read a global hash-enhanced prefix table.
//!
//! - [`hpt`]: the HPT, trained on (a sample of) the keys, gives every key a CDF position read
//!   from any byte on, monotone in key order.
//! - [`node`]: a model node strips its keys' common prefix and maps the CDF of the rest onto its
//!   slots; small groups sharing a slot live in a compact leaf (at most 16 pairs in key order,
//!   packed with a one-byte hash tag a key in one allocation, [`leaf`]), larger ones in a child
//!   model node (a subtrie).
//! - Inserts fill a slot or a leaf; a leaf that overflows splits into a child node; a node whose
//!   subtree has doubled since its build is rebuilt; the whole index (HPT included) is retrained
//!   when it has doubled since the HPT was trained. Removals shrink leaves and merge a child node
//!   left with at most 8 keys back into a leaf.
//!
//! Keys are any byte strings, the empty one and keys that are prefixes of others included.
//! Invariants: those of [`node`], plus `len` equals the root's size and in-order traversal is
//! strictly increasing ([`Lits::assert_invariants`]). Single writer (`&mut self`); readers share
//! `&self`.
//!
//! Differs from the reference (schencoding/lits) and why: the reference's HPT stores f64 CDF and
//! probability per (row, character), trained on each key's distinguishing prefix with weights
//! halving per byte, and each model node fits a slope and intercept over those CDFs; ours counts
//! the distinguishing prefixes (first 64 bytes at most) of a sample with equal weight, uses integer
//! arithmetic so that monotonicity (and so seeks and ordered iteration) is exact rather than
//! likely, maps each node's first and last key to its end slots instead of fitting, and makes the
//! end of key a symbol of its own so that keys that prefix others (and the empty key) need no
//! special case (the reference supports a 128-character alphabet without 0x00; we take all 256
//! bytes). The reference chooses per group between a model node and a HOT-like subtrie with its
//! PMSS decision tree; we always build model nodes (a group whose keys differ right after their
//! common prefix is always split by one), so there is no HOT-style node and no PMSS. The
//! reference's minimum of 1000 keys for a bulk load is gone: a small or empty index is a single
//! node that retrains as it grows. Keys are copied into the leaves (the reference keeps pointers to
//! key-value records it allocates, one a key, with a 16-bit hash in each pointer; see [`leaf`]).

mod hpt;
mod iter;
mod leaf;
mod node;

pub use iter::Iter;

use hpt::Hpt;
use node::{ModelNode, Pair};

use crate::{BulkLoadError, IndexStats, UpdatableBytesIndex, check_strictly_increasing_bytes};

/// The index is retrained (HPT and all nodes) when it has grown this many times since the HPT
/// was trained, and to more than [`RETRAIN_MIN_KEYS`].
const RETRAIN_GROWTH: u64 = 2;
const RETRAIN_MIN_KEYS: u64 = 64;

/// A LITS index (see the module doc).
#[derive(Debug)]
pub struct Lits {
    hpt: Hpt,
    root: ModelNode,
    /// Keys when the HPT was trained.
    trained_len: u64,
}

impl Lits {
    fn from_pairs(pairs: Vec<Pair>) -> Lits {
        let hpt = Hpt::train(&pairs.iter().map(|p| &p.0).collect::<Vec<_>>());
        let trained_len = pairs.len() as u64;
        let root = ModelNode::build(&hpt, pairs);
        Lits {
            hpt,
            root,
            trained_len,
        }
    }
}

impl UpdatableBytesIndex for Lits {
    type Iter<'a> = Iter<'a>;
    const NAME: &'static str = "lits";

    fn bulk_load<K: AsRef<[u8]>>(pairs: &[(K, u64)]) -> Result<Lits, BulkLoadError> {
        check_strictly_increasing_bytes(pairs)?;
        let owned: Vec<Pair> = pairs.iter().map(|(k, v)| (k.as_ref().into(), *v)).collect();
        Ok(Lits::from_pairs(owned))
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.root.get(&self.hpt, key)
    }

    fn insert(&mut self, key: &[u8], value: u64) -> Option<u64> {
        let replaced = self.root.insert(&self.hpt, key, value);
        if replaced.is_none()
            && self.root.size > RETRAIN_MIN_KEYS
            && self.root.size > self.trained_len * RETRAIN_GROWTH
        {
            let pairs = self.root.take_pairs();
            *self = Lits::from_pairs(pairs);
        }
        replaced
    }

    fn remove(&mut self, key: &[u8]) -> Option<u64> {
        self.root.remove(&self.hpt, key)
    }

    fn range_from(&self, key: &[u8]) -> Iter<'_> {
        Iter::seek(&self.hpt, &self.root, key)
    }

    fn len(&self) -> u64 {
        self.root.size
    }

    fn size_bytes(&self) -> u64 {
        std::mem::size_of::<Lits>() as u64 + self.hpt.heap_bytes() + self.root.heap_bytes()
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
        let mut keys = Vec::new();
        self.root.check(&self.hpt, true, &mut keys);
        assert!(
            keys.windows(2).all(|w| matches!(w, [a, b] if a < b)),
            "lits: in-order traversal is not increasing"
        );
    }
}
