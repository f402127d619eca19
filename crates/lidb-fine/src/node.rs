//! A trained data array with its LPA models: the top of a model layout, or a small model made by
//! level-bin retraining.
//!
//! Built once and never changed (its records' values, flags and gaps change, each under its own
//! lock); any thread may read it. A record is split over two arrays (`record.rs`): the keys the
//! models search, and at the same position the record's 16-byte slot (state and value), which a
//! lookup reads after the key search lands. The gaps below records live in the node's gap table
//! (`gap_table.rs`), reached through the gap id in a record's state word.
//!
//! Invariants:
//! 1. `keys` is strictly increasing, `slots` has one slot per key, and there is at least one key.
//! 2. Every query routed to a node is `>= keys[0]`: the top node starts with key 0, and a small
//!    model retrained under record r starts with key `r.key + 1` (a removed placeholder record if
//!    that key was not among the retrained entries), so no key falls before a node's first
//!    record and no node needs a head gap.
//! 3. No record of a node has a small model whose records also sit in a node array: model
//!    retraining copies the records of the small models it flattens into the new array, and copies
//!    their parents without the gap that held them (`record.rs`, `MovePlan::Keep`).

use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::config::Config;
use crate::gap_table::GapTable;
use crate::model::Router;
use crate::record::{NewRecord, Record, Slot};
use crate::remote::words::RegionWords;

/// Where a key lives in one node.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Home<'a> {
    /// The trained record with this key.
    Record(Record<'a>),
    /// The gap below this record (the last one whose key is smaller).
    Gap(Record<'a>),
}

/// A trained data array with its models.
#[derive(Debug)]
pub(crate) struct Node {
    keys: Box<[u64]>,
    slots: Box<[Slot]>,
    gaps: GapTable,
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
    pub fn from_records(records: Vec<NewRecord>, cfg: &Config) -> Node {
        let keys: Vec<u64> = records.iter().map(|r| r.key).collect();
        let router = Router::train(&keys, cfg);
        Node::with_router(keys, records, router)
    }

    /// A node over `records` with models already trained over their keys `keys`. The gaps the
    /// records bring get ids 1, 2, ... in this node's gap table, in key order.
    pub fn with_router(keys: Vec<u64>, records: Vec<NewRecord>, router: Router) -> Node {
        debug_assert!(
            !keys.is_empty() && keys.windows(2).all(|w| matches!(w, [a, b] if a < b)),
            "unsorted records {keys:?}"
        );
        debug_assert!(keys.iter().zip(&records).all(|(k, r)| *k == r.key));
        let gaps = GapTable::new(records.len());
        let slots = records
            .into_iter()
            .map(|r| {
                let id = r.gap.and_then(|g| gaps.push(g)).map_or(0, |(id, _)| id);
                Slot::new(r.value, id)
            })
            .collect();
        Node {
            keys: keys.into_boxed_slice(),
            slots,
            gaps,
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
            records.push(NewRecord::removed(first));
        }
        records.extend(entries.iter().map(|&(k, v)| NewRecord::live(k, v)));
        Node::from_records(records, cfg)
    }

    /// The record at `pos`.
    #[inline]
    pub fn record(&self, pos: usize) -> Option<Record<'_>> {
        let key = *self.keys.get(pos)?;
        Some(Record::new(key, self.slots.get(pos)?, &self.gaps))
    }

    /// The records in key order.
    #[cfg(test)]
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> {
        self.keys
            .iter()
            .zip(self.slots.iter())
            .map(|(&k, s)| Record::new(k, s, &self.gaps))
    }

    /// Trained records in this node.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Where `q` lives (`q >= keys[0]` by invariant 2).
    #[inline]
    pub fn home(&self, q: u64) -> Option<Home<'_>> {
        let p = self.router.lower_bound(&self.keys, q);
        if self.keys.get(p) == Some(&q) {
            return self
                .slots
                .get(p)
                .map(|s| Home::Record(Record::new(q, s, &self.gaps)));
        }
        let gap = p.checked_sub(1).and_then(|i| self.record(i));
        debug_assert!(gap.is_some(), "q = {q} routed below a node's first key");
        gap.map(Home::Gap)
    }

    /// Where `q` lives when it is known to be the record at `pos` or to lie in its gap (a level
    /// bin address), without a model search; `None` if the record is not there.
    pub fn home_at(&self, pos: usize, q: u64) -> Option<Home<'_>> {
        let r = self.record(pos)?;
        if r.key == q {
            Some(Home::Record(r))
        } else {
            (r.key < q).then_some(Home::Gap(r))
        }
    }

    /// Where a scan from `q` starts: the last record `< q` (whose gap may hold keys `>= q`), if
    /// any, and the position of the first record `>= q`.
    pub fn scan_start(&self, q: u64) -> (Option<Record<'_>>, usize) {
        let p = self.router.lower_bound(&self.keys, q);
        (p.checked_sub(1).and_then(|i| self.record(i)), p)
    }

    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The records' slots, by position (a remote copy reads their words).
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    pub fn models(&self) -> usize {
        self.router.models()
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Heap bytes of this node: the node itself and the two counts of its `Arc`, its key and slot
    /// arrays, its gap table and its models (not the gaps below its records).
    pub fn heap_bytes(&self) -> u64 {
        let arc = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Node>();
        let per_key = std::mem::size_of::<u64>() + std::mem::size_of::<Slot>();
        let per_model = lidb_index::segment::SEGMENT_BYTES as usize;
        (arc + self.keys.len() * per_key + self.models() * per_model) as u64
            + self.gaps.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gap::Gap;
    use crate::record::MovePlan;

    #[test]
    fn a_copy_shares_its_gap_under_an_id_of_the_new_nodes_table() {
        let cfg = Config::default();
        let old = Node::from_records((1..=40).map(|k| NewRecord::live(k * 10, k)).collect(), &cfg);
        // Gaps below three records, created in an order unlike their keys'.
        let mut gaps = Vec::new();
        for pos in [30, 4, 17] {
            let r = old.record(pos).unwrap_or_else(|| panic!("no record {pos}"));
            let gap = r.gap_for_insert(&cfg).map(|g| g as *const Gap);
            gaps.push((pos, gap.unwrap_or_else(|_| panic!("record {pos} moved"))));
        }
        assert_eq!(old.gaps.len(), 3);
        let copies: Vec<NewRecord> = old
            .records()
            .filter_map(|r| r.move_out(MovePlan::Keep { drop_gap: false }))
            .collect();
        assert_eq!(copies.len(), 40);
        let keys = copies.iter().map(|r| r.key).collect();
        let fresh = Node::with_router(keys, copies, Router::train(old.keys(), &cfg));
        assert_eq!(
            fresh.gaps.len(),
            3,
            "the new table holds the shared gaps only"
        );
        for &(pos, gap) in &gaps {
            let r = fresh
                .record(pos)
                .unwrap_or_else(|| panic!("no record {pos}"));
            assert_eq!(r.gap().map(|g| g as *const Gap), Some(gap), "record {pos}");
            assert_eq!(r.read(), Some(pos as u64 + 1));
        }
        // The new node hands ids out in key order: 4 -> 1, 17 -> 2, 30 -> 3.
        for (id, pos) in [(1, 4), (2, 17), (3, 30)] {
            let by_id = fresh.gaps.get(id).map(Arc::as_ptr);
            let by_record = fresh
                .record(pos)
                .and_then(|r| r.gap())
                .map(|g| g as *const Gap);
            assert_eq!(by_id, by_record, "id {id}");
        }
        assert!(fresh.record(5).is_some_and(|r| r.gap().is_none()));
        // The table's share of the heap: one segment array sized for 40, one segment of 4.
        let table = fresh.gaps.heap_bytes();
        assert_eq!(table, GapTable::new(40).heap_bytes() + 4 * 16);
    }
}
