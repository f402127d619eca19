//! Root key-domain expansion: how ALEX absorbs keys beyond the range the root was trained on.
//!
//! A model node clamps predictions, so without this every key above the root's domain would
//! land in its last child, which would split down again and again into a chain as deep as the
//! number of appends. ALEX counts inserts outside the root's domain and, after a few, expands
//! the root: it multiplies the root's fanout (the model is unchanged, so the new slots lie
//! beyond the old domain; to the left an integer slot offset shifts the old children), gives
//! the new slots empty data nodes, and moves the keys that the old edge child held for the new
//! region. When the root cannot grow it gets a new root above it with two children: the old
//! root, and an empty data node for the keys beyond. Called by [`super::Alex`]'s insert only.

use super::cost::INIT_DENSITY;
use super::data_node::DataNode;
use super::{Alex, ModelNode, Node, NodeId, bulk, raw_slot, route};
use crate::model::LinearModel;

/// Fewest out-of-domain inserts before the root expands (ALEX's `kMinOutOfDomainKeys`).
const MIN_OUT_OF_DOMAIN: u64 = 5;
/// Most out-of-domain inserts before the root expands (ALEX's `kMaxOutOfDomainKeys`).
const MAX_OUT_OF_DOMAIN: u64 = 1000;

impl Alex {
    /// Counts an insert of `key` outside the root's domain; expands the root after enough.
    pub(super) fn note_domain(&mut self, key: u64) {
        let Some(Node::Model(root)) = self.node(self.root) else {
            return;
        };
        let fanout = root.children.len() as i64;
        let raw = raw_slot(&root.model, root.offset, key);
        if (0..fanout).contains(&raw) {
            return;
        }
        self.out_of_domain += 1;
        let threshold = (self.len / 1000).clamp(MIN_OUT_OF_DOMAIN, MAX_OUT_OF_DOMAIN);
        if self.out_of_domain >= threshold {
            self.out_of_domain = 0;
            self.expand_root(raw, raw >= fanout);
        }
    }

    /// Grows the root's fanout (or adds a level) so that slot `raw` lies inside the domain,
    /// with room for as much again.
    fn expand_root(&mut self, raw: i64, right: bool) {
        let Some(Node::Model(root)) = self.node(self.root) else {
            return;
        };
        let fanout = root.children.len();
        let extra = if right {
            raw.saturating_add(1).saturating_sub(fanout as i64)
        } else {
            raw.saturating_neg()
        }
        .max(1) as u64;
        let wanted = (fanout as u64)
            .saturating_add(extra.saturating_mul(2))
            .max(fanout as u64 * 2)
            .checked_next_power_of_two()
            .unwrap_or(u64::MAX);
        if wanted > self.config.max_fanout as u64 {
            return self.add_root_level(right);
        }
        let wanted = wanted as usize;
        let edge_slot = if right { fanout - 1 } else { 0 };
        let (edge_start, edge_width) = root.run_of(edge_slot);
        let Some(&edge_child) = root.children.get(edge_slot) else {
            return;
        };
        let mut pairs = Vec::new();
        self.collect_pairs(edge_child, &mut pairs);
        self.free_subtree(edge_child);

        // The runs to (re)build: the old edge run and the new slots as aligned powers of two.
        let shift = if right { 0 } else { wanted - fanout };
        let mut runs = Vec::new();
        if right {
            runs.push((edge_start, edge_width));
            let mut start = fanout;
            while start < wanted {
                runs.push((start, start));
                start *= 2;
            }
        } else {
            let mut start = 0;
            let mut width = wanted / 2;
            while start < shift {
                runs.push((start, width));
                start += width;
                width /= 2;
            }
            runs.push((edge_start + shift, edge_width));
        }
        let Some(Node::Model(root)) = self.nodes.get_mut(self.root as usize) else {
            return;
        };
        root.offset = root.offset.saturating_add(shift as i64);
        let placeholder = edge_child;
        let mut children = vec![placeholder; wanted];
        for (i, &c) in root.children.iter().enumerate() {
            if let Some(slot) = children.get_mut(i + shift) {
                *slot = c;
            }
        }
        let (model, offset) = (root.model, root.offset);
        let mut rest = pairs.as_slice();
        let mut built = Vec::with_capacity(runs.len());
        for &(start, width) in &runs {
            let take = rest.partition_point(|p| route(&model, offset, wanted, p.0) < start + width);
            let (mine, tail) = rest.split_at(take);
            built.push((start, width, bulk::build_subtree(self, mine, false)));
            rest = tail;
        }
        for (start, width, id) in built {
            for slot in children.iter_mut().skip(start).take(width) {
                *slot = id;
            }
        }
        if let Some(Node::Model(root)) = self.nodes.get_mut(self.root as usize) {
            root.children = children;
        }
        self.link_subtree(self.root, None, None);
    }

    /// Puts a new root of fanout 2 above the current one: the old root keeps every key up to
    /// the largest (right) or from the smallest (left); an empty data node takes the rest.
    fn add_root_level(&mut self, right: bool) {
        let (Some(min), Some(max)) = (self.first_key(), self.last_key()) else {
            return;
        };
        if (right && max == u64::MAX) || (!right && min == 0) {
            return;
        }
        // The model is 0 at the boundary key and negative (however little) below it; the slot
        // offset 1 then sends keys below the boundary to slot 0 and the rest to slot 1. The
        // region beyond the old keys starts as wide as their span.
        let span = (max - min) as f64 + 1.0;
        let base = if right { max + 1 } else { min };
        let model = LinearModel::new(base, 1.0 / span, 0.0);
        let empty = self.alloc(Node::Data(DataNode::build(
            &[],
            INIT_DENSITY,
            self.config.max_data_node_slots,
        )));
        let children = if right {
            vec![self.root, empty]
        } else {
            vec![empty, self.root]
        };
        self.root = self.alloc(Node::Model(ModelNode {
            model,
            offset: 1,
            children,
        }));
        self.link_subtree(self.root, None, None);
    }

    fn first_key(&self) -> Option<u64> {
        let mut leaves = Vec::new();
        self.leaves_of(self.root, &mut leaves);
        leaves
            .iter()
            .find_map(|&l| self.data(l).and_then(|d| d.pairs().first().map(|p| p.0)))
    }

    fn last_key(&self) -> Option<u64> {
        let mut leaves = Vec::new();
        self.leaves_of(self.root, &mut leaves);
        leaves
            .iter()
            .rev()
            .find_map(|&l| self.data(l).and_then(|d| d.pairs().last().map(|p| p.0)))
    }

    /// Appends the pairs of the subtree at `id` in key order.
    fn collect_pairs(&self, id: NodeId, out: &mut Vec<(u64, u64)>) {
        let mut leaves = Vec::new();
        self.leaves_of(id, &mut leaves);
        for leaf in leaves {
            if let Some(d) = self.data(leaf) {
                out.extend(d.pairs());
            }
        }
    }

    /// Returns every node of the subtree at `id` to the free list.
    fn free_subtree(&mut self, id: NodeId) {
        if let Node::Model(m) = self.release(id) {
            for child in m.distinct_children() {
                self.free_subtree(child);
            }
        }
    }
}
