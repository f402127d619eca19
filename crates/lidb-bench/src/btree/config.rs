//! What one `lidb bench btree` run is: the experiment, the records, the engines and the sizes.
//! Pure data and checks; the runners in [`super::experiments`] read it.
//!
//! Invariants (enforced by [`Config::check`], which every runner calls first):
//! 1. The records' keys are sorted and distinct, and there is at least one.
//! 2. `memory` runs with a pool at least as large as the records; `partial` with a pool smaller
//!    than them (so the replacement really evicts pages); the defaults keep to this.
//! 3. `writes` has enough keys outside the loaded half for every insert it will make.

use std::path::PathBuf;

use super::Error;
use crate::lsm::load::human_size;

/// The paper's four experiments (section V).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Experiment {
    /// Fig. 5: read-only throughput with everything resident.
    Memory,
    /// Figs. 3b and 6a: a pool smaller than the tree; latency mean and tails.
    Partial,
    /// Fig. 2: throughput per interval from a cold pool, and the time to 90% of the peak.
    Cold,
    /// Table IV: 100% insert, YCSB-A (50% insert), YCSB-B (5% insert) after a bulk load.
    Writes,
}

impl Experiment {
    pub const ALL: [Experiment; 4] = [
        Experiment::Memory,
        Experiment::Partial,
        Experiment::Cold,
        Experiment::Writes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Experiment::Memory => "memory",
            Experiment::Partial => "partial",
            Experiment::Cold => "cold",
            Experiment::Writes => "writes",
        }
    }

    /// The experiment called `name`; an error listing the four otherwise.
    pub fn from_name(name: &str) -> Result<Experiment, Error> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown experiment '{name}'; known: memory, partial, cold, writes"
                ))
            })
    }
}

/// The records of a run: sorted distinct keys, each with a value of `value_size` bytes derived
/// from its key (see [`value_for`]).
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Where the keys came from (a path or a synthetic spec), for the rows.
    pub source: String,
    pub keys: Vec<u64>,
    pub value_size: u32,
}

impl Dataset {
    /// Key and value bytes of all records (8-byte keys).
    pub fn data_bytes(&self) -> u64 {
        self.keys.len() as u64 * (8 + u64::from(self.value_size))
    }
}

/// The value stored under `key`: the key's 8 little-endian bytes, then `version` (4 bytes),
/// repeated to `size` bytes, so every read can be checked against its key.
pub fn value_for(key: u64, version: u32, size: u32) -> Vec<u8> {
    let mut unit = key.to_le_bytes().to_vec();
    unit.extend_from_slice(&version.to_le_bytes());
    unit.iter().copied().cycle().take(size as usize).collect()
}

/// Whether `value` is a value [`value_for`] makes for `key` (any version) at `size` bytes.
pub fn value_matches(key: u64, value: &[u8], size: u32) -> bool {
    let prefix = key.to_le_bytes();
    let n = prefix.len().min(size as usize);
    value.len() == size as usize && value.get(..n) == prefix.get(..n)
}

/// The whole configuration of a run.
#[derive(Debug, Clone)]
pub struct Config {
    pub experiment: Experiment,
    pub data: Dataset,
    /// Engine names, in the order rows are printed.
    pub engines: Vec<String>,
    /// Pool (cache) bytes; `None`: the experiment's default (see [`Config::pool_bytes`]).
    pub pool: Option<u64>,
    /// Timed operations per engine and row.
    pub ops: u64,
    /// Thread counts of the timed lookups of memory and partial, each a row of its own over the
    /// same loaded store (lookups change nothing); cold and writes run on one thread (`[1]`).
    pub threads: Vec<usize>,
    /// `cold`: how long lookups run from the cold pool, and the width of one throughput bin.
    pub cold_seconds: f64,
    pub interval_ms: u64,
    /// `partial`: probability of the paper's simulated inner-node miss (its row is labelled a
    /// simulation); 0 skips the simulation.
    pub inner_miss: f64,
    pub seed: u64,
    /// Engine files go under this directory, one subdirectory per engine and phase.
    pub dir: PathBuf,
    /// Keep each engine's subdirectories after its rows are taken (otherwise they are removed
    /// then, so a run at the sizes needs the disk of one engine at a time).
    pub keep: bool,
    pub progress: bool,
}

impl Config {
    /// The directory of `engine`'s store for `phase`: `<dir>/<engine>-<phase>`, with the
    /// characters of a model name (`learnedstore:rs/16`) that do not belong in a file name
    /// replaced by `_`.
    pub fn engine_dir(&self, engine: &str, phase: &str) -> PathBuf {
        self.dir
            .join(format!("{}-{phase}", Self::file_name(engine)))
    }

    fn file_name(engine: &str) -> String {
        engine
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '+' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Removes every directory of `engine` under `dir` (what [`Config::engine_dir`] made).
    pub fn remove_engine_dirs(&self, engine: &str) -> std::io::Result<()> {
        let prefix = format!("{}-", Self::file_name(engine));
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                std::fs::remove_dir_all(entry.path())?;
            }
        }
        Ok(())
    }
}

/// Pool slack over the records for B-tree page overhead when everything must be resident.
const RESIDENT_SLACK: u64 = 16 << 20;

impl Config {
    /// The pool of this run: `--pool` if given, else everything resident (twice the records
    /// plus 16 MiB) for memory and writes, a quarter of the records for partial, half for cold
    /// (the paper's 100 GB pool for 194 GB).
    pub fn pool_bytes(&self) -> u64 {
        let data = self.data.data_bytes();
        self.pool.unwrap_or(match self.experiment {
            Experiment::Memory | Experiment::Writes => data * 2 + RESIDENT_SLACK,
            Experiment::Partial => (data / 4).max(1),
            Experiment::Cold => (data / 2).max(1),
        })
    }

    /// Records bulk-loaded before the timed operations: all of them, or for `writes` the first
    /// half of a seeded shuffle (the other half is what the workloads insert).
    pub fn loaded_records(&self) -> u64 {
        let n = self.data.keys.len() as u64;
        if self.experiment == Experiment::Writes {
            n / 2
        } else {
            n
        }
    }

    /// Checks the invariants of the module doc; the error is one line naming the option.
    pub fn check(&self) -> Result<(), Error> {
        let keys = &self.data.keys;
        if keys.is_empty() {
            return Err(Error::Invalid(format!("{}: no keys", self.data.source)));
        }
        if !keys.windows(2).all(|w| matches!(w, [a, b] if a < b)) {
            return Err(Error::Invalid(
                "the keys must be sorted and distinct (a bug in the caller)".into(),
            ));
        }
        if self.ops == 0 {
            return Err(Error::Invalid("--ops must be at least 1".into()));
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(Error::Invalid("--threads: give at least 1 thread".into()));
        }
        if matches!(self.experiment, Experiment::Cold | Experiment::Writes) && self.threads != [1] {
            return Err(Error::Invalid(format!(
                "--threads: {} runs on one thread; thread counts apply to memory and partial \
                 (their lookups)",
                self.experiment.name()
            )));
        }
        if self.value_size_too_small() {
            return Err(Error::Invalid(
                "--value-size must be at least 8 bytes".into(),
            ));
        }
        let data = self.data.data_bytes();
        let pool = self.pool_bytes();
        match self.experiment {
            Experiment::Memory if pool < data => Err(Error::Invalid(format!(
                "--pool {} is smaller than the records ({}): memory keeps everything \
                 resident; use --experiment partial for a smaller pool",
                human_size(pool),
                human_size(data)
            ))),
            Experiment::Partial if pool >= data => Err(Error::Invalid(format!(
                "--pool {} is not smaller than the records ({}): partial needs a pool \
                 smaller than the tree",
                human_size(pool),
                human_size(data)
            ))),
            Experiment::Cold if !(self.cold_seconds > 0.0 && self.interval_ms > 0) => Err(
                Error::Invalid("--seconds and --interval-ms must be above 0".into()),
            ),
            Experiment::Partial if !(0.0..=1.0).contains(&self.inner_miss) => Err(Error::Invalid(
                "--inner-miss must be a probability in 0..=1".into(),
            )),
            Experiment::Writes => {
                let free = keys.len() as u64 - self.loaded_records();
                if self.ops > free {
                    Err(Error::Invalid(format!(
                        "--ops {} needs up to {} inserts of new keys but the data has only \
                         {free} keys outside the loaded half: use more keys or fewer --ops",
                        self.ops, self.ops
                    )))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    fn value_size_too_small(&self) -> bool {
        self.data.value_size < 8
    }

    /// The configuration line printed before the rows.
    pub fn describe(&self) -> String {
        let extra = match self.experiment {
            Experiment::Cold => format!(
                " seconds={} interval_ms={}",
                self.cold_seconds, self.interval_ms
            ),
            Experiment::Partial => format!(" inner_miss={}", self.inner_miss),
            _ => String::new(),
        };
        format!(
            "# lidb bench btree: experiment={} data={} records={} loaded={} value_size={} \
             data_bytes={} pool={} ops={} threads={} engines={} seed={}{extra} dir={}",
            self.experiment.name(),
            self.data.source,
            self.data.keys.len(),
            self.loaded_records(),
            self.data.value_size,
            human_size(self.data.data_bytes()),
            human_size(self.pool_bytes()),
            self.ops,
            self.threads
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.engines.join(","),
            self.seed,
            self.dir.display()
        )
    }
}
