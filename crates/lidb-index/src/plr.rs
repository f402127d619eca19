//! Greedy piece-wise linear regression as used by Bourbon (Dai et al., OSDI 2020), the
//! Greedy-PLR of Xie et al. 2014 ("Maximum error-bounded piecewise linear representation for
//! online stream approximation"), also the basis of LearnedKV's Greedy-PLR+.
//!
//! Fitting, one segment at a time over the lower-bound staircase (`points.rs`): the first two
//! points s0, s1 span a cone of lines that hold both within `eps`: the lower line through
//! (x0, y0 + eps), (x1, y1 - eps) and the upper line through (x0, y0 - eps), (x1, y1 + eps). They
//! cross at the pivot, which is the midpoint of s0 and s1. Every further point either lies inside
//! the cone (between the two lines), and then tightens it (the upper line turns down to pass
//! through (x, y + eps) if that is below it, the lower one up through (x, y - eps)), or closes the
//! segment. The segment's line goes through the pivot with the mean of the two slopes, and the
//! next segment starts at the point that did not fit.
//!
//! The cone is kept exactly: slopes are fractions of i128 integers in coordinates relative to s0
//! and doubled (so the pivot is integral), never raw keys squared. The real tolerance of a
//! proposal is `eps`; [`segment::finalize`] then stores it with an f32 slope and an integer
//! intercept, verifies every point and may shorten the proposal (its integer band has one unit
//! of slack from the floor, so in practice it does not).
//!
//! Routing is Bourbon's: a binary search over the segments' first keys ([`Segments::route`]).
//! Built once, immutable afterwards; any thread may call any method.

use crate::bound::{Bound, eps_for_boundary};
use crate::codec::{Header, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::points::staircase;
use crate::segment::Segments;

/// A Greedy-PLR index: segments routed by binary search.
#[derive(Debug, Clone)]
pub struct Plr {
    n: u64,
    boundary: u64,
    eps: u64,
    segs: Segments,
}

/// Tolerances above this are fitted as this: it already exceeds any position (positions are
/// u32), and it keeps the cone's numerators below 2^35.
pub(crate) const MAX_FIT_EPS: u64 = 1 << 33;

/// A slope `num / den` with `den >= 0`; `den == 0` stands for an infinite slope of `num`'s sign.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frac {
    pub num: i128,
    pub den: i128,
}

impl Frac {
    /// `self < other`, exactly (dens are < 2^66 and nums < 2^35, so products fit an i128).
    #[inline]
    pub fn lt(self, other: Frac) -> bool {
        self.num * other.den < other.num * self.den
    }

    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

/// Proposes the Greedy-PLR segment starting at point `start`: `(end, slope)`.
pub(crate) fn propose(xs: &[u64], ys: &[u32], start: usize, eps: u64) -> (usize, f64) {
    let (Some(&x0), Some(&y0)) = (xs.get(start), ys.get(start)) else {
        return (start + 1, 0.0);
    };
    let (Some(&x1), Some(&y1)) = (xs.get(start + 1), ys.get(start + 1)) else {
        return (start + 1, 0.0);
    };
    let e2 = 2 * i128::from(eps.min(MAX_FIT_EPS));
    // Doubled coordinates relative to s0: the pivot is (dx1, dy1).
    let px2 = i128::from(x1 - x0);
    let py2 = i128::from(y1) - i128::from(y0);
    let mut lo = Frac {
        num: py2 - e2,
        den: px2,
    };
    let mut hi = Frac {
        num: py2 + e2,
        den: px2,
    };
    let rest = xs.iter().zip(ys).skip(start + 2);
    for (i, (&x, &y)) in rest.enumerate() {
        // Relative to the pivot, doubled: X > 0 since x > x1 > pivot.
        let dx = 2 * i128::from(x - x0) - px2;
        let dy = 2 * (i128::from(y) - i128::from(y0)) - py2;
        let p = Frac { num: dy, den: dx };
        if p.lt(lo) || hi.lt(p) {
            return (start + 2 + i, cone_slope(lo, hi));
        }
        let up = Frac {
            num: dy + e2,
            den: dx,
        };
        let down = Frac {
            num: dy - e2,
            den: dx,
        };
        if up.lt(hi) {
            hi = up;
        }
        if lo.lt(down) {
            lo = down;
        }
    }
    (xs.len(), cone_slope(lo, hi))
}

/// The proposed slope: the middle of the cone `[lo, hi]`. A cone of zero width (eps = 0, the
/// points are collinear) has no slack for the f32 rounding `finalize` applies, and a slope
/// rounded down would floor every point one position low; so its slope is rounded UP to an f32,
/// which the floor in the stored predictor absorbs.
pub(crate) fn cone_slope(lo: Frac, hi: Frac) -> f64 {
    let mid = (lo.to_f64() + hi.to_f64()) / 2.0;
    if lo.lt(hi) || !(mid > 0.0 && mid < f64::from(f32::MAX)) {
        return mid;
    }
    let f = mid as f32;
    if f64::from(f) >= mid {
        f64::from(f)
    } else {
        f64::from(f32::from_bits(f.to_bits() + 1))
    }
}

/// Reads segments for `n` keys and checks there are some exactly when there are keys.
pub(crate) fn read_segments(r: &mut Reader<'_>, n: u64) -> Result<Segments> {
    let segs = Segments::read(r, n)?;
    if segs.is_empty() != (n == 0) {
        return Err(corrupt(format!("{} segments for {n} keys", segs.len())));
    }
    Ok(segs)
}

impl Plr {
    /// Builds over validated keys.
    pub fn build(keys: &[u64], params: &Params) -> Result<Plr> {
        let eps = eps_for_boundary(params.boundary);
        let pts = staircase(keys);
        let segs = Segments::fit_all(&pts.xs, &pts.ys, eps, |s| propose(&pts.xs, &pts.ys, s, eps));
        Ok(Plr {
            n: keys.len() as u64,
            boundary: params.boundary,
            eps,
            segs,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<Plr> {
        let segs = read_segments(r, h.key_count)?;
        Ok(Plr {
            n: h.key_count,
            boundary: h.boundary,
            eps: eps_for_boundary(h.boundary),
            segs,
        })
    }

    pub fn segments(&self) -> &Segments {
        &self.segs
    }
}

impl LearnedIndex for Plr {
    fn family(&self) -> Family {
        Family::Plr
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        let j = self.segs.route(q);
        self.segs.search(j, q, self.eps, self.n)
    }

    fn payload_len(&self) -> u64 {
        self.segs.encoded_len()
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        self.segs.write(out);
    }

    fn stats(&self) -> IndexStats {
        let segments = self.segs.len() as u64;
        IndexStats {
            models: segments,
            details: vec![("segments", StatValue::U64(segments))],
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::bound::{holds, lower_bound};
    use crate::points::Points;
    use crate::segment::{eval, finalize};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Seeded key sets of several shapes for the fitting tests: (name, keys).
    pub(crate) fn key_sets(seed: u64, n: usize) -> Vec<(&'static str, Vec<u64>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut uniform: Vec<u64> = (0..n).map(|_| rng.r#gen()).collect();
        let mut lognormal: Vec<u64> = (0..n)
            .map(|_| {
                let s: f64 = (0..12).map(|_| rng.r#gen::<f64>()).sum::<f64>() - 6.0;
                ((2.0 * s).exp() * 1e9).min(1.8e19) as u64
            })
            .collect();
        let mut dups: Vec<u64> = (0..n).map(|_| rng.gen_range(0..n as u64 / 8 + 1)).collect();
        let mut dense: Vec<u64> = (0..n as u64)
            .map(|i| u64::MAX - 3 * n as u64 + 3 * i + rng.gen_range(0..3))
            .collect();
        for v in [&mut uniform, &mut lognormal, &mut dups, &mut dense] {
            v.sort_unstable();
        }
        vec![
            ("uniform", uniform),
            ("lognormal", lognormal),
            ("duplicates", dups),
            ("dense top", dense),
        ]
    }

    /// Every staircase point is within `eps` of its segment's stored predictor, and every key and
    /// neighbour is answered within the contract.
    pub(crate) fn check_segments(
        idx: &dyn LearnedIndex,
        segs: &Segments,
        keys: &[u64],
        eps: u64,
        ctx: &str,
    ) {
        let pts = staircase(keys);
        for (&x, &y) in pts.xs.iter().zip(&pts.ys) {
            let j = segs.route(x);
            let p = eval(segs.keys[j], segs.slopes[j], segs.intercepts[j], x);
            let y = u64::from(y);
            assert!(
                p + eps >= y && p <= y + eps,
                "{ctx}: point ({x}, {y}) predicted {p}, eps {eps}"
            );
        }
        for &k in keys.iter().step_by(7) {
            for q in [k.wrapping_sub(1), k, k.wrapping_add(1)] {
                let b = idx.search(q);
                assert!(
                    holds(keys, q, b),
                    "{ctx}: q={q} {b:?} lb={}",
                    lower_bound(keys, q)
                );
                assert!(b.width() <= 2 * eps + 2, "{ctx}: q={q} {b:?}");
            }
        }
    }

    /// How many proposals `finalize` had to shorten when fitting `pts` with `propose`.
    pub(crate) fn shortened(
        pts: &Points,
        eps: u64,
        propose: impl Fn(&[u64], &[u32], usize, u64) -> (usize, f64),
    ) -> (usize, usize) {
        let (mut start, mut segments, mut cut) = (0, 0, 0);
        while start < pts.len() {
            let (end, slope) = propose(&pts.xs, &pts.ys, start, eps);
            let (_, len) = finalize(&pts.xs[start..end], &pts.ys[start..end], slope, eps);
            segments += 1;
            cut += usize::from(len < end - start);
            start += len;
        }
        (segments, cut)
    }

    #[test]
    fn segments_hold_every_point_within_eps() {
        for seed in [1u64, 2, 3] {
            for (name, keys) in key_sets(seed, 20_000) {
                for b in [2u64, 3, 4, 8, 16, 64, 1000] {
                    let idx = Plr::build(&keys, &Params::new(b)).unwrap();
                    let ctx = format!("plr {name} seed={seed} B={b}");
                    check_segments(&idx, &idx.segs, &keys, eps_for_boundary(b), &ctx);
                }
            }
        }
    }

    #[test]
    fn exact_cones_are_never_cut_by_finalize() {
        for seed in [4u64, 5] {
            for (name, keys) in key_sets(seed, 20_000) {
                for b in [2u64, 3, 4, 5, 8, 16, 64, 4096] {
                    let pts = staircase(&keys);
                    let (segs, cut) = shortened(&pts, eps_for_boundary(b), propose);
                    assert!(
                        cut <= segs / 100,
                        "{name} seed={seed} B={b}: {cut} of {segs} cut"
                    );
                }
            }
        }
    }

    #[test]
    fn a_line_is_one_segment_and_a_bend_two() {
        let keys: Vec<u64> = (0..1000).map(|i| 5 + 7 * i).collect();
        assert_eq!(Plr::build(&keys, &Params::new(2)).unwrap().segs.len(), 1);
        let bend: Vec<u64> = (0..1000)
            .map(|i| if i < 500 { 10 * i } else { 5000 + 1000 * i })
            .collect();
        assert_eq!(Plr::build(&bend, &Params::new(2)).unwrap().segs.len(), 2);
    }

    #[test]
    fn the_pivot_is_the_midpoint_of_the_first_two_points() {
        // Points (0, 0), (10, 1), with eps = 1: the cone through the pivot (5, 0.5) spans slopes
        // [-0.1, 0.3]. (20, 6) has slope 5.5 / 15 > 0.3 from the pivot and closes the segment;
        // (20, 4) lies inside (3.5 / 15).
        assert_eq!(propose(&[0, 10, 20], &[0, 1, 6], 0, 1).0, 2);
        let (end, slope) = propose(&[0, 10, 20], &[0, 1, 4], 0, 1);
        assert_eq!(end, 3);
        // Tightened to [(3.5 - 1) / 15, 0.3]; the mean is (1/6 + 0.3) / 2.
        assert!((slope - (1.0 / 6.0 + 0.3) / 2.0).abs() < 1e-12, "{slope}");
    }
}
