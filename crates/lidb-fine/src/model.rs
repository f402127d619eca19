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
//!   point) comes from the convex hulls of blocks of [`HULL_BLOCK`] points, built once per
//!   training: for any slope a block's extreme residuals lie on its hulls, a handful of
//!   vertices. The probe answers as the per-proposal `finalize` did except at float near-ties,
//!   which the one `finalize` of the accepted model settles. A bulk load of 1M lognormal keys
//!   ran 3.36G instructions, now 0.38G.
//! - The bulk load's nodes ([`Router::train_pieces`]) keep the model LPA made over all keys,
//!   verified by `finalize` over the node's own positions, instead of training each node again
//!   (which gave the same model back, at the cost of a second training).

use std::cmp::Ordering;
use std::ops::Range;

use lidb_index::bound::window;
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
    /// cut into pieces that keep its slope. The routers are what [`Router::train`] over each
    /// piece would give back, without training twice.
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

/// Least-squares sums over points from one model's first point, on deltas from it, added in
/// point order (so a slope from them is the one a fresh pass over the same points computes).
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    m: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Sums {
    fn add(self, dx: f64, dy: f64) -> Sums {
        Sums {
            m: self.m + 1.0,
            x: self.x + dx,
            y: self.y + dy,
            xx: self.xx + dx * dx,
            xy: self.xy + dx * dy,
        }
    }

    /// The least-squares slope (0 for points of one x).
    fn slope(&self) -> f64 {
        let var = self.m * self.xx - self.x * self.x;
        let cov = self.m * self.xy - self.x * self.y;
        if var > 0.0 { cov / var } else { 0.0 }
    }
}

/// The slope a model stores for a real slope (what `finalize` does with it).
fn stored_slope(slope: f64) -> f32 {
    if slope.is_finite() && slope > 0.0 {
        slope.min(f64::from(f32::MAX)) as f32
    } else {
        0.0
    }
}

/// Points per block of [`Hulls`]: a check reads a block's hull vertices instead of its points.
/// Most blocks of real keys have 5 to 8 vertices on each hull; 128 balances those against the
/// partial blocks at both ends of a proposal, which are read point by point.
const HULL_BLOCK: usize = 128;

/// A staircase point.
#[derive(Debug, Clone, Copy)]
struct Point {
    x: u64,
    y: u32,
}

/// The upper and lower convex hulls of each block of [`HULL_BLOCK`] consecutive staircase points
/// (block `b` holds the points `b * HULL_BLOCK ..`). For any slope, a block's largest value of
/// `y - slope * x` is at a vertex of its upper hull and its smallest at one of its lower hull, so
/// checking a line against a whole block reads only those vertices.
#[derive(Debug, Default)]
struct Hulls {
    /// The upper hulls' vertices, block after block; block `b`'s end is `upper_ends[b]`.
    upper: Vec<Point>,
    upper_ends: Vec<u32>,
    lower: Vec<Point>,
    lower_ends: Vec<u32>,
}

/// Whether `a, b, c` (in staircase order: x increasing, y non-decreasing) turn left (`Greater`),
/// right (`Less`) or go straight: the sign of the cross product, compared exactly as two u128
/// products of u64 differences.
fn turn(a: Point, b: Point, c: Point) -> Ordering {
    let left = u128::from(b.x - a.x) * u128::from(c.y - a.y);
    let right = u128::from(b.y - a.y) * u128::from(c.x - a.x);
    left.cmp(&right)
}

/// Adds `p` to a monotone-chain hull, first dropping the vertices that no longer make the turn
/// `keep` (right turns for an upper hull, left turns for a lower one).
fn push_hull(hull: &mut Vec<Point>, p: Point, keep: Ordering) {
    while let [.., a, b] = hull.as_slice() {
        if turn(*a, *b, p) == keep {
            break;
        }
        hull.pop();
    }
    hull.push(p);
}

impl Hulls {
    /// The hulls of every block of the points `xs`/`ys` (a staircase).
    fn new(xs: &[u64], ys: &[u32]) -> Hulls {
        let mut h = Hulls::default();
        let (mut upper, mut lower) = (Vec::new(), Vec::new());
        for (bxs, bys) in xs.chunks(HULL_BLOCK).zip(ys.chunks(HULL_BLOCK)) {
            block_hulls(bxs, bys, &mut upper, &mut lower);
            h.upper.extend_from_slice(&upper);
            h.upper_ends.push(h.upper.len() as u32);
            h.lower.extend_from_slice(&lower);
            h.lower_ends.push(h.lower.len() as u32);
        }
        h
    }

    /// The upper and lower hull vertices of block `b`.
    fn block(&self, b: usize) -> (&[Point], &[Point]) {
        (
            block_run(&self.upper, &self.upper_ends, b),
            block_run(&self.lower, &self.lower_ends, b),
        )
    }
}

/// The upper and lower hulls of the points `xs`/`ys` (one block), into `upper` and `lower`.
fn block_hulls(xs: &[u64], ys: &[u32], upper: &mut Vec<Point>, lower: &mut Vec<Point>) {
    upper.clear();
    lower.clear();
    let (Some(&x0), Some(&y0), Some(&x1), Some(&y1)) =
        (xs.first(), ys.first(), xs.last(), ys.last())
    else {
        return;
    };
    let (first, last) = (Point { x: x0, y: y0 }, Point { x: x1, y: y1 });
    // Only points above the chord from the first point to the last can be on the upper hull,
    // only points below it on the lower one (the ends are on both).
    for (&x, &y) in xs.iter().zip(ys) {
        let p = Point { x, y };
        let side = turn(first, p, last);
        if side != Ordering::Greater {
            push_hull(upper, p, Ordering::Less);
        }
        if side != Ordering::Less {
            push_hull(lower, p, Ordering::Greater);
        }
    }
}

/// Block `b`'s run of `all`, whose runs end at `ends`.
fn block_run<'h>(all: &'h [Point], ends: &[u32], b: usize) -> &'h [Point] {
    let from = b
        .checked_sub(1)
        .and_then(|p| ends.get(p))
        .map_or(0, |&e| e as usize);
    let to = ends.get(b).map_or(from, |&e| e as usize);
    all.get(from..to).unwrap_or_default()
}

/// LPA's probe over the staircase points of one training: where each model ends.
struct Probe<'a> {
    xs: &'a [u64],
    ys: &'a [u32],
    eps: u64,
    hulls: Hulls,
}

/// A proposal that holds: the end of its points, their least-squares sums and slope.
#[derive(Debug, Clone, Copy)]
struct Held {
    end: usize,
    sums: Sums,
    slope: f64,
}

impl<'a> Probe<'a> {
    fn new(xs: &'a [u64], ys: &'a [u32], eps: u64) -> Probe<'a> {
        let hulls = Hulls::new(xs, ys);
        Probe { xs, ys, eps, hulls }
    }

    /// The probe of LPA (Algorithm 1 with the changes in the module documentation): the end and
    /// slope of the model that starts at point `start`, trying `step` points first.
    fn propose(&self, start: usize, step: usize, rate: f64) -> (usize, f64) {
        let n = self.xs.len();
        // One point always holds.
        let mut good = Held {
            end: start + 1,
            sums: Sums::default().add(0.0, 0.0),
            slope: 0.0,
        };
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
            match self.fits(start, &good, end) {
                Some(held) => {
                    good = held;
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
                match self.fits(start, &good, at) {
                    Some(held) => {
                        good = held;
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

    /// Whether the least-squares line over the points `start..end` (`good`, a shorter proposal
    /// from `start` that held, gives the sums of its points) makes a model that `finalize` holds
    /// over all of them, up to float rounding (which `finalize` itself settles afterwards).
    fn fits(&self, start: usize, good: &Held, end: usize) -> Option<Held> {
        let (&x0, &y0) = (self.xs.get(start)?, self.ys.get(start)?);
        let (xs, ys) = (self.xs.get(good.end..end)?, self.ys.get(good.end..end)?);
        // Added in point order: the same sums, bit for bit, as a fresh pass from `start`.
        let sums = xs.iter().zip(ys).fold(good.sums, |sums, (&x, &y)| {
            sums.add((x - x0) as f64, f64::from(y) - f64::from(y0))
        });
        let slope = sums.slope();
        let (lo, hi) = self.band(start, end, stored_slope(slope))?;
        // The intercept `finalize` picks: the middle integer of the band, kept inside u32.
        let (first, last) = (lo.ceil(), hi.ceil() - 1.0);
        let c = ((first + last) / 2.0)
            .floor()
            .max(first)
            .clamp(0.0, f64::from(u32::MAX));
        (lo <= c && c < hi).then_some(Held { end, sums, slope })
    }

    /// The band `[lo, hi)` of real intercepts `c` with `floor(c + slope * dx)` within `eps` of
    /// every point of `start..end`, computed per point as `finalize` does, or `None` once it
    /// holds no integer. Whole blocks are read through their hulls, the ends point by point.
    fn band(&self, start: usize, end: usize, slope: f32) -> Option<(f64, f64)> {
        let x0 = *self.xs.get(start)?;
        let (s, e) = (f64::from(slope), self.eps as f64);
        let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
        // The lowest and highest intercepts that keep point p's prediction within eps.
        let sdx = |p: Point| s * (p.x - x0) as f64;
        let lo_of = |p: Point| f64::from(p.y) - e - sdx(p);
        let hi_of = |p: Point| f64::from(p.y) + e + 1.0 - sdx(p);
        let mut from = start;
        while from < end {
            let block = from / HULL_BLOCK;
            let block_end = (block + 1) * HULL_BLOCK;
            if from == block * HULL_BLOCK && block_end <= end {
                let (upper, lower) = self.hulls.block(block);
                lo = upper.iter().fold(lo, |lo, &p| lo.max(lo_of(p)));
                hi = lower.iter().fold(hi, |hi, &p| hi.min(hi_of(p)));
            } else {
                let to = block_end.min(end);
                let (xs, ys) = (self.xs.get(from..to)?, self.ys.get(from..to)?);
                for (&x, &y) in xs.iter().zip(ys) {
                    let p = Point { x, y };
                    (lo, hi) = (lo.max(lo_of(p)), hi.min(hi_of(p)));
                }
            }
            if hi - lo < 1.0 && lo.ceil() >= hi {
                return None;
            }
            from = block_end.min(end);
        }
        Some((lo, hi))
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
