//! The error-bounded spline shared by RadixSpline (`rs.rs`) and PLEX (`plex/`): spline points
//! picked among the staircase points, and the stored interpolating predictor. Only the structure
//! that finds a query's spline segment differs between the two families.
//!
//! Build (single pass, O(m) for m staircase points): `GreedySplineCorridor` (Neumann & Michel)
//! picks spline points among the staircase points, always the first and the last, such that every
//! point between two consecutive spline points is within `eps` of the straight line joining them.
//! The corridor is kept in exact integer arithmetic (slopes as i128 fractions). Because lookups
//! interpolate in f64, every point is then verified with the stored predictor itself
//! ([`interpolate`]); a point that fails (through rounding only) becomes a spline point, so
//! correctness never rests on float luck.
//!
//! Prediction for q: below the first spline point, its y (0); between spline points i and i + 1,
//! `floor(y_i + (q - x_i) * (y_{i+1} - y_i) / (x_{i+1} - x_i))` clamped to `[y_i, y_{i+1}]`; at the
//! last spline point its y; above it, n. The prediction is monotone between consecutive staircase
//! points and within `eps` of each, so by the staircase argument (points.rs) `window(pred, eps, n)`
//! holds `lower_bound(q)` for every q.
//!
//! Invariants (checked by [`Spline::read`]): x strictly increasing, y non-decreasing and `<= n`,
//! the first y is 0, and there are spline points iff n > 0.
//!
//! Encoding: `u64 count, count x u64 x, count x u32 y` (12 bytes a point).

use crate::codec::{PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::points::staircase;

/// Bytes one spline point takes in the encoding.
pub const POINT_BYTES: u64 = 8 + 4;

/// The stored predictor between two spline points `(x0, y0)` and `(x1, y1)`, `x0 <= q <= x1`.
#[inline]
pub fn interpolate(x0: u64, y0: u32, x1: u64, y1: u32, q: u64) -> u64 {
    let dx = x1.saturating_sub(x0).max(1) as f64;
    let dy = f64::from(y1.saturating_sub(y0));
    let p = f64::from(y0) + q.saturating_sub(x0) as f64 * dy / dx;
    // `as u64` floors the non-negative value (and saturates).
    (p as u64).clamp(u64::from(y0), u64::from(y1.max(y0)))
}

/// Orientation test `a_dy / a_dx <= b_dy / b_dx` for positive dx, exact.
#[inline]
fn slope_le(a_dx: i128, a_dy: i128, b_dx: i128, b_dy: i128) -> bool {
    a_dy * b_dx <= b_dy * a_dx
}

/// GreedySplineCorridor over the points: indices of the spline points, first and last included.
/// Every point between two consecutive spline points is within `eps` of their exact line.
pub fn corridor(xs: &[u64], ys: &[u32], eps: u64) -> Vec<usize> {
    let m = xs.len().min(ys.len());
    let mut out = Vec::new();
    if m == 0 {
        return out;
    }
    out.push(0);
    if m == 1 {
        return out;
    }
    // y spans at most 2^32, so a larger eps changes nothing; the cap keeps products in i128.
    let e = i128::from(eps.min(1 << 34));
    let pt = |i: usize| -> (i128, i128) {
        let x = xs.get(i).copied().unwrap_or(0);
        let y = ys.get(i).copied().unwrap_or(0);
        (i128::from(x), i128::from(y))
    };
    let (mut bx, mut by) = pt(0);
    let (x1, y1) = pt(1);
    // Corridor limits as (dx, dy) from the base: the line to the base's next spline point must
    // have a slope within [lo, up].
    let mut up = (x1 - bx, y1 + e - by);
    let mut lo = (x1 - bx, y1 - e - by);
    let mut prev = 1usize;
    for i in 2..m {
        let (x, y) = pt(i);
        let (dx, dy) = (x - bx, y - by);
        let inside = slope_le(dx, dy, up.0, up.1) && slope_le(lo.0, lo.1, dx, dy);
        if inside {
            if slope_le(dx, dy + e, up.0, up.1) {
                up = (dx, dy + e);
            }
            if slope_le(lo.0, lo.1, dx, dy - e) {
                lo = (dx, dy - e);
            }
        } else {
            out.push(prev);
            (bx, by) = pt(prev);
            up = (x - bx, y + e - by);
            lo = (x - bx, y - e - by);
        }
        prev = i;
    }
    out.push(m - 1);
    out
}

/// Checks every point strictly between spline points with the stored predictor and adds a spline
/// point wherever one fails; returns the final spline point indices.
fn verify(xs: &[u64], ys: &[u32], eps: u64, spline: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(spline.len());
    let Some((&first, rest)) = spline.split_first() else {
        return out;
    };
    out.push(first);
    let mut s = first;
    let mut ends: Vec<usize> = rest.iter().rev().copied().collect();
    let at = |i: usize| {
        (
            xs.get(i).copied().unwrap_or(0),
            ys.get(i).copied().unwrap_or(0),
        )
    };
    while let Some(&e) = ends.last() {
        let ((x0, y0), (x1, y1)) = (at(s), at(e));
        let fail = (s + 1..e).find(|&j| {
            let (x, y) = at(j);
            let p = interpolate(x0, y0, x1, y1, x);
            let y = u64::from(y);
            p.saturating_add(eps) < y || p > y.saturating_add(eps)
        });
        match fail {
            None => {
                out.push(e);
                s = e;
                ends.pop();
            }
            Some(j) => ends.push(j),
        }
    }
    out
}

/// The spline points of an index: structure-of-arrays, sorted by x.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spline {
    pub xs: Vec<u64>,
    pub ys: Vec<u32>,
}

impl Spline {
    /// The verified spline of error `eps` over sorted, validated `keys`.
    pub fn fit(keys: &[u64], eps: u64) -> Spline {
        let pts = staircase(keys);
        let spline = corridor(&pts.xs, &pts.ys, eps);
        let spline = verify(&pts.xs, &pts.ys, eps, &spline);
        Spline {
            xs: spline
                .iter()
                .filter_map(|&i| pts.xs.get(i).copied())
                .collect(),
            ys: spline
                .iter()
                .filter_map(|&i| pts.ys.get(i).copied())
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.xs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.xs.is_empty()
    }

    /// The integer prediction for q over `n` keys. `segment(q)` must return the index i of the
    /// spline segment holding q, `x_i <= q < x_{i+1}`; it is only called for `x_0 <= q < x_last`.
    #[inline]
    pub fn predict(&self, q: u64, n: u64, segment: impl FnOnce(u64) -> usize) -> u64 {
        let (Some(&x0), Some(&xl)) = (self.xs.first(), self.xs.last()) else {
            return 0;
        };
        if q < x0 {
            return self.ys.first().map_or(0, |&y| u64::from(y));
        }
        if q >= xl {
            return if q == xl {
                self.ys.last().map_or(n, |&y| u64::from(y))
            } else {
                n
            };
        }
        let i = segment(q);
        match (
            self.xs.get(i),
            self.ys.get(i),
            self.xs.get(i + 1),
            self.ys.get(i + 1),
        ) {
            (Some(&xa), Some(&ya), Some(&xb), Some(&yb)) => interpolate(xa, ya, xb, yb, q),
            _ => n,
        }
    }

    /// Encoded length: a count, then the two arrays.
    pub fn encoded_len(&self) -> u64 {
        8 + POINT_BYTES * self.xs.len() as u64
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.xs.len() as u64);
        self.xs.iter().for_each(|&x| out.put_u64(x));
        self.ys.iter().for_each(|&y| out.put_u32(y));
    }

    /// Reads a spline written by [`Spline::write`] for an index over `n` keys and checks every
    /// invariant of the module documentation.
    pub fn read(r: &mut Reader<'_>, n: u64) -> Result<Spline> {
        let len = r.count(POINT_BYTES as usize, "spline point")?;
        let xs = r.u64_vec(len)?;
        let ys = r.u32_vec(len)?;
        if (n == 0) != xs.is_empty() {
            return Err(corrupt(format!("{len} spline points for {n} keys")));
        }
        if xs.windows(2).any(|w| matches!(w, [a, b] if b <= a)) {
            return Err(corrupt("spline keys not increasing"));
        }
        if ys.windows(2).any(|w| matches!(w, [a, b] if b < a)) {
            return Err(corrupt("spline positions decrease"));
        }
        if ys.first().is_some_and(|&y| y != 0) || ys.last().is_some_and(|&y| u64::from(y) > n) {
            return Err(corrupt("spline positions out of range"));
        }
        Ok(Spline { xs, ys })
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_keys(seed: u64, n: usize, spread: u64) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut k: Vec<u64> = (0..n).map(|_| rng.gen_range(0..spread)).collect();
        k.sort_unstable();
        k
    }

    /// Every staircase point lies within eps of the exact line between its spline points.
    #[test]
    fn corridor_keeps_every_point_within_eps() {
        for (seed, eps) in [(1u64, 0u64), (2, 1), (3, 3), (4, 7), (5, 31)] {
            let keys = random_keys(seed, 20_000, 1 << 40);
            let p = staircase(&keys);
            let sp = corridor(&p.xs, &p.ys, eps);
            assert_eq!(sp.first(), Some(&0));
            assert_eq!(sp.last(), Some(&(p.len() - 1)));
            for w in sp.windows(2) {
                let (s, e) = (w[0], w[1]);
                let (x0, y0) = (i128::from(p.xs[s]), i128::from(p.ys[s]));
                let (x1, y1) = (i128::from(p.xs[e]), i128::from(p.ys[e]));
                for j in s + 1..e {
                    let (x, y) = (i128::from(p.xs[j]), i128::from(p.ys[j]));
                    // |y - (y0 + (x - x0)(y1 - y0)/(x1 - x0))| <= eps, multiplied out.
                    let num = (y - y0) * (x1 - x0) - (x - x0) * (y1 - y0);
                    assert!(num.abs() <= i128::from(eps) * (x1 - x0), "eps={eps} j={j}");
                }
            }
        }
    }

    #[test]
    fn corridor_on_a_line_keeps_only_the_ends() {
        let xs: Vec<u64> = (0..1000).map(|i| 7 * i).collect();
        let ys: Vec<u32> = (0..1000).collect();
        assert_eq!(corridor(&xs, &ys, 0), vec![0, 999]);
    }

    /// With an exact segment finder, every staircase point is predicted within eps.
    #[test]
    fn every_point_is_verified_with_the_stored_predictor() {
        for eps in [0u64, 1, 7, 31] {
            let keys = random_keys(eps, 50_000, u64::MAX);
            let n = keys.len() as u64;
            let s = Spline::fit(&keys, eps);
            let p = staircase(&keys);
            let seg = |q: u64| s.xs.partition_point(|&x| x <= q) - 1;
            for (&x, &y) in p.xs.iter().zip(&p.ys) {
                let pred = s.predict(x, n, seg);
                assert!(pred.abs_diff(u64::from(y)) <= eps, "eps={eps} x={x}");
            }
        }
    }

    #[test]
    fn read_rejects_broken_invariants() {
        let good = Spline {
            xs: vec![1, 5, 9],
            ys: vec![0, 2, 3],
        };
        let enc = |s: &Spline| {
            let mut b = Vec::new();
            s.write(&mut b);
            b
        };
        let bytes = enc(&good);
        assert_eq!(bytes.len() as u64, good.encoded_len());
        assert_eq!(Spline::read(&mut Reader::new(&bytes), 3), Ok(good.clone()));
        assert!(Spline::read(&mut Reader::new(&bytes), 2).is_err());
        assert!(Spline::read(&mut Reader::new(&bytes), 0).is_err());
        for bad in [
            Spline {
                xs: vec![1, 1, 9],
                ..good.clone()
            },
            Spline {
                ys: vec![0, 3, 2],
                ..good.clone()
            },
            Spline {
                ys: vec![1, 2, 3],
                ..good.clone()
            },
        ] {
            assert!(Spline::read(&mut Reader::new(&enc(&bad)), 3).is_err());
        }
    }
}
