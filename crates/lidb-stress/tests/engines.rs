//! Every engine through the stress run, short: in one process with eight threads, and
//! deterministically with power cuts; and the checker itself, which must catch an engine that
//! loses writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lidb_storage::fault::FaultSpec;
use lidb_stress::expected::Expected;
use lidb_stress::run::{self, Harness};
use lidb_stress::target::{Rows, Target};
use lidb_stress::{Config, EngineHarness};
use lidb_testkit::Scratch;

/// Every engine but rocksdb, which keeps its files outside lidb's storage layer.
fn engines() -> Vec<&'static str> {
    let mut all = lidb_engines::names();
    all.retain(|&e| e != "rocksdb");
    all
}

fn config(engine: &str, dir: &std::path::Path, seed: u64) -> Config {
    Config {
        engine: engine.into(),
        threads: 8,
        keys: 400,
        duration: Duration::from_secs(2),
        operations: None,
        faults: FaultSpec::default(),
        seed,
        db: dir.join(engine),
        value_size: 100,
        background_every: Duration::from_millis(20),
        sync: true,
    }
}

#[test]
fn every_engine_passes_eight_threads_in_one_process() {
    let dir = Scratch::new("stress-threads");
    for engine in engines() {
        let report = lidb_stress::stress_engine(&config(engine, dir.path(), 11))
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert!(
            report.passed(),
            "{engine}: {}\n{:?}",
            report.summary(),
            report.failures
        );
        assert!(report.operations > 100, "{engine}: {}", report.summary());
        assert!(
            report.scans > 0 && report.batches > 0,
            "{engine}: {}",
            report.summary()
        );
        assert_eq!(
            report.verified_keys,
            2 * 400,
            "{engine}: verified at open and at the end"
        );
    }
}

#[test]
fn every_engine_keeps_its_contract_under_faults() {
    let dir = Scratch::new("stress-faults");
    let spec = "read-eio=0.002,write-eio=0.001,short-write=0.001,sync-fail=0.001,enospc=64MiB";
    for engine in engines() {
        let mut cfg = config(engine, dir.path(), 21);
        cfg.faults = FaultSpec::parse(spec).unwrap_or_else(|e| panic!("{e}"));
        let report = lidb_stress::stress_engine(&cfg).unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert!(
            report.passed(),
            "{engine}: {}\n{:?}",
            report.summary(),
            report.failures
        );
        assert!(
            report.faults.total() > 0,
            "{engine}: no fault fired: {}",
            report.summary()
        );
        assert!(report.reopens >= 2, "{engine}: {}", report.summary());
    }
}

#[test]
fn deterministic_runs_survive_power_cuts_and_replay_exactly() {
    for engine in ["lsm", "learnedkv", "lsm+", "lsm+tier", "finedex"] {
        let dir = Scratch::new("stress-power-cuts");
        let mut cfg = config(engine, dir.path(), 5);
        cfg.keys = 300;
        cfg.duration = Duration::from_secs(60);
        cfg.operations = Some(4000);
        let a = lidb_stress::deterministic::stress_deterministic(&cfg, 500)
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert!(a.passed(), "{engine}: {}\n{:?}", a.summary(), a.failures);
        assert!(a.kills >= 2, "{engine}: cuts expected: {}", a.summary());
        let b = lidb_stress::deterministic::stress_deterministic(&cfg, 500)
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert_eq!(
            (a.operations, a.gets, a.writes, a.scans),
            (b.operations, b.gets, b.writes, b.scans),
            "{engine}: the same seed replays the same operations"
        );
    }
}

#[test]
fn deterministic_mode_refuses_engines_a_power_cut_cannot_reach() {
    let dir = Scratch::new("stress-refuses");
    let err =
        lidb_stress::deterministic::stress_deterministic(&config("btree", dir.path(), 1), 100)
            .err()
            .unwrap_or_default();
    assert!(err.contains("page file"), "{err}");
}

/// A target that acknowledges every 40th put without writing it: the run must say so.
struct Lossy {
    inner: Arc<dyn Target>,
    puts: AtomicU64,
}

impl Target for Lossy {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        if self.puts.fetch_add(1, Ordering::Relaxed) % 40 == 39 {
            return Ok(());
        }
        self.inner.put(key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.inner.get(key)
    }
    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.inner.delete(key)
    }
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<(), String> {
        self.inner.put_many(entries)
    }
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Rows, String> {
        self.inner.scan(start, end, limit)
    }
    fn background(&self, pick: u64) -> Result<&'static str, String> {
        self.inner.background(pick)
    }
}

struct LossyHarness(EngineHarness);

impl Harness for LossyHarness {
    fn open(&mut self) -> Result<(Arc<dyn Target>, String), String> {
        let (inner, recovery) = self.0.open()?;
        let lossy: Arc<dyn Target> = Arc::new(Lossy {
            inner,
            puts: AtomicU64::new(0),
        });
        Ok((lossy, recovery))
    }
}

#[test]
fn a_lost_write_is_a_mismatch() {
    let dir = Scratch::new("stress-lost-write");
    let cfg = config("lsm", dir.path(), 3);
    lidb_stress::kill::prepare_dir(&cfg.db).unwrap_or_else(|e| panic!("{e}"));
    let mut harness = LossyHarness(EngineHarness::new(&cfg));
    let expected = Arc::new(Expected::new(cfg.keys));
    let report = run::run(&cfg, &mut harness, expected, Vec::new(), None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!report.passed(), "{}", report.summary());
    assert!(report.mismatches >= 1, "{}", report.summary());
    let first = report.failures.first().cloned().unwrap_or_default();
    assert!(first.contains("seed 3") && first.contains("key"), "{first}");
}
