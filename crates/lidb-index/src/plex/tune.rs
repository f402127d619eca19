//! PLEX's self-tuning: which structure finds the spline segment of a query, chosen by a cost
//! model over the spline points, so that PLEX keeps a single parameter (the position boundary).
//!
//! Candidates: a radix table of `r` bits (`r = 0`: plain binary search over the spline keys), or
//! a Compact Hist-Tree (`cht.rs`) of `r` bits a node and `max_error = 2^k - 1` keys a leaf.
//!
//! Cost, in probes per lookup of an existing key (one array read each, as in the PLEX paper):
//! the table or tree reads on the way down, plus the binary search steps over the spline keys
//! left, `bitlen(c)` for `c` keys. Each key range is weighted by the data keys that fall in it
//! (the y span of its spline keys), so dense regions count as much as lookups land there.
//! - radix table of r bits: `1 + sum over prefixes of (data keys) * bitlen(spline keys)`, / n;
//! - tree: `depth + k`, where depth sums, over every data key, the nodes on its path, and k
//!   bounds the leaf's search (the lookup searches only the bin's own keys when the next bin is a
//!   leaf, so this overcharges trees with large leaves; it keeps the model to one pass).
//!
//! The sums come from the LCP intervals of the spline keys (`lcp[i]` = common leading bits of
//! `off_i` and `off_{i-1}` within `lg` bits): the keys sharing a prefix of p bits are exactly the
//! maximal runs with `lcp >= p`, and each run (an LCP interval with value v and parent value u)
//! is one bin at every prefix length p in (u, v]. A tree of r bits a node has bins at
//! p = r, 2r, 3r, ...; a bin is split (a node of its own) iff it holds more than max_error keys,
//! so nodes = 1 + #split bins and depth = n + sum of the data keys of split bins. One stack pass
//! finds all intervals (O(m)); each candidate r then costs one pass over them.
//!
//! Choice: the least cost within the space budget, then the smallest structure whose cost is
//! within `COST_SLACK` of it (a fraction of a probe is not worth kilobytes). Pure: the same points
//! always give the same layout.

use crate::radix::{MAX_RADIX_BITS, RadixTable, bit_len, key_range};

use super::cht::{LEAF, MAX_BIN_BITS};

/// The structure that finds spline segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A radix table of `bits` bits (0: binary search over the spline keys).
    Radix { bits: u32 },
    /// A Compact Hist-Tree with `bin_bits` bits a node and at most `max_error` keys a leaf.
    Tree { bin_bits: u32, max_error: u32 },
}

/// Leaves of `2^k - 1` keys for k up to this (4095 keys): a larger leaf is slower than a table.
const MAX_LEAF_LOG: u32 = 12;
/// Costs this close to the least (in probes per lookup) count as equal; the smaller wins.
pub const COST_SLACK: f64 = 0.5;

/// One bin that holds at least two spline keys at every prefix length in `(parent, value]`.
#[derive(Debug, Clone, Copy)]
struct Interval {
    parent: i64,
    value: i64,
    keys: u64,
    data: u64,
}

/// A candidate with its cost (probes per lookup) and size (bytes of table or nodes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub layout: Layout,
    pub cost: f64,
    pub bytes: u64,
}

/// All LCP intervals of the spline keys `xs` (the data keys of a run are the y span from its first
/// key to the key after it, or to `n`).
fn intervals(xs: &[u64], ys: &[u32], n: u64) -> Vec<Interval> {
    let (min, lg) = key_range(xs);
    let m = xs.len();
    let lcp = |i: usize| -> i64 {
        match (xs.get(i - 1), xs.get(i)) {
            (Some(&a), Some(&b)) => {
                let x = a.wrapping_sub(min) ^ b.wrapping_sub(min);
                i64::from(x.leading_zeros()) - i64::from(64 - lg)
            }
            _ => -1,
        }
    };
    let y_at = |i: usize| ys.get(i).map_or(n, |&y| u64::from(y));
    let mut out = Vec::new();
    // (value, first key) of the open intervals, values strictly increasing up the stack.
    let mut stack: Vec<(i64, usize)> = vec![(0, 0)];
    for i in 1..=m {
        let cur = if i < m { lcp(i) } else { -1 };
        let mut lb = i - 1;
        while let Some(&(value, first)) = stack.last() {
            if cur >= value {
                break;
            }
            stack.pop();
            let below = stack.last().map_or(-1, |&(v, _)| v);
            out.push(Interval {
                parent: below.max(cur),
                value,
                keys: (i - first) as u64,
                data: y_at(i).saturating_sub(y_at(first)),
            });
            lb = first;
        }
        if stack.last().is_none_or(|&(v, _)| cur > v) && cur >= 0 {
            stack.push((cur, lb));
        }
    }
    out
}

/// Every candidate layout for the spline points, with its cost and size.
pub fn candidates(xs: &[u64], ys: &[u32], n: u64) -> Vec<Candidate> {
    let m = xs.len();
    let mut out = vec![Candidate {
        layout: Layout::Radix { bits: 0 },
        cost: f64::from(bit_len(m as u64)),
        bytes: RadixTable::entries_bytes(0),
    }];
    let (_, lg) = key_range(xs);
    if m < 2 || n == 0 {
        return out;
    }
    let total = n as f64;
    let ivs = intervals(xs, ys, n);

    // Radix tables: the bins of prefix length p, summed with difference arrays over p.
    let mut cost_diff = [0i128; 66];
    let mut data_diff = [0i128; 66];
    for iv in &ivs {
        let (from, to) = ((iv.parent + 1) as usize, (iv.value + 1) as usize);
        let c = i128::from(iv.data) * i128::from(bit_len(iv.keys));
        for (diff, v) in [(&mut cost_diff, c), (&mut data_diff, i128::from(iv.data))] {
            if let Some(d) = diff.get_mut(from) {
                *d += v;
            }
            if let Some(d) = diff.get_mut(to) {
                *d -= v;
            }
        }
    }
    let (mut grouped_cost, mut grouped_data) = (0i128, 0i128);
    for p in 0..=lg.min(MAX_RADIX_BITS) {
        grouped_cost += cost_diff.get(p as usize).copied().unwrap_or(0);
        grouped_data += data_diff.get(p as usize).copied().unwrap_or(0);
        if p == 0 {
            continue;
        }
        // Keys outside every group of two or more sit alone in their bin: one comparison.
        let single = (n as i128 - grouped_data).max(0);
        out.push(Candidate {
            layout: Layout::Radix { bits: p },
            cost: 1.0 + (grouped_cost + single) as f64 / total,
            bytes: RadixTable::entries_bytes(p),
        });
    }

    // Trees: per r, the intervals bucketed by the largest k whose leaves they overflow.
    if m >= LEAF as usize {
        return out;
    }
    for r in 1..=lg.min(MAX_BIN_BITS) {
        let ri = i64::from(r);
        let mut bins = [0u64; MAX_LEAF_LOG as usize + 1];
        let mut data = [0u64; MAX_LEAF_LOG as usize + 1];
        for iv in &ivs {
            let levels = (iv.value / ri - iv.parent.max(0) / ri).max(0) as u64;
            if levels == 0 {
                continue;
            }
            let k = (bit_len(iv.keys) - 1).min(MAX_LEAF_LOG) as usize;
            if let (Some(b), Some(d)) = (bins.get_mut(k), data.get_mut(k)) {
                *b += levels;
                *d += levels * iv.data;
            }
        }
        let (mut split, mut split_data) = (0u64, 0u64);
        for k in (1..=MAX_LEAF_LOG).rev() {
            split += bins.get(k as usize).copied().unwrap_or(0);
            split_data += data.get(k as usize).copied().unwrap_or(0);
            out.push(Candidate {
                layout: Layout::Tree {
                    bin_bits: r,
                    max_error: (1 << k) - 1,
                },
                cost: (n + split_data) as f64 / total + f64::from(k),
                bytes: (4 * (1 + split)) << r,
            });
        }
    }
    out
}

/// The layout for the spline points within `budget_bytes` (see the module documentation).
pub fn choose(xs: &[u64], ys: &[u32], n: u64, budget_bytes: u64) -> Layout {
    let all = candidates(xs, ys, n);
    let fits = |c: &&Candidate| c.bytes <= budget_bytes || c.layout == Layout::Radix { bits: 0 };
    let best = all
        .iter()
        .filter(fits)
        .map(|c| c.cost)
        .fold(f64::INFINITY, f64::min);
    all.iter()
        .filter(fits)
        .filter(|c| c.cost <= best + COST_SLACK)
        .min_by_key(|c| c.bytes)
        .map_or(Layout::Radix { bits: 0 }, |c| c.layout)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::super::cht::Cht;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn points(seed: u64, m: usize, spread: u64) -> (Vec<u64>, Vec<u32>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut xs: Vec<u64> = (0..m).map(|_| rng.gen_range(0..spread)).collect();
        xs.sort_unstable();
        xs.dedup();
        // Uneven y steps, as spline points over data of varying density have.
        let mut y = 0u32;
        let ys = xs
            .iter()
            .map(|_| {
                let at = y;
                y += rng.gen_range(1..50);
                at
            })
            .collect();
        (xs, ys)
    }

    /// The model's node counts and depths are those of the tree actually built, and its radix
    /// costs those of the table actually built, on skewed and uniform keys.
    #[test]
    fn the_model_counts_what_the_builders_build() {
        let skewed: Vec<u64> = {
            let (xs, _) = points(1, 3000, 1 << 50);
            xs.iter()
                .map(|&x| x >> (x % 40))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        for xs in [
            points(2, 3000, u64::MAX).0,
            points(3, 2000, 1 << 24).0,
            skewed,
        ] {
            let ys: Vec<u32> = (0..xs.len() as u32).map(|i| 3 * i).collect();
            let n = 3 * xs.len() as u64;
            // Trees past 1 MiB would only slow the test down: their counts come from the same sums.
            for c in candidates(&xs, &ys, n)
                .into_iter()
                .filter(|c| c.bytes <= 1 << 20)
            {
                match c.layout {
                    Layout::Tree {
                        bin_bits,
                        max_error,
                    } => {
                        let t = Cht::build(&xs, bin_bits, max_error, usize::MAX).unwrap();
                        assert_eq!(c.bytes, 4 * t.nodes.len() as u64, "{c:?}");
                        let depth: f64 = xs
                            .iter()
                            .map(|&x| f64::from(tree_depth(&t, x)))
                            .sum::<f64>()
                            / xs.len() as f64;
                        let k = f64::from(bit_len(u64::from(max_error)));
                        assert!((c.cost - k - depth).abs() < 1e-9, "{c:?} depth={depth}");
                    }
                    Layout::Radix { bits } => {
                        let t = RadixTable::new(&xs, bits);
                        assert_eq!(c.bytes, 4 * t.table.len() as u64);
                        if bits == 0 {
                            continue;
                        }
                        let cost: f64 = t
                            .table
                            .windows(2)
                            .map(|w| {
                                let c = u64::from(w[1] - w[0]);
                                (c * u64::from(bit_len(c).max(1))) as f64
                            })
                            .sum::<f64>()
                            / xs.len() as f64;
                        assert!((c.cost - 1.0 - cost).abs() < 1e-9, "{c:?} want {cost}");
                    }
                }
            }
        }
    }

    /// Nodes visited on the way to x's leaf.
    fn tree_depth(t: &Cht, x: u64) -> u32 {
        let off = x - t.min_key;
        let (mut node, mut width, mut depth) = (0usize, t.shift, 1);
        loop {
            let bin = ((off >> width) & ((1 << t.bin_bits) - 1)) as usize;
            let e = t.nodes[(node << t.bin_bits) | bin];
            if e & LEAF != 0 {
                return depth;
            }
            node = e as usize;
            width = width.saturating_sub(t.bin_bits);
            depth += 1;
        }
    }

    #[test]
    fn the_choice_keeps_the_budget_and_is_deterministic() {
        let (xs, ys) = points(4, 20_000, u64::MAX);
        let n = u64::from(*ys.last().unwrap()) + 1;
        for budget in [0u64, 100, 4096, 1 << 20] {
            let a = choose(&xs, &ys, n, budget);
            assert_eq!(a, choose(&xs, &ys, n, budget));
            let c = candidates(&xs, &ys, n)
                .into_iter()
                .find(|c| c.layout == a)
                .unwrap();
            assert!(c.bytes <= budget.max(8), "budget {budget}: {c:?}");
        }
        assert_eq!(choose(&xs, &ys, n, 0), Layout::Radix { bits: 0 });
        assert_eq!(choose(&[7], &[0], 1, 1 << 20), Layout::Radix { bits: 0 });
        assert_eq!(choose(&[], &[], 0, 1 << 20), Layout::Radix { bits: 0 });
    }
}
