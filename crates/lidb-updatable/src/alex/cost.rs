//! ALEX's cost model: the expected cost of a data node from where its keys land, and the
//! weights that turn search iterations, shifts and tree levels into one number.
//!
//! The weights and density bounds are those of the ALEX paper and reference code. Pure
//! functions; callers are the data nodes (expected cost at build, empirical cost at run time)
//! and the bulk loader (choosing fanouts).

use crate::model::LinearModel;

/// Cost of one exponential-search iteration.
pub(crate) const EXP_SEARCH_ITERATIONS_WEIGHT: f64 = 20.0;
/// Cost of shifting one key on insert.
pub(crate) const SHIFTS_WEIGHT: f64 = 0.5;
/// Cost of traversing one more node on the way to a data node.
pub(crate) const NODE_LOOKUPS_WEIGHT: f64 = 20.0;
/// Cost per byte of a model node's child array (cache pressure of big fanouts).
pub(crate) const MODEL_SIZE_WEIGHT: f64 = 5e-7;

/// Density a data node is built at.
pub(crate) const INIT_DENSITY: f64 = 0.7;
/// Density at which a data node is full and must expand or split.
pub(crate) const MAX_DENSITY: f64 = 0.8;
/// Density a data node is expanded to.
pub(crate) const MIN_DENSITY: f64 = 0.6;
/// A node whose density falls below this after removals is contracted to [`INIT_DENSITY`]
/// (our choice; see docs/ARCHITECTURE.md).
pub(crate) const CONTRACT_DENSITY: f64 = 0.3;
/// Empirical cost must exceed the expected cost by this factor to force a split.
pub(crate) const COST_DEVIATION_FACTOR: f64 = 1.5;
/// More shifts per insert than this is catastrophic: split whatever the other costs.
pub(crate) const CATASTROPHIC_SHIFTS: f64 = 100.0;
/// Fewest slots of a data node.
pub(crate) const MIN_DATA_NODE_SLOTS: usize = 16;

/// Expected average search iterations and shifts of a data node, from its key placement.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct ExpectedCost {
    pub avg_iterations: f64,
    pub avg_shifts: f64,
}

impl ExpectedCost {
    /// The weighted cost for a workload whose fraction `insert_frac` of operations are inserts.
    pub fn cost(&self, insert_frac: f64) -> f64 {
        data_node_cost(self.avg_iterations, self.avg_shifts, insert_frac)
    }
}

/// `20 * iterations + 0.5 * shifts * insert_frac`.
pub(crate) fn data_node_cost(avg_iterations: f64, avg_shifts: f64, insert_frac: f64) -> f64 {
    EXP_SEARCH_ITERATIONS_WEIGHT * avg_iterations + SHIFTS_WEIGHT * avg_shifts * insert_frac
}

/// Search iterations of an exponential search that starts `error` slots from its target.
/// `log2(error + 1)`, approximated from the f64 bits (exponent plus the mantissa taken as a
/// linear fraction; off by at most 0.09), which is plenty for a cost model and avoids a libm
/// call per key in every placement (it was a tenth of ALEX's build time).
pub(crate) fn search_iterations(error: usize) -> f64 {
    if error == 0 {
        return 0.0;
    }
    let bits = ((error + 1) as f64).to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as f64 - 1023.0;
    let fraction = (bits & ((1 << 52) - 1)) as f64 / (1u64 << 52) as f64;
    exponent + fraction
}

/// Slots of a data node built for `keys` at `density`.
pub(crate) fn capacity_for(keys: usize, density: f64) -> usize {
    ((keys as f64 / density).ceil() as usize)
        .max(keys + 1)
        .max(MIN_DATA_NODE_SLOTS)
}

/// The model of a data node of `capacity` slots for sorted `keys`.
pub(crate) fn data_node_model(keys: &[u64], capacity: usize) -> LinearModel {
    if keys.is_empty() {
        return LinearModel::new(0, 0.0, 0.0);
    }
    LinearModel::fit(keys, capacity as f64 / keys.len() as f64)
}

/// Model-based placement: key `i` goes to its predicted slot, or right after the previous key
/// if that is further right, and never so far right that the keys after it would not fit.
/// Calls `visit(i, predicted, slot)` for each key, in order.
pub(crate) fn place(
    keys: &[u64],
    model: &LinearModel,
    capacity: usize,
    mut visit: impl FnMut(usize, usize, usize),
) {
    let n = keys.len();
    let mut next_free = 0;
    for (i, &key) in keys.iter().enumerate() {
        let predicted = model.slot(key, capacity);
        let slot = predicted.max(next_free).min(capacity - (n - i));
        visit(i, predicted, slot);
        next_free = slot + 1;
    }
}

/// The expected cost of placing `keys` into a data node of `capacity` slots with `model`:
/// iterations from each key's distance to its prediction; shifts from the runs of adjacent
/// occupied slots (an insert into a run of length r shifts about r/4 keys, and lands in it
/// with probability r/n).
pub(crate) fn expected_cost(keys: &[u64], model: &LinearModel, capacity: usize) -> ExpectedCost {
    if keys.is_empty() {
        return ExpectedCost::default();
    }
    let mut iterations = 0.0;
    let mut shifts_sum = 0.0;
    let mut run = 0usize;
    let mut last_slot: Option<usize> = None;
    place(keys, model, capacity, |_, predicted, slot| {
        iterations += search_iterations(predicted.abs_diff(slot));
        if last_slot.is_some_and(|l| l + 1 == slot) {
            run += 1;
        } else {
            shifts_sum += (run * run) as f64 / 4.0;
            run = 1;
        }
        last_slot = Some(slot);
    });
    shifts_sum += (run * run) as f64 / 4.0;
    let n = keys.len() as f64;
    ExpectedCost {
        avg_iterations: iterations / n,
        avg_shifts: shifts_sum / n,
    }
}

/// Expected cost of a data node built for `keys` at the initial density.
pub(crate) fn data_node_expected(keys: &[u64], insert_frac: f64) -> f64 {
    let capacity = capacity_for(keys.len(), INIT_DENSITY);
    let model = data_node_model(keys, capacity);
    expected_cost(keys, &model, capacity).cost(insert_frac)
}

#[cfg(test)]
mod tests {
    use super::search_iterations;

    #[test]
    fn search_iterations_is_close_to_log2() {
        for error in (0..10_000).chain([1 << 20, (1 << 40) + 12345, usize::MAX / 3]) {
            let exact = ((error + 1) as f64).log2();
            let approx = search_iterations(error);
            assert!(
                (exact - approx).abs() < 0.09,
                "{error}: {exact} vs {approx}"
            );
        }
    }
}
