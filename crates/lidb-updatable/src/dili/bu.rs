//! The BU-tree of DILI's first build phase: node boundaries found bottom-up by greedy merging.
//!
//! Level 0 cuts the sorted keys into runs of [`INITIAL_RUN`] keys and walks them left to right,
//! merging the next run into the current segment while one linear model over both costs no more
//! than two (the cost of a node is [`NODE_COST`] plus, per key, [`SEARCH_COST`] times
//! `log2(rmse + 1)`, the local search a linear model of that error leaves). Each higher level
//! does the same over the lower bounds of the level below (runs of two nodes), until one node
//! remains, or, as in the reference implementation, until a level above the first has at most
//! [`ROOT_MAX_CHILDREN`] nodes: those become the root's children. Only the lower bounds of every
//! level are kept: the DILI tree (built top-down in [`super`]) takes its fanouts from them.
//!
//! Fits are incremental: a segment keeps the moments of its (key offset, rank) points, and two
//! segments merge in O(1) by shifting the second's moments to the first's origin. Pure functions
//! of their input, called by the bulk load only.

/// Keys per initial level-0 run.
const INITIAL_RUN: usize = 8;
/// Cost of one more node (a model evaluation and a pointer to follow), in search steps.
const NODE_COST: f64 = 16.0;
/// Cost of one step of local search.
const SEARCH_COST: f64 = 1.0;
/// Most children the root takes directly once the levels above the leaves begin (the reference
/// implementation's 10,000).
const ROOT_MAX_CHILDREN: usize = 10_000;
/// Largest level-0 segment (bounds the leaf a single BU node may ask for).
const MAX_SEGMENT_KEYS: f64 = (1 << 20) as f64;

/// Least-squares moments of points (x = key - origin, y = rank - first rank).
#[derive(Debug, Clone, Copy)]
struct Moments {
    origin: u64,
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
    syy: f64,
}

impl Moments {
    fn of(keys: &[u64]) -> Moments {
        let origin = keys.first().copied().unwrap_or(0);
        let mut m = Moments {
            origin,
            n: 0.0,
            sx: 0.0,
            sy: 0.0,
            sxx: 0.0,
            sxy: 0.0,
            syy: 0.0,
        };
        for (i, &k) in keys.iter().enumerate() {
            let (x, y) = ((k - origin) as f64, i as f64);
            m.n += 1.0;
            m.sx += x;
            m.sy += y;
            m.sxx += x * x;
            m.sxy += x * y;
            m.syy += y * y;
        }
        m
    }

    /// `self` followed by `next` (whose keys are all larger) as one segment.
    fn merge(&self, next: &Moments) -> Moments {
        let dx = next.origin.saturating_sub(self.origin) as f64;
        let dy = self.n;
        let n = next.n;
        Moments {
            origin: self.origin,
            n: self.n + n,
            sx: self.sx + next.sx + n * dx,
            sy: self.sy + next.sy + n * dy,
            sxx: self.sxx + next.sxx + 2.0 * dx * next.sx + n * dx * dx,
            sxy: self.sxy + next.sxy + dy * next.sx + dx * next.sy + n * dx * dy,
            syy: self.syy + next.syy + 2.0 * dy * next.sy + n * dy * dy,
        }
    }

    /// Root mean squared rank error of the least-squares line.
    fn rmse(&self) -> f64 {
        if self.n < 2.0 {
            return 0.0;
        }
        let vxx = self.sxx - self.sx * self.sx / self.n;
        let vxy = self.sxy - self.sx * self.sy / self.n;
        let vyy = self.syy - self.sy * self.sy / self.n;
        let sse = if vxx > 0.0 {
            vyy - vxy * vxy / vxx
        } else {
            vyy
        };
        (sse.max(0.0) / self.n).sqrt()
    }

    fn cost(&self) -> f64 {
        NODE_COST + self.n * SEARCH_COST * (self.rmse() + 1.0).log2()
    }
}

/// Lower bounds of the segments of one level, by greedy merging of runs of `run` points.
fn merge_level(points: &[u64], run: usize) -> Vec<u64> {
    let mut bounds = Vec::new();
    let mut current: Option<Moments> = None;
    for chunk in points.chunks(run.max(1)) {
        let next = Moments::of(chunk);
        current = Some(match current {
            None => next,
            Some(cur) => {
                let merged = cur.merge(&next);
                if merged.n <= MAX_SEGMENT_KEYS && merged.cost() <= cur.cost() + next.cost() {
                    merged
                } else {
                    bounds.push(cur.origin);
                    next
                }
            }
        });
    }
    if let Some(cur) = current {
        bounds.push(cur.origin);
    }
    bounds
}

/// Lower bounds of every BU-tree level for `keys` (sorted, unique, non-empty), level 0 (the
/// leaves) first; the last level has one node.
pub(super) fn levels(keys: &[u64]) -> Vec<Vec<u64>> {
    let mut levels = vec![merge_level(keys, INITIAL_RUN)];
    while let Some(top) = levels.last() {
        if top.len() <= 1 {
            break;
        }
        if levels.len() >= 2 && top.len() <= ROOT_MAX_CHILDREN {
            // The reference's rule: above the first internal level, a level this small is the
            // root's children; merging it again only adds a level every lookup walks.
            levels.push(top.get(..1).map(<[u64]>::to_vec).unwrap_or_default());
            break;
        }
        let mut next = merge_level(top, 2);
        if next.len() >= top.len() {
            // No merge paid off: one root over the whole level.
            next.truncate(1);
        }
        levels.push(next);
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_matches_direct_moments() {
        let keys: Vec<u64> = (0..40u64).map(|i| 1000 + i * i * 7).collect();
        let (a, b) = keys.split_at(17);
        let merged = Moments::of(a).merge(&Moments::of(b));
        let direct = Moments::of(&keys);
        assert!((merged.rmse() - direct.rmse()).abs() < 1e-6 * (1.0 + direct.rmse()));
        assert!((merged.sxy - direct.sxy).abs() <= 1e-9 * direct.sxy.abs());
    }

    #[test]
    fn linear_keys_merge_into_one_segment_and_the_levels_end_in_one_root() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| i * 5).collect();
        assert_eq!(levels(&keys).first().map(Vec::len), Some(1));
        let mut keys: Vec<u64> = (0..5000u64).map(|i| i * i * i).collect();
        keys.extend((0..5000u64).map(|i| u64::MAX - 5000 + i));
        let built = levels(&keys);
        assert!(built.first().map_or(0, Vec::len) > 1, "{}", built.len());
        assert_eq!(built.last().map(Vec::len), Some(1));
    }

    #[test]
    fn the_first_small_level_above_the_leaves_is_the_roots_children() {
        // Two far-apart clusters of bursty keys (random gaps of very different scales): level 0
        // has about 155,000 segments and level 1 about 150 nodes in two groups, which a merge of
        // level 1 keeps apart: without the rule, two nodes under the root (a level every lookup
        // walks for nothing).
        let mut x = 7u64;
        let mut key = 0u64;
        let keys: Vec<u64> = (0..4_000_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                key += 1 + (x % 16) * (1 << (x % 30));
                if i == 2_000_000 {
                    key += 1 << 62;
                }
                key
            })
            .collect();
        let sizes: Vec<usize> = levels(&keys).iter().map(Vec::len).collect();
        assert_eq!(sizes.last(), Some(&1), "{sizes:?}");
        let first_small = sizes
            .iter()
            .enumerate()
            .skip(1)
            .find(|&(_, &n)| n <= ROOT_MAX_CHILDREN)
            .map(|(h, _)| h);
        assert_eq!(first_small, Some(sizes.len() - 2), "{sizes:?}");
    }
}
