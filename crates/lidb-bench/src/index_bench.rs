//! `lidb index bench`: build every requested (family, boundary) over one key set and measure size,
//! build speed and in-memory lookup time on existing keys.
//!
//! A lookup is the full path a caller pays: `search` (prediction) plus the last-mile binary search
//! inside the returned range, over the same sorted keys. Every lookup's answer is checked, so a
//! wrong index fails the benchmark instead of looking fast. Times come from one thread; the mean is
//! from an un-instrumented loop, the p99 from per-lookup timings with the timer's cost removed.
//!
//! The unclustered indexes (`alex`, `lipp`, `dili`, `lits`; see `unclustered.rs`) take the same
//! path with one row each, whatever the boundaries: they are bulk-loaded from the (key, first
//! position) pairs of the sorted keys, a lookup is the first entry of `range_from(q)` (the exact
//! position, no last-mile search), `boundary` and `bound_width_mean` are 1, `segments` is their
//! model count and `size_bytes` their heap bytes, the keys and positions they hold included.
//!
//! Rounds are interleaved: each configuration's lookups run once per round, round-robin, and a
//! row reports the median of its rounds, so background noise on a shared machine hits the
//! configurations of a group alike. A group is one index's boundaries by default, and its rows
//! are handed out (printed) as it finishes; with [`Config::interleave_all`] every configuration
//! is one group (`--interleave`), which is how to compare two indexes' times at their closest,
//! at the cost of printing nothing until the end.

use std::hint::black_box;
use std::time::Instant;

use lidb_index::{LearnedIndex, Params, build, lower_bound_with};
use serde::Serialize;

use crate::kv::hist::Histogram;
use crate::progress;
use crate::timing::{median, timer_overhead_ns};
use crate::unclustered::{IndexName, Pairs, UnclusteredIndex};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Families run once per boundary; unclustered indexes once.
    pub indexes: Vec<IndexName>,
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
    /// Interleave the rounds of every configuration (one group), instead of one index at a time.
    pub interleave_all: bool,
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
    /// A point lookup of a present key: an unclustered index's `get` (exact match, no
    /// iterator); for a family the same lower-bound lookup as `lookup_ns_mean`, timed again.
    pub get_ns_mean: f64,
    pub bound_width_mean: f64,
}

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Index(lidb_index::Error),
    /// An unclustered index refused its bulk load (the keys were not sorted).
    BulkLoad {
        index: IndexName,
        error: lidb_updatable::BulkLoadError,
    },
    /// A lookup returned the wrong position: a bug in the index, reported rather than timed.
    WrongAnswer {
        index: IndexName,
        boundary: u64,
        query: u64,
        got: u64,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Index(e) => write!(f, "{e}"),
            Error::BulkLoad { index, error } => write!(f, "{index}: {error}"),
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

/// The `boundary` of an unclustered index's row: every answer is at most one position wide.
pub const UNCLUSTERED_BOUNDARY: u64 = 1;

/// One built configuration.
enum Built {
    Family(Box<dyn LearnedIndex>),
    Unclustered(UnclusteredIndex),
}

impl Built {
    /// `lower_bound(q)` over `keys`, the full lookup of a caller.
    #[inline]
    fn lower_bound(&self, keys: &[u64], q: u64) -> u64 {
        match self {
            Built::Family(index) => lower_bound_with(index.as_ref(), keys, q),
            Built::Unclustered(index) => index.lower_bound(q),
        }
    }

    /// The position of present key `q` by a point lookup (see [`Row::get_ns_mean`]).
    #[inline]
    fn get(&self, keys: &[u64], q: u64) -> u64 {
        match self {
            Built::Family(index) => lower_bound_with(index.as_ref(), keys, q),
            Built::Unclustered(index) => index.get(q),
        }
    }

    /// Width of the range answered for `q`.
    fn width(&self, q: u64) -> u64 {
        match self {
            Built::Family(index) => index.search(q).width(),
            Built::Unclustered(index) => index.search(q).width(),
        }
    }

    fn models(&self) -> u64 {
        match self {
            Built::Family(index) => index.stats().models,
            Built::Unclustered(index) => index.stats().models,
        }
    }

    fn size_bytes(&self) -> u64 {
        match self {
            Built::Family(index) => index.size_bytes(),
            Built::Unclustered(index) => index.size_bytes(),
        }
    }
}

/// Runs every configuration over `keys` (sorted) with lookups of `queries` (keys that exist)
/// and returns every row (see [`run_each`]).
pub fn run(keys: &[u64], queries: &[u64], cfg: &Config) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    run_each(keys, queries, cfg, &mut |group| {
        rows.extend_from_slice(group);
        Ok(())
    })?;
    Ok(rows)
}

/// Runs every configuration in groups (one index's boundaries, or all: see the module doc) and
/// calls `each` with a group's rows as soon as they are measured.
pub fn run_each(
    keys: &[u64],
    queries: &[u64],
    cfg: &Config,
    each: &mut dyn FnMut(&[Row]) -> Result<(), Error>,
) -> Result<(), Error> {
    let overhead = timer_overhead_ns();
    let configs: Vec<(IndexName, u64)> = cfg
        .indexes
        .iter()
        .flat_map(|&name| match name {
            IndexName::Family(_) => cfg.boundaries.iter().map(|&b| (name, b)).collect(),
            IndexName::Unclustered(_) => vec![(name, UNCLUSTERED_BOUNDARY)],
        })
        .collect();
    let rounds = cfg.rounds.max(1);
    let steps = (configs.len() * (1 + rounds)) as u64;
    let bar = cfg.progress.then(|| progress::bar(steps, "index bench"));
    let groups: Vec<Vec<(IndexName, u64)>> = if cfg.interleave_all {
        vec![configs]
    } else {
        let mut groups: Vec<Vec<(IndexName, u64)>> = Vec::new();
        for c in configs {
            match groups.last_mut() {
                Some(g) if g.first().is_some_and(|f| f.0 == c.0) => g.push(c),
                _ => groups.push(vec![c]),
            }
        }
        groups
    };
    for group in &groups {
        let rows = run_group(keys, queries, cfg, group, overhead, &bar)?;
        if let Some(bar) = &bar {
            bar.suspend(|| each(&rows))?;
        } else {
            each(&rows)?;
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(())
}

/// Builds and times one group of configurations, its rounds interleaved.
fn run_group(
    keys: &[u64],
    queries: &[u64],
    cfg: &Config,
    configs: &[(IndexName, u64)],
    overhead: f64,
    bar: &Option<indicatif::ProgressBar>,
) -> Result<Vec<Row>, Error> {
    let rounds = cfg.rounds.max(1);
    let tick = |msg: String| {
        if let Some(bar) = bar {
            bar.set_message(msg);
            bar.inc(1);
        }
    };
    let mut built = Vec::with_capacity(configs.len());
    for &(name, b) in configs {
        let params = Params {
            boundary: b,
            ..cfg.params.clone()
        };
        let (index, build_ns) = timed_build(name, keys, &params)?;
        check_answers(&index, name, keys, queries, b)?;
        built.push((index, build_ns));
        tick(format!("built {name} B={b}"));
    }
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); built.len()];
    let mut get_means: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); built.len()];
    let warm = queries.get(..queries.len().min(10_000)).unwrap_or_default();
    let per_query = |t: Instant| t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64;
    for round in 0..rounds {
        for (((index, _), samples), get_samples) in
            built.iter().zip(means.iter_mut()).zip(get_means.iter_mut())
        {
            lookup_all(index, keys, warm, Built::lower_bound);
            let t = Instant::now();
            lookup_all(index, keys, queries, Built::lower_bound);
            samples.push(per_query(t));
            lookup_all(index, keys, warm, Built::get);
            let t = Instant::now();
            lookup_all(index, keys, queries, Built::get);
            get_samples.push(per_query(t));
            tick(format!("round {} of {rounds}", round + 1));
        }
    }
    let n = keys.len() as u64;
    let per_key = |v: f64| if n == 0 { 0.0 } else { v / n as f64 };
    let mut rows = Vec::with_capacity(built.len());
    for ((((index, build_ns), samples), get_samples), &(name, b)) in built
        .iter()
        .zip(&mut means)
        .zip(&mut get_means)
        .zip(configs)
    {
        let widths: u64 = queries.iter().map(|&q| index.width(q)).sum();
        let size = index.size_bytes();
        rows.push(Row {
            index: name.name().to_string(),
            boundary: b,
            keys: n,
            segments: index.models(),
            size_bytes: size,
            bits_per_key: per_key(size as f64 * 8.0),
            build_ns_per_key: per_key(*build_ns),
            lookup_ns_mean: median(samples),
            lookup_ns_p99: tail_p99(index, keys, queries, overhead),
            get_ns_mean: median(get_samples),
            bound_width_mean: widths as f64 / queries.len().max(1) as f64,
        });
    }
    Ok(rows)
}

/// Builds repeatedly until MIN_BUILD_TIME_NS has passed; returns the index and ns per build.
/// An unclustered index's input pairs are made once, before the clock starts.
fn timed_build(name: IndexName, keys: &[u64], params: &Params) -> Result<(Built, f64), Error> {
    match name {
        IndexName::Family(family) => {
            repeat_timed(|| Ok(Built::Family(build(family, keys, params)?)))
        }
        IndexName::Unclustered(kind) => {
            let pairs = Pairs::new(kind, keys);
            repeat_timed(|| {
                UnclusteredIndex::bulk_load(kind, &pairs, keys.len() as u64)
                    .map(Built::Unclustered)
                    .map_err(|error| Error::BulkLoad { index: name, error })
            })
        }
    }
}

fn repeat_timed(
    mut build_once: impl FnMut() -> Result<Built, Error>,
) -> Result<(Built, f64), Error> {
    let started = Instant::now();
    let mut index = build_once()?;
    let mut repeats = 1u32;
    while started.elapsed().as_nanos() < MIN_BUILD_TIME_NS && repeats < MAX_BUILD_REPEATS {
        index = build_once()?;
        repeats += 1;
    }
    Ok((
        index,
        started.elapsed().as_nanos() as f64 / f64::from(repeats),
    ))
}

/// The 99th percentile of per-lookup times, the timer's own cost removed.
fn tail_p99(index: &Built, keys: &[u64], queries: &[u64], overhead_ns: f64) -> f64 {
    let tail: Vec<f64> = queries
        .iter()
        .take(MAX_TAIL_SAMPLES)
        .map(|&q| {
            let t = Instant::now();
            black_box(index.lower_bound(keys, black_box(q)));
            (t.elapsed().as_nanos() as f64 - overhead_ns).max(0.0)
        })
        .collect();
    Histogram::of_ns(&tail).percentile_ns(99.0)
}

fn lookup_all(
    index: &Built,
    keys: &[u64],
    queries: &[u64],
    lookup: impl Fn(&Built, &[u64], u64) -> u64,
) {
    let mut acc = 0u64;
    for &q in queries {
        acc = acc.wrapping_add(lookup(index, keys, black_box(q)));
    }
    black_box(acc);
}

fn check_answers(
    index: &Built,
    name: IndexName,
    keys: &[u64],
    queries: &[u64],
    boundary: u64,
) -> Result<(), Error> {
    for &q in queries {
        for got in [index.lower_bound(keys, q), index.get(keys, q)] {
            if keys.get(got as usize) != Some(&q) {
                return Err(Error::WrongAnswer {
                    index: name,
                    boundary,
                    query: q,
                    got,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use lidb_index::Family;

    use super::*;
    use crate::unclustered::Unclustered;

    #[test]
    fn every_row_reports_its_configuration_and_sane_figures() {
        let keys: Vec<u64> = (0..20_000u64).map(|i| i * i).collect();
        let queries: Vec<u64> = keys.iter().step_by(7).copied().collect();
        let cfg = Config {
            indexes: vec![
                IndexName::Family(Family::Fp),
                IndexName::Family(Family::Binary),
                IndexName::Unclustered(Unclustered::Alex),
                IndexName::Unclustered(Unclustered::Lits),
            ],
            boundaries: vec![8, 64],
            params: Params::new(2),
            queries: queries.len(),
            seed: 1,
            rounds: 3,
            progress: false,
            interleave_all: false,
        };
        let rows = run(&keys, &queries, &cfg).unwrap_or_default();
        assert_eq!(rows.len(), 6);
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
        // One row per unclustered index whatever the boundaries, its answers one position wide.
        for name in ["alex", "lits"] {
            let row = rows.iter().find(|r| r.index == name);
            let row = row.map(|r| (r.boundary, r.bound_width_mean, r.size_bytes > 20_000 * 16));
            assert_eq!(row, Some((1, 1.0, true)), "{name}");
        }
    }
}
