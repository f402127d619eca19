//! Building the levels of a PGM-index: the greedy segmentation of a point stream with the exact
//! streaming model ([`OptimalPla`]), each segment made stored and verified by
//! `segment::finalize`, then the recursion up to a root of one segment.
//!
//! The leaf is fitted straight from the keys: [`Staircase`] yields the points of
//! `points::staircase` one by one (the tests check they are the same), so the build never
//! materialises the whole staircase; only the points of the segment being fitted are buffered.
//!
//! Called by `Pgm::build` only; single-threaded, allocations reused across segments and levels.

use super::optimal::OptimalPla;
use crate::segment::{Segment, Segments, finalize};

/// The lower-bound staircase of sorted keys as a stream: exactly the points of
/// `points::staircase(keys)`, in order (see `points.rs` for their definition).
#[derive(Debug, Clone)]
pub struct Staircase<'a> {
    keys: &'a [u64],
    i: usize,
    step: Option<(u64, u32)>,
}

impl<'a> Staircase<'a> {
    pub fn new(keys: &'a [u64]) -> Staircase<'a> {
        Staircase {
            keys,
            i: 0,
            step: None,
        }
    }
}

impl Iterator for Staircase<'_> {
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        if let Some(p) = self.step.take() {
            return Some(p);
        }
        let i = self.i;
        let &k = self.keys.get(i)?;
        let mut j = i + 1;
        while self.keys.get(j) == Some(&k) {
            j += 1;
        }
        self.i = j;
        if j - i > 1 && k < u64::MAX && self.keys.get(j) != Some(&(k + 1)) {
            self.step = Some((k + 1, j as u32));
        }
        Some((k, i as u32))
    }
}

/// Fits one level over a stream of points (x strictly increasing): the greedy maximal segments
/// of the exact model, each handed to `finalize`. When `finalize` verifies only a prefix (float
/// rounding of a slope range narrower than an f32 step), a few other f32 slopes of the range are
/// tried and the longest verified prefix is kept; the next segment starts where it ends, and
/// the points after it are fed again. `xb`/`yb` are scratch buffers (one segment's points).
pub fn fit_points(
    model: &mut OptimalPla,
    points: impl Iterator<Item = (u64, u32)>,
    eps: u64,
    xb: &mut Vec<u64>,
    yb: &mut Vec<u32>,
) -> Segments {
    let mut points = points.fuse();
    let mut segs = Segments::default();
    xb.clear();
    yb.clear();
    loop {
        model.reset(eps);
        // Points carried over from the previous segment (the one that ended it, and any that
        // finalize did not verify) come first.
        let mut want = 0;
        let mut refused = false;
        for (&x, &y) in xb.iter().zip(yb.iter()) {
            if !model.add_point(x, y) {
                refused = true;
                break;
            }
            want += 1;
        }
        if !refused {
            for (x, y) in points.by_ref() {
                xb.push(x);
                yb.push(y);
                if !model.add_point(x, y) {
                    break;
                }
                want += 1;
            }
        }
        let (Some(sx), Some(sy)) = (xb.get(..want), yb.get(..want)) else {
            break;
        };
        if sx.is_empty() {
            break;
        }
        let (mut seg, mut len) = finalize(sx, sy, model.slope(), eps);
        if len < want {
            for slope in model.fallback_slopes() {
                let (s, l) = finalize(sx, sy, slope, eps);
                if l > len {
                    (seg, len) = (s, l);
                }
                if len == want {
                    break;
                }
            }
        }
        segs.push(seg);
        let len = len.clamp(1, want);
        xb.drain(..len);
        yb.drain(..len);
    }
    segs
}

/// [`fit_points`] over points given as slices.
pub fn fit_level(model: &mut OptimalPla, xs: &[u64], ys: &[u32], eps: u64) -> Segments {
    let (mut xb, mut yb) = (Vec::new(), Vec::new());
    let points = xs.iter().copied().zip(ys.iter().copied());
    fit_points(model, points, eps, &mut xb, &mut yb)
}

/// All levels over non-empty sorted keys: the leaf of error `eps` over the staircase, then
/// levels of error `eps_rec` over the first keys of the level below, up to a root of one segment.
pub(super) fn fit_levels(keys: &[u64], eps: u64, eps_rec: u64) -> Vec<Segments> {
    let mut model = OptimalPla::new(eps);
    let (mut xb, mut yb) = (Vec::with_capacity(1024), Vec::with_capacity(1024));
    let leaf = fit_points(&mut model, Staircase::new(keys), eps, &mut xb, &mut yb);
    let mut levels = vec![leaf];
    while let Some(top) = levels.last() {
        let m = top.len();
        if m <= 1 {
            break;
        }
        let points = top.keys.iter().copied().zip(0u32..);
        let mut next = fit_points(&mut model, points, eps_rec, &mut xb, &mut yb);
        if next.len() >= m {
            // Cannot happen with eps_rec >= 1 (any two points fit); the search stays exact with
            // any internal model, so a flat root keeps the structure valid if it ever did.
            debug_assert!(
                false,
                "an internal level did not shrink: {m} -> {}",
                next.len()
            );
            next = Segments::default();
            next.push(Segment {
                key: top.keys.first().copied().unwrap_or(0),
                slope: 0.0,
                intercept: 0,
            });
        }
        levels.push(next);
    }
    levels
}
