//! A trained data array with its LPA models: the top of a model layout, or a small model made by
//! level-bin retraining.
//!
//! Built once and never changed (its records' values, flags and gaps change, each under its own
//! lock); any thread may read it. The records are inline in the node, beside the keys the models
//! search: a lookup reads the key array and then the record at the same position.
//!
//! Invariants:
//! 1. `keys` is strictly increasing, `records[i].key == keys[i]`, and there is at least one key.
//! 2. Every query routed to a node is `>= keys[0]`: the top node starts with key 0, and a small
//!    model retrained under record r starts with key `r.key + 1` (a removed placeholder record if
//!    that key was not among the retrained entries), so no key falls before a node's first
//!    record and no node needs a head gap.
//! 3. No record of a node has a small model whose records also sit in a node array: model
//!    retraining copies the records of the small models it flattens into the new array, and copies
//!    their parents without the gap that held them (`record.rs`, `MovePlan::Keep`).

use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::config::Config;
use crate::model::Router;
use crate::record::Record;
use crate::remote::words::RegionWords;

/// Where a key lives in one node.
#[derive(Debug)]
pub(crate) enum Home<'a> {
    /// The trained record with this key.
    Record(&'a Record),
    /// The gap below this record (the last one whose key is smaller).
    Gap(&'a Record),
}

/// A trained data array with its models.
#[derive(Debug)]
pub(crate) struct Node {
    keys: Vec<u64>,
    records: Box<[Record]>,
    router: Router,
    /// For a node of the top layout: level-bin retrainings below one of its small models, and
    /// entries moved into its small models, since it was built (model retraining's trigger).
    pub nested_small_models: AtomicU64,
    pub retrained_entries: AtomicU64,
    /// A level-bin retraining happened [`DEEP_SMALL_MODELS`] small models below this node.
    pub deep: AtomicBool,
    /// Trained records below this node removed since it was built (the trigger of a model
    /// retraining that reclaims them).
    pub removed_records: AtomicU64,
    /// The version word and id this node has as a trained-data region (`remote/words.rs`).
    pub region: RegionWords,
}

/// Nesting of small models below a top-level node at which its model retraining is due whatever
/// the amortisation says: every key below pays one node search per level (sequential inserts
/// into one gap nest a small model per m * n keys).
pub(crate) const DEEP_SMALL_MODELS: u32 = 8;

impl Node {
    /// A node over `records` (sorted, distinct, non-empty; invariant 1), its models trained here.
    pub fn from_records(records: Vec<Record>, cfg: &Config) -> Node {
        let keys: Vec<u64> = records.iter().map(|r| r.key).collect();
        let router = Router::train(&keys, cfg);
        Node::with_router(keys, records, router)
    }

    /// A node over `records` with models already trained over their keys `keys`.
    pub fn with_router(keys: Vec<u64>, records: Vec<Record>, router: Router) -> Node {
        debug_assert!(
            !keys.is_empty() && keys.windows(2).all(|w| matches!(w, [a, b] if a < b)),
            "unsorted records {keys:?}"
        );
        debug_assert!(keys.iter().zip(&records).all(|(k, r)| *k == r.key));
        Node {
            keys,
            records: records.into_boxed_slice(),
            router,
            nested_small_models: AtomicU64::new(0),
            retrained_entries: AtomicU64::new(0),
            deep: AtomicBool::new(false),
            removed_records: AtomicU64::new(0),
            region: RegionWords::new(),
        }
    }

    /// A small model over entries retrained from the level bins below a record of key `parent`
    /// (all entries `> parent`, sorted, distinct).
    pub fn retrained(parent: u64, entries: &[(u64, u64)], cfg: &Config) -> Node {
        let first = parent.saturating_add(1);
        let mut records = Vec::with_capacity(entries.len() + 1);
        if entries.first().is_none_or(|e| e.0 != first) {
            records.push(Record::removed(first));
        }
        records.extend(entries.iter().map(|&(k, v)| Record::new(k, v)));
        Node::from_records(records, cfg)
    }

    /// Where `q` lives (`q >= keys[0]` by invariant 2).
    #[inline]
    pub fn home(&self, q: u64) -> Option<Home<'_>> {
        let p = self.router.lower_bound(&self.keys, q);
        if self.keys.get(p) == Some(&q) {
            return self.records.get(p).map(Home::Record);
        }
        let gap = p.checked_sub(1).and_then(|i| self.records.get(i));
        debug_assert!(gap.is_some(), "q = {q} routed below a node's first key");
        gap.map(Home::Gap)
    }

    /// Where `q` lives when it is known to be the record at `pos` or to lie in its gap (a level
    /// bin address), without a model search; `None` if the record is not there.
    pub fn home_at(&self, pos: usize, q: u64) -> Option<Home<'_>> {
        let r = self.records.get(pos)?;
        if r.key == q {
            Some(Home::Record(r))
        } else {
            (r.key < q).then_some(Home::Gap(r))
        }
    }

    /// Where a scan from `q` starts: the last record `< q` (whose gap may hold keys `>= q`), if
    /// any, and the position of the first record `>= q`.
    pub fn scan_start(&self, q: u64) -> (Option<&Record>, usize) {
        let p = self.router.lower_bound(&self.keys, q);
        (p.checked_sub(1).and_then(|i| self.records.get(i)), p)
    }

    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn models(&self) -> usize {
        self.router.models()
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Heap bytes of this node: its key and record arrays and its models (not the level bins
    /// below its records).
    pub fn heap_bytes(&self) -> u64 {
        let per_key = std::mem::size_of::<u64>() + std::mem::size_of::<Record>();
        let per_model = lidb_index::segment::SEGMENT_BYTES as usize;
        (std::mem::size_of::<Node>() + self.keys.len() * per_key + self.models() * per_model) as u64
    }
}
