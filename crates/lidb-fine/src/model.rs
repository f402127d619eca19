//! The model part (the paper's section 3.1): LPA models over one trained data array and the flat
//! array of their first keys that routes a query to its model.
//!
//! A [`Router`] is built once over a sorted array of distinct keys and never changes; any thread
//! may call it. [`Router::lower_bound`] is exact: the model's window (the lidb-index contract:
//! it certainly holds the first position whose key is >= q, for any q) is searched by binary
//! search, and a window that does not hold (a broken contract, which is a bug) falls back to a
//! search of the whole array after a debug assertion.
//!
//! Deviations:
//! - Models are routed by their FIRST keys (what lidb-index's LPA segments carry) with a
//!   branch-free binary search over a flat sorted array, instead of the paper's B-tree over last
//!   keys; "last model whose first key <= q" is the same partition.
//! - The probe is local ([`propose`]), because lidb-index's is private and lacks the authors'
//!   step reset: after each model the learning step becomes the power of ten at or below the
//!   model's length. Without it, a run of keys shorter than the step (say 256 consecutive keys
//!   inserted after one trained key, then sparse keys) became one model per key: the backward
//!   steps `1000 * 0.1^n` of Algorithm 1 add up to 111 and never reach the run's end. The probe
//!   walks forward doubling its step (lidb-index's choice, for O(m log m) per model) while the
//!   model holds, then refines the end between the last length that held and the first that did
//!   not with steps shrinking by `learning_rate` (the paper's backward steps, repeated at each
//!   size until they would pass the last good length). Every proposal still goes through
//!   lidb-index's `Segments::fit_all`, whose `finalize` verifies the error bound point by point,
//!   so the probe decides only where models end, never whether they are exact.

use lidb_index::bound::window;
use lidb_index::points::staircase;
use lidb_index::segment::{Segments, finalize};

use crate::config::Config;

/// LPA models over one trained array.
#[derive(Debug, Default)]
pub(crate) struct Router {
    segs: Segments,
    eps: u64,
}

/// The last position `i` with `keys[i] <= q`, or 0, without data-dependent branches.
#[inline]
pub(crate) fn route(first_keys: &[u64], q: u64) -> usize {
    let mut base = 0usize;
    let mut len = first_keys.len();
    while len > 1 {
        let half = len / 2;
        let probe = first_keys.get(base + half).is_some_and(|&k| k <= q);
        base += usize::from(probe) * half;
        len -= half;
    }
    base
}

impl Router {
    /// Trains LPA models over `keys` (sorted, distinct). More than 2^32 - 1 keys (beyond the
    /// models' u32 positions) get no models and every search covers the whole array.
    pub fn train(keys: &[u64], cfg: &Config) -> Router {
        let eps = cfg.threshold;
        if keys.len() as u64 >= u64::from(u32::MAX) {
            return Router::default();
        }
        let pts = staircase(keys);
        let mut step = usize::try_from(cfg.learning_step)
            .unwrap_or(usize::MAX)
            .max(1);
        let segs = Segments::fit_all(&pts.xs, &pts.ys, eps, |start| {
            let (end, slope) = propose(&pts.xs, &pts.ys, start, step, cfg.learning_rate, eps);
            step = power_of_ten_at_most(end.saturating_sub(start));
            (end, slope)
        });
        Router { segs, eps }
    }

    /// Number of models.
    pub fn models(&self) -> usize {
        self.segs.len()
    }

    /// The models themselves (what a remote client needs to predict positions).
    pub fn segments(&self) -> &Segments {
        &self.segs
    }

    /// The first key of each model, in order.
    pub fn first_keys(&self) -> &[u64] {
        &self.segs.keys
    }

    /// The first position whose key is `>= q` in `keys`, the array this router was trained on.
    #[inline]
    pub fn lower_bound(&self, keys: &[u64], q: u64) -> usize {
        let n = keys.len() as u64;
        if self.segs.is_empty() {
            return keys.partition_point(|&k| k < q);
        }
        let j = route(&self.segs.keys, q);
        let b = window(self.segs.predict(j, q, n), self.eps, n);
        let (lo, hi) = (b.lo as usize, b.hi as usize);
        let Some(w) = keys.get(lo..hi) else {
            debug_assert!(false, "window {lo}..{hi} outside {n} keys");
            return keys.partition_point(|&k| k < q);
        };
        let p = lo + w.partition_point(|&k| k < q);
        let below_ok = p == 0 || keys.get(p - 1).is_some_and(|&k| k < q);
        let at_ok = keys.get(p).is_none_or(|&k| k >= q);
        if below_ok && at_ok {
            p
        } else {
            debug_assert!(false, "model window missed q = {q}");
            keys.partition_point(|&k| k < q)
        }
    }
}

/// The largest power of ten `<= len` (1 for 0).
fn power_of_ten_at_most(len: usize) -> usize {
    let mut p = 1usize;
    while p <= len / 10 {
        p *= 10;
    }
    p
}

/// Least-squares slope of the points `start..end` (on deltas from the first one), or `None` if
/// the range is empty or out of bounds.
fn ls_slope(xs: &[u64], ys: &[u32], start: usize, end: usize) -> Option<f64> {
    let (sx, sy) = (xs.get(start..end)?, ys.get(start..end)?);
    let (&x0, &y0) = (sx.first()?, sy.first()?);
    let (mut m, mut x, mut y, mut xx, mut xy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (&px, &py) in sx.iter().zip(sy) {
        let dx = (px - x0) as f64;
        let dy = f64::from(py) - f64::from(y0);
        m += 1.0;
        x += dx;
        y += dy;
        xx += dx * dx;
        xy += dx * dy;
    }
    let var = m * xx - x * x;
    let cov = m * xy - x * y;
    Some(if var > 0.0 { cov / var } else { 0.0 })
}

/// The probe of LPA (Algorithm 1 with the changes in the module documentation): the end and
/// slope of the model that starts at point `start`, trying `step` points first.
fn propose(xs: &[u64], ys: &[u32], start: usize, step: usize, rate: f64, eps: u64) -> (usize, f64) {
    let n = xs.len();
    // The slope of the least-squares line over start..end if its stored form holds them all.
    let fits = |end: usize| -> Option<f64> {
        let slope = ls_slope(xs, ys, start, end)?;
        let (sx, sy) = (xs.get(start..end)?, ys.get(start..end)?);
        (finalize(sx, sy, slope, eps).1 == end - start).then_some(slope)
    };
    // One point always holds.
    let (mut good, mut good_slope) = (start + 1, 0.0);
    if good >= n {
        return (good.min(n).max(start + 1), good_slope);
    }
    // Forward, doubling the step, while the model holds.
    let mut step = step.max(1);
    let mut bad = loop {
        let end = start.saturating_add(step).min(n);
        if end <= good {
            step = step.saturating_mul(2);
            continue;
        }
        match fits(end) {
            Some(slope) => {
                (good, good_slope) = (end, slope);
                if end == n {
                    return (good, good_slope);
                }
                step = step.saturating_mul(2);
            }
            None => break end,
        }
    };
    // Backward: between the last length that held and the first that did not, steps shrinking
    // by `rate`, each repeated while it holds.
    let mut gap = bad - good;
    while bad - good > 1 {
        gap = ((gap as f64 * rate) as usize).clamp(1, bad - good - 1);
        let mut at = good + gap;
        while at < bad {
            match fits(at) {
                Some(slope) => {
                    (good, good_slope) = (at, slope);
                    at += gap;
                }
                None => {
                    bad = at;
                    break;
                }
            }
        }
        if gap == 1 {
            break;
        }
    }
    (good, good_slope)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn branch_free_route_matches_partition_point() {
        let firsts = [3u64, 9, 20, 21, 100];
        for q in 0..120 {
            let want = firsts.partition_point(|&k| k <= q).saturating_sub(1);
            assert_eq!(route(&firsts, q), want, "q = {q}");
        }
        assert_eq!(route(&[], 5), 0);
    }

    #[test]
    fn a_short_dense_run_before_sparse_keys_is_one_model() {
        // 256 consecutive keys, then sparse ones: the run must not become one model per key.
        let mut keys: Vec<u64> = (0..256u64).map(|i| (1 << 50) + i).collect();
        keys.extend((1..2_000u64).map(|i| (1 << 50) + i * 1_000_003));
        let router = Router::train(&keys, &Config::default());
        assert!(router.models() <= 8, "{} models", router.models());
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(router.lower_bound(&keys, k), i);
        }
    }

    #[test]
    fn powers_of_ten() {
        assert_eq!(power_of_ten_at_most(0), 1);
        assert_eq!(power_of_ten_at_most(9), 1);
        assert_eq!(power_of_ten_at_most(10), 10);
        assert_eq!(power_of_ten_at_most(256), 100);
        assert_eq!(power_of_ten_at_most(1_000_000), 1_000_000);
    }

    #[test]
    fn lower_bound_is_exact_for_present_and_absent_keys() {
        let cfg = Config::default();
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * i / 7 + 3 * i).collect();
        let router = Router::train(&keys, &cfg);
        assert!(router.models() >= 1);
        for q in (0..keys[keys.len() - 1] + 5).step_by(97) {
            assert_eq!(
                router.lower_bound(&keys, q),
                keys.partition_point(|&k| k < q)
            );
        }
        for (i, &k) in keys.iter().enumerate().step_by(13) {
            assert_eq!(router.lower_bound(&keys, k), i);
        }
    }
}
