//! `lidb bench ycsb`: the LearnedKV paper's phases (section 5, Experiment 1 and Tables 1-5) on
//! every engine named. P0 loads the records; P1..Pn each run `ops_per_phase` operations of a
//! YCSB workload split over the workers, at each thread count of `threads` in turn.
//!
//! Runs on the calling thread; phases fan out to scoped worker threads that share the engine.
//! Invariants:
//! 1. At one thread count, worker t owns one `lidb_data::Generator` seeded `seed + t` for all
//!    its phases, so phases continue one stream. Its record r is record r below the loaded count,
//!    else the global record `loaded + (r - loaded) * threads + t`: inserts of different workers
//!    never collide, and a worker only addresses records it (or the load) inserted.
//! 7. Thread counts (`threads`, in the order given) are comparable: a workload with writes
//!    (a, b, d, e, f) loads a fresh engine per thread count (its own directory), so every count
//!    starts from the same loaded state; a read-only workload (c) loads and settles each engine
//!    once and runs P1..Pn at each count in turn over that engine, whose state reads do not
//!    change (later counts find a warmer cache: the figures come from the last phase, after
//!    the same warm-up at every count). Each row carries its `threads` and its `scaling`
//!    (`super::scaling`); P0 rows carry the count of the phases after them, though the load
//!    itself runs on one thread.
//! 2. Updates and read-modify-writes write a new version of the record's value; every read checks
//!    that the value belongs to the key (records.rs), whatever version it holds.
//! 3. Workloads without writes (C) run `engine.gc()` after P0, for every engine alike, as the
//!    paper does: nothing else would build LearnedKV's tier (finedex's, learnedstore's and
//!    btree's gc() is a checkpoint, which leaves their index as it was). Otherwise GC runs by itself.
//! 4. kops_per_s of an operation type is its count over the time the workers spent in it (sum of
//!    its latencies / threads), as the paper's separate read and write throughputs of one mixed
//!    phase; kops_per_s of "all" is the phase's count over its wall time.
//! 5. Under `--memory` every engine is fitted to the budget after the load (and the settling
//!    step) and again before each later phase, untimed (`Engine::fit_memory_budget`); each row
//!    carries the engine's measured memory split at the end of its phase and how it took the
//!    budget.
//! 6. The device's own random-read latency is probed in the run's directory in the same run
//!    (`crate::device_limit`), and each op row's p50 and mean are also given as multiples of it.

use std::time::Instant;

use indicatif::ProgressBar;
use lidb_data::{Generator, Op, RequestDistribution, Workload};
use serde::Serialize;

use super::hist::Histogram;
use super::{Common, Error, Records, RunDir, describe_engine, ratio};
use crate::amplification;
use crate::device::DeviceMultiples;
use crate::device_limit::{DeviceLimit, DeviceRow};
use crate::engines::{self, BudgetFit, DeviceReads, Engine, MemorySplit, ReadSplit, Space};
use crate::progress;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub common: Common,
    pub workload: Workload,
    /// None: the workload's default.
    pub distribution: Option<RequestDistribution>,
    /// Records loaded in P0.
    pub record_count: u64,
    pub ops_per_phase: u64,
    /// Phases after the load.
    pub phases: u32,
    /// Thread counts, each run in turn (invariant 7); each at most [`MAX_THREADS`].
    pub threads: Vec<u32>,
    /// What a read-only workload runs after the load.
    pub settle: Settle,
}

/// What runs between the load and P1 of a read-only workload (workloads with writes let GC run
/// by itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// `gc()` on every engine, as the paper does.
    Gc,
    /// `convert()`: learnedkv's range-query-assisted conversion (no value moved).
    Convert,
    /// Nothing: reads go through whatever the load built.
    Nothing,
}

impl Settle {
    pub fn from_name(s: &str) -> Result<Settle, Error> {
        match s {
            "gc" => Ok(Settle::Gc),
            "convert" => Ok(Settle::Convert),
            "none" => Ok(Settle::Nothing),
            other => Err(Error::Invalid(format!(
                "--settle {other}: expected gc, convert or none"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Settle::Gc => "gc",
            Settle::Convert => "convert",
            Settle::Nothing => "none",
        }
    }
}

/// The most workers of one phase (a worker's number takes 8 bits of the versions it writes).
pub const MAX_THREADS: u32 = 255;

/// Operation types, in row order; index = slot of the per-type histograms.
pub const OPS: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];
const UPDATE: usize = 1;
const INSERT: usize = 2;
const RMW: usize = 4;

/// One (engine, phase, op) of a run. JSON names. The space and read-split columns are those of
/// the engine at the end of the phase (reads: served during the phase), repeated on each op row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct YcsbRow {
    pub engine: String,
    /// The YCSB workload, a..f.
    pub workload: String,
    /// The request distribution: "zipfian:THETA", "uniform" or "latest".
    pub distribution: String,
    /// Workers of the phase (P0: of the phases after this load, which runs on one thread).
    pub threads: u32,
    /// 0 is the load.
    pub phase: u32,
    /// "read", "update", "insert", "scan", "rmw" or "all".
    pub op: String,
    pub ops: u64,
    /// Op types: ops over the time the workers spent in them; "all": ops over the wall time.
    pub kops_per_s: f64,
    /// kops_per_s over the 1-thread row of the same engine, phase and op; None for P0 and
    /// where 1 is not among the thread counts (`super::scaling`).
    pub scaling: Option<f64>,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// The paper's Table 1: bytes of the LSM, the learned tier's key list and models, the vlog
    /// (finedex: its log and checkpoint files in vlog_bytes, the rest 0; learnedstore and btree:
    /// the page file in lsm_bytes, the write-ahead logs in vlog_bytes).
    pub lsm_bytes: u64,
    pub key_list_bytes: u64,
    pub model_bytes: u64,
    pub vlog_bytes: u64,
    /// Point reads the LSM answered during the phase, and the tier (tier: 0 for lsm; both 0 for
    /// rocksdb, finedex, learnedstore and btree).
    pub reads_lsm: u64,
    pub reads_tier: u64,
    /// GCs the engine had installed by the end of the phase (since the load began).
    pub gcs: u64,
    pub mean_us: f64,
    /// Storage reads the engine issued during the phase over the phase's operations (all op
    /// types together; lsm: its tables' reads, rocksdb: its statistics' file reads, which
    /// include compactions; learnedstore and btree: pool misses), None where it has no counter.
    pub device_reads_per_op: Option<f64>,
    /// Bytes those reads moved, per read.
    pub device_bytes_per_read: Option<f64>,
    /// The engine's measured index + filter + cache bytes at the end of the phase (rocksdb under
    /// a budget: its index and filter blocks are in cache_bytes).
    pub memory_bytes: u64,
    pub index_bytes: u64,
    pub filter_bytes: u64,
    pub cache_bytes: u64,
    /// Outside the budget, stated separately.
    pub memtable_bytes: u64,
    /// `--memory`, if given.
    pub budget_bytes: Option<u64>,
    /// Bytes the process sent to the device during the phase over the bytes of keys and values
    /// its writes carried (`crate::amplification`); None for a phase without writes or where
    /// the kernel's counter cannot be read.
    pub write_amp: Option<f64>,
    /// Bytes of the engine's directory at the end of the phase over the live records' bytes.
    pub space_amp: Option<f64>,
    /// How the engine took the budget: "fits", "over" (its indexes alone exceed it),
    /// "at-open" (rocksdb), "before-fit" (the load, before lsm is fitted), "not-applied" or
    /// "none" (no --memory).
    pub budget: String,
    /// The version of a peer engine's library as it records it (rocksdb: "11.8.1"); None for
    /// lidb's engines.
    pub engine_version: Option<String>,
    /// p50 and mean against the device's own reads (filled after every engine ran).
    #[serde(flatten)]
    pub device: DeviceMultiples,
}

/// Rows and notes on how the run went.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Vec<YcsbRow>,
    pub notes: Vec<String>,
}

impl Config {
    /// The configuration line: everything the run depends on.
    pub fn describe(&self) -> String {
        let c = &self.common;
        let dist = self.distribution_name();
        format!(
            "# lidb bench ycsb: engines={} workload={} distribution={dist} records={} \
             ops_per_phase={} phases={} threads={} ({}) keys={} key_size={} value_size={} seed={} \
             (worker t seeded seed+t) settle={} {}",
            c.engines.join(","),
            self.workload,
            self.record_count,
            self.ops_per_phase,
            self.phases,
            self.threads
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.thread_plan(),
            c.key_source,
            c.records.key_size,
            c.records.value_size,
            c.seed,
            self.settle.name(),
            describe_engine(&c.engine),
        )
    }
}

impl Config {
    /// The request distribution the run uses (the workload's unless given), as rows name it.
    pub fn distribution_name(&self) -> String {
        match self
            .distribution
            .unwrap_or(self.workload.default_distribution())
        {
            RequestDistribution::Uniform => "uniform".to_string(),
            RequestDistribution::Zipfian { theta } => format!("zipfian:{theta}"),
            RequestDistribution::Latest => "latest".to_string(),
        }
    }

    /// Whether the workload never writes (then one load serves every thread count).
    pub fn read_only(&self) -> bool {
        let mix = self.workload.mix();
        mix.update + mix.insert + mix.read_modify_write == 0.0
    }

    /// How the thread counts share loads (invariant 7), for the config line.
    fn thread_plan(&self) -> &'static str {
        match (self.threads.len(), self.read_only()) {
            (0 | 1, _) => "one load per engine",
            (_, true) => "one load per engine, every thread count over it in turn",
            (_, false) => "a fresh load per engine and thread count",
        }
    }

    /// The loads of one engine: the thread counts each runs (invariant 7).
    fn loads(&self) -> Vec<Vec<u32>> {
        if self.read_only() {
            vec![self.threads.clone()]
        } else {
            self.threads.iter().map(|&t| vec![t]).collect()
        }
    }
}

/// Runs every engine of `cfg` in turn.
pub fn run(cfg: &Config) -> Result<Report, Error> {
    cfg.common.check_engines()?;
    if cfg.record_count == 0 || cfg.ops_per_phase == 0 || cfg.threads.contains(&0) {
        return Err(Error::Invalid(
            "--records, --ops-per-phase and --threads must be at least 1".into(),
        ));
    }
    if cfg.threads.is_empty() || cfg.threads.iter().any(|&t| t > MAX_THREADS) {
        return Err(Error::Invalid(format!(
            "--threads: give 1 to {MAX_THREADS} workers per phase"
        )));
    }
    if let Some(cap) = cfg.common.records.capacity()
        && cap < cfg.record_count
    {
        return Err(Error::Invalid(format!(
            "--records {} is more than the dataset's {cap} distinct keys",
            cfg.record_count
        )));
    }
    let run_dir = RunDir::new(&cfg.common.dir, cfg.common.keep)?;
    let mut notes = vec![format!(
        "engine directories under {}",
        run_dir.root().display()
    )];
    let mut device = DeviceLimit::start(
        run_dir.root(),
        cfg.common.device_probe_reads,
        cfg.common.seed,
        &mut notes,
    );
    if let Some(budget) = cfg.common.engine.memory_budget_bytes {
        notes.push(format!(
            "--memory {}: one budget for index + filters + cache per engine, memtables outside \
             it; rocksdb takes it as its block cache with index and filter blocks cached in it \
             (L0's pinned); lidb's lsm gives its cache what its indexes and filters leave, and \
             learnedstore and btree their buffer pool what the learned path's table and model \
             leave, fitted after the load and before each phase; engines that cannot take it say \
             so",
            crate::lsm::load::format_size(budget)
        ));
    }
    let read_only = cfg.read_only();
    if read_only {
        notes.push(match cfg.settle {
            Settle::Gc => format!(
                "workload {} has no writes: every engine runs gc() after P0 (as the paper), so \
                 learnedkv's tier is built before P1",
                cfg.workload
            ),
            Settle::Convert => format!(
                "workload {} has no writes: every engine runs convert() after P0 (a learned tier \
                 over the values where they are)",
                cfg.workload
            ),
            Settle::Nothing => format!(
                "workload {} has no writes and --settle none: reads go through what the load built",
                cfg.workload
            ),
        });
    } else {
        notes.push(
            "GC runs by itself in learnedkv, lsm+ and lsm+tier (over-provisioning trigger); the \
             gcs column counts the GCs installed by the end of each phase"
                .into(),
        );
    }
    if cfg.threads.len() > 1 {
        notes.push(format!(
            "thread counts {:?}: {}",
            cfg.threads,
            cfg.thread_plan()
        ));
    }
    let loads = cfg.loads();
    let mut rows = Vec::new();
    for name in &cfg.common.engines {
        for threads in &loads {
            // Several loads of one engine: each its own directory, and named in its notes.
            let (dir, label) = match threads.as_slice() {
                [t] if loads.len() > 1 => (
                    run_dir.engine_dir(&format!("{name}-t{t}")),
                    format!("{name} (threads {t})"),
                ),
                _ => (run_dir.engine_dir(name), name.clone()),
            };
            rows.extend(run_load(cfg, name, &label, &dir, threads, &mut notes)?);
            run_dir.release(&dir)?;
        }
    }
    super::scaling::fill(&mut rows);
    notes.extend(ratio_notes(cfg, &rows));
    // An engine's typical read is that of its last phase (all op types) at the first count.
    let first = cfg.threads.first().copied();
    let last = |r: &YcsbRow| r.phase == cfg.phases && r.op == "all" && Some(r.threads) == first;
    device.annotate(&mut rows, last, &mut notes);
    Ok(Report { rows, notes })
}

/// Opens engine `name` in `dir`, loads it and runs its phases at each of `threads`; notes go
/// out under `label`.
fn run_load(
    cfg: &Config,
    name: &str,
    label: &str,
    dir: &std::path::Path,
    threads: &[u32],
    notes: &mut Vec<String>,
) -> Result<Vec<YcsbRow>, Error> {
    let ecfg = engines::EngineConfig {
        dir: dir.to_path_buf(),
        ..cfg.common.engine.clone()
    };
    let engine = engines::open(name, &ecfg)?;
    let started = Instant::now();
    let EngineRun {
        rows,
        settle_s,
        fit,
    } = run_engine(cfg, engine.as_ref(), dir, threads)?;
    if let Some(fit) = fit {
        notes.push(format!(
            "{label}: memory budget after P0: {}",
            fit.describe()
        ));
    }
    if let Some(secs) = settle_s {
        notes.push(format!(
            "{label}: {}() after P0 in {secs:.1} s",
            cfg.settle.name()
        ));
    }
    // The engine's own notes (finedex walks its index for them) are not part of its time.
    let asked = Instant::now();
    let engine_notes = engine.notes();
    let version = engine.version();
    let asked_s = asked.elapsed().as_secs_f64();
    drop(engine);
    let mut rows = rows;
    for r in &mut rows {
        r.engine_version.clone_from(&version);
    }
    notes.push(format!(
        "{label}: all phases in {:.1} s",
        started.elapsed().as_secs_f64() - asked_s
    ));
    notes.extend(engine_notes.into_iter().map(|n| format!("{label}: {n}")));
    Ok(rows)
}

/// The last phase's read and write throughput of each engine over the first engine's, at each
/// thread count.
fn ratio_notes(cfg: &Config, rows: &[YcsbRow]) -> Vec<String> {
    cfg.threads
        .iter()
        .flat_map(|&t| {
            let at: Vec<&YcsbRow> = rows.iter().filter(|r| r.threads == t).collect();
            let label = if cfg.threads.len() > 1 {
                format!(" at threads={t}")
            } else {
                String::new()
            };
            ratio_notes_at(cfg, &at, &label)
        })
        .collect()
}

/// [`ratio_notes`] of the rows of one thread count, `label` naming it.
fn ratio_notes_at(cfg: &Config, rows: &[&YcsbRow], label: &str) -> Vec<String> {
    // Combined throughput of several op types: their ops over their summed busy time.
    let kops = |engine: &str, ops: &[&str]| -> f64 {
        let (count, busy) = rows
            .iter()
            .filter(|r| r.engine == engine && r.phase == cfg.phases && ops.contains(&r.op.as_str()))
            .filter(|r| r.kops_per_s > 0.0)
            .fold((0.0, 0.0), |(c, b), r| {
                (c + r.ops as f64, b + r.ops as f64 / r.kops_per_s)
            });
        if busy > 0.0 { count / busy } else { 0.0 }
    };
    let Some(base) = cfg.common.engines.first() else {
        return Vec::new();
    };
    let figures = |e: &str| {
        (
            kops(e, &["read", "scan"]),
            kops(e, &["update", "insert", "rmw"]),
            kops(e, &["all"]),
        )
    };
    let (br, bw, ba) = figures(base);
    let mut out = vec![format!(
        "ratios in phase {}{label} against {base} (same run; reads = read+scan, writes = \
         update+insert+rmw; kops/s of an op type = its ops over the time spent in it): {base} read {br:.1} write {bw:.1} all {ba:.1} kops/s",
        cfg.phases
    )];
    for e in cfg.common.engines.iter().skip(1) {
        let (r, w, a) = figures(e);
        out.push(format!(
            "ratio {e}/{base} phase {}{label}: read {} write {} all {}",
            cfg.phases,
            ratio(r, br),
            ratio(w, bw),
            ratio(a, ba)
        ));
    }
    out
}

/// Per-type histograms of one worker or phase.
pub(super) type Hists = [Histogram; 5];

/// What one engine's run produced.
struct EngineRun {
    rows: Vec<YcsbRow>,
    /// Seconds its settling step (`--settle`) took, if one ran.
    settle_s: Option<f64>,
    /// How it took the memory budget before P1, if one was given.
    fit: Option<BudgetFit>,
}

/// Runs the load, then every phase at each of `threads` in turn, on `engine`.
fn run_engine(
    cfg: &Config,
    engine: &dyn Engine,
    dir: &std::path::Path,
    threads: &[u32],
) -> Result<EngineRun, Error> {
    let name = engine.name();
    let at = Place {
        dir,
        record_bytes: u64::from(cfg.common.records.key_size)
            + u64::from(cfg.common.records.value_size),
    };
    let mut rows = Vec::new();
    let budget = cfg.common.engine.memory_budget_bytes;
    let mut since = Since::now(engine, budget);
    // RocksDB's budget holds from the open on; lidb's is fitted after the load.
    if let Some(b) = budget
        && let BudgetFit::AtOpen { .. } = engine.fit_memory_budget(b)?
    {
        since.budget = "at-open";
    }

    let c = &cfg.common;
    let (hists, wall_s) = load(engine, &c.records, cfg.record_count, c.progress)?;
    let first = threads.first().copied().unwrap_or(1);
    rows.extend(tagged(
        cfg,
        first,
        phase_rows(name, 0, &hists, (wall_s, 1), engine, &at, &mut since),
    ));
    let mut settle_s = None;
    if cfg.read_only() && cfg.settle != Settle::Nothing {
        let started = Instant::now();
        match cfg.settle {
            Settle::Gc => engine.gc()?,
            Settle::Convert => engine.convert()?,
            Settle::Nothing => {}
        }
        settle_s = Some(started.elapsed().as_secs_f64());
        since.split = engine.read_split();
        since.device = engine.device_reads();
        since.written = amplification::process_device_writes();
    }
    let mut first_fit = None;

    for &count in threads {
        let workers = u64::from(count);
        let mut generators = (0..workers)
            .map(|t| {
                Generator::new(
                    cfg.workload,
                    cfg.record_count,
                    cfg.distribution,
                    cfg.common.seed.wrapping_add(t),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        for phase in 1..=cfg.phases {
            if let Some(b) = budget {
                let fit = engine.fit_memory_budget(b)?;
                since.budget = fit.status();
                first_fit.get_or_insert(fit);
            }
            let label = if cfg.threads.len() > 1 {
                format!("{name} P{phase} {count}t")
            } else {
                format!("{name} P{phase}")
            };
            let bar = c.progress.then(|| progress::bar(cfg.ops_per_phase, &label));
            let started = Instant::now();
            let hists = run_phase(cfg, engine, phase, &mut generators, bar.as_ref())?;
            let wall_s = started.elapsed().as_secs_f64();
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            let phase_rows = phase_rows(
                name,
                phase,
                &hists,
                (wall_s, count),
                engine,
                &at,
                &mut since,
            );
            rows.extend(tagged(cfg, count, phase_rows));
        }
    }
    Ok(EngineRun {
        rows,
        settle_s,
        fit: first_fit,
    })
}

/// `rows` with the run's workload and thread count `threads`.
fn tagged(cfg: &Config, threads: u32, mut rows: Vec<YcsbRow>) -> Vec<YcsbRow> {
    for r in &mut rows {
        r.workload = cfg.workload.to_string();
        r.distribution = cfg.distribution_name();
        r.threads = threads;
    }
    rows
}

/// One phase: `ops_per_phase` operations split over one worker per generator, merged.
fn run_phase(
    cfg: &Config,
    engine: &dyn Engine,
    phase: u32,
    generators: &mut [Generator],
    bar: Option<&ProgressBar>,
) -> Result<Hists, Error> {
    let threads = generators.len() as u64;
    let results: Vec<Result<Hists, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = generators
            .iter_mut()
            .enumerate()
            .map(|(t, generator)| {
                let t = t as u64;
                let share =
                    cfg.ops_per_phase / threads + u64::from(t < cfg.ops_per_phase % threads);
                let worker = Worker {
                    engine,
                    records: &cfg.common.records,
                    loaded: cfg.record_count,
                    thread: t,
                    threads,
                    version_base: (u64::from(phase) << 56) | (t << 48),
                    bar,
                };
                s.spawn(move || worker.run(generator, share))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Invalid("a worker thread panicked".into())))
            })
            .collect()
    });
    let mut hists: Hists = Default::default();
    for r in results {
        for (all, h) in hists.iter_mut().zip(r?.iter()) {
            all.merge(h);
        }
    }
    Ok(hists)
}

/// An engine's counters at the start of a phase, and how it took the budget.
struct Since {
    split: ReadSplit,
    device: Option<DeviceReads>,
    budget_bytes: Option<u64>,
    budget: &'static str,
    /// The process's device writes at the start of the phase.
    written: Option<u64>,
    /// Records in the engine at the start of the phase (loaded plus inserted).
    live_records: u64,
}

impl Since {
    /// Counters now; under a budget the load runs before the first fit ("before-fit").
    fn now(engine: &dyn Engine, budget_bytes: Option<u64>) -> Since {
        Since {
            split: engine.read_split(),
            device: engine.device_reads(),
            budget_bytes,
            budget: if budget_bytes.is_some() {
                "before-fit"
            } else {
                "none"
            },
            written: amplification::process_device_writes(),
            live_records: 0,
        }
    }
}

/// P0: records `0..count` in record order (hashed or permuted keys), version 0, one thread.
/// Returns the puts' latencies (slot "insert") and the wall time.
pub(super) fn load(
    engine: &dyn Engine,
    records: &Records,
    count: u64,
    show: bool,
) -> Result<(Hists, f64), Error> {
    let bar = show.then(|| progress::bar(count, &format!("{} P0 load", engine.name())));
    let mut hists: Hists = Default::default();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for r in 0..count {
        let key = records.key(r)?;
        records.render(key, &mut k);
        records.value(key, 0, &mut v);
        let t = Instant::now();
        engine.put(&k, &v)?;
        if let Some(h) = hists.get_mut(INSERT) {
            h.record(t.elapsed().as_nanos() as u64);
        }
        if let Some(bar) = &bar
            && r % 1024 == 0
        {
            bar.set_position(r);
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok((hists, wall_s))
}

/// Where an engine's rows are measured: its directory and the bytes of one record.
struct Place<'a> {
    dir: &'a std::path::Path,
    record_bytes: u64,
}

/// Rows of one phase: each op type that ran, then "all" (`time` is the phase's wall time and
/// its number of workers).
fn phase_rows(
    engine_name: &str,
    phase: u32,
    hists: &Hists,
    time: (f64, u32),
    engine: &dyn Engine,
    at: &Place<'_>,
    since: &mut Since,
) -> Vec<YcsbRow> {
    let space: Space = engine.space();
    let count = |slot: usize| hists.get(slot).map_or(0, Histogram::count);
    let written_records = count(UPDATE) + count(INSERT) + count(RMW);
    let written_now = amplification::process_device_writes();
    let write_amp = amplification::ratio(
        written_now
            .zip(since.written)
            .map(|(n, s)| n.saturating_sub(s)),
        written_records * at.record_bytes,
    );
    since.written = written_now;
    since.live_records += count(INSERT);
    let space_amp = amplification::ratio(
        Some(amplification::dir_bytes(at.dir)),
        since.live_records * at.record_bytes,
    );
    let now = engine.read_split();
    let reads_lsm = now.from_lsm.saturating_sub(since.split.from_lsm);
    let reads_tier = now.from_tier.saturating_sub(since.split.from_tier);
    since.split = now;
    let device_now = engine.device_reads();
    let device = device_delta(since.device, device_now);
    since.device = device_now;
    let memory: MemorySplit = engine.memory();
    let phase_ops: u64 = hists.iter().map(Histogram::count).sum();
    let wall_s = time.0.max(1e-9);
    let row = |op: &str, h: &Histogram| YcsbRow {
        engine: engine_name.to_string(),
        workload: String::new(),
        distribution: String::new(),
        threads: time.1,
        phase,
        op: op.to_string(),
        ops: h.count(),
        kops_per_s: if op == "all" {
            h.count() as f64 / wall_s / 1e3
        } else {
            let busy_s = h.sum_ns() / 1e9 / f64::from(time.1.max(1));
            h.count() as f64 / busy_s.max(1e-9) / 1e3
        },
        scaling: None,
        p50_us: h.percentile_us(50.0),
        p99_us: h.percentile_us(99.0),
        p999_us: h.percentile_us(99.9),
        lsm_bytes: space.lsm_bytes,
        key_list_bytes: space.key_list_bytes,
        model_bytes: space.model_bytes,
        vlog_bytes: space.vlog_bytes,
        reads_lsm,
        reads_tier,
        gcs: now.gcs,
        mean_us: h.mean_ns() / 1e3,
        device_reads_per_op: device.map(|d| d.reads as f64 / phase_ops.max(1) as f64),
        device_bytes_per_read: device
            .filter(|d| d.reads > 0)
            .and_then(|d| Some(d.bytes? as f64 / d.reads as f64)),
        memory_bytes: memory.budgeted_bytes(),
        index_bytes: memory.index_bytes,
        filter_bytes: memory.filter_bytes,
        cache_bytes: memory.cache_bytes,
        memtable_bytes: memory.memtable_bytes,
        budget_bytes: since.budget_bytes,
        budget: since.budget.to_string(),
        write_amp,
        space_amp,
        engine_version: None,
        device: DeviceMultiples::default(),
    };
    let mut all = Histogram::new();
    let mut rows = Vec::new();
    for (op, h) in OPS.iter().zip(hists) {
        if h.count() > 0 {
            rows.push(row(op, h));
            all.merge(h);
        }
    }
    rows.push(row("all", &all));
    rows
}

impl super::scaling::ScaledRow for YcsbRow {
    type Key = (String, u32, String);
    fn scaling_key(&self) -> Option<Self::Key> {
        (self.phase > 0).then(|| (self.engine.clone(), self.phase, self.op.clone()))
    }
    fn threads(&self) -> usize {
        self.threads as usize
    }
    fn kops_per_s(&self) -> f64 {
        self.kops_per_s
    }
    fn set_scaling(&mut self, scaling: Option<f64>) {
        self.scaling = scaling;
    }
}

impl DeviceRow for YcsbRow {
    fn config(&self) -> String {
        self.engine.clone()
    }
    fn typical_read_bytes(&self) -> Option<f64> {
        self.device_bytes_per_read
    }
    fn latency_us(&self) -> (f64, f64) {
        (self.p50_us, self.mean_us)
    }
    fn set_device(&mut self, device: DeviceMultiples) {
        self.device = device;
    }
}

/// Reads between two snapshots of an engine's device counters (None if either is missing).
fn device_delta(before: Option<DeviceReads>, after: Option<DeviceReads>) -> Option<DeviceReads> {
    let (b, a) = (before?, after?);
    Some(DeviceReads {
        reads: a.reads.saturating_sub(b.reads),
        bytes: a.bytes.zip(b.bytes).map(|(x, y)| x.saturating_sub(y)),
    })
}

/// One worker thread of a phase.
struct Worker<'a> {
    engine: &'a dyn Engine,
    records: &'a Records,
    loaded: u64,
    thread: u64,
    threads: u64,
    /// Versions written are `version_base + n`.
    version_base: u64,
    bar: Option<&'a ProgressBar>,
}

impl Worker<'_> {
    /// The global record of the generator's record `r` (invariant 1).
    fn global(&self, r: u64) -> u64 {
        if r < self.loaded {
            r
        } else {
            self.loaded + (r - self.loaded) * self.threads + self.thread
        }
    }

    fn run(&self, generator: &mut Generator, ops: u64) -> Result<Hists, Error> {
        let mut hists: Hists = Default::default();
        let (mut k, mut v, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
        let mut version = self.version_base;
        for i in 0..ops {
            let op = generator.next_op();
            let (slot, r) = match op {
                Op::Read(r) => (0, r),
                Op::Update(r) => (1, r),
                Op::Insert(r) => (INSERT, r),
                Op::Scan { start, .. } => (3, start),
                Op::ReadModifyWrite(r) => (4, r),
            };
            let key = self.records.key(self.global(r))?;
            self.records.render(key, &mut k);
            if matches!(op, Op::Update(_) | Op::Insert(_) | Op::ReadModifyWrite(_)) {
                version += 1;
                self.records.value(key, version, &mut v);
            }
            let t = Instant::now();
            match op {
                Op::Read(_) => {
                    let got = self.engine.get(&k)?;
                    self.check(key, got.as_deref(), &mut scratch)?;
                }
                Op::Update(_) | Op::Insert(_) => self.engine.put(&k, &v)?,
                Op::Scan { len, .. } => self.scan(&k, len as usize, &mut scratch)?,
                Op::ReadModifyWrite(_) => {
                    let got = self.engine.get(&k)?;
                    self.check(key, got.as_deref(), &mut scratch)?;
                    self.engine.put(&k, &v)?;
                }
            }
            if let Some(h) = hists.get_mut(slot) {
                h.record(t.elapsed().as_nanos() as u64);
            }
            if let Some(bar) = self.bar
                && i % 1024 == 1023
            {
                bar.inc(1024);
            }
        }
        Ok(hists)
    }

    fn check(&self, key: u64, got: Option<&[u8]>, scratch: &mut Vec<u8>) -> Result<(), Error> {
        let detail = match got {
            None => "the key was not found".to_string(),
            Some(v) => match self.records.check_value(key, v, scratch) {
                Ok(()) => return Ok(()),
                Err(d) => d,
            },
        };
        Err(Error::WrongValue {
            engine: self.engine.name().to_string(),
            key,
            detail,
        })
    }

    /// Up to `len` entries from `start`, each checked.
    fn scan(&self, start: &[u8], len: usize, scratch: &mut Vec<u8>) -> Result<(), Error> {
        let mut wrong: Option<Error> = None;
        self.engine.scan(start, None, len, &mut |k, v| {
            if wrong.is_some() {
                return;
            }
            let Some(key) = self.records.parse(k) else {
                wrong = Some(Error::WrongValue {
                    engine: self.engine.name().to_string(),
                    key: 0,
                    detail: format!("a scan returned a key of {} bytes not ours", k.len()),
                });
                return;
            };
            if let Err(e) = self.check(key, Some(v), scratch) {
                wrong = Some(e);
            }
        })?;
        wrong.map_or(Ok(()), Err)
    }
}
