//! ALEX bulk loading and the fanout choice of splits.
//!
//! The bulk load follows the reference implementation (`Alex::bulk_load_node` with
//! `fanout_tree::find_best_fanout_bottom_up`): a node's model maps its key range onto `[0, 1)`
//! (the root's from the smallest and largest key, a child's from the run of parent slots it
//! owns), so a model node splits key space evenly. For a node the loader builds complete levels
//! of a fanout tree (2, 4, 8, ... children), each costed as the key-weighted expected cost of
//! its children as data nodes plus a traversal and the bytes of the child array and one data
//! node header per slot, weighted by all keys over this node's keys (a wide node deep in the
//! tree, over few keys, is charged more); it stops once the cost rose twice in a row, takes the
//! cheapest level and merges sibling children upwards wherever one data node over both costs
//! no more. A node whose data-node cost is already below one traversal is a data node at once.
//! Before this, a least-squares model per node and a merge rule from splits made 3.7 million
//! data nodes for 10 million tweet ids and 86,000 for 274,000 OSM cell ids (172 and 170 bytes
//! per key); the reference's rule makes 9,921 and 4 (23 bytes per key).
//!
//! Splits at run time ([`build_subtree`], [`build_in_range`]) still choose a fanout greedily by
//! the same cost model and merge neighbouring children whose keys are no more than the average
//! per slot.

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

/// Builds the subtree for `pairs` (strictly increasing) after a split and returns its id.
/// With `force_model`, the top is a model node whenever there are at least 2 keys (a split
/// down). Leaf links are left unset; the caller links the subtree's leaves.
pub(super) fn build_subtree(alex: &mut Alex, pairs: &[(u64, u64)], force_model: bool) -> NodeId {
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
    build_model_node(alex, pairs, model_node_model(&keys, fanout), fanout)
}

/// Builds a model node of `fanout` routing by `model` over `pairs`, and its subtrees.
/// Neighbouring runs whose keys are no more than the average per slot share one child (a split
/// child that absorbed its empty neighbours would take the next inserts there too and deepen).
pub(super) fn build_model_node(
    alex: &mut Alex,
    pairs: &[(u64, u64)],
    model: LinearModel,
    fanout: usize,
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
            && count(slot, slot + width * 2) <= merge_limit
        {
            width *= 2;
        }
        let (a, b) = (
            bounds.get(slot).copied().unwrap_or(0),
            bounds.get(slot + width).copied().unwrap_or(0),
        );
        let child = build_subtree(alex, pairs.get(a..b).unwrap_or(&[]), false);
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
    build_model_node(alex, pairs, model, fanout)
}

/// One node of a fanout tree (ALEX's `fanout_tree::FTNode`): the keys `start..end` that slot
/// `id` of `2^level` slots routes, and the expected cost of a data node over them.
#[derive(Debug, Clone, Copy)]
struct FtNode {
    level: u32,
    id: usize,
    cost: f64,
    start: usize,
    end: usize,
    used: bool,
}

impl FtNode {
    fn keys(&self) -> usize {
        self.end - self.start
    }
}

/// Bytes a data node costs beyond its slots, as the reference's cost model charges it:
/// `sizeof(AlexDataNode<u64, u64>)`, 208 bytes with g++ on x86-64 (our node is smaller, about
/// 170, but charging that made 1.8x as many data nodes as the reference on the first 2M tweet
/// ids: the weight stands for a node's cost in the reference's cost model, not our layout).
const DATA_NODE_HEADER_BYTES: f64 = 208.0;
/// Bytes of one child pointer in the reference's model nodes.
const CHILD_POINTER_BYTES: f64 = 8.0;

fn data_node_header_bytes() -> f64 {
    DATA_NODE_HEADER_BYTES
}

/// One complete level of the fanout tree: `2^level` children of the node whose model `range`
/// maps its keys onto `[0, 1)`. Returns the level's cost (ALEX's `compute_level`): a traversal,
/// the child array and one data node header per slot, weighted by the share of all keys this
/// node holds, plus the key-weighted expected cost of the children as data nodes (one more
/// traversal for a child too big for a data node).
fn compute_level(
    alex: &Alex,
    keys: &[u64],
    range: &LinearModel,
    level: u32,
    total_keys: usize,
    out: &mut Vec<FtNode>,
) -> f64 {
    let fanout = 1usize << level;
    let model = range.scaled(fanout as f64);
    let bounds = partition(keys, &model, fanout);
    let n = keys.len().max(1) as f64;
    let max_keys = alex.max_data_node_keys();
    let mut cost = 0.0;
    for (id, w) in bounds.windows(2).enumerate() {
        let [start, end] = *w else { continue };
        let part = keys.get(start..end).unwrap_or(&[]);
        let mut node_cost = 0.0;
        if !part.is_empty() {
            node_cost = cost::data_node_expected(part, alex.config.expected_insert_frac);
            if part.len() > max_keys {
                node_cost += NODE_LOOKUPS_WEIGHT;
            }
            cost += node_cost * part.len() as f64 / n;
        }
        out.push(FtNode {
            level,
            id,
            cost: node_cost,
            start,
            end,
            used: false,
        });
    }
    let slot_bytes = data_node_header_bytes() + CHILD_POINTER_BYTES;
    cost + NODE_LOOKUPS_WEIGHT
        + MODEL_SIZE_WEIGHT * fanout as f64 * slot_bytes * total_keys as f64 / n
}

/// ALEX's bottom-up fanout tree (`find_best_fanout_bottom_up`): adds complete levels while the
/// cost has not risen twice in a row, takes the cheapest level, then merges sibling children
/// upwards wherever one data node over both costs no more (a merged node saves a header).
/// Returns the chosen depth, its cost and the children to build, in key order.
fn best_fanout_tree(
    alex: &Alex,
    keys: &[u64],
    range: &LinearModel,
    node_cost: f64,
    total_keys: usize,
) -> (u32, f64, Vec<FtNode>) {
    let n = keys.len().max(1) as f64;
    let mut best = (0u32, node_cost + NODE_LOOKUPS_WEIGHT);
    let mut costs = vec![best.1];
    let mut tree: Vec<Vec<FtNode>> = vec![vec![FtNode {
        level: 0,
        id: 0,
        cost: best.1,
        start: 0,
        end: keys.len(),
        used: false,
    }]];
    let mut level = 1;
    while (1usize << level) <= alex.config.max_fanout {
        let mut nodes = Vec::with_capacity(1 << level);
        let cost = compute_level(alex, keys, range, level, total_keys, &mut nodes);
        costs.push(cost);
        if let [.., a, b, c] = costs[..]
            && c > b
            && b > a
        {
            break;
        }
        if cost < best.1 {
            best = (level, cost);
        }
        tree.push(nodes);
        // A level past one slot per key only adds empty children.
        if (1usize << level) >= keys.len() {
            break;
        }
        level += 1;
    }
    let (depth, mut best_cost) = best;
    if let Some(nodes) = tree.get_mut(depth as usize) {
        for node in nodes.iter_mut() {
            node.used = true;
        }
    }
    let header = MODEL_SIZE_WEIGHT * data_node_header_bytes() * total_keys as f64;
    for level in (1..=depth as usize).rev() {
        let mut merged = false;
        for i in 0..(1usize << (level - 1)) {
            let (Some(left), Some(right)) = (
                tree.get(level).and_then(|l| l.get(2 * i)).copied(),
                tree.get(level).and_then(|l| l.get(2 * i + 1)).copied(),
            ) else {
                continue;
            };
            let Some(parent) = tree.get(level - 1).and_then(|l| l.get(i)).copied() else {
                continue;
            };
            if !(left.used && right.used) {
                continue;
            }
            let both = parent.keys() as f64;
            let saving = if parent.keys() == 0 {
                header / n
            } else {
                left.cost * left.keys() as f64 / both + right.cost * right.keys() as f64 / both
                    - parent.cost
                    + header / both
            };
            if saving >= 0.0 {
                for (l, j) in [(level, 2 * i), (level, 2 * i + 1)] {
                    if let Some(node) = tree.get_mut(l).and_then(|v| v.get_mut(j)) {
                        node.used = false;
                    }
                }
                if let Some(node) = tree.get_mut(level - 1).and_then(|v| v.get_mut(i)) {
                    node.used = true;
                }
                best_cost -= saving * both / n;
                merged = true;
            }
        }
        if !merged {
            break;
        }
    }
    let mut used: Vec<FtNode> = tree
        .iter()
        .take(depth as usize + 1)
        .flatten()
        .filter(|node| node.used)
        .copied()
        .collect();
    used.sort_by_key(|node| node.id << (depth - node.level));
    (depth, best_cost, used)
}

/// The bulk load (ALEX's `bulk_load_node`): the node over `pairs` whose keys `range` maps onto
/// `[0, 1)`, with `node_cost` the expected cost of one data node over them. A data node when
/// no model node can beat it (its cost is below one traversal) or the fanout tree finds none
/// cheaper; else a model node whose model is `range` scaled to the chosen fanout, and whose
/// children, each over an aligned run of slots, are built the same way. `total_keys` (all keys
/// of the index) weighs the size of a node against the share of keys below it.
pub(super) fn bulk_load_node(
    alex: &mut Alex,
    pairs: &[(u64, u64)],
    range: &LinearModel,
    node_cost: f64,
    total_keys: usize,
) -> NodeId {
    let n = pairs.len();
    let max_keys = alex.max_data_node_keys();
    let data_node = |alex: &mut Alex| {
        let node = DataNode::build(pairs, INIT_DENSITY, alex.config.max_data_node_slots);
        alex.alloc(Node::Data(node))
    };
    if n <= max_keys && (node_cost < NODE_LOOKUPS_WEIGHT || range.slope == 0.0 || n < 2) {
        return data_node(alex);
    }
    let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let (mut depth, best_cost, mut used) =
        best_fanout_tree(alex, &keys, range, node_cost, total_keys);
    if best_cost >= node_cost && n <= max_keys {
        return data_node(alex);
    }
    if depth == 0 {
        // Too many keys for one data node, yet no fanout looked cheaper: split to the fanout
        // that makes the children fit, in expectation (as ALEX does).
        depth = ((n as f64 / alex.config.max_data_node_slots as f64).log2() as u32 + 1).max(1);
        used.clear();
        compute_level(alex, &keys, range, depth, total_keys, &mut used);
    }
    if used.iter().any(|node| node.keys() == n) {
        // The range's model cannot tell these keys apart (f64 precision over a wide range, or
        // a merge back to one child): recursing would not make progress.
        if n <= max_keys {
            return data_node(alex);
        }
        return build_subtree(alex, pairs, true);
    }
    let fanout = 1usize << depth;
    let model = range.scaled(fanout as f64);
    let mut children: Vec<NodeId> = Vec::with_capacity(fanout);
    for node in used {
        let repeats = 1usize << (depth - node.level);
        let start = children.len();
        let child_range = run_range(&model, 0, start, repeats);
        let part = pairs.get(node.start..node.end).unwrap_or(&[]);
        let child = bulk_load_node(alex, part, &child_range, node.cost, total_keys);
        children.extend(std::iter::repeat_n(child, repeats));
    }
    alex.alloc(Node::Model(ModelNode {
        model,
        offset: 0,
        children,
    }))
}

/// The model that maps the key range `[first, last]` onto `[0, 1)` (ALEX's root before bulk
/// loading: slope `1 / (last - first)`; the last key maps just below 1, into the last slot at
/// any fanout, where ALEX clamps it there).
pub(super) fn key_range(first: u64, last: u64) -> LinearModel {
    let span = LinearModel::new(first, 0.0, 0.0).offset(last);
    if span > 0.0 {
        LinearModel::new(first, (1.0 - 1e-12) / span, 0.0)
    } else {
        LinearModel::new(first, 0.0, 0.0)
    }
}
