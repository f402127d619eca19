//! The output of `lidb bench btree`: one [`Row`] per (engine, operation), as JSON lines or a
//! table. Every row carries the seed and the configuration it ran with.

use serde::Serialize;

use super::config::Config;
use crate::kv::hist::Histogram;
use crate::table;

/// One measurement. Latencies are per operation; `reads_per_op` is device reads (as the engine
/// counts them, see `reads_source`) over operations.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub experiment: String,
    pub data: String,
    /// "learnedstore", "btree", or a peer ("redb", "lmdb").
    pub engine: String,
    /// "read", or for writes the workload: "insert100", "ycsb-a", "ycsb-b".
    pub op: String,
    /// Threads of the timed loop (memory and partial: each of `--threads`; cold, writes: 1).
    pub threads: usize,
    pub kops_per_s: f64,
    /// kops_per_s over the 1-thread row of the same engine, op and simulation; None when 1 is
    /// not among the thread counts (`crate::kv::scaling`).
    pub scaling: Option<f64>,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub reads_per_op: f64,
    /// cold: seconds from the cold start to the end of the first interval at 90% of the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_90_s: Option<f64>,
    /// cold: thousands of operations per second in each interval, from the cold start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series_kops: Vec<f64>,
    /// True for the paper's simulated inner-node misses (not a real eviction).
    pub simulated: bool,
    pub ops: u64,
    pub records: u64,
    pub loaded: u64,
    pub value_size: u32,
    pub pool_bytes: u64,
    pub seed: u64,
    pub reads_source: String,
}

/// What a runner measured for one row.
#[derive(Debug)]
pub struct Measured {
    pub ops: u64,
    pub seconds: f64,
    pub reads: u64,
    pub hist: Histogram,
}

impl Measured {
    /// Device reads per operation; 0 for no operations.
    pub fn reads_per_op(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.reads as f64 / self.ops as f64
        }
    }

    /// Thousands of operations per second over the whole timed loop.
    pub fn kops_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds / 1e3
        } else {
            0.0
        }
    }
}

impl Row {
    /// The row of `m` for `engine` and `op` under `cfg`.
    pub fn new(
        cfg: &Config,
        engine: &str,
        op: &str,
        m: &Measured,
        pool_bytes: u64,
        reads_source: &str,
    ) -> Row {
        Row {
            experiment: cfg.experiment.name().to_string(),
            data: cfg.data.source.clone(),
            engine: engine.to_string(),
            op: op.to_string(),
            threads: 1,
            kops_per_s: m.kops_per_s(),
            scaling: None,
            mean_us: m.hist.mean_ns() / 1e3,
            p50_us: m.hist.percentile_us(50.0),
            p99_us: m.hist.percentile_us(99.0),
            p999_us: m.hist.percentile_us(99.9),
            reads_per_op: m.reads_per_op(),
            time_to_90_s: None,
            series_kops: Vec::new(),
            simulated: false,
            ops: m.ops,
            records: cfg.data.keys.len() as u64,
            loaded: cfg.loaded_records(),
            value_size: cfg.data.value_size,
            pool_bytes,
            seed: cfg.seed,
            reads_source: reads_source.to_string(),
        }
    }
}

impl crate::kv::scaling::ScaledRow for Row {
    type Key = (String, String, String, bool);
    fn scaling_key(&self) -> Option<Self::Key> {
        Some((
            self.experiment.clone(),
            self.engine.clone(),
            self.op.clone(),
            self.simulated,
        ))
    }
    fn threads(&self) -> usize {
        self.threads
    }
    fn kops_per_s(&self) -> f64 {
        self.kops_per_s
    }
    fn set_scaling(&mut self, scaling: Option<f64>) {
        self.scaling = scaling;
    }
}

/// The rows as JSON, one object per line.
pub fn json_lines(rows: &[Row]) -> Result<Vec<String>, serde_json::Error> {
    rows.iter().map(serde_json::to_string).collect()
}

/// The rows as an aligned table for people.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "experiment",
        "engine",
        "op",
        "threads",
        "kops/s",
        "scaling",
        "mean_us",
        "p50_us",
        "p99_us",
        "p99.9_us",
        "reads/op",
        "t90_s",
        "ops",
        "pool",
        "seed",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.experiment.clone(),
                r.engine.clone(),
                if r.simulated {
                    format!("{} (simulated)", r.op)
                } else {
                    r.op.clone()
                },
                r.threads.to_string(),
                format!("{:.1}", r.kops_per_s),
                crate::kv::scaling::cell(r.scaling),
                format!("{:.2}", r.mean_us),
                format!("{:.2}", r.p50_us),
                format!("{:.2}", r.p99_us),
                format!("{:.2}", r.p999_us),
                format!("{:.3}", r.reads_per_op),
                r.time_to_90_s
                    .map_or("-".to_string(), |t| format!("{t:.2}")),
                r.ops.to_string(),
                crate::lsm::load::human_size(r.pool_bytes),
                r.seed.to_string(),
            ]
        })
        .collect();
    table::render(&header, &cells)
}
