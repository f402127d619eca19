//! PLEX (Stoian, Kipf, Marcus & Kraska, 2021, "PLEX: Towards Practical Learned Indexing"):
//! RadixSpline's error-bounded spline (`spline.rs`, shared with `rs`) with the spline segment
//! found through a Compact Hist-Tree (`cht.rs`) or, where one node would do, a plain radix table
//! (`radix.rs`); which one, and its radix bits and leaf size, is chosen per index by a cost model
//! over the spline points (`tune.rs`). The position boundary is PLEX's only parameter.
//!
//! Space budget: the segment finder may take at most `1 / BUDGET_DIVISOR` of the spline's bytes,
//! so PLEX is never more than that fraction larger than its spline (RadixSpline with the default
//! 8 bits carries a fixed 1 KiB table, up to 2/3 of its spline for small ones).
//!
//! Lookup for q: the spline's prediction (`Spline::predict`), whose segment search reads the
//! finder's range of spline keys for q (`[table[p], table[p + 1])` or the tree leaf's
//! `[begin, begin + max_error)`) and binary-searches it; the window is `window(pred, eps, n)`
//! exactly as for rs, so the contract argument of `spline.rs` applies unchanged.
//!
//! Invariants: those of the spline; the finder is exactly the one its stored parameters define
//! over the spline keys (decode rebuilds it and compares, so any decoded index answers correctly
//! whatever layout the bytes name).
//!
//! Payload: `u32 layout (0 radix table, 1 hist-tree), u32 bits, u32 max_error (0 for a radix
//! table), u32 shift, u64 min_key, u64 count, count x u64 x, count x u32 y, u64 table_len,
//! table_len x u32` (the radix table, or the tree's node entries).

pub mod cht;
pub mod tune;

use crate::bound::{Bound, eps_for_boundary, window};
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::radix::{RadixTable, last_at_most};
use crate::spline::Spline;

use cht::Cht;
use tune::Layout;

/// The finder may take this fraction (1 / x) of the spline's encoded bytes. Measured on the
/// 10M real sets at B = 16 and 64 (docs/bench-log/01-index-library.md): 1/16 keeps PLEX within 6.25% of its
/// spline's size.
pub const BUDGET_DIVISOR: u64 = 16;

const LAYOUT_RADIX: u32 = 0;
const LAYOUT_TREE: u32 = 1;

/// What finds the spline segment of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finder {
    Radix(RadixTable),
    Tree(Cht),
}

#[derive(Debug, Clone)]
pub struct Plex {
    n: u64,
    boundary: u64,
    eps: u64,
    spline: Spline,
    finder: Finder,
}

impl Plex {
    pub fn build(keys: &[u64], params: &Params) -> Result<Plex> {
        let n = keys.len() as u64;
        let eps = eps_for_boundary(params.boundary);
        let spline = Spline::fit(keys, eps);
        let budget = spline.encoded_len() / BUDGET_DIVISOR;
        let layout = tune::choose(&spline.xs, &spline.ys, n, budget);
        Ok(Plex::with_layout(n, params.boundary, spline, layout))
    }

    /// PLEX over `keys` with the finder `layout` instead of the tuned one (for tests and
    /// measurements of the cost model).
    pub fn build_with(keys: &[u64], boundary: u64, layout: Layout) -> Result<Plex> {
        let spline = Spline::fit(keys, eps_for_boundary(boundary));
        Ok(Plex::with_layout(
            keys.len() as u64,
            boundary,
            spline,
            layout,
        ))
    }

    fn with_layout(n: u64, boundary: u64, spline: Spline, layout: Layout) -> Plex {
        let finder = match layout {
            Layout::Tree {
                bin_bits,
                max_error,
            } => Cht::build(&spline.xs, bin_bits, max_error, usize::MAX).map(Finder::Tree),
            Layout::Radix { .. } => None,
        };
        let finder = finder.unwrap_or_else(|| {
            let bits = match layout {
                Layout::Radix { bits } => bits,
                Layout::Tree { .. } => 0,
            };
            Finder::Radix(RadixTable::new(&spline.xs, bits))
        });
        Plex {
            n,
            boundary,
            eps: eps_for_boundary(boundary),
            spline,
            finder,
        }
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<Plex> {
        let n = h.key_count;
        let layout = r.u32()?;
        let bits = r.u32()?;
        let max_error = r.u32()?;
        let shift = r.u32()?;
        let min_key = r.u64()?;
        let spline = Spline::read(r, n)?;
        let len = r.count(4, "segment finder entry")?;
        let entries = r.u32_vec(len)?;
        let finder = match layout {
            LAYOUT_RADIX if max_error == 0 => Finder::Radix(RadixTable::check(
                &spline.xs, bits, shift, min_key, entries,
            )?),
            LAYOUT_RADIX => return Err(corrupt("a radix table layout with a max error")),
            LAYOUT_TREE => Finder::Tree(Cht::check(
                &spline.xs, bits, max_error, shift, min_key, entries,
            )?),
            other => return Err(corrupt(format!("unknown plex layout {other}"))),
        };
        Ok(Plex {
            n,
            boundary: h.boundary,
            eps: eps_for_boundary(h.boundary),
            spline,
            finder,
        })
    }

    /// Index i of the spline segment holding q: `x_i <= q < x_{i+1}`. Needs `x_0 <= q < x_last`.
    #[inline]
    fn segment(&self, q: u64) -> usize {
        let m = self.spline.len();
        let (begin, end) = match &self.finder {
            Finder::Radix(t) => t.range(q, m),
            Finder::Tree(t) => t.range(q, m),
        };
        last_at_most(&self.spline.xs, begin, end, q)
    }

    /// The integer prediction for q (see `spline.rs`).
    #[inline]
    pub fn predict(&self, q: u64) -> u64 {
        self.spline.predict(q, self.n, |q| self.segment(q))
    }

    /// The finder the index uses.
    pub fn layout(&self) -> Layout {
        match &self.finder {
            Finder::Radix(t) => Layout::Radix { bits: t.bits },
            Finder::Tree(t) => Layout::Tree {
                bin_bits: t.bin_bits,
                max_error: t.max_error,
            },
        }
    }

    /// Number of spline points.
    pub fn spline_points(&self) -> usize {
        self.spline.len()
    }

    /// The finder's stored entries (radix table or tree nodes).
    fn entries(&self) -> &[u32] {
        match &self.finder {
            Finder::Radix(t) => &t.table,
            Finder::Tree(t) => &t.nodes,
        }
    }
}

impl LearnedIndex for Plex {
    fn family(&self) -> Family {
        Family::Plex
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        window(self.predict(q), self.eps, self.n)
    }

    fn payload_len(&self) -> u64 {
        4 * 4 + 8 + self.spline.encoded_len() + 8 + 4 * self.entries().len() as u64
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        let (layout, bits, max_error, shift, min_key) = match &self.finder {
            Finder::Radix(t) => (LAYOUT_RADIX, t.bits, 0, t.shift, t.min_key),
            Finder::Tree(t) => (LAYOUT_TREE, t.bin_bits, t.max_error, t.shift, t.min_key),
        };
        out.put_u32(layout);
        out.put_u32(bits);
        out.put_u32(max_error);
        out.put_u32(shift);
        out.put_u64(min_key);
        self.spline.write(out);
        out.put_u64(self.entries().len() as u64);
        self.entries().iter().for_each(|&e| out.put_u32(e));
    }

    fn stats(&self) -> IndexStats {
        let (tree, bits, max_error, nodes) = match &self.finder {
            Finder::Radix(t) => (0, t.bits, 0, 0),
            Finder::Tree(t) => (1, t.bin_bits, t.max_error, t.node_count() as u64),
        };
        IndexStats {
            models: self.spline.len() as u64,
            details: vec![
                ("spline_points", StatValue::U64(self.spline.len() as u64)),
                ("hist_tree", StatValue::U64(tree)),
                ("radix_bits", StatValue::U64(u64::from(bits))),
                ("leaf_max_error", StatValue::U64(u64::from(max_error))),
                ("tree_nodes", StatValue::U64(nodes)),
                (
                    "finder_bytes",
                    StatValue::U64(4 * self.entries().len() as u64),
                ),
            ],
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::bound::holds;
    use crate::family::decode;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn keys(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Clusters of very different density: where a hist-tree beats one radix table.
        let mut k: Vec<u64> = (0..n)
            .map(|i| {
                let base = (i % 7) as u64 * (1u64 << 58);
                base + rng.gen_range(0..1u64 << (10 + 6 * (i % 7)))
            })
            .collect();
        k.sort_unstable();
        k
    }

    /// Every layout keeps the contract, round-trips, and costs what its encoding says.
    #[test]
    fn every_layout_keeps_the_contract() {
        let keys = keys(1, 30_000);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let layouts = [
            Layout::Radix { bits: 0 },
            Layout::Radix { bits: 9 },
            Layout::Tree {
                bin_bits: 1,
                max_error: 1,
            },
            Layout::Tree {
                bin_bits: 4,
                max_error: 7,
            },
            Layout::Tree {
                bin_bits: 11,
                max_error: 63,
            },
        ];
        for b in [2u64, 16, 64] {
            for layout in layouts {
                let p = Plex::build_with(&keys, b, layout).unwrap();
                assert_eq!(p.layout(), layout);
                let back = decode(&p.encode()).unwrap();
                assert_eq!(p.encode().len() as u64, p.size_bytes());
                let qs = keys
                    .iter()
                    .step_by(3)
                    .flat_map(|&k| [k.wrapping_sub(1), k, k.wrapping_add(1)])
                    .chain((0..2000).map(|_| rng.r#gen::<u64>()));
                for q in qs {
                    let got = p.search(q);
                    assert!(holds(&keys, q, got) && got.width() <= b, "{layout:?} q={q}");
                    assert_eq!(back.search(q), got);
                }
            }
        }
    }

    /// On clustered keys the tuner picks a hist-tree, within the budget.
    #[test]
    fn clustered_keys_get_a_tree_within_the_budget() {
        let keys = keys(3, 200_000);
        let p = Plex::build(&keys, &Params::new(16)).unwrap();
        assert!(
            matches!(p.layout(), Layout::Tree { .. }),
            "{:?}",
            p.layout()
        );
        let finder = 4 * p.entries().len() as u64;
        assert!(finder <= p.spline.encoded_len() / BUDGET_DIVISOR);
    }

    /// What the fuzz target does, in miniature: payload bytes changed under a valid checksum
    /// decode to an error or to an index whose searches return (the decoder's rebuild-and-compare
    /// leaves no structure a lookup could loop or index out of bounds on).
    #[test]
    fn resealed_mutations_never_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let keys = keys(5, 3000);
        for layout in [
            Layout::Radix { bits: 6 },
            Layout::Tree {
                bin_bits: 3,
                max_error: 3,
            },
        ] {
            let p = Plex::build_with(&keys, 8, layout).unwrap();
            let mut payload = Vec::new();
            p.write_payload(&mut payload);
            let mut decoded = 0;
            for _ in 0..3000 {
                let mut bad = payload.clone();
                for _ in 0..rng.gen_range(1..4) {
                    // Mostly the header fields and the finder entries at the end.
                    let at = if rng.gen_bool(0.5) {
                        rng.gen_range(0..24)
                    } else {
                        bad.len() - 1 - rng.gen_range(0..bad.len().min(200))
                    };
                    bad[at] = rng.r#gen();
                }
                let h = Header {
                    family_tag: Family::Plex.tag(),
                    key_count: keys.len() as u64,
                    boundary: 8,
                    payload_len: bad.len() as u64,
                };
                if let Ok(idx) = decode(&crate::codec::frame(h, &bad)) {
                    decoded += 1;
                    for q in [0, keys[7], keys[2000] + 1, u64::MAX, rng.r#gen()] {
                        let _ = idx.search(q);
                    }
                }
            }
            // Some mutations (of unused entries' bits, say) still decode; most must not.
            assert!(decoded < 3000, "{layout:?}: {decoded}");
        }
    }

    #[test]
    fn a_layout_with_a_max_error_or_unknown_tag_is_corrupt() {
        let keys: Vec<u64> = (0..1000).map(|i| i * i).collect();
        let p = Plex::build_with(&keys, 8, Layout::Radix { bits: 4 }).unwrap();
        let mut payload = Vec::new();
        p.write_payload(&mut payload);
        let h = Header {
            family_tag: Family::Plex.tag(),
            key_count: 1000,
            boundary: 8,
            payload_len: payload.len() as u64,
        };
        assert!(Plex::decode(&mut Reader::new(&payload), &h).is_ok());
        for (at, v) in [(0usize, 2u8), (0, 1), (8, 1)] {
            let mut bad = payload.clone();
            bad[at] = v;
            assert!(
                Plex::decode(&mut Reader::new(&bad), &h).is_err(),
                "{at}={v}"
            );
        }
    }
}
