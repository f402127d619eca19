//! The engine options every command that opens an engine takes (`lidb kv`, `lidb serve`, `lidb
//! repair`, `lidb fine serve`), flattened into each from one [`EngineArgs`], so an option is spelled, parsed and
//! documented once; and the one table of which engines read which option ([`readers_of`]) and
//! which commands use it ([`CommandUse`]). An option given where it would be ignored is refused
//! with one line naming the option and the engine or command; an option left to its default
//! never is.

use std::path::PathBuf;

use clap::Args;
use lidb_engines::{EngineConfig, EngineKind, IndexChoice, Shape};
use lidb_index::Family;
use lidb_storage::RecoveryMode;

use crate::error::CliError;

/// Which engine, and how it is configured: the options every engine reads, then one group per
/// engine family (each its own help section), flattened into every command that opens an
/// engine. Each option's help names the engines that read it.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// The engine: lsm (values in the LSM), learnedkv (LSM plus a learned tier built by GC),
    /// lsm+ (values in a value log, every pointer in one LSM, GC writes them back: the paper's
    /// RocksDB+), lsm+tier (learnedkv with an LSM in place of the learned index), finedex
    /// (FineStore: every key in memory over FINEdex, a log and checkpoints on disk),
    /// learnedstore (LearnedStore: a buffer-managed B+-tree under a write-ahead log, its leaves
    /// also reached through a learned model), btree (learnedstore with the learned path off),
    /// rocksdb (only in a build with --features rocksdb). Each option below names the engines
    /// that read it; given to another, it is refused.
    #[arg(long, default_value = "lsm", value_parser = EngineKind::parse)]
    pub engine: EngineKind,
    /// Every engine: sync every write to disk before acknowledging it (a write acknowledged
    /// survives a crash); without it a crash may lose the latest writes.
    #[arg(long)]
    pub sync: bool,
    /// lidb's engines (not rocksdb): what the open does with a bad record in a log (WAL,
    /// manifest, value log): tolerate-torn-tail cuts a crash's torn tail and refuses damage (a
    /// record that fails its checksum with intact records after it); point-in-time keeps the
    /// intact prefix before any bad record, drops the rest and saves it under DIR/lost/;
    /// absolute refuses any bad record. Whatever is cut is printed on stderr.
    #[arg(long, default_value = "tolerate-torn-tail", value_parser = parse_recovery_mode)]
    pub recovery_mode: RecoveryMode,
    /// LSM engines, learnedstore, btree, rocksdb: O_DIRECT for table reads (learnedstore,
    /// btree: for the page file).
    #[arg(long)]
    pub direct_io: bool,
    #[command(flatten)]
    pub lsm: LsmArgs,
    #[command(flatten)]
    pub tier: TierArgs,
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
    #[command(flatten)]
    pub tree: TreeArgs,
}

/// The LSM engines' options (and rocksdb's memtable and cache).
#[derive(Debug, Args)]
#[command(next_help_heading = "LSM engines (lsm, learnedkv, lsm+, lsm+tier) and rocksdb")]
pub struct LsmArgs {
    /// LSM engines (lsm, learnedkv, lsm+, lsm+tier), rocksdb: memtable size that triggers a
    /// flush (e.g. 64MiB, 256KiB). `--memtable` is the same option (as `lidb bench ycsb`).
    #[arg(long, alias = "memtable", default_value = "64MiB", value_parser = lidb_storage::size::parse_size)]
    pub write_buffer: u64,
    /// LSM engines, rocksdb: block cache size (e.g. 8MiB). `--cache` is the same option.
    #[arg(long, alias = "cache", default_value = "8MiB", value_parser = lidb_storage::size::parse_size)]
    pub block_cache: u64,
    /// LSM engines: index of new tables: a family (fp, binary, plr, fiting, pgm, rs, rmi, lpa,
    /// plex, ...), FAMILY+keys (mapped keys retained), or an unclustered alex, lipp, dili or
    /// lits (see `lidb bench lsm --help`).
    #[arg(long, default_value = "pgm", value_parser = IndexChoice::parse)]
    pub index: IndexChoice,
    /// LSM engines: position boundary B of new tables' indexes (at least 2); a table whose slots
    /// are wide gets B halved (down to 2) until B slots fit 8 KiB, two pages.
    #[arg(long, default_value_t = 16)]
    pub boundary: u64,
    /// LSM engines: target SSTable size (4MiB to 128MiB).
    #[arg(long, default_value = "64MiB", value_parser = lidb_storage::size::parse_size)]
    pub sst_size: u64,
}

/// learnedkv's conversion triggers.
#[derive(Debug, Args)]
#[command(next_help_heading = "learnedkv, lsm+ and lsm+tier")]
pub struct TierArgs {
    /// learnedkv: convert in the background (no values moved) when the LSM's tables reach this
    /// size (e.g. 256MiB); 0 = off.
    #[arg(long, default_value = "0", value_parser = lidb_storage::size::parse_size)]
    pub convert_at_lsm_bytes: u64,
    /// learnedkv: convert in the background when the LSM has this many non-empty levels; 0 = off.
    #[arg(long, default_value_t = 0)]
    pub convert_at_lsm_levels: usize,
    /// learnedkv, lsm+, lsm+tier: run a GC, which writes every live value in key order, once
    /// scans have wasted RATIO times its cost in reads of values scattered through the value
    /// log (1: never waste more than the GC costs; 0 = off; at most 1000).
    #[arg(long, value_name = "RATIO", default_value_t = 1.0, value_parser = parse_scan_gc)]
    pub scan_gc: f64,
}

/// Parses `--scan-gc`: a ratio in [0, 1000].
pub fn parse_scan_gc(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1000.0).contains(&r) => Ok(r),
        _ => Err(format!("\"{text}\" is not a ratio from 0 to 1000")),
    }
}

/// The automatic checkpoint of the engines that checkpoint.
#[derive(Debug, Args)]
#[command(next_help_heading = "finedex, learnedstore and btree")]
pub struct CheckpointArgs {
    /// finedex, learnedstore, btree: checkpoint by itself, in a background thread, each time
    /// the log holds this many bytes since the last checkpoint (e.g. 64MiB, 256KiB), which
    /// bounds the log and the next open's replay; 0 = only on an explicit checkpoint (and, for
    /// learnedstore and btree, on close).
    #[arg(long, default_value = "64MiB", value_parser = lidb_storage::size::parse_size)]
    pub checkpoint_log_bytes: u64,
}

/// learnedstore's and btree's options.
#[derive(Debug, Args)]
#[command(next_help_heading = "learnedstore and btree")]
pub struct TreeArgs {
    /// learnedstore, btree: bytes of the buffer pool, the tree's pages in memory (e.g. 8MiB,
    /// 1GiB; a pool smaller than 16 pages is raised to 16). The default is the LSM engines'
    /// default block cache, so the read caches match; the LSMs also hold a memtable
    /// (--write-buffer), which the tree has no counterpart of.
    #[arg(long, default_value = "8MiB", value_parser = lidb_storage::size::parse_size)]
    pub pool: u64,
    /// learnedstore, btree: page size of a new page file (a power of two from 4KiB to 64KiB);
    /// an existing file must be opened with the page size it was created with.
    #[arg(long, default_value = "4KiB", value_parser = lidb_storage::size::parse_size)]
    pub page_size: u64,
    /// learnedstore: reach leaves through the learned model (on) or only by walking the tree
    /// (off, which is the btree engine).
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub learned: bool,
    /// learnedstore: the model over the leaves' boundary keys, FAMILY/B: any lidb-index family
    /// (fp, plr, fiting, pgm, rs, rmi, lpa, ...) and its error bound in mapping-table slots
    /// (at least 2). The default, rs/32, is the authors' code's RadixSpline.
    #[arg(long, default_value = "rs/32")]
    pub leaf_model: String,
    /// learnedstore, btree: the share of --pool (or of a --memory budget's cache) given to a
    /// row cache of whole records that gets found, 0 to 0.9; the rest stays the pool of pages.
    /// A hot record then costs its own bytes instead of a 4 KiB page (RocksDB's row_cache).
    #[arg(long, value_name = "SHARE", default_value_t = 0.0, value_parser = parse_row_cache_share)]
    pub row_cache: f64,
}

/// Parses a `--row-cache` share: 0 to 0.9.
pub fn parse_row_cache_share(text: &str) -> Result<f64, String> {
    let share: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\" is not a number"))?;
    if (0.0..=0.9).contains(&share) {
        Ok(share)
    } else {
        Err(format!("{share}: give 0 to 0.9 of the cache"))
    }
}

/// Parses `on` or `off`.
pub fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("\"{other}\" is neither on nor off")),
    }
}

/// Parses a `--recovery-mode` name.
pub fn parse_recovery_mode(name: &str) -> Result<RecoveryMode, String> {
    RecoveryMode::parse(name).ok_or_else(|| {
        format!(
            "unknown recovery mode \"{name}\" (known: {})",
            RecoveryMode::NAMES.join(", ")
        )
    })
}

/// The engine options, as `--long-name`, in the order [`EngineArgs`] defines them.
pub const ENGINE_OPTIONS: [&str; 19] = [
    "--engine",
    "--sync",
    "--recovery-mode",
    "--direct-io",
    "--write-buffer",
    "--block-cache",
    "--index",
    "--boundary",
    "--sst-size",
    "--convert-at-lsm-bytes",
    "--convert-at-lsm-levels",
    "--scan-gc",
    "--checkpoint-log-bytes",
    "--pool",
    "--page-size",
    "--row-cache",
    "--learned",
    "--leaf-model",
    // Not an option of EngineArgs: each command has its own --db; listed so the table below
    // covers every option an engine-opening command shares.
    "--db",
];

/// Whether `engine` reads engine option `opt` (as `--long-name`), and how a refusal names the
/// engines that do. `None` for an option every engine reads.
pub fn readers_of(opt: &str, engine: EngineKind) -> Option<(bool, &'static str)> {
    use EngineKind as K;
    let shape = engine.shape();
    let lsm = shape == Shape::Lsm;
    let tree = shape == Shape::Tree;
    let (reads, of) = match opt {
        "--recovery-mode" => (
            engine.is_lidb(),
            "lidb's engines (every engine but rocksdb)",
        ),
        "--direct-io" => (
            lsm || tree || engine == K::RocksDb,
            "the LSM engines (lsm, learnedkv, lsm+, lsm+tier), learnedstore, btree and rocksdb",
        ),
        "--write-buffer" | "--block-cache" => (
            lsm || engine == K::RocksDb,
            "the LSM engines (lsm, learnedkv, lsm+, lsm+tier) and rocksdb",
        ),
        "--index" | "--boundary" | "--sst-size" => {
            (lsm, "the LSM engines (lsm, learnedkv, lsm+, lsm+tier)")
        }
        "--convert-at-lsm-bytes" | "--convert-at-lsm-levels" => {
            (engine == K::LearnedKv, "learnedkv")
        }
        "--scan-gc" => (engine.tiering().is_some(), "learnedkv, lsm+ and lsm+tier"),
        "--checkpoint-log-bytes" => (
            engine == K::Finedex || tree,
            "finedex, learnedstore and btree",
        ),
        "--pool" | "--page-size" | "--row-cache" => (tree, "learnedstore and btree"),
        "--learned" | "--leaf-model" => (
            engine == K::LearnedStore,
            "learnedstore (btree is learnedstore with --learned off)",
        ),
        _ => return None,
    };
    Some((reads, of))
}

/// The engine options a command uses; the others it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandUse {
    /// `lidb kv` and `lidb serve`: every engine option.
    Serve,
    /// `lidb repair`: the engine and how new tables are written (--index, --boundary,
    /// --sst-size); it replays nothing live, so the rest do not apply.
    Repair,
    /// `lidb fine serve`: finedex only, and what its durable store reads (--sync,
    /// --recovery-mode, --checkpoint-log-bytes).
    FineServe,
}

impl CommandUse {
    fn name(self) -> &'static str {
        match self {
            CommandUse::Serve => "this command",
            CommandUse::Repair => "lidb repair",
            CommandUse::FineServe => "lidb fine serve",
        }
    }

    fn uses(self, opt: &str) -> bool {
        match self {
            CommandUse::Serve => true,
            CommandUse::Repair => {
                matches!(
                    opt,
                    "--engine" | "--db" | "--index" | "--boundary" | "--sst-size"
                )
            }
            CommandUse::FineServe => matches!(
                opt,
                "--engine" | "--sync" | "--recovery-mode" | "--checkpoint-log-bytes"
            ),
        }
    }
}

impl EngineArgs {
    /// Refuses an engine option the user gave (`given`, as `--long-name`; other options are
    /// passed over) that `cmd` does not use or the engine would ignore, as one line.
    pub fn refuse_ignored(&self, cmd: CommandUse, given: &[String]) -> Result<(), CliError> {
        for opt in given {
            if !ENGINE_OPTIONS.contains(&opt.as_str()) {
                continue;
            }
            if !cmd.uses(opt) {
                return Err(CliError::Usage(format!(
                    "{opt} is not an option of {}, which would ignore it",
                    cmd.name()
                )));
            }
            if let Some((false, of)) = readers_of(opt, self.engine) {
                return Err(CliError::Usage(format!(
                    "{opt} is an option of {of}, not {}, which would ignore it",
                    self.engine
                )));
            }
        }
        Ok(())
    }

    /// The engine configuration these options say, for a store in `dir`; a bad --leaf-model is
    /// one usage line.
    pub fn config(&self, dir: PathBuf) -> Result<EngineConfig, CliError> {
        let mut cfg = EngineConfig::new(dir);
        cfg.sync = self.sync;
        cfg.recovery_mode = self.recovery_mode;
        cfg.direct_io = self.direct_io;
        let lsm = &self.lsm;
        cfg.lsm.memtable_bytes = lsm.write_buffer;
        cfg.lsm.block_cache_bytes = lsm.block_cache;
        cfg.lsm.index = lsm.index;
        cfg.lsm.boundary = lsm.boundary;
        cfg.lsm.sst_size_bytes = lsm.sst_size;
        cfg.tier.convert_at_lsm_bytes = Some(self.tier.convert_at_lsm_bytes);
        cfg.tier.convert_at_lsm_levels = self.tier.convert_at_lsm_levels;
        cfg.tier.scan_gc_ratio = self.tier.scan_gc;
        cfg.set_checkpoint_log_bytes(Some(self.checkpoint.checkpoint_log_bytes));
        let tree = &self.tree;
        cfg.tree.pool_bytes = tree.pool;
        cfg.tree.page_size = tree.page_size;
        cfg.tree.learned_path = tree.learned;
        let model: (Family, u64) = lidb_btree::LearnedOptions::parse_model(&tree.leaf_model)
            .map_err(crate::args::usage("--leaf-model"))?;
        cfg.tree.leaf_model = Some(model);
        cfg.tree.row_cache_share = tree.row_cache;
        Ok(cfg)
    }
}

/// The error opening `engine` in `dir` failed with, one line, and for damage the two ways on
/// (open the intact prefix, or repair).
pub fn open_error(
    engine: EngineKind,
    dir: &std::path::Path,
    e: lidb_engines::EngineError,
) -> CliError {
    // A refused log tail already says which recovery mode opens it; other damage (a table, a
    // manifest record) gets the two ways on here.
    let hint = match &e {
        lidb_engines::EngineError::Corruption { detail, .. }
            if engine.is_lidb() && !detail.contains("--recovery-mode") =>
        {
            format!(
                " (`--recovery-mode point-in-time` opens the intact prefix of a damaged log and \
             saves the rest under {}/lost/; `lidb repair --engine {engine} --db {}` rebuilds \
             the store from what reads cleanly)",
                dir.display(),
                dir.display()
            )
        }
        _ => String::new(),
    };
    CliError::Open {
        what: format!("cannot open engine {engine} in {}", dir.display()),
        error: e,
        hint,
    }
}
