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
    /// Interleaved timing rounds; each row reports the median of its rounds.
    pub rounds: usize,
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
///
/// Every index is built first; then the lookup passes run round-robin over all configurations
/// for `cfg.rounds` rounds, and each configuration reports the median of its rounds. Background
/// noise on a shared machine therefore hits every configuration alike, and the ratios between
/// rows come from interleaved measurements of one run.
pub fn run(keys: &[u64], queries: &[u64], cfg: &Config) -> Result<Vec<Row>, Error> {
    let overhead = timer_overhead_ns();
    let configs: Vec<(Family, u64)> = cfg
        .families
        .iter()
        .flat_map(|&f| cfg.boundaries.iter().map(move |&b| (f, b)))
        .collect();
    let rounds = cfg.rounds.max(1);
    let steps = (configs.len() * (1 + rounds)) as u64;
    let bar = cfg.progress.then(|| progress::bar(steps, "index bench"));
    let tick = |msg: String| {
        if let Some(bar) = &bar {
            bar.set_message(msg);
            bar.inc(1);
        }
    };
    let mut built = Vec::with_capacity(configs.len());
    for &(family, b) in &configs {
        let params = Params {
            boundary: b,
            ..cfg.params.clone()
        };
        let (index, build_ns) = timed_build(family, keys, &params)?;
        check_answers(index.as_ref(), keys, queries, b)?;
        built.push((index, build_ns));
        tick(format!("built {family} B={b}"));
    }
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); built.len()];
    for round in 0..rounds {
        for ((index, _), samples) in built.iter().zip(means.iter_mut()) {
            let index = index.as_ref();
            lookup_all(
                index,
                keys,
                queries.get(..queries.len().min(10_000)).unwrap_or_default(),
            );
            let t = Instant::now();
            lookup_all(index, keys, queries);
            samples.push(t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64);
            tick(format!("round {} of {rounds}", round + 1));
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let n = keys.len() as u64;
    let per_key = |v: f64| if n == 0 { 0.0 } else { v / n as f64 };
    let mut rows = Vec::with_capacity(built.len());
    for (((index, build_ns), samples), &(family, b)) in built.iter().zip(&mut means).zip(&configs) {
        let index = index.as_ref();
        let widths: u64 = queries.iter().map(|&q| index.search(q).width()).sum();
        let size = index.size_bytes();
        rows.push(Row {
            index: family.name().to_string(),
            boundary: b,
            keys: n,
            segments: index.stats().models,
            size_bytes: size,
            bits_per_key: per_key(size as f64 * 8.0),
            build_ns_per_key: per_key(*build_ns),
            lookup_ns_mean: percentile(samples, 50.0),
            lookup_ns_p99: tail_p99(index, keys, queries, overhead),
            bound_width_mean: widths as f64 / queries.len().max(1) as f64,
        });
    }
    Ok(rows)
}

/// Builds repeatedly until MIN_BUILD_TIME_NS has passed; returns the index and ns per build.
fn timed_build(
    family: Family,
    keys: &[u64],
    params: &Params,
) -> Result<(Box<dyn LearnedIndex>, f64), Error> {
    let started = Instant::now();
    let mut index = build(family, keys, params)?;
    let mut repeats = 1u32;
    while started.elapsed().as_nanos() < MIN_BUILD_TIME_NS && repeats < MAX_BUILD_REPEATS {
        index = build(family, keys, params)?;
        repeats += 1;
    }
    Ok((
        index,
        started.elapsed().as_nanos() as f64 / f64::from(repeats),
    ))
}

/// The 99th percentile of per-lookup times, the timer's own cost removed.
fn tail_p99(index: &dyn LearnedIndex, keys: &[u64], queries: &[u64], overhead_ns: f64) -> f64 {
    let mut tail: Vec<f64> = queries
        .iter()
        .take(MAX_TAIL_SAMPLES)
        .map(|&q| {
            let t = Instant::now();
            black_box(lower_bound_with(index, keys, black_box(q)));
            (t.elapsed().as_nanos() as f64 - overhead_ns).max(0.0)
        })
        .collect();
    percentile(&mut tail, 99.0)
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
            rounds: 3,
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
