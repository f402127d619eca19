//! The result rows of `lidb bench concurrent`: one per (run, operation type) plus "all", as JSON
//! objects (`"row": "result"`) or an aligned table. Pure functions of what the workers measured.

use serde::Serialize;

use super::Report;
use super::worker::{OP_NAMES, ThreadResult};
use crate::kv::hist::Histogram;

/// One output row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Always "result" (timeline rows carry "timeline").
    pub row: &'static str,
    pub index: String,
    pub concurrent: bool,
    pub workload: String,
    pub threads: usize,
    /// The skew workload's hotspot ratio (hot window width over the loaded key range) and its
    /// window `[hot_lo, hot_hi]`; `None` for the other workloads.
    pub hotspot: Option<f64>,
    pub hot_lo: Option<u64>,
    pub hot_hi: Option<u64>,
    pub op: String,
    /// Checked operations of this type.
    pub ops: u64,
    pub errors: u64,
    /// Wall time of the phase this operation type ran in (skew: its insert or read phase; "all":
    /// the sum of the phases).
    pub seconds: f64,
    pub kops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Heap bytes per loaded key right after the bulk load: the index's own report (finedex;
    /// alex, lipp and dili: their `size_bytes()`), or else what the counting allocator saw the
    /// build allocate; `None`: neither.
    pub bytes_per_key: Option<f64>,
    pub bytes_source: &'static str,
    /// Heap bytes per loaded key the counting allocator saw the build allocate (every index,
    /// finedex included, allocator overhead excluded); `None` without a counting allocator.
    pub counted_bytes_per_key: Option<f64>,
    /// Heap bytes per live key (loaded plus inserted) at the end of the run, from the index's
    /// own report (finedex, alex, lipp, dili); `None` for the others.
    pub end_bytes_per_key: Option<f64>,
    /// Bytes of the learned models alone (what a client would cache, the paper's Fig. 16) after
    /// the bulk load and at the end of the run (finedex; else `None`).
    pub model_bytes: Option<u64>,
    pub end_model_bytes: Option<u64>,
    /// The share of level-bin slots in use holding an entry at the end of the run (finedex,
    /// when it has bins; the paper reports about 82%).
    pub end_bin_load_factor: Option<f64>,
    /// Training latency (the paper's Fig. 14): wall time of the bulk load, from the sorted
    /// entries to an index ready for queries (finedex: LPA training included).
    pub build_ms: f64,
    /// Retrainings during the build and the run, and their total time (finedex; else `None`).
    pub level_bin_retrains: Option<u64>,
    pub level_bin_retrain_ms: Option<f64>,
    pub model_retrains: Option<u64>,
    pub model_retrain_ms: Option<f64>,
}

/// What the workers of one phase of a run measured (a run has one phase, skew two).
#[derive(Debug)]
pub struct PhaseResult {
    pub results: Vec<ThreadResult>,
    /// From the first worker's start to the last one's finish.
    pub seconds: f64,
}

/// Pushes a row per operation type of every phase (with its phase's time) and one "all" row.
pub fn push_rows(base: &Row, phases: &[PhaseResult], report: &mut Report) {
    let mut all_hist = Histogram::new();
    let (mut all_ops, mut all_errors, mut all_secs) = (0, 0, 0.0);
    for phase in phases {
        let errors: u64 = phase.results.iter().map(|r| r.errors).sum();
        report.errors += errors;
        if report.first_error.is_none() {
            report.first_error = phase.results.iter().find_map(|r| r.first_error.clone());
        }
        all_errors += errors;
        all_secs += phase.seconds;
        let secs = phase.seconds.max(1e-9);
        for (kind, name) in OP_NAMES.iter().enumerate() {
            let ops: u64 = phase.results.iter().filter_map(|r| r.done.get(kind)).sum();
            if ops == 0 {
                continue;
            }
            let mut h = Histogram::new();
            for r in &phase.results {
                if let Some(x) = r.hist.get(kind) {
                    h.merge(x);
                }
            }
            all_hist.merge(&h);
            all_ops += ops;
            report.rows.push(Row {
                op: (*name).into(),
                ops,
                seconds: phase.seconds,
                kops_per_s: ops as f64 / secs / 1e3,
                p50_us: h.percentile_us(50.0),
                p99_us: h.percentile_us(99.0),
                ..base.clone()
            });
        }
    }
    report.rows.push(Row {
        op: "all".into(),
        ops: all_ops,
        errors: all_errors,
        seconds: all_secs,
        kops_per_s: all_ops as f64 / all_secs.max(1e-9) / 1e3,
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
        "hotspot",
        "op",
        "ops",
        "kops/s",
        "p50_us",
        "p99_us",
        "B/key",
        "counted_B/key",
        "model_B",
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
                r.hotspot.map_or("-".into(), |h| h.to_string()),
                r.op.clone(),
                r.ops.to_string(),
                format!("{:.1}", r.kops_per_s),
                format!("{:.2}", r.p50_us),
                format!("{:.2}", r.p99_us),
                r.bytes_per_key
                    .map_or("n/a".into(), |b| format!("{b:.1} ({})", r.bytes_source)),
                r.counted_bytes_per_key
                    .map_or("n/a".into(), |b| format!("{b:.1}")),
                r.model_bytes.map_or("n/a".into(), |b| b.to_string()),
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
