//! `lidb stress`: many threads, kills and I/O faults against one engine, every read checked
//! against an expected state (crate lidb-stress). Without `--kill-every` the run is one process;
//! with it, this process supervises children (`--child`, hidden) that it kills at random. With
//! `--serve` the workers are clients of a `lidb serve` child (killed at random with
//! `--kill-every`); with `--deterministic` one worker runs over in-memory files with power cuts.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use lidb_bench::engines;
use lidb_storage::fault::FaultSpec;
use lidb_stress::{Config, Report};

use crate::args::{count, parse_duration, usage};
use crate::error::CliError;

#[derive(Debug, Args)]
pub struct StressArgs {
    /// The engine: lsm, learnedkv, lsm+, lsm+tier, finedex, learnedstore, btree. It runs with a
    /// 256 KiB write buffer, 1 MiB caches (a quarter of learnedstore's and btree's a row cache)
    /// and every write synced, so flushes, compactions and evictions happen often and every
    /// acknowledged write must survive a kill.
    #[arg(long)]
    engine: String,
    /// Worker threads, each issuing random puts, deletes, gets, batches of 2 to 8 puts and
    /// scans of up to 32 keys; half of them go to a hot eighth of the keys.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// How many keys the workers write, read and scan (key i is 8 big-endian bytes).
    #[arg(long, default_value_t = 10_000)]
    keys: u32,
    /// How long the run lasts: 30s, 5m, 1h, 500ms (a bare number is seconds).
    #[arg(long, default_value = "30s")]
    duration: String,
    /// Stop earlier, after the engine completed this many operations in all (reads answered and
    /// writes acknowledged; refused writes and failed reads are not counted): 50000, 200K, 10M.
    #[arg(long)]
    ops: Option<String>,
    /// Kill mode: run the workload as a child process and SIGKILL it at a random moment of each
    /// interval (e.g. 2s), then reopen the engine, verify every key against the expected state
    /// and start the next child. Without it the run is one process.
    #[arg(long)]
    kill_every: Option<String>,
    /// I/O faults injected through the storage layer, a comma-separated list of kind=value:
    /// read-eio=P (a read fails with EIO), write-eio=P (an append fails, writes nothing),
    /// short-write=P (an append writes half, then fails), sync-fail=P (an fsync fails),
    /// enospc=SIZE (appends fail once SIZE bytes were written; the space comes back at the next
    /// reopen). P is a probability per operation. After write errors the run reopens the engine
    /// and verifies every key. learnedstore and btree take faults on their log only (their page
    /// file is not on lidb's storage layer).
    #[arg(long, default_value = "none")]
    faults: String,
    /// Seed of every random choice (printed in the summary and in every mismatch; the same seed
    /// replays the same operations per thread). Default: from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// The run's directory, empty or absent: the engine's files and the expected state. Default:
    /// a new directory under the system's temporary directory, removed after a passing run.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Largest value in bytes (values vary from 11 bytes up to it).
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// One background job (flush; compaction, GC or checkpoint; conversion for learnedkv) this
    /// often, beside the engine's own.
    #[arg(long, default_value = "50ms")]
    background_every: String,
    /// Deterministic mode: one worker, the engine's background threads off (its jobs run at
    /// the worker's seeded choice), every file in memory, a simulated power cut at a seeded
    /// storage operation (see --crash-every) in place of kills, faults from the same seed; the
    /// same --seed replays the same run exactly. lsm, learnedkv, lsm+, lsm+tier and finedex.
    #[arg(long)]
    deterministic: bool,
    /// With --deterministic: a power cut every this many storage operations on average
    /// (appends, syncs, reads, renames: uniform in 1 to twice this).
    #[arg(long, default_value_t = 2000)]
    crash_every: u64,
    /// Drive `lidb serve` (this binary, on the run's directory, one client connection per
    /// thread) over the Redis protocol instead of an engine in this process; --kill-every then
    /// SIGKILLs the server and restarts it. Faults are injected in-process only, so --faults
    /// must be none.
    #[arg(long)]
    serve: bool,
    /// With --serve and --engine lsm: run the server without --sync. Its kills are SIGKILLs of
    /// the process, and lsm writes its WAL to the operating system before it acknowledges, so
    /// every acknowledged write must still survive; the server then writes SETs on its async
    /// workers (the path --sync turns off). Other engines buffer unsynced writes in their own
    /// memory (finedex) and are refused.
    #[arg(long)]
    no_sync: bool,
    /// Internal: run as the child of a kill-mode supervisor.
    #[arg(long, hide = true)]
    child: bool,
}

pub fn run(a: StressArgs) -> Result<(), CliError> {
    if !engines::names().contains(&a.engine.as_str()) || a.engine == "rocksdb" {
        return Err(CliError::Usage(format!(
            "--engine: unknown engine \"{}\" (lidb stress runs lsm, learnedkv, lsm+, lsm+tier, \
             finedex, learnedstore, btree)",
            a.engine
        )));
    }
    if a.threads == 0 {
        return Err(CliError::Usage("--threads: at least 1".into()));
    }
    if a.keys == 0 {
        return Err(CliError::Usage("--keys: at least 1".into()));
    }
    let duration = parse_duration(&a.duration).map_err(usage("--duration"))?;
    let kill_every = a
        .kill_every
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(usage("--kill-every"))?;
    if kill_every.is_some_and(|d| d < Duration::from_millis(50)) {
        return Err(CliError::Usage("--kill-every: at least 50ms".into()));
    }
    let faults = FaultSpec::parse(&a.faults).map_err(usage("--faults"))?;
    if a.serve && !faults.is_none() {
        return Err(CliError::Usage(
            "--serve with --faults: faults are injected in-process only; use --faults none".into(),
        ));
    }
    if a.no_sync && !(a.serve && a.engine == "lsm") {
        return Err(CliError::Usage(
            "--no-sync: only with --serve and --engine lsm (a SIGKILLed server keeps what lsm \
             wrote to the operating system; in-process faults and other engines' buffers do not)"
                .into(),
        ));
    }
    let seed = a.seed.unwrap_or_else(clock_seed);
    let (db, temporary) = match &a.db {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("lidb-stress-{}-{seed}", std::process::id())),
            true,
        ),
    };
    let cfg = Config {
        engine: a.engine.clone(),
        threads: a.threads,
        keys: a.keys,
        duration,
        operations: a.ops.as_deref().map(|t| count("--ops", t)).transpose()?,
        faults,
        seed,
        db: db.clone(),
        value_size: a.value_size.max(16),
        background_every: parse_duration(&a.background_every)
            .map_err(usage("--background-every"))?,
        sync: !a.no_sync,
    };
    if a.deterministic && kill_every.is_some() {
        return Err(CliError::Usage(
            "--kill-every: --deterministic cuts the power instead (see --crash-every)".into(),
        ));
    }
    if a.deterministic && a.serve {
        return Err(CliError::Usage(
            "--serve: --deterministic runs an engine in this process, not a server".into(),
        ));
    }
    if a.crash_every == 0 {
        return Err(CliError::Usage("--crash-every: at least 1".into()));
    }
    let report = if a.deterministic {
        lidb_stress::deterministic::stress_deterministic(&cfg, a.crash_every)
    } else if a.serve {
        let exe = std::env::current_exe().map_err(|e| CliError::Io {
            what: "finding the lidb binary to serve".into(),
            source: e,
        })?;
        lidb_stress::serve::stress_serve(&cfg, &exe, kill_every, a.threads)
    } else if a.child {
        lidb_stress::kill::child(&cfg)
    } else if let Some(every) = kill_every {
        let exe = std::env::current_exe().map_err(|e| CliError::Io {
            what: "finding the lidb binary for the stress child".into(),
            source: e,
        })?;
        lidb_stress::kill::supervise(&cfg, every, &|child_seed, remaining| {
            child_command(&exe, &a, &cfg, child_seed, remaining)
        })
    } else {
        lidb_stress::stress_engine(&cfg)
    }
    .map_err(CliError::Check)?;
    // Deterministic mode keeps its files in memory: nothing to remove or keep.
    let files = if a.deterministic {
        Files::InMemory
    } else if temporary {
        Files::Temporary(&db)
    } else {
        Files::Given(&db)
    };
    finish(&report, files, a.child)
}

/// Where a run's files are.
enum Files<'a> {
    InMemory,
    /// Made for the run: removed after a pass.
    Temporary(&'a PathBuf),
    /// The user's --db.
    Given(&'a PathBuf),
}

/// Prints the summary (and the failures); removes a temporary directory after a pass.
fn finish(report: &Report, files: Files<'_>, child: bool) -> Result<(), CliError> {
    for f in &report.failures {
        eprintln!("stress: MISMATCH: {f}");
    }
    if report.unexpected_errors() > 0 {
        eprintln!(
            "stress: {} errors with no fault injected; the last: {}",
            report.unexpected_errors(),
            report.last_error.as_deref().unwrap_or("?")
        );
    }
    if !child {
        println!("{}", report.summary());
    }
    if report.passed() {
        if let Files::Temporary(dir) = files {
            let _ = std::fs::remove_dir_all(dir);
        }
        return Ok(());
    }
    let kept = match files {
        Files::InMemory => {
            "its files were in memory; --deterministic with this seed replays it".into()
        }
        Files::Temporary(d) | Files::Given(d) => format!("its files are kept in {}", d.display()),
    };
    Err(CliError::Check(format!(
        "stress run failed (seed {}); {kept}",
        report.seed
    )))
}

/// The kill-mode child: the same options, its own seed and the time left.
fn child_command(
    exe: &std::path::Path,
    a: &StressArgs,
    cfg: &Config,
    seed: u64,
    remaining: Duration,
) -> std::process::Command {
    let mut c = std::process::Command::new(exe);
    c.arg("stress")
        .arg("--child")
        .args(["--engine", &cfg.engine])
        .args(["--threads", &cfg.threads.to_string()])
        .args(["--keys", &cfg.keys.to_string()])
        .args(["--duration", &format!("{}ms", remaining.as_millis().max(1))])
        .args(["--faults", &cfg.faults.to_string()])
        .args(["--seed", &seed.to_string()])
        .arg("--db")
        .arg(&cfg.db)
        .args(["--value-size", &cfg.value_size.to_string()])
        .args(["--background-every", &a.background_every]);
    c
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
