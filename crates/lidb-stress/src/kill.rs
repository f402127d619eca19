//! Kill mode: the supervisor starts the stress run as a child process (`lidb stress --child`),
//! SIGKILLs it at a random moment of each `--kill-every` interval, reopens the engine itself,
//! folds the child's op logs into the expected state, verifies every key, saves the state, and
//! starts the next child; as `db_crashtest.py` does around `db_stress`.
//!
//! Files in the run's directory (docs/format/stress-state.md): `engine/` (the engine's own),
//! `state/expected` (the expected state, written by the supervisor between children and read by
//! each child at its start), `state/log-T` (worker T's op log, written by the child, read and
//! removed by the supervisor), `state/counters` (the child's counters, rewritten every 100 ms).
//!
//! Threads: the supervisor is one thread; the child is a whole `run` (see `run.rs`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::expected::{Expected, OpLog};
use crate::run::Harness;
use crate::{Config, EngineHarness, Report, workload};

fn state_dir(db: &Path) -> PathBuf {
    db.join("state")
}

fn log_path(db: &Path, thread: usize) -> PathBuf {
    state_dir(db).join(format!("log-{thread}"))
}

/// Creates `db` (and its state directory) if absent; refuses one that holds anything, so a run
/// never mistakes old files for its own.
pub fn prepare_dir(db: &Path) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", db.display());
    if db.exists() && std::fs::read_dir(db).map_err(io)?.next().is_some() {
        return Err(format!(
            "{} is not empty: a stress run starts in an empty or absent directory",
            db.display()
        ));
    }
    std::fs::create_dir_all(state_dir(db)).map_err(io)
}

/// The child's side of kill mode: loads the expected state the supervisor saved, logs every
/// write, and runs until killed or `cfg.duration` ends.
pub fn child(cfg: &Config) -> Result<Report, String> {
    let expected = Arc::new(Expected::load(&state_dir(&cfg.db).join("expected"))?);
    if expected.len() != cfg.keys {
        return Err(format!(
            "the expected state has {} keys, --keys says {}",
            expected.len(),
            cfg.keys
        ));
    }
    let logs = (0..cfg.threads)
        .map(|t| OpLog::create(&log_path(&cfg.db, t)).map(Some))
        .collect::<Result<Vec<_>, _>>()?;
    let mut harness = EngineHarness::new(cfg);
    let counters = state_dir(&cfg.db).join("counters");
    crate::run::run(cfg, &mut harness, expected, logs, None, Some(&counters))
}

/// Runs `cfg` under kills: `spawn(seed, remaining)` builds the child's command (`lidb stress
/// --child` with the same options, that seed, that duration). Ends at `cfg.duration`, or once
/// the children completed `cfg.operations` in all (checked after each kill).
pub fn supervise(
    cfg: &Config,
    kill_every: Duration,
    spawn: &dyn Fn(u64, Duration) -> Command,
) -> Result<Report, String> {
    prepare_dir(&cfg.db)?;
    let started = Instant::now();
    let deadline = started + cfg.duration;
    let state = state_dir(&cfg.db);
    Expected::new(cfg.keys).save(&state.join("expected"))?;
    let mut report = Report::new(cfg);
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x4B11);
    let mut round = 0u64;
    let mut last_progress = Instant::now();
    let more = |r: &Report| cfg.operations.is_none_or(|max| r.operations < max);
    while Instant::now() < deadline && report.failures.is_empty() && more(&report) {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let mut cmd = spawn(cfg.seed.wrapping_add(round), remaining);
        cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting the stress child: {e}"))?;
        let kill_at = Instant::now() + kill_every.mul_f64(rng.gen_range(0.05..1.0));
        let ended = wait_or_kill(&mut child, kill_at)?;
        match ended {
            Ended::Killed => report.kills += 1,
            Ended::Exited(true) => {}
            Ended::Exited(false) => report.failures.push(format!(
                "the stress child (seed {}) failed: its messages are above",
                cfg.seed.wrapping_add(round)
            )),
        }
        report.add_published(&state.join("counters"));
        let _ = std::fs::remove_file(state.join("counters"));
        if let Err(e) = verify_round(cfg, &mut report) {
            report.failures.push(e);
        }
        round += 1;
        if last_progress.elapsed() >= Duration::from_secs(10) {
            last_progress = Instant::now();
            eprintln!(
                "stress: {:.0}s kills={} operations={} verified_keys={} failures={}",
                started.elapsed().as_secs_f64(),
                report.kills,
                report.operations,
                report.verified_keys,
                report.failures.len()
            );
        }
    }
    report.mismatches = report.failures.len() as u64;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

enum Ended {
    Killed,
    /// Exited by itself: successfully or not.
    Exited(bool),
}

/// Waits for the child until `kill_at`, then SIGKILLs it.
fn wait_or_kill(child: &mut Child, kill_at: Instant) -> Result<Ended, String> {
    let io = |e: std::io::Error| format!("waiting for the stress child: {e}");
    loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            return Ok(Ended::Exited(status.success()));
        }
        if Instant::now() >= kill_at {
            // SIGKILL: no destructor, no flush, no unwinding.
            child.kill().map_err(io)?;
            child.wait().map_err(io)?;
            return Ok(Ended::Killed);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// After a child: fold its logs into the expected state, reopen the engine (no faults), verify
/// every key, save the state, remove the logs.
fn verify_round(cfg: &Config, report: &mut Report) -> Result<(), String> {
    let state = state_dir(&cfg.db);
    let expected = Expected::load(&state.join("expected"))?;
    let logs: Vec<PathBuf> = (0..cfg.threads)
        .map(|t| log_path(&cfg.db, t))
        .filter(|p| p.exists())
        .collect();
    let replayed = expected.replay(&logs)?;
    report.operations += replayed.operations;
    report.writes += replayed.acknowledged + replayed.failed + replayed.in_flight;
    report.write_errors += replayed.failed;
    let mut harness = EngineHarness::new(&Config {
        faults: lidb_storage::fault::FaultSpec::default(),
        ..cfg.clone()
    });
    let (target, recovery) = harness.open()?;
    report.reopens += 1;
    report.note_recovery(&recovery);
    report.verified_keys += workload::verify_all(&expected, target.as_ref())
        .map_err(|e| format!("seed {} after kill {}: {e}", cfg.seed, report.kills))?;
    drop(target);
    expected.save(&state.join("expected"))?;
    for p in logs {
        std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}
