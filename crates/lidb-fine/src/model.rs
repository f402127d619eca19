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
//! - The authors' code resets the learning step after each model to a power of ten near the last
//!   model's length. lidb-index's probe (`Growth::Geometric`) instead doubles its step while a
//!   model holds and bisects back, which adapts within each model; its probe type is private to
//!   lidb-index and this crate builds with `Lpa::build`, so the reset is not applied.

use lidb_index::bound::window;
use lidb_index::family::Params;
use lidb_index::lpa::Lpa;
use lidb_index::segment::Segments;

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
    /// Trains LPA models over `keys` (sorted, distinct). An LPA refusal (which the validated
    /// config rules out) leaves no models and every search covers the whole array.
    pub fn train(keys: &[u64], cfg: &Config) -> Router {
        let eps = cfg.threshold;
        let mut params = Params::new(eps.saturating_mul(2).saturating_add(2));
        params.lpa_threshold = Some(eps);
        params.lpa_learning_step = cfg.learning_step;
        params.lpa_learning_rate = cfg.learning_rate;
        match Lpa::build(keys, &params) {
            Ok(lpa) => Router {
                segs: lpa.segments().clone(),
                eps,
            },
            Err(e) => {
                debug_assert!(false, "lpa refused a validated config: {e}");
                Router::default()
            }
        }
    }

    /// Number of models.
    pub fn models(&self) -> usize {
        self.segs.len()
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
