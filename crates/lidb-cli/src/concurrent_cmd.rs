//! `lidb bench concurrent`: parses the options, loads and splits the key set, runs
//! `lidb_bench::concurrent` and prints a configuration line, then a table or JSON lines. Fails
//! (after printing the rows) if any operation failed or answered wrong.
//!
//! The indexes are lidb's own plus the peers the binary registers ([`Peers`]). In the lean
//! `lidb`, a run naming a peer is handed to `lidb-bench` (`crate::handoff`), and so is
//! `--index all` when `lidb-bench` is there; without it `all` runs lidb's own indexes and the
//! configuration line says the peers are not in the run. Without a counting allocator (the
//! lean `lidb`) an index that does not report its own memory gets no bytes_per_key, and the
//! configuration line says so.

use std::io::Write;
use std::time::Duration;

use clap::{Args, ValueEnum};
use lidb_bench::concurrent::{self, Config, Distribution, IndexKind, KeySplit};
use lidb_bench::peers::{INDEX_PEERS, Peers};

use crate::error::{CliError, io};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DistributionArg {
    Uniform,
    Zipf,
}

#[derive(Debug, Args)]
pub struct ConcurrentArgs {
    /// Indexes, comma-separated, or "all": finedex, btree-rwlock, alex, lipp, dili, and the
    /// peers skipmap, scc-tree, congee, li+delta (linked into the lidb-bench binary; lidb hands
    /// a run naming one to it: docs/guide.md, "Benchmarks as commands"). alex, lipp and dili
    /// (lidb-updatable) are single-writer structures run behind one RwLock each: reads and scans
    /// share it, writes take it alone, so their rows above one thread measure that lock. LITS is
    /// not among them: it indexes byte strings and this benchmark's keys are u64 (`lidb index
    /// bench --index lits` runs it).
    #[arg(long, default_value = "all")]
    index: String,
    /// Workloads, comma-separated: a..f (YCSB over the loaded keys; D reads the latest
    /// inserted, E runs short scans), insert (inserts of keys not loaded) or skew (--ops inserts
    /// of fresh keys inside a hot window of the loaded range, then --ops reads of the window's
    /// keys, each phase timed on its own; see --hotspot).
    #[arg(long, default_value = "c,insert")]
    workload: String,
    /// Hotspot ratios of the skew workload, comma-separated, each its own runs: the hot window's
    /// width over the range of the loaded keys, 0 < R <= 1 (smaller is more skewed). The
    /// window's place comes from --seed. Default 0.01; only with --workload skew.
    #[arg(long)]
    hotspot: Option<String>,
    /// Print a throughput timeline: operations completed in every interval of this many
    /// milliseconds while a run's threads work (and finedex's retrain counts so far).
    #[arg(long)]
    timeline_ms: Option<u64>,
    /// Thread counts, comma-separated, each once (e.g. 1,2,4,8,16): every (index, workload) runs
    /// at each, in the order given.
    #[arg(long, default_value = "1,2")]
    threads: String,
    /// Keys bulk-loaded (K and M suffixes).
    #[arg(long, default_value = "200K")]
    records: String,
    /// Operations per run, split evenly between its threads (the insert workload inserts this
    /// many keys not loaded).
    #[arg(long, default_value = "200K")]
    ops: String,
    /// Keys: synthetic:NAME:N, a SOSD u64 file, or a dataset of the data directory.
    #[arg(long, default_value = "synthetic:lognormal:1M")]
    data: String,
    /// How reads, updates and scans pick loaded keys (D always reads the latest inserted).
    #[arg(long, value_enum, default_value_t = DistributionArg::Uniform)]
    distribution: DistributionArg,
    /// A run's threads stop early after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    max_seconds: f64,
    /// Seed of synthetic data, the key shuffle and the operations.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// One JSON object per line instead of a table (the config line goes to stderr): result rows
    /// carry "row":"result", timeline rows "row":"timeline".
    #[arg(long)]
    json: bool,
}

/// A count as a usize (the sizes of in-memory key sets).
fn count(option: &str, text: &str) -> Result<usize, CliError> {
    crate::args::count(option, text).map(|n| n as usize)
}

/// The indexes `--index` asks for, among those `peers` adds to lidb's own; hands the run to
/// `lidb-bench` (or fails with one line) when it asks for a peer this binary lacks. Also the
/// configuration line's note when `all` runs without the peers.
fn indexes(text: &str, peers: &Peers) -> Result<(Vec<IndexKind>, String), CliError> {
    let mut note = String::new();
    if text.trim() == "all" && INDEX_PEERS.iter().any(|n| peers.lacks(n)) {
        if crate::handoff::available().is_some() {
            return Err(crate::handoff::to_bench("--index all"));
        }
        note = format!(
            " peers={} not in this run (they run in lidb-bench: {})",
            INDEX_PEERS.join(","),
            crate::handoff::BUILD
        );
    }
    if let Some(peer) = text.split(',').map(str::trim).find(|n| peers.lacks(n)) {
        return Err(crate::handoff::to_bench(&format!("--index {peer}")));
    }
    let known = peers.all_indexes();
    let list = IndexKind::parse_list(text, &known).map_err(crate::args::usage("--index"))?;
    Ok((list, note))
}

pub fn run(a: ConcurrentArgs, peers: &Peers) -> Result<(), CliError> {
    let usage = crate::args::usage;
    let (indexes, peers_note) = indexes(&a.index, peers)?;
    let workloads = concurrent::Workload::parse_list(&a.workload).map_err(usage("--workload"))?;
    let threads = crate::args::parse_threads(&a.threads)?;
    let records = count("--records", &a.records)?;
    let ops = count("--ops", &a.ops)?;
    let seconds_ok = a.max_seconds.is_finite() && a.max_seconds > 0.0 && a.max_seconds < 1e9;
    if records == 0 || ops == 0 || !seconds_ok {
        return Err(CliError::Usage(
            "--records, --ops and --max-seconds must be above 0".into(),
        ));
    }
    let skew = workloads.contains(&concurrent::Workload::Skew);
    let hotspots = match &a.hotspot {
        None => vec![concurrent::DEFAULT_HOTSPOT],
        Some(_) if !skew => {
            return Err(CliError::Usage(
                "--hotspot applies only to --workload skew".into(),
            ));
        }
        Some(text) => concurrent::parse_hotspots(text).map_err(usage("--hotspot"))?,
    };
    let timeline = match a.timeline_ms {
        Some(0) => return Err(CliError::Usage("--timeline-ms must be above 0".into())),
        ms => ms.map(Duration::from_millis),
    };
    if let Some(&t) = threads.iter().find(|&&t| t > ops) {
        return Err(CliError::Usage(format!(
            "--threads {t} is above --ops {ops}"
        )));
    }
    let cfg = Config {
        indexes,
        workloads,
        threads,
        records,
        ops,
        distribution: match a.distribution {
            DistributionArg::Uniform => Distribution::Uniform,
            DistributionArg::Zipf => Distribution::Zipf,
        },
        hotspots,
        timeline,
        max_duration: Duration::from_secs_f64(a.max_seconds),
        seed: a.seed,
        progress: true,
        alloc_counter: peers.alloc_counter,
    };
    let path = crate::kvbench_cmd::resolve_data(&a.data)?;
    let keys = lidb_data::synthetic::load(&path, a.seed)?;
    let available = keys.len();
    let split = KeySplit::new(keys, records, cfg.fresh_needed(), a.seed)
        .map_err(|e| CliError::Usage(format!("--data {}: {e}", a.data)))?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let alloc_note = if cfg.alloc_counter.is_none() {
        "; no counting allocator in this binary (lidb-bench has one): an index that does not \
         report its own memory has bytes_per_key n/a and no counted_bytes_per_key"
    } else {
        ""
    };
    let header = format!(
        "# lidb bench concurrent: cores={cores} data={path} keys={available} records={records} \
         ops={ops} (per run, split between threads) workloads={} threads={} distribution={:?} \
         seed={} max_seconds={}{}{} latency=every {}th op sampled; build_ms=bulk load (training) \
         time; bytes_per_key after the bulk load (index: its own report, finedex's estimate or \
         alex/lipp/dili's size_bytes; allocator: counted while building); alex/lipp/dili: \
         single-writer indexes behind one RwLock (reads share it, writes exclusive); \
         model_bytes: the learned models alone (finedex); end_bin_load_factor: the share of finedex's level-bin slots in use holding an entry at the end{alloc_note}{peers_note}",
        a.workload,
        a.threads,
        cfg.distribution,
        a.seed,
        a.max_seconds,
        if skew {
            format!(" hotspot={}", a.hotspot.as_deref().unwrap_or("0.01"))
        } else {
            String::new()
        },
        timeline.map_or(String::new(), |d| format!(" timeline_ms={}", d.as_millis())),
        concurrent::SAMPLE_EVERY,
    );
    if a.json {
        eprintln!("{header}");
    } else {
        println!("{header}");
    }
    let report = concurrent::run(&cfg, &split).map_err(CliError::Check)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let json = |e: serde_json::Error| CliError::Check(e.to_string());
        for row in &report.rows {
            writeln!(out, "{}", serde_json::to_string(row).map_err(json)?).map_err(io("stdout"))?;
        }
        for row in &report.timeline {
            writeln!(out, "{}", serde_json::to_string(row).map_err(json)?).map_err(io("stdout"))?;
        }
    } else {
        write!(out, "{}", concurrent::table(&report.rows)).map_err(io("stdout"))?;
        if !report.timeline.is_empty() {
            writeln!(
                out,
                "# timeline (ops completed per interval; t_ms: interval end since the \
                           phase's start)"
            )
            .map_err(io("stdout"))?;
            write!(out, "{}", concurrent::timeline_table(&report.timeline))
                .map_err(io("stdout"))?;
        }
    }
    if report.errors > 0 {
        return Err(CliError::Check(format!(
            "{} operations failed or answered wrong; first: {}",
            report.errors,
            report.first_error.as_deref().unwrap_or("?")
        )));
    }
    Ok(())
}
