//! `lidb kv`: a line protocol over stdin/stdout for a database, one command per line. Every
//! answer ends with a line of its own and stdout is flushed before the next command is read, so a
//! driver can talk to it interactively. Errors are `ERR <message>` lines; the process keeps
//! serving. Keys and values are tokens without spaces; `\xNN` escapes any byte, and output escapes
//! spaces, backslashes and non-printable bytes the same way.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use lidb_lsm::{IndexOptions, Options, RecoveryMode};

use crate::error::{CliError, io};
use crate::kv_backend::Backend;

/// The options that say which store a command works on and how it writes tables: shared by
/// `lidb kv` and `lidb repair`.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Database directory (`lidb kv` creates it if missing).
    #[arg(long)]
    pub db: PathBuf,
    /// The engine: lsm (values in the LSM), learnedkv (LSM plus a learned tier built by GC),
    /// lsm+ (values in a value log, every pointer in one LSM, GC writes them back: the paper's
    /// RocksDB+), lsm+tier (learnedkv with an LSM in place of the learned index), finedex
    /// (FineStore: in memory over FINEdex, a log and checkpoints; of the options below it takes
    /// only --sync, --recovery-mode and its own --checkpoint-log-bytes, and the others are
    /// refused), learnedstore (LearnedStore: a buffer-managed B+-tree under a write-ahead log,
    /// its leaves also reached through a learned model; it takes --sync, --recovery-mode,
    /// --checkpoint-log-bytes, --direct-io, --pool, --page-size, --learned and --leaf-model) or
    /// btree (learnedstore with the learned path off: the same options but --learned and
    /// --leaf-model).
    #[arg(long, default_value = "lsm")]
    pub engine: String,
    /// Index of new tables: a family (pgm, rmi, ...), FAMILY+keys (mapped keys retained), or an
    /// unclustered alex, lipp, dili or lits (see `lidb bench lsm --help`).
    #[arg(long, default_value = "pgm")]
    pub index: String,
    /// Position boundary B of new tables' indexes.
    #[arg(long, default_value_t = 16)]
    pub boundary: u64,
    /// Target SSTable size (4MiB to 128MiB).
    #[arg(long, default_value = "64MiB", value_parser = crate::size::parse_size)]
    pub sst_size: u64,
}

impl StoreArgs {
    /// LSM options with these tables' index and size (the rest default).
    pub fn lsm_options(&self) -> Result<Options, CliError> {
        let choice = lidb_bench::lsm::IndexChoice::parse(&self.index)
            .map_err(|e| CliError::Usage(format!("--index: {e}")))?;
        Ok(Options {
            index: IndexOptions {
                family: choice.family,
                params: lidb_index::Params::new(self.boundary),
                level_boundaries: Vec::new(),
                kind: choice.kind,
            },
            sst_size_bytes: self.sst_size,
            ..Options::default()
        })
    }
}

#[derive(Debug, Args)]
pub struct KvArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Make every write durable before answering OK.
    #[arg(long)]
    sync: bool,
    /// O_DIRECT for table reads (learnedstore, btree: for the page file).
    #[arg(long)]
    direct_io: bool,
    /// Memtable size that triggers a flush (e.g. 64MiB, 256KiB).
    #[arg(long, default_value = "64MiB", value_parser = crate::size::parse_size)]
    write_buffer: u64,
    /// learnedkv: convert in the background (no values moved) when the LSM's tables reach this
    /// size (e.g. 256MiB); 0 = off.
    #[arg(long, default_value = "0", value_parser = crate::size::parse_size)]
    convert_at_lsm_bytes: u64,
    /// learnedkv: convert in the background when the LSM has this many non-empty levels; 0 = off.
    #[arg(long, default_value_t = 0)]
    convert_at_lsm_levels: usize,
    /// What the open does with a bad record in a log (WAL, manifest, value log):
    /// tolerate-torn-tail cuts a crash's torn tail and refuses damage (a record that fails its
    /// checksum with intact records after it); point-in-time keeps the intact prefix before any
    /// bad record, drops the rest and saves it under DIR/lost/; absolute refuses any bad record.
    /// Whatever is cut is printed on stderr before serving.
    #[arg(long, default_value = "tolerate-torn-tail", value_parser = parse_recovery_mode)]
    recovery_mode: RecoveryMode,
    /// finedex, learnedstore, btree: checkpoint by itself, in a background thread, each time
    /// the log holds this many bytes since the last checkpoint (e.g. 64MiB, 256KiB), which
    /// bounds the log and the next open's replay; 0 = only on the `checkpoint` command (and, for
    /// learnedstore and btree, on close).
    #[arg(long, default_value = "64MiB", value_parser = crate::size::parse_size)]
    checkpoint_log_bytes: u64,
    /// learnedstore, btree: bytes of the buffer pool, the tree's pages in memory (e.g. 8MiB,
    /// 1GiB; a smaller pool than 16 pages is raised to 16). The default is the LSM engines' default block cache, so the
    /// read caches match; the LSMs also hold a 64MiB memtable, which the tree has no
    /// counterpart of.
    #[arg(long, default_value = "8MiB", value_parser = crate::size::parse_size)]
    pool: u64,
    /// learnedstore, btree: page size of a new page file (a power of two from 4KiB to 64KiB);
    /// an existing file must be opened with the page size it was created with.
    #[arg(long, default_value = "4KiB", value_parser = crate::size::parse_size)]
    page_size: u64,
    /// learnedstore: reach leaves through the learned model (on) or only by walking the tree
    /// (off, which is the btree engine).
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    learned: bool,
    /// learnedstore: the model over the leaves' boundary keys, FAMILY/B: any lidb-index family
    /// (fp, plr, fiting, pgm, rs, rmi, lpa, ...) and its error bound in mapping-table slots
    /// (at least 2). The default, rs/32, is the authors' code's RadixSpline.
    #[arg(long, default_value = "rs/32")]
    leaf_model: String,
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

/// The LSM engines: tables, a memtable, table reads.
const LSM_ENGINES: [&str; 4] = ["lsm", "learnedkv", "lsm+", "lsm+tier"];
/// LearnedStore's two engines.
const TREE_ENGINES: [&str; 2] = ["learnedstore", "btree"];

/// The engines that read option `opt` (as `--long-name`) and how an error names them; `None`
/// for options every engine reads (--db, --engine, --sync, --recovery-mode).
fn readers_of(opt: &str) -> Option<(&'static [&'static str], &'static str)> {
    const LSM: &[&str] = &LSM_ENGINES;
    const LSM_AND_TREE: &[&str] = &[
        "lsm",
        "learnedkv",
        "lsm+",
        "lsm+tier",
        "learnedstore",
        "btree",
    ];
    const LOGGED: &[&str] = &["finedex", "learnedstore", "btree"];
    const TREE: &[&str] = &TREE_ENGINES;
    match opt {
        "--index" | "--boundary" | "--sst-size" | "--write-buffer" => {
            Some((LSM, "the LSM engines (lsm, learnedkv, lsm+, lsm+tier)"))
        }
        "--direct-io" => Some((
            LSM_AND_TREE,
            "the LSM engines (lsm, learnedkv, lsm+, lsm+tier), learnedstore and btree",
        )),
        "--convert-at-lsm-bytes" | "--convert-at-lsm-levels" => Some((&["learnedkv"], "learnedkv")),
        "--checkpoint-log-bytes" => Some((LOGGED, "finedex, learnedstore and btree")),
        "--pool" | "--page-size" => Some((TREE, "learnedstore and btree")),
        "--learned" | "--leaf-model" => Some((
            &["learnedstore"],
            "learnedstore (btree is learnedstore with --learned off)",
        )),
        _ => None,
    }
}

/// Refuses an option the user gave (`given`, as `--long-name`) that `engine` would ignore, with
/// an error naming the option and the engine. Options left to their defaults never trip it, nor
/// do options given to an unknown engine (opening it names the known ones).
pub fn refuse_ignored(engine: &str, given: &[String]) -> Result<(), CliError> {
    let known =
        LSM_ENGINES.contains(&engine) || TREE_ENGINES.contains(&engine) || engine == "finedex";
    for opt in given {
        let Some((readers, of)) = readers_of(opt) else {
            continue;
        };
        if known && !readers.contains(&engine) {
            return Err(CliError::Usage(format!(
                "{opt} is an option of {of}, not {engine}, which would ignore it"
            )));
        }
    }
    Ok(())
}

/// LearnedStore's options from the arguments (the log's `sync`, recovery mode and checkpoint
/// threshold are set by `Backend::open`, from the LSM options as for finedex).
fn tree_options(a: &KvArgs) -> Result<lidb_btree::LearnedStoreOptions, CliError> {
    let page_size = usize::try_from(a.page_size)
        .map_err(|_| CliError::Usage(format!("--page-size: {} is too large", a.page_size)))?;
    let mut opts = lidb_btree::LearnedStoreOptions::default();
    opts.tree.page_size = page_size;
    opts.tree.pool_bytes = a.pool;
    opts.tree.direct_io = a.direct_io;
    opts.learned.enabled = a.learned;
    (opts.learned.family, opts.learned.error_bound) =
        lidb_btree::LearnedOptions::parse_model(&a.leaf_model)
            .map_err(crate::args::usage("--leaf-model"))?;
    Ok(opts)
}

pub fn run(a: KvArgs, given: &[String]) -> Result<(), CliError> {
    refuse_ignored(&a.store.engine, given)?;
    let opts = Options {
        sync: a.sync,
        direct_io: a.direct_io,
        write_buffer_bytes: a.write_buffer,
        recovery_mode: a.recovery_mode,
        ..a.store.lsm_options()?
    };
    let convert = (a.convert_at_lsm_bytes, a.convert_at_lsm_levels);
    let db = Backend::open(
        &a.store.engine,
        &a.store.db,
        opts,
        convert,
        a.checkpoint_log_bytes,
        tree_options(&a)?,
    )
    .map_err(CliError::Usage)?;
    eprint!("{}", db.recovery_report());
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(io("stdin"))?;
        let answer = match execute(&db, &line) {
            Ok(text) => text,
            Err(msg) => format!("ERR {}\n", msg.replace('\n', " ")),
        };
        out.write_all(answer.as_bytes()).map_err(io("stdout"))?;
        out.flush().map_err(io("stdout"))?;
    }
    db.close()
}

/// Runs one command line; the answer includes its final newline.
fn execute(db: &Backend, line: &str) -> Result<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let e = |err: CliError| err.to_string();
    match words.as_slice() {
        [] => Err("empty command".into()),
        ["put", k, v] => {
            db.put(&unescape(k)?, &unescape(v)?).map_err(e)?;
            Ok("OK\n".into())
        }
        ["get", k] => match db.get(&unescape(k)?).map_err(e)? {
            Some(v) => Ok(format!("{}\n", escape(&v))),
            None => Ok("(nil)\n".into()),
        },
        ["del", k] => {
            db.delete(&unescape(k)?).map_err(e)?;
            Ok("OK\n".into())
        }
        ["scan", start, end, rest @ ..] => {
            let limit = match rest {
                [] => usize::MAX,
                [l] => l
                    .parse::<usize>()
                    .map_err(|_| format!("bad LIMIT \"{l}\""))?,
                _ => return Err("usage: scan START END [LIMIT]".into()),
            };
            let (start, end) = (unescape(start)?, unescape(end)?);
            let mut text = String::new();
            db.scan(&start, &end, limit, &mut |k, v| {
                text.push_str(&format!("{} {}\n", escape(k), escape(v)));
            })
            .map_err(e)?;
            text.push_str("(end)\n");
            Ok(text)
        }
        ["flush"] => {
            db.flush().map_err(e)?;
            Ok("OK\n".into())
        }
        ["compact"] => {
            db.compact().map_err(e)?;
            Ok("OK\n".into())
        }
        ["gc"] => {
            db.gc()?;
            Ok("OK\n".into())
        }
        ["convert"] => {
            db.convert()?;
            Ok("OK\n".into())
        }
        ["checkpoint"] => {
            db.checkpoint()?;
            Ok("OK\n".into())
        }
        ["stats"] => Ok(format!("{}\n", db.stats())),
        [cmd, ..] => Err(format!(
            "unknown command or wrong arguments: \"{cmd}\" (commands: put K V, get K, del K, scan START END [LIMIT], flush, compact, gc, convert, checkpoint, stats)"
        )),
    }
}

/// Decodes `\xNN` escapes.
pub fn unescape(token: &str) -> Result<Vec<u8>, String> {
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'\\' {
            let hex = bytes
                .get(i + 1..i + 4)
                .filter(|h| h.first() == Some(&b'x'))
                .and_then(|h| std::str::from_utf8(h.get(1..)?).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad escape in \"{token}\" (use \\xNN)"))?;
            out.push(hex);
            i += 4;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Printable ASCII except space and backslash as is; everything else as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)), Ok(all));
        assert_eq!(escape(b"a b\\"), "a\\x20b\\x5c");
        assert!(unescape("\\x4").is_err());
        assert!(unescape("\\q41").is_err());
    }
    /// `--checkpoint-log-bytes` defaults to FineStore's own default.
    #[test]
    fn checkpoint_log_bytes_defaults_to_finestores() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            kv: KvArgs,
        }
        let parsed = <Cli as clap::Parser>::try_parse_from(["lidb", "--db", "d"]);
        let Ok(cli) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(
            cli.kv.checkpoint_log_bytes,
            lidb_fine::FineStoreOptions::DEFAULT_CHECKPOINT_LOG_BYTES
        );
    }
}
