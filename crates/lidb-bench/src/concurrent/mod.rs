//! `lidb bench concurrent`: concurrent in-memory indexes behind one trait ([`ConcurrentIndex`]),
//! run with YCSB mixes A-F or pure inserts at several thread counts (FINEdex paper, section 5).
//!
//! One run = one (index, workload, thread count): build the index over the loaded keys (timed),
//! start the threads together on a barrier, each runs `ops / threads` operations (or stops at
//! the time bound), then rows per operation type and "all". Every answer is checked; a failed
//! or wrong operation counts as an error, not as throughput, and the caller fails on errors.
//!
//! Threads: [`run`] spawns the workers with `std::thread::scope`; nothing outlives it.

mod delta;
mod fine;
mod index;
mod keys;
mod peers;
mod worker;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use lidb_data::{Generator, RequestDistribution, Workload as Ycsb};
use serde::Serialize;

pub use delta::LiDelta;
pub use fine::FinePeer;
pub use index::{ConcurrentIndex, IndexKind, Retrains, build};
pub use keys::{KeySplit, value_of};
pub use peers::{BTreeRwLock, CongeePeer, SccTree, SkipMapPeer};
pub use worker::SAMPLE_EVERY;
use worker::{OP_NAMES, Stream, ThreadResult, Work, run_thread};

/// A workload: a YCSB mix over the loaded keys, or inserts of fresh keys only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    Ycsb(Ycsb),
    Insert,
}

impl Workload {
    /// Parses a comma-separated list of a..f and insert.
    pub fn parse_list(text: &str) -> Result<Vec<Workload>, String> {
        text.split(',')
            .map(|w| match w.trim() {
                "insert" => Ok(Workload::Insert),
                w => Ycsb::from_name(w)
                    .map(Workload::Ycsb)
                    .map_err(|e| format!("{e}, insert")),
            })
            .collect()
    }

    /// The name in rows.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Ycsb(w) => w.name(),
            Workload::Insert => "insert",
        }
    }

    /// Fresh keys one thread may insert during `ops` operations.
    fn fresh_per_thread(self, ops: usize) -> usize {
        match self {
            Workload::Insert => ops,
            // 5% inserts in D and E: twice the expectation plus a margin.
            Workload::Ycsb(w) if w.mix().insert > 0.0 => ops / 10 + 100,
            Workload::Ycsb(_) => 0,
        }
    }
}

/// How reads, updates and scans pick their records (D always reads the latest inserted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Uniform,
    Zipf,
}

/// A whole experiment.
#[derive(Debug, Clone)]
pub struct Config {
    pub indexes: Vec<IndexKind>,
    pub workloads: Vec<Workload>,
    pub threads: Vec<usize>,
    /// Keys bulk-loaded.
    pub records: usize,
    /// Operations per run, split evenly between its threads.
    pub ops: usize,
    pub distribution: Distribution,
    /// A thread stops early once this much time has passed since the start.
    pub max_duration: Duration,
    pub seed: u64,
    pub progress: bool,
    /// A counting global allocator of the binary, if it has one: measures the bulk load.
    pub alloc_counter: Option<AllocCounter>,
}

/// Hooks of a counting global allocator: `start` zeroes and turns counting on, `stop` turns it
/// off and returns the bytes allocated and not freed meanwhile. Counting is off while the
/// workers run, so it costs them one relaxed load of a flag per allocation.
#[derive(Debug, Clone, Copy)]
pub struct AllocCounter {
    pub start: fn(),
    pub stop: fn() -> u64,
}

impl Config {
    /// Fresh keys the data set must hold beyond the records.
    pub fn fresh_needed(&self) -> usize {
        self.workloads
            .iter()
            .flat_map(|w| {
                self.threads
                    .iter()
                    .map(move |&t| w.fresh_per_thread(self.ops / t.max(1)) * t.max(1))
            })
            .max()
            .unwrap_or(0)
    }
}

/// One output row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub index: String,
    pub concurrent: bool,
    pub workload: String,
    pub threads: usize,
    pub op: String,
    /// Checked operations of this type.
    pub ops: u64,
    pub errors: u64,
    pub seconds: f64,
    pub kops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Heap bytes per loaded key right after the bulk load: the index's own report (finedex),
    /// or else what the counting allocator saw the build allocate; `None`: neither.
    pub bytes_per_key: Option<f64>,
    pub bytes_source: &'static str,
    /// Heap bytes per loaded key the counting allocator saw the build allocate (every index,
    /// finedex included, allocator overhead excluded); `None` without a counting allocator.
    pub counted_bytes_per_key: Option<f64>,
    /// Heap bytes per live key (loaded plus inserted) at the end of the run, from the index's
    /// own report (finedex); `None` for the others.
    pub end_bytes_per_key: Option<f64>,
    pub build_ms: f64,
    /// Retrainings during the build and the run, and their total time (finedex; else `None`).
    pub level_bin_retrains: Option<u64>,
    pub level_bin_retrain_ms: Option<f64>,
    pub model_retrains: Option<u64>,
    pub model_retrain_ms: Option<f64>,
}

/// The rows, and the first error of a run that had any.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Builds an index of a kind over the loaded entries (keys strictly increasing).
pub type Builder = dyn Fn(IndexKind, &[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String>;

/// Runs every (index, workload, threads) of `cfg` over `split`.
pub fn run(cfg: &Config, split: &KeySplit) -> Result<Report, String> {
    run_with(cfg, split, &build)
}

/// [`run`] with the indexes made by `builder` (tests pass a broken one).
pub fn run_with(cfg: &Config, split: &KeySplit, builder: &Builder) -> Result<Report, String> {
    let entries = split.sorted_entries();
    let runs: Vec<(IndexKind, Workload, usize)> = cfg
        .indexes
        .iter()
        .flat_map(|&i| {
            cfg.workloads
                .iter()
                .flat_map(move |&w| cfg.threads.iter().map(move |&t| (i, w, t)))
        })
        .collect();
    let bar = crate::progress::bar((runs.len() * cfg.ops) as u64, "concurrent");
    if !cfg.progress {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut report = Report::default();
    for (kind, workload, threads) in runs {
        bar.set_message(format!("{} {} t={threads}", kind.name(), workload.name()));
        if let Some(c) = cfg.alloc_counter {
            (c.start)();
        }
        let t0 = Instant::now();
        let index = builder(kind, &entries)?;
        let build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let counted = cfg.alloc_counter.map(|c| (c.stop)());
        let loaded_keys = entries.len().max(1) as f64;
        let (bytes_per_key, bytes_source) = match (index.heap_bytes(), counted) {
            (Some(b), _) => (Some(b as f64 / loaded_keys), "index"),
            (None, Some(b)) => (Some(b as f64 / loaded_keys), "allocator"),
            (None, None) => (None, "n/a"),
        };
        if !index.concurrent() && threads > 1 {
            bar.inc(cfg.ops as u64);
            continue;
        }
        let (results, seconds) = run_threads(cfg, split, &*index, workload, threads, &bar)?;
        check_inserted(&*index, split, workload, threads, cfg.ops, &mut report);
        let retrains = index.retrains();
        let concurrent = index.concurrent();
        let inserted: u64 = results.iter().filter_map(|r| r.done.get(2)).sum();
        let live_keys = (entries.len() as u64 + inserted).max(1) as f64;
        let end_bytes_per_key = index.heap_bytes().map(|b| b as f64 / live_keys);
        drop(index);
        let base = Row {
            index: kind.name().into(),
            concurrent,
            workload: workload.name().into(),
            threads,
            op: String::new(),
            ops: 0,
            errors: 0,
            seconds,
            kops_per_s: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            bytes_per_key,
            bytes_source,
            counted_bytes_per_key: counted.map(|b| b as f64 / loaded_keys),
            end_bytes_per_key,
            build_ms,
            level_bin_retrains: retrains.map(|r| r.level_bin),
            level_bin_retrain_ms: retrains.map(|r| r.level_bin_ms),
            model_retrains: retrains.map(|r| r.model),
            model_retrain_ms: retrains.map(|r| r.model_ms),
        };
        rows_of(&base, &results, &mut report);
    }
    bar.finish_and_clear();
    Ok(report)
}

fn run_threads(
    cfg: &Config,
    split: &KeySplit,
    index: &dyn ConcurrentIndex,
    workload: Workload,
    threads: usize,
    bar: &indicatif::ProgressBar,
) -> Result<(Vec<ThreadResult>, f64), String> {
    let per_thread = cfg.ops / threads;
    let fresh_per_thread = workload.fresh_per_thread(per_thread);
    let mut streams = Vec::with_capacity(threads);
    for t in 0..threads {
        streams.push(match workload {
            Workload::Insert => Stream::Inserts,
            Workload::Ycsb(w) => {
                let dist = match (w, cfg.distribution) {
                    (Ycsb::D, _) => RequestDistribution::Latest,
                    (_, Distribution::Uniform) => RequestDistribution::Uniform,
                    (_, Distribution::Zipf) => RequestDistribution::Zipfian {
                        theta: lidb_data::zipf::ZIPFIAN_CONSTANT,
                    },
                };
                let seed = cfg.seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                Stream::Ycsb(Box::new(
                    Generator::new(w, split.loaded.len() as u64, Some(dist), seed)
                        .map_err(|e| e.to_string())?,
                ))
            }
        });
    }
    let barrier = Barrier::new(threads + 1);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(t, stream)| {
                let work = Work {
                    loaded: &split.loaded,
                    fresh: split.fresh_chunk(t, fresh_per_thread),
                    ops: per_thread as u64,
                    deadline: cfg.max_duration,
                };
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    run_thread(index, stream, &work, Instant::now(), bar)
                })
            })
            .collect();
        barrier.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| ThreadResult {
                    errors: 1,
                    first_error: Some("a worker thread panicked".into()),
                    ..ThreadResult::default()
                })
            })
            .collect::<Vec<ThreadResult>>()
    });
    let first = results.iter().filter_map(|r| r.span.map(|s| s.0)).min();
    let last = results.iter().filter_map(|r| r.span.map(|s| s.1)).max();
    let seconds = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Ok((results, seconds))
}

/// After an insert run: every key a thread inserted is there with its value (untimed).
fn check_inserted(
    index: &dyn ConcurrentIndex,
    split: &KeySplit,
    workload: Workload,
    threads: usize,
    ops: usize,
    report: &mut Report,
) {
    if workload != Workload::Insert {
        return;
    }
    let per_thread = ops / threads;
    for t in 0..threads {
        for &k in split.fresh_chunk(t, per_thread) {
            // Threads stopped by the time bound inserted a prefix of their chunk.
            if let Some(v) = index.get(k)
                && v != value_of(k)
            {
                report.errors += 1;
                report
                    .first_error
                    .get_or_insert(format!("after inserts: key {k} has value {v}"));
            }
        }
    }
}

fn rows_of(base: &Row, results: &[ThreadResult], report: &mut Report) {
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    report.errors += errors;
    if report.first_error.is_none() {
        report.first_error = results.iter().find_map(|r| r.first_error.clone());
    }
    let secs = base.seconds.max(1e-9);
    let mut all_hist = crate::kv::hist::Histogram::new();
    let mut all_ops = 0;
    for (kind, name) in OP_NAMES.iter().enumerate() {
        let ops: u64 = results.iter().filter_map(|r| r.done.get(kind)).sum();
        if ops == 0 {
            continue;
        }
        let mut h = crate::kv::hist::Histogram::new();
        for r in results {
            if let Some(x) = r.hist.get(kind) {
                h.merge(x);
            }
        }
        all_hist.merge(&h);
        all_ops += ops;
        report.rows.push(Row {
            op: (*name).into(),
            ops,
            kops_per_s: ops as f64 / secs / 1e3,
            p50_us: h.percentile_us(50.0),
            p99_us: h.percentile_us(99.0),
            ..base.clone()
        });
    }
    report.rows.push(Row {
        op: "all".into(),
        ops: all_ops,
        errors,
        kops_per_s: all_ops as f64 / secs / 1e3,
        p50_us: all_hist.percentile_us(50.0),
        p99_us: all_hist.percentile_us(99.0),
        ..base.clone()
    });
}

/// The rows as an aligned table.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "index",
        "workload",
        "threads",
        "op",
        "ops",
        "kops/s",
        "p50_us",
        "p99_us",
        "B/key",
        "counted_B/key",
        "build_ms",
        "retrains",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.index.clone(),
                r.workload.clone(),
                r.threads.to_string(),
                r.op.clone(),
                r.ops.to_string(),
                format!("{:.1}", r.kops_per_s),
                format!("{:.2}", r.p50_us),
                format!("{:.2}", r.p99_us),
                r.bytes_per_key
                    .map_or("n/a".into(), |b| format!("{b:.1} ({})", r.bytes_source)),
                r.counted_bytes_per_key
                    .map_or("n/a".into(), |b| format!("{b:.1}")),
                format!("{:.1}", r.build_ms),
                match (r.level_bin_retrains, r.model_retrains) {
                    (Some(l), Some(m)) => format!(
                        "{l} bin ({:.1} ms)/{m} model ({:.1} ms)",
                        r.level_bin_retrain_ms.unwrap_or(0.0),
                        r.model_retrain_ms.unwrap_or(0.0)
                    ),
                    _ => "-".into(),
                },
            ]
        })
        .collect();
    crate::table::render(&header, &cells)
}
