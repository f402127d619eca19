//! Seeded point-query sets over a sorted key set.
//!
//! Precondition of every function: `keys` is sorted (non-decreasing; duplicates allowed). This
//! is checked with `debug_assert!` only: unsorted keys are a caller bug, not bad input.
//!
//! Guarantees:
//! 1. [`existing`] returns only values present in `keys`, sampled uniformly over positions
//!    (with replacement), so a value repeated r times is r times as likely.
//! 2. [`absent`] returns only values not in `keys`: about 80% strictly between two neighbours
//!    (a uniformly chosen gap, then a uniform value inside it), 10% below the minimum and 10%
//!    above the maximum, the shares of impossible kinds going to the possible ones. If no u64
//!    value is absent, it returns fewer (no) queries rather than wrong ones.
//! 3. [`mixed`] is `count / 2` existing and the rest absent, shuffled.
//! 4. The same `(keys, count, seed)` gives the same queries everywhere (ChaCha8).
//! 5. [`extremes`] lists the boundary values of the domain and of the set, deduplicated, sorted.

use rand::Rng;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// How many random positions [`absent`] probes for a gap before listing all gaps.
const GAP_PROBES: u32 = 64;

/// `count` keys drawn uniformly (with replacement) from the positions of `keys`; empty if
/// `keys` is empty.
pub fn existing(keys: &[u64], count: usize, seed: u64) -> Vec<u64> {
    debug_assert!(crate::info::first_unsorted(keys).is_none());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    draw_existing(keys, count, &mut rng)
}

fn draw_existing(keys: &[u64], count: usize, rng: &mut ChaCha8Rng) -> Vec<u64> {
    if keys.is_empty() {
        return Vec::new();
    }
    (0..count)
        .filter_map(|_| keys.get(rng.gen_range(0..keys.len())).copied())
        .collect()
}

/// `count` values that are not in `keys` (see the module doc for their mix).
pub fn absent(keys: &[u64], count: usize, seed: u64) -> Vec<u64> {
    debug_assert!(crate::info::first_unsorted(keys).is_none());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    draw_absent(keys, count, &mut rng)
}

fn draw_absent(keys: &[u64], count: usize, rng: &mut ChaCha8Rng) -> Vec<u64> {
    let (Some(&min), Some(&max)) = (keys.first(), keys.last()) else {
        return (0..count).map(|_| rng.r#gen::<u64>()).collect();
    };
    let mut gaps = Gaps::new(keys);
    let below = min > 0;
    let above = max < u64::MAX;
    let between = gaps.any(rng);
    let weights = [
        if between { 80u32 } else { 0 },
        if below { 10 } else { 0 },
        if above { 10 } else { 0 },
    ];
    let total: u32 = weights.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let pick = rng.gen_range(0..total);
        let [w_between, w_below, _] = weights;
        let value = if pick < w_between {
            gaps.sample(rng)
        } else if pick < w_between + w_below {
            Some(rng.gen_range(0..min))
        } else {
            max.checked_add(1).map(|lo| rng.gen_range(lo..=u64::MAX))
        };
        out.extend(value);
    }
    out
}

/// Finds gaps between neighbouring keys: random probing first (cheap on sparse sets), then a
/// list of every gap position (exact on dense sets).
struct Gaps<'a> {
    keys: &'a [u64],
    listed: Option<Vec<usize>>,
}

impl<'a> Gaps<'a> {
    fn new(keys: &'a [u64]) -> Self {
        Gaps { keys, listed: None }
    }

    /// Whether the gap after position `i` holds at least one value.
    fn has_gap(&self, i: usize) -> bool {
        match (self.keys.get(i), self.keys.get(i + 1)) {
            (Some(&a), Some(&b)) => b.saturating_sub(a) > 1,
            _ => false,
        }
    }

    fn any(&mut self, rng: &mut ChaCha8Rng) -> bool {
        self.probe(rng).is_some() || !self.list().is_empty()
    }

    fn probe(&self, rng: &mut ChaCha8Rng) -> Option<usize> {
        if self.keys.len() < 2 {
            return None;
        }
        (0..GAP_PROBES)
            .map(|_| rng.gen_range(0..self.keys.len() - 1))
            .find(|&i| self.has_gap(i))
    }

    fn list(&mut self) -> &[usize] {
        let keys = self.keys;
        self.listed.get_or_insert_with(|| {
            keys.iter()
                .zip(keys.iter().skip(1))
                .enumerate()
                .filter(|(_, (a, b))| b.saturating_sub(**a) > 1)
                .map(|(i, _)| i)
                .collect()
        })
    }

    /// A uniform value strictly inside a gap; the gap is uniform among probed positions when
    /// probing succeeds, uniform among all gaps otherwise.
    fn sample(&mut self, rng: &mut ChaCha8Rng) -> Option<u64> {
        let i = match self.listed.is_none().then(|| self.probe(rng)).flatten() {
            Some(i) => i,
            None => {
                let list = self.list();
                if list.is_empty() {
                    return None;
                }
                let at = rng.gen_range(0..list.len());
                list.get(at).copied()?
            }
        };
        let (a, b) = (*self.keys.get(i)?, *self.keys.get(i + 1)?);
        Some(rng.gen_range(a + 1..b))
    }
}

/// `count / 2` existing and `count - count / 2` absent queries, shuffled. When one kind cannot
/// be produced (empty set, or a set holding every value) the result is shorter.
pub fn mixed(keys: &[u64], count: usize, seed: u64) -> Vec<u64> {
    debug_assert!(crate::info::first_unsorted(keys).is_none());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = draw_existing(keys, count / 2, &mut rng);
    out.extend(draw_absent(keys, count - count / 2, &mut rng));
    out.shuffle(&mut rng);
    out
}

/// The boundary values: 0, 1, u64::MAX - 1, u64::MAX, and min - 1, min, min + 1, max - 1, max,
/// max + 1 of the set (saturating), deduplicated and sorted.
pub fn extremes(keys: &[u64]) -> Vec<u64> {
    let mut out = vec![0, 1, u64::MAX - 1, u64::MAX];
    for k in keys.first().into_iter().chain(keys.last()) {
        out.extend([k.saturating_sub(1), *k, k.saturating_add(1)]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
#[path = "queries_tests.rs"]
mod tests;
