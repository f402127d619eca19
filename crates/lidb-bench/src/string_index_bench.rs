//! `lidb index bench` over byte-string keys (`--data text:PATH`, one key a line): LITS against
//! binary search over the same sorted strings, in one process, as the LITS paper compares them.
//!
//! The keys are sorted and deduplicated first (a text file need not be in order); each key's
//! value is its position. Lookups are keys drawn uniformly from the set (ChaCha8, the run's
//! seed). Each index gives one [`Row`] with boundary 1: `lookup` is the lower bound (LITS: the
//! first entry of `range_from(q)`; binary: the first position whose key is `>= q`), `get` the
//! point lookup (LITS: `get`; binary: an exact-match binary search). Every answer is checked
//! before any timing. `size_bytes` counts the keys' bytes and positions each holds: for binary
//! search, the array of strings (a 24-byte `Vec` header a key plus its bytes; positions are
//! implicit); for LITS, its own `size_bytes`. The rounds run the indexes round-robin and each
//! row reports its median round, as the u64 bench does.

use std::hint::black_box;
use std::time::Instant;

use lidb_updatable::{Lits, UpdatableBytesIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::index_bench::Row;
use crate::kv::hist::Histogram;
use crate::timing::{median, timer_overhead_ns};

/// The indexes this bench runs over strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringIndex {
    Binary,
    Lits,
}

impl StringIndex {
    /// Parses `binary`, `lits` or `all`, comma-separated.
    pub fn parse_list(text: &str) -> Result<Vec<StringIndex>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim) {
            match name {
                "binary" => out.push(StringIndex::Binary),
                "lits" => out.push(StringIndex::Lits),
                "all" => out.extend([StringIndex::Binary, StringIndex::Lits]),
                other => {
                    return Err(format!(
                        "{other:?} does not take string keys: over --data text:PATH the indexes are binary and lits"
                    ));
                }
            }
        }
        out.dedup();
        Ok(out)
    }

    fn name(self) -> &'static str {
        match self {
            StringIndex::Binary => "binary",
            StringIndex::Lits => "lits",
        }
    }
}

/// Sorted, distinct keys: what the bench builds over.
pub fn prepare(mut keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// `count` keys of `keys` drawn uniformly with `seed`.
pub fn draw_queries(keys: &[Vec<u8>], count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    if keys.is_empty() {
        return Vec::new();
    }
    (0..count)
        .filter_map(|_| keys.get(rng.gen_range(0..keys.len())).cloned())
        .collect()
}

enum Built<'a> {
    Binary(&'a [Vec<u8>]),
    Lits(Box<Lits>),
}

impl Built<'_> {
    #[inline]
    fn lower_bound(&self, q: &[u8]) -> u64 {
        match self {
            Built::Binary(keys) => keys.partition_point(|k| k.as_slice() < q) as u64,
            Built::Lits(index) => index.range_from(q).next().map_or(u64::MAX, |(_, v)| v),
        }
    }

    #[inline]
    fn get(&self, q: &[u8]) -> u64 {
        match self {
            Built::Binary(keys) => keys
                .binary_search_by(|k| k.as_slice().cmp(q))
                .map_or(u64::MAX, |i| i as u64),
            Built::Lits(index) => index.get(q).unwrap_or(u64::MAX),
        }
    }

    fn size_bytes(&self) -> u64 {
        match self {
            Built::Binary(keys) => keys
                .iter()
                .map(|k| (std::mem::size_of::<Vec<u8>>() + k.len()) as u64)
                .sum(),
            Built::Lits(index) => index.size_bytes(),
        }
    }

    fn models(&self) -> u64 {
        match self {
            Built::Binary(_) => 0,
            Built::Lits(index) => index.stats().models,
        }
    }
}

/// Mean ns of `lookup` over `queries`, one un-instrumented pass.
fn mean_ns(queries: &[Vec<u8>], lookup: impl Fn(&[u8]) -> u64) -> f64 {
    let t = Instant::now();
    let mut acc = 0u64;
    for q in queries {
        acc = acc.wrapping_add(lookup(black_box(q)));
    }
    black_box(acc);
    t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64
}

/// A wrong answer: the index and the query it answered wrongly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongAnswer {
    pub index: &'static str,
    pub query: Vec<u8>,
    pub got: u64,
}

impl std::fmt::Display for WrongAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} answered position {} for key {:?}, which is not there",
            self.index,
            self.got,
            String::from_utf8_lossy(&self.query)
        )
    }
}

impl std::error::Error for WrongAnswer {}

/// Builds each index over `keys` (sorted, distinct: see [`prepare`]), checks its answers to
/// `queries` (keys of the set) and times them; one row per index, in `indexes` order.
pub fn run(
    keys: &[Vec<u8>],
    queries: &[Vec<u8>],
    indexes: &[StringIndex],
    rounds: usize,
) -> Result<Vec<Row>, WrongAnswer> {
    let overhead = timer_overhead_ns();
    let mut built = Vec::with_capacity(indexes.len());
    for &name in indexes {
        let started = Instant::now();
        let index = match name {
            StringIndex::Binary => Built::Binary(keys),
            StringIndex::Lits => {
                let pairs: Vec<(&[u8], u64)> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| (k.as_slice(), i as u64))
                    .collect();
                // The keys are sorted and distinct, which is all a bulk load refuses.
                match Lits::bulk_load(&pairs) {
                    Ok(lits) => Built::Lits(Box::new(lits)),
                    Err(_) => unreachable!("prepare() sorts and deduplicates the keys"),
                }
            }
        };
        let build_ns = started.elapsed().as_nanos() as f64;
        for q in queries {
            for got in [index.lower_bound(q), index.get(q)] {
                if keys.get(got as usize) != Some(q) {
                    return Err(WrongAnswer {
                        index: name.name(),
                        query: q.clone(),
                        got,
                    });
                }
            }
        }
        built.push((name, index, build_ns));
    }
    let mut lookups: Vec<Vec<f64>> = vec![Vec::new(); built.len()];
    let mut gets: Vec<Vec<f64>> = vec![Vec::new(); built.len()];
    for _ in 0..rounds.max(1) {
        for ((_, index, _), (l, g)) in built.iter().zip(lookups.iter_mut().zip(gets.iter_mut())) {
            l.push(mean_ns(queries, |q| index.lower_bound(q)));
            g.push(mean_ns(queries, |q| index.get(q)));
        }
    }
    let n = keys.len() as u64;
    let per_key = |v: f64| if n == 0 { 0.0 } else { v / n as f64 };
    Ok(built
        .iter()
        .zip(lookups.iter_mut().zip(gets.iter_mut()))
        .map(|((name, index, build_ns), (l, g))| {
            let tail: Vec<f64> = queries
                .iter()
                .take(200_000)
                .map(|q| {
                    let t = Instant::now();
                    black_box(index.lower_bound(black_box(q)));
                    (t.elapsed().as_nanos() as f64 - overhead).max(0.0)
                })
                .collect();
            let size = index.size_bytes();
            Row {
                index: name.name().to_string(),
                boundary: 1,
                keys: n,
                segments: index.models(),
                size_bytes: size,
                bits_per_key: per_key(size as f64 * 8.0),
                build_ns_per_key: per_key(*build_ns),
                lookup_ns_mean: median(l),
                lookup_ns_p99: Histogram::of_ns(&tail).percentile_ns(99.0),
                get_ns_mean: median(g),
                bound_width_mean: 1.0,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> Vec<Vec<u8>> {
        let mut x = 9u64;
        prepare(
            (0..5000)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("user{:x}/{}", x % 100_000, i % 7).into_bytes()
                })
                .collect(),
        )
    }

    #[test]
    fn both_indexes_answer_every_query_and_report_their_sizes() {
        let keys = words();
        let queries = draw_queries(&keys, 2000, 1);
        assert_eq!(queries.len(), 2000);
        let rows = run(
            &keys,
            &queries,
            &[StringIndex::Binary, StringIndex::Lits],
            1,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = rows.iter().map(|r| r.index.as_str()).collect();
        assert_eq!(names, ["binary", "lits"]);
        let key_bytes: u64 = keys.iter().map(|k| k.len() as u64).sum();
        for row in &rows {
            assert_eq!(row.keys, keys.len() as u64);
            assert!(row.size_bytes >= key_bytes, "{row:?}");
            assert!(row.lookup_ns_mean > 0.0 && row.get_ns_mean > 0.0, "{row:?}");
        }
    }

    #[test]
    fn prepare_sorts_and_deduplicates_and_names_parse() {
        let keys = prepare(vec![
            b"b".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
            Vec::new(),
        ]);
        assert_eq!(keys, [Vec::new(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            StringIndex::parse_list("all"),
            Ok(vec![StringIndex::Binary, StringIndex::Lits])
        );
        assert!(StringIndex::parse_list("binary,alex").is_err());
    }
}
