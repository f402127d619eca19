//! The model layout: the top-level trained arrays ([`Node`]s, one per LPA model when built) and
//! the flat sorted array of their first keys that routes a key to its node with a branch-free
//! search (the paper keeps its independent models in a B-tree over their keys).
//!
//! A layout is immutable; model retraining builds a new one that replaces some nodes (with copies
//! of their records) and shares the rest with the old, and publishes it with `ArcSwap`
//! (`index.rs`). Any thread may read it.
//!
//! Invariants: `nodes` is non-empty, `firsts[i]` is the first key of `nodes[i]`, strictly
//! increasing, `firsts[0] == 0`; the records of all nodes, in order, are strictly increasing.

use std::ops::Range;
use std::sync::Arc;

use crate::config::Config;
use crate::model::{Router, route};
use crate::node::Node;
use crate::record::NewRecord;

/// The top-level nodes and their routing array.
#[derive(Debug)]
pub(crate) struct Layout {
    firsts: Vec<u64>,
    nodes: Vec<Arc<Node>>,
    /// 1 for the bulk-loaded layout, one more for each model retraining that replaced it.
    pub version: u64,
}

impl Layout {
    /// A layout over `records` (sorted, distinct, the first with key 0), one node per LPA model.
    pub fn build(records: Vec<NewRecord>, cfg: &Config) -> Layout {
        let keys: Vec<u64> = records.iter().map(|r| r.key).collect();
        let plan = plan_nodes(&keys, cfg);
        let mut nodes = Vec::new();
        build_nodes(keys, records, plan, &mut nodes);
        Layout::from_nodes(nodes, 1)
    }

    /// A layout over nodes already in key order.
    pub fn from_nodes(nodes: Vec<Arc<Node>>, version: u64) -> Layout {
        let firsts = nodes
            .iter()
            .map(|n| n.keys().first().copied().unwrap_or(0))
            .collect();
        Layout {
            firsts,
            nodes,
            version,
        }
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

/// Where the nodes over `keys` (sorted, distinct) start and end, and each one's models: LPA over
/// all of them gives the cuts, one node per model (a model longer than [`MAX_NODE_RECORDS`] cut
/// into pieces), and each node keeps the model LPA made for it, verified once over the node's
/// own positions instead of trained again. Reads only keys, so model retraining runs it before
/// it locks any record.
pub(crate) fn plan_nodes(keys: &[u64], cfg: &Config) -> Vec<(Range<usize>, Router)> {
    Router::train_pieces(keys, cfg, MAX_NODE_RECORDS)
}

/// Appends to `out` the nodes `plan` cuts `records` into (`keys` their keys, which `plan` was
/// made over).
pub(crate) fn build_nodes(
    keys: Vec<u64>,
    records: Vec<NewRecord>,
    plan: Vec<(Range<usize>, Router)>,
    out: &mut Vec<Arc<Node>>,
) {
    debug_assert_eq!(keys.len(), records.len());
    let mut records = records.into_iter();
    for (range, router) in plan {
        let chunk: Vec<NewRecord> = records.by_ref().take(range.len()).collect();
        let chunk_keys = keys.get(range).map(<[u64]>::to_vec).unwrap_or_default();
        if !chunk.is_empty() {
            out.push(Arc::new(Node::with_router(chunk_keys, chunk, router)));
        }
    }
}
