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
//!
//! Measured: without expansion 20K sorted inserts made a chain of depth 1240, and 150 when
//! split-down nodes were fitted to their few keys; the structure test holds sorted and reverse
//! inserts to depth 16 and a dense load followed by keys from the whole domain to depth 8 with
//! 16-way nodes of 64 slots; with the default sizes they stay at depth 2.

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
            self.expand_root(key, raw, raw >= fanout);
        }
    }

    /// Grows the root's fanout (or adds a level) so that slot `raw` lies inside the domain,
    /// with room for as much again.
    fn expand_root(&mut self, key: u64, raw: i64, right: bool) {
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
            return self.add_root_level(key, right);
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
            let range = bulk::run_range(&model, offset, start, width);
            built.push((
                start,
                width,
                bulk::build_in_range(self, mine, &range, false),
            ));
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

    /// Puts a new root of fanout 2 above the current one. The keys the old root's edge child
    /// holds beyond the old domain (inserted before the expansion, clamped in) move to the new
    /// side; the boundary between the sides is the first of them (right) or just past the last
    /// (left), or the edge of the present keys when there are none. The new side spans twice the
    /// distance to `key`, the outlying key that triggered the expansion, and at least the span
    /// of the present keys, so that one new level covers the keys arriving out there.
    fn add_root_level(&mut self, key: u64, right: bool) {
        let (Some(min), Some(max)) = (self.first_key(), self.last_key()) else {
            return;
        };
        let Some(Node::Model(root)) = self.node(self.root) else {
            return;
        };
        let fanout = root.children.len() as i64;
        let (model, offset) = (root.model, root.offset);
        let edge_slot = if right { fanout as usize - 1 } else { 0 };
        let (edge_start, edge_width) = root.run_of(edge_slot);
        let Some(&edge_child) = root.children.get(edge_slot) else {
            return;
        };
        let mut pairs = Vec::new();
        self.collect_pairs(edge_child, &mut pairs);
        let inside = |k: u64| (0..fanout).contains(&raw_slot(&model, offset, k));
        let cut = if right {
            pairs.partition_point(|p| inside(p.0))
        } else {
            pairs.partition_point(|p| !inside(p.0))
        };
        let (low, high) = pairs.split_at(cut);
        let (stay, away) = if right { (low, high) } else { (high, low) };
        let boundary = match (right, away.first(), away.last()) {
            (true, Some(first), _) => first.0,
            (true, None, _) if max < u64::MAX => max + 1,
            (false, _, Some(last)) => last.0 + 1,
            (false, _, None) if min > 0 => min,
            _ => return,
        };
        if !away.is_empty() {
            self.free_subtree(edge_child);
            let range = bulk::run_range(&model, offset, edge_start, edge_width);
            let rebuilt = bulk::build_in_range(self, stay, &range, false);
            if let Some(Node::Model(root)) = self.nodes.get_mut(self.root as usize) {
                for c in root.children.iter_mut().skip(edge_start).take(edge_width) {
                    *c = rebuilt;
                }
            }
        }
        let far = if right {
            key.max(max).saturating_sub(boundary)
        } else {
            boundary.saturating_sub(key.min(min))
        };
        let width = (far as f64 * 2.0).max((max - min) as f64 + 1.0);
        // The model is 0 at the boundary key and negative (however little) below it; the slot
        // offset 1 then sends keys below the boundary to slot 0 and the rest to slot 1.
        let model = LinearModel::new(boundary, 1.0 / width, 0.0);
        let new_range = LinearModel::new(boundary, 1.0 / width, if right { 0.0 } else { 1.0 });
        let new_side = bulk::build_in_range(self, away, &new_range, false);
        let children = if right {
            vec![self.root, new_side]
        } else {
            vec![new_side, self.root]
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
