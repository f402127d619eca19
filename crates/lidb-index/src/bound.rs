//! The search contract, shared by every family.
//!
//! For sorted keys `k[0..n)` (non-decreasing, duplicates allowed) and any query `q` in the whole
//! u64 domain, `search(q)` returns a [`Bound`] with
//!
//! 1. `lo <= lower_bound(q) <= hi <= n`, where `lower_bound(q)` is the first position whose key is
//!    `>= q` (`n` if there is none);
//! 2. `lower_bound(q) < hi` whenever `lower_bound(q) < n`, so reading `[lo, hi)` always reads the
//!    slot of the answer when there is one (a point lookup never has to read past `hi`);
//! 3. `hi - lo <= B`, the position boundary the index was built with.
//!
//! The learned families reach (3) by fitting models of integer error `eps = (B - 2) / 2`
//! (see [`eps_for_boundary`]) over the lower-bound staircase (see `points.rs`), so that
//! `pred - eps <= lower_bound(q) <= pred + eps + 1` for every q, and answering
//! `[pred - eps, pred + eps + 2)`, which is `2 * eps + 2 <= B` wide.

/// A half-open range of positions `[lo, hi)` that certainly holds `lower_bound(q)` (see the module
/// documentation for the exact contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound {
    pub lo: u64,
    pub hi: u64,
}

impl Bound {
    /// Width of the range in positions.
    pub fn width(&self) -> u64 {
        self.hi.saturating_sub(self.lo)
    }
}

/// The smallest position boundary any index accepts: a range of two positions.
pub const MIN_BOUNDARY: u64 = 2;

/// The integer model error that fits a position boundary `b`: windows are `2 * eps + 2` wide.
pub fn eps_for_boundary(b: u64) -> u64 {
    b.saturating_sub(2) / 2
}

/// The window answered for an integer prediction `pred` of a model of error `eps` over `n` keys.
#[inline]
pub fn window(pred: u64, eps: u64, n: u64) -> Bound {
    let hi = pred.saturating_add(eps).saturating_add(2).min(n);
    let lo = pred.saturating_sub(eps).min(hi);
    Bound { lo, hi }
}

/// The reference answer: the first position whose key is `>= q`.
pub fn lower_bound(keys: &[u64], q: u64) -> u64 {
    keys.partition_point(|&k| k < q) as u64
}

/// Whether `b` satisfies conditions (1) and (2) of the contract for query `q`. Condition (3), the
/// width, is checked by callers against the boundary they expect.
pub fn holds(keys: &[u64], q: u64, b: Bound) -> bool {
    let n = keys.len() as u64;
    let lb = lower_bound(keys, q);
    b.lo <= lb && lb <= b.hi && b.hi <= n && (lb == n || lb < b.hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_is_at_most_the_boundary_wide() {
        for b in 2..200u64 {
            let eps = eps_for_boundary(b);
            let w = window(1_000, eps, 1_000_000);
            assert!(w.width() <= b, "b={b} width={}", w.width());
            assert_eq!(w.width(), 2 * eps + 2);
        }
    }

    #[test]
    fn window_is_clamped_to_the_key_count() {
        assert_eq!(window(0, 3, 10), Bound { lo: 0, hi: 5 });
        assert_eq!(window(9, 3, 10), Bound { lo: 6, hi: 10 });
        assert_eq!(window(10, 3, 10), Bound { lo: 7, hi: 10 });
        assert_eq!(window(0, 3, 0), Bound { lo: 0, hi: 0 });
        assert_eq!(window(u64::MAX, 3, 5), Bound { lo: 5, hi: 5 });
    }

    #[test]
    fn holds_rejects_a_range_that_misses_the_answer() {
        let keys = [10, 20, 30];
        assert!(holds(&keys, 20, Bound { lo: 1, hi: 2 }));
        // lower_bound(20) = 1 is not inside [0, 1): condition (2) fails.
        assert!(!holds(&keys, 20, Bound { lo: 0, hi: 1 }));
        assert!(!holds(&keys, 20, Bound { lo: 2, hi: 3 }));
        // Past the last key the answer is n, and [3, 3) holds it.
        assert!(holds(&keys, 31, Bound { lo: 3, hi: 3 }));
        assert!(!holds(&keys, 31, Bound { lo: 0, hi: 4 }));
    }
}
