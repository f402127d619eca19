//! The linear model both indexes use: `slope * (key - base) + intercept`.
//!
//! The model sees the key as an offset from `base` (a key of the node) so that nearby keys stay
//! distinct in f64 even near `u64::MAX`, where `key as f64` would merge keys 2^11 apart.
//!
//! Invariant: `slope >= 0` and finite, so [`LinearModel::slot`] is monotone: `a <= b` implies
//! `slot(a) <= slot(b)`. Both indexes rely on this for ordered iteration (a key in an earlier
//! slot is smaller). Floating point keeps monotonicity because every step (i128 to f64
//! conversion, multiplication by a non-negative number, addition, truncation) is monotone.

/// A monotone linear map from keys to (fractional) positions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinearModel {
    pub base: u64,
    pub slope: f64,
    pub intercept: f64,
}

impl LinearModel {
    /// A model with the given parts; a negative or non-finite slope becomes 0 (keeps the
    /// monotonicity invariant) and a non-finite intercept becomes 0.
    pub fn new(base: u64, slope: f64, intercept: f64) -> LinearModel {
        let slope = if slope.is_finite() && slope > 0.0 {
            slope
        } else {
            0.0
        };
        let intercept = if intercept.is_finite() {
            intercept
        } else {
            0.0
        };
        LinearModel {
            base,
            slope,
            intercept,
        }
    }

    /// `key - base` as f64 (exact while the distance is below 2^53; monotone in `key`). The
    /// wrapped difference read as an i64 is the true one whenever it lies within +-2^63, which
    /// its sign tells; then one signed conversion does it (an i128 conversion is a library call,
    /// a u64 one six instructions without AVX-512). Distances beyond take two u64 conversions.
    #[inline]
    pub fn offset(&self, key: u64) -> f64 {
        let wrapped = key.wrapping_sub(self.base) as i64;
        if (key >= self.base) == (wrapped >= 0) {
            wrapped as f64
        } else if key >= self.base {
            (key - self.base) as f64
        } else {
            -((self.base - key) as f64)
        }
    }

    /// The fractional position predicted for `key`.
    #[inline]
    pub fn predict(&self, key: u64) -> f64 {
        self.slope * self.offset(key) + self.intercept
    }

    /// The predicted slot among `slots` (> 0), clamped to `[0, slots)`.
    #[inline]
    pub fn slot(&self, key: u64, slots: usize) -> usize {
        clamp_slot(self.predict(key), slots)
    }

    /// Least-squares fit of `keys[i] -> i * scale` (keys sorted); `base` is the first key.
    pub fn fit(keys: &[u64], scale: f64) -> LinearModel {
        let Some(&base) = keys.first() else {
            return LinearModel::new(0, 0.0, 0.0);
        };
        let origin = LinearModel::new(base, 0.0, 0.0);
        let n = keys.len() as f64;
        let (mut sum_x, mut sum_y) = (0.0, 0.0);
        for (i, &k) in keys.iter().enumerate() {
            sum_x += origin.offset(k);
            sum_y += i as f64;
        }
        let (mean_x, mean_y) = (sum_x / n, sum_y / n);
        let (mut sxx, mut sxy) = (0.0, 0.0);
        for (i, &k) in keys.iter().enumerate() {
            let dx = origin.offset(k) - mean_x;
            sxx += dx * dx;
            sxy += dx * (i as f64 - mean_y);
        }
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let model = LinearModel::new(base, slope * scale, 0.0);
        LinearModel::new(base, model.slope, (mean_y - slope * mean_x) * scale)
    }

    /// The model mapping `first` to 0 and `last` (> `first`) just below `slots`: first and last
    /// land in different slots whenever `slots >= 2`, the fallback that guarantees progress
    /// when a fitted model puts every key in one slot.
    pub fn endpoints(first: u64, last: u64, slots: usize) -> LinearModel {
        let origin = LinearModel::new(first, 0.0, 0.0);
        let span = origin.offset(last);
        let slope = if span > 0.0 {
            (slots as f64 - 0.5) / span
        } else {
            0.0
        };
        LinearModel::new(first, slope, 0.0)
    }

    /// The same map stretched by `factor` (used when a node's slot count is multiplied).
    pub fn scaled(&self, factor: f64) -> LinearModel {
        LinearModel::new(self.base, self.slope * factor, self.intercept * factor)
    }
}

/// `position` truncated to a slot in `[0, slots)`; NaN goes to 0. Branch-free: two
/// comparisons and selects, then one signed conversion (the position is below `slots` by then).
#[inline]
pub(crate) fn clamp_slot(position: f64, slots: usize) -> usize {
    let last = slots.saturating_sub(1) as i64 as f64;
    // `!(position > 0.0)` holds for NaN too.
    let low = if position > 0.0 { position } else { 0.0 };
    let clamped = if low < last { low } else { last };
    clamped as i64 as usize
}

/// `floor(position)` as an integer, saturating, NaN as 0: `f64::floor` is a library call on
/// x86-64 without SSE4.1, and the routing of every lookup takes one per level.
#[inline]
pub(crate) fn floor_i64(position: f64) -> i64 {
    let whole = position as i64;
    if (whole as f64) > position {
        whole.saturating_sub(1)
    } else {
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_separate_extremes() {
        let m = LinearModel::endpoints(0, u64::MAX, 2);
        assert_eq!(m.slot(0, 2), 0);
        assert_eq!(m.slot(u64::MAX, 2), 1);
        let m = LinearModel::endpoints(u64::MAX - 1, u64::MAX, 8);
        assert_eq!(m.slot(u64::MAX - 1, 8), 0);
        assert_eq!(m.slot(u64::MAX, 8), 7);
    }

    #[test]
    fn fit_is_monotone_near_max() {
        let keys: Vec<u64> = (0..100).map(|i| u64::MAX - 1000 + i * 10).collect();
        let m = LinearModel::fit(&keys, 1.0);
        let slots: Vec<usize> = keys.iter().map(|&k| m.slot(k, 100)).collect();
        assert!(slots.windows(2).all(|w| w.first() <= w.get(1)));
        assert_eq!(slots.first(), Some(&0));
        assert_eq!(slots.last(), Some(&99));
    }

    /// The i128 difference as f64: what `offset` must equal (both round to nearest).
    fn exact_offset(key: u64, base: u64) -> f64 {
        let d = i128::from(key) - i128::from(base);
        if d >= 0 {
            d as u128 as f64
        } else {
            -((-d) as u128 as f64)
        }
    }

    #[test]
    fn offset_is_exact_across_the_signed_range() {
        let edges = [
            0,
            1,
            1 << 52,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &base in &edges {
            let model = LinearModel::new(base, 1.0, 0.0);
            for &key in &edges {
                for key in [key, key.wrapping_add(12345), key.wrapping_sub(12345)] {
                    assert_eq!(
                        model.offset(key),
                        exact_offset(key, base),
                        "key {key} base {base}"
                    );
                }
            }
        }
    }

    #[test]
    fn clamp_and_floor_match_their_definitions() {
        let positions = [
            f64::NAN,
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -0.0,
            0.0,
            0.3,
            1.0,
            6.999,
            7.0,
            7.5,
            1e300,
            f64::INFINITY,
        ];
        for &p in &positions {
            for slots in [0usize, 1, 2, 8] {
                let last = slots.saturating_sub(1);
                let want = if p.is_nan() || p <= 0.0 {
                    0
                } else if p >= last as f64 {
                    last
                } else {
                    p.trunc() as usize
                };
                assert_eq!(clamp_slot(p, slots), want, "position {p} slots {slots}");
            }
            let want = if p.is_nan() { 0 } else { p.floor() as i64 };
            assert_eq!(floor_i64(p), want, "position {p}");
        }
    }
}
