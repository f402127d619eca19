//! PGM-index (Ferragina & Vinciguerra, VLDB 2020): optimal piecewise-linear segments over the
//! lower-bound staircase, indexed recursively by more optimal segments.
//!
//! Structure: `levels[0]` (the leaf) holds segments of error `eps = eps_for_boundary(B)` over the
//! staircase points of the keys. `levels[i + 1]` holds segments of error `epsilon_recursive` over
//! the points `(levels[i].keys[j], j)`, and the last level (the root) is a single segment. Every
//! level is the greedy segmentation of the exact streaming algorithm of [`optimal`] (minimal
//! for lines within the error and non-negative, as stored intercepts are unsigned), stored as
//! [`Segments`] verified by `finalize` (see `fit.rs` and `segment.rs`). Errors above
//! [`MAX_FIT_EPS`] (= `MAX_KEYS`) are clamped to it for fitting and for the search windows: a
//! window that wide already spans every position.
//!
//! Search goes top-down. At an internal level the segment predicts a position in the level below;
//! [`route_near`] then finds the last segment of that level whose first key is `<= q` in a window
//! around the prediction, and widens the window (galloping) whenever its edges show the answer is
//! outside, so the route is exactly `partition_point(keys <= q) - 1` (floor 0) whatever the
//! floats of the internal models did. The leaf segment answers `Segments::search`.
//!
//! Invariants (checked by `decode` for untrusted bytes): the levels are empty iff n = 0; segment
//! counts strictly decrease level by level and the last level has exactly one segment; the first
//! key of every level equals the leaf's first key; the leaf has at most n segments; `eps` is
//! `eps_for_boundary(B)` and `epsilon_recursive >= 1`. Correctness of `search` rests only on the
//! leaf segments (verified by `finalize` at build), never on internal models.
//!
//! Payload (after the common header, little-endian):
//!
//! ```text
//! u64 eps                (the leaf error, = eps_for_boundary(B))
//! u64 epsilon_recursive  (the internal levels' error)
//! u64 L                  (number of levels, 0 iff n = 0)
//! L x Segments           (Segments::write, leaf first, root last)
//! ```
//!
//! Immutable once built; any thread may search.

mod fit;
mod optimal;
#[cfg(test)]
mod tests;

pub use fit::{Staircase, fit_level, fit_points};
pub use optimal::{MAX_FIT_EPS, OptimalPla};

use crate::bound::{Bound, eps_for_boundary};
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::points::MAX_KEYS;
use crate::segment::Segments;

#[derive(Debug, Clone)]
pub struct Pgm {
    n: u64,
    boundary: u64,
    /// The leaf error as stored, `eps_for_boundary(boundary)`.
    eps: u64,
    /// The internal levels' error as stored (the parameter).
    eps_rec: u64,
    /// The errors the levels were fitted with (the stored ones clamped to `MAX_FIT_EPS`).
    eps_fit: u64,
    eps_rec_fit: u64,
    /// Leaf first, root (one segment) last; empty iff n = 0.
    levels: Vec<Segments>,
}

/// The last index of `keys` whose key is `<= q` (0 if none), searched around the prediction `p`
/// of a model of error `eps`: `[p - eps - 1, p + eps + 2)`, widened by galloping when the key at
/// an edge shows the answer lies outside. Exact for any `p`.
#[inline]
pub fn route_near(keys: &[u64], q: u64, p: u64, eps: u64) -> usize {
    let len = keys.len();
    let Some(last) = len.checked_sub(1) else {
        return 0;
    };
    let p = usize::try_from(p).unwrap_or(usize::MAX).min(last);
    let eps = usize::try_from(eps).unwrap_or(usize::MAX);
    let mut lo = p.saturating_sub(eps.saturating_add(1));
    let mut hi = p.saturating_add(eps).saturating_add(2).min(len);
    let mut step = eps.saturating_add(2);
    // Invariant after the loops: (lo == 0 or keys[lo] <= q) and (hi == len or keys[hi] > q).
    while lo > 0 && keys.get(lo).is_some_and(|&k| k > q) {
        hi = lo;
        lo = lo.saturating_sub(step);
        step = step.saturating_mul(2);
    }
    while hi < len && keys.get(hi).is_some_and(|&k| k <= q) {
        lo = hi;
        hi = hi.saturating_add(step).min(len);
        step = step.saturating_mul(2);
    }
    // The window is a few keys wide (2 * eps + 3 at first): a branch-free count beats a
    // binary search whose every step is a mispredicted branch.
    let count = keys.get(lo..hi).map_or(0, |w| {
        if w.len() <= 64 {
            w.iter().map(|&k| usize::from(k <= q)).sum::<usize>()
        } else {
            w.partition_point(|&k| k <= q)
        }
    });
    (lo + count).saturating_sub(1)
}

/// Segments whose keys fit a 32 KiB L1 data cache: a level this small is binary-searched.
pub const L1_LEVEL_SEGMENTS: usize = 4096;

impl Pgm {
    /// Builds over validated keys.
    pub fn build(keys: &[u64], params: &Params) -> Result<Pgm> {
        let eps = eps_for_boundary(params.boundary);
        let eps_rec = params.pgm_epsilon_recursive;
        let (eps_fit, eps_rec_fit) = (eps.min(MAX_FIT_EPS), eps_rec.min(MAX_FIT_EPS));
        let levels = if keys.is_empty() {
            Vec::new()
        } else {
            fit::fit_levels(keys, eps_fit, eps_rec_fit)
        };
        Ok(Pgm {
            n: keys.len() as u64,
            boundary: params.boundary,
            eps,
            eps_rec,
            eps_fit,
            eps_rec_fit,
            levels,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<Pgm> {
        let n = h.key_count;
        if n > MAX_KEYS {
            return Err(corrupt(format!("key count {n} above {MAX_KEYS}")));
        }
        let eps = r.u64()?;
        let expected = eps_for_boundary(h.boundary);
        if eps != expected {
            return Err(corrupt(format!(
                "pgm eps {eps} does not match the boundary {} (expected {expected})",
                h.boundary
            )));
        }
        let eps_rec = r.u64()?;
        if eps_rec < 1 {
            return Err(corrupt("pgm epsilon_recursive is 0"));
        }
        let count = r.count(8, "pgm level")?;
        if (count == 0) != (n == 0) {
            return Err(corrupt(format!("{count} pgm levels for {n} keys")));
        }
        let mut levels: Vec<Segments> = Vec::with_capacity(count);
        for i in 0..count {
            let below = levels.last().map_or(n, |l| l.len() as u64);
            let level = Segments::read(r, below)?;
            if level.is_empty() {
                return Err(corrupt(format!("pgm level {i} is empty")));
            }
            if let Some(prev) = levels.last() {
                if level.len() >= prev.len() {
                    return Err(corrupt(format!(
                        "pgm level {i} has {} segments over {} below",
                        level.len(),
                        prev.len()
                    )));
                }
                if level.keys.first() != prev.keys.first() {
                    return Err(corrupt(format!(
                        "pgm level {i} does not start at the first key of the level below"
                    )));
                }
            } else if level.len() as u64 > n {
                return Err(corrupt(format!(
                    "{} leaf segments for {n} keys",
                    level.len()
                )));
            }
            levels.push(level);
        }
        if levels.last().is_some_and(|root| root.len() != 1) {
            return Err(corrupt("the pgm root level has more than one segment"));
        }
        Ok(Pgm {
            n,
            boundary: h.boundary,
            eps,
            eps_rec,
            eps_fit: eps.min(MAX_FIT_EPS),
            eps_rec_fit: eps_rec.min(MAX_FIT_EPS),
            levels,
        })
    }

    /// Segments per level, leaf first.
    pub fn segments_per_level(&self) -> Vec<u64> {
        self.levels.iter().map(|l| l.len() as u64).collect()
    }

    /// The leaf segment of `q`: the top-down descent through the internal levels.
    ///
    /// The descent starts at the widest level of at most `L1_LEVEL_SEGMENTS` segments with a
    /// binary search of its keys (exactly what descending the tiny levels above it would find,
    /// without their chains of dependent predictions), then predicts its way down.
    #[inline]
    pub fn leaf_route(&self, q: u64) -> usize {
        let start = self
            .levels
            .iter()
            .position(|l| l.len() <= L1_LEVEL_SEGMENTS)
            .unwrap_or(self.levels.len().saturating_sub(1));
        // Levels 0 (the leaf segments) up to the start; none only when there is no level.
        let Some(descent) = self.levels.get(..=start) else {
            return 0;
        };
        let Some(top) = descent.last() else {
            return 0;
        };
        let mut j = top.route(q);
        for pair in descent.windows(2).rev() {
            if let [below, level] = pair {
                let p = level.predict(j, q, below.len() as u64);
                j = route_near(&below.keys, q, p, self.eps_rec_fit);
            }
        }
        j
    }

    /// The leaf segment of `q` by a binary search of the leaf keys alone (the baseline the
    /// `pgm_route` example compares the descent with).
    pub fn leaf_binary(&self, q: u64) -> usize {
        self.levels.first().map_or(0, |l| l.route(q))
    }

    #[cfg(test)]
    fn levels(&self) -> &[Segments] {
        &self.levels
    }
}

impl LearnedIndex for Pgm {
    fn family(&self) -> Family {
        Family::Pgm
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        let Some(leaf) = self.levels.first() else {
            return Bound::default();
        };
        leaf.search(self.leaf_route(q), q, self.eps_fit, self.n)
    }

    fn payload_len(&self) -> u64 {
        24 + self.levels.iter().map(Segments::encoded_len).sum::<u64>()
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u64(self.eps);
        out.put_u64(self.eps_rec);
        out.put_u64(self.levels.len() as u64);
        self.levels.iter().for_each(|l| l.write(out));
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            models: self.levels.first().map_or(0, |l| l.len() as u64),
            details: vec![
                ("epsilon", StatValue::U64(self.eps)),
                ("epsilon_recursive", StatValue::U64(self.eps_rec)),
                (
                    "segments_per_level",
                    StatValue::List(self.segments_per_level()),
                ),
                ("levels", StatValue::U64(self.levels.len() as u64)),
            ],
        }
    }
}
