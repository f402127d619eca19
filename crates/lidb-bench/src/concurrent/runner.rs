//! The runner: every (index, workload, hotspot, threads) of a [`Config`], each a build (timed)
//! and one phase of workers (two for skew), turned into rows.
//!
//! Threads: called from one thread; [`run_phase`] spawns the workers with `std::thread::scope`
//! and, while they run, samples the timeline on the calling thread. Nothing outlives a phase.

use std::sync::Barrier;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Release;
use std::time::Instant;

use lidb_data::{Generator, RequestDistribution, Workload as Ycsb};

use super::index::{ConcurrentIndex, IndexKind, build};
use super::keys::{KeySplit, value_of};
use super::rows::{PhaseResult, Row, push_rows};
use super::skew::HotWindow;
use super::timeline::{self, Progress, TimelineRow};
use super::worker::{Stream, ThreadResult, Work, run_thread};
use super::{Builder, Config, DEFAULT_HOTSPOT, Distribution, Report, Workload};

/// The hot window of one hotspot ratio and the fresh keys its runs insert (thread `t` takes
/// chunk `t` of `ops / threads`).
struct Hot {
    ratio: f64,
    window: HotWindow,
    fresh: Vec<u64>,
}

/// One run.
struct Case<'a> {
    kind: IndexKind,
    workload: Workload,
    hot: Option<&'a Hot>,
    threads: usize,
}

/// Runs every (index, workload, threads) of `cfg` over `split`.
pub fn run(cfg: &Config, split: &KeySplit) -> Result<Report, String> {
    run_with(cfg, split, &build)
}

/// [`run`] with the indexes made by `builder` (tests pass a broken one).
pub fn run_with(cfg: &Config, split: &KeySplit, builder: &Builder) -> Result<Report, String> {
    let entries = split.sorted_entries();
    let sorted: Vec<u64> = entries.iter().map(|e| e.0).collect();
    let hots = hot_sets(cfg, &sorted)?;
    let mut cases = Vec::new();
    for &kind in &cfg.indexes {
        for &workload in &cfg.workloads {
            let hot: Vec<Option<&Hot>> = match workload {
                Workload::Skew => hots.iter().map(Some).collect(),
                _ => vec![None],
            };
            for h in hot {
                for &threads in &cfg.threads {
                    cases.push(Case {
                        kind,
                        workload,
                        hot: h,
                        threads,
                    });
                }
            }
        }
    }
    let phase_ops = |c: &Case<'_>| cfg.ops as u64 * if c.hot.is_some() { 2 } else { 1 };
    let bar = crate::progress::bar(cases.iter().map(phase_ops).sum(), "concurrent");
    if !cfg.progress {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut report = Report::default();
    for case in &cases {
        let hotspot = case.hot.map(|h| h.ratio);
        bar.set_message(format!(
            "{} {}{} t={}",
            case.kind.name(),
            case.workload.name(),
            hotspot.map_or(String::new(), |r| format!(" R={r}")),
            case.threads
        ));
        if let Some(c) = cfg.alloc_counter {
            (c.start)();
        }
        let t0 = Instant::now();
        let index = builder(case.kind, &entries)?;
        let build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let counted = cfg.alloc_counter.map(|c| (c.stop)());
        let loaded_keys = entries.len().max(1) as f64;
        let built = index.footprint();
        let (bytes_per_key, bytes_source) = match (built.heap_bytes, counted) {
            (Some(b), _) => (Some(b as f64 / loaded_keys), "index"),
            (None, Some(b)) => (Some(b as f64 / loaded_keys), "allocator"),
            (None, None) => (None, "n/a"),
        };
        let model_bytes = built.model_bytes;
        if !index.concurrent() && case.threads > 1 {
            bar.inc(phase_ops(case));
            continue;
        }
        let phases = run_case(cfg, split, &sorted, &*index, case, &bar, &mut report)?;
        let retrains = index.retrains();
        let inserted: u64 = phases
            .iter()
            .flat_map(|p| &p.results)
            .filter_map(|r| r.done.get(2))
            .sum();
        let live_keys = (entries.len() as u64 + inserted).max(1) as f64;
        let end = index.footprint();
        let end_bytes_per_key = end.heap_bytes.map(|b| b as f64 / live_keys);
        let end_model_bytes = end.model_bytes;
        let end_bin_load_factor = end.bin_load_factor;
        let concurrent = index.concurrent();
        drop(index);
        let base = Row {
            row: "result",
            index: case.kind.name().into(),
            concurrent,
            workload: case.workload.name().into(),
            threads: case.threads,
            hotspot,
            hot_lo: case.hot.map(|h| h.window.lo),
            hot_hi: case.hot.map(|h| h.window.hi),
            op: String::new(),
            ops: 0,
            errors: 0,
            seconds: 0.0,
            kops_per_s: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            bytes_per_key,
            bytes_source,
            counted_bytes_per_key: counted.map(|b| b as f64 / loaded_keys),
            end_bytes_per_key,
            model_bytes,
            end_model_bytes,
            end_bin_load_factor,
            build_ms,
            level_bin_retrains: retrains.map(|r| r.level_bin),
            level_bin_retrain_ms: retrains.map(|r| r.level_bin_ms),
            model_retrains: retrains.map(|r| r.model),
            model_retrain_ms: retrains.map(|r| r.model_ms),
        };
        push_rows(&base, &phases, &mut report);
    }
    bar.finish_and_clear();
    Ok(report)
}

/// The hot window and fresh keys of every hotspot ratio, if `cfg` runs skew (before any run, so
/// that a window too small to hold `ops` fresh keys fails at once).
fn hot_sets(cfg: &Config, sorted: &[u64]) -> Result<Vec<Hot>, String> {
    if !cfg.workloads.contains(&Workload::Skew) {
        return Ok(Vec::new());
    }
    let ratios = if cfg.hotspots.is_empty() {
        vec![DEFAULT_HOTSPOT]
    } else {
        cfg.hotspots.clone()
    };
    ratios
        .into_iter()
        .map(|ratio| {
            let window = HotWindow::new(sorted, ratio, cfg.seed)
                .ok_or("the skew workload needs at least one loaded key")?;
            let fresh = window.fresh_keys(sorted, cfg.ops, ratio, cfg.seed)?;
            Ok(Hot {
                ratio,
                window,
                fresh,
            })
        })
        .collect()
}

/// The phases of one run: a YCSB mix or inserts (one phase, op "all" in the timeline), or skew's
/// inserts into the hot window and then reads of it. Checks the inserted keys after an insert
/// phase and pushes the timeline rows.
fn run_case(
    cfg: &Config,
    split: &KeySplit,
    sorted: &[u64],
    index: &dyn ConcurrentIndex,
    case: &Case<'_>,
    bar: &indicatif::ProgressBar,
    report: &mut Report,
) -> Result<Vec<PhaseResult>, String> {
    let tl = TimelineRow {
        row: "timeline",
        index: case.kind.name().into(),
        workload: case.workload.name().into(),
        threads: case.threads,
        hotspot: case.hot.map(|h| h.ratio),
        op: String::new(),
        interval: 0,
        t_ms: 0.0,
        ops: 0,
        kops_per_s: 0.0,
        level_bin_retrains: None,
        model_retrains: None,
    };
    let threads = case.threads;
    let per_thread = cfg.ops / threads;
    let mut phases = Vec::new();
    let timeline = |op: &str, samples: Vec<timeline::Sample>, report: &mut Report| {
        let base = TimelineRow {
            op: op.into(),
            ..tl.clone()
        };
        report.timeline.extend(timeline::rows(&base, &samples));
    };
    match (case.workload, case.hot) {
        (Workload::Skew, Some(hot)) => {
            let jobs = (0..threads)
                .map(|t| {
                    (
                        Stream::Inserts,
                        work(&[], chunk(&hot.fresh, t, per_thread), per_thread, cfg),
                    )
                })
                .collect();
            let (inserts, samples) = run_phase(cfg, index, jobs, bar);
            timeline("insert", samples, report);
            let chunks = (0..threads).map(|t| chunk(&hot.fresh, t, per_thread));
            let inserted = check_inserted(index, chunks, &inserts.results, report);
            let mut hot_keys = hot.window.loaded_in(sorted).to_vec();
            hot_keys.extend(inserted);
            phases.push(inserts);
            if !hot_keys.is_empty() {
                let jobs = (0..threads)
                    .map(|t| {
                        let g = generator(cfg, Ycsb::C, hot_keys.len(), t, 0x5EED)?;
                        Ok((Stream::Ycsb(g), work(&hot_keys, &[], per_thread, cfg)))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let (reads, samples) = run_phase(cfg, index, jobs, bar);
                timeline("read", samples, report);
                phases.push(reads);
            }
        }
        (workload, _) => {
            let fresh_per_thread = workload.fresh_per_thread(per_thread);
            let jobs = (0..threads)
                .map(|t| {
                    let stream = match workload {
                        Workload::Ycsb(w) => {
                            Stream::Ycsb(generator(cfg, w, split.loaded.len(), t, 0)?)
                        }
                        Workload::Insert | Workload::Skew => Stream::Inserts,
                    };
                    let fresh = split.fresh_chunk(t, fresh_per_thread);
                    Ok((stream, work(&split.loaded, fresh, per_thread, cfg)))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let (phase, samples) = run_phase(cfg, index, jobs, bar);
            timeline("all", samples, report);
            if workload == Workload::Insert {
                let chunks = (0..threads).map(|t| split.fresh_chunk(t, per_thread));
                check_inserted(index, chunks, &phase.results, report);
            }
            phases.push(phase);
        }
    }
    Ok(phases)
}

/// Thread `t`'s chunk of `per_thread` keys (empty past the end).
fn chunk(keys: &[u64], t: usize, per_thread: usize) -> &[u64] {
    let lo = t.saturating_mul(per_thread).min(keys.len());
    let hi = lo.saturating_add(per_thread).min(keys.len());
    keys.get(lo..hi).unwrap_or(&[])
}

fn work<'a>(loaded: &'a [u64], fresh: &'a [u64], ops: usize, cfg: &Config) -> Work<'a> {
    Work {
        loaded,
        fresh,
        ops: ops as u64,
        deadline: cfg.max_duration,
    }
}

/// Thread `t`'s generator of YCSB `w` over `records` records.
fn generator(
    cfg: &Config,
    w: Ycsb,
    records: usize,
    t: usize,
    salt: u64,
) -> Result<Box<Generator>, String> {
    let dist = match (w, cfg.distribution) {
        (Ycsb::D, _) => RequestDistribution::Latest,
        (_, Distribution::Uniform) => RequestDistribution::Uniform,
        (_, Distribution::Zipf) => RequestDistribution::Zipfian {
            theta: lidb_data::zipf::ZIPFIAN_CONSTANT,
        },
    };
    let seed = cfg.seed ^ salt ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Generator::new(w, records as u64, Some(dist), seed)
        .map(Box::new)
        .map_err(|e| e.to_string())
}

/// Runs one phase: a worker per job, started together on a barrier; the calling thread samples
/// the timeline meanwhile if `cfg.timeline` is set.
fn run_phase(
    cfg: &Config,
    index: &dyn ConcurrentIndex,
    jobs: Vec<(Stream, Work<'_>)>,
    bar: &indicatif::ProgressBar,
) -> (PhaseResult, Vec<timeline::Sample>) {
    let threads = jobs.len();
    let barrier = Barrier::new(threads + 1);
    let progress: Vec<Progress> = (0..threads).map(|_| Progress::default()).collect();
    let finished = AtomicUsize::new(0);
    let (results, samples) = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .into_iter()
            .zip(&progress)
            .map(|((stream, work), counter)| {
                let (barrier, finished) = (&barrier, &finished);
                s.spawn(move || {
                    barrier.wait();
                    let r = run_thread(index, stream, &work, Instant::now(), bar, &counter.0);
                    finished.fetch_add(1, Release);
                    r
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let samples = cfg.timeline.map_or_else(Vec::new, |every| {
            timeline::sample(every, start, &progress, &finished, threads, index)
        });
        let results = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| ThreadResult {
                    errors: 1,
                    first_error: Some("a worker thread panicked".into()),
                    ..ThreadResult::default()
                })
            })
            .collect::<Vec<ThreadResult>>();
        (results, samples)
    });
    let first = results.iter().filter_map(|r| r.span.map(|s| s.0)).min();
    let last = results.iter().filter_map(|r| r.span.map(|s| s.1)).max();
    let seconds = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    (PhaseResult { results, seconds }, samples)
}

/// After an insert phase (untimed): every key a thread tried to insert (the prefix of its chunk
/// it reached before the time bound) is there with its value. Returns those keys.
fn check_inserted<'a>(
    index: &dyn ConcurrentIndex,
    chunks: impl Iterator<Item = &'a [u64]>,
    results: &[ThreadResult],
    report: &mut Report,
) -> Vec<u64> {
    let mut keys = Vec::new();
    for (chunk, r) in chunks.zip(results) {
        let tried = (r.done.iter().sum::<u64>() + r.errors) as usize;
        for &k in chunk.get(..tried).unwrap_or(chunk) {
            keys.push(k);
            let got = index.get(k);
            if got != Some(value_of(k)) {
                report.errors += 1;
                report
                    .first_error
                    .get_or_insert(format!("after inserts: key {k} has value {got:?}"));
            }
        }
    }
    keys
}
