//! RadixSpline (Kipf et al., 2020): the error-bounded spline of `spline.rs` over the staircase
//! points, and the radix table of `radix.rs` that narrows the search for the spline segment of a
//! query.
//!
//! The radix table's bits are the parameter `rs_radix_bits`, capped at the spline key range
//! (`radix.rs`) and at `bitlen(spline points)` (fewer than 2 entries per spline point, so the
//! table adds at most 8 of the 12 bytes a spline point takes: without this cap `r = 30` allocates
//! 4 GiB for any table with a wide key range, and a small per-SSTable spline would be dwarfed by
//! its table). `r = 0` is a plain binary search over the spline points.
//!
//! Invariants: those of the spline (`spline.rs`); the table is exactly the one the points define
//! (decode recomputes it and compares).
//!
//! Payload: `u32 radix_bits, u32 shift, u64 min_key, u64 count, count x u64 x, count x u32 y,
//! u64 table_len, table_len x u32`.

use crate::bound::{Bound, eps_for_boundary, window};
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params, StatValue};
use crate::radix::{RadixTable, bit_len, last_at_most};
use crate::spline::Spline;

/// Radix bits used when the caller does not choose. Measured with `tests/rs_rmi_measure.rs` on
/// 1M and 10M uniform, lognormal and real tweet-ID keys at B = 16 and 64: r = 8 costs at most 1 KiB
/// (under 1% of the index from 1M keys at B = 16) and cuts the search time by 30-60% against
/// r = 0 or 1; r = 12 is faster again but costs 16 KiB. Capped by the spline size (module docs),
/// so small per-table splines get a proportionally small table.
pub const DEFAULT_RADIX_BITS: u32 = 8;

#[derive(Debug, Clone)]
pub struct RadixSpline {
    n: u64,
    boundary: u64,
    eps: u64,
    spline: Spline,
    radix: RadixTable,
}

impl RadixSpline {
    pub fn build(keys: &[u64], params: &Params) -> Result<RadixSpline> {
        let eps = eps_for_boundary(params.boundary);
        let spline = Spline::fit(keys, eps);
        let bits = params.rs_radix_bits.min(bit_len(spline.len() as u64));
        let radix = RadixTable::new(&spline.xs, bits);
        Ok(RadixSpline {
            n: keys.len() as u64,
            boundary: params.boundary,
            eps,
            spline,
            radix,
        })
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<RadixSpline> {
        let n = h.key_count;
        let radix_bits = r.u32()?;
        let shift = r.u32()?;
        let min_key = r.u64()?;
        let spline = Spline::read(r, n)?;
        let table_len = r.count(4, "radix table entry")?;
        let table = r.u32_vec(table_len)?;
        if radix_bits > bit_len(spline.len() as u64) {
            return Err(corrupt(format!(
                "radix bits {radix_bits} above the cap for {} spline points",
                spline.len()
            )));
        }
        let radix = RadixTable::check(&spline.xs, radix_bits, shift, min_key, table)?;
        Ok(RadixSpline {
            n,
            boundary: h.boundary,
            eps: eps_for_boundary(h.boundary),
            spline,
            radix,
        })
    }

    /// Index i of the spline segment holding q: `x_i <= q < x_{i+1}`. Needs `x_0 <= q < x_last`.
    #[inline]
    fn segment(&self, q: u64) -> usize {
        let (begin, end) = self.radix.range(q, self.spline.len());
        last_at_most(&self.spline.xs, begin, end, q)
    }

    /// The integer prediction for q (see `spline.rs`).
    #[inline]
    pub fn predict(&self, q: u64) -> u64 {
        self.spline.predict(q, self.n, |q| self.segment(q))
    }

    /// Number of spline points.
    pub fn spline_points(&self) -> usize {
        self.spline.len()
    }

    /// Radix bits actually used (the parameter capped by the key range and the spline size).
    pub fn radix_bits(&self) -> u32 {
        self.radix.bits
    }
}

impl LearnedIndex for RadixSpline {
    fn family(&self) -> Family {
        Family::Rs
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
        4 + 4 + 8 + self.spline.encoded_len() + 8 + 4 * self.radix.table.len() as u64
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u32(self.radix.bits);
        out.put_u32(self.radix.shift);
        out.put_u64(self.radix.min_key);
        self.spline.write(out);
        out.put_u64(self.radix.table.len() as u64);
        self.radix.table.iter().for_each(|&t| out.put_u32(t));
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            models: self.spline.len() as u64,
            details: vec![
                ("radix_bits", StatValue::U64(u64::from(self.radix.bits))),
                ("spline_points", StatValue::U64(self.spline.len() as u64)),
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

    fn random_keys(seed: u64, n: usize, spread: u64) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut k: Vec<u64> = (0..n).map(|_| rng.gen_range(0..spread)).collect();
        k.sort_unstable();
        k
    }

    /// The radix-narrowed segment search equals a plain binary search over the spline points.
    #[test]
    fn radix_lookup_matches_binary_search() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for (seed, spread) in [(1u64, u64::MAX), (2, 1 << 20), (3, 1 << 50)] {
            let keys = random_keys(seed, 30_000, spread);
            for bits in 0..=18 {
                let mut params = Params::new(8);
                params.rs_radix_bits = bits;
                let rs = RadixSpline::build(&keys, &params).unwrap();
                let (x0, xl) = (rs.spline.xs[0], *rs.spline.xs.last().unwrap());
                for _ in 0..2000 {
                    let q = rng.gen_range(x0..xl);
                    let want = rs.spline.xs.partition_point(|&x| x <= q) - 1;
                    assert_eq!(rs.segment(q), want, "bits={bits} q={q}");
                }
                for &x in &rs.spline.xs[..rs.spline.xs.len() - 1] {
                    assert_eq!(rs.spline.xs[rs.segment(x)], x);
                }
            }
        }
    }

    #[test]
    fn every_point_is_verified_with_the_stored_predictor() {
        for b in [2u64, 4, 16, 64] {
            let keys = random_keys(b, 50_000, u64::MAX);
            let rs = RadixSpline::build(&keys, &Params::new(b)).unwrap();
            let p = crate::points::staircase(&keys);
            for (&x, &y) in p.xs.iter().zip(&p.ys) {
                let pred = rs.predict(x);
                assert!(pred.abs_diff(u64::from(y)) <= rs.eps, "b={b} x={x}");
            }
            for &q in keys.iter().step_by(7) {
                for q in [q.wrapping_sub(1), q, q.wrapping_add(1)] {
                    let got = rs.search(q);
                    assert!(holds(&keys, q, got) && got.width() <= b, "b={b} q={q}");
                }
            }
        }
    }

    #[test]
    fn radix_bits_are_capped_by_the_key_range() {
        // Two spline points over a range of 6 bits: the range allows 6, the size 2.
        let keys: Vec<u64> = (100..164).collect();
        let mut params = Params::new(2);
        params.rs_radix_bits = 20;
        let rs = RadixSpline::build(&keys, &params).unwrap();
        assert_eq!((rs.spline_points(), rs.radix_bits()), (2, 2));
        assert_eq!(rs.radix.table.len(), 5);
        // Over 512 spline points in a 10-bit range: the range caps.
        let keys = random_keys(7, 1000, 1024);
        let rs = RadixSpline::build(&keys, &params).unwrap();
        assert!(rs.spline_points() >= 512, "{}", rs.spline_points());
        assert_eq!(rs.radix_bits(), 10);
    }
}
