//! `lidb bench ycsb` and `lidb bench scan`: the LearnedKV paper's engine comparisons (see
//! `lidb_bench::kv`). Parses and checks the options, resolves the keys, prints the configuration
//! line, notes and rows (a table, or JSON lines with the config line and notes on stderr).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use lidb_bench::engines::EngineConfig;
use lidb_bench::kv::{self, Common, Records};
use lidb_bench::lsm::load::parse_size;
use lidb_data::RequestDistribution;

use crate::args::{count, usage};
use crate::error::{CliError, io};

/// Options both benchmarks share.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Engines, comma-separated, compared in this order; ratios are against the first (lsm,
    /// learnedkv, lsm+ (the paper's RocksDB+: one LSM of pointers, GC writes them back), lsm+tier
    /// (learnedkv with an LSM in place of the learned index), finedex (FineStore: keys and values
    /// in memory over the FINEdex learned index, a log on disk; --memtable, --cache and
    /// --direct-io do not apply to it and are ignored with a note), learnedstore (LearnedStore:
    /// a buffer-managed B+-tree under a write-ahead log, leaves also reached through a learned
    /// model; --pool in place of --memtable and --cache, which it ignores with a note), btree
    /// (learnedstore with the learned path off) and rocksdb when built with --features
    /// rocksdb).
    #[arg(long, default_value = "lsm+,learnedkv")]
    engine: String,
    /// Bytes per key: 8 renders keys big-endian; 20 or more zero-padded decimal.
    #[arg(long, default_value_t = 8)]
    key_size: u32,
    /// Bytes per value (at least 16; KiB/MiB suffixes); each holds its key and a version, so every
    /// read is checked.
    #[arg(long, default_value = "1016")]
    value_size: String,
    /// Keys from a dataset instead of YCSB's hashed record keys: a SOSD u64 file, a dataset name
    /// of the data directory (tweetids_10M, tweet_ts_10M, osm_cellids_274K) or synthetic:NAME:N.
    /// Record r gets the r-th key of a seeded permutation of its distinct keys.
    #[arg(long)]
    data: Option<String>,
    /// Seed of the operations, the permutation of --data and the scan starts.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Read with O_DIRECT (every cache miss is a real read), as the paper's direct-I/O runs
    /// (finedex never reads its files after open: ignored, with a note).
    #[arg(long)]
    direct_io: bool,
    /// Memtable size of every engine (finedex has none: ignored, with a note). `--memtable` is
    /// the same option.
    #[arg(long = "write-buffer", alias = "memtable", default_value = "64MiB", value_parser = lidb_storage::size::parse_size)]
    memtable: u64,
    /// Block cache of every engine (finedex has none: ignored, with a note). `--cache` is the
    /// same option.
    #[arg(long = "block-cache", alias = "cache", default_value = "8MiB", value_parser = lidb_storage::size::parse_size)]
    cache: u64,
    /// Position boundary B of the learned indexes of lidb's LSM tables (lsm, and the LSMs of
    /// learnedkv, lsm+ and lsm+tier): a lookup reads a window of about B slots. The largest B: a
    /// table whose slots are wide gets B halved (down to 2) until B slots fit 8 KiB, so with
    /// 1 KiB entries B = 16 gives tables of B = 4, whose lookups read some 8 KiB, where 16 would
    /// read 16-20 KiB; entries of 512 bytes or less keep B. `--lsm-boundary` is the same option.
    #[arg(long = "boundary", alias = "lsm-boundary", default_value_t = 16)]
    lsm_boundary: u64,
    /// Index of lidb's LSM tables (as every command's --index): a family (fp, binary, plr,
    /// fiting, pgm, rs, rmi, lpa, plex, ...), FAMILY+keys, or an unclustered alex, lipp, dili or
    /// lits.
    #[arg(long, default_value = "pgm", value_parser = lidb_engines::IndexChoice::parse)]
    index: lidb_engines::IndexChoice,
    /// What lidb's LSM (engine lsm) keeps in its cache for a point lookup: "entries" (the
    /// answering slot alone, about one slot of cache per hot key), "pages" (the answer's 4 KiB
    /// page(s)) or "entries+pages".
    #[arg(long, default_value = "entries")]
    lsm_cache: String,
    /// rocksdb: the share of its cache (the --memory budget, or --cache) given to RocksDB's row
    /// cache of whole entries (its counterpart of lsm's entries cache), the rest to its block
    /// cache; 0 to 0.9.
    #[arg(long, default_value_t = 0.0)]
    rocksdb_row_cache: f64,
    /// learnedkv, lsm+, lsm+tier: GC once scans have wasted RATIO times its cost in reads of
    /// values scattered through the value log (0 = off; as every command's --scan-gc).
    #[arg(long, value_name = "RATIO", default_value_t = 1.0, value_parser = crate::engine_args::parse_scan_gc)]
    scan_gc: f64,
    /// Buffer pool of learnedstore and btree (the other engines ignore it). The default is
    /// --cache's, so the read caches are equal; the LSMs' memtable has no counterpart in the
    /// tree: for equal total memory give the pool --cache plus --memtable.
    #[arg(long, default_value = "8MiB", value_parser = lidb_storage::size::parse_size)]
    pool: u64,
    /// learnedstore, btree: the share of --pool (or of the --memory budget's cache) given to a
    /// row cache of whole records that gets found, 0 to 0.9 (as every command's --row-cache);
    /// the counterpart of --rocksdb-row-cache.
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = 0.0,
        value_parser = crate::engine_args::parse_row_cache_share
    )]
    row_cache: f64,
    /// Engine directories go under DIR/kv-<pid>/, one per engine, removed at the end.
    #[arg(long, default_value = "bench-out")]
    dir: PathBuf,
    /// Keep the engine directories.
    #[arg(long)]
    keep: bool,
    /// One JSON object per line (the config line and notes go to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct YcsbArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// YCSB workloads a..f, comma-separated (e.g. a,b,c,d,e,f): each runs in turn, with every
    /// --distribution, and a summary of each engine's last phase over the first engine's ends
    /// the run (see --heatmap).
    #[arg(long, default_value = "a")]
    workload: String,
    /// Records loaded in P0 (K and M suffixes).
    #[arg(long, default_value = "200K")]
    records: String,
    /// Operations of each phase after the load (K and M suffixes).
    #[arg(long, default_value = "200K")]
    ops_per_phase: String,
    /// Phases after the load (the paper: 3, P1-P3; figures come from the last).
    #[arg(long, default_value_t = 3)]
    phases: u32,
    /// Request distributions, comma-separated: zipfian:THETA, zipfian (0.99), uniform or latest
    /// [default: the workload's, zipfian 0.99 but latest for d].
    #[arg(long)]
    distribution: Option<String>,
    /// Write the summary (each engine's last-phase throughput over the first engine's, per
    /// workload, distribution and thread count) as an SVG heat map to this file.
    #[arg(long)]
    heatmap: Option<PathBuf>,
    /// Worker threads splitting each phase's operations; a comma-separated list (e.g.
    /// 1,2,4,8,16, each once, up to 255) runs the phases at each count in turn, one row per
    /// (engine, threads, phase, op). So that every count's figure compares: a workload with
    /// writes (a, b, d, e, f) loads a fresh engine per thread count, each starting from the same
    /// loaded state; the read-only workload c loads and settles each engine once and runs the
    /// phases at every count over it (reads leave its state as it was; later counts find a
    /// warmer cache, so compare the last phase, which every count reaches after the same
    /// warm-up). Rows carry "threads" and "scaling": kops_per_s over the same engine's, phase's
    /// and op's 1-thread row (null for P0, whose load runs on one thread, and when 1 is not in
    /// the list).
    #[arg(long, default_value = "1")]
    threads: String,
    /// One memory budget per engine for index + filters + cache (memtables stated apart):
    /// rocksdb gets it as its block cache with index and filter blocks cached in it; lsm gives
    /// its cache, and learnedstore and btree their buffer pool, what their indexes, filters and
    /// learned tables leave after the load and before each phase (rows say "over" when those
    /// alone exceed it); engines that cannot take it say so in the row. Replaces --cache (and
    /// --pool).
    #[arg(long)]
    memory: Option<String>,
    /// Timed 4 KiB O_DIRECT reads of the device probe run in --dir beside the engines (each
    /// engine's p50 and mean are printed as multiples of it); 0 for no probe.
    #[arg(long, default_value_t = 2000)]
    device_probe_reads: usize,
    /// What a read-only workload (c) runs after the load: gc (every engine, as the paper;
    /// finedex's gc is a checkpoint, which leaves its in-memory index as it was), convert
    /// (learnedkv's range-query-assisted conversion: a learned tier over the values where they
    /// are; other engines refuse) or none (reads go through what the load built).
    #[arg(long, default_value = "gc")]
    settle: String,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Records loaded (K and M suffixes).
    #[arg(long, default_value = "1M")]
    records: String,
    /// Scans per set.
    #[arg(long, default_value_t = 1000)]
    scans: u64,
    /// Bytes of keys and values each scan reads (the paper: about 500 KB); the range length in
    /// records is this over key_size + value_size.
    #[arg(long, default_value = "500000")]
    scan_bytes: String,
}

fn size(option: &str, text: &str) -> Result<u64, CliError> {
    parse_size(text).map_err(usage(option))
}

/// The path of `--data`: a file, a known dataset name (with or without `_uint64.zst`), or a
/// synthetic spec (returned as is).
pub(crate) fn resolve_data(data: &str) -> Result<String, CliError> {
    if data.starts_with("synthetic:") || std::path::Path::new(data).is_file() {
        return Ok(data.to_string());
    }
    [data.to_string(), format!("{data}_uint64.zst")]
        .iter()
        .find_map(|n| lidb_data::real_dataset(n))
        .map(|p| p.display().to_string())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--data: \"{data}\" is neither a file nor a dataset of the data directory ({})",
                lidb_data::REAL_U64_DATASETS.join(", ")
            ))
        })
}

fn common(a: &CommonArgs) -> Result<Common, CliError> {
    let value_size = size("--value-size", &a.value_size)?;
    let value_size = u32::try_from(value_size)
        .ok()
        .filter(|&v| u64::from(v) <= lidb_lsm::batch::MAX_VALUE_BYTES)
        .ok_or_else(|| CliError::Usage(format!("--value-size: {} is too large", a.value_size)))?;
    let (records, key_source) = match &a.data {
        None => (
            Records::hashed(a.key_size, value_size).map_err(CliError::KvBench)?,
            "ycsb-hashed".to_string(),
        ),
        Some(d) => {
            let path = resolve_data(d)?;
            let keys = lidb_data::synthetic::load(&path, a.seed)?;
            (
                Records::dataset(keys, a.seed, a.key_size, value_size)
                    .map_err(CliError::KvBench)?,
                path,
            )
        }
    };
    let mut engine = EngineConfig::new(PathBuf::new());
    engine.lsm.memtable_bytes = a.memtable;
    engine.lsm.block_cache_bytes = a.cache;
    engine.tree.pool_bytes = a.pool;
    engine.tree.row_cache_share = a.row_cache;
    engine.lsm.index = a.index;
    engine.direct_io = a.direct_io;
    if a.lsm_boundary < 2 {
        return Err(CliError::Usage(
            "--boundary: the position boundary is at least 2".into(),
        ));
    }
    engine.lsm.boundary = a.lsm_boundary;
    if !(0.0..=0.9).contains(&a.rocksdb_row_cache) {
        return Err(CliError::Usage(format!(
            "--rocksdb-row-cache {}: give 0 to 0.9 of the cache",
            a.rocksdb_row_cache
        )));
    }
    engine.lsm.rocksdb_row_cache_share = a.rocksdb_row_cache;
    engine.tier.scan_gc_ratio = a.scan_gc;
    engine.lsm.cache_mode = lidb_lsm::CacheMode::from_name(&a.lsm_cache).ok_or_else(|| {
        CliError::Usage(format!(
            "--lsm-cache: {} is not pages, entries or entries+pages",
            a.lsm_cache
        ))
    })?;
    Ok(Common {
        engines: a.engine.split(',').map(|s| s.trim().to_string()).collect(),
        records,
        key_source,
        seed: a.seed,
        engine,
        dir: a.dir.clone(),
        keep: a.keep,
        progress: true,
        // `lidb bench ycsb` sets these two; scan has neither a budget nor a probe yet.
        device_probe_reads: 0,
    })
}

fn parse_distribution(text: &str) -> Result<RequestDistribution, CliError> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "uniform" => return Ok(RequestDistribution::Uniform),
        "latest" => return Ok(RequestDistribution::Latest),
        "zipfian" => return Ok(RequestDistribution::Zipfian { theta: 0.99 }),
        _ => {}
    }
    t.strip_prefix("zipfian:")
        .and_then(|theta| theta.parse::<f64>().ok())
        .filter(|theta| *theta > 0.0 && *theta < 1.0)
        .map(|theta| RequestDistribution::Zipfian { theta })
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--distribution: \"{text}\" is not zipfian:THETA (0 < THETA < 1), zipfian, \
                 uniform or latest"
            ))
        })
}

/// Prints the config line (stdout, or stderr with --json) before the run starts.
pub(crate) fn print_config(json: bool, config: &str) {
    if json {
        eprintln!("{config}");
    } else {
        println!("{config}");
    }
}

/// Prints the notes (stdout, or stderr with --json) and the rows.
pub(crate) fn print(
    json: bool,
    notes: &[String],
    rows: Result<Vec<String>, serde_json::Error>,
    table: String,
) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let mut say = |line: &str| -> Result<(), CliError> {
        if json {
            eprintln!("{line}");
            Ok(())
        } else {
            writeln!(out, "{line}").map_err(io("stdout"))
        }
    };
    for n in notes {
        say(&format!("# note: {n}"))?;
    }
    if json {
        for line in rows.map_err(|e| CliError::Usage(e.to_string()))? {
            writeln!(out, "{line}").map_err(io("stdout"))?;
        }
    } else {
        write!(out, "{table}").map_err(io("stdout"))?;
    }
    Ok(())
}

pub fn ycsb(a: YcsbArgs) -> Result<(), CliError> {
    let workloads = a
        .workload
        .split(',')
        .map(|w| lidb_data::Workload::from_name(w.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let distributions: Vec<Option<lidb_data::RequestDistribution>> = match &a.distribution {
        None => vec![None],
        Some(list) => list
            .split(',')
            .map(|d| parse_distribution(d).map(Some))
            .collect::<Result<_, _>>()?,
    };
    let (Some(&workload), Some(&distribution)) = (workloads.first(), distributions.first()) else {
        return Err(CliError::Usage(
            "--workload and --distribution: give at least one".into(),
        ));
    };
    let mut cfg = kv::ycsb::Config {
        workload,
        distribution,
        record_count: count("--records", &a.records)?,
        ops_per_phase: count("--ops-per-phase", &a.ops_per_phase)?,
        phases: a.phases,
        threads: crate::args::parse_threads(&a.threads)?
            .into_iter()
            .map(|t| u32::try_from(t).unwrap_or(u32::MAX))
            .collect(),
        settle: kv::ycsb::Settle::from_name(&a.settle).map_err(CliError::KvBench)?,
        common: common(&a.common)?,
    };
    cfg.common.engine.memory_budget_bytes = a
        .memory
        .as_deref()
        .map(|m| size("--memory", m))
        .transpose()?;
    cfg.common.device_probe_reads = a.device_probe_reads;
    cfg.common.check_engines().map_err(CliError::KvBench)?;
    if a.heatmap.is_some() && cfg.common.engines.len() < 2 {
        return Err(CliError::Usage(
            "--heatmap compares engines with the first: give --engine at least two".into(),
        ));
    }
    // Each (workload, distribution) in turn, its rows printed as it ends.
    let mut all_rows = Vec::new();
    for workload in &workloads {
        for distribution in &distributions {
            cfg.workload = *workload;
            cfg.distribution = *distribution;
            print_config(a.common.json, &cfg.describe());
            let report = kv::ycsb::run(&cfg).map_err(CliError::KvBench)?;
            let rows = report.rows.iter().map(serde_json::to_string).collect();
            print(a.common.json, &report.notes, rows, report.table())?;
            all_rows.extend(report.rows);
        }
    }
    summarize(&a, &cfg.common.engines, &all_rows)
}

/// The matrix's summary against the first engine (a table, on stderr with --json) and the
/// heat map, where more than one engine ran.
fn summarize(a: &YcsbArgs, engines: &[String], rows: &[kv::ycsb::YcsbRow]) -> Result<(), CliError> {
    let Some(anchor) = engines.first().filter(|_| engines.len() > 1) else {
        return Ok(());
    };
    let cells = kv::matrix::cells(rows, anchor);
    let table = kv::matrix::table(&cells, anchor);
    if a.common.json {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    if let Some(path) = &a.heatmap {
        let memory = a.memory.as_deref().map_or_else(
            || format!("cache {}", lidb_storage::size::format_size(a.common.cache)),
            |m| format!("memory {m}"),
        );
        let title = format!(
            "YCSB: throughput over {anchor}'s ({} records, {} ops per phase, {memory})",
            a.records, a.ops_per_phase
        );
        std::fs::write(path, kv::matrix::heatmap_svg(&title, &cells, anchor))
            .map_err(io(&path.display().to_string()))?;
    }
    Ok(())
}

pub fn scan(a: ScanArgs) -> Result<(), CliError> {
    let cfg = kv::scan::Config {
        record_count: count("--records", &a.records)?,
        scans: a.scans,
        scan_bytes: size("--scan-bytes", &a.scan_bytes)?,
        common: common(&a.common)?,
    };
    cfg.common.check_engines().map_err(CliError::KvBench)?;
    print_config(a.common.json, &cfg.describe());
    let report = kv::scan::run(&cfg).map_err(CliError::KvBench)?;
    let rows = report.rows.iter().map(serde_json::to_string).collect();
    print(a.common.json, &report.notes, rows, report.table())
}
