//! Fence pointers, the classic baseline: keys are cut into blocks of B entries and the index keeps
//! the last key of every block (LevelDB's index block, one entry per data block).
//!
//! `search(q)` finds the first block whose last key is `>= q`; `lower_bound(q)` lies in that block
//! (or is n when no block qualifies), so the range is exactly one block: at most B wide, duplicates
//! included. Invariant: `fences.len() == ceil(n / B)` and fences are non-decreasing.

use crate::bound::Bound;
use crate::codec::{Header, PutLe, Reader};
use crate::error::{Result, corrupt};
use crate::family::{Family, IndexStats, LearnedIndex, Params};

#[derive(Debug, Clone)]
pub struct FencePointers {
    n: u64,
    block: u64,
    fences: Vec<u64>,
}

impl FencePointers {
    /// Builds over validated keys.
    pub fn build(keys: &[u64], params: &Params) -> FencePointers {
        let block = params.boundary;
        let fences = keys
            .chunks(block as usize)
            .filter_map(|c| c.last().copied())
            .collect();
        FencePointers {
            n: keys.len() as u64,
            block,
            fences,
        }
    }

    pub fn decode(r: &mut Reader<'_>, h: &Header) -> Result<FencePointers> {
        let len = r.count(8, "fence")?;
        let fences = r.u64_vec(len)?;
        let expected = h.key_count.div_ceil(h.boundary);
        if len as u64 != expected {
            return Err(corrupt(format!(
                "{len} fences for {} keys in blocks of {} (expected {expected})",
                h.key_count, h.boundary
            )));
        }
        if fences.windows(2).any(|w| matches!(w, [a, b] if b < a)) {
            return Err(corrupt("fence keys decrease"));
        }
        Ok(FencePointers {
            n: h.key_count,
            block: h.boundary,
            fences,
        })
    }
}

impl LearnedIndex for FencePointers {
    fn family(&self) -> Family {
        Family::Fp
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.block
    }

    #[inline]
    fn search(&self, q: u64) -> Bound {
        let j = self.fences.partition_point(|&f| f < q) as u64;
        let lo = j.saturating_mul(self.block).min(self.n);
        let hi = lo.saturating_add(self.block).min(self.n);
        Bound { lo, hi }
    }

    fn payload_len(&self) -> u64 {
        8 + 8 * self.fences.len() as u64
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        out.put_u64(self.fences.len() as u64);
        self.fences.iter().for_each(|&f| out.put_u64(f));
    }

    fn stats(&self) -> IndexStats {
        IndexStats {
            models: self.fences.len() as u64,
            details: vec![],
        }
    }
}
