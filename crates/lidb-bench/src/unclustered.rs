//! The data-unclustered indexes of lidb-updatable (ALEX, LIPP, DILI, LITS) behind the
//! position-boundary contract of lidb-index, so `lidb index bench|query|stats` run them by name
//! beside every family ([`IndexName`]).
//!
//! An unclustered index holds its keys, so over a sorted key array `k[0..n)` it is built as a map
//! from each distinct key to its position: the bulk load takes the pairs `(k[i], i)` of
//! [`first_positions`], where a run of duplicate keys keeps only the position of its first key
//! (the structures take distinct keys; the first position is exactly `lower_bound` of that key).
//! LITS indexes byte strings: it gets each key's 8-byte big-endian image, which sorts bytewise
//! as the u64 sorts, and every query goes through the same image.
//!
//! The answer of a query `q` is exact: `lower_bound(q)` is the value of the first entry of
//! `range_from(q)`, or `n` when there is none, and [`UnclusteredIndex::search`] returns it as the
//! range `[q, q + 1)`, or `[n, n]` past the end. That satisfies conditions (1) and (2) of
//! `lidb_index::bound` and (3) for every boundary B >= 2, so the same external checks apply.
//!
//! Invariants: `key_count` is the length of the key array the index was built from (duplicates
//! included); every stored value is a position `< key_count`.
//!
//! Threads: plain values; building and reading need nothing shared.

use std::fmt;

use lidb_index::{Bound, Family};
use lidb_updatable::{
    Alex, BulkLoadError, Dili, IndexStats, Lipp, Lits, UpdatableBytesIndex, UpdatableIndex,
};

/// The unclustered indexes, by their command-line names: lidb-lsm's, so `lidb index` and the
/// LSM table kinds share one list.
pub use lidb_lsm::Unclustered;

/// An index of `lidb index`: a lidb-index family (clustered: a model over the caller's sorted
/// array) or an unclustered index of lidb-updatable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexName {
    Family(Family),
    Unclustered(Unclustered),
}

impl IndexName {
    /// Every name, in the order "all" runs them: the families, then the unclustered indexes.
    pub fn all() -> Vec<IndexName> {
        Family::ALL
            .iter()
            .map(|&f| IndexName::Family(f))
            .chain(Unclustered::ALL.iter().map(|&u| IndexName::Unclustered(u)))
            .collect()
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            IndexName::Family(f) => f.name(),
            IndexName::Unclustered(u) => u.name(),
        }
    }

    /// Parses one name.
    pub fn from_name(name: &str) -> Result<IndexName, String> {
        if let Some(u) = Unclustered::from_name(name) {
            return Ok(IndexName::Unclustered(u));
        }
        Family::from_name(name).map(IndexName::Family).map_err(|_| {
            let known: Vec<&str> = IndexName::all().into_iter().map(IndexName::name).collect();
            format!("unknown index \"{name}\" (known: {})", known.join(", "))
        })
    }

    /// Parses "all" or a comma-separated list of names.
    pub fn parse_list(text: &str) -> Result<Vec<IndexName>, String> {
        if text.trim() == "all" {
            return Ok(IndexName::all());
        }
        text.split(',')
            .map(|n| IndexName::from_name(n.trim()))
            .collect()
    }
}

impl fmt::Display for IndexName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bulk-load input over sorted keys `keys` (non-decreasing): each distinct key with the
/// position of its first occurrence, strictly increasing by key.
pub fn first_positions(keys: &[u64]) -> Vec<(u64, u64)> {
    let mut pairs: Vec<(u64, u64)> = Vec::with_capacity(keys.len());
    for (i, &k) in keys.iter().enumerate() {
        if pairs.last().is_none_or(|&(last, _)| last < k) {
            pairs.push((k, i as u64));
        }
    }
    pairs
}

/// The byte-string image LITS indexes for a u64 key: 8 bytes, big-endian (bytewise order is
/// numeric order).
pub fn key_image(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

/// The bulk-load input of one kind, prepared once so a timed build measures the bulk load alone.
#[derive(Debug, Clone)]
pub enum Pairs {
    U64(Vec<(u64, u64)>),
    Bytes(Vec<([u8; 8], u64)>),
}

impl Pairs {
    /// The input `kind` bulk-loads over sorted `keys` (see [`first_positions`]).
    pub fn new(kind: Unclustered, keys: &[u64]) -> Pairs {
        let pairs = first_positions(keys);
        match kind {
            Unclustered::Lits => {
                Pairs::Bytes(pairs.iter().map(|&(k, v)| (key_image(k), v)).collect())
            }
            _ => Pairs::U64(pairs),
        }
    }
}

/// One built index.
#[derive(Debug)]
enum Map {
    Alex(Alex),
    Lipp(Lipp),
    Dili(Dili),
    Lits(Lits),
}

/// An unclustered index built over a sorted key array, answering positions in that array.
#[derive(Debug)]
pub struct UnclusteredIndex {
    kind: Unclustered,
    key_count: u64,
    map: Map,
}

impl UnclusteredIndex {
    /// Builds `kind` over sorted `keys` (non-decreasing, duplicates allowed).
    pub fn build(kind: Unclustered, keys: &[u64]) -> Result<UnclusteredIndex, BulkLoadError> {
        UnclusteredIndex::bulk_load(kind, &Pairs::new(kind, keys), keys.len() as u64)
    }

    /// Builds `kind` from `pairs` made by [`Pairs::new`] for `kind` over `key_count` sorted keys.
    pub fn bulk_load(
        kind: Unclustered,
        pairs: &Pairs,
        key_count: u64,
    ) -> Result<UnclusteredIndex, BulkLoadError> {
        let map = match (kind, pairs) {
            (Unclustered::Lits, Pairs::Bytes(p)) => Map::Lits(Lits::bulk_load(p)?),
            (Unclustered::Alex, Pairs::U64(p)) => Map::Alex(Alex::bulk_load(p)?),
            (Unclustered::Lipp, Pairs::U64(p)) => Map::Lipp(Lipp::bulk_load(p)?),
            (Unclustered::Dili, Pairs::U64(p)) => Map::Dili(Dili::bulk_load(p)?),
            (Unclustered::Lits, Pairs::U64(p)) => {
                let bytes: Vec<([u8; 8], u64)> =
                    p.iter().map(|&(k, v)| (key_image(k), v)).collect();
                Map::Lits(Lits::bulk_load(&bytes)?)
            }
            (kind, Pairs::Bytes(p)) => {
                let u64s: Vec<(u64, u64)> =
                    p.iter().map(|&(k, v)| (u64::from_be_bytes(k), v)).collect();
                return UnclusteredIndex::bulk_load(kind, &Pairs::U64(u64s), key_count);
            }
        };
        Ok(UnclusteredIndex {
            kind,
            key_count,
            map,
        })
    }

    pub fn kind(&self) -> Unclustered {
        self.kind
    }

    /// Keys of the array it was built over (duplicates included).
    pub fn key_count(&self) -> u64 {
        self.key_count
    }

    /// The first position whose key is `>= q` (`key_count` if none): the value of the first
    /// entry of `range_from(q)`, found by `first_from` where the index has it.
    #[inline]
    pub fn lower_bound(&self, q: u64) -> u64 {
        let first = match &self.map {
            Map::Alex(m) => m.first_from(q).map(|e| e.1),
            Map::Lipp(m) => m.first_from(q).map(|e| e.1),
            Map::Dili(m) => m.first_from(q).map(|e| e.1),
            Map::Lits(m) => m.range_from(&key_image(q)).next().map(|e| e.1),
        };
        first.unwrap_or(self.key_count)
    }

    /// The position stored for `q` by a point lookup (`get`: the exact-match path, no
    /// iterator), or `key_count` when `q` is absent.
    #[inline]
    pub fn get(&self, q: u64) -> u64 {
        let found = match &self.map {
            Map::Alex(m) => m.get(q),
            Map::Lipp(m) => m.get(q),
            Map::Dili(m) => m.get(q),
            Map::Lits(m) => m.get(&key_image(q)),
        };
        found.unwrap_or(self.key_count)
    }

    /// The contract's answer: `[lower_bound(q), lower_bound(q) + 1)`, or `[n, n]` past the end.
    pub fn search(&self, q: u64) -> Bound {
        let lo = self.lower_bound(q);
        Bound {
            lo,
            hi: (lo + 1).min(self.key_count),
        }
    }

    /// Heap bytes of the structure, the keys and values it holds included.
    pub fn size_bytes(&self) -> u64 {
        match &self.map {
            Map::Alex(m) => m.size_bytes(),
            Map::Lipp(m) => m.size_bytes(),
            Map::Dili(m) => m.size_bytes(),
            Map::Lits(m) => m.size_bytes(),
        }
    }

    /// Distinct keys stored.
    pub fn len(&self) -> u64 {
        match &self.map {
            Map::Alex(m) => m.len(),
            Map::Lipp(m) => m.len(),
            Map::Dili(m) => m.len(),
            Map::Lits(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Node, model and depth counts.
    pub fn stats(&self) -> IndexStats {
        match &self.map {
            Map::Alex(m) => m.stats(),
            Map::Lipp(m) => m.stats(),
            Map::Dili(m) => m.stats(),
            Map::Lits(m) => m.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use lidb_index::bound::{holds, lower_bound};

    use super::*;

    #[test]
    fn duplicate_runs_keep_their_first_position() {
        assert_eq!(
            first_positions(&[1, 1, 2, 5, 5, 5, 9]),
            vec![(1, 0), (2, 2), (5, 3), (9, 6)]
        );
        assert!(first_positions(&[]).is_empty());
    }

    #[test]
    fn every_kind_answers_the_exact_lower_bound_as_a_one_wide_range() {
        let mut keys: Vec<u64> = (0..3_000u64).map(|i| i * i / 7).collect();
        keys.extend([u64::MAX - 1, u64::MAX, u64::MAX]);
        let queries = keys
            .iter()
            .flat_map(|&k| [k, k.wrapping_add(1), k.wrapping_sub(1)])
            .chain([0, 1, u64::MAX / 2]);
        let queries: Vec<u64> = queries.collect();
        for kind in Unclustered::ALL {
            let index = UnclusteredIndex::build(kind, &keys);
            let index = index.unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert_eq!(index.kind(), kind);
            assert_eq!(index.key_count(), keys.len() as u64);
            assert_eq!(index.len(), first_positions(&keys).len() as u64);
            assert!(index.size_bytes() > 0 && index.stats().nodes > 0);
            for &q in &queries {
                let b = index.search(q);
                assert_eq!(b.lo, lower_bound(&keys, q), "{} q={q}", kind.name());
                assert!(
                    holds(&keys, q, b) && b.width() <= 1,
                    "{} q={q}",
                    kind.name()
                );
            }
        }
    }

    #[test]
    fn an_empty_key_set_answers_zero_zero() {
        for kind in Unclustered::ALL {
            let index = UnclusteredIndex::build(kind, &[]);
            let b = index.map(|i| i.search(42)).ok();
            assert_eq!(b, Some(Bound { lo: 0, hi: 0 }), "{}", kind.name());
        }
    }

    #[test]
    fn names_parse_back_and_all_lists_families_then_unclustered() {
        for name in IndexName::all() {
            assert_eq!(IndexName::from_name(name.name()), Ok(name));
        }
        assert_eq!(
            IndexName::parse_list("pgm, lits"),
            Ok(vec![
                IndexName::Family(Family::Pgm),
                IndexName::Unclustered(Unclustered::Lits)
            ])
        );
        let e = IndexName::from_name("nope").err().unwrap_or_default();
        assert!(e.contains("alex") && e.contains("pgm"), "{e}");
        assert_eq!(
            IndexName::all().len(),
            Family::ALL.len() + Unclustered::ALL.len()
        );
    }
}
