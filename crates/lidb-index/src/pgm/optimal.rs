//! The optimal streaming piecewise-linear approximation (O'Rourke 1981, as in the PGM-index's
//! `OptimalPiecewiseLinearModel`), in exact integer arithmetic.
//!
//! Points `(x, y)` with strictly increasing x are added one at a time. The model keeps the lower
//! convex hull of the upper points `(x, y + eps)`, the upper convex hull of the lower points
//! `(x, max(y - eps, 0))` (lines must stay non-negative: stored intercepts are unsigned), and the "rectangle": the two extreme feasible lines, the one of least slope
//! (through `rect[0]`, an upper point, and `rect[2]`, a later lower point) and the one of greatest
//! slope (through `rect[1]`, a lower point, and `rect[3]`, a later upper point). A new point is
//! feasible iff its upper point is not below the first line and its lower point not above the
//! second: right of all points so far, those two lines are the lowest and the highest feasible
//! lines. [`OptimalPla::add_point`] returns false exactly when no line within `eps` of every point
//! added since the last reset (and non-negative at them) exists any more; greedy maximal extension with this exact test gives
//! the minimal number of segments for the tolerance.
//!
//! Arithmetic: x is kept as the delta from the segment's first x (u64), the bounds `y + eps` and
//! `max(y - eps, 0)` as i64 with `eps <= 2^32` (callers clamp it, see [`MAX_FIT_EPS`]). Every
//! slope is taken left to right (dx > 0, a u64), so every slope comparison and cross product is
//! a difference of products of an i64 below 2^35 and a u64, below 2^99: exact in i128. Floats appear only in
//! [`OptimalPla::slope`], the proposal handed to `segment::finalize`, which verifies it.
//!
//! Used by `pgm/mod.rs` for every level; one model is reused across segments and levels so the
//! hull vectors are allocated once per build. Not shared between threads.

use crate::points::MAX_KEYS;

/// The largest tolerance the model accepts. Any larger tolerance over at most `MAX_KEYS`
/// positions admits the same lines as far as the verified segments are concerned (a flat line
/// is within `MAX_KEYS` of every position), so callers clamp to it.
pub const MAX_FIT_EPS: u64 = MAX_KEYS;

/// A bound point: x as the delta from the segment's first x, y as `y + eps` or `max(y - eps, 0)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Point {
    x: u64,
    y: i64,
}

/// The direction from a point to a point further right (`dx > 0`), compared exactly.
#[derive(Debug, Clone, Copy)]
struct Slope {
    dx: u64,
    dy: i64,
}

/// `a * b` exactly: |a| < 2^35 and b < 2^64 give |a * b| < 2^99.
#[inline(always)]
fn mul(a: i64, b: u64) -> i128 {
    i128::from(a) * i128::from(b)
}

impl Slope {
    #[inline(always)]
    fn between(from: Point, to: Point) -> Slope {
        debug_assert!(from.x < to.x);
        Slope {
            dx: to.x.wrapping_sub(from.x),
            dy: to.y - from.y,
        }
    }

    #[inline(always)]
    fn lt(self, other: Slope) -> bool {
        mul(self.dy, other.dx) < mul(other.dy, self.dx)
    }

    #[inline(always)]
    fn gt(self, other: Slope) -> bool {
        mul(self.dy, other.dx) > mul(other.dy, self.dx)
    }

    fn to_f64(self) -> f64 {
        self.dy as f64 / self.dx as f64
    }
}

/// The z component of `(a - o) x (b - o)` for `o.x < a.x < b.x`: positive for a left turn.
#[inline(always)]
fn cross(o: Point, a: Point, b: Point) -> i128 {
    let (oa, ob) = (Slope::between(o, a), Slope::between(o, b));
    mul(ob.dy, oa.dx) - mul(oa.dy, ob.dx)
}

/// The streaming model of one segment at a time (see the module documentation).
#[derive(Debug, Clone)]
pub struct OptimalPla {
    eps: i64,
    /// Lower convex hull of the upper points, from `upper_start` on.
    upper: Vec<Point>,
    /// Upper convex hull of the lower points, from `lower_start` on.
    lower: Vec<Point>,
    upper_start: usize,
    lower_start: usize,
    points: usize,
    first_x: u64,
    last_x: u64,
    rect: [Point; 4],
}

impl OptimalPla {
    /// A model of tolerance `eps` (clamped to [`MAX_FIT_EPS`]).
    pub fn new(eps: u64) -> OptimalPla {
        OptimalPla {
            eps: eps.min(MAX_FIT_EPS) as i64,
            upper: Vec::with_capacity(64),
            lower: Vec::with_capacity(64),
            upper_start: 0,
            lower_start: 0,
            points: 0,
            first_x: 0,
            last_x: 0,
            rect: [Point::default(); 4],
        }
    }

    /// Starts a new segment of tolerance `eps` (clamped to [`MAX_FIT_EPS`]), keeping the
    /// allocations.
    pub fn reset(&mut self, eps: u64) {
        self.eps = eps.min(MAX_FIT_EPS) as i64;
        self.points = 0;
        self.upper.clear();
        self.lower.clear();
        self.upper_start = 0;
        self.lower_start = 0;
    }

    /// Points added since the last reset (all of them feasible together).
    pub fn len(&self) -> usize {
        self.points
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// Adds `(x, y)`, x strictly above every x added since the last reset. Returns false, and
    /// leaves the model unchanged, when no line is within `eps` of all points including this one.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "hot loop; upper_start < upper.len() and lower_start < lower.len() once two \
                  points are in (the hull truncations keep at least one point past the start)"
    )]
    pub fn add_point(&mut self, x: u64, y: u32) -> bool {
        debug_assert!(self.points == 0 || x > self.last_x, "x must increase");
        if self.points == 0 {
            self.first_x = x;
        }
        let dx = x.wrapping_sub(self.first_x);
        let y = i64::from(y);
        let p1 = Point {
            x: dx,
            y: y + self.eps,
        };
        // Positions are never negative and neither is a stored intercept: a lower point below 0
        // is lifted to 0 (as PGM does for unsigned positions), so every feasible line stays
        // non-negative on the segment and its integer intercept is representable.
        let p2 = Point {
            x: dx,
            y: (y - self.eps).max(0),
        };
        match self.points {
            0 => {
                self.rect[0] = p1;
                self.rect[1] = p2;
                self.upper.push(p1);
                self.lower.push(p2);
            }
            1 => {
                self.rect[2] = p2;
                self.rect[3] = p1;
                self.upper.push(p1);
                self.lower.push(p2);
            }
            _ => {
                let slope1 = Slope::between(self.rect[0], self.rect[2]);
                let slope2 = Slope::between(self.rect[1], self.rect[3]);
                let below_min_line = Slope::between(self.rect[2], p1).lt(slope1);
                let above_max_line = Slope::between(self.rect[3], p2).gt(slope2);
                if below_min_line || above_max_line {
                    return false;
                }

                let pushed_p1 = Slope::between(self.rect[1], p1).lt(slope2);
                if pushed_p1 {
                    // The line of greatest slope now passes through p1 and the lower hull point
                    // of least slope towards p1 (the hull is convex: scan while it decreases).
                    let mut min = Slope::between(self.lower[self.lower_start], p1);
                    let mut min_i = self.lower_start;
                    for i in self.lower_start + 1..self.lower.len() {
                        let val = Slope::between(self.lower[i], p1);
                        if val.gt(min) {
                            break;
                        }
                        min = val;
                        min_i = i;
                    }
                    self.rect[1] = self.lower[min_i];
                    self.rect[3] = p1;
                    self.lower_start = min_i;

                    let mut end = self.upper.len();
                    while end >= self.upper_start + 2
                        && cross(self.upper[end - 2], self.upper[end - 1], p1) <= 0
                    {
                        end -= 1;
                    }
                    self.upper.truncate(end);
                    self.upper.push(p1);
                }

                if Slope::between(self.rect[0], p2).gt(slope1) {
                    // Symmetric: the line of least slope through p2 and the upper hull. The scan
                    // stops before p1 if the branch above just pushed it (it is right above p2,
                    // never the tangent point; upper_start is below its index).
                    let mut max = Slope::between(self.upper[self.upper_start], p2);
                    let mut max_i = self.upper_start;
                    let scan_end = self.upper.len() - usize::from(pushed_p1);
                    for i in self.upper_start + 1..scan_end {
                        let val = Slope::between(self.upper[i], p2);
                        if val.lt(max) {
                            break;
                        }
                        max = val;
                        max_i = i;
                    }
                    self.rect[0] = self.upper[max_i];
                    self.rect[2] = p2;
                    self.upper_start = max_i;

                    let mut end = self.lower.len();
                    while end >= self.lower_start + 2
                        && cross(self.lower[end - 2], self.lower[end - 1], p2) >= 0
                    {
                        end -= 1;
                    }
                    self.lower.truncate(end);
                    self.lower.push(p2);
                }
            }
        }
        self.last_x = x;
        self.points += 1;
        true
    }

    /// The exact range of feasible slopes `[min, max]` as (dy, dx) pairs with dx > 0, or `None`
    /// while fewer than two points are in (any slope fits).
    #[cfg(test)]
    pub fn slope_range(&self) -> Option<((i128, i128), (i128, i128))> {
        (self.points >= 2).then(|| {
            let lo = Slope::between(self.rect[0], self.rect[2]);
            let hi = Slope::between(self.rect[1], self.rect[3]);
            (
                (i128::from(lo.dy), i128::from(lo.dx)),
                (i128::from(hi.dy), i128::from(hi.dx)),
            )
        })
    }

    /// The feasible slope range as floats, restricted to non-negative slopes (a staircase
    /// always admits a non-negative slope when it admits any line); `None` before two points.
    fn slope_bounds(&self) -> Option<(f64, f64)> {
        if self.points < 2 {
            return None;
        }
        let lo = Slope::between(self.rect[0], self.rect[2]).to_f64().max(0.0);
        let hi = Slope::between(self.rect[1], self.rect[3]).to_f64();
        (hi > 0.0 && hi.is_finite() && lo.is_finite()).then_some((lo, hi))
    }

    /// The slope proposed for the segment: the f32 nearest to the middle of the feasible range
    /// (as PGM does), 0 when the range holds no positive slope or fewer than two points are in.
    pub fn slope(&self) -> f64 {
        match self.slope_bounds() {
            Some((lo, hi)) => f64::from(to_f32(lo + (hi - lo) / 2.0)),
            None => 0.0,
        }
    }

    /// Fallback proposals for when `finalize` cannot verify the whole segment with [`slope`]
    /// (possible only when the feasible range is narrower than about one f32 step): the f32
    /// neighbours of the proposal and the f32s nearest to both ends of the range.
    ///
    /// [`slope`]: OptimalPla::slope
    pub fn fallback_slopes(&self) -> [f64; 4] {
        let Some((lo, hi)) = self.slope_bounds() else {
            return [0.0; 4];
        };
        let s = to_f32(lo + (hi - lo) / 2.0);
        let up = f32::from_bits(s.to_bits().saturating_add(1));
        let down = if s > 0.0 {
            f32::from_bits(s.to_bits() - 1)
        } else {
            0.0
        };
        [up, down, to_f32(hi), to_f32(lo)].map(|v| if v.is_finite() { f64::from(v) } else { 0.0 })
    }
}

/// The f32 nearest to a non-negative slope, capped at `f32::MAX`.
fn to_f32(v: f64) -> f32 {
    v.clamp(0.0, f64::from(f32::MAX)) as f32
}
