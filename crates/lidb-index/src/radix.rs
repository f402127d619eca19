//! The radix table over sorted spline keys, shared by RadixSpline (`rs.rs`, its only segment
//! finder) and PLEX (`plex/`, its single-layer layout).
//!
//! It indexes `r` bits of `x - min` just below the common prefix of the key range `[min, max]`
//! (`shift = bitlen(max - min) - r`): `table[p]` is the number of keys whose prefix is `< p`; it
//! has `2^r + 1` entries, so the keys of prefix p are `[table[p], table[p + 1])`. `r` is capped at
//! `bitlen(max - min)` (more bits would only add empty entries); callers may cap it further.
//! `r = 0` is a plain binary search over all keys.
//!
//! Invariant: the table is exactly the one the keys define ([`RadixTable::check`] rebuilds it and
//! compares, after checking the stored length so a corrupt header never allocates more than the
//! input holds).

use crate::error::{Result, corrupt};

/// The most radix bits any table takes (a 4 GiB table).
pub const MAX_RADIX_BITS: u32 = 30;

/// Number of significant bits of `v` (0 for 0).
#[inline]
pub fn bit_len(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The key range `(min, bitlen(max - min))` of sorted keys; `(0, 0)` for none.
pub fn key_range(xs: &[u64]) -> (u64, u32) {
    match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) => (a, bit_len(b.wrapping_sub(a))),
        _ => (0, 0),
    }
}

/// A radix table over sorted, distinct keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RadixTable {
    pub bits: u32,
    pub shift: u32,
    pub min_key: u64,
    pub table: Vec<u32>,
}

impl RadixTable {
    /// The table of `xs` with `bits` radix bits, capped at the key range's bit length.
    pub fn new(xs: &[u64], bits: u32) -> RadixTable {
        let (min_key, len) = key_range(xs);
        let bits = bits.min(len).min(MAX_RADIX_BITS);
        let shift = len - bits;
        let size = (1usize << bits) + 1;
        let mut table = Vec::with_capacity(size);
        let mut i = 0usize;
        let prefix = |x: u64| x.wrapping_sub(min_key).checked_shr(shift).unwrap_or(0);
        for p in 0..size as u64 {
            while xs.get(i).is_some_and(|&x| prefix(x) < p) {
                i += 1;
            }
            table.push(i as u32);
        }
        RadixTable {
            bits,
            shift,
            min_key,
            table,
        }
    }

    /// Encoded size of the table entries (without the count).
    pub fn entries_bytes(bits: u32) -> u64 {
        4 * ((1u64 << bits) + 1)
    }

    /// Checks stored parts against the table `xs` defines with `bits` bits; returns it.
    pub fn check(
        xs: &[u64],
        bits: u32,
        shift: u32,
        min_key: u64,
        table: Vec<u32>,
    ) -> Result<RadixTable> {
        if bits > MAX_RADIX_BITS {
            return Err(corrupt(format!("radix bits {bits} above {MAX_RADIX_BITS}")));
        }
        let (want_min, len) = key_range(xs);
        if bits > len || (want_min, len - bits) != (min_key, shift) {
            return Err(corrupt("radix shape does not match the spline points"));
        }
        if table.len() as u64 != (1u64 << bits) + 1 {
            return Err(corrupt(format!(
                "radix table of {} entries for {bits} bits",
                table.len()
            )));
        }
        let want = RadixTable::new(xs, bits);
        if want.table != table {
            return Err(corrupt("radix table does not match the spline points"));
        }
        Ok(want)
    }

    /// The keys that share q's prefix: `[begin, end)`; `end` defaults to `m`.
    #[inline]
    pub fn range(&self, q: u64, m: usize) -> (usize, usize) {
        let p = (q.wrapping_sub(self.min_key))
            .checked_shr(self.shift)
            .unwrap_or(0) as usize;
        let begin = self.table.get(p).map_or(0, |&b| b as usize);
        let end = self.table.get(p + 1).map_or(m, |&e| e as usize);
        (begin, end)
    }
}

/// Index of the last key of `xs[begin..end]` that is `<= q`, counted from 0 in `xs`, given that
/// every key before `begin` is `<= q` and every key from `end` on is `> q` (0 when none is).
#[inline]
pub fn last_at_most(xs: &[u64], begin: usize, end: usize, q: u64) -> usize {
    let within = xs
        .get(begin..end)
        .map_or(0, |s| s.partition_point(|&x| x <= q));
    (begin + within).saturating_sub(1)
}
