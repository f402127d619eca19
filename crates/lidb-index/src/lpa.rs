//! The learning probe algorithm (LPA) of FINEdex / FineStore (Li et al., VLDB 2021, section 3.1.1
//! and Algorithm 1): greedy partitioning by least-squares models of bounded error.
//!
//! The probe walks over the lower-bound staircase (`points.rs`) with a set S starting at the
//! first point not yet covered: it adds `learning_step` points to S, fits a least-squares line on
//! S and measures its error; while the error is within `threshold` it adds more points; once it
//! is not, it removes `learning_step * learning_rate^n` points from the end of S (n = 1, 2, ...,
//! at least one point) and refits, until the model is within `threshold` again. The model is
//! appended and S restarts after it.
//!
//! Deviations from the paper, all deliberate:
//! - The error is that of the STORED predictor: the least-squares slope goes through
//!   [`segment::finalize`] (f32 slope, the best integer intercept for it), and S is accepted only
//!   when finalize verifies all of it within `threshold`. So "error <= threshold" is exact and
//!   holds for the index as stored; the paper's LS intercept is replaced by finalize's, which is
//!   never worse. The paper stops probing at error == threshold; here that case walks forward.
//! - Algorithm 1 is O(N^2) in the worst case (the error is recomputed over all of S at every
//!   fixed step): on dense linear data one model spans millions of points. The forward step
//!   therefore doubles after every successful step, and the backward steps shrink from the LAST
//!   forward step: `last_step * learning_rate^n`. Stopping at the first S that holds after a
//!   doubled step would give away up to half of that step (about 10% more segments than
//!   Algorithm 1 at B = 16), so the shrinking steps continue in both directions, forward while
//!   the model holds and backward while it does not, down to one point: a bisection of the last
//!   forward step. A segment of m points costs O(m log m). [`Growth::Fixed`] is Algorithm 1 as
//!   printed and [`Growth::Doubling`] the variant that stops early; the unit test
//!   `geometric_steps_give_segment_counts_close_to_fixed_steps` prints all three. Measured on
//!   20k keys (seed 8, threshold = eps): uniform B = 16: fixed 116, doubling 122, geometric 107
//!   segments; lognormal B = 16: 108 / 121 / 105; B = 64: 7 / 8 / 7 and 23 / 24 / 23. At B = 4
//!   (threshold 1, models of ~8 points, shorter than learning_step = 32) Algorithm 1 loses much
//!   of each model to its coarse backward steps: 2428 / 2428 / 1734.
//! - The regression sums (Sum dx, Sum dy, Sum dx^2, Sum dx*dy, f64 on deltas from S's first
//!   point) are updated incrementally, so a refit is O(1); only the error check is O(|S|).
//! - FINEdex stores the models in a cache-optimised B-tree; this family routes with a binary
//!   search over the sorted array of segment first keys ([`Segments::route`]).
//!
//! `threshold` defaults to `eps_for_boundary(B)`; a smaller one gives narrower windows (`2t + 2`),
//! a larger one would break the boundary and is refused. Payload: threshold (u64), learning_step
//! (u64), the segments. Built once, immutable afterwards; any thread may call any method.

use crate::bound::{Bound, eps_for_boundary};
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Error, Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::plr::read_segments;
use crate::points::staircase;
use crate::segment::{Segments, finalize};

/// An LPA index: least-squares segments of bounded error routed by binary search.
#[derive(Debug, Clone)]
pub struct Lpa {
    n: u64,
    boundary: u64,
    threshold: u64,
    learning_step: u64,
    segs: Segments,
}

/// How the probe's forward step evolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Algorithm 1 as printed: every forward step is `learning_step`, backward steps shrink from
    /// `learning_step`.
    Fixed,
    /// The forward step doubles after each success, backward steps shrink from the last forward
    /// step, and the probe stops at the first S that holds, as Algorithm 1 does.
    Doubling,
    /// The default: [`Growth::Doubling`], but the shrinking steps go on in both directions down
    /// to one point (a bisection of the last forward step).
    Geometric,
}

/// The probe's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub threshold: u64,
    pub step: usize,
    pub rate: f64,
    pub growth: Growth,
}

/// Least-squares sums over S, on deltas from S's first point. Public for FINEdex's probe
/// (lidb-fine's `model.rs`), which grows them point by point in the same way.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sums {
    m: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Sums {
    /// Adds (`sign` 1.0) or removes (`sign` -1.0) the point `(dx, dy)`. Adding with 1.0 gives,
    /// bit for bit, the sums a fresh pass in the same point order gives.
    #[inline]
    pub fn add(&mut self, dx: f64, dy: f64, sign: f64) {
        self.m += sign;
        self.x += sign * dx;
        self.y += sign * dy;
        self.xx += sign * dx * dx;
        self.xy += sign * dx * dy;
    }

    /// The least-squares slope (0 for points of one x).
    pub fn slope(&self) -> f64 {
        let var = self.m * self.xx - self.x * self.x;
        let cov = self.m * self.xy - self.x * self.y;
        if var > 0.0 { cov / var } else { 0.0 }
    }
}

impl Probe {
    /// Runs the probe from point `start`: the accepted S as `(end, slope)`.
    pub fn propose(&self, xs: &[u64], ys: &[u32], start: usize) -> (usize, f64) {
        let (Some(&x0), Some(&y0)) = (xs.get(start), ys.get(start)) else {
            return (start + 1, 0.0);
        };
        let y0 = f64::from(y0);
        // Moves S's end from `from` to `to`, adding or removing the points in between.
        let shift = |sums: &mut Sums, from: usize, to: usize| {
            let (a, b, sign) = if to > from {
                (from, to, 1.0)
            } else {
                (to, from, -1.0)
            };
            let (Some(sx), Some(sy)) = (xs.get(a..b), ys.get(a..b)) else {
                return;
            };
            for (&x, &y) in sx.iter().zip(sy) {
                sums.add((x - x0) as f64, f64::from(y) - y0, sign);
            }
        };
        let fits = |sums: &Sums, end: usize| -> bool {
            let (Some(sx), Some(sy)) = (xs.get(start..end), ys.get(start..end)) else {
                return false;
            };
            finalize(sx, sy, sums.slope(), self.threshold).1 == end - start
        };

        let mut sums = Sums::default();
        let mut step = self.step.max(1);
        let mut end = start.saturating_add(step).min(xs.len());
        shift(&mut sums, start, end);
        let mut last_step = end - start;
        let mut ok = fits(&sums, end);
        // The longest S known to hold, with its slope (one point always holds).
        let (mut good, mut good_slope) = (start + 1, 0.0);
        // Forward while the model holds.
        while ok {
            (good, good_slope) = (end, sums.slope());
            if end == xs.len() {
                return (good, good_slope);
            }
            let next = end.saturating_add(step).min(xs.len());
            shift(&mut sums, end, next);
            last_step = next - end;
            end = next;
            ok = fits(&sums, end);
            if ok && self.growth != Growth::Fixed {
                step = step.saturating_mul(2);
            }
        }
        // Backward with steps shrinking from the last forward one. Algorithm 1 stops at the
        // first S that holds; after a doubled step that would give away up to half of it, so the
        // geometric probe keeps going with ever smaller steps in both directions (forward while
        // the model holds), a bisection between the longest S that held and the shortest that
        // did not, until the step is one point.
        let mut bad = end;
        let mut shrink = self.rate;
        loop {
            let back = ((last_step as f64 * shrink) as usize).max(1);
            shrink *= self.rate;
            let next = if ok {
                if self.growth != Growth::Geometric {
                    break;
                }
                end.saturating_add(back).min(bad - 1)
            } else {
                end.saturating_sub(back).max(good + 1)
            };
            if next <= good || next >= bad {
                break;
            }
            shift(&mut sums, end, next);
            end = next;
            ok = fits(&sums, end);
            if ok {
                (good, good_slope) = (end, sums.slope());
            } else {
                bad = end;
            }
            if back == 1 && self.growth == Growth::Geometric {
                break;
            }
        }
        (good, good_slope)
    }
}

impl Lpa {
    /// Builds over validated keys (the paper's variant with geometric forward steps).
    pub fn build(keys: &[u64], params: &Params) -> Result<Lpa> {
        Lpa::build_with(keys, params, Growth::Geometric)
    }

    /// Builds with the given forward-step growth.
    pub fn build_with(keys: &[u64], params: &Params, growth: Growth) -> Result<Lpa> {
        let eps = eps_for_boundary(params.boundary);
        let threshold = params.lpa_threshold.unwrap_or(eps);
        if threshold > eps {
            return Err(Error::InvalidParam(format!(
                "lpa threshold {threshold} exceeds {eps}, the largest error boundary {} allows",
                params.boundary
            )));
        }
        let probe = Probe {
            threshold,
            step: usize::try_from(params.lpa_learning_step).unwrap_or(usize::MAX),
            rate: params.lpa_learning_rate,
            growth,
        };
        let pts = staircase(keys);
        let segs = Segments::fit_all(&pts.xs, &pts.ys, threshold, |s| {
            probe.propose(&pts.xs, &pts.ys, s)
        });
        Ok(Lpa {
            n: keys.len() as u64,
            boundary: params.boundary,
            threshold,
            learning_step: params.lpa_learning_step,
            segs,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<Lpa> {
        let threshold = r.u64()?;
        let learning_step = r.u64()?;
        let eps = eps_for_boundary(h.boundary);
        if threshold > eps {
            return Err(corrupt(format!(
                "lpa threshold {threshold} exceeds {eps}, the error of boundary {}",
                h.boundary
            )));
        }
        if learning_step == 0 {
            return Err(corrupt("lpa learning_step is 0"));
        }
        let segs = read_segments(r, h.key_count)?;
        Ok(Lpa {
            n: h.key_count,
            boundary: h.boundary,
            threshold,
            learning_step,
            segs,
        })
    }

    pub fn segments(&self) -> &Segments {
        &self.segs
    }
}

impl LearnedIndex for Lpa {
    fn family(&self) -> Family {
        Family::Lpa
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
        self.segs.search(j, q, self.threshold, self.n)
    }

    fn payload_len(&self) -> u64 {
        16 + self.segs.encoded_len()
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u64(self.threshold);
        out.put_u64(self.learning_step);
        self.segs.write(out);
    }

    fn stats(&self) -> IndexStats {
        let segments = self.segs.len() as u64;
        IndexStats {
            models: segments,
            details: vec![
                ("segments", StatValue::U64(segments)),
                ("threshold", StatValue::U64(self.threshold)),
                ("learning_step", StatValue::U64(self.learning_step)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::plr::tests::{check_segments, key_sets};

    #[test]
    fn segments_hold_every_point_within_eps() {
        for seed in [1u64, 2, 3] {
            for (name, keys) in key_sets(seed, 20_000) {
                for b in [2u64, 3, 4, 8, 16, 64, 1000] {
                    let idx = Lpa::build(&keys, &Params::new(b)).unwrap();
                    let ctx = format!("lpa {name} seed={seed} B={b}");
                    check_segments(&idx, &idx.segs, &keys, eps_for_boundary(b), &ctx);
                }
            }
        }
    }

    #[test]
    fn a_smaller_threshold_is_respected_and_narrows_the_window() {
        for (name, keys) in key_sets(7, 20_000) {
            for t in [0u64, 1, 3, 10] {
                let mut p = Params::new(64);
                p.lpa_threshold = Some(t);
                p.lpa_learning_step = 8;
                let idx = Lpa::build(&keys, &p).unwrap();
                check_segments(
                    &idx,
                    &idx.segs,
                    &keys,
                    t,
                    &format!("lpa {name} seed=7 t={t}"),
                );
                assert_eq!(idx.stats().details[1], ("threshold", StatValue::U64(t)));
            }
        }
    }

    #[test]
    fn a_threshold_beyond_the_boundary_is_refused() {
        let mut p = Params::new(16);
        p.lpa_threshold = Some(eps_for_boundary(16));
        assert!(Lpa::build(&[1, 2, 3], &p).is_ok());
        p.lpa_threshold = Some(eps_for_boundary(16) + 1);
        assert!(matches!(
            Lpa::build(&[1, 2, 3], &p),
            Err(Error::InvalidParam(_))
        ));
        assert!(crate::build(Family::Lpa, &[1, 2, 3], &p).is_err());
    }

    #[test]
    fn a_line_is_one_segment() {
        let keys: Vec<u64> = (0..1_000_000).map(|i| 3 + 7 * i).collect();
        let idx = Lpa::build(&keys, &Params::new(2)).unwrap();
        assert_eq!(idx.segs.len(), 1);
    }

    /// Geometric forward steps against Algorithm 1's fixed steps on small sets: never notably
    /// more segments. Prints the figures of all three variants (run with --nocapture).
    #[test]
    fn geometric_steps_give_segment_counts_close_to_fixed_steps() {
        for seed in [8u64, 9] {
            for (name, keys) in key_sets(seed, 20_000) {
                for b in [4u64, 16, 64] {
                    let p = Params::new(b);
                    let count = |g| Lpa::build_with(&keys, &p, g).unwrap().segs.len() as f64;
                    let f = count(Growth::Fixed);
                    let d = count(Growth::Doubling);
                    let g = count(Growth::Geometric);
                    println!("lpa seed={seed} {name} B={b}: fixed {f} doubling {d} geometric {g}");
                    assert!(
                        g <= 1.1 * f + 2.0,
                        "{name} seed={seed} B={b}: fixed {f} geometric {g}"
                    );
                }
            }
        }
    }
}
