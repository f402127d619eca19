//! ALEX bulk loading: the greedy, cost-based choice of data node versus model node and of each
//! model node's fanout.
//!
//! For a set of keys the loader compares the expected cost of one data node with that of a model
//! node of fanout 2, 4, 8, ... whose children would be data nodes (a level of traversal, the
//! model's size and the key-weighted expected cost of the children; a child too big for a data
//! node is charged one more level). It stops doubling once the cost has failed to improve twice
//! and takes the cheapest. Neighbouring children whose keys together are no more than the
//! average per slot are merged into one child over an aligned power-of-two run of slots, as
//! ALEX's fanout tree merges cheap neighbours; when bulk loading, so is a run with an empty half,
//! whose merge costs nothing in search and saves a node (without it, keys in narrow clusters with wide gaps, as
//! tweet IDs in a table, left more empty data nodes than keys). Children are then built the
//! same way.

use super::cost::{self, INIT_DENSITY, MODEL_SIZE_WEIGHT, NODE_LOOKUPS_WEIGHT};
use super::data_node::DataNode;
use super::{Alex, ModelNode, Node, NodeId};
use crate::model::LinearModel;

/// The model of a model node of `fanout` for sorted `keys`: least squares, or the endpoint
/// model when least squares would route the first and last key to the same child.
pub(super) fn model_node_model(keys: &[u64], fanout: usize) -> LinearModel {
    let model = LinearModel::fit(keys, fanout as f64 / keys.len().max(1) as f64);
    match (keys.first(), keys.last()) {
        (Some(&first), Some(&last)) if model.slot(first, fanout) == model.slot(last, fanout) => {
            LinearModel::endpoints(first, last, fanout)
        }
        _ => model,
    }
}

/// Start offsets of each child's keys: `bounds[s]..bounds[s + 1]` are the keys routed to `s`.
fn partition(keys: &[u64], model: &LinearModel, fanout: usize) -> Vec<usize> {
    let mut bounds = Vec::with_capacity(fanout + 1);
    bounds.push(0);
    for (i, &k) in keys.iter().enumerate() {
        let slot = model.slot(k, fanout);
        while bounds.len() <= slot {
            bounds.push(i);
        }
    }
    bounds.resize(fanout + 1, keys.len());
    bounds
}

/// The best model node for `keys`: (cost, fanout), or `None` when there are fewer than 2 keys.
pub(super) fn best_fanout(alex: &Alex, keys: &[u64]) -> Option<(f64, usize)> {
    if keys.len() < 2 {
        return None;
    }
    let max_keys = alex.max_data_node_keys();
    let n = keys.len() as f64;
    let mut best: Option<(f64, usize)> = None;
    let mut worse_in_a_row = 0;
    let mut fanout = 2;
    while fanout <= alex.config.max_fanout && worse_in_a_row < 2 {
        let model = model_node_model(keys, fanout);
        let bounds = partition(keys, &model, fanout);
        let mut children = 0.0;
        for w in bounds.windows(2) {
            if let [a, b] = *w {
                let part = keys.get(a..b).unwrap_or(&[]);
                if part.is_empty() {
                    continue;
                }
                let mut c = cost::data_node_expected(part, alex.config.expected_insert_frac);
                if part.len() > max_keys {
                    c += NODE_LOOKUPS_WEIGHT;
                }
                children += c * part.len() as f64 / n;
            }
        }
        let model_bytes = (fanout * std::mem::size_of::<NodeId>()) as f64;
        let total = NODE_LOOKUPS_WEIGHT + MODEL_SIZE_WEIGHT * model_bytes + children;
        if best.is_none_or(|(c, _)| total < c) {
            best = Some((total, fanout));
            worse_in_a_row = 0;
        } else {
            worse_in_a_row += 1;
        }
        if fanout >= keys.len() {
            break;
        }
        fanout *= 2;
    }
    best
}

/// Which neighbouring children of a model node are merged into one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Merge {
    /// Runs whose keys are no more than the average per slot (splits use this: a split child
    /// that absorbed its empty neighbours would take the next inserts there too and deepen).
    Average,
    /// Those, and runs with an empty half (bulk loading).
    AverageOrEmptyHalf,
}

/// Builds the subtree for `pairs` (strictly increasing) and returns its id.
/// With `force_model`, the top is a model node whenever there are at least 2 keys (a split
/// down). Leaf links are left unset; the caller links the subtree's leaves.
pub(super) fn build_subtree(
    alex: &mut Alex,
    pairs: &[(u64, u64)],
    force_model: bool,
    merge: Merge,
) -> NodeId {
    let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let fits = keys.len() <= alex.max_data_node_keys();
    let model_choice = best_fanout(alex, &keys);
    let data_cost = cost::data_node_expected(&keys, alex.config.expected_insert_frac);
    let choose_data = match model_choice {
        None => true,
        Some((model_cost, _)) => !force_model && fits && data_cost <= model_cost,
    };
    let fanout = match model_choice {
        Some((_, fanout)) if !choose_data => fanout,
        _ => {
            let node = DataNode::build(pairs, INIT_DENSITY, alex.config.max_data_node_slots);
            return alex.alloc(Node::Data(node));
        }
    };
    build_model_node(alex, pairs, model_node_model(&keys, fanout), fanout, merge)
}

/// Builds a model node of `fanout` routing by `model` over `pairs`, and its subtrees.
pub(super) fn build_model_node(
    alex: &mut Alex,
    pairs: &[(u64, u64)],
    model: LinearModel,
    fanout: usize,
    merge: Merge,
) -> NodeId {
    let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let bounds = partition(&keys, &model, fanout);
    let merge_limit = keys.len() / fanout;
    let count = |from: usize, to: usize| -> usize {
        bounds.get(to).copied().unwrap_or(0) - bounds.get(from).copied().unwrap_or(0)
    };
    let mut children: Vec<NodeId> = Vec::with_capacity(fanout);
    let mut slot = 0;
    while slot < fanout {
        let mut width = 1;
        while slot % (width * 2) == 0
            && slot + width * 2 <= fanout
            && (count(slot, slot + width * 2) <= merge_limit
                || (merge == Merge::AverageOrEmptyHalf
                    && (count(slot, slot + width) == 0
                        || count(slot + width, slot + width * 2) == 0)))
        {
            width *= 2;
        }
        let (a, b) = (
            bounds.get(slot).copied().unwrap_or(0),
            bounds.get(slot + width).copied().unwrap_or(0),
        );
        let child = build_subtree(alex, pairs.get(a..b).unwrap_or(&[]), false, merge);
        children.extend(std::iter::repeat_n(child, width));
        slot += width;
    }
    alex.alloc(Node::Model(ModelNode {
        model,
        offset: 0,
        children,
    }))
}

/// The map of a run of `width` slots starting at `start` of a node routing by `model` and
/// `offset`, onto `[0, 1)`: the key range a child owning that run is responsible for.
pub(super) fn run_range(
    model: &LinearModel,
    offset: i64,
    start: usize,
    width: usize,
) -> LinearModel {
    let w = width.max(1) as f64;
    let shift = (offset - start as i64) as f64;
    LinearModel::new(model.base, model.slope / w, (model.intercept + shift) / w)
}

/// Builds a subtree for `pairs` created by updates inside a known key range (`range` maps it
/// onto `[0, 1)`): one data node when they fit (unless `force_model`), else a model node that
/// divides the range evenly among its children, as ALEX derives a new node's model from its
/// parent's, so that keys still to come into the range spread over the children instead of
/// piling into the child nearest the present keys (all present keys may share one child).
/// When keys lie outside the range (clamped in from beyond the edge of the tree, until the
/// root's domain expands), the model is fitted to the keys instead.
pub(super) fn build_in_range(
    alex: &mut Alex,
    pairs: &[(u64, u64)],
    range: &LinearModel,
    force_model: bool,
) -> NodeId {
    let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    if keys.len() < 2 || (!force_model && keys.len() <= alex.max_data_node_keys()) {
        let node = DataNode::build(pairs, INIT_DENSITY, alex.config.max_data_node_slots);
        return alex.alloc(Node::Data(node));
    }
    let fanout = best_fanout(alex, &keys).map_or(2, |(_, f)| f);
    let inside = |k: &u64| (0.0..1.0).contains(&range.predict(*k));
    let model = if keys.first().is_some_and(inside) && keys.last().is_some_and(inside) {
        range.scaled(fanout as f64)
    } else {
        model_node_model(&keys, fanout)
    };
    build_model_node(alex, pairs, model, fanout, Merge::Average)
}
