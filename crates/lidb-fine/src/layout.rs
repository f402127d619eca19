//! The model layout: the top-level trained arrays ([`Node`]s, one per LPA model when built) and
//! the flat sorted array of their first keys that routes a key to its node with a branch-free
//! search (the paper keeps its independent models in a B-tree over their keys).
//!
//! A layout is immutable; model retraining builds a new one that replaces some nodes and shares
//! the rest (and every record) with the old, and publishes it with `ArcSwap` (`index.rs`). Any
//! thread may read it.
//!
//! Invariants: `nodes` is non-empty, `firsts[i]` is the first key of `nodes[i]`, strictly
//! increasing, `firsts[0] == 0`; the records of all nodes, in order, are strictly increasing.

use std::sync::Arc;

use crate::config::Config;
use crate::model::{Router, route};
use crate::node::Node;
use crate::record::Record;

/// The top-level nodes and their routing array.
#[derive(Debug)]
pub(crate) struct Layout {
    firsts: Vec<u64>,
    nodes: Vec<Arc<Node>>,
}

impl Layout {
    /// A layout over `records` (sorted, distinct, the first with key 0), one node per LPA model.
    pub fn build(records: Vec<Arc<Record>>, cfg: &Config) -> Layout {
        let mut nodes = Vec::new();
        split_into_nodes(records, cfg, &mut nodes);
        Layout::from_nodes(nodes)
    }

    /// A layout over nodes already in key order.
    pub fn from_nodes(nodes: Vec<Arc<Node>>) -> Layout {
        let firsts = nodes
            .iter()
            .map(|n| n.records().first().map_or(0, |r| r.key))
            .collect();
        Layout { firsts, nodes }
    }

    /// The node a key belongs to and its position.
    #[inline]
    pub fn node_for(&self, q: u64) -> Option<(usize, &Arc<Node>)> {
        let i = route(&self.firsts, q);
        self.nodes.get(i).map(|n| (i, n))
    }

    pub fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }
}

/// Most records in one top-level node: a long linear run is one LPA model, but a node that big
/// would make each of its model retrainings (which flatten and retrain a whole node) cost as
/// much as the run.
pub(crate) const MAX_NODE_RECORDS: usize = 1 << 16;

/// Trains LPA over `records` and appends one node per model to `out`, a model longer than
/// [`MAX_NODE_RECORDS`] cut into pieces (each node retrains its own chunk, which normally gives
/// it that one model back).
pub(crate) fn split_into_nodes(records: Vec<Arc<Record>>, cfg: &Config, out: &mut Vec<Arc<Node>>) {
    let keys: Vec<u64> = records.iter().map(|r| r.key).collect();
    let router = Router::train(&keys, cfg);
    // Chunk boundaries: where each model after the first starts.
    let mut model_ends: Vec<usize> = router
        .first_keys()
        .iter()
        .skip(1)
        .map(|&k| keys.partition_point(|&x| x < k))
        .collect();
    model_ends.push(records.len());
    let mut cuts = Vec::with_capacity(model_ends.len());
    let mut from = 0;
    for end in model_ends {
        while end.saturating_sub(from) > MAX_NODE_RECORDS {
            from += MAX_NODE_RECORDS;
            cuts.push(from);
        }
        cuts.push(end);
        from = end;
    }
    let mut rest = records.into_iter();
    let mut at = 0;
    for cut in cuts {
        let chunk: Vec<Arc<Record>> = rest.by_ref().take(cut.saturating_sub(at)).collect();
        at = cut.max(at);
        if !chunk.is_empty() {
            out.push(Arc::new(Node::from_records(chunk, cfg)));
        }
    }
}
