//! `lidb bench btree`: the LearnedStore paper's experiments (see `lidb_bench::btree`). Parses
//! and checks the options, loads the keys, prints the configuration line, the notes and the rows
//! (a table, or JSON lines with the config line and notes on stderr).

use std::path::PathBuf;

use clap::Args;
use lidb_bench::btree::{self, Config, Dataset, Experiment, engines};
use lidb_bench::lsm::load::{parse_size, sample_keys};
use lidb_bench::peers::{Peers, STORE_PEERS};

use crate::args::{count, usage};
use crate::error::CliError;
use crate::kvbench_cmd::{print, print_config, resolve_data};

#[derive(Debug, Args)]
pub struct BtreeArgs {
    /// The experiment: memory (read-only throughput, everything resident; Fig. 5), partial (a
    /// pool smaller than the tree, pages evicted by the engine's replacement: latency mean,
    /// p99, p99.9; plus the paper's simulated inner-node miss where the engine has the hook;
    /// Figs. 3b, 6a), cold (lookups from a cold pool: throughput per interval and the time to
    /// 90% of the peak; Fig. 2) or writes (100% insert, YCSB-A = 50% insert, YCSB-B = 5% insert
    /// after a bulk load of half the keys; Table IV).
    #[arg(long, default_value = "memory")]
    experiment: String,
    /// Keys: a SOSD u64 file (plain or .zst), a dataset name of the data directory (e.g.
    /// tweetids_10M), or synthetic:NAME:N. The paper's Table II sets are synthetic:lineargen:N
    /// (one line start + i*stride, start < 2^32, stride 1..=1024), synthetic:piecewise:N (4-16
    /// exact lines of seeded lengths, strides 2^0..2^20, gaps up to 2^32) and
    /// synthetic:randomgen:N (uniform u64, sorted, duplicates redrawn); N accepts K and M.
    #[arg(long, default_value = "synthetic:randomgen:200K")]
    data: String,
    /// Records: a seeded uniform sample of this many distinct keys of --data (K and M
    /// suffixes), or "all". writes loads half of them and inserts from the other half.
    #[arg(long, default_value = "all")]
    records: String,
    /// Bytes per value (at least 8; KiB/MiB suffixes); each value holds its key, so every read
    /// is checked. The paper's Table II: 64.
    #[arg(long, default_value = "64")]
    value_size: String,
    /// Pool (cache) bytes of every engine (KiB/MiB/GiB suffixes) [default: memory and writes:
    /// everything resident (twice the records + 16MiB); partial: a quarter of the records; cold:
    /// half]. memory refuses a pool smaller than the records, partial one that is not smaller.
    #[arg(long)]
    pool: Option<String>,
    /// Timed operations per engine and row (K and M suffixes): lookups, or for writes the
    /// operations of each mix (at most the keys outside the loaded half).
    #[arg(long, default_value = "100K")]
    ops: String,
    /// Engines, comma-separated, or "all" (every engine): learnedstore (LearnedStore, learned
    /// path on, leaf model rs/32), learnedstore:FAMILY/B (the learned path with another leaf
    /// model: any lidb-index family and its error bound in mapping-table slots, e.g.
    /// learnedstore:rs/16,learnedstore:rs/128,learnedstore:pgm/32 sweeps models in one run),
    /// btree (the same tree, learned path off), and the peers redb, lmdb (linked into the
    /// lidb-bench binary; lidb hands a run naming one to it: docs/guide.md, "Benchmarks as commands").
    #[arg(long, default_value = "all")]
    engine: String,
    /// Threads of the timed lookups of memory and partial: one count or a comma-separated list
    /// (e.g. 1,2,4,8,16, each once), each its own row over the same loaded store (lookups
    /// change nothing, so the rows compare; every count looks up the same seeded keys, split
    /// between its threads). Rows carry "threads" and "scaling" (kops_per_s over the same
    /// engine's 1-thread row; null when 1 is not in the list). cold and writes run on one
    /// thread and refuse any other value.
    #[arg(long, default_value = "1")]
    threads: String,
    /// cold: seconds of lookups from the cold pool.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// cold: width of one throughput interval in milliseconds (the paper: 1000).
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// partial: probability of the paper's simulated inner-node miss (0 skips the simulated
    /// row; engines without the hook get a note instead).
    #[arg(long, default_value_t = 0.01)]
    inner_miss: f64,
    /// Engine files go under DIR/btree-<pid>/, one directory per engine and phase; each engine's
    /// are removed as soon as its rows are taken (so the disk holds one engine's files at a
    /// time), unless --keep.
    #[arg(long, default_value = "bench-out")]
    dir: PathBuf,
    /// Keep the engine directories.
    #[arg(long)]
    keep: bool,
    /// Seed of synthetic data, the sample, the split of writes and every operation sequence.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// One JSON object per line (the config line and notes go to stderr).
    #[arg(long)]
    json: bool,
}

/// The engines `--engine` asks for, and a note when `all` runs without the peers. A run naming
/// a peer this binary lacks (redb, lmdb in the lean `lidb`) is handed to `lidb-bench`, as is
/// `all` when `lidb-bench` is there; otherwise a named peer fails with one line.
fn engine_list(text: &str, peers: &Peers) -> Result<(Vec<String>, Option<String>), CliError> {
    let mut note = None;
    let names: Vec<String> = if text.trim() == "all" {
        if STORE_PEERS.iter().any(|n| peers.lacks(n)) {
            if crate::handoff::available().is_some() {
                return Err(crate::handoff::to_bench("--engine all"));
            }
            note = Some(format!(
                "# peers {} not in this run: they run in lidb-bench ({})",
                STORE_PEERS.join(", "),
                crate::handoff::BUILD
            ));
        }
        engines::btree_engines(peers)
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        text.split(',').map(|s| s.trim().to_string()).collect()
    };
    if let Some(peer) = names.iter().find(|n| peers.lacks(n)) {
        return Err(crate::handoff::to_bench(&format!("--engine {peer}")));
    }
    engines::check_engines(peers, &names).map_err(CliError::BtreeBench)?;
    Ok((names, note))
}

fn dataset(a: &BtreeArgs) -> Result<Dataset, CliError> {
    let value_size = parse_size(&a.value_size).map_err(usage("--value-size"))?;
    let value_size = u32::try_from(value_size)
        .ok()
        .filter(|v| (8..=1 << 20).contains(v))
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--value-size: {} is outside 8B..=1MiB",
                a.value_size
            ))
        })?;
    let sample = match a.records.trim() {
        "all" => None,
        n => Some(usize::try_from(count("--records", n)?).unwrap_or(usize::MAX)),
    };
    if sample == Some(0) {
        return Err(CliError::Usage("--records must be at least 1".into()));
    }
    let source = resolve_data(&a.data)?;
    let keys = sample_keys(lidb_data::synthetic::load(&source, a.seed)?, sample, a.seed);
    if keys.is_empty() {
        return Err(CliError::Usage(format!("--data: {} has no keys", a.data)));
    }
    Ok(Dataset {
        source: a.data.clone(),
        keys,
        value_size,
    })
}

pub fn run(a: BtreeArgs, peers: &Peers) -> Result<(), CliError> {
    let experiment = Experiment::from_name(a.experiment.trim()).map_err(CliError::BtreeBench)?;
    let (engines, peers_note) = engine_list(&a.engine, peers)?;
    let pool = a
        .pool
        .as_deref()
        .map(parse_size)
        .transpose()
        .map_err(usage("--pool"))?;
    if pool == Some(0) {
        return Err(CliError::Usage("--pool must be above 0".into()));
    }
    if !a.seconds.is_finite() || a.seconds <= 0.0 || a.seconds > 3600.0 {
        return Err(CliError::Usage("--seconds must be in (0, 3600]".into()));
    }
    let data = dataset(&a)?;
    let run_dir = a.dir.join(format!("btree-{}", std::process::id()));
    let cfg = Config {
        experiment,
        data,
        engines,
        pool,
        ops: count("--ops", &a.ops)?,
        threads: crate::args::parse_threads(&a.threads)?,
        cold_seconds: a.seconds,
        interval_ms: a.interval_ms,
        inner_miss: a.inner_miss,
        seed: a.seed,
        dir: run_dir.clone(),
        keep: a.keep,
        progress: true,
    };
    cfg.check().map_err(CliError::BtreeBench)?;
    print_config(a.json, &cfg.describe());
    if let Some(note) = &peers_note {
        print_config(a.json, note);
    }
    let result = btree::run(&cfg, &|name, setup| {
        engines::open_engine(peers, name, setup)
    });
    if !a.keep {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    let report = result.map_err(CliError::BtreeBench)?;
    let rows = btree::rows::json_lines(&report.rows);
    print(
        a.json,
        &report.notes,
        rows,
        btree::rows::render(&report.rows),
    )
}
