//! The throughput timeline of a run (`--timeline-ms`): operations completed per interval, and a
//! learned index's retrain counts so far, sampled while the workers run (the paper's Fig. 9c:
//! throughput over time while inserting many times the trained data, dips and recoveries around
//! retrainings).
//!
//! Threads: each worker owns one [`Progress`] counter and is its only writer (a relaxed store
//! every [`PUBLISH_EVERY`] operations and one at its end: no lock, no read-modify-write, one
//! cache line per counter); the runner's thread is the only reader ([`sample`]), while it
//! would otherwise wait in `join`. A worker bumps `finished` (release) after its last store, so
//! once the sampler sees every worker finished (acquire) the counters are final.
//!
//! Invariant: the `ops` of a phase's samples add up EXACTLY to the operations its workers ran
//! (checked ones plus errors), because the last sample is taken after every worker finished.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::index::{ConcurrentIndex, Retrains};

/// A worker publishes its count every this many operations (and once at its end).
pub const PUBLISH_EVERY: u64 = 64;

/// The sampler sleeps at most this long at once, so it sees the end of a phase this soon.
const NAP: Duration = Duration::from_millis(5);

/// One worker's count of operations run, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress(pub AtomicU64);

/// One interval, as the sampler saw it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// End of the interval since the phase's start.
    pub at: Duration,
    /// Its length (the last one is usually shorter).
    pub length: Duration,
    /// Operations completed in it, all threads together.
    pub ops: u64,
    /// Retrainings since the build, read at its end (a learned index that retrains).
    pub retrains: Option<Retrains>,
}

/// Samples `progress` at every multiple of `interval` after `start` (a late sample ends its
/// interval late, and the ticks it missed are skipped) until all `threads` workers have bumped
/// `finished`, then once more.
pub fn sample(
    interval: Duration,
    start: Instant,
    progress: &[Progress],
    finished: &AtomicUsize,
    threads: usize,
    index: &dyn ConcurrentIndex,
) -> Vec<Sample> {
    let interval = interval.max(Duration::from_millis(1));
    let mut samples = Vec::new();
    let (mut last_ops, mut last_at) = (0u64, Duration::ZERO);
    let mut tick = interval;
    loop {
        let mut all_done = finished.load(Acquire) >= threads;
        while !all_done && start.elapsed() < tick {
            std::thread::sleep(tick.saturating_sub(start.elapsed()).min(NAP));
            all_done = finished.load(Acquire) >= threads;
        }
        let at = start.elapsed();
        let ops: u64 = progress.iter().map(|p| p.0.load(Relaxed)).sum();
        samples.push(Sample {
            at,
            length: at.saturating_sub(last_at),
            ops: ops.saturating_sub(last_ops),
            retrains: index.retrains(),
        });
        (last_ops, last_at) = (ops, at);
        if all_done {
            break;
        }
        // The next tick after now: a sampler that overslept (descheduled) skips the ticks it
        // missed instead of taking samples of almost no length.
        while tick <= at {
            tick += interval;
        }
    }
    samples
}

/// One timeline row of the output.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineRow {
    /// Always "timeline" (result rows carry "result").
    pub row: &'static str,
    pub index: String,
    pub workload: String,
    pub threads: usize,
    /// The skew workload's hotspot ratio; `None` for the others.
    pub hotspot: Option<f64>,
    /// The phase: "insert" or "read" for skew, "all" for the other workloads.
    pub op: String,
    /// 1, 2, ... within the phase.
    pub interval: usize,
    /// End of the interval, in milliseconds since the phase's start.
    pub t_ms: f64,
    /// Operations completed in the interval (checked ones plus errors).
    pub ops: u64,
    /// `ops` over the interval's own length.
    pub kops_per_s: f64,
    /// Retrainings since the build, at the end of the interval (finedex; else `None`).
    pub level_bin_retrains: Option<u64>,
    pub model_retrains: Option<u64>,
}

/// The samples of one phase as rows, named after `base` (whose `interval`, `t_ms`, `ops`,
/// `kops_per_s` and retrains are replaced).
pub fn rows(base: &TimelineRow, samples: &[Sample]) -> Vec<TimelineRow> {
    samples
        .iter()
        .enumerate()
        .map(|(i, s)| TimelineRow {
            interval: i + 1,
            t_ms: s.at.as_secs_f64() * 1e3,
            ops: s.ops,
            kops_per_s: s.ops as f64 / s.length.as_secs_f64().max(1e-9) / 1e3,
            level_bin_retrains: s.retrains.map(|r| r.level_bin),
            model_retrains: s.retrains.map(|r| r.model),
            ..base.clone()
        })
        .collect()
}

/// Timeline rows as an aligned table.
pub fn table(rows: &[TimelineRow]) -> String {
    let header = [
        "index",
        "workload",
        "threads",
        "hotspot",
        "op",
        "interval",
        "t_ms",
        "ops",
        "kops/s",
        "bin_retrains",
        "model_retrains",
    ];
    let na = |x: Option<u64>| x.map_or("n/a".into(), |v| v.to_string());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.index.clone(),
                r.workload.clone(),
                r.threads.to_string(),
                r.hotspot.map_or("-".into(), |h| h.to_string()),
                r.op.clone(),
                r.interval.to_string(),
                format!("{:.1}", r.t_ms),
                r.ops.to_string(),
                format!("{:.1}", r.kops_per_s),
                na(r.level_bin_retrains),
                na(r.model_retrains),
            ]
        })
        .collect();
    crate::table::render(&header, &cells)
}
