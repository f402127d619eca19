//! ALEX (Ding et al., "ALEX: An Updatable Adaptive Learned Index", SIGMOD 2020): a tree of
//! model nodes over data nodes. A model node's linear model picks a child from its child array;
//! a data node ([`data_node`]) is a gapped array whose model places each key near its predicted
//! slot, found again by exponential search from the prediction.
//!
//! Inserts go to the predicted slot when it is free (model-based insert), else shift keys into
//! the nearest gap. A data node that would pass 80% density either expands to 60% (retraining
//! its model) or splits, as ALEX's cost model decides ([`cost`]): it splits when its empirical
//! cost (search iterations and shifts counted by inserts) exceeds 1.5x the cost expected when it
//! was built, when shifts are catastrophic, or when it cannot grow past the maximum node size. A
//! data node that owns 2^k > 1 slots of its parent splits sideways into two halves; one that owns
//! one slot doubles its parent's child array first (if the parent may grow) or else splits down
//! into a new model node. Bulk loading chooses node kinds and fanouts by the same cost model with
//! the reference implementation's fanout tree ([`bulk`]).
//!
//! Invariants (checked by [`Alex::assert_invariants`]):
//! 1. a model node's children array has a power-of-two length; each child owns an aligned run
//!    of 2^k equal entries; every key of a child routes (by the parent's model) into its run;
//! 2. data nodes keep the gapped-array invariants of [`data_node`];
//! 3. the data nodes' `prev`/`next` links list all data nodes in key order (the order of an
//!    in-order walk of the tree), so iteration follows the links;
//! 4. `len` is the sum of the data nodes' key counts.
//!
//! Nodes live in one arena (`Vec<Node>` indexed by [`NodeId`]) so that many parent slots can
//! name one child and leaves can link to neighbours without shared pointers. Single writer
//! (`&mut self`); readers share `&self` and never mutate.
//!
//! Differs from the reference (microsoft/ALEX) and why: reads do not count search statistics (gets
//! stay `&self`), so the empirical cost is measured on inserts only; the choice between expanding
//! and splitting compares one node with a two-way split by a fitted model, not ALEX's fanout tree
//! over the parent's model; splits are always in two and never upwards (the reference's default
//! too); costs are computed on all keys (no sampling); the expected shifts of a placement are
//! estimated as r^2/4 per run of r adjacent keys; a key predicted past either end of a data node
//! goes next to the existing keys on that side (instead of the reference's append-mostly
//! expansion), which keeps appends free of shifts until the next expansion; a node under 30%
//! density after removals is rebuilt at 70% (nodes are never merged, as in the reference).

mod bulk;
pub(crate) mod cost;
pub(crate) mod data_node;
mod domain;
mod iter;
mod split;

pub use iter::Iter;

use crate::model::LinearModel;
use crate::{BulkLoadError, IndexStats, UpdatableIndex, check_strictly_increasing};
use data_node::{DataNode, Upsert};

/// Index of a node in the arena.
pub(crate) type NodeId = u32;

/// Tuning of an ALEX index. The defaults are the reference implementation's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlexConfig {
    /// Most slots of one data node (reference: 16 MiB of 16-byte slots, 2^20).
    pub max_data_node_slots: usize,
    /// Largest fanout of a model node (reference: 2^21).
    pub max_fanout: usize,
    /// Expected fraction of operations that are inserts, weighting shifts in the cost model
    /// (reference default: 1).
    pub expected_insert_frac: f64,
}

impl Default for AlexConfig {
    fn default() -> AlexConfig {
        AlexConfig {
            max_data_node_slots: 1 << 20,
            max_fanout: 1 << 21,
            expected_insert_frac: 1.0,
        }
    }
}

/// An ALEX index (see the module doc).
#[derive(Debug)]
pub struct Alex {
    config: AlexConfig,
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    root: NodeId,
    len: u64,
    /// Inserts whose key fell outside the root's key domain since it last expanded.
    out_of_domain: u64,
}

#[derive(Debug)]
pub(crate) enum Node {
    Model(ModelNode),
    Data(DataNode),
    Free,
}

#[derive(Debug)]
pub(crate) struct ModelNode {
    model: LinearModel,
    /// Added to the model's whole-slot prediction before clamping; grows when the root's key
    /// domain is expanded to the left (an integer, so existing keys keep their exact slots).
    offset: i64,
    children: Vec<NodeId>,
}

/// The unclamped slot of `key`: `floor(model(key)) + offset`.
fn raw_slot(model: &LinearModel, offset: i64, key: u64) -> i64 {
    crate::model::floor_i64(model.predict(key)).saturating_add(offset)
}

/// The child slot of `key` among `fanout`: [`raw_slot`] clamped to `[0, fanout)`. Every lookup
/// routes through here once per model node, so the usual case (no offset: only a root whose
/// domain grew to the left has one) is one clamp of the prediction, which equals the general
/// case's result: truncation is the floor on the positive predictions it keeps.
#[inline]
fn route(model: &LinearModel, offset: i64, fanout: usize, key: u64) -> usize {
    if offset == 0 {
        crate::model::clamp_slot(model.predict(key), fanout)
    } else {
        raw_slot(model, offset, key).clamp(0, (fanout as i64 - 1).max(0)) as usize
    }
}

impl ModelNode {
    #[inline]
    fn child_slot(&self, key: u64) -> usize {
        route(&self.model, self.offset, self.children.len(), key)
    }

    /// The aligned run of slots `[start, start + width)` that holds the child at `slot`.
    fn run_of(&self, slot: usize) -> (usize, usize) {
        let child = self.children.get(slot).copied();
        let mut start = slot;
        while start > 0 && self.children.get(start - 1).copied() == child {
            start -= 1;
        }
        let mut end = slot + 1;
        while self
            .children
            .get(end)
            .copied()
            .is_some_and(|c| Some(c) == child)
        {
            end += 1;
        }
        (start, end - start)
    }

    /// Distinct children in slot order.
    fn distinct_children(&self) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = Vec::new();
        for &c in &self.children {
            if out.last() != Some(&c) {
                out.push(c);
            }
        }
        out
    }
}

impl Alex {
    /// Bulk-loads with an explicit configuration (see [`UpdatableIndex::bulk_load`]).
    pub fn with_config(config: AlexConfig, pairs: &[(u64, u64)]) -> Result<Alex, BulkLoadError> {
        check_strictly_increasing(pairs)?;
        let config = AlexConfig {
            max_data_node_slots: config
                .max_data_node_slots
                .max(cost::MIN_DATA_NODE_SLOTS * 2),
            max_fanout: config.max_fanout.max(2).next_power_of_two(),
            ..config
        };
        let mut alex = Alex {
            config,
            nodes: Vec::new(),
            free: Vec::new(),
            root: 0,
            len: pairs.len() as u64,
            out_of_domain: 0,
        };
        let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        let range = match (keys.first(), keys.last()) {
            (Some(&first), Some(&last)) => bulk::key_range(first, last),
            _ => crate::model::LinearModel::new(0, 0.0, 0.0),
        };
        let root_cost = cost::data_node_expected(&keys, alex.config.expected_insert_frac);
        drop(keys);
        alex.root = bulk::bulk_load_node(&mut alex, pairs, &range, root_cost, pairs.len());
        alex.link_subtree(alex.root, None, None);
        Ok(alex)
    }

    /// Most keys a data node is built with.
    fn max_data_node_keys(&self) -> usize {
        (self.config.max_data_node_slots as f64 * cost::INIT_DENSITY) as usize
    }

    fn alloc(&mut self, node: Node) -> NodeId {
        match self.free.pop() {
            Some(id) => {
                if let Some(n) = self.nodes.get_mut(id as usize) {
                    *n = node;
                }
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    fn release(&mut self, id: NodeId) -> Node {
        self.free.push(id);
        self.nodes
            .get_mut(id as usize)
            .map_or(Node::Free, |n| std::mem::replace(n, Node::Free))
    }

    fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    fn data(&self, id: NodeId) -> Option<&DataNode> {
        match self.node(id)? {
            Node::Data(d) => Some(d),
            _ => None,
        }
    }

    fn data_mut(&mut self, id: NodeId) -> Option<&mut DataNode> {
        match self.nodes.get_mut(id as usize)? {
            Node::Data(d) => Some(d),
            _ => None,
        }
    }

    fn model_mut(&mut self, id: NodeId) -> Option<&mut ModelNode> {
        match self.nodes.get_mut(id as usize)? {
            Node::Model(m) => Some(m),
            _ => None,
        }
    }

    /// The data node `key` routes to.
    fn leaf_of(&self, key: u64) -> NodeId {
        let mut id = self.root;
        while let Some(Node::Model(m)) = self.node(id) {
            match m.children.get(m.child_slot(key)) {
                Some(&child) => id = child,
                None => break,
            }
        }
        id
    }

    /// The data node `key` routes to, and its parent with the slot taken there.
    fn leaf_and_parent(&self, key: u64) -> (NodeId, Option<(NodeId, usize)>) {
        let mut id = self.root;
        let mut parent = None;
        while let Some(Node::Model(m)) = self.node(id) {
            let slot = m.child_slot(key);
            match m.children.get(slot) {
                Some(&child) => {
                    parent = Some((id, slot));
                    id = child;
                }
                None => break,
            }
        }
        (id, parent)
    }

    /// Data nodes of the subtree at `id`, in key order.
    fn leaves_of(&self, id: NodeId, out: &mut Vec<NodeId>) {
        match self.node(id) {
            Some(Node::Data(_)) => out.push(id),
            Some(Node::Model(m)) => {
                for child in m.distinct_children() {
                    self.leaves_of(child, out);
                }
            }
            _ => {}
        }
    }

    /// Links the subtree's data nodes in order between `prev` and `next`.
    fn link_subtree(&mut self, id: NodeId, prev: Option<NodeId>, next: Option<NodeId>) {
        let mut chain = vec![];
        self.leaves_of(id, &mut chain);
        let mut before = prev;
        for (i, &leaf) in chain.iter().enumerate() {
            let after = chain.get(i + 1).copied().or(next);
            if let Some(d) = self.data_mut(leaf) {
                d.prev = before;
                d.next = after;
            }
            before = Some(leaf);
        }
        let (first, last) = (chain.first().copied(), chain.last().copied());
        if let Some(d) = prev.and_then(|p| self.data_mut(p)) {
            d.next = first.or(next);
        }
        if let Some(d) = next.and_then(|n| self.data_mut(n)) {
            d.prev = last.or(prev);
        }
    }

    /// Walks the subtree at `id`: checks invariants 1-2 and returns its key count.
    fn check_node(&self, id: NodeId) -> u64 {
        match self.node(id) {
            Some(Node::Data(d)) => {
                d.check();
                for (key, _) in d.pairs() {
                    assert_eq!(self.leaf_of(key), id, "alex: key {key} does not route home");
                }
                d.len() as u64
            }
            Some(Node::Model(m)) => {
                let fanout = m.children.len();
                assert!(fanout.is_power_of_two(), "alex: fanout {fanout}");
                let mut total = 0;
                let mut slot = 0;
                while slot < fanout {
                    let (start, width) = m.run_of(slot);
                    assert!(
                        width.is_power_of_two() && start % width == 0,
                        "alex: child run [{start}, +{width}) not aligned"
                    );
                    let child = m.children.get(slot).copied().unwrap_or(id);
                    total += self.check_node(child);
                    slot = start + width;
                }
                total
            }
            _ => panic!("alex: node {id} is free but reachable"),
        }
    }

    fn shape(&self, id: NodeId, level: u64, acc: &mut IndexStats, key_depth_sum: &mut u64) {
        acc.nodes += 1;
        acc.models += 1;
        match self.node(id) {
            Some(Node::Data(d)) => {
                acc.leaf_nodes += 1;
                if d.len() > 0 {
                    acc.depth_max = acc.depth_max.max(level);
                }
                *key_depth_sum += level * d.len() as u64;
            }
            Some(Node::Model(m)) => {
                acc.inner_nodes += 1;
                for child in m.distinct_children() {
                    self.shape(child, level + 1, acc, key_depth_sum);
                }
            }
            _ => {}
        }
    }
}

impl UpdatableIndex for Alex {
    type Iter<'a> = Iter<'a>;
    const NAME: &'static str = "alex";

    fn bulk_load(pairs: &[(u64, u64)]) -> Result<Alex, BulkLoadError> {
        Alex::with_config(AlexConfig::default(), pairs)
    }

    fn get(&self, key: u64) -> Option<u64> {
        self.data(self.leaf_of(key))?.get(key)
    }

    fn insert(&mut self, key: u64, value: u64) -> Option<u64> {
        self.note_domain(key);
        loop {
            let (leaf, parent) = self.leaf_and_parent(key);
            match self.data_mut(leaf)?.upsert(key, value) {
                Upsert::Replaced(old) => return Some(old),
                Upsert::Inserted => {
                    self.len += 1;
                    return None;
                }
                Upsert::Full => self.handle_full(leaf, parent),
            }
        }
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let leaf = self.leaf_of(key);
        let max_slots = self.config.max_data_node_slots;
        let node = self.data_mut(leaf)?;
        let value = node.remove(key)?;
        if node.should_contract() {
            *node = node.rebuilt(cost::INIT_DENSITY, max_slots);
        }
        self.len -= 1;
        Some(value)
    }

    fn range_from(&self, key: u64) -> Iter<'_> {
        let leaf = self.leaf_of(key);
        let slot = self
            .data(leaf)
            .and_then(|d| d.lower_bound(key))
            .unwrap_or(usize::MAX);
        match slot {
            usize::MAX => Iter::new(self, self.data(leaf).and_then(|d| d.next), 0),
            slot => Iter::new(self, Some(leaf), slot),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn size_bytes(&self) -> u64 {
        let arena = self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * std::mem::size_of::<NodeId>();
        let heap: u64 = self
            .nodes
            .iter()
            .map(|n| match n {
                Node::Data(d) => d.heap_bytes(),
                Node::Model(m) => (m.children.capacity() * std::mem::size_of::<NodeId>()) as u64,
                Node::Free => 0,
            })
            .sum();
        std::mem::size_of::<Alex>() as u64 + arena as u64 + heap
    }

    fn stats(&self) -> IndexStats {
        let mut stats = IndexStats::default();
        let mut key_depth_sum = 0;
        self.shape(self.root, 1, &mut stats, &mut key_depth_sum);
        if self.len > 0 {
            stats.depth_avg = key_depth_sum as f64 / self.len as f64;
        }
        stats
    }

    fn assert_invariants(&self) {
        let total = self.check_node(self.root);
        assert_eq!(total, self.len, "alex: len does not match the data nodes");
        let mut in_order = Vec::new();
        self.leaves_of(self.root, &mut in_order);
        let mut linked = Vec::new();
        let mut cursor = in_order.first().copied();
        let mut prev = None;
        while let Some(id) = cursor {
            let Some(d) = self.data(id) else {
                panic!("alex: leaf link to non-data node {id}");
            };
            assert_eq!(d.prev, prev, "alex: broken prev link at node {id}");
            linked.push(id);
            assert!(linked.len() <= in_order.len(), "alex: leaf links loop");
            prev = Some(id);
            cursor = d.next;
        }
        assert_eq!(
            linked, in_order,
            "alex: leaf links differ from the tree order"
        );
        let keys: Vec<u64> = self.range_from(0).map(|p| p.0).collect();
        assert_eq!(keys.len() as u64, self.len, "alex: iteration misses keys");
        assert!(
            keys.windows(2).all(|w| matches!(w, [a, b] if a < b)),
            "alex: iteration is not increasing"
        );
    }
}
