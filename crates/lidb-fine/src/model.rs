//! The model part (the paper's section 3.1): LPA models over one trained data array and the flat
//! array of their first keys that routes a query to its model.
//!
//! A [`Router`] is built once over a sorted array of distinct keys and never changes; any thread
//! may call it. [`Router::lower_bound`] is exact: the model's window (the lidb-index contract:
//! it certainly holds the first position whose key is >= q, for any q) is searched by binary
//! search, and a window that does not hold (a broken contract, which is a bug) falls back to a
//! search of the whole array after a debug assertion.
//!
//! Invariant: every stored model went through lidb-index's `finalize`, which verifies the error
//! bound point by point with the stored predictor; the probe only proposes where models end.
//!
//! Deviations:
//! - Models are routed by their FIRST keys (what lidb-index's LPA segments carry) with a
//!   branch-free binary search over a flat sorted array, instead of the paper's B-tree over last
//!   keys; "last model whose first key <= q" is the same partition.
//! - The probe is local ([`Probe`]), because lidb-index's is private and lacks the authors'
//!   step reset: after each model the learning step becomes the power of ten at or below the
//!   model's length. Without it, a run of keys shorter than the step (say 256 consecutive keys
//!   inserted after one trained key, then sparse keys) became one model per key: the backward
//!   steps `1000 * 0.1^n` of Algorithm 1 add up to 111 and never reach the run's end. The probe
//!   walks forward doubling its step (lidb-index's choice, for O(m log m) per model) while the
//!   model holds, then refines the end between the last length that held and the first that did
//!   not with steps shrinking by `learning_rate` (the paper's backward steps, repeated at each
//!   size until they would pass the last good length).
//! - The probe checks a proposal without a pass over its points. It used to compute the
//!   least-squares slope afresh and run `finalize` over the whole proposal, so the forward
//!   doubling and above all the backward steps (about 40 proposals per model) read each point
//!   some 80 times. Now the least-squares sums are carried from the last length that held (added
//!   in point order, so the slope is bit for bit the one a fresh pass gives), and the band of
//!   intercepts that keeps every point within the bound (what `finalize` narrows point by
//!   point) is read from the upper and lower convex hulls of the points that already held,
//!   grown with the model (exact u128 turns; for any slope the extreme residuals lie on the
//!   hulls, found by binary search), and from the new points one by one. A model of m points
//!   costs O(m) point reads and hull pushes plus O(log m) per proposal, where it cost O(m) per
//!   proposal. The probe answers as the per-proposal `finalize` did except at float near-ties,
//!   which the one `finalize` of the accepted model settles. A bulk load of 1M lognormal keys
//!   ran 3.36G instructions, now 0.33G.
//! - The bulk load's nodes ([`Router::train_pieces`]) keep the model LPA made over all keys,
//!   verified by `finalize` over the node's own positions, instead of training each node again
//!   (which normally gave the same model back, at the cost of a second training).

use std::cmp::Ordering;
use std::ops::Range;

use lidb_index::bound::window;
use lidb_index::lpa::Sums;
use lidb_index::points::staircase;
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
    /// Trains LPA models over `keys` (sorted, distinct). More than 2^32 - 1 keys (beyond the
    /// models' u32 positions) get no models and every search covers the whole array.
    pub fn train(keys: &[u64], cfg: &Config) -> Router {
        let eps = cfg.threshold;
        if keys.len() as u64 >= u64::from(u32::MAX) {
            return Router::default();
        }
        let pts = staircase(keys);
        let mut step = first_step(cfg);
        let probe = Probe::new(&pts.xs, &pts.ys, eps);
        let segs = Segments::fit_all(&pts.xs, &pts.ys, eps, |start| {
            let (end, slope) = probe.propose(start, step, cfg.learning_rate);
            step = power_of_ten_at_most(end.saturating_sub(start));
            (end, slope)
        });
        Router { segs, eps }
    }

    /// LPA over `keys` (sorted, distinct) as one router per model, each over its own piece of
    /// `keys` (its positions counted from the piece's start); a model longer than `max_len` is
    /// cut into pieces that keep its slope. Each piece's model is verified by `finalize` over
    /// the piece, and the keys are trained once. (Keys that are not distinct, or too many for
    /// u32 positions, are cut every `max_len` and each piece trained on its own.)
    pub fn train_pieces(keys: &[u64], cfg: &Config, max_len: usize) -> Vec<(Range<usize>, Router)> {
        let (eps, max_len) = (cfg.threshold, max_len.max(1));
        let distinct = keys.windows(2).all(|w| matches!(w, [a, b] if a < b));
        if !distinct || keys.len() as u64 >= u64::from(u32::MAX) {
            debug_assert!(distinct, "keys not distinct");
            let starts = (0..keys.len()).step_by(max_len);
            let chunks = starts.zip(keys.chunks(max_len));
            return chunks
                .map(|(from, chunk)| (from..from + chunk.len(), Router::train(chunk, cfg)))
                .collect();
        }
        // Distinct keys: the staircase points are (keys[i], i), so `ys[..len]` are also a
        // piece's own positions.
        let n = keys.len();
        let ys: Vec<u32> = (0..n as u32).collect();
        let mut step = first_step(cfg);
        let probe = Probe::new(keys, &ys, eps);
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < n {
            let (end, slope) = probe.propose(start, step, cfg.learning_rate);
            step = power_of_ten_at_most(end.saturating_sub(start));
            let Some(model) = keys.get(start..end.clamp(start + 1, n)) else {
                debug_assert!(false, "proposal {start}..{end} outside {n} points");
                break;
            };
            // Each piece's model is the proposal's slope over the whole piece; `finalize` may
            // split it where the stored form cannot hold it (an intercept below the piece's
            // first position does not fit a u32).
            for piece in model.chunks(max_len) {
                let own = ys.get(..piece.len()).unwrap_or_default();
                let segs = Segments::fit_all(piece, own, eps, |_| (piece.len(), slope));
                pieces.push((start..start + piece.len(), Router { segs, eps }));
                start += piece.len();
            }
        }
        pieces
    }

    /// Number of models.
    pub fn models(&self) -> usize {
        self.segs.len()
    }

    /// The models themselves (what a remote client needs to predict positions).
    pub fn segments(&self) -> &Segments {
        &self.segs
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

/// The learning step of the first model.
fn first_step(cfg: &Config) -> usize {
    usize::try_from(cfg.learning_step)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// The largest power of ten `<= len` (1 for 0).
fn power_of_ten_at_most(len: usize) -> usize {
    let mut p = 1usize;
    while p <= len / 10 {
        p *= 10;
    }
    p
}

/// `sums` with the point `(dx, dy)` added (in point order, so a slope from them is the one a
/// fresh pass over the same points computes).
fn plus(mut sums: Sums, dx: f64, dy: f64) -> Sums {
    sums.add(dx, dy, 1.0);
    sums
}

/// The slope a model stores for a real slope (what `finalize` does with it).
fn stored_slope(slope: f64) -> f32 {
    if slope.is_finite() && slope > 0.0 {
        slope.min(f64::from(f32::MAX)) as f32
    } else {
        0.0
    }
}

/// A staircase point.
#[derive(Debug, Clone, Copy)]
struct Point {
    x: u64,
    y: u32,
}

/// Whether `a, b, c` (in staircase order: x increasing, y non-decreasing) turn left (`Greater`),
/// right (`Less`) or go straight: the sign of the cross product, compared exactly as two u128
/// products of u64 differences.
fn turn(a: Point, b: Point, c: Point) -> Ordering {
    let left = u128::from(b.x - a.x) * u128::from(c.y - a.y);
    let right = u128::from(b.y - a.y) * u128::from(c.x - a.x);
    left.cmp(&right)
}

/// Adds `p` (right of every vertex) to a monotone-chain hull, first dropping the vertices that
/// no longer make the turn `keep` (right turns for an upper hull, left turns for a lower one).
fn push_hull(hull: &mut Vec<Point>, p: Point, keep: Ordering) {
    while let [.., a, b] = hull.as_slice() {
        if turn(*a, *b, p) == keep {
            break;
        }
        hull.pop();
    }
    hull.push(p);
}

/// The largest `value` over `hull`'s vertices, along which it rises and then falls (true of
/// `y - slope * x` along an upper hull, whose edges' slopes decrease), by binary search.
fn peak(hull: &[Point], value: impl Fn(Point) -> f64) -> f64 {
    let (mut lo, mut hi) = (0, hull.len().saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let rises = match (hull.get(mid), hull.get(mid + 1)) {
            (Some(&a), Some(&b)) => value(b) > value(a),
            _ => false,
        };
        if rises {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    hull.get(lo).map_or(f64::NEG_INFINITY, |&p| value(p))
}

/// LPA's probe over the staircase points of one training: where each model ends.
struct Probe<'a> {
    xs: &'a [u64],
    ys: &'a [u32],
    eps: u64,
}

/// The model the probe grows from one start point: the points `start..end` that held, their
/// least-squares sums and slope, and their upper and lower convex hulls. For any slope, the
/// points' largest value of `y - slope * x` is at a vertex of the upper hull and the smallest
/// at one of the lower hull, so a longer proposal reads the hulls and its new points only.
#[derive(Debug)]
struct Grown {
    start: usize,
    end: usize,
    sums: Sums,
    slope: f64,
    upper: Vec<Point>,
    lower: Vec<Point>,
}

impl<'a> Probe<'a> {
    fn new(xs: &'a [u64], ys: &'a [u32], eps: u64) -> Probe<'a> {
        Probe { xs, ys, eps }
    }

    /// The probe of LPA (Algorithm 1 with the changes in the module documentation): the end and
    /// slope of the model that starts at point `start`, trying `step` points first.
    fn propose(&self, start: usize, step: usize, rate: f64) -> (usize, f64) {
        let n = self.xs.len();
        // One point always holds.
        let mut good = self.one_point(start);
        if good.end >= n {
            return (good.end, good.slope);
        }
        // Forward, doubling the step, while the model holds.
        let mut step = step.max(1);
        let mut bad = loop {
            let end = start.saturating_add(step).min(n);
            if end <= good.end {
                step = step.saturating_mul(2);
                continue;
            }
            match self.fits(&good, end) {
                Some((sums, slope)) => {
                    self.grow(&mut good, end, sums, slope);
                    if end == n {
                        return (good.end, good.slope);
                    }
                    step = step.saturating_mul(2);
                }
                None => break end,
            }
        };
        // Backward: between the last length that held and the first that did not, steps
        // shrinking by `rate`, each repeated while it holds.
        let mut gap = bad - good.end;
        while bad - good.end > 1 {
            gap = ((gap as f64 * rate) as usize).clamp(1, bad - good.end - 1);
            let mut at = good.end + gap;
            while at < bad {
                match self.fits(&good, at) {
                    Some((sums, slope)) => {
                        self.grow(&mut good, at, sums, slope);
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
        (good.end, good.slope)
    }

    /// The model of the one point `start`.
    fn one_point(&self, start: usize) -> Grown {
        let mut one = Grown {
            start,
            end: start,
            sums: Sums::default(),
            slope: 0.0,
            upper: Vec::new(),
            lower: Vec::new(),
        };
        self.grow(&mut one, start + 1, plus(Sums::default(), 0.0, 0.0), 0.0);
        one
    }

    /// Extends `good` to the points up to `end`, whose sums and slope are `sums` and `slope`.
    fn grow(&self, good: &mut Grown, end: usize, sums: Sums, slope: f64) {
        let xs = self.xs.get(good.end..end).unwrap_or_default();
        let ys = self.ys.get(good.end..end).unwrap_or_default();
        if let (Some(&x0), Some(&y0), Some(&x1), Some(&y1)) =
            (xs.first(), ys.first(), xs.last(), ys.last())
        {
            let (first, last) = (Point { x: x0, y: y0 }, Point { x: x1, y: y1 });
            // A point below the chord from the first new point to the last cannot be on the
            // upper hull, one above it not on the lower hull.
            for (&x, &y) in xs.iter().zip(ys) {
                let p = Point { x, y };
                let side = turn(first, p, last);
                if side != Ordering::Greater {
                    push_hull(&mut good.upper, p, Ordering::Less);
                }
                if side != Ordering::Less {
                    push_hull(&mut good.lower, p, Ordering::Greater);
                }
            }
        }
        (good.end, good.sums, good.slope) = (end, sums, slope);
    }

    /// The sums and slope of the least-squares line over the points `good.start..end` if the
    /// model `finalize` makes of it holds all of them, up to float rounding (which `finalize`
    /// itself settles afterwards).
    fn fits(&self, good: &Grown, end: usize) -> Option<(Sums, f64)> {
        let (&x0, &y0) = (self.xs.get(good.start)?, self.ys.get(good.start)?);
        let (xs, ys) = (self.xs.get(good.end..end)?, self.ys.get(good.end..end)?);
        // Added in point order: the same sums, bit for bit, as a fresh pass from the start.
        let sums = xs.iter().zip(ys).fold(good.sums, |sums, (&x, &y)| {
            plus(sums, (x - x0) as f64, f64::from(y) - f64::from(y0))
        });
        let slope = sums.slope();
        let (lo, hi) = self.band(good, end, stored_slope(slope))?;
        // The intercept `finalize` picks: the middle integer of the band, kept inside u32.
        let (first, last) = (lo.ceil(), hi.ceil() - 1.0);
        let c = ((first + last) / 2.0)
            .floor()
            .max(first)
            .clamp(0.0, f64::from(u32::MAX));
        (lo <= c && c < hi).then_some((sums, slope))
    }

    /// The band `[lo, hi)` of real intercepts `c` with `floor(c + slope * dx)` within `eps` of
    /// every point of `good.start..end`, computed per point as `finalize` does, or `None` once
    /// it holds no integer: `good`'s points through its hulls, the new ones one by one.
    fn band(&self, good: &Grown, end: usize, slope: f32) -> Option<(f64, f64)> {
        let x0 = *self.xs.get(good.start)?;
        let (s, e) = (f64::from(slope), self.eps as f64);
        // The lowest and highest intercepts that keep point p's prediction within eps.
        let sdx = |p: Point| s * (p.x - x0) as f64;
        let lo_of = |p: Point| f64::from(p.y) - e - sdx(p);
        let hi_of = |p: Point| f64::from(p.y) + e + 1.0 - sdx(p);
        let mut lo = peak(&good.upper, lo_of);
        let mut hi = -peak(&good.lower, |p| -hi_of(p));
        let (xs, ys) = (self.xs.get(good.end..end)?, self.ys.get(good.end..end)?);
        for (cxs, cys) in xs.chunks(64).zip(ys.chunks(64)) {
            for (&x, &y) in cxs.iter().zip(cys) {
                let p = Point { x, y };
                (lo, hi) = (lo.max(lo_of(p)), hi.min(hi_of(p)));
            }
            if hi - lo < 1.0 && lo.ceil() >= hi {
                return None;
            }
        }
        (hi - lo >= 1.0 || lo.ceil() < hi).then_some((lo, hi))
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
