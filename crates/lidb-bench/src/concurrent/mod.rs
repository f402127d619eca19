//! `lidb bench concurrent`: concurrent in-memory indexes behind one trait ([`ConcurrentIndex`]),
//! run with YCSB mixes A-F or pure inserts at several thread counts (FINEdex paper, section 5).
//!
//! One run = one (index, workload, hotspot ratio for skew, thread count): build the index over
//! the loaded keys (timed), start the threads together on a barrier, each runs `ops / threads`
//! operations (or stops at the time bound), then rows per operation type and "all". The skew
//! workload runs two phases, each timed on its own: `ops` inserts of fresh keys inside a hot
//! window of the loaded range, then `ops` reads of the window's keys (`skew.rs`). Every answer
//! is checked; a failed or wrong operation counts as an error, not as throughput, and the caller
//! fails on errors. With `timeline` set, the runner's thread samples the operations completed
//! per interval while the workers run (`timeline.rs`).
//!
//! The implementations: lidb's own ([`IndexKind::OWN`]: finedex, the `btree-rwlock` floor, alex,
//! lipp, dili) and the third-party peers a binary registers through [`crate::peers::Peers`]
//! (lidb-peers: skipmap, scc-tree, congee, li+delta). [`conformance::check`] is the one harness
//! all of them pass.
//!
//! Threads: [`run`] spawns the workers with `std::thread::scope`; nothing outlives it.

pub mod conformance;
mod fine;
mod index;
mod keys;
mod rows;
mod runner;
mod rwlock;
mod skew;
mod timeline;
mod updatable;
mod worker;

use std::time::Duration;

use lidb_data::Workload as Ycsb;

pub use fine::FinePeer;
pub use index::{BuildFn, ConcurrentIndex, Footprint, IndexKind, Retrains, build};
pub use keys::{KeySplit, value_of};
pub use rows::{Row, table};
pub use runner::{run, run_with};
pub use rwlock::BTreeRwLock;
pub use skew::{HotWindow, parse_hotspots};
pub use timeline::{PUBLISH_EVERY, TimelineRow, table as timeline_table};
pub use updatable::Updatable;
pub use worker::SAMPLE_EVERY;

/// The hotspot ratio the skew workload runs at when none is given.
pub const DEFAULT_HOTSPOT: f64 = 0.01;

/// A workload: a YCSB mix over the loaded keys, inserts of fresh keys only, or the skewed
/// inserts-then-reads of a hot window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    Ycsb(Ycsb),
    Insert,
    Skew,
}

impl Workload {
    /// Parses a comma-separated list of a..f, insert and skew.
    pub fn parse_list(text: &str) -> Result<Vec<Workload>, String> {
        text.split(',')
            .map(|w| match w.trim() {
                "insert" => Ok(Workload::Insert),
                "skew" => Ok(Workload::Skew),
                w => Ycsb::from_name(w)
                    .map(Workload::Ycsb)
                    .map_err(|e| format!("{e}, insert, skew")),
            })
            .collect()
    }

    /// The name in rows.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Ycsb(w) => w.name(),
            Workload::Insert => "insert",
            Workload::Skew => "skew",
        }
    }

    /// Fresh keys of the data set one thread may insert during `ops` operations (skew makes
    /// its own keys inside the hot window).
    fn fresh_per_thread(self, ops: usize) -> usize {
        match self {
            Workload::Insert => ops,
            Workload::Skew => 0,
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
    /// Operations per run, split evenly between its threads (skew: per phase, so `ops` inserts
    /// and then `ops` reads).
    pub ops: usize,
    pub distribution: Distribution,
    /// Hotspot ratios the skew workload runs at, each its own runs (0 < R <= 1).
    pub hotspots: Vec<f64>,
    /// Sample the throughput every this long while the workers run (`None`: no timeline).
    pub timeline: Option<Duration>,
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

/// The rows, the timeline rows, and the first error of a run that had any.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub timeline: Vec<TimelineRow>,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Builds an index of a kind over the loaded entries (keys strictly increasing).
pub type Builder = dyn Fn(IndexKind, &[(u64, u64)]) -> Result<Box<dyn ConcurrentIndex>, String>;
