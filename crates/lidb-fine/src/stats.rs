//! Structure statistics: trained records, models, small models, level bins and their load factor
//! (the paper reports about 82% at most, against 75% for a B-tree).
//!
//! A walk of the whole layout that takes each level-bin set's write section for a moment to count
//! it: meant for reports and tests, not for hot paths. Counts are exact when no writer runs.
//! [`FineIndex::retrain_stats`] reads the retraining counters alone, without the walk.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use lidb_index::segment::SEGMENT_BYTES;

use crate::index::FineIndex;
use crate::layout::Layout;
use crate::node::Node;

/// Figures of a [`FineIndex`]'s structure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FineStats {
    /// Top-level nodes of the layout (one per LPA model when built).
    pub top_nodes: u64,
    /// Trained records of the top layout (placeholders and removed ones included).
    pub top_records: u64,
    /// LPA models of the top layout.
    pub top_models: u64,
    /// Small models made by level-bin retraining and not yet merged by a model retraining.
    pub small_models: u64,
    /// Trained records inside those small models.
    pub small_model_records: u64,
    /// Deepest nesting of small models (0: none).
    pub max_depth: u64,
    /// Live trained records (top and small models).
    pub live_trained: u64,
    /// Removed trained records and placeholders.
    pub removed_trained: u64,
    /// Level-bin sets in use (created and not retrained).
    pub bin_sets: u64,
    /// Child bins in use.
    pub child_bins: u64,
    /// Entries held in level bins.
    pub bin_entries: u64,
    /// Data slots of the level bins in use (root slots of a flat set, child slots of a tree).
    pub bin_slots: u64,
    /// `bin_entries / bin_slots` (0 when there are no bins).
    pub load_factor: f64,
    /// Level-bin retrainings since the index was built.
    pub level_bin_retrains: u64,
    /// Their total time (building and publishing the small models), in nanoseconds.
    pub level_bin_retrain_ns: u64,
    /// Model retrainings since the index was built.
    pub model_retrains: u64,
    /// Their total time (flattening, training, publishing), in microseconds.
    pub model_retrain_us: u64,
    /// Estimated heap bytes of the current layout: node arrays and models, records, level bins
    /// (from type sizes; allocator overhead excluded, and so are old layouts that readers or the
    /// threads' pins, `pin.rs`, still hold).
    pub heap_bytes: u64,
    /// Bytes of the LPA models alone, top and small models in use (`SEGMENT_BYTES` each: first
    /// key, slope, intercept): what a client caches to route its requests (the paper's Fig. 16),
    /// part of `heap_bytes`.
    pub model_bytes: u64,
}

impl FineIndex {
    /// Walks the current layout and counts.
    pub fn stats(&self) -> FineStats {
        let layout: Arc<Layout> = self.layout.load_full();
        let nodes = layout.nodes();
        let mut s = FineStats {
            top_nodes: nodes.len() as u64,
            level_bin_retrains: self.level_bin_retrains.load(Relaxed),
            level_bin_retrain_ns: self.level_bin_retrain_ns.load(Relaxed),
            model_retrains: self.model_retrains.load(Relaxed),
            model_retrain_us: self.model_retrain_us.load(Relaxed),
            ..FineStats::default()
        };
        for top in nodes {
            s.top_records += top.len() as u64;
            s.top_models += top.models() as u64;
            s.model_bytes += top.models() as u64 * SEGMENT_BYTES;
            // The node (its allocation), its pointer and its first key in the layout's arrays.
            s.heap_bytes += top.heap_bytes() + 2 * std::mem::size_of::<u64>() as u64;
            count_node(top, &mut s);
        }
        if s.bin_slots > 0 {
            s.load_factor = s.bin_entries as f64 / s.bin_slots as f64;
        }
        s
    }

    /// The retraining counters alone (`level_bin_retrains`, `level_bin_retrain_ns`,
    /// `model_retrains`, `model_retrain_us`; every other field 0): four relaxed loads, no walk,
    /// cheap enough to poll while writers run.
    pub fn retrain_stats(&self) -> FineStats {
        FineStats {
            level_bin_retrains: self.level_bin_retrains.load(Relaxed),
            level_bin_retrain_ns: self.level_bin_retrain_ns.load(Relaxed),
            model_retrains: self.model_retrains.load(Relaxed),
            model_retrain_us: self.model_retrain_us.load(Relaxed),
            ..FineStats::default()
        }
    }
}

/// Adds the figures of one top-level node and its small models to `s`.
fn count_node(top: &Node, s: &mut FineStats) {
    let mut stack: Vec<(&Node, usize, u64)> = vec![(top, 0, 0)];
    while let Some((node, i, depth)) = stack.last_mut() {
        let (node, depth): (&Node, u64) = (node, *depth);
        let Some(r) = node.record(*i) else {
            stack.pop();
            continue;
        };
        *i += 1;
        if r.read().is_some() {
            s.live_trained += 1;
        } else {
            s.removed_trained += 1;
        }
        if depth > 0 {
            s.small_model_records += 1;
        }
        let Some(gap) = r.gap() else {
            continue;
        };
        // The gap's allocation and its bins (retired ones stay allocated, emptied, beside a
        // small model).
        s.heap_bytes += gap.heap_bytes();
        if let Some(sub) = gap.sub() {
            s.heap_bytes += sub.heap_bytes();
            s.small_models += 1;
            s.model_bytes += sub.models() as u64 * SEGMENT_BYTES;
            s.max_depth = s.max_depth.max(depth + 1);
            stack.push((sub, 0, depth + 1));
        } else {
            let (used, slots, children) = gap.bins().occupancy();
            if slots > 0 {
                s.bin_sets += 1;
            }
            s.bin_entries += used;
            s.bin_slots += slots;
            s.child_bins += children;
        }
    }
}
