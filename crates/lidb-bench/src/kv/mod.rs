//! Engine-comparison benchmarks of the LearnedKV paper (section 5) over the [`crate::engines`]
//! trait: `ycsb` (phases P0-P3 of a YCSB workload, Experiments 1-5, Tables 1-2) and `scan`
//! (Experiment 6: range scans of about 500 KB, with and without updates before them).
//!
//! Runs on the calling thread, plus `--threads` workers during YCSB phases. Invariants:
//! 1. Every engine of a run gets the same [`EngineConfig`] (besides its directory), a fresh
//!    directory of its own, and the same seeded operations; ratios are taken within one run.
//! 2. Every value read (gets, read-modify-writes and every scanned entry) is checked to belong to
//!    its key (see [`records`]); a wrong answer stops the run with [`Error::WrongValue`].
//! 3. Engine directories live under `<dir>/kv-<pid>/` and are removed at the end unless kept.

pub mod hist;
pub mod matrix;
pub mod records;
pub mod scaling;
pub mod scan;
pub mod ycsb;
mod ycsb_table;

use std::path::{Path, PathBuf};

use crate::engines::{self, EngineConfig, EngineError};
use crate::lsm::load::format_size;

pub use records::Records;

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    Engine(EngineError),
    Data(lidb_data::Error),
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A read got no value or one not of its key: a bug in the engine, reported, not timed.
    WrongValue {
        engine: String,
        key: u64,
        detail: String,
    },
    Invalid(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Engine(e) => write!(f, "{e}"),
            Error::Data(e) => write!(f, "{e}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::WrongValue {
                engine,
                key,
                detail,
            } => write!(f, "wrong answer from {engine} for key {key}: {detail}"),
            Error::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Self {
        Error::Engine(e)
    }
}

impl From<lidb_data::Error> for Error {
    fn from(e: lidb_data::Error) -> Self {
        Error::Data(e)
    }
}

/// What both benchmarks share.
#[derive(Debug, Clone)]
pub struct Common {
    /// Engine names in order; the first is the baseline of the ratios.
    pub engines: Vec<String>,
    pub records: Records,
    /// What the keys came from ("ycsb record_key" or the dataset path), for the config line.
    pub key_source: String,
    pub seed: u64,
    /// Engine options; `dir` is replaced per engine.
    pub engine: EngineConfig,
    /// Parent of the run's directory.
    pub dir: PathBuf,
    pub keep: bool,
    /// Draw progress bars on stderr (only shown on a terminal).
    pub progress: bool,
    /// Timed reads of each device probe (`lidb bench ycsb`; see `crate::device_limit`); 0: none.
    pub device_probe_reads: usize,
}

impl Common {
    /// Fails with the engine's one-line error for a name `engines::open` does not know (or one
    /// not built in) before anything is loaded.
    pub fn check_engines(&self) -> Result<(), Error> {
        if self.engines.is_empty() {
            return Err(Error::Invalid("name at least one engine".into()));
        }
        let known = engines::names();
        for name in &self.engines {
            if !known.contains(&name.as_str()) {
                // Unknown names are refused before the directory is touched.
                engines::open(name, &self.engine)?;
            }
        }
        Ok(())
    }
}

/// The options every engine ran with, for the config line.
pub fn describe_engine(cfg: &EngineConfig) -> String {
    format!(
        "memory={} memtable={} cache={} pool={} row_cache={} page_size={} bloom_bits={} \
         direct_io={} sync={} \
         lsm_index={}/{} lsm_cache={} rocksdb_row_cache={} tier_index={}/{} pages \
         over_provisioning={} scan_gc={} background_gc={}",
        cfg.memory_budget_bytes
            .map_or("none".to_string(), format_size),
        format_size(cfg.lsm.memtable_bytes),
        format_size(cfg.lsm.block_cache_bytes),
        format_size(cfg.tree.pool_bytes),
        cfg.tree.row_cache_share,
        cfg.tree.page_size,
        cfg.lsm.bloom_bits_per_key,
        cfg.direct_io,
        cfg.sync,
        cfg.lsm.index.name(),
        cfg.lsm.boundary,
        cfg.lsm.cache_mode.name(),
        cfg.lsm.rocksdb_row_cache_share,
        cfg.tier.index.name(),
        cfg.tier.page_boundary,
        cfg.tier.over_provisioning,
        cfg.tier.scan_gc_ratio,
        cfg.background,
    )
}

/// The directory of one run: `<parent>/kv-<pid>`, one subdirectory per engine. Unless kept,
/// it is removed at the end, and so is `<parent>` when the run created it and left it empty
/// (a run in the working directory leaves no empty `bench-out/` behind).
#[derive(Debug)]
pub struct RunDir {
    root: PathBuf,
    keep: bool,
    /// `<parent>`, when this run created it.
    created_parent: Option<PathBuf>,
}

impl RunDir {
    pub fn new(parent: &Path, keep: bool) -> Result<RunDir, Error> {
        let root = parent.join(format!("kv-{}", std::process::id()));
        if root.exists() {
            return Err(Error::Invalid(format!(
                "{} exists already; remove it or choose another --dir",
                root.display()
            )));
        }
        let created_parent = (!parent.exists()).then(|| parent.to_path_buf());
        std::fs::create_dir_all(&root).map_err(io_err(&root))?;
        Ok(RunDir {
            root,
            keep,
            created_parent,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A fresh directory for engine `name` ("lsm+" becomes "lsm-plus").
    pub fn engine_dir(&self, name: &str) -> PathBuf {
        self.root.join(name.replace('+', "-plus"))
    }

    /// Done with an engine's directory: removed unless kept.
    pub fn release(&self, dir: &Path) -> Result<(), Error> {
        if !self.keep {
            std::fs::remove_dir_all(dir).map_err(io_err(dir))?;
        }
        Ok(())
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
            if let Some(parent) = &self.created_parent {
                // Only an empty directory goes: another run may have put its own in it.
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path = path.to_path_buf();
    move |source| Error::Io { path, source }
}

/// `value / base` as "1.23x", or "-" without a base.
pub fn ratio(value: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}x", value / base)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod run_dir_tests {
    use super::*;

    #[test]
    fn a_run_removes_the_parent_it_created_and_keeps_one_it_found() {
        let base = std::env::temp_dir().join(format!("lidb-rundir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let fresh = base.join("made-by-the-run");
        let run = RunDir::new(&fresh, false).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(run.engine_dir("lsm+")).unwrap_or_else(|e| panic!("{e}"));
        drop(run);
        assert!(!fresh.exists(), "the parent the run created is left behind");
        assert!(base.exists());
        let run = RunDir::new(&base, false).unwrap_or_else(|e| panic!("{e}"));
        drop(run);
        assert!(base.exists(), "a parent that was there before is removed");
        let _ = std::fs::remove_dir_all(&base);
    }
}
