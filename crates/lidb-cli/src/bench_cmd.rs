//! `lidb bench ...`: experiments on whole engines. `lidb bench lsm` runs the LSM papers'
//! experiments on lidb-lsm (see `lidb_bench::lsm`): parses and checks the options, loads the key
//! set, prints the configuration line, the rows (table or JSON lines) and optionally the plot.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use lidb_bench::lsm::{self, Config, Dataset, Engine, Experiment, load};
use lidb_lsm::Granularity;

use crate::args::{parse_boundaries, parse_families, usage};

/// `--index` of `lidb bench lsm`: clustered families, `FAMILY+keys`, alex, lipp, dili, lits, or
/// "all" (every clustered family).
fn parse_index_choices(list: &str) -> Result<Vec<lsm::IndexChoice>, CliError> {
    if list.trim() == "all" {
        return Ok(parse_families(list)?
            .into_iter()
            .map(lsm::IndexChoice::clustered)
            .collect());
    }
    list.split(',')
        .map(|s| lsm::IndexChoice::parse(s.trim()))
        .collect::<Result<Vec<_>, String>>()
        .map_err(usage("--index"))
}
use crate::error::{CliError, io};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The LSM papers' experiments on lidb's LSM engine (leveling, ratio 10, 10-bit Bloom
    /// filters, 8 MiB cache).
    ///
    /// Loads a database per configuration (or reuses --db DIR), then runs point lookups of
    /// existing keys, every value checked. pareto rows: index_bytes, filter_bytes,
    /// lookup_us_mean, lookup_us_p99, reads_per_lookup, bytes_read_per_lookup and the time
    /// breakdown table_lookup_us, predict_us, io_us, search_us. Every row has "index" and
    /// "boundary". Configurations of one table size share one load and switch indexes with
    /// Db::reindex.
    Lsm(LsmArgs),
    /// The LearnedKV paper's phases over engines (lsm, learnedkv, lsm+, lsm+tier, finedex,
    /// learnedstore, btree, and rocksdb in a build with it): P0 loads --records, each later phase runs --ops-per-phase operations of a YCSB
    /// workload. Several workloads and distributions (--workload a,b,c,d,e,f --distribution
    /// uniform,zipfian) run in turn, and a summary of each engine's throughput over the first
    /// engine's per cell ends the run (a heat map with --heatmap).
    ///
    /// JSON rows: engine, workload, distribution, threads, phase, op ("read", "update",
    /// "insert", "scan", "rmw" or "all"), ops, kops_per_s, scaling (over the 1-thread row; see
    /// --threads), p50_us, p99_us, p999_us, write_amp (bytes the process wrote to the device
    /// over the bytes of keys and values written), space_amp (the engine's directory over the
    /// live records' bytes), and the engine at the end of the phase: lsm_bytes, key_list_bytes,
    /// model_bytes, vlog_bytes (Table 1; finedex: its log and checkpoint files in vlog_bytes),
    /// reads_lsm, reads_tier (point reads each part answered during the phase), gcs (GCs
    /// installed so far). Every read's value is checked.
    ///
    /// finedex (FineStore) keeps keys and values in memory over FINEdex with a log on disk:
    /// --write-buffer, --block-cache, --direct-io and Bloom filters do not apply to it and are
    /// ignored (a note says so), its gc() is a checkpoint, and a note gives its index's heap bytes.
    Ycsb(crate::kvbench_cmd::YcsbArgs),
    /// The LearnedKV paper's range scans (Experiment 6): load, gc(), --scans scans of about
    /// --scan-bytes each, then again after N/2 and after N updates.
    ///
    /// JSON rows: engine, phase ("no_updates", "updates_0.5N", "updates_N"), scans,
    /// scans_per_s, mb_per_s, entries_per_scan, device_reads_per_scan and device_kb_per_scan
    /// (storage reads and the kilobytes they moved per scan; null for an engine that does not
    /// count them).
    Scan(crate::kvbench_cmd::ScanArgs),
    /// Concurrent in-memory indexes behind one trait (the FINEdex paper's evaluation): finedex,
    /// btree-rwlock, alex, lipp, dili and the peers skipmap, scc-tree, congee, li+delta (these run
    /// in the lidb-bench binary, which lidb hands them to); YCSB a..f, insert or skew at each
    /// thread count, every answer checked.
    ///
    /// JSON result rows ("row": "result"): index, concurrent, workload, threads, hotspot,
    /// hot_lo, hot_hi (skew), op ("read", "update", "insert", "scan", "rmw" or "all"), ops,
    /// errors, seconds, kops_per_s, p50_us, p99_us, bytes_per_key (after the bulk load),
    /// bytes_source ("index", "allocator" or "n/a"), counted_bytes_per_key (the allocator's
    /// figure for every index), end_bytes_per_key (finedex's own report per live key after the
    /// run), model_bytes and end_model_bytes (finedex's models alone), end_bin_load_factor
    /// (finedex's level bins), build_ms, level_bin_retrains, level_bin_retrain_ms,
    /// model_retrains and model_retrain_ms (finedex; null otherwise). With --timeline-ms,
    /// timeline rows ("row": "timeline") too.
    Concurrent(crate::concurrent_cmd::ConcurrentArgs),
    /// The LearnedStore paper's experiments (section V) on paged B+-trees: memory (Fig. 5),
    /// partial (Figs. 3b, 6a), cold (Fig. 2) and writes (Table IV), each engine on the same
    /// seeded keys and operations in one run.
    ///
    /// Engines: learnedstore and btree (the LearnedStore engine with its learned path on and
    /// off; learnedstore:FAMILY/B for another leaf model), and the peers (in the lidb-bench
    /// binary, which lidb hands them to) redb (its cache capped to --pool,
    /// file opened with O_DIRECT) and lmdb (the OS-page-cache reference, run inside a memory
    /// cgroup of --pool plus 32 MiB where the machine allows one; a note says which).
    ///
    /// JSON rows: experiment, data, engine, op ("read"; writes: "insert100", "ycsb-a",
    /// "ycsb-b"), threads, kops_per_s, scaling (over the 1-thread row; see --threads), mean_us, p50_us, p99_us, p999_us, reads_per_op (device reads
    /// counted by the engine per operation; reads_source says how), simulated (the paper's
    /// inner-node miss simulation), time_to_90_s and series_kops (cold), and the configuration:
    /// ops, records, loaded, value_size, pool_bytes, seed.
    Btree(crate::btree_cmd::BtreeArgs),
    /// Throughput against threads as one SVG figure, one panel per workload and one line per
    /// engine or index, from the JSON lines of `lidb bench concurrent`, `ycsb` and `btree` run
    /// with a --threads list (scripts/scale.sh gathers them); prints the figures as tables too,
    /// with the top thread count's throughput over the 2-thread one.
    PlotScaling(crate::scaling_cmd::PlotScalingArgs),
    /// The results page: rewrites the table between `<!-- report:begin -->` and
    /// `<!-- report:end -->` of --page from the JSON lines scripts/report.sh wrote into --input
    /// (ratios from rows of one run), and draws the report's SVG plots into --plots.
    Report(crate::report_cmd::ReportArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExperimentArg {
    /// Memory versus point-lookup latency per (index, boundary) (papers' Figure 7).
    Pareto,
    /// Table sizes 8..128 MiB and level models (Figure 12).
    Granularity,
    /// Write-only load per index: compaction time split (read/merge/write/train/index_write).
    Compaction,
    /// Lookups answered per level, uniform vs zipfian keys.
    Levels,
    /// A boundary per level under --index-memory: observes each level's reads and index bytes at
    /// every --boundary, picks the B per level with the least expected device time per lookup
    /// that fits the budget, and times it against every uniform B (one --index).
    LevelPlan,
    /// Range lookups: seek versus scan time (Figure 9); see --range-len.
    Range,
    /// A YCSB workload (see --workload, --ops) on the loaded database (Figure 13).
    Ycsb,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GranularityArg {
    /// One learned index per SSTable.
    Table,
    /// One model per level (every compaction rewrites the whole level).
    Level,
}

#[derive(Debug, Args)]
pub struct LsmArgs {
    /// The experiment to run.
    #[arg(long, value_enum, default_value_t = ExperimentArg::Pareto)]
    experiment: ExperimentArg,
    /// Keys: a SOSD u64 file (plain or .zst), or synthetic:NAME:N (uniform_dense,
    /// uniform_sparse, normal, lognormal, piecewise_linear, clustered, lineargen, piecewise,
    /// randomgen; N accepts K and M).
    #[arg(long, default_value = "synthetic:uniform_sparse:1M")]
    data: String,
    /// Keys to load: a seeded uniform sample of this many distinct keys of --data (K and M
    /// suffixes), or "all". The default of 200K (about 200 MB with the default sizes) keeps a
    /// default run to a few minutes on a 2-core machine.
    #[arg(long, default_value = "200K")]
    keys: String,
    /// Bytes per key: 8 renders each u64 big-endian; longer keys are zero-padded decimal (as the
    /// papers' 24-byte keys). A range MIN..MAX (e.g. 8..24, both included, MIN >= 8) gives each
    /// key a length drawn uniformly by a hash of the key: its 8 big-endian bytes, then filler
    /// bytes derived from it (the LSM study's variable-length keys, section 5.3).
    #[arg(long, default_value = "24")]
    key_size: String,
    /// Bytes per value (KiB/MiB suffixes accepted); values are derived from their key, so every
    /// lookup checks the value it got.
    #[arg(long, default_value = "1000")]
    value_size: String,
    /// Table indexes, comma-separated, or "all" (every clustered family). Clustered families
    /// (fp, binary, plr, fiting, pgm, rs, rmi, lpa, plex): the model gives a range of at most B
    /// slots, read once, then a last-mile search. FAMILY+keys (e.g. pgm+keys): the same with
    /// every key image retained in memory beside the model, so a lookup reads one slot (the LSM
    /// study's "mapped keys retained"). alex, lipp, dili: unclustered indexes over the key
    /// images holding each entry's slot; lits: unclustered over the full byte keys. Unclustered
    /// kinds and +keys need --granularity table; --boundary only matters to clustered families.
    #[arg(long, default_value = "fp,plr,fiting,pgm,rs,rmi,lpa,plex")]
    index: String,
    /// Position boundaries B (at least 2), comma-separated.
    #[arg(long, default_value = "8,16,32,64,128")]
    boundary: String,
    /// SSTable size, 4MiB to 128MiB (KiB/MiB/GiB suffixes) [default: 64MiB; if neither this nor
    /// --write-buffer is set, both are scaled to the data: data/256 rounded down to a power of
    /// two, 64KiB..64MiB, so small runs keep several levels; the config line says what was used].
    #[arg(long)]
    sst_size: Option<String>,
    /// Memtable size that triggers a flush [default: 64MiB, scaled with --sst-size as above].
    #[arg(long)]
    write_buffer: Option<String>,
    /// Index granularity: one index per table, or one model per level (reloads per
    /// configuration, since level models are built by compaction).
    #[arg(long, value_enum, default_value_t = GranularityArg::Table)]
    granularity: GranularityArg,
    /// Timed point lookups (range lookups for --experiment range) per configuration, after a
    /// warm-up of a tenth as many (1,000 to 10,000).
    #[arg(long, default_value_t = 100_000)]
    lookups: usize,
    /// Entries read per range lookup (--experiment range).
    #[arg(long, default_value_t = 100)]
    range_len: usize,
    /// YCSB workload a..f (--experiment ycsb).
    #[arg(long, default_value = "a")]
    workload: String,
    /// YCSB operations per configuration (--experiment ycsb).
    #[arg(long, default_value_t = 100_000)]
    ops: usize,
    /// Read tables with O_DIRECT, bypassing the OS page cache (every engine-cache miss is a
    /// real read). Without it, reads may be served by the OS page cache.
    #[arg(long)]
    direct_io: bool,
    /// One memory budget for indexes + filters + cache: after each load (and re-index) the
    /// cache gets what the indexes and filters leave; rows show its capacity and how far the
    /// indexes alone exceed the budget [default: an 8MiB cache, indexes outside it].
    #[arg(long)]
    memory: Option<String>,
    /// What a point lookup keeps in the cache: "entries" (the answering slot alone), "pages"
    /// (its 4 KiB page(s)) or "entries+pages".
    #[arg(long, default_value = "entries")]
    cache_mode: String,
    /// The index memory (all levels' table indexes) --experiment level-plan chooses a boundary
    /// per level for, e.g. 2MiB (KiB/MiB/GiB suffixes); only for that experiment.
    #[arg(long)]
    index_memory: Option<String>,
    /// Timed 4 KiB O_DIRECT reads of the device probe (pareto, granularity), run in the
    /// databases' directory in the same invocation; rows give p50 and mean as multiples of it.
    /// 0 for no probe.
    #[arg(long, default_value_t = 2000)]
    device_probe_reads: usize,
    /// Keep databases in DIR (one subdirectory per load) and reuse them when a later run loads
    /// the same data with the same options [default: a temporary directory, removed at the end].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of synthetic data, the key sample, the load order and the lookups.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// One JSON object per line instead of a table (the config line goes to stderr).
    #[arg(long)]
    json: bool,
    /// Also draw index memory versus mean lookup latency per family as an SVG file (pareto and
    /// granularity).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

pub fn run(cmd: BenchCommand, peers: &lidb_bench::peers::Peers) -> Result<(), CliError> {
    match cmd {
        BenchCommand::Lsm(a) => lsm_bench(a),
        BenchCommand::Ycsb(a) => crate::kvbench_cmd::ycsb(a),
        BenchCommand::Scan(a) => crate::kvbench_cmd::scan(a),
        BenchCommand::Concurrent(a) => crate::concurrent_cmd::run(a, peers),
        BenchCommand::Btree(a) => crate::btree_cmd::run(a, peers),
        BenchCommand::PlotScaling(a) => crate::scaling_cmd::run(a),
        BenchCommand::Report(a) => crate::report_cmd::run(a),
    }
}

fn experiment(e: ExperimentArg) -> Experiment {
    match e {
        ExperimentArg::Pareto => Experiment::Pareto,
        ExperimentArg::Granularity => Experiment::Granularity,
        ExperimentArg::Compaction => Experiment::Compaction,
        ExperimentArg::Levels => Experiment::Levels,
        ExperimentArg::LevelPlan => Experiment::LevelPlan,
        ExperimentArg::Range => Experiment::Range,
        ExperimentArg::Ycsb => Experiment::Ycsb,
    }
}

fn lsm_bench(a: LsmArgs) -> Result<(), CliError> {
    let exp = experiment(a.experiment);
    let families = parse_index_choices(&a.index)?;
    let boundaries = parse_boundaries(&a.boundary)?;
    let workload = lidb_data::Workload::from_name(&a.workload)?;
    let value_size = load::parse_size(&a.value_size).map_err(usage("--value-size"))?;
    let value_size = u32::try_from(value_size)
        .ok()
        .filter(|&v| u64::from(v) <= lidb_lsm::batch::MAX_VALUE_BYTES)
        .ok_or_else(|| CliError::Usage(format!("--value-size: {} is above 1GiB", a.value_size)))?;
    let sst = a
        .sst_size
        .as_deref()
        .map(load::parse_size)
        .transpose()
        .map_err(usage("--sst-size"))?;
    if let Some(s) = sst
        && !(4 << 20..=128 << 20).contains(&s)
    {
        return Err(CliError::Usage(format!(
            "--sst-size: {} is outside 4MiB..=128MiB",
            load::format_size(s)
        )));
    }
    let write_buffer = a
        .write_buffer
        .as_deref()
        .map(load::parse_size)
        .transpose()
        .map_err(usage("--write-buffer"))?;
    if let Some(w) = write_buffer
        && w < 64 << 10
    {
        return Err(CliError::Usage(format!(
            "--write-buffer: {} is below 64KiB",
            load::format_size(w)
        )));
    }
    if a.lookups == 0 || (exp == Experiment::Ycsb && a.ops == 0) || a.range_len == 0 {
        return Err(CliError::Usage(
            "--lookups, --ops and --range-len must be at least 1".into(),
        ));
    }
    if a.plot.is_some() && !matches!(exp, Experiment::Pareto | Experiment::Granularity) {
        return Err(CliError::Usage(
            "--plot draws memory versus latency: use it with --experiment pareto or granularity"
                .into(),
        ));
    }
    let sample = match a.keys.trim() {
        "all" => None,
        n => Some(
            lidb_data::synthetic::parse_count(n)
                .map_err(|e| CliError::Usage(format!("--keys: {e}")))? as usize,
        ),
    };
    if sample == Some(0) {
        return Err(CliError::Usage("--keys must be at least 1".into()));
    }
    let all = lidb_data::synthetic::load(&a.data, a.seed)?;
    let available = all.len();
    let keys = load::sample_keys(all, sample, a.seed);
    let Some(&max_key) = keys.last() else {
        return Err(CliError::Usage(format!("{}: no keys to load", a.data)));
    };
    let key_size = lsm::KeySize::parse(&a.key_size).map_err(usage("--key-size"))?;
    key_size.check(max_key).map_err(usage("--key-size"))?;
    let data = Dataset {
        source: a.data.clone(),
        keys,
        key_size,
        value_size,
        seed: a.seed,
    };
    let granularity = match a.granularity {
        GranularityArg::Table => Granularity::Table,
        GranularityArg::Level => Granularity::Level,
    };
    if let Some(c) = families
        .iter()
        .find(|c| granularity == Granularity::Level && c.kind != lidb_lsm::IndexKind::Clustered)
    {
        return Err(CliError::Usage(format!(
            "--index: {} needs --granularity table (a level model has no per-table index)",
            c.name()
        )));
    }
    let mut engine = Engine::resolve(
        data.data_bytes(),
        sst,
        write_buffer,
        granularity,
        a.direct_io,
    );
    engine.memory_budget_bytes = a
        .memory
        .as_deref()
        .map(load::parse_size)
        .transpose()
        .map_err(usage("--memory"))?;
    engine.cache_mode = lidb_lsm::CacheMode::from_name(&a.cache_mode).ok_or_else(|| {
        CliError::Usage(format!(
            "--cache-mode: {} is not pages, entries or entries+pages",
            a.cache_mode
        ))
    })?;
    let index_memory_bytes = a
        .index_memory
        .as_deref()
        .map(load::parse_size)
        .transpose()
        .map_err(usage("--index-memory"))?;
    if index_memory_bytes.is_some() != (exp == Experiment::LevelPlan) {
        return Err(CliError::Usage(
            "--index-memory goes with --experiment level-plan, and level-plan needs it".into(),
        ));
    }
    let cfg = Config {
        families,
        boundaries,
        engine,
        lookups: a.lookups,
        range_len: a.range_len,
        workload,
        ops: a.ops,
        db_dir: a.db.clone(),
        progress: true,
        device_probe_reads: a.device_probe_reads,
        index_memory_bytes,
        data,
    };
    let header = config_line(&a, &cfg, exp, available);
    let say = |line: &str| -> Result<(), CliError> {
        if a.json {
            eprintln!("{line}");
            Ok(())
        } else {
            writeln!(std::io::stdout().lock(), "{line}").map_err(io("stdout"))
        }
    };
    say(&header)?;
    let report = lsm::run(exp, &cfg).map_err(CliError::LsmBench)?;
    for note in &report.notes {
        say(&format!("# note: {note}"))?;
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        let lines = report
            .rows
            .json_lines()
            .map_err(|e| CliError::Usage(e.to_string()))?;
        for line in lines {
            writeln!(out, "{line}").map_err(io("stdout"))?;
        }
    } else {
        write!(out, "{}", report.rows.table()).map_err(io("stdout"))?;
    }
    if let Some(path) = &a.plot {
        let points = report.rows.plot_points().unwrap_or_default();
        let series = lidb_bench::plot::group(&points);
        let title = format!(
            "{}: {} keys of {}, {}B keys, {}B values{}",
            exp.name(),
            cfg.data.keys.len(),
            std::path::Path::new(&a.data)
                .file_name()
                .map_or(a.data.as_str(), |n| n.to_str().unwrap_or(&a.data)),
            a.key_size,
            value_size,
            if a.direct_io { ", direct I/O" } else { "" }
        );
        let svg = lidb_bench::plot::memory_latency_svg(&title, &series);
        std::fs::write(path, svg).map_err(io(path.display().to_string()))?;
    }
    Ok(())
}

fn config_line(a: &LsmArgs, cfg: &Config, exp: Experiment, available: usize) -> String {
    let reads = if a.direct_io {
        "reads=direct I/O (OS page cache bypassed)"
    } else {
        "reads=buffered (may be served by the OS page cache; --direct-io for real reads)"
    };
    let extra = match exp {
        Experiment::Range => format!(" range_len={}", a.range_len),
        Experiment::Ycsb => format!(" workload={} ops={}", cfg.workload, a.ops),
        Experiment::LevelPlan => {
            format!(" index_memory={}", cfg.index_memory_bytes.map_or(0, |b| b))
        }
        _ => String::new(),
    };
    format!(
        "# lidb bench lsm: experiment={} data={} keys={} (sampled from {available}) key_size={} \
         value_size={} seed={} lookups={}{extra} {} load=seeded random order, batches of {}, \
         compactions inline then flush {reads}",
        exp.name(),
        a.data,
        cfg.data.keys.len(),
        cfg.data.key_size,
        cfg.data.value_size,
        a.seed,
        a.lookups,
        cfg.engine.describe(),
        load::BATCH_ENTRIES,
    )
}
