//! `lidb index bench`: build every requested (family, boundary) over one key set and measure size,
//! build speed and in-memory lookup time on existing keys.
//!
//! A lookup is the full path a caller pays: `search` (prediction) plus the last-mile binary search
//! inside the returned range, over the same sorted keys. Every lookup's answer is checked, so a
//! wrong index fails the benchmark instead of looking fast. Times come from one thread; the mean is
//! from an un-instrumented loop, the p99 from per-lookup timings with the timer's cost removed.

use std::hint::black_box;
use std::time::Instant;

use lidb_index::{Family, LearnedIndex, Params, build, lower_bound_with};
use serde::Serialize;

use crate::progress;
use crate::timing::{percentile, timer_overhead_ns};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub families: Vec<Family>,
    pub boundaries: Vec<u64>,
    /// Family parameters; `boundary` is replaced by each entry of `boundaries`.
    pub params: Params,
    /// Lookups of existing keys per configuration.
    pub queries: usize,
    pub seed: u64,
    /// Draw a progress bar on stderr (only shown on a terminal).
    pub progress: bool,
}

/// One measured configuration. Field names are the JSON names of `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub index: String,
    pub boundary: u64,
    pub keys: u64,
    pub segments: u64,
    pub size_bytes: u64,
    pub bits_per_key: f64,
    pub build_ns_per_key: f64,
    pub lookup_ns_mean: f64,
    pub lookup_ns_p99: f64,
    pub bound_width_mean: f64,
}

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Index(lidb_index::Error),
    /// A lookup returned the wrong position: a bug in the index, reported rather than timed.
    WrongAnswer {
        index: Family,
        boundary: u64,
        query: u64,
        got: u64,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Index(e) => write!(f, "{e}"),
            Error::WrongAnswer {
                index,
                boundary,
                query,
                got,
            } => write!(
                f,
                "{index} at boundary {boundary} answered position {got} for key {query}, which is not there"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<lidb_index::Error> for Error {
    fn from(e: lidb_index::Error) -> Self {
        Error::Index(e)
    }
}

/// Builds repeatedly until at least this much time has passed, to time small builds fairly.
const MIN_BUILD_TIME_NS: u128 = 200_000_000;
const MAX_BUILD_REPEATS: u32 = 20;
/// Per-lookup timings are taken over at most this many lookups (the tail needs no more).
const MAX_TAIL_SAMPLES: usize = 200_000;

/// Runs every configuration over `keys` (sorted) with lookups of `queries` (keys that exist).
pub fn run(keys: &[u64], queries: &[u64], cfg: &Config) -> Result<Vec<Row>, Error> {
    let overhead = timer_overhead_ns();
    let total = (cfg.families.len() * cfg.boundaries.len()) as u64;
    let bar = cfg.progress.then(|| progress::bar(total, "index bench"));
    let mut rows = Vec::new();
    for &family in &cfg.families {
        for &b in &cfg.boundaries {
            if let Some(bar) = &bar {
                bar.set_message(format!("{family} B={b}"));
            }
            let params = Params {
                boundary: b,
                ..cfg.params.clone()
            };
            rows.push(measure(family, keys, queries, &params, overhead)?);
            if let Some(bar) = &bar {
                bar.inc(1);
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(rows)
}

fn measure(
    family: Family,
    keys: &[u64],
    queries: &[u64],
    params: &Params,
    overhead_ns: f64,
) -> Result<Row, Error> {
    let n = keys.len() as u64;
    let started = Instant::now();
    let mut index = build(family, keys, params)?;
    let mut repeats = 1u32;
    while started.elapsed().as_nanos() < MIN_BUILD_TIME_NS && repeats < MAX_BUILD_REPEATS {
        index = build(family, keys, params)?;
        repeats += 1;
    }
    let build_ns = started.elapsed().as_nanos() as f64 / f64::from(repeats);
    let index = index.as_ref();

    check_answers(index, keys, queries, params.boundary)?;
    let widths: u64 = queries.iter().map(|&q| index.search(q).width()).sum();

    // Warm up, then the mean from one un-instrumented pass.
    lookup_all(
        index,
        keys,
        queries.get(..queries.len().min(10_000)).unwrap_or_default(),
    );
    let t = Instant::now();
    lookup_all(index, keys, queries);
    let mean_ns = t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64;

    let mut tail: Vec<f64> = queries
        .iter()
        .take(MAX_TAIL_SAMPLES)
        .map(|&q| {
            let t = Instant::now();
            black_box(lower_bound_with(index, keys, black_box(q)));
            (t.elapsed().as_nanos() as f64 - overhead_ns).max(0.0)
        })
        .collect();
    let p99_ns = percentile(&mut tail, 99.0);

    let size = index.size_bytes();
    let per_key = |v: f64| if n == 0 { 0.0 } else { v / n as f64 };
    Ok(Row {
        index: family.name().to_string(),
        boundary: params.boundary,
        keys: n,
        segments: index.stats().models,
        size_bytes: size,
        bits_per_key: per_key(size as f64 * 8.0),
        build_ns_per_key: per_key(build_ns),
        lookup_ns_mean: mean_ns,
        lookup_ns_p99: p99_ns,
        bound_width_mean: widths as f64 / queries.len().max(1) as f64,
    })
}

fn lookup_all(index: &dyn LearnedIndex, keys: &[u64], queries: &[u64]) {
    let mut acc = 0u64;
    for &q in queries {
        acc = acc.wrapping_add(lower_bound_with(index, keys, black_box(q)));
    }
    black_box(acc);
}

fn check_answers(
    index: &dyn LearnedIndex,
    keys: &[u64],
    queries: &[u64],
    boundary: u64,
) -> Result<(), Error> {
    for &q in queries {
        let got = lower_bound_with(index, keys, q);
        if keys.get(got as usize) != Some(&q) {
            return Err(Error::WrongAnswer {
                index: index.family(),
                boundary,
                query: q,
                got,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_reports_its_configuration_and_sane_figures() {
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * i).collect();
        let queries: Vec<u64> = keys.iter().step_by(7).copied().collect();
        let cfg = Config {
            families: vec![Family::Fp, Family::Binary],
            boundaries: vec![8, 64],
            params: Params::new(2),
            queries: queries.len(),
            seed: 1,
            progress: false,
        };
        let rows = run(&keys, &queries, &cfg).unwrap_or_default();
        assert_eq!(rows.len(), 4);
        let fp8 = rows.iter().find(|r| r.index == "fp" && r.boundary == 8);
        let fp8 = fp8.map(|r| (r.segments, r.size_bytes, r.bound_width_mean));
        // 20_000 keys in blocks of 8: 2_500 fences of 8 bytes, plus count and frame.
        assert_eq!(fp8, Some((2_500, 36 + 8 + 8 * 2_500, 8.0)));
        let bin = rows
            .iter()
            .find(|r| r.index == "binary")
            .map(|r| r.bound_width_mean);
        assert_eq!(bin, Some(20_000.0));
        assert!(
            rows.iter()
                .all(|r| r.keys == 20_000 && r.lookup_ns_mean > 0.0)
        );
    }
}
