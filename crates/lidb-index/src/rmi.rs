//! Recursive model index, two layers as in RMI Labs / analysis-rmi (Maltry & Dittrich, 2022): a
//! root model routes a query to one of L linear leaves, fitted by least squares over the
//! staircase points routed to them.
//!
//! Root: `Params::rmi_root` Linear (the linear spline from the first to the last point) or Cubic
//! (the analysis-rmi cubic spline: a Hermite cubic through the normalised CDF with end slopes
//! limited by the Fritsch–Carlson condition). Both are evaluated as `((A t + B) t + C) t` with
//! `t = min(1, (q - min) / (max - min))` in f64 and floored to a leaf index. A cubic that is not
//! monotone (analytically over [0, 1], or at any staircase point) falls back to linear; stats
//! report which was used.
//!
//! Leaves: the points are assigned to leaves by the root, made monotone (a running maximum, a
//! no-op for a monotone root), so each leaf holds a contiguous run of points. A leaf stores its
//! anchor (first point's x), a slope and intercept (f32, relative to the anchor and to `start`,
//! the y of its first point), `start`, and the REALISED errors of the stored predictor over its
//! points: `err_lo = max(y - pred)`, `err_hi = max(pred - y)`. The predictor is
//! `floor(start + icpt + slope * (q - anchor))` clamped to `[start_j, start_{j+1}]` (`start_L = n`);
//! the answer is `[pred - err_hi, pred + err_lo + 2)`. An empty leaf copies the anchor and start
//! of the next non-empty leaf; trailing empty leaves are dropped.
//!
//! Routing guard (why correctness does not rest on float monotonicity): after the root, search
//! checks the anchors of the routed leaf and its successor and, when q is not between them,
//! takes the last leaf whose anchor is `<= q` (leaf 0 for q below every key) by binary search
//! over the anchors. For a monotone root this happens only for queries routed to empty leaves.
//! The leaf found is non-empty (empty leaves share the anchor of the next non-empty one), and
//! `q` lies between its points or after its last point and before the next leaf's anchor, where
//! by the staircase argument (points.rs) `lower_bound(q)` is within `[pred - err_hi,
//! pred + err_lo + 1]`: between two points the predictor is monotone and the answer is the
//! right point's y, at most one above the left one's; after the last point the answer is
//! `start_{j+1}`, which caps the prediction and is at most the last y plus one.
//!
//! Leaf count: L starts at `max(1, m / max(256, 4B))` for m points and doubles while some
//! leaf's window `err_lo + err_hi + 2` exceeds B, up to L <= m and while the leaves alone
//! (24 bytes each) would still be smaller than the best layout found; the smallest layout tried
//! is kept. Leaves still over B become hybrid leaves (as in Kraska et al., a model replaced by a
//! B-tree level): the last key of every block of B positions of the leaf's position range
//! `[start_j, start_{j+1})`, answering exactly one block, so `hi - lo <= B` always holds.
//!
//! Payload: `u32 root_kind, u64 min_key, f64 inv_range, f64 A, f64 B, f64 C, u64 L, L x u64
//! anchor, L x f32 slope, L x f32 icpt, L x u32 start, L x u16 err_lo, L x u16 err_hi, u64 h,
//! h x u32 hybrid leaf, (h + 1) x u32 fence offset, u64 f, f x u64 fence` (24 bytes per leaf).

use crate::bound::Bound;
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, RmiRoot, StatValue};
use crate::points::{Points, staircase};

/// Error value marking a hybrid leaf (in both `err_lo` and `err_hi`).
const HYBRID: u16 = u16::MAX;
/// Encoded bytes per leaf.
pub const LEAF_BYTES: u64 = 8 + 4 + 4 + 4 + 2 + 2;

/// The root: `leaf = floor(((A t + B) t + C) t)` with `t = min(1, (q - min) * inv_range)`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Root {
    kind: u32,
    min_key: u64,
    inv_range: f64,
    a: f64,
    b: f64,
    c: f64,
}

impl Root {
    #[inline]
    fn eval(&self, q: u64) -> f64 {
        let t = (q.saturating_sub(self.min_key) as f64 * self.inv_range).min(1.0);
        ((self.a * t + self.b) * t + self.c) * t
    }

    /// The root with its output scaled to `leaves` leaves.
    fn scaled(&self, leaves: f64) -> Root {
        Root {
            a: self.a * leaves,
            b: self.b * leaves,
            c: self.c * leaves,
            ..*self
        }
    }
}

/// Cubic of the unit interval with `h(0) = 0`, `h(1) = 1`, end slopes `m1`, `m2`.
fn hermite(m1: f64, m2: f64) -> (f64, f64, f64) {
    (m1 + m2 - 2.0, 3.0 - 2.0 * m1 - m2, m1)
}

/// Whether `h'(t) = 3a t^2 + 2b t + c >= 0` on [0, 1].
fn monotone_on_unit(a: f64, b: f64, c: f64) -> bool {
    let d = |t: f64| (3.0 * a * t + 2.0 * b) * t + c;
    if !(d(0.0) >= 0.0 && d(1.0) >= 0.0) {
        return false;
    }
    if a != 0.0 {
        let v = -b / (3.0 * a);
        if v > 0.0 && v < 1.0 && d(v) < 0.0 {
            return false;
        }
    }
    true
}

/// Fits the unscaled root (output in [0, 1]). Returns the linear spline unless a cubic is asked
/// for and is monotone over the key range.
fn fit_root(p: &Points, kind: RmiRoot) -> Root {
    let (Some(&x0), Some(&xl), Some(&yl)) = (p.xs.first(), p.xs.last(), p.ys.last()) else {
        return Root::default();
    };
    let range = xl - x0;
    let inv_range = if range > 0 { 1.0 / range as f64 } else { 0.0 };
    let linear = Root {
        kind: 0,
        min_key: x0,
        inv_range,
        a: 0.0,
        b: 0.0,
        c: 1.0,
    };
    let m = p.len();
    if kind == RmiRoot::Linear || m < 3 || range == 0 || yl == 0 {
        return linear;
    }
    let norm = |i: usize| {
        let x = p.xs.get(i).map_or(0.0, |&x| (x - x0) as f64 * inv_range);
        let y = p.ys.get(i).map_or(0.0, |&y| f64::from(y) / f64::from(yl));
        (x, y)
    };
    let (sx1, sy1) = norm(1);
    let (sxp, syp) = norm(m - 2);
    let mut m1 = if sx1 > 0.0 { sy1 / sx1 } else { 1.0 };
    let mut m2 = if sxp < 1.0 {
        (1.0 - syp) / (1.0 - sxp)
    } else {
        1.0
    };
    if !(m1.is_finite() && m2.is_finite()) {
        return linear;
    }
    (m1, m2) = (m1.max(0.0), m2.max(0.0));
    let r2 = m1 * m1 + m2 * m2;
    if r2 > 9.0 {
        let tau = 3.0 / r2.sqrt();
        (m1, m2) = (m1 * tau, m2 * tau);
    }
    let (a, b, c) = hermite(m1, m2);
    if !monotone_on_unit(a, b, c) {
        return linear;
    }
    let cubic = Root {
        kind: 1,
        a,
        b,
        c,
        ..linear
    };
    // The routing must also be monotone as evaluated, at every point.
    let mut last = f64::NEG_INFINITY;
    for &x in &p.xs {
        let v = cubic.eval(x);
        if v.is_nan() || v < last {
            return linear;
        }
        last = v;
    }
    cubic
}

/// The stored leaf predictor, clamped to `[start, cap]`.
#[inline]
fn leaf_eval(anchor: u64, slope: f32, icpt: f32, start: u32, cap: u64, q: u64) -> u64 {
    let dx = q.saturating_sub(anchor) as f64;
    let p = f64::from(start) + f64::from(icpt) + f64::from(slope) * dx;
    (p as u64).clamp(u64::from(start), cap.max(u64::from(start)))
}

/// The leaves of one layout (structure of arrays) and the hybrid leaves' fences.
#[derive(Debug, Clone, Default, PartialEq)]
struct Leaves {
    anchors: Vec<u64>,
    slopes: Vec<f32>,
    icpts: Vec<f32>,
    starts: Vec<u32>,
    err_lo: Vec<u16>,
    err_hi: Vec<u16>,
    hybrid: Vec<u32>,
    fence_offsets: Vec<u32>,
    fences: Vec<u64>,
}

impl Leaves {
    fn len(&self) -> usize {
        self.anchors.len()
    }

    /// The position range cap of leaf j: the next leaf's start, or n.
    #[inline]
    fn cap(&self, j: usize, n: u64) -> u64 {
        self.starts.get(j + 1).map_or(n, |&s| u64::from(s))
    }

    fn push(&mut self, anchor: u64, slope: f32, icpt: f32, start: u32, lo: u16, hi: u16) {
        self.anchors.push(anchor);
        self.slopes.push(slope);
        self.icpts.push(icpt);
        self.starts.push(start);
        self.err_lo.push(lo);
        self.err_hi.push(hi);
    }

    /// Fences a hybrid leaf would take at boundary b.
    fn fence_count(&self, j: usize, n: u64, b: u64) -> u64 {
        let start = self.starts.get(j).map_or(0, |&s| u64::from(s));
        self.cap(j, n).saturating_sub(start).div_ceil(b)
    }

    fn encoded_len(&self) -> u64 {
        8 + LEAF_BYTES * self.len() as u64
            + 8
            + 4 * self.hybrid.len() as u64
            + 4 * (self.hybrid.len() as u64 + 1)
            + 8
            + 8 * self.fences.len() as u64
    }
}

/// Fits the leaves for `l` leaves under `root` (unscaled). Hybrid leaves are listed, not fenced.
fn fit_leaves(p: &Points, n: u64, b: u64, root: &Root, l: usize) -> Leaves {
    let scaled = root.scaled(l as f64);
    let last = l.saturating_sub(1);
    let mut assign = Vec::with_capacity(p.len());
    let mut prev = 0usize;
    for &x in &p.xs {
        // `as usize` floors and saturates (NaN gives 0); the running maximum keeps runs contiguous.
        let j = (scaled.eval(x) as usize).min(last).max(prev);
        assign.push(j as u32);
        prev = j;
    }
    let mut out = Leaves::default();
    let mut i = 0usize;
    while i < p.len() {
        let j = assign.get(i).map_or(0, |&j| j as usize);
        let mut e = i + 1;
        while assign.get(e).is_some_and(|&k| k as usize == j) {
            e += 1;
        }
        let (Some(&anchor), Some(&start)) = (p.xs.get(i), p.ys.get(i)) else {
            break;
        };
        // Empty leaves before this one take its anchor and start.
        while out.len() < j {
            out.push(anchor, 0.0, 0.0, start, 0, 0);
        }
        let cap = p.ys.get(e).map_or(n, |&y| u64::from(y));
        let xs = p.xs.get(i..e).unwrap_or_default();
        let ys = p.ys.get(i..e).unwrap_or_default();
        let (slope, icpt) = least_squares(xs, ys, anchor, start);
        let (mut lo, mut hi) = (0u64, 0u64);
        for (&x, &y) in xs.iter().zip(ys) {
            let pred = leaf_eval(anchor, slope, icpt, start, cap, x);
            let y = u64::from(y);
            lo = lo.max(y.saturating_sub(pred));
            hi = hi.max(pred.saturating_sub(y));
        }
        let fits = lo < u64::from(HYBRID) && hi < u64::from(HYBRID) && lo + hi + 2 <= b;
        if fits {
            out.push(anchor, slope, icpt, start, lo as u16, hi as u16);
        } else {
            out.hybrid.push(out.len() as u32);
            out.push(anchor, 0.0, 0.0, start, HYBRID, HYBRID);
        }
        i = e;
    }
    out
}

/// Least-squares line through the points, relative to `(anchor, start)`; slope clamped to >= 0.
fn least_squares(xs: &[u64], ys: &[u32], anchor: u64, start: u32) -> (f32, f32) {
    let k = xs.len() as f64;
    let dx = |x: u64| (x - anchor) as f64;
    let dy = |y: u32| f64::from(y - start);
    let mx = xs.iter().map(|&x| dx(x)).sum::<f64>() / k;
    let my = ys.iter().map(|&y| dy(y)).sum::<f64>() / k;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(ys) {
        let (u, v) = (dx(x) - mx, dy(y) - my);
        sxy += u * v;
        sxx += u * u;
    }
    let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let slope = if slope.is_finite() { slope } else { 0.0 };
    let slope = slope.min(f64::from(f32::MAX)) as f32;
    let icpt = my - f64::from(slope) * mx;
    let icpt = if icpt.is_finite() { icpt as f32 } else { 0.0 };
    (slope, icpt)
}

/// Adds the fences of every hybrid leaf.
fn add_fences(leaves: &mut Leaves, keys: &[u64], n: u64, b: u64) {
    leaves.fence_offsets = vec![0];
    for &j in &leaves.hybrid {
        let j = j as usize;
        let start = leaves.starts.get(j).map_or(0, |&s| u64::from(s));
        let cap = leaves.cap(j, n);
        let mut end = start;
        while end < cap {
            end = end.saturating_add(b).min(cap);
            leaves
                .fences
                .push(keys.get(end as usize - 1).copied().unwrap_or(u64::MAX));
        }
        leaves.fence_offsets.push(leaves.fences.len() as u32);
    }
}

#[derive(Debug, Clone)]
pub struct Rmi {
    n: u64,
    boundary: u64,
    root: Root,
    leaves: Leaves,
}

impl Rmi {
    pub fn build(keys: &[u64], params: &Params) -> Result<Rmi> {
        let n = keys.len() as u64;
        let b = params.boundary;
        let p = staircase(keys);
        let m = p.len();
        let root = fit_root(&p, params.rmi_root);
        let mut l = (m / (4 * b.min(1 << 40) as usize).max(256)).max(1);
        let mut best: Option<(u64, usize, Leaves)> = None;
        if m > 0 {
            loop {
                let leaves = fit_leaves(&p, n, b, &root, l);
                let fences: u64 = (0..leaves.len())
                    .filter(|&j| leaves.err_lo.get(j) == Some(&HYBRID))
                    .map(|j| leaves.fence_count(j, n, b))
                    .sum();
                let size = leaves.encoded_len() + 8 * fences;
                let all_fit = leaves.hybrid.is_empty();
                if best.as_ref().is_none_or(|(s, _, _)| size < *s) {
                    best = Some((size, l, leaves));
                }
                let best_size = best.as_ref().map_or(u64::MAX, |(s, _, _)| *s);
                let next = l.saturating_mul(2);
                if all_fit || next > m || LEAF_BYTES * next as u64 >= best_size {
                    break;
                }
                l = next;
            }
        }
        let (l, mut leaves) = best.map_or((1, Leaves::default()), |(_, l, v)| (l, v));
        add_fences(&mut leaves, keys, n, b);
        Ok(Rmi {
            n,
            boundary: b,
            root: root.scaled(l as f64),
            leaves,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<Rmi> {
        let n = h.key_count;
        let root = Root {
            kind: r.u32()?,
            min_key: r.u64()?,
            inv_range: r.f64()?,
            a: r.f64()?,
            b: r.f64()?,
            c: r.f64()?,
        };
        if root.kind > 1 {
            return Err(corrupt(format!("unknown rmi root kind {}", root.kind)));
        }
        let coeffs = [root.inv_range, root.a, root.b, root.c];
        if coeffs.iter().any(|v| !v.is_finite()) || root.inv_range < 0.0 {
            return Err(corrupt("rmi root coefficients are not finite"));
        }
        let len = r.count(LEAF_BYTES as usize, "rmi leaf")?;
        let mut lv = Leaves {
            anchors: r.u64_vec(len)?,
            slopes: r.f32_vec(len)?,
            icpts: r.f32_vec(len)?,
            starts: r.u32_vec(len)?,
            err_lo: (0..len).map(|_| r.u16()).collect::<Result<_>>()?,
            err_hi: (0..len).map(|_| r.u16()).collect::<Result<_>>()?,
            ..Leaves::default()
        };
        let hybrids = r.count(8, "hybrid leaf")?;
        lv.hybrid = r.u32_vec(hybrids)?;
        lv.fence_offsets = r.u32_vec(hybrids + 1)?;
        let fences = r.count(8, "fence")?;
        lv.fences = r.u64_vec(fences)?;
        validate(&lv, n, h.boundary)?;
        Ok(Rmi {
            n,
            boundary: h.boundary,
            root,
            leaves: lv,
        })
    }

    /// The leaf for q: the root's guess, moved to the last leaf whose anchor is `<= q` (or 0).
    #[inline]
    fn route(&self, q: u64) -> usize {
        let anchors = &self.leaves.anchors;
        let last = anchors.len().saturating_sub(1);
        let j = (self.root.eval(q) as usize).min(last);
        let below = j > 0 && anchors.get(j).is_some_and(|&a| a > q);
        let above = anchors.get(j + 1).is_some_and(|&a| a <= q);
        if below || above {
            // Empty leaves (which take the next leaf's anchor) and float jitter of the root land
            // here; a binary search over the anchors is bounded where a walk would not be.
            return anchors.partition_point(|&a| a <= q).saturating_sub(1);
        }
        j
    }

    #[cold]
    fn search_hybrid(&self, j: usize) -> (u64, u64, &[u64]) {
        let lv = &self.leaves;
        let start = lv.starts.get(j).map_or(0, |&s| u64::from(s));
        let cap = lv.cap(j, self.n);
        let Ok(h) = lv.hybrid.binary_search(&(j as u32)) else {
            return (start, cap, &[]);
        };
        let from = lv.fence_offsets.get(h).map_or(0, |&o| o as usize);
        let to = lv.fence_offsets.get(h + 1).map_or(0, |&o| o as usize);
        let fences = lv.fences.get(from..to);
        debug_assert!(
            fences.is_some(),
            "validate checked that the fence offsets are the running sums of the fence counts"
        );
        (start, cap, fences.unwrap_or_default())
    }

    /// Leaves and hybrid leaves.
    pub fn leaf_counts(&self) -> (usize, usize) {
        (self.leaves.len(), self.leaves.hybrid.len())
    }
}

/// Structural checks of decoded leaves; search never panics, these keep its answers in range.
fn validate(lv: &Leaves, n: u64, b: u64) -> Result<()> {
    let len = lv.len();
    if (n == 0) != (len == 0) {
        return Err(corrupt(format!("{len} rmi leaves for {n} keys")));
    }
    if lv.anchors.windows(2).any(|w| matches!(w, [a, b] if b < a)) {
        return Err(corrupt("rmi leaf anchors decrease"));
    }
    if lv.starts.windows(2).any(|w| matches!(w, [a, b] if b < a))
        || lv.starts.last().is_some_and(|&s| u64::from(s) > n)
    {
        return Err(corrupt("rmi leaf starts decrease or exceed the key count"));
    }
    if lv.slopes.iter().any(|s| !s.is_finite() || *s < 0.0)
        || lv.icpts.iter().any(|c| !c.is_finite())
    {
        return Err(corrupt("rmi leaf model is not finite"));
    }
    let marked: Vec<u32> = (0..len)
        .filter(|&j| lv.err_lo.get(j) == Some(&HYBRID) || lv.err_hi.get(j) == Some(&HYBRID))
        .map(|j| j as u32)
        .collect();
    if marked != lv.hybrid {
        return Err(corrupt("rmi hybrid leaf list does not match the leaves"));
    }
    let wide = (0..len).any(|j| {
        let lo = lv.err_lo.get(j).copied().unwrap_or(0);
        let hi = lv.err_hi.get(j).copied().unwrap_or(0);
        lo != HYBRID && u64::from(lo) + u64::from(hi) + 2 > b
    });
    if wide {
        return Err(corrupt("rmi leaf window exceeds the boundary"));
    }
    if lv.fence_offsets.first() != Some(&0)
        || lv.fence_offsets.last().map(|&o| o as usize) != Some(lv.fences.len())
    {
        return Err(corrupt("rmi fence offsets do not cover the fences"));
    }
    for (k, &j) in lv.hybrid.iter().enumerate() {
        let (from, to) = (lv.fence_offsets.get(k), lv.fence_offsets.get(k + 1));
        let (Some(&from), Some(&to)) = (from, to) else {
            return Err(corrupt("rmi fence offsets missing"));
        };
        if to < from || u64::from(to - from) != lv.fence_count(j as usize, n, b) {
            return Err(corrupt(format!(
                "rmi hybrid leaf {j} has a wrong fence count"
            )));
        }
        // Each range's length is checked and the last offset is the fence count, so the
        // ranges are the running sums of the counts and lie inside the fences.
        let f = lv.fences.get(from as usize..to as usize).ok_or_else(|| {
            corrupt(format!(
                "rmi hybrid leaf {j} fences [{from}, {to}) run past the {} fences",
                lv.fences.len()
            ))
        })?;
        if f.windows(2).any(|w| matches!(w, [a, b] if b < a)) {
            return Err(corrupt(format!("rmi hybrid leaf {j} fences decrease")));
        }
    }
    Ok(())
}

impl LearnedIndex for Rmi {
    fn family(&self) -> Family {
        Family::Rmi
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        let lv = &self.leaves;
        let n = self.n;
        let j = self.route(q);
        let (Some(&anchor), Some(&slope), Some(&icpt), Some(&start), Some(&err_lo), Some(&err_hi)) = (
            lv.anchors.get(j),
            lv.slopes.get(j),
            lv.icpts.get(j),
            lv.starts.get(j),
            lv.err_lo.get(j),
            lv.err_hi.get(j),
        ) else {
            return Bound { lo: 0, hi: 0 };
        };
        if err_lo == HYBRID {
            let (start, cap, fences) = self.search_hybrid(j);
            let k = fences.partition_point(|&f| f < q);
            if k == fences.len() {
                return Bound {
                    lo: cap.min(n),
                    hi: cap.saturating_add(1).min(n),
                };
            }
            let lo = start.saturating_add(k as u64 * self.boundary).min(cap);
            let hi = lo.saturating_add(self.boundary).min(cap);
            return Bound { lo, hi };
        }
        let pred = leaf_eval(anchor, slope, icpt, start, lv.cap(j, n), q);
        let hi = pred.saturating_add(u64::from(err_lo) + 2).min(n);
        let lo = pred.saturating_sub(u64::from(err_hi)).min(hi);
        Bound { lo, hi }
    }

    fn payload_len(&self) -> u64 {
        4 + 8 + 8 * 4 + self.leaves.encoded_len()
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        let (rt, lv) = (&self.root, &self.leaves);
        out.put_u32(rt.kind);
        out.put_u64(rt.min_key);
        [rt.inv_range, rt.a, rt.b, rt.c]
            .iter()
            .for_each(|&v| out.put_f64(v));
        out.put_u64(lv.len() as u64);
        lv.anchors.iter().for_each(|&v| out.put_u64(v));
        lv.slopes.iter().for_each(|&v| out.put_f32(v));
        lv.icpts.iter().for_each(|&v| out.put_f32(v));
        lv.starts.iter().for_each(|&v| out.put_u32(v));
        lv.err_lo
            .iter()
            .for_each(|&v| out.extend_from_slice(&v.to_le_bytes()));
        lv.err_hi
            .iter()
            .for_each(|&v| out.extend_from_slice(&v.to_le_bytes()));
        out.put_u64(lv.hybrid.len() as u64);
        lv.hybrid.iter().for_each(|&v| out.put_u32(v));
        lv.fence_offsets.iter().for_each(|&v| out.put_u32(v));
        out.put_u64(lv.fences.len() as u64);
        lv.fences.iter().for_each(|&v| out.put_u64(v));
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            models: self.leaves.len() as u64,
            details: vec![
                ("leaves", StatValue::U64(self.leaves.len() as u64)),
                (
                    "hybrid_leaves",
                    StatValue::U64(self.leaves.hybrid.len() as u64),
                ),
                ("root", StatValue::U64(u64::from(self.root.kind))),
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

    fn lognormal(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut k: Vec<u64> = (0..n)
            .map(|_| {
                let s: f64 = (0..12).map(|_| rng.r#gen::<f64>()).sum::<f64>() - 6.0;
                ((2.0 * s).exp() * 1e9) as u64
            })
            .collect();
        k.sort_unstable();
        k
    }

    fn check_all(keys: &[u64], idx: &Rmi, b: u64, extra: &[u64]) {
        let qs = keys
            .iter()
            .flat_map(|&k| [k.wrapping_sub(1), k, k.wrapping_add(1)])
            .chain(extra.iter().copied())
            .chain([0, u64::MAX]);
        for q in qs {
            let got = idx.search(q);
            assert!(holds(keys, q, got), "q={q} got={got:?}");
            assert!(got.width() <= b, "q={q} got={got:?} b={b}");
        }
    }

    fn with_root(b: u64, root: RmiRoot) -> Params {
        let mut p = Params::new(b);
        p.rmi_root = root;
        p
    }

    #[test]
    fn routing_is_monotone_for_both_roots() {
        let keys = lognormal(3, 50_000);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut qs: Vec<u64> = (0..20_000).map(|_| rng.r#gen()).collect();
        qs.extend_from_slice(&keys);
        qs.sort_unstable();
        for root in [RmiRoot::Linear, RmiRoot::Cubic] {
            let idx = Rmi::build(&keys, &with_root(16, root)).unwrap();
            let raw: Vec<f64> = qs.iter().map(|&q| idx.root.eval(q)).collect();
            assert!(raw.windows(2).all(|w| w[0] <= w[1]), "{root:?} root");
            let routed: Vec<usize> = qs.iter().map(|&q| idx.route(q)).collect();
            assert!(routed.windows(2).all(|w| w[0] <= w[1]), "{root:?} route");
        }
        // Lognormal is far from linear: the cubic is kept.
        let idx = Rmi::build(&keys, &with_root(16, RmiRoot::Cubic)).unwrap();
        assert_eq!(idx.root.kind, 1);
    }

    #[test]
    fn a_non_monotone_cubic_is_rejected() {
        // h'(t) = 3at^2 + 2bt + c with a large negative a dips below zero inside (0, 1).
        assert!(!monotone_on_unit(-10.0, 9.0, 0.5));
        let (a, b, c) = hermite(3.0, 0.0);
        assert!(monotone_on_unit(a, b, c));
    }

    #[test]
    fn leaf_growth_stops_on_easy_and_on_hard_data() {
        // A line fits at the first leaf count: no growth, no hybrid leaves.
        let keys: Vec<u64> = (0..200_000u64).map(|i| 1000 + 3 * i).collect();
        let idx = Rmi::build(&keys, &Params::new(4)).unwrap();
        assert_eq!(idx.leaf_counts(), (200_000 / 256, 0));
        check_all(&keys, &idx, 4, &[]);
        // Uniform random keys at B = 2 can never fit every leaf; growth stops at the cap.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut keys: Vec<u64> = (0..50_000).map(|_| rng.r#gen()).collect();
        keys.sort_unstable();
        let idx = Rmi::build(&keys, &Params::new(2)).unwrap();
        let (leaves, hybrid) = idx.leaf_counts();
        assert!(leaves <= keys.len() && hybrid > 0, "{leaves} {hybrid}");
        check_all(&keys, &idx, 2, &[]);
    }

    #[test]
    fn hybrid_leaves_keep_the_contract_on_a_dense_nonlinear_cluster() {
        // Two far clusters; the second is dense with a cubic inner distribution, so a monotone
        // root cannot split it and its leaves cannot be linear within B = 2.
        let mut keys: Vec<u64> = (0..2000u64).map(|i| i * 1_000_000).collect();
        keys.extend((0..20_000u64).map(|i| (1u64 << 62) + i * i * i / 1000));
        keys.extend([u64::MAX - 1, u64::MAX]);
        keys.sort_unstable();
        for (b, root) in [
            (2, RmiRoot::Linear),
            (2, RmiRoot::Cubic),
            (3, RmiRoot::Linear),
        ] {
            let idx = Rmi::build(&keys, &with_root(b, root)).unwrap();
            let (_, hybrid) = idx.leaf_counts();
            assert!(hybrid > 0, "b={b}");
            let mid: Vec<u64> = keys.windows(2).map(|w| w[0] + (w[1] - w[0]) / 2).collect();
            check_all(&keys, &idx, b, &mid);
        }
    }

    #[test]
    fn duplicates_and_extremes() {
        let mut keys = vec![0u64; 500];
        keys.extend(std::iter::repeat_n(77, 3000));
        keys.extend((0..3000).map(|i| u64::MAX - 3000 + i));
        keys.extend(std::iter::repeat_n(u64::MAX, 700));
        for b in [2u64, 4, 16, 64] {
            for root in [RmiRoot::Linear, RmiRoot::Cubic] {
                let idx = Rmi::build(&keys, &with_root(b, root)).unwrap();
                check_all(&keys, &idx, b, &[1, 76, 78, 1 << 63]);
            }
        }
    }
}
