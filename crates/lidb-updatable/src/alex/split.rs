//! Making room in a full ALEX data node: expand it, or split it sideways or down, as the cost
//! model decides (see the module doc of [`super`]). Called by [`super::Alex`]'s insert only.

use super::data_node::{DataNode, FullAction};
use super::{Alex, Node, NodeId, bulk, cost, route};
use crate::model::LinearModel;

impl Alex {
    /// Makes room in full data node `leaf` (reached from `parent`): expands or splits it.
    pub(super) fn handle_full(&mut self, leaf: NodeId, parent: Option<(NodeId, usize)>) {
        let max_slots = self.config.max_data_node_slots;
        let Some(node) = self.data(leaf) else { return };
        let split = match node.full_action(max_slots) {
            FullAction::Expand => false,
            FullAction::Split => true,
            FullAction::SplitIfCheaper => self.split_is_cheaper(node),
        };
        if split {
            self.split(leaf, parent);
        } else if let Some(d) = self.data_mut(leaf) {
            *d = d.rebuilt(cost::MIN_DENSITY, max_slots);
        }
    }

    /// Whether two data nodes over the halves of `node`'s keys have a lower expected cost than
    /// one node over all of them (ALEX's choice between expanding and splitting in two, made
    /// by its fanout tree over the existing node). The halves are those of a two-way model.
    fn split_is_cheaper(&self, node: &DataNode) -> bool {
        let keys: Vec<u64> = node.pairs().iter().map(|p| p.0).collect();
        let frac = self.config.expected_insert_frac;
        let whole = cost::data_node_expected(&keys, frac);
        let model = bulk::model_node_model(&keys, 2);
        let (left, right) = keys.split_at(keys.partition_point(|&k| model.slot(k, 2) < 1));
        let n = keys.len().max(1) as f64;
        let halves = (cost::data_node_expected(left, frac) * left.len() as f64
            + cost::data_node_expected(right, frac) * right.len() as f64)
            / n
            + cost::MODEL_SIZE_WEIGHT * (2 * std::mem::size_of::<NodeId>()) as f64;
        halves < whole
    }

    /// Splits data node `leaf`: sideways when it owns several parent slots (after doubling the
    /// parent's fanout if it owns one and the parent may grow), down otherwise.
    fn split(&mut self, leaf: NodeId, parent: Option<(NodeId, usize)>) {
        let max_fanout = self.config.max_fanout;
        let Some((parent_id, slot)) = parent else {
            return self.split_down(leaf, None);
        };
        let Some(parent_node) = self.model_mut(parent_id) else {
            return;
        };
        let (mut start, mut width) = parent_node.run_of(slot);
        if width == 1 {
            if parent_node.children.len() * 2 > max_fanout {
                let (model, offset) = (parent_node.model, parent_node.offset);
                return self.split_down(leaf, Some((model, offset, start)));
            }
            parent_node.children = parent_node.children.iter().flat_map(|&c| [c, c]).collect();
            parent_node.model = parent_node.model.scaled(2.0);
            parent_node.offset *= 2;
            start *= 2;
            width = 2;
        }
        let mid = start + width / 2;
        let (parent_model, parent_offset) = (parent_node.model, parent_node.offset);
        let fanout = parent_node.children.len();
        let Some(old) = self.data(leaf) else { return };
        let (prev, next) = (old.prev, old.next);
        let pairs = old.pairs();
        let cut = pairs.partition_point(|p| route(&parent_model, parent_offset, fanout, p.0) < mid);
        let max_slots = self.config.max_data_node_slots;
        let (left_pairs, right_pairs) = pairs.split_at(cut);
        let left = DataNode::build(left_pairs, cost::INIT_DENSITY, max_slots);
        let right = DataNode::build(right_pairs, cost::INIT_DENSITY, max_slots);
        if let Some(d) = self.data_mut(leaf) {
            *d = left;
        }
        let right_id = self.alloc(Node::Data(right));
        if let Some(p) = self.model_mut(parent_id) {
            for c in p.children.iter_mut().skip(mid).take(start + width - mid) {
                *c = right_id;
            }
        }
        self.link_subtree(leaf, prev, Some(right_id));
        self.link_subtree(right_id, Some(leaf), next);
    }

    /// Replaces data node `leaf` by a model node over new data nodes built from its keys. With
    /// `parent` (its model, offset and the one slot `leaf` owns there) the new node divides
    /// that slot's key range evenly, as ALEX derives it from the parent's model, so that keys
    /// still to come into the range spread over its children; the root's new model is fitted
    /// to its keys (keys beyond them are the root domain's business, see [`domain`]).
    fn split_down(&mut self, leaf: NodeId, parent: Option<(LinearModel, i64, usize)>) {
        let Some(old) = self.data(leaf) else { return };
        let (prev, next) = (old.prev, old.next);
        let pairs = old.pairs();
        let sub = match parent {
            Some((model, offset, slot)) => {
                let range = bulk::run_range(&model, offset, slot, 1);
                bulk::build_in_range(self, &pairs, &range, true)
            }
            None => bulk::build_subtree(self, &pairs, true),
        };
        let replacement = self.release(sub);
        if let Some(n) = self.nodes.get_mut(leaf as usize) {
            *n = replacement;
        }
        self.link_subtree(leaf, prev, next);
    }
}
