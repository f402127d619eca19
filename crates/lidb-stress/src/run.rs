//! One stress run in this process: workers and the background thread against a target the
//! [`Harness`] opens, the supervisor (the calling thread) reopening it when writes failed (a
//! failed fsync stops an engine's writes until it is reopened) or, where the harness can, at a
//! kill; every reopen verifies every key. The run ends with one more reopen and verification.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lidb_storage::fault::{FaultCounts, FaultStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::expected::{Expected, OpLog};
use crate::target::Target;
use crate::workload::{self, Counters, Shared};
use crate::{Config, Report};

/// Opens, kills and fault-switches what a run drives.
pub trait Harness: Send {
    /// Opens (or reopens) the target: it and what its recovery found (empty when nothing).
    fn open(&mut self) -> Result<(Arc<dyn Target>, String), String>;
    /// Whether [`Harness::kill`] ends the target abruptly (`lidb serve`: SIGKILL of the server).
    fn can_kill(&self) -> bool {
        false
    }
    /// Ends the target abruptly; the run then drops its handle and reopens.
    fn kill(&mut self) {}
    /// Turns fault injection on or off (off while the run verifies; on again after).
    fn set_faults(&mut self, on: bool) {
        let _ = on;
    }
    /// Faults injected so far.
    fn fault_counts(&self) -> FaultCounts {
        FaultCounts::default()
    }
    /// Opens that failed under faults (and were retried without).
    fn failed_opens(&self) -> u64 {
        0
    }
    /// The storage faults go through, where the harness injects them.
    fn fault_storage(&self) -> Option<FaultStorage> {
        None
    }
}

/// How often the supervisor looks at the run.
const TICK: Duration = Duration::from_millis(20);
/// Counters to the `publish` file this often.
const PUBLISH: Duration = Duration::from_millis(100);
/// A progress line this often on long runs.
const PROGRESS: Duration = Duration::from_secs(10);

/// Runs `cfg` against what `harness` opens, keys checked against `expected`. `logs`: one op log
/// per worker (kill mode's child), or none. `kill_every`: kill the target at a random moment of
/// each interval (the harness must be able to). `publish`: a file the counters are written to
/// every 100 ms (kill mode's child, whose supervisor reads them after the kill).
pub fn run(
    cfg: &Config,
    harness: &mut dyn Harness,
    expected: Arc<Expected>,
    logs: Vec<Option<OpLog>>,
    kill_every: Option<Duration>,
    publish: Option<&Path>,
) -> Result<Report, String> {
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let mut report = Report::new(cfg);
    let (target, recovery) = harness.open()?;
    report.note_recovery(&recovery);
    let verified = workload::verify_all(&expected, target.as_ref())?;
    report.verified_keys += verified;
    harness.set_faults(true);
    let mut shared = Shared::new(Arc::clone(&expected), target, cfg.seed, cfg.value_size);
    shared.max_operations = cfg.operations;
    *shared.faults.get_mut().unwrap_or_else(|p| p.into_inner()) = harness.fault_storage();
    shared.opened();
    let shared = shared;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5EED);
    let next_kill = |rng: &mut ChaCha8Rng, from: Instant| {
        kill_every.map(|every| from + every.mul_f64(rng.gen_range(0.05..1.0)))
    };
    let mut kill_at = next_kill(&mut rng, started);
    let outcome = std::thread::scope(|s| -> Result<(), String> {
        let mut logs = logs;
        for t in 0..cfg.threads {
            let log = logs.get_mut(t).and_then(Option::take);
            let shared = &shared;
            s.spawn(move || workload::worker(shared, t, deadline, log));
        }
        let shared_bg = &shared;
        let every = cfg.background_every;
        s.spawn(move || workload::background(shared_bg, every, deadline));
        let mut last_progress = Instant::now();
        let mut last_publish = Instant::now();
        let result = (|| {
            while !shared.stopped() && Instant::now() < deadline {
                std::thread::sleep(TICK);
                if let Some(path) = publish.filter(|_| last_publish.elapsed() >= PUBLISH) {
                    last_publish = Instant::now();
                    let mut snap = Report::new(cfg);
                    snap.absorb(&shared, harness.fault_counts());
                    snap.reopens = report.reopens;
                    snap.failed_opens = harness.failed_opens();
                    snap.publish(path);
                }
                if last_progress.elapsed() >= PROGRESS {
                    last_progress = Instant::now();
                    eprintln!(
                        "stress: {:.0}s operations={} reopens={} kills={} mismatches={}",
                        started.elapsed().as_secs_f64(),
                        Counters::get(&shared.counters.operations),
                        report.reopens,
                        report.kills,
                        Counters::get(&shared.counters.mismatches)
                    );
                }
                let kill_now = kill_at.is_some_and(|at| Instant::now() >= at);
                let failed = shared.errors_since_reopen.load(Ordering::SeqCst) > 0;
                if kill_now {
                    harness.kill();
                    report.kills += 1;
                    kill_at = next_kill(&mut rng, Instant::now());
                }
                if failed && !kill_now {
                    eprintln!(
                        "stress: reopening after {} failed writes (the last: {})",
                        shared.errors_since_reopen.load(Ordering::SeqCst),
                        shared
                            .last_error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .as_deref()
                            .unwrap_or("?")
                    );
                }
                if kill_now || failed {
                    reopen(harness, &shared, &mut report)?;
                }
            }
            Ok(())
        })();
        shared.stop.store(true, Ordering::SeqCst);
        result
    });
    let faults = harness.fault_counts();
    report.absorb(&shared, faults);
    if let Some(path) = publish {
        report.publish(path);
    }
    if let Err(e) = outcome {
        report.failures.push(e);
    }
    if report.failures.is_empty() {
        // The final reopen: everything acknowledged must be there after a clean close too.
        if let Err(e) = reopen(harness, &shared, &mut report) {
            report.failures.push(e);
        }
    }
    let slot = shared.target.write().map(|mut s| s.take());
    drop(slot);
    report.failed_opens = harness.failed_opens();
    // A failed verification after a reopen is a mismatch too.
    report.mismatches = report.mismatches.max(report.failures.len() as u64);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Drops the target, reopens it with faults off, verifies every key, and puts it back with
/// faults on. Workers wait on the slot meanwhile.
fn reopen(harness: &mut dyn Harness, shared: &Shared, report: &mut Report) -> Result<(), String> {
    let mut slot = shared.target.write().unwrap_or_else(|p| p.into_inner());
    drop(slot.take());
    harness.set_faults(false);
    let (target, recovery) = harness.open()?;
    report.note_recovery(&recovery);
    report.reopens += 1;
    report.verified_keys += workload::verify_all(&shared.expected, target.as_ref())?;
    harness.set_faults(true);
    shared.errors_since_reopen.store(0, Ordering::SeqCst);
    shared.opened();
    *slot = Some(target);
    Ok(())
}
