//! `lidb fine serve` and `lidb fine bench`: FineStore across machines (the protocol
//! is docs/format/fine-wire.md, the work is in lidb-fine-net). This file parses options and
//! prints; it holds no protocol or benchmark logic.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use lidb_engines::EngineKind;
use lidb_fine::{Config, FineIndex, FineStoreOptions};
use lidb_fine_net::bench::{self, BenchConfig, BenchWorkload};
use lidb_fine_net::server::{Server, ServerConfig};
use lidb_fine_net::{Mode, WireError, twemproxy};

use crate::args::count;
use crate::engine_args::{CommandUse, EngineArgs};
use crate::error::{CliError, io};

#[derive(Debug, Subcommand)]
pub enum FineCommand {
    /// Serve a FINEdex index over fine-wire: remote reads of trained data (no index code on the
    /// server) and pipeline ops to level bins. Prints `listening on ADDRESS`, then runs until
    /// killed. Keys and values are u64.
    Serve(ServeArgs),
    /// YCSB through fine-wire clients, per mode: ops/s, p50/p99 and round trips per operation
    /// (one row per mode, workload and op kind), every answer checked.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7400")]
    listen: String,
    /// The shard's key range LO-HI (both inclusive, u64); clients route by it.
    #[arg(long, default_value = "0-18446744073709551615")]
    range: String,
    /// Keep the data in a FineStore in this directory (its log and checkpoints); a restart
    /// recovers from it. Without it the server is in memory only.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The engine options of every engine-opening command; this one serves finedex only, so
    /// it reads --sync, --recovery-mode and --checkpoint-log-bytes (each with --dir) and refuses
    /// the rest in one line.
    #[command(flatten)]
    engine: EngineArgs,
    /// Bulk-load the first N YCSB records whose keys fall in --range (values as `lidb fine
    /// bench` checks them), so they are trained data; in memory only (not with --dir).
    #[arg(long)]
    preload_ycsb: Option<String>,
    /// Seconds a silent client keeps counting for reclamation of old regions.
    #[arg(long, default_value_t = 10.0)]
    client_timeout: f64,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Servers to use, comma-separated: started with `--preload-ycsb` equal to --records, or
    /// else loaded here by inserts (then most records sit in level bins, not trained data).
    #[arg(long)]
    servers: Option<String>,
    /// Start this many servers on 127.0.0.1 for each run instead (bulk-loaded: trained data).
    #[arg(long)]
    spawn_servers: Option<u32>,
    /// Reach each server through a relay thread on 127.0.0.1 that holds every chunk of bytes
    /// this many microseconds in each direction (a userspace stand-in for `tc netem delay`,
    /// for kernels without sch_netem; timer slack adds some tens of microseconds more).
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Client instances; each runs --threads threads with its own connections.
    #[arg(long, default_value_t = 1)]
    clients: u32,
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// Workloads, comma-separated: a..f (YCSB), insert (only inserts of records not loaded).
    #[arg(long, default_value = "c")]
    workload: String,
    /// Records loaded (K and M suffixes).
    #[arg(long, default_value = "100K")]
    records: String,
    /// Operations per run, split between all client threads (K and M suffixes).
    #[arg(long, default_value = "100K")]
    ops: String,
    /// Modes, comma-separated: pipeline, on-server, on-client (no cached model: gets walk
    /// model, window and level bins with remote reads, writes are RPCs, as Cell), locks
    /// (pipeline inside a remote layout lock that the servers' retraining takes exclusively;
    /// only with --spawn-servers), twemproxy (the baseline: the same shards over RESP behind
    /// nutcracker, hash sharding, GET/SET; only with --spawn-servers, not workload e; needs
    /// Debian's nutcracker).
    #[arg(long, default_value = "pipeline,on-server")]
    mode: String,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// One JSON object per line instead of a table (the config line goes to stderr).
    #[arg(long)]
    json: bool,
}

/// Runs `cmd`; `serve_given` are the options given to `lidb fine serve`, as `--long-name`.
pub fn run(cmd: FineCommand, serve_given: &[String]) -> Result<(), CliError> {
    match cmd {
        FineCommand::Serve(a) => serve(a, serve_given),
        FineCommand::Bench(a) => bench_run(a),
    }
}

fn wire(e: WireError) -> CliError {
    CliError::Serve(e.to_string())
}

/// A shard's key range `LO-HI` given to `option` (both inclusive).
pub(crate) fn parse_range(option: &str, text: &str) -> Result<(u64, u64), CliError> {
    let bad = || {
        CliError::Usage(format!(
            "{option}: \"{text}\": want LO-HI, two u64, LO <= HI"
        ))
    };
    let (lo, hi) = text.split_once('-').ok_or_else(bad)?;
    let (lo, hi) = (
        lo.trim().parse::<u64>().map_err(|_| bad())?,
        hi.trim().parse::<u64>().map_err(|_| bad())?,
    );
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn serve(mut a: ServeArgs, given: &[String]) -> Result<(), CliError> {
    // --engine defaults to lsm for the commands that serve any engine; here the engine is
    // finedex whatever the default, and naming another is refused.
    if given.iter().any(|o| o == "--engine") && a.engine.engine != EngineKind::Finedex {
        return Err(CliError::Usage(format!(
            "--engine {}: lidb fine serve serves finedex only",
            a.engine.engine
        )));
    }
    a.engine.engine = EngineKind::Finedex;
    a.engine.refuse_ignored(CommandUse::FineServe, given)?;
    if a.dir.is_none()
        && let Some(opt) = given.iter().find(|o| {
            matches!(
                o.as_str(),
                "--sync" | "--recovery-mode" | "--checkpoint-log-bytes"
            )
        })
    {
        return Err(CliError::Usage(format!(
            "{opt} is for a durable server: it needs --dir"
        )));
    }
    let (lo, hi) = parse_range("--range", &a.range)?;
    if !(a.client_timeout.is_finite() && a.client_timeout > 0.0 && a.client_timeout < 1e6) {
        return Err(CliError::Usage("--client-timeout must be above 0".into()));
    }
    let cfg = ServerConfig {
        shard_lo: lo,
        shard_hi: hi,
        client_timeout: Duration::from_secs_f64(a.client_timeout),
        ..ServerConfig::default()
    };
    let preload = a
        .preload_ycsb
        .as_deref()
        .map(|n| count("--preload-ycsb", n))
        .transpose()?;
    let server = match &a.dir {
        Some(_) if preload.is_some() => {
            return Err(CliError::Usage(
                "--preload-ycsb is for in-memory servers (no --dir)".into(),
            ));
        }
        Some(dir) => Server::start_durable(dir, store_options(&a.engine), &a.listen, cfg),
        None => {
            let entries = bench::preload_entries(preload.unwrap_or(0), lo, hi);
            let ix = FineIndex::bulk_load(&entries, Config::default())
                .map_err(|e| CliError::Serve(e.to_string()))?;
            Server::start(Arc::new(ix), &a.listen, cfg)
        }
    }
    .map_err(wire)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.addr()).map_err(io("stdout"))?;
    out.flush().map_err(io("stdout"))?;
    drop(out);
    loop {
        std::thread::park();
    }
}

/// What a durable fine-wire server's FineStore reads of the engine options.
pub(crate) fn store_options(engine: &EngineArgs) -> FineStoreOptions {
    FineStoreOptions {
        sync: engine.sync,
        recovery_mode: engine.recovery_mode,
        checkpoint_log_bytes: engine.checkpoint.checkpoint_log_bytes,
        index: Config::default(),
    }
}

/// What `--mode twemproxy` cannot run, refused before anything starts.
fn twemproxy_usage(spawn: u32, workloads: &[BenchWorkload]) -> Result<(), CliError> {
    if spawn == 0 {
        return Err(CliError::Usage(
            "--mode twemproxy needs --spawn-servers K: it starts the shards with RESP faces \
             and nutcracker in front of them"
                .into(),
        ));
    }
    if let Some(why) = workloads.iter().find_map(|&w| twemproxy::refusal(w)) {
        return Err(CliError::Usage(format!("--mode twemproxy: {why}")));
    }
    if twemproxy::find_binary().is_none() {
        return Err(CliError::Usage(
            "--mode twemproxy: nutcracker (twemproxy) is not installed: apt-get install -y \
             nutcracker (Debian's package)"
                .into(),
        ));
    }
    Ok(())
}

fn bench_run(a: BenchArgs) -> Result<(), CliError> {
    let workloads = a
        .workload
        .split(',')
        .map(|w| BenchWorkload::parse(w.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::Usage(format!("--workload: {e}")))?;
    // twemproxy is not a client mode: it runs its own path (lidb_fine_net::twemproxy).
    let with_twemproxy = a.mode.split(',').any(|m| m.trim() == twemproxy::MODE_NAME);
    let modes = a
        .mode
        .split(',')
        .filter(|m| m.trim() != twemproxy::MODE_NAME)
        .map(|m| {
            Mode::parse(m.trim()).ok_or_else(|| {
                CliError::Usage(format!(
                    "--mode: \"{m}\": modes are pipeline, on-server, on-client, locks and \
                     twemproxy"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let records = count("--records", &a.records)?;
    let ops = count("--ops", &a.ops)?;
    let servers: Vec<String> = a
        .servers
        .as_deref()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect())
        .unwrap_or_default();
    let spawn = a.spawn_servers.unwrap_or(0);
    if with_twemproxy {
        twemproxy_usage(spawn, &workloads)?;
    }
    if spawn == 0 && modes.contains(&Mode::Locks) {
        return Err(CliError::Usage(
            "--mode locks needs --spawn-servers (the servers must retrain under the lock)".into(),
        ));
    }
    if (spawn == 0) == servers.is_empty() {
        return Err(CliError::Usage(
            "give exactly one of --servers ADDR,.. and --spawn-servers K (K >= 1)".into(),
        ));
    }
    let threads_total = u64::from(a.clients) * u64::from(a.threads);
    if records == 0 || ops == 0 || threads_total == 0 || ops < threads_total {
        return Err(CliError::Usage(
            "--records, --ops, --clients and --threads must be above 0, --ops at least the \
             client threads"
                .into(),
        ));
    }
    let cfg = BenchConfig {
        servers,
        spawn_servers: spawn,
        clients: a.clients,
        threads: a.threads,
        workloads,
        records,
        ops,
        modes,
        seed: a.seed,
        index: Config::default(),
        delay_us: a.delay_us,
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let header = format!(
        "# lidb fine bench: cores={cores} servers={} clients={} threads={} records={records} \
         ops={ops} workload={} mode={} seed={}; network={}; round trips include \
         layout fetches (and LOCK/UNLOCK in locks mode); spawned servers retrain on a thread \
         every 5 ms",
        if spawn > 0 {
            format!("spawned:{spawn}")
        } else {
            a.servers.clone().unwrap_or_default()
        },
        a.clients,
        a.threads,
        a.workload,
        a.mode,
        a.seed,
        if a.delay_us > 0 {
            format!(
                "loopback TCP through a relay delaying {} us each way (netem stand-in; \
                 twemproxy: on the client->proxy hop only)",
                a.delay_us
            )
        } else {
            "loopback TCP".to_string()
        }
    );
    if a.json {
        eprintln!("{header}");
    } else {
        println!("{header}");
    }
    let mut rows = bench::run(&cfg, &mut |line| eprintln!("# {line}")).map_err(wire)?;
    if with_twemproxy {
        rows.extend(twemproxy::run(&cfg, &mut |line| eprintln!("# {line}")).map_err(wire)?);
    }
    let mut out = std::io::stdout().lock();
    if !a.json {
        writeln!(
            out,
            "{:<10} {:<8} {:<7} {:>9} {:>11} {:>9} {:>9} {:>8}",
            "mode", "workload", "op", "ops", "kops_per_s", "p50_us", "p99_us", "rt/op"
        )
        .map_err(io("stdout"))?;
    }
    let mut wrong = 0u64;
    for r in &rows {
        wrong += r.wrong;
        let line = if a.json {
            serde_json::json!({
                "mode": r.mode, "workload": r.workload, "op": r.op, "ops": r.ops,
                "kops_per_s": r.kops_per_s, "p50_us": r.p50_us, "p99_us": r.p99_us,
                "round_trips_per_op": r.round_trips_per_op, "wrong": r.wrong,
                "servers": spawn.max(cfg.servers.len() as u32), "threads": threads_total,
                "records": records, "seed": a.seed, "delay_us": a.delay_us,
            })
            .to_string()
        } else {
            format!(
                "{:<10} {:<8} {:<7} {:>9} {:>11.1} {:>9.1} {:>9.1} {:>8.3}",
                r.mode,
                r.workload,
                r.op,
                r.ops,
                r.kops_per_s,
                r.p50_us,
                r.p99_us,
                r.round_trips_per_op
            )
        };
        writeln!(out, "{line}").map_err(io("stdout"))?;
    }
    if wrong > 0 {
        return Err(CliError::Check(format!(
            "{wrong} operations answered wrong"
        )));
    }
    Ok(())
}
