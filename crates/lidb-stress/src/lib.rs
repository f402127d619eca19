//! `lidb stress`: many threads of random puts, deletes, gets, multi-key batches and scans
//! against one engine (or `lidb serve`), with the engine's background jobs forced often, I/O
//! faults injected through the storage layer, and the process killed at random moments; every
//! read is checked against an expected state kept outside the engine, and after every kill or
//! reopen every key is. The model is RocksDB's `db_stress` with its expected-state file and
//! `db_crashtest.py`.
//!
//! Parts:
//! - `codec`: keys, and values that name the put that wrote them.
//! - `expected`: what each key may hold; its file and the workers' op logs.
//! - `workload`: the workers, the background thread, the full verification.
//! - `run`: one run in this process, reopening the target after failed writes.
//! - `kill`: the supervisor that starts the run as a child process, SIGKILLs it, reopens,
//!   verifies and repeats.
//! - `target`: the operations, over an engine in this process.
//! - `serve`: `lidb serve` as the target over the Redis protocol, SIGKILLed and restarted.
//!
//! Every run ends with a [`Report`]: one summary line, and `passed()` false on any mismatch.

pub mod codec;
pub mod deterministic;
pub mod expected;
pub mod kill;
pub mod run;
pub mod serve;
pub mod target;
pub mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use lidb_engines::EngineConfig;
use lidb_storage::Storage;
use lidb_storage::fault::{FaultCounts, FaultSpec, FaultStorage};
use lidb_storage::fs::FsStorage;

use crate::target::{EngineTarget, Target};
use crate::workload::{Counters, Shared};

/// One stress run's settings (the options of `lidb stress`).
#[derive(Debug, Clone)]
pub struct Config {
    pub engine: String,
    pub threads: usize,
    /// Keys `0..keys` are written, read and scanned.
    pub keys: u32,
    pub duration: Duration,
    /// Stop after this many operations in all (None: at the end of `duration` only).
    pub operations: Option<u64>,
    pub faults: FaultSpec,
    pub seed: u64,
    /// The run's directory: the engine's files and the expected state.
    pub db: PathBuf,
    /// Largest value in bytes (values vary from 11 bytes up to it).
    pub value_size: usize,
    /// One background job (flush, compaction or GC, conversion, checkpoint) this often.
    pub background_every: Duration,
    /// Every write synced before it is acknowledged (the default). Off only where every kill is
    /// a process kill and the engine writes to the operating system before it acknowledges (lsm
    /// through `lidb serve`, whose SETs are then written on the server's async workers): what
    /// reached the operating system survives a SIGKILL, so every acknowledged write must still
    /// be read back.
    pub sync: bool,
}

impl Config {
    /// The engine's configuration for a stress run: small write buffers and caches so flushes,
    /// compactions, evictions and GC happen often; automatic checkpoints every 512 KiB of log
    /// and learnedkv's automatic conversion at 1 MiB of LSM tables; a quarter of the tree
    /// engines' cache a row cache, so its fills race the writers; every write synced (unless
    /// `sync` is off), so every acknowledged write must survive a kill.
    pub fn engine_config(&self) -> EngineConfig {
        let mut c = EngineConfig::new(self.db.join("engine"));
        c.lsm.memtable_bytes = 256 << 10;
        c.lsm.block_cache_bytes = 1 << 20;
        c.tree.pool_bytes = 1 << 20;
        c.tree.row_cache_share = 0.25;
        c.sync = self.sync;
        c.background = true;
        c.set_checkpoint_log_bytes(Some(512 << 10));
        c.tier.convert_at_lsm_bytes = Some(1 << 20);
        c
    }
}

/// Opens one of lidb's engines in this process on a [`FaultStorage`] over the real file system.
#[derive(Debug)]
pub struct EngineHarness {
    name: String,
    cfg: EngineConfig,
    storage: FaultStorage,
    /// Whether injection is on between opens.
    faults_on: bool,
    /// Whether the run injects faults at all (then opens try with them first).
    inject: bool,
    /// Opens that failed under faults.
    failed_opens: u64,
}

impl EngineHarness {
    pub fn new(cfg: &Config) -> EngineHarness {
        let inner: Arc<dyn Storage> = Arc::new(FsStorage);
        EngineHarness {
            name: cfg.engine.clone(),
            cfg: cfg.engine_config(),
            storage: FaultStorage::new(inner, cfg.faults, cfg.seed),
            faults_on: false,
            inject: !cfg.faults.is_none(),
            failed_opens: 0,
        }
    }
}

impl run::Harness for EngineHarness {
    fn open(&mut self) -> Result<(Arc<dyn Target>, String), String> {
        // Every open first runs with the faults on (recovery's reads, truncations and syncs
        // fail like any others); one that fails must have changed nothing a second open, with
        // the faults off, cannot recover from.
        if self.inject {
            self.storage.set_enabled(true);
            let first =
                lidb_engines::open_on(&self.name, &self.cfg, Arc::new(self.storage.clone()));
            self.storage.set_enabled(self.faults_on);
            match first {
                Ok(engine) => {
                    let recovery = engine.recovery();
                    return Ok((Arc::new(EngineTarget { engine }), recovery));
                }
                Err(e) => {
                    self.failed_opens += 1;
                    eprintln!("stress: an open under faults failed, opening again without: {e}");
                }
            }
        }
        self.storage.set_enabled(false);
        let opened = lidb_engines::open_on(&self.name, &self.cfg, Arc::new(self.storage.clone()));
        self.storage.set_enabled(self.faults_on);
        let engine = opened.map_err(|e| format!("opening {}: {e}", self.name))?;
        let recovery = engine.recovery();
        Ok((Arc::new(EngineTarget { engine }), recovery))
    }
    fn failed_opens(&self) -> u64 {
        self.failed_opens
    }
    fn set_faults(&mut self, on: bool) {
        self.faults_on = on;
        self.storage.set_enabled(on);
        if !on {
            self.storage.reset_space();
        }
    }
    fn fault_counts(&self) -> FaultCounts {
        self.storage.counts()
    }
    fn fault_storage(&self) -> Option<FaultStorage> {
        Some(self.storage.clone())
    }
}

/// What a run did and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub engine: String,
    pub threads: usize,
    pub keys: u32,
    pub seed: u64,
    pub seconds: f64,
    pub operations: u64,
    pub gets: u64,
    pub writes: u64,
    pub batches: u64,
    pub scans: u64,
    pub background_jobs: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub background_errors: u64,
    pub kills: u64,
    pub reopens: u64,
    /// Opens under faults that failed (each then retried without faults).
    pub failed_opens: u64,
    /// Reopens whose recovery reported something cut or replayed.
    pub recoveries: u64,
    pub faults: FaultCounts,
    pub verified_keys: u64,
    pub mismatches: u64,
    /// What failed, in full: mismatches first.
    pub failures: Vec<String>,
    pub last_error: Option<String>,
    /// Whether faults were injected (errors are expected then).
    pub faults_on: bool,
}

impl Report {
    pub fn new(cfg: &Config) -> Report {
        Report {
            engine: cfg.engine.clone(),
            threads: cfg.threads,
            keys: cfg.keys,
            seed: cfg.seed,
            faults_on: !cfg.faults.is_none(),
            ..Report::default()
        }
    }

    fn note_recovery(&mut self, recovery: &str) {
        if !recovery.trim().is_empty() {
            self.recoveries += 1;
            for line in recovery.lines() {
                eprintln!("stress: {line}");
            }
        }
    }

    fn absorb(&mut self, shared: &Shared, faults: FaultCounts) {
        let c = &shared.counters;
        let get = |a: &AtomicU64| Counters::get(a);
        self.operations += get(&c.operations);
        self.gets += get(&c.gets);
        self.writes += get(&c.writes);
        self.batches += get(&c.batches);
        self.scans += get(&c.scans);
        self.background_jobs += get(&c.background_jobs);
        self.read_errors += get(&c.read_errors);
        self.write_errors += get(&c.write_errors);
        self.background_errors += get(&c.background_errors);
        self.mismatches += get(&c.mismatches);
        self.faults = add_counts(self.faults, faults);
        self.failures.extend(
            shared
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned(),
        );
        if let Some(e) = shared
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            self.last_error = Some(e);
        }
    }

    /// The counters a kill-mode child publishes, as `name value` lines.
    fn counters(&self) -> [(&'static str, u64); 14] {
        let f = &self.faults;
        [
            ("gets", self.gets),
            ("batches", self.batches),
            ("scans", self.scans),
            ("background_jobs", self.background_jobs),
            ("read_errors", self.read_errors),
            ("background_errors", self.background_errors),
            ("reopens", self.reopens),
            ("failed_opens", self.failed_opens),
            ("recoveries", self.recoveries),
            ("fault_read", f.read_errors),
            ("fault_write", f.write_errors),
            ("fault_short", f.short_writes),
            ("fault_sync", f.sync_errors),
            ("fault_enospc", f.enospc),
        ]
    }

    /// Writes the counters to `path` (a temporary file renamed over it); best effort: a child
    /// killed mid-write leaves the previous file.
    fn publish(&self, path: &std::path::Path) {
        let text: String = self
            .counters()
            .iter()
            .map(|(name, n)| format!("{name} {n}\n"))
            .collect();
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    /// Adds the counters a child published at `path` (nothing when it published none).
    fn add_published(&mut self, path: &std::path::Path) {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(n)) = (words.next(), words.next().and_then(|w| w.parse().ok()))
            else {
                continue;
            };
            let n: u64 = n;
            let f = &mut self.faults;
            match name {
                "gets" => self.gets += n,
                "batches" => self.batches += n,
                "scans" => self.scans += n,
                "background_jobs" => self.background_jobs += n,
                "read_errors" => self.read_errors += n,
                "background_errors" => self.background_errors += n,
                "reopens" => self.reopens += n,
                "failed_opens" => self.failed_opens += n,
                "recoveries" => self.recoveries += n,
                "fault_read" => f.read_errors += n,
                "fault_write" => f.write_errors += n,
                "fault_short" => f.short_writes += n,
                "fault_sync" => f.sync_errors += n,
                "fault_enospc" => f.enospc += n,
                _ => {}
            }
        }
    }

    /// Errors the engine returned with no fault injected: each is a failure of the run.
    pub fn unexpected_errors(&self) -> u64 {
        if self.faults_on {
            0
        } else {
            self.read_errors + self.write_errors + self.background_errors
        }
    }

    pub fn passed(&self) -> bool {
        self.mismatches == 0 && self.failures.is_empty() && self.unexpected_errors() == 0
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        let f = &self.faults;
        format!(
            "stress: engine={} threads={} keys={} seed={} seconds={:.1} operations={} gets={} \
             writes={} batches={} scans={} background_jobs={} kills={} reopens={} failed_opens={} \
             recoveries={} \
             faults={} (read-eio={} write-eio={} short-write={} sync-fail={} enospc={}) \
             errors={} (read={} write={} background={}) verified_keys={} mismatches={} {}",
            self.engine,
            self.threads,
            self.keys,
            self.seed,
            self.seconds,
            self.operations,
            self.gets,
            self.writes,
            self.batches,
            self.scans,
            self.background_jobs,
            self.kills,
            self.reopens,
            self.failed_opens,
            self.recoveries,
            f.total(),
            f.read_errors,
            f.write_errors,
            f.short_writes,
            f.sync_errors,
            f.enospc,
            self.read_errors + self.write_errors + self.background_errors,
            self.read_errors,
            self.write_errors,
            self.background_errors,
            self.verified_keys,
            self.mismatches,
            if self.passed() { "PASSED" } else { "FAILED" }
        )
    }
}

pub(crate) fn add_counts(a: FaultCounts, b: FaultCounts) -> FaultCounts {
    FaultCounts {
        read_errors: a.read_errors + b.read_errors,
        write_errors: a.write_errors + b.write_errors,
        short_writes: a.short_writes + b.short_writes,
        sync_errors: a.sync_errors + b.sync_errors,
        enospc: a.enospc + b.enospc,
    }
}

/// Runs `cfg` in this process against the engine it names (no kills: see [`kill::supervise`]).
/// The directory `cfg.db` must be empty or absent.
pub fn stress_engine(cfg: &Config) -> Result<Report, String> {
    kill::prepare_dir(&cfg.db)?;
    let expected = Arc::new(expected::Expected::new(cfg.keys));
    let mut harness = EngineHarness::new(cfg);
    run::run(cfg, &mut harness, expected, Vec::new(), None, None)
}
