//! `lidb bench lsm`: the LSM papers' experiments on lidb's own engine (lidb-lsm).
//!
//! Each experiment is a function from a [`Config`] to a [`Report`] of rows; every row carries
//! "index" and "boundary". Experiments (one file each): `pareto` (memory versus point-lookup
//! latency), `granularity` (table size and level models), `compaction` (time split of a
//! write-only load), `levels` (where lookups are answered), `level_plan` (a boundary per level
//! under an index-memory budget), `range` (seek versus scan), `ycsb` (workloads A-F). `load` builds the databases, `measure` times and checks lookups.
//!
//! Runs on the calling thread (the engine adds its compaction thread). Invariants:
//! 1. Every lookup's value is checked against the value loaded for its key.
//! 2. Configurations of table granularity share one load and switch indexes with
//!    `Db::reindex` (same data, same table layout); level granularity reloads per configuration,
//!    since level models are built by compaction.
//! 3. Databases are created under `--db DIR` (kept, reused when their marker matches) or under a
//!    temporary directory removed when the run ends.

pub mod compaction;
pub mod granularity;
pub mod level_plan;
pub mod levels;
pub mod load;
pub mod measure;
pub mod pareto;
pub mod range;
pub mod ycsb;

use std::path::{Path, PathBuf};

use lidb_index::Params;
use lidb_lsm::IndexKind;
use lidb_lsm::{Db, Granularity, IndexOptions};

pub use load::{Dataset, Engine, KeySize};

/// Which experiment to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    Pareto,
    Granularity,
    Compaction,
    Levels,
    LevelPlan,
    Range,
    Ycsb,
}

impl Experiment {
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Pareto => "pareto",
            Experiment::Granularity => "granularity",
            Experiment::Compaction => "compaction",
            Experiment::Levels => "levels",
            Experiment::LevelPlan => "level-plan",
            Experiment::Range => "range",
            Experiment::Ycsb => "ycsb",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub data: Dataset,
    /// Index configurations: clustered families, `+keys` variants, unclustered kinds.
    pub families: Vec<IndexChoice>,
    pub boundaries: Vec<u64>,
    pub engine: Engine,
    /// Timed point lookups per configuration (pareto, granularity, levels); range lookups (range).
    pub lookups: usize,
    /// Entries read per range lookup.
    pub range_len: usize,
    pub workload: lidb_data::Workload,
    /// YCSB operations per configuration.
    pub ops: usize,
    /// Where databases live; None: a temporary directory removed at the end.
    pub db_dir: Option<PathBuf>,
    /// Draw progress bars on stderr (only shown on a terminal).
    pub progress: bool,
    /// Timed reads of each device probe (point-lookup experiments; `crate::device_limit`); 0:
    /// none.
    pub device_probe_reads: usize,
    /// The index-memory budget `level-plan` chooses a boundary per level for (None elsewhere).
    pub index_memory_bytes: Option<u64>,
}

impl Config {
    /// Every (family, boundary) pair, families outermost.
    pub fn configurations(&self) -> Vec<(IndexChoice, u64)> {
        self.families
            .iter()
            .flat_map(|&f| self.boundaries.iter().map(move |&b| (f, b)))
            .collect()
    }
}

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Lsm(lidb_lsm::Error),
    Data(lidb_data::Error),
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A lookup got a wrong or no value: a bug in the engine or an index, reported, not timed.
    WrongValue {
        index: String,
        boundary: u64,
        key: u64,
        detail: String,
    },
    Invalid(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Lsm(e) => write!(f, "{e}"),
            Error::Data(e) => write!(f, "{e}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::WrongValue {
                index,
                boundary,
                key,
                detail,
            } => write!(
                f,
                "wrong answer with {index} at boundary {boundary} for key {key}: {detail}"
            ),
            Error::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<lidb_lsm::Error> for Error {
    fn from(e: lidb_lsm::Error) -> Self {
        Error::Lsm(e)
    }
}

impl From<lidb_data::Error> for Error {
    fn from(e: lidb_data::Error) -> Self {
        Error::Data(e)
    }
}

/// Rows of one experiment as a table for people.
pub trait TableRow {
    fn header() -> &'static [&'static str];
    fn cells(&self) -> Vec<String>;
}

/// The rows of a run.
#[derive(Debug, Clone)]
pub enum Rows {
    Lookup(Vec<pareto::LookupRow>),
    Compaction(Vec<compaction::CompactionRow>),
    Levels(Vec<levels::LevelRow>),
    Plan(Vec<level_plan::PlanRow>),
    Range(Vec<range::RangeRow>),
    Ycsb(Vec<ycsb::YcsbRow>),
}

/// What a run produced: rows, and notes on how it ran (loads, reuse, re-indexing).
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Rows,
    pub notes: Vec<String>,
}

fn table_of<R: TableRow>(rows: &[R]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(TableRow::cells).collect();
    crate::table::render(R::header(), &cells)
}

fn json_of<R: serde::Serialize>(rows: &[R]) -> Result<Vec<String>, serde_json::Error> {
    rows.iter().map(serde_json::to_string).collect()
}

impl Rows {
    pub fn table(&self) -> String {
        match self {
            Rows::Lookup(r) => table_of(r),
            Rows::Compaction(r) => table_of(r),
            Rows::Levels(r) => table_of(r),
            Rows::Plan(r) => table_of(r),
            Rows::Range(r) => table_of(r),
            Rows::Ycsb(r) => table_of(r),
        }
    }

    /// One JSON object per row.
    pub fn json_lines(&self) -> Result<Vec<String>, serde_json::Error> {
        match self {
            Rows::Lookup(r) => json_of(r),
            Rows::Compaction(r) => json_of(r),
            Rows::Levels(r) => json_of(r),
            Rows::Plan(r) => json_of(r),
            Rows::Range(r) => json_of(r),
            Rows::Ycsb(r) => json_of(r),
        }
    }

    /// (series, memory bytes, mean lookup µs) for the memory-versus-latency plot; the series is
    /// the family, with the table size or "level" added when a run varies granularity.
    pub fn plot_points(&self) -> Option<Vec<(String, f64, f64)>> {
        let Rows::Lookup(rows) = self else {
            return None;
        };
        let mut setups: Vec<(u64, &str)> = rows
            .iter()
            .map(|r| (r.sst_size_bytes, r.granularity.as_str()))
            .collect();
        setups.sort_unstable();
        setups.dedup();
        Some(
            rows.iter()
                .map(|r| {
                    let series = if setups.len() > 1 {
                        format!("{} {}", r.index, setup_name(r))
                    } else {
                        r.index.clone()
                    };
                    (series, r.index_bytes as f64, r.figures.lookup_us_mean)
                })
                .collect(),
        )
    }
}

fn setup_name(r: &pareto::LookupRow) -> String {
    if r.granularity == "level" {
        "level".into()
    } else {
        format!("sst {}", load::format_size(r.sst_size_bytes))
    }
}

/// Runs `experiment`.
pub fn run(experiment: Experiment, cfg: &Config) -> Result<Report, Error> {
    let work = WorkDir::new(cfg.db_dir.clone())?;
    let mut notes = Vec::new();
    let lookups = matches!(experiment, Experiment::Pareto | Experiment::Granularity);
    let mut device = lookups.then(|| {
        crate::device_limit::DeviceLimit::start(
            &work.root,
            cfg.device_probe_reads,
            cfg.data.seed,
            &mut notes,
        )
    });
    let mut rows = match experiment {
        Experiment::Pareto => Rows::Lookup(pareto::run(cfg, &work, &mut notes)?),
        Experiment::Granularity => Rows::Lookup(granularity::run(cfg, &work, &mut notes)?),
        Experiment::Compaction => Rows::Compaction(compaction::run(cfg, &work, &mut notes)?),
        Experiment::Levels => Rows::Levels(levels::run(cfg, &work, &mut notes)?),
        Experiment::LevelPlan => Rows::Plan(level_plan::run(cfg, &work, &mut notes)?),
        Experiment::Range => Rows::Range(range::run(cfg, &work, &mut notes)?),
        Experiment::Ycsb => Rows::Ycsb(ycsb::run(cfg, &work, &mut notes)?),
    };
    if let (Some(device), Rows::Lookup(rows)) = (device.as_mut(), &mut rows) {
        device.annotate(rows, |_| true, &mut notes);
    }
    Ok(Report { rows, notes })
}

/// The directory databases are created in: the user's (kept) or a temporary one (removed on
/// drop, and each load in it removed as soon as it is no longer needed).
#[derive(Debug)]
pub struct WorkDir {
    root: PathBuf,
    temporary: bool,
}

impl WorkDir {
    pub fn new(user: Option<PathBuf>) -> Result<WorkDir, Error> {
        let (root, temporary) = match user {
            Some(dir) => (dir, false),
            None => (
                std::env::temp_dir().join(format!("lidb-bench-lsm-{}", std::process::id())),
                true,
            ),
        };
        std::fs::create_dir_all(&root).map_err(load::io_err(&root))?;
        Ok(WorkDir { root, temporary })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Done with the load in `dir`: removed if the work directory is temporary.
    pub fn release(&self, dir: &Path) -> Result<(), Error> {
        if self.temporary {
            load::wipe(dir)?;
        }
        Ok(())
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// One index configuration of the tables (the LSM study's Figure 5): the one list every
/// command parses (lidb-engines').
pub use lidb_engines::IndexChoice;

/// The index options of one configuration (family defaults besides the boundary).
pub fn index_options(choice: IndexChoice, boundary: u64) -> IndexOptions {
    IndexOptions {
        family: choice.family,
        params: Params::new(boundary),
        level_boundaries: Vec::new(),
        kind: choice.kind,
    }
}

/// How [`each_config`] hands out databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The configurations may only read: one load is shared (re-indexed in place).
    ReadOnly,
    /// The configurations write: each gets a fresh copy of the load.
    Writes,
}

/// Calls `f` with a database holding `cfg.data`, loaded with `engine`, indexed by each
/// (family, boundary) of `cfg` in turn.
pub fn each_config<T>(
    cfg: &Config,
    work: &WorkDir,
    engine: Engine,
    mode: Use,
    notes: &mut Vec<String>,
    mut f: impl FnMut(&Db, IndexChoice, u64) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    let configs = cfg.configurations();
    let (data, sizes) = (data_id(cfg), sizes_id(engine));
    let mut out = Vec::with_capacity(configs.len());
    let load_note = |notes: &mut Vec<String>, name: &str, l: &load::Loaded| {
        notes.push(if l.reused {
            format!("{name}: reused the database loaded earlier")
        } else {
            format!(
                "{name}: loaded in {:.1} s (inserts, inline compactions, flush)",
                l.load_s
            )
        });
    };
    if engine.granularity == Granularity::Table {
        let Some(&(f0, b0)) = configs.first() else {
            return Ok(out);
        };
        let (name, what) = table_load_id(cfg, engine);
        let dir = work.path(&name);
        let loaded = load::open_or_load(
            &dir,
            &cfg.data,
            engine.options(index_options(f0, b0)),
            &what,
            cfg.progress,
        )?;
        load_note(notes, &name, &loaded);
        // The index the tables hold: known after a fresh load, unknown after a reuse.
        let mut indexed = (!loaded.reused).then(|| index_options(f0, b0));
        notes.push(format!(
            "{name}: every configuration re-indexes the same tables with Db::reindex \
             (same data and layout, no reload)"
        ));
        let mut db = Some(loaded.db);
        if mode == Use::Writes
            && let Some(db) = db.take()
        {
            db.close()?;
        }
        for (family, b) in configs {
            let idx = index_options(family, b);
            let result = match (mode, db.take()) {
                (Use::ReadOnly, Some(mut d)) => {
                    if indexed.as_ref() != Some(&idx) {
                        d = d.reindex(idx.clone())?;
                        indexed = Some(idx);
                    }
                    fit_budget(&d, engine, &config_name(family, b), notes);
                    let r = f(&d, family, b);
                    db = Some(d);
                    r
                }
                _ => {
                    let run_dir = work.path(&format!("{name}-run"));
                    load::copy_db(&dir, &run_dir)?;
                    let mut d = Db::open(&run_dir, writable(engine, idx.clone()))?;
                    if indexed.as_ref() != Some(&idx) {
                        d = d.reindex(idx)?;
                    }
                    fit_budget(&d, engine, &config_name(family, b), notes);
                    let r = f(&d, family, b);
                    d.close()?;
                    load::wipe(&run_dir)?;
                    r
                }
            };
            out.push(result?);
        }
        drop(db);
        work.release(&dir)?;
    } else {
        for (family, b) in configs {
            if family.kind != IndexKind::Clustered {
                return Err(Error::Invalid(format!(
                    "{}: level granularity takes clustered families only",
                    family.name()
                )));
            }
            let name = format!("level-{sizes}-{}-{b}", family.name());
            let dir = work.path(&name);
            let what = format!(
                "{data} {} index={} boundary={b}",
                engine.describe(),
                family.name()
            );
            let opts = engine.options(index_options(family, b));
            let loaded = load::open_or_load(&dir, &cfg.data, opts.clone(), &what, cfg.progress)?;
            load_note(notes, &name, &loaded);
            let result = if mode == Use::ReadOnly {
                fit_budget(&loaded.db, engine, &config_name(family, b), notes);
                f(&loaded.db, family, b)
            } else {
                loaded.db.close()?;
                let run_dir = work.path(&format!("{name}-run"));
                load::copy_db(&dir, &run_dir)?;
                let d = Db::open(
                    &run_dir,
                    lidb_lsm::Options {
                        background_compaction: true,
                        ..opts
                    },
                )?;
                fit_budget(&d, engine, &config_name(family, b), notes);
                let r = f(&d, family, b);
                d.close()?;
                load::wipe(&run_dir)?;
                r
            };
            out.push(result?);
            work.release(&dir)?;
        }
    }
    Ok(out)
}

/// What a load holds, for its marker: the data and its seed.
fn data_id(cfg: &Config) -> String {
    format!(
        "data={} keys={} key_size={} value_size={} seed={}",
        cfg.data.source,
        cfg.data.keys.len(),
        cfg.data.key_size,
        cfg.data.value_size,
        cfg.data.seed
    )
}

/// "sst4MiB-wb4MiB": the sizes part of a load's directory name.
fn sizes_id(engine: Engine) -> String {
    format!(
        "sst{}-wb{}",
        load::format_size(engine.sst_size_bytes),
        load::format_size(engine.write_buffer_bytes)
    )
}

/// (directory name, marker) of the table-granularity load every configuration of `cfg`
/// re-indexes: runs of different experiments over the same data share it under `--db`.
pub fn table_load_id(cfg: &Config, engine: Engine) -> (String, String) {
    (
        format!("table-{}", sizes_id(engine)),
        format!("{} {}", data_id(cfg), engine.layout()),
    )
}

/// "pgm B=16", naming a configuration in notes.
fn config_name(family: IndexChoice, boundary: u64) -> String {
    format!("{} B={boundary}", family.name())
}

/// Fits `db` to the engine's memory budget, if it has one: measures its indexes and filters and
/// gives the cache the rest (`lidb_engines::budget`); says how in `notes`. Untimed.
pub fn fit_budget(db: &Db, engine: Engine, what: &str, notes: &mut Vec<String>) -> Fit {
    let Some(budget) = engine.memory_budget_bytes else {
        return Fit::default();
    };
    let m = db.memory_usage();
    let plan = lidb_engines::budget::plan(budget, m.index_bytes + m.filter_bytes);
    db.set_block_cache_bytes(plan.cache_bytes);
    notes.push(format!("{what}: memory budget: {}", plan.describe()));
    Fit {
        budget_bytes: Some(budget),
        cache_capacity_bytes: plan.cache_bytes,
        over_budget_bytes: plan.over_bytes,
    }
}

/// How a configuration took the budget (all zero and None without `--memory`). JSON names.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Fit {
    pub budget_bytes: Option<u64>,
    /// The cache's capacity after the fit (0 without a budget: see the engine's 8 MiB).
    pub cache_capacity_bytes: u64,
    /// How far the indexes and filters alone exceed the budget (0 when within it).
    pub over_budget_bytes: u64,
}

/// Options for a copy the configuration writes to: compactions in the background, as in
/// normal operation.
fn writable(engine: Engine, idx: IndexOptions) -> lidb_lsm::Options {
    lidb_lsm::Options {
        background_compaction: true,
        ..engine.options(idx)
    }
}

/// `n` existing keys of the data, seeded (uniform over the loaded keys, with replacement).
pub fn uniform_lookups(cfg: &Config, n: usize, salt: u64) -> Vec<u64> {
    lidb_data::queries::existing(&cfg.data.keys, n, cfg.data.seed ^ salt)
}

/// Warm-up lookups before each timed pass: a tenth of the timed ones, 1,000 to 10,000.
pub fn warmup_count(lookups: usize) -> usize {
    (lookups / 10).clamp(1_000, 10_000)
}
