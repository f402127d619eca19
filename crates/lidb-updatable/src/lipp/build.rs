//! Building LIPP nodes from sorted pairs: the FMCD model choice and the recursive placement.
//!
//! Called by [`super::Lipp`] for bulk loads and subtree rebuilds; pure functions of their input.

use super::Node;
use crate::model::LinearModel;

/// Slots of a node built for two keys (a conflict child), as in the reference code.
const TWO_KEY_SLOTS: usize = 8;

/// Gap slots per key in a built node: more room for small nodes, less for huge ones (LIPP's
/// `compute_gap_count`).
fn gap_count(keys: usize) -> usize {
    if keys >= 1_000_000 {
        1
    } else if keys >= 100_000 {
        2
    } else {
        5
    }
}

/// Slots a key of a DILI leaf gets (pfl-cs/DILI, `diliNode::init`).
const DILI_SLOTS_PER_KEY: usize = 2;

/// How a node of more than two keys chooses its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// LIPP's FMCD (the smallest largest conflict degree).
    Fmcd,
    /// Least squares over `keys -> rank * (gap + 1)` (DILI's local refinement of its leaves).
    LeastSquares,
}

/// A LIPP node (FMCD models) holding `pairs`.
pub(super) fn build(pairs: &[(u64, u64)]) -> Node {
    build_with(pairs, Fit::Fmcd)
}

/// A node holding `pairs` (strictly increasing by key). Every pair ends in the slot its model
/// predicts; pairs that share a slot go to a child built the same way.
pub(crate) fn build_with(pairs: &[(u64, u64)], fit: Fit) -> Node {
    let (model, slot_count) = choose_model(pairs, fit);
    let mut node = Node::empty(model, slot_count, pairs.len() as u64, fit);
    let mut rest = pairs;
    while let Some(&(key, _)) = rest.first() {
        let slot = model.slot(key, slot_count);
        let group_len = rest
            .iter()
            .position(|&(k, _)| model.slot(k, slot_count) != slot)
            .unwrap_or(rest.len());
        let (group, tail) = rest.split_at(group_len);
        match group {
            [(k, v)] => node.set_data(slot, *k, *v),
            _ => node.set_child(slot, build_with(group, fit)),
        }
        rest = tail;
    }
    node.shrink();
    node
}

/// The model and slot count of a node for `pairs`: a fixed 8-slot node with the two keys at a
/// third and two thirds for at most two keys, FMCD otherwise, and the endpoint model when the
/// chosen model would put the first and last key in one slot (f64 could not tell them apart),
/// so that each child holds strictly fewer keys than its parent.
fn choose_model(pairs: &[(u64, u64)], fit: Fit) -> (LinearModel, usize) {
    let (first, last) = match (pairs.first(), pairs.last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => return (LinearModel::new(0, 0.0, 0.0), TWO_KEY_SLOTS),
    };
    let n = pairs.len();
    let (model, slot_count) = if n == 1 {
        (
            LinearModel::new(first, 0.0, TWO_KEY_SLOTS as f64 / 2.0),
            TWO_KEY_SLOTS,
        )
    } else if n == 2 {
        let origin = LinearModel::new(first, 0.0, 0.0);
        let third = TWO_KEY_SLOTS as f64 / 3.0;
        (
            LinearModel::new(first, third / origin.offset(last), third),
            TWO_KEY_SLOTS,
        )
    } else {
        let keys: Vec<u64> = pairs.iter().map(|p| p.0).collect();
        match fit {
            Fit::Fmcd => fmcd(&keys),
            Fit::LeastSquares => {
                // DILI's leaves: two slots a key (the reference's `fanout = max(n, 2) << 1`),
                // the model the least-squares line over the ranks stretched to them.
                let per_key = DILI_SLOTS_PER_KEY;
                (LinearModel::fit(&keys, per_key as f64), n * per_key)
            }
        }
    };
    if n >= 2 && model.slot(first, slot_count) == model.slot(last, slot_count) {
        return (LinearModel::endpoints(first, last, slot_count), slot_count);
    }
    (model, slot_count)
}

/// Fastest Minimum Conflict Degree (LIPP Algorithm 1) for `keys` (n >= 3, strictly
/// increasing): the slope `1/Ut` whose largest conflict degree D is smallest, found by growing
/// D while some D+1 consecutive keys are closer than `Ut`; when D reaches n/3 the model instead
/// spreads the keys at ranks n/3 and 2n/3 evenly. Returns the model and the slot count
/// `n * (gap + 1)`.
fn fmcd(keys: &[u64]) -> (LinearModel, usize) {
    let n = keys.len();
    let per_key = gap_count(n) + 1;
    let slot_count = n * per_key;
    let origin = LinearModel::new(keys.first().copied().unwrap_or(0), 0.0, 0.0);
    let x = |i: usize| origin.offset(keys.get(i).copied().unwrap_or(0));
    let span_slots = slot_count as f64 - 2.0;
    let ut_for = |d: usize| (x(n - 1 - d) - x(d)) / span_slots + 1e-6;
    let mut i = 0;
    let mut d = 1;
    let mut ut = ut_for(d);
    let mut found = true;
    while i + d < n - 1 {
        while i + d < n && x(i + d) - x(i) >= ut {
            i += 1;
        }
        if i + d >= n {
            break;
        }
        d += 1;
        if d * 3 > n {
            found = false;
            break;
        }
        ut = ut_for(d);
    }
    if found && d * 3 <= n {
        let slope = 1.0 / ut;
        let intercept = (slot_count as f64 - slope * (x(n - 1 - d) + x(d))) / 2.0;
        return (LinearModel::new(origin.base, slope, intercept), slot_count);
    }
    let (mid1, mid2) = ((n - 1) / 3, (n - 1) * 2 / 3);
    let target = |m: usize| (m * per_key) as f64 + (per_key / 2) as f64;
    let slope = (target(mid2) - target(mid1)) / (x(mid2) - x(mid1));
    let intercept = target(mid1) - slope * x(mid1);
    (LinearModel::new(origin.base, slope, intercept), slot_count)
}
