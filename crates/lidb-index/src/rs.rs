//! RadixSpline (Kipf et al., 2020): a greedy error-bounded spline over the staircase points, and a
//! radix table that narrows the search for the spline segment of a query.
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
//! The radix table indexes `r` bits of `q - min` just below the common prefix of the spline key
//! range `[min, max]` (`shift = bitlen(max - min) - r`): `table[p]` is the number of spline points
//! whose prefix is `< p`; it has `2^r + 1` entries. `r` is capped at `bitlen(max - min)` (more bits
//! would only add empty entries) and at `bitlen(spline points)` (fewer than 2 entries per spline
//! point, so the table adds at most 8 of the 12 bytes a spline point takes: without this cap
//! `r = 30` allocates 4 GiB for any table with a wide key range, and a small per-SSTable spline
//! would be dwarfed by its table).
//! `r = 0` is a plain binary search over the spline points.
//!
//! Invariants: spline x strictly increasing, y non-decreasing and `<= n`, the first spline point is
//! the first staircase point (y = 0); the table is exactly the one the points define (decode
//! recomputes it and compares).
//!
//! Payload: `u32 radix_bits, u32 shift, u64 min_key, u64 count, count x u64 x, count x u32 y,
//! u64 table_len, table_len x u32`.

use crate::bound::{Bound, eps_for_boundary, window};
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::points::staircase;

/// Radix bits used when the caller does not choose. Measured with `tests/rs_rmi_measure.rs` on
/// 1M and 10M uniform, lognormal and real tweet-ID keys at B = 16 and 64: r = 8 costs at most 1 KiB
/// (under 1% of the index from 1M keys at B = 16) and cuts the search time by 30-60% against
/// r = 0 or 1; r = 12 is faster again but costs 16 KiB. Capped by the spline size (module docs),
/// so small per-table splines get a proportionally small table.
pub const DEFAULT_RADIX_BITS: u32 = 8;

#[derive(Debug, Clone)]
pub struct RadixSpline {
    n: u64,
    boundary: u64,
    eps: u64,
    radix_bits: u32,
    shift: u32,
    min_key: u64,
    xs: Vec<u64>,
    ys: Vec<u32>,
    table: Vec<u32>,
}

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

/// Number of significant bits of `v` (0 for 0).
fn bit_len(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The radix table of spline keys `xs` for `bits` radix bits after `shift`, relative to `min`.
fn radix_table(xs: &[u64], min: u64, bits: u32, shift: u32) -> Vec<u32> {
    let size = (1usize << bits) + 1;
    let mut table = Vec::with_capacity(size);
    let mut i = 0usize;
    let prefix = |x: u64| x.wrapping_sub(min).checked_shr(shift).unwrap_or(0);
    for p in 0..size as u64 {
        while xs.get(i).is_some_and(|&x| prefix(x) < p) {
            i += 1;
        }
        table.push(i as u32);
    }
    table
}

/// Effective radix bits and shift for a spline key range.
fn radix_shape(xs: &[u64], bits: u32) -> (u64, u32, u32) {
    let (min, max) = match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let len = bit_len(max - min);
    let bits = bits.min(len).min(bit_len(xs.len() as u64));
    (min, bits, len - bits)
}

impl RadixSpline {
    pub fn build(keys: &[u64], params: &Params) -> Result<RadixSpline> {
        let n = keys.len() as u64;
        let eps = eps_for_boundary(params.boundary);
        let pts = staircase(keys);
        let spline = corridor(&pts.xs, &pts.ys, eps);
        let spline = verify(&pts.xs, &pts.ys, eps, &spline);
        let xs: Vec<u64> = spline
            .iter()
            .filter_map(|&i| pts.xs.get(i).copied())
            .collect();
        let ys: Vec<u32> = spline
            .iter()
            .filter_map(|&i| pts.ys.get(i).copied())
            .collect();
        let (min_key, radix_bits, shift) = radix_shape(&xs, params.rs_radix_bits);
        let table = radix_table(&xs, min_key, radix_bits, shift);
        Ok(RadixSpline {
            n,
            boundary: params.boundary,
            eps,
            radix_bits,
            shift,
            min_key,
            xs,
            ys,
            table,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<RadixSpline> {
        let n = h.key_count;
        let radix_bits = r.u32()?;
        let shift = r.u32()?;
        let min_key = r.u64()?;
        let len = r.count(12, "spline point")?;
        let xs = r.u64_vec(len)?;
        let ys = r.u32_vec(len)?;
        let table_len = r.count(4, "radix table entry")?;
        let table = r.u32_vec(table_len)?;
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
        if radix_bits > 30 {
            return Err(corrupt(format!("radix bits {radix_bits} above 30")));
        }
        let (want_min, want_bits, want_shift) = radix_shape(&xs, radix_bits);
        if (want_min, want_bits, want_shift) != (min_key, radix_bits, shift) {
            return Err(corrupt("radix shape does not match the spline points"));
        }
        if table_len != (1usize << radix_bits) + 1 {
            return Err(corrupt(format!(
                "radix table of {table_len} entries for {radix_bits} bits"
            )));
        }
        if table != radix_table(&xs, min_key, radix_bits, shift) {
            return Err(corrupt("radix table does not match the spline points"));
        }
        Ok(RadixSpline {
            n,
            boundary: h.boundary,
            eps: eps_for_boundary(h.boundary),
            radix_bits,
            shift,
            min_key,
            xs,
            ys,
            table,
        })
    }

    /// Index i of the spline segment holding q: `x_i <= q < x_{i+1}`. Needs `x_0 <= q < x_last`.
    #[inline]
    fn segment(&self, q: u64) -> usize {
        let p = (q.wrapping_sub(self.min_key))
            .checked_shr(self.shift)
            .unwrap_or(0) as usize;
        let begin = self.table.get(p).map_or(0, |&b| b as usize);
        let end = self.table.get(p + 1).map_or(self.xs.len(), |&e| e as usize);
        let within = self
            .xs
            .get(begin..end)
            .map_or(0, |s| s.partition_point(|&x| x <= q));
        (begin + within).saturating_sub(1)
    }

    /// The integer prediction for q (see the module documentation).
    #[inline]
    pub fn predict(&self, q: u64) -> u64 {
        let (Some(&x0), Some(&xl)) = (self.xs.first(), self.xs.last()) else {
            return 0;
        };
        if q < x0 {
            return self.ys.first().map_or(0, |&y| u64::from(y));
        }
        if q >= xl {
            return if q == xl {
                self.ys.last().map_or(self.n, |&y| u64::from(y))
            } else {
                self.n
            };
        }
        let i = self.segment(q);
        match (
            self.xs.get(i),
            self.ys.get(i),
            self.xs.get(i + 1),
            self.ys.get(i + 1),
        ) {
            (Some(&xa), Some(&ya), Some(&xb), Some(&yb)) => interpolate(xa, ya, xb, yb, q),
            _ => self.n,
        }
    }

    /// Number of spline points.
    pub fn spline_points(&self) -> usize {
        self.xs.len()
    }

    /// Radix bits actually used (the parameter capped by the key range and the spline size).
    pub fn radix_bits(&self) -> u32 {
        self.radix_bits
    }
}

impl LearnedIndex for RadixSpline {
    fn family(&self) -> Family {
        Family::Rs
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        window(self.predict(q), self.eps, self.n)
    }

    fn payload_len(&self) -> u64 {
        4 + 4 + 8 + 8 + 12 * self.xs.len() as u64 + 8 + 4 * self.table.len() as u64
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u32(self.radix_bits);
        out.put_u32(self.shift);
        out.put_u64(self.min_key);
        out.put_u64(self.xs.len() as u64);
        self.xs.iter().for_each(|&x| out.put_u64(x));
        self.ys.iter().for_each(|&y| out.put_u32(y));
        out.put_u64(self.table.len() as u64);
        self.table.iter().for_each(|&t| out.put_u32(t));
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            models: self.xs.len() as u64,
            details: vec![
                ("radix_bits", StatValue::U64(u64::from(self.radix_bits))),
                ("spline_points", StatValue::U64(self.xs.len() as u64)),
            ],
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::bound::holds;
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

    /// The radix-narrowed segment search equals a plain binary search over the spline points.
    #[test]
    fn radix_lookup_matches_binary_search() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for (seed, spread) in [(1u64, u64::MAX), (2, 1 << 20), (3, 1 << 50)] {
            let keys = random_keys(seed, 30_000, spread);
            for bits in 0..=18 {
                let mut params = Params::new(8);
                params.rs_radix_bits = bits;
                let rs = RadixSpline::build(&keys, &params).unwrap();
                let (x0, xl) = (rs.xs[0], *rs.xs.last().unwrap());
                for _ in 0..2000 {
                    let q = rng.gen_range(x0..xl);
                    let want = rs.xs.partition_point(|&x| x <= q) - 1;
                    assert_eq!(rs.segment(q), want, "bits={bits} q={q}");
                }
                for &x in &rs.xs[..rs.xs.len() - 1] {
                    assert_eq!(rs.xs[rs.segment(x)], x);
                }
            }
        }
    }

    #[test]
    fn every_point_is_verified_with_the_stored_predictor() {
        for b in [2u64, 4, 16, 64] {
            let keys = random_keys(b, 50_000, u64::MAX);
            let rs = RadixSpline::build(&keys, &Params::new(b)).unwrap();
            let p = staircase(&keys);
            for (&x, &y) in p.xs.iter().zip(&p.ys) {
                let pred = rs.predict(x);
                assert!(pred.abs_diff(u64::from(y)) <= rs.eps, "b={b} x={x}");
            }
            for &q in keys.iter().step_by(7) {
                for q in [q.wrapping_sub(1), q, q.wrapping_add(1)] {
                    let got = rs.search(q);
                    assert!(holds(&keys, q, got) && got.width() <= b, "b={b} q={q}");
                }
            }
        }
    }

    #[test]
    fn radix_bits_are_capped_by_the_key_range() {
        // Two spline points over a range of 6 bits: the range allows 6, the size 2.
        let keys: Vec<u64> = (100..164).collect();
        let mut params = Params::new(2);
        params.rs_radix_bits = 20;
        let rs = RadixSpline::build(&keys, &params).unwrap();
        assert_eq!((rs.spline_points(), rs.radix_bits()), (2, 2));
        assert_eq!(rs.table.len(), 5);
        // Over 512 spline points in a 10-bit range: the range caps.
        let keys = random_keys(7, 1000, 1024);
        let rs = RadixSpline::build(&keys, &params).unwrap();
        assert!(rs.spline_points() >= 512, "{}", rs.spline_points());
        assert_eq!(rs.radix_bits(), 10);
    }
}
