//! ALEX data node: a gapped array of (key, value) slots placed by a linear model.
//!
//! Invariants (checked by [`DataNode::check`]):
//! 1. `keys` is non-decreasing over all slots, gaps included;
//! 2. a gap holds the key of the next occupied slot to its right, or `u64::MAX` when there is
//!    none (so a lower-bound search over all slots stops at or before the right key, and the
//!    answer is the next occupied slot from there);
//! 3. `occupied` has one bit per slot, set for slots holding a key; `num_keys` counts them;
//!    occupied keys are strictly increasing.
//!
//! `u64::MAX` is a valid key: a trailing gap also holds `u64::MAX`, which invariant 2 makes
//! harmless because lookups always move on to the next *occupied* slot.
//!
//! Owned by [`super::Alex`]; single writer.

use super::NodeId;
use super::cost::{self, ExpectedCost};
use crate::model::LinearModel;

#[derive(Debug)]
pub(crate) struct DataNode {
    pub model: LinearModel,
    keys: Vec<u64>,
    values: Vec<u64>,
    occupied: Vec<u64>,
    num_keys: usize,
    /// Neighbouring data nodes in key order.
    pub prev: Option<NodeId>,
    pub next: Option<NodeId>,
    /// Expected cost of the node when it was (re)built.
    expected: ExpectedCost,
    /// Workload statistics since the node was (re)built, counted by inserts.
    num_inserts: u64,
    num_search_iterations: f64,
    num_shifts: u64,
}

/// What a full data node should do before it can take another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullAction {
    Expand,
    /// The empirical cost deviates from the expected one: split if the cost model says two
    /// halves are cheaper than one expanded node, expand otherwise.
    SplitIfCheaper,
    /// Shifts are catastrophic or the node cannot grow: split.
    Split,
}

/// Outcome of [`DataNode::upsert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upsert {
    Replaced(u64),
    Inserted,
    /// The key is absent and the node is full: expand or split first.
    Full,
}

impl DataNode {
    /// A node holding `pairs` (strictly increasing) at `density` of its slots.
    pub fn build(pairs: &[(u64, u64)], density: f64, max_slots: usize) -> DataNode {
        let n = pairs.len();
        let capacity = cost::capacity_for(n, density).min(max_slots.max(n + 1));
        let keys_only: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        let model = cost::data_node_model(&keys_only, capacity);
        let expected = cost::expected_cost(&keys_only, &model, capacity);
        let mut keys = vec![u64::MAX; capacity];
        let mut values = vec![0; capacity];
        let mut occupied = vec![0u64; capacity.div_ceil(64)];
        cost::place(&keys_only, &model, capacity, |i, _, slot| {
            if let (Some(k), Some(v), Some(&(key, value))) =
                (keys.get_mut(slot), values.get_mut(slot), pairs.get(i))
            {
                *k = key;
                *v = value;
            }
            if let Some(word) = occupied.get_mut(slot / 64) {
                *word |= 1 << (slot % 64);
            }
        });
        let mut node = DataNode {
            model,
            keys,
            values,
            occupied,
            num_keys: n,
            prev: None,
            next: None,
            expected,
            num_inserts: 0,
            num_search_iterations: 0.0,
            num_shifts: 0,
        };
        node.refill_gaps(0, capacity);
        node
    }

    /// The same keys rebuilt at `density` (expansion, contraction); keeps the leaf links.
    pub fn rebuilt(&self, density: f64, max_slots: usize) -> DataNode {
        let mut node = DataNode::build(&self.pairs(), density, max_slots);
        node.prev = self.prev;
        node.next = self.next;
        node
    }

    pub fn capacity(&self) -> usize {
        self.keys.len()
    }

    pub fn len(&self) -> usize {
        self.num_keys
    }

    fn is_occupied(&self, slot: usize) -> bool {
        self.occupied
            .get(slot / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    fn set_occupied(&mut self, slot: usize, on: bool) {
        if let Some(word) = self.occupied.get_mut(slot / 64) {
            if on {
                *word |= 1 << (slot % 64);
            } else {
                *word &= !(1 << (slot % 64));
            }
        }
    }

    /// First slot `>= from` whose bit equals `occupied`, if any.
    fn next_with(&self, from: usize, occupied: bool) -> Option<usize> {
        let cap = self.capacity();
        let mut word_index = from / 64;
        let mut mask = u64::MAX.checked_shl((from % 64) as u32).unwrap_or(0);
        while let Some(&word) = self.occupied.get(word_index) {
            let bits = if occupied { word } else { !word } & mask;
            if bits != 0 {
                let slot = word_index * 64 + bits.trailing_zeros() as usize;
                return (slot < cap).then_some(slot);
            }
            word_index += 1;
            mask = u64::MAX;
        }
        None
    }

    /// Last slot `< before` whose bit equals `occupied`, if any.
    fn prev_with(&self, before: usize, occupied: bool) -> Option<usize> {
        if before == 0 {
            return None;
        }
        let last = before - 1;
        let mut word_index = last / 64;
        let mut mask = u64::MAX >> (63 - (last % 64));
        loop {
            let word = *self.occupied.get(word_index)?;
            let bits = if occupied { word } else { !word } & mask;
            if bits != 0 {
                return Some(word_index * 64 + 63 - bits.leading_zeros() as usize);
            }
            word_index = word_index.checked_sub(1)?;
            mask = u64::MAX;
        }
    }

    /// First occupied slot at or after `from`.
    pub fn next_occupied(&self, from: usize) -> Option<usize> {
        self.next_with(from, true)
    }

    /// The pair in occupied `slot`.
    pub fn pair_at(&self, slot: usize) -> Option<(u64, u64)> {
        Some((*self.keys.get(slot)?, *self.values.get(slot)?))
    }

    /// Sets `keys[from..to]` of the gaps in that range from the next occupied key (invariant 2),
    /// scanning right to left from `to`.
    fn refill_gaps(&mut self, from: usize, to: usize) {
        let mut fill = self
            .next_occupied(to)
            .and_then(|s| self.keys.get(s).copied())
            .unwrap_or(u64::MAX);
        for slot in (from..to).rev() {
            if self.is_occupied(slot) {
                fill = self.keys.get(slot).copied().unwrap_or(fill);
            } else if let Some(k) = self.keys.get_mut(slot) {
                *k = fill;
            }
        }
    }

    /// Exponential search from the predicted slot for the first slot whose key is `>= key`
    /// (`capacity` if none); also returns the search's distance from the prediction.
    fn lower_bound_slot(&self, key: u64) -> (usize, usize) {
        self.search_from_prediction(key, |k| k < key)
    }

    /// Exponential search from `key`'s predicted slot for the first slot where `before` (a
    /// predicate true on a prefix of the slots) is false; the slot and its distance from the
    /// prediction. As the reference implementation searches: probes at distances 1, 2, 4, ...
    /// bracket the answer, then a binary search with a branch per step narrows it. A branch,
    /// not a conditional move: predicted, it lets the processor start the next lookup's loads
    /// while this one's key line is still on its way from memory, which a branch-free search
    /// (each step's address waiting on the last step's load) prevents; that overlap was most of
    /// the reference's lead on 10M keys.
    #[inline]
    fn search_from_prediction(&self, key: u64, before: impl Fn(u64) -> bool) -> (usize, usize) {
        let keys = self.keys.as_slice();
        let p = self.model.slot(key, keys.len());
        let (mut lo, mut hi) = match keys.get(p) {
            Some(&k) if !before(k) => {
                let mut bound = 1;
                while let Some(&k) = p.checked_sub(bound).and_then(|i| keys.get(i)) {
                    if before(k) {
                        break;
                    }
                    bound *= 2;
                }
                (p.saturating_sub(bound), p - bound / 2)
            }
            _ => {
                let mut bound = 1;
                while let Some(&k) = keys.get(p + bound) {
                    if !before(k) {
                        break;
                    }
                    bound *= 2;
                }
                (p + bound / 2, (p + bound).min(keys.len()))
            }
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if keys.get(mid).is_some_and(|&k| before(k)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo, lo.abs_diff(p))
    }

    /// Slot holding `key`, if present. As the reference implementation finds a key: the last
    /// slot whose key is `<= key` holds `key` only if `key` is stored there (a gap holds the key
    /// of the next occupied slot, so the last of a run of equal keys is occupied), so the
    /// occupancy bitmap is not read. `u64::MAX` is the exception (trailing gaps hold it too).
    pub fn find(&self, key: u64) -> Option<usize> {
        if key == u64::MAX {
            let slot = self.next_occupied(self.lower_bound_slot(key).0)?;
            return (self.keys.get(slot) == Some(&key)).then_some(slot);
        }
        let (after, _) = self.search_from_prediction(key, |k| k <= key);
        let slot = after.checked_sub(1)?;
        (self.keys.get(slot) == Some(&key)).then_some(slot)
    }

    /// First occupied slot whose key is `>= key`.
    pub fn lower_bound(&self, key: u64) -> Option<usize> {
        self.next_occupied(self.lower_bound_slot(key).0)
    }

    pub fn get(&self, key: u64) -> Option<u64> {
        self.values.get(self.find(key)?).copied()
    }

    /// Whether one more key would exceed the maximum density.
    fn is_full(&self) -> bool {
        (self.num_keys + 1) as f64 > self.capacity() as f64 * cost::MAX_DENSITY
    }

    /// What to do when full (ALEX's insert failure cases): a forced split when shifts are
    /// catastrophic or the expanded node would exceed `max_slots`; a cost-model choice when
    /// the empirical cost deviates significantly from the expected one; otherwise expand.
    pub fn full_action(&self, max_slots: usize) -> FullAction {
        let expanded = cost::capacity_for(self.num_keys + 1, cost::MIN_DENSITY);
        if self.num_keys < 2 {
            FullAction::Expand
        } else if self.catastrophic_cost() || expanded > max_slots {
            FullAction::Split
        } else if self.significant_cost_deviation() {
            FullAction::SplitIfCheaper
        } else {
            FullAction::Expand
        }
    }

    fn shifts_per_insert(&self) -> f64 {
        if self.num_inserts == 0 {
            0.0
        } else {
            self.num_shifts as f64 / self.num_inserts as f64
        }
    }

    fn empirical_cost(&self) -> f64 {
        if self.num_inserts == 0 {
            return 0.0;
        }
        let iterations = self.num_search_iterations / self.num_inserts as f64;
        cost::data_node_cost(iterations, self.shifts_per_insert(), 1.0)
    }

    fn significant_cost_deviation(&self) -> bool {
        let empirical = self.empirical_cost();
        empirical > cost::NODE_LOOKUPS_WEIGHT
            && empirical > cost::COST_DEVIATION_FACTOR * self.expected.cost(1.0)
    }

    fn catastrophic_cost(&self) -> bool {
        self.shifts_per_insert() > cost::CATASTROPHIC_SHIFTS
            || self.expected.avg_shifts > cost::CATASTROPHIC_SHIFTS
    }

    /// Maps `key` to `value` with one search: replaces the value of a present key, inserts an
    /// absent one unless the node is full. A key predicted past either end goes next to the
    /// existing keys on that side, which keeps appends (and prepends) free of shifts until the
    /// next expansion retrains the model.
    pub fn upsert(&mut self, key: u64, value: u64) -> Upsert {
        let (i, distance) = self.lower_bound_slot(key);
        let run_end = self.next_occupied(i);
        let present = run_end.filter(|&j| self.keys.get(j) == Some(&key));
        if let Some(v) = present.and_then(|j| self.values.get_mut(j)) {
            return Upsert::Replaced(std::mem::replace(v, value));
        }
        if self.is_full() {
            return Upsert::Full;
        }
        let cap = self.capacity();
        let raw = self.model.predict(key);
        let predicted = self.model.slot(key, cap);
        self.num_inserts += 1;
        self.num_search_iterations += cost::search_iterations(distance);
        let run_end = run_end.unwrap_or(cap);
        let slot = if run_end > i {
            // Slots [i, run_end) are gaps between the previous key and the next one.
            if raw >= cap as f64 {
                i
            } else if raw < 0.0 {
                run_end - 1
            } else {
                predicted.clamp(i, run_end - 1)
            }
        } else {
            self.make_room(i)
        };
        if let (Some(k), Some(v)) = (self.keys.get_mut(slot), self.values.get_mut(slot)) {
            *k = key;
            *v = value;
        }
        self.set_occupied(slot, true);
        self.num_keys += 1;
        self.refill_gaps(i.min(slot), slot);
        Upsert::Inserted
    }

    /// Frees a slot for a key that belongs just before occupied slot `i` (or at the end when
    /// `i == capacity`) by shifting keys into the nearest gap; returns the freed slot.
    fn make_room(&mut self, i: usize) -> usize {
        let right = self.next_with(i, false);
        let left = self.prev_with(i, false);
        let use_right = match (left, right) {
            (Some(l), Some(r)) => r - i <= i - l,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if use_right {
            let gap = right.unwrap_or(i);
            self.shift(i, gap, true);
            self.num_shifts += (gap - i) as u64;
            i
        } else {
            let gap = left.unwrap_or(0);
            self.shift(gap, i, false);
            self.num_shifts += (i - 1 - gap) as u64;
            i - 1
        }
    }

    /// Moves slots `[from, to)` one right (into gap `to`) or slots `(from, to)` one left (into
    /// gap `from`); the vacated slot becomes the insert position.
    fn shift(&mut self, from: usize, to: usize, right: bool) {
        if right {
            if let Some(s) = self.keys.get_mut(from..=to) {
                s.rotate_right(1);
            }
            if let Some(s) = self.values.get_mut(from..=to) {
                s.rotate_right(1);
            }
            self.set_occupied(to, true);
        } else {
            if let Some(s) = self.keys.get_mut(from..to) {
                s.rotate_left(1);
            }
            if let Some(s) = self.values.get_mut(from..to) {
                s.rotate_left(1);
            }
            self.set_occupied(from, true);
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: u64) -> Option<u64> {
        let slot = self.find(key)?;
        let value = self.values.get(slot).copied();
        self.set_occupied(slot, false);
        self.num_keys -= 1;
        let run_start = self.prev_with(slot, true).map_or(0, |s| s + 1);
        self.refill_gaps(run_start, slot + 1);
        value
    }

    /// Whether removals left the node sparse enough to contract.
    pub fn should_contract(&self) -> bool {
        self.capacity() > cost::MIN_DATA_NODE_SLOTS
            && (self.num_keys as f64) < self.capacity() as f64 * cost::CONTRACT_DENSITY
    }

    /// All pairs in key order.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(self.num_keys);
        let mut slot = 0;
        while let Some(s) = self.next_occupied(slot) {
            out.extend(self.pair_at(s));
            slot = s + 1;
        }
        out
    }

    pub fn heap_bytes(&self) -> u64 {
        ((self.keys.capacity() + self.values.capacity() + self.occupied.capacity()) * 8) as u64
    }

    /// Panics if invariants 1-3 do not hold.
    pub fn check(&self) {
        let cap = self.capacity();
        assert_eq!(
            self.values.len(),
            cap,
            "alex: values and keys differ in length"
        );
        assert_eq!(self.occupied.len(), cap.div_ceil(64), "alex: bitmap length");
        assert!(
            self.keys.windows(2).all(|w| matches!(w, [a, b] if a <= b)),
            "alex: gapped array keys decrease"
        );
        let mut count = 0;
        let mut expected_fill = u64::MAX;
        let mut last_key: Option<u64> = None;
        for slot in (0..cap).rev() {
            let key = self.keys.get(slot).copied().unwrap_or(0);
            if self.is_occupied(slot) {
                count += 1;
                assert!(
                    last_key.is_none_or(|l| key < l),
                    "alex: duplicate key {key}"
                );
                last_key = Some(key);
                expected_fill = key;
            } else {
                assert_eq!(key, expected_fill, "alex: gap {slot} holds the wrong key");
            }
        }
        assert!(
            self.occupied
                .last()
                .is_none_or(|w| cap.is_multiple_of(64) || w >> (cap % 64) == 0),
            "alex: bitmap bits past the capacity"
        );
        assert_eq!(
            count, self.num_keys,
            "alex: num_keys does not match the bitmap"
        );
    }
}
