//! Binary search over all keys: the in-memory baseline. It stores nothing and answers the whole
//! key range, so the caller's last-mile search is a plain binary search. It is the one family that
//! does not keep the position boundary (`Family::is_bounded` is false).

use crate::bound::Bound;
use crate::codec::{Header, Reader};
use crate::error::Result;
use crate::family::{Family, IndexStats, LearnedIndex, Params};

#[derive(Debug, Clone)]
pub struct BinarySearch {
    n: u64,
    boundary: u64,
}

impl BinarySearch {
    pub fn build(keys: &[u64], params: &Params) -> BinarySearch {
        BinarySearch {
            n: keys.len() as u64,
            boundary: params.boundary,
        }
    }

    pub fn decode(_r: &mut Reader<'_>, h: &Header) -> Result<BinarySearch> {
        Ok(BinarySearch {
            n: h.key_count,
            boundary: h.boundary,
        })
    }
}

impl LearnedIndex for BinarySearch {
    fn family(&self) -> Family {
        Family::Binary
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        self.boundary
    }
    fn search(&self, _q: u64) -> Bound {
        Bound { lo: 0, hi: self.n }
    }
    fn payload_len(&self) -> u64 {
        0
    }
    fn write_payload(&self, _out: &mut Vec<u8>) {}
    fn stats(&self) -> IndexStats {
        IndexStats {
            models: 0,
            details: vec![],
        }
    }
}
