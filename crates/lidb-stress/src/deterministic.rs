//! Deterministic mode: one worker, the engine's background threads off (its jobs run inline at
//! the worker's seeded choice), every file in a [`MemStorage`] whose power a [`PowerCut`] cuts
//! at a seeded storage operation, and faults from the same seed. The same seed then replays the
//! same operations, the same cuts and the same faults, so a failing seed is a reproducer.
//!
//! After a cut (which may land inside a write, a flush, a compaction, a GC, a checkpoint, a
//! recovery or the verification itself) the engine is dropped, the rebooted storage reopened
//! and every key verified, as after a kill. learnedstore and btree keep their page file outside
//! lidb's storage layer, so a power cut cannot reach it: they run in the other modes only.
//!
//! Threads: the calling thread only (engines keep whatever helper threads they cannot turn off,
//! such as finedex's logger; their work is ordered by the one worker's synchronous calls).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use lidb_storage::fault::FaultStorage;
use lidb_storage::mem::MemStorage;
use lidb_storage::powercut::PowerCut;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::expected::Expected;
use crate::target::{EngineTarget, Target};
use crate::workload::{self, Shared};
use crate::{Config, Report, add_counts};

/// Engines whose every file is on lidb's storage layer.
const ENGINES: [&str; 5] = ["lsm", "learnedkv", "lsm+", "lsm+tier", "finedex"];

/// The engine on one power supply: the cut, the faults over it, the engine.
struct Powered {
    power: PowerCut,
    faults: FaultStorage,
    target: Arc<dyn Target>,
}

/// Runs `cfg` deterministically with a power cut every `crash_every` storage operations on
/// average (uniform in 1..=2x). Stops after `cfg.operations` operations or `cfg.duration`.
pub fn stress_deterministic(cfg: &Config, crash_every: u64) -> Result<Report, String> {
    if !ENGINES.contains(&cfg.engine.as_str()) {
        return Err(format!(
            "--deterministic runs {} (the page file of {} is not on lidb's storage layer, so a \
             simulated power cut cannot reach it)",
            ENGINES.join(", "),
            cfg.engine
        ));
    }
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let mut report = Report::new(cfg);
    report.threads = 1;
    // Operations a power cut interrupts fail: errors are expected, as under faults.
    report.faults_on = true;
    let mem = MemStorage::new();
    let mut ecfg = cfg.engine_config();
    ecfg.dir = PathBuf::from("/stress/engine");
    ecfg.background = false;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xD37);
    let expected = Arc::new(Expected::new(cfg.keys));
    let supply = Supply {
        cfg,
        ecfg: &ecfg,
        mem: &mem,
        expected: &expected,
        crash_every,
    };
    let mut powered = supply.power_on(&mut rng, &mut report)?;
    let mut shared = Shared::new(
        Arc::clone(&expected),
        Arc::clone(&powered.target),
        cfg.seed,
        cfg.value_size,
    );
    shared.max_operations = cfg.operations;
    // The one worker is this thread and calls `powered.target` itself: the slot must not keep
    // an engine alive past its reopen.
    *shared.target.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
    *shared.faults.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(powered.faults.clone());
    shared.opened();
    let mut worker_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ (1 << 40));
    // Operations issued, completed or not: a mismatch names its position in the run.
    let mut issued = 0u64;
    while !shared.stopped() && Instant::now() < deadline {
        let result = if worker_rng.gen_bool(0.01) {
            match powered.target.background(worker_rng.r#gen()) {
                Ok(_) => shared
                    .counters
                    .background_jobs
                    .fetch_add(1, Ordering::Relaxed),
                Err(e) => shared.background_failed(e),
            };
            Ok(())
        } else {
            issued += 1;
            workload::one_op(&shared, powered.target.as_ref(), &mut worker_rng, &mut None).map(
                |done| {
                    if done == workload::Done::Completed {
                        shared.counters.operations.fetch_add(1, Ordering::Relaxed);
                    }
                },
            )
        };
        if let Err(why) = result {
            shared.mismatch(format!(
                "seed {} (deterministic) operation {issued}: {why}",
                cfg.seed
            ));
            break;
        }
        let cut = powered.power.is_cut();
        if cut || shared.errors_since_reopen.load(Ordering::SeqCst) > 0 {
            if cut {
                report.kills += 1;
            }
            report.faults = add_counts(report.faults, powered.faults.counts());
            drop(powered);
            // Faults stopped the engine's writes: it is restarted, half the time after a power
            // cut and half the time with the power on (dropped and reopened, as an operator
            // restarts a process whose disk came back; unsynced bytes stay).
            if !cut && rng.gen_bool(0.5) {
                mem.crash(cfg.seed ^ report.reopens);
                report.kills += 1;
            }
            match supply.power_on(&mut rng, &mut report) {
                Ok(p) => powered = p,
                Err(e) => {
                    shared.mismatch(format!("seed {} (deterministic): {e}", cfg.seed));
                    report.absorb(&shared, Default::default());
                    report.seconds = started.elapsed().as_secs_f64();
                    return Ok(report);
                }
            }
            shared.errors_since_reopen.store(0, Ordering::SeqCst);
            *shared.faults.write().unwrap_or_else(|p| p.into_inner()) =
                Some(powered.faults.clone());
            shared.opened();
        }
    }
    report.faults = add_counts(report.faults, powered.faults.counts());
    drop(powered);
    report.absorb(&shared, Default::default());
    if report.failures.is_empty() {
        // A last clean reopen, with no cut armed.
        let faults = FaultStorage::new(Arc::new(mem.clone()), Default::default(), cfg.seed);
        let engine = lidb_engines::open_on(&cfg.engine, &ecfg, Arc::new(faults))
            .map_err(|e| format!("final reopen: {e}"))?;
        report.reopens += 1;
        report.note_recovery(&engine.recovery());
        match workload::verify_all(&expected, &EngineTarget { engine }) {
            Ok(n) => report.verified_keys += n,
            Err(e) => report
                .failures
                .push(format!("seed {} final verify: {e}", cfg.seed)),
        }
    }
    report.mismatches = report.mismatches.max(report.failures.len() as u64);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// What every power-on reuses: the run, the engine's configuration, the machine's storage.
struct Supply<'a> {
    cfg: &'a Config,
    ecfg: &'a lidb_engines::EngineConfig,
    mem: &'a MemStorage,
    expected: &'a Expected,
    crash_every: u64,
}

impl Supply<'_> {
    /// Opens the engine on a fresh power supply with a seeded cut armed, and verifies every key;
    /// a cut during the open or the verification reboots and tries again (at most 100 times).
    fn power_on(&self, rng: &mut ChaCha8Rng, report: &mut Report) -> Result<Powered, String> {
        let Supply {
            cfg,
            ecfg,
            mem,
            expected,
            crash_every,
        } = *self;
        for _ in 0..100 {
            let cut_at = rng.gen_range(1..=crash_every.max(1) * 2);
            let power = PowerCut::new(mem.clone(), cut_at, rng.r#gen());
            let faults = FaultStorage::new(Arc::new(power.clone()), cfg.faults, rng.r#gen());
            faults.set_enabled(false);
            let opened = lidb_engines::open_on(&cfg.engine, ecfg, Arc::new(faults.clone()));
            let engine = match opened {
                Ok(e) => e,
                Err(_) if power.is_cut() => {
                    report.kills += 1;
                    continue;
                }
                Err(e) => return Err(format!("reopen after a cut: {e}")),
            };
            report.reopens += 1;
            report.note_recovery(&engine.recovery());
            let target: Arc<dyn Target> = Arc::new(EngineTarget { engine });
            match workload::verify_all(expected, target.as_ref()) {
                Ok(n) => report.verified_keys += n,
                Err(_) if power.is_cut() => {
                    report.kills += 1;
                    continue;
                }
                Err(e) => return Err(e),
            }
            faults.set_enabled(true);
            return Ok(Powered {
                power,
                faults,
                target,
            });
        }
        Err("100 power cuts in a row before the engine opened and verified".into())
    }
}
