//! Linear segments over runs of staircase points: the model shared by plr, fiting, pgm and lpa
//! (and by the internal levels of pgm).
//!
//! A segment covers the keys from its first point's x up to the next segment's first x. Its stored
//! form is 16 bytes: the first x (`u64`), a slope (`f32`, >= 0) and an integer intercept (`u32`),
//! and it predicts `floor(intercept + slope * (q - key))`, computed in f64 and clamped to the next
//! segment's intercept (or to n for the last one). The prediction is monotone in q within a segment.
//!
//! Invariant (established by [`finalize`], which verifies every point with the stored predictor
//! itself, so float rounding can never break it): for every point (x, y) of the segment,
//! `y - eps <= predict(x) <= y + eps`. With the staircase argument of `points.rs` this gives
//! `pred - eps <= lower_bound(q) <= pred + eps + 1` for every q routed to the segment.
//!
//! Fitting algorithms choose which points form a segment and propose a real slope; `finalize`
//! turns that into the stored form and reports how long a prefix it verified, so a fitter that
//! proposes too long a segment (only possible through rounding) simply continues from there.

use crate::bound::{Bound, window};
use crate::codec::{PutLe, Reader};
use crate::error::{Result, corrupt};

/// Bytes one segment takes in the encoding (and in memory).
pub const SEGMENT_BYTES: u64 = 8 + 4 + 4;

/// One stored linear model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub key: u64,
    pub slope: f32,
    pub intercept: u32,
}

/// The stored predictor: `floor(intercept + slope * (q - key))`, with `q < key` treated as `key`.
#[inline]
pub fn eval(key: u64, slope: f32, intercept: u32, q: u64) -> u64 {
    let dx = q.saturating_sub(key) as f64;
    // `as u64` truncates toward zero and saturates, which is floor for the non-negative values here.
    (f64::from(intercept) + f64::from(slope) * dx) as u64
}

/// Chooses the stored form of a line of real slope `slope` for the points `xs`/`ys` (one segment's
/// worth, at least one point) and verifies it point by point with the stored predictor.
///
/// Returns the segment and the length of the prefix of points it holds within `eps` (always at
/// least 1). The caller starts the next segment where that prefix ends.
pub fn finalize(xs: &[u64], ys: &[u32], slope: f64, eps: u64) -> (Segment, usize) {
    debug_assert_eq!(xs.len(), ys.len());
    let (Some(&key), Some(&y0)) = (xs.first(), ys.first()) else {
        debug_assert!(false, "finalize needs at least one point");
        return (
            Segment {
                key: 0,
                slope: 0.0,
                intercept: 0,
            },
            1,
        );
    };
    let slope = if slope.is_finite() && slope > 0.0 {
        slope.min(f64::from(f32::MAX)) as f32
    } else {
        0.0
    };
    // The band of real intercepts c with floor(c + slope * dx) within [y - eps, y + eps] for all
    // points: c in [y - eps - s*dx, y + eps + 1 - s*dx). It is narrowed point by point, and the
    // proposal is cut where no integer is left in it.
    let e = eps as f64;
    let (mut lo_c, mut hi_c) = (f64::NEG_INFINITY, f64::INFINITY);
    let mut prefix = 0;
    for (&x, &y) in xs.iter().zip(ys) {
        let sdx = f64::from(slope) * (x - key) as f64;
        let y = f64::from(y);
        let lo = lo_c.max(y - e - sdx);
        let hi = hi_c.min(y + e + 1.0 - sdx);
        // A band at least one wide surely holds an integer; only a narrower one needs the ceil.
        if hi - lo < 1.0 && lo.ceil() >= hi {
            break;
        }
        (lo_c, hi_c, prefix) = (lo, hi, prefix + 1);
    }
    let (xs, ys) = (
        xs.get(..prefix).unwrap_or_default(),
        ys.get(..prefix).unwrap_or_default(),
    );
    // The middle integer of [ceil(lo_c), ceil(hi_c) - 1], kept inside u32.
    let first = lo_c.ceil();
    let last = hi_c.ceil() - 1.0;
    let c = ((first + last) / 2.0)
        .floor()
        .max(first)
        .clamp(0.0, f64::from(u32::MAX)) as u32;

    let seg = Segment {
        key,
        slope,
        intercept: c,
    };
    let verified = xs
        .iter()
        .zip(ys)
        .position(|(&x, &y)| {
            let p = eval(key, slope, c, x);
            let y = u64::from(y);
            p + eps < y || p > y + eps
        })
        .unwrap_or(xs.len());
    if verified == 0 {
        // Only a pathological band gets here; a flat model through the first point always holds.
        return (
            Segment {
                key,
                slope: 0.0,
                intercept: y0,
            },
            1,
        );
    }
    (seg, verified)
}

/// Segments in structure-of-arrays form, sorted by first key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segments {
    pub keys: Vec<u64>,
    pub slopes: Vec<f32>,
    pub intercepts: Vec<u32>,
}

impl Segments {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn push(&mut self, s: Segment) {
        debug_assert!(self.keys.last().is_none_or(|&k| k < s.key));
        self.keys.push(s.key);
        self.slopes.push(s.slope);
        self.intercepts.push(s.intercept);
    }

    /// Index of the segment a query belongs to: the last one whose first key is `<= q`, or 0.
    #[inline]
    pub fn route(&self, q: u64) -> usize {
        self.keys.partition_point(|&k| k <= q).saturating_sub(1)
    }

    /// Clamped integer prediction of segment `j` for `q`; `n` caps the last segment.
    #[inline]
    pub fn predict(&self, j: usize, q: u64, n: u64) -> u64 {
        let (Some(&key), Some(&slope), Some(&c)) =
            (self.keys.get(j), self.slopes.get(j), self.intercepts.get(j))
        else {
            return 0;
        };
        let cap = self
            .intercepts
            .get(j + 1)
            .map_or(n, |&next| u64::from(next));
        eval(key, slope, c, q).min(cap)
    }

    /// The contract window of segment `j` for `q`, for a model of error `eps` over `n` keys.
    #[inline]
    pub fn search(&self, j: usize, q: u64, eps: u64, n: u64) -> Bound {
        window(self.predict(j, q, n), eps, n)
    }

    /// Fits segments over all points with `fit`, which proposes `(end, slope)` for the points
    /// starting at a given index; `finalize` may shorten each proposal.
    pub fn fit_all(
        xs: &[u64],
        ys: &[u32],
        eps: u64,
        mut fit: impl FnMut(usize) -> (usize, f64),
    ) -> Segments {
        let mut segs = Segments::default();
        let mut start = 0;
        while start < xs.len() {
            let (end, slope) = fit(start);
            let end = end.clamp(start + 1, xs.len());
            let (Some(sx), Some(sy)) = (xs.get(start..end), ys.get(start..end)) else {
                break;
            };
            let (seg, len) = finalize(sx, sy, slope, eps);
            segs.push(seg);
            start += len;
        }
        segs
    }

    /// Encoded length: a count, then the three arrays.
    pub fn encoded_len(&self) -> u64 {
        8 + SEGMENT_BYTES * self.len() as u64
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.len() as u64);
        self.keys.iter().for_each(|&k| out.put_u64(k));
        self.slopes.iter().for_each(|&s| out.put_f32(s));
        self.intercepts.iter().for_each(|&c| out.put_u32(c));
    }

    /// Reads segments written by [`Segments::write`], checking that first keys increase, slopes
    /// are finite and non-negative, and intercepts are at most `n`.
    pub fn read(r: &mut Reader<'_>, n: u64) -> Result<Segments> {
        let len = r.count(SEGMENT_BYTES as usize, "segment")?;
        let segs = Segments {
            keys: r.u64_vec(len)?,
            slopes: r.f32_vec(len)?,
            intercepts: r.u32_vec(len)?,
        };
        if let Some(i) = segs
            .keys
            .windows(2)
            .position(|w| matches!(w, [a, b] if b <= a))
        {
            return Err(corrupt(format!(
                "segment keys not increasing at segment {}",
                i + 1
            )));
        }
        if let Some(i) = segs.slopes.iter().position(|s| !s.is_finite() || *s < 0.0) {
            return Err(corrupt(format!("segment {i} has an invalid slope")));
        }
        if let Some(i) = segs.intercepts.iter().position(|&c| u64::from(c) > n) {
            return Err(corrupt(format!(
                "segment {i} intercept exceeds the key count {n}"
            )));
        }
        Ok(segs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalize_holds_every_point_of_a_line() {
        let xs: Vec<u64> = (0..100).map(|i| 1_000 + 10 * i).collect();
        let ys: Vec<u32> = (0..100).collect();
        let (seg, len) = finalize(&xs, &ys, 0.1, 0);
        assert_eq!(len, 100);
        for (&x, &y) in xs.iter().zip(&ys) {
            assert_eq!(eval(seg.key, seg.slope, seg.intercept, x), u64::from(y));
        }
    }

    #[test]
    fn finalize_truncates_where_the_slope_stops_fitting() {
        // A bend at point 50: slope 0.1 fits the first 50 points exactly, not the rest.
        let xs: Vec<u64> = (0..100)
            .map(|i| if i < 50 { 10 * i } else { 500 + (i - 50) })
            .collect();
        let ys: Vec<u32> = (0..100).collect();
        // With eps = 2 the intercept may rise to 2 (the floor adds one more), so point i >= 50 is
        // held while 2 + 50 + 0.1 * (i - 50) >= i - 2, that is up to i = 54: a prefix of 55.
        let (seg, len) = finalize(&xs, &ys, 0.1, 2);
        assert_eq!(len, 55);
        for (&x, &y) in xs.iter().zip(&ys).take(len) {
            let p = eval(seg.key, seg.slope, seg.intercept, x);
            assert!(
                p + 2 >= u64::from(y) && p <= u64::from(y) + 2,
                "x={x} y={y} p={p}"
            );
        }
    }

    #[test]
    fn a_single_point_is_always_held() {
        let (seg, len) = finalize(&[u64::MAX], &[7], f64::NAN, 0);
        assert_eq!(len, 1);
        assert_eq!(eval(seg.key, seg.slope, seg.intercept, u64::MAX), 7);
    }
}
