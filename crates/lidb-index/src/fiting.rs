//! FITing-Tree (Galakatos et al., SIGMOD 2019): shrinking-cone segments under a B+-tree.
//!
//! Fitting, one segment at a time over the lower-bound staircase (`points.rs`): the segment is
//! anchored at its first point (x0, y0) and keeps the cone of slopes `[lo, hi]` of lines through
//! the anchor that hold every point so far within `eps`. A new point (x, y) whose own slope
//! `(y - y0) / (x - x0)` lies outside the cone closes the segment (it starts the next one);
//! otherwise it narrows the cone to `lo = max(lo, (y - eps - y0) / (x - x0))`,
//! `hi = min(hi, (y + eps - y0) / (x - x0))`. The segment's slope is the middle of the cone.
//! Slopes are exact fractions of i128 integers on deltas from the anchor; [`segment::finalize`]
//! stores and verifies the proposal (and may shorten it, which the exact cone makes rare).
//!
//! Routing descends a bulk-loaded static B+-tree over the segments' first keys with
//! `Params::fiting_fanout` keys per node (`fiting/btree.rs`). That tree is what costs FITing-Tree
//! its memory in the LSM evaluations, so it is part of the encoding and of `size_bytes`.
//!
//! Payload: fanout (u32), the segments ([`Segments::write`]), the tree's inner levels
//! ([`StaticTree::write`]). Built once, immutable afterwards; any thread may call any method.

mod btree;

pub use btree::StaticTree;

use crate::bound::{Bound, eps_for_boundary};
use crate::codec::{Header, PutLe, Reader};
use crate::error::Result;
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::plr::{Frac, MAX_FIT_EPS, cone_slope, read_segments};
use crate::points::staircase;
use crate::segment::Segments;

/// A FITing-Tree: shrinking-cone segments routed by a static B+-tree.
#[derive(Debug, Clone)]
pub struct FitingTree {
    n: u64,
    boundary: u64,
    eps: u64,
    fanout: u32,
    segs: Segments,
    tree: StaticTree,
}

/// Proposes the shrinking-cone segment starting at point `start`: `(end, slope)`.
pub(crate) fn propose(xs: &[u64], ys: &[u32], start: usize, eps: u64) -> (usize, f64) {
    let (Some(&x0), Some(&y0)) = (xs.get(start), ys.get(start)) else {
        return (start + 1, 0.0);
    };
    let e = i128::from(eps.min(MAX_FIT_EPS));
    let y0 = i128::from(y0);
    // The open cone: -inf and +inf as fractions over 0 compare correctly with `Frac::lt`.
    let mut lo = Frac { num: -1, den: 0 };
    let mut hi = Frac { num: 1, den: 0 };
    let mut end = xs.len();
    for (i, (&x, &y)) in xs.iter().zip(ys).enumerate().skip(start + 1) {
        let dx = i128::from(x - x0);
        let dy = i128::from(y) - y0;
        let p = Frac { num: dy, den: dx };
        if p.lt(lo) || hi.lt(p) {
            end = i;
            break;
        }
        let up = Frac {
            num: dy + e,
            den: dx,
        };
        let down = Frac {
            num: dy - e,
            den: dx,
        };
        if up.lt(hi) {
            hi = up;
        }
        if lo.lt(down) {
            lo = down;
        }
    }
    let slope = if hi.den == 0 {
        0.0 // a single point: the cone never closed
    } else {
        cone_slope(lo, hi)
    };
    (end, slope)
}

impl FitingTree {
    /// Builds over validated keys.
    pub fn build(keys: &[u64], params: &Params) -> Result<FitingTree> {
        let eps = eps_for_boundary(params.boundary);
        let pts = staircase(keys);
        let segs = Segments::fit_all(&pts.xs, &pts.ys, eps, |s| propose(&pts.xs, &pts.ys, s, eps));
        let tree = StaticTree::build(&segs.keys, params.fiting_fanout);
        Ok(FitingTree {
            n: keys.len() as u64,
            boundary: params.boundary,
            eps,
            fanout: params.fiting_fanout,
            segs,
            tree,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<FitingTree> {
        let fanout = r.u32()?;
        let segs = read_segments(r, h.key_count)?;
        let tree = StaticTree::read(r, &segs.keys, fanout)?;
        Ok(FitingTree {
            n: h.key_count,
            boundary: h.boundary,
            eps: eps_for_boundary(h.boundary),
            fanout,
            segs,
            tree,
        })
    }

    pub fn segments(&self) -> &Segments {
        &self.segs
    }
}

impl LearnedIndex for FitingTree {
    fn family(&self) -> Family {
        Family::Fiting
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        let j = self.tree.route(&self.segs.keys, q);
        self.segs.search(j, q, self.eps, self.n)
    }

    fn payload_len(&self) -> u64 {
        4 + self.segs.encoded_len() + self.tree.encoded_len()
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u32(self.fanout);
        self.segs.write(out);
        self.tree.write(out);
    }

    /// `tree_levels` counts the inner (separator) levels above the segments, `tree_bytes` their
    /// encoded bytes.
    fn stats(&self) -> IndexStats {
        let segments = self.segs.len() as u64;
        IndexStats {
            models: segments,
            details: vec![
                ("segments", StatValue::U64(segments)),
                (
                    "tree_levels",
                    StatValue::U64(self.tree.inner_levels() as u64),
                ),
                ("tree_bytes", StatValue::U64(self.tree.encoded_len())),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::plr::tests::{check_segments, key_sets, shortened};

    #[test]
    fn segments_hold_every_point_within_eps() {
        for seed in [1u64, 2, 3] {
            for (name, keys) in key_sets(seed, 20_000) {
                for b in [2u64, 3, 4, 8, 16, 64, 1000] {
                    let idx = FitingTree::build(&keys, &Params::new(b)).unwrap();
                    let ctx = format!("fiting {name} seed={seed} B={b}");
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
    fn tree_routing_equals_binary_search_over_built_segments() {
        for (name, keys) in key_sets(6, 50_000) {
            for fanout in [2u32, 3, 16, 64] {
                let mut p = Params::new(4);
                p.fiting_fanout = fanout;
                let idx = FitingTree::build(&keys, &p).unwrap();
                for &k in keys.iter().step_by(11) {
                    for q in [k.wrapping_sub(1), k, k.wrapping_add(1)] {
                        assert_eq!(
                            idx.tree.route(&idx.segs.keys, q),
                            idx.segs.route(q),
                            "{name} seed=6 fanout={fanout} q={q}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_cone_is_anchored_at_the_first_point() {
        // eps = 1 from (0, 0): (10, 1) gives [0, 0.2]; (20, 5) has slope 0.25 and is outside.
        assert_eq!(propose(&[0, 10, 20], &[0, 1, 5], 0, 1).0, 2);
        // (20, 3): slope 0.15 inside, narrows to [0.1, 0.2]; the middle is 0.15.
        let (end, slope) = propose(&[0, 10, 20], &[0, 1, 3], 0, 1);
        assert_eq!(end, 3);
        assert!((slope - 0.15).abs() < 1e-12, "{slope}");
    }

    #[test]
    fn the_tree_is_counted_in_the_size() {
        let keys: Vec<u64> = (0..100_000u64).map(|i| i * i).collect();
        let mut p = Params::new(2);
        let small = FitingTree::build(&keys, &p).unwrap();
        p.fiting_fanout = 2;
        let wide = FitingTree::build(&keys, &p).unwrap();
        assert_eq!(small.segs, wide.segs);
        assert!(wide.size_bytes() > small.size_bytes());
        assert_eq!(small.encode().len() as u64, small.size_bytes());
        let segs = small.segs.len() as u64;
        assert_eq!(
            small.size_bytes(),
            36 + 4 + 8 + 16 * segs + small.tree.encoded_len()
        );
    }
}
