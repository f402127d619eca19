//! The engines `lidb kv` serves: the LSM engine, the tiered store (LearnedKV, lsm+ or
//! lsm+tier), FineStore (finedex), or LearnedStore (learnedstore, and btree: the same tree with
//! the learned path off).

use lidb_bench::engines::drain;
use lidb_btree::{LearnedStore, LearnedStoreOptions};
use lidb_fine::{FineStore, FineStoreOptions};
use lidb_index::{Family, Params};
use lidb_kv::{Store, StoreOptions, TierKind};
use lidb_lsm::{Db, Options};
use serde_json::{Value, json};

use crate::error::CliError;

/// The tier of `engine` ("lsm", "learnedkv", "lsm+" or "lsm+tier"): `None` for the LSM engine.
pub fn tier_of(engine: &str) -> Result<Option<TierKind>, String> {
    match engine {
        "lsm" => Ok(None),
        // FineStore has no tier: `Backend::open` and `lidb repair` handle it before asking.
        "finedex" => Err("finedex is not an LSM engine and has no tier".into()),
        "learnedkv" => Ok(Some(TierKind::Learned {
            family: Family::Plr,
            page_boundary: 2,
            params: Params::new(2),
        })),
        "lsm+" => Ok(Some(TierKind::WriteBack)),
        "lsm+tier" => Ok(Some(TierKind::Lsm)),
        "learnedstore" | "btree" => Err(format!("{engine} is not an LSM engine and has no tier")),
        other => Err(format!(
            "unknown engine \"{other}\" (known: lsm, learnedkv, lsm+, lsm+tier, finedex, \
             learnedstore, btree)"
        )),
    }
}

/// An open engine behind the line protocol.
pub enum Backend {
    Lsm(Db),
    Tiered(Store),
    Fine(Box<FineStore>),
    Tree(Box<LearnedStore>),
}

/// What an engine call failed with: the engine's own error, printed as one line.
type R<T> = Result<T, CliError>;

impl Backend {
    /// Opens `engine` ("lsm", "learnedkv", "lsm+", "lsm+tier", "finedex", "learnedstore" or
    /// "btree") in `dir` with LSM options `lsm`; `convert` is learnedkv's (LSM bytes, LSM
    /// levels) conversion thresholds, (0, 0) for off; `checkpoint_log_bytes` is the automatic
    /// checkpoint threshold of finedex, learnedstore and btree (0 for off; the LSM engines ignore
    /// it, `kv_cmd::refuse_ignored` refuses it given to them); `tree` are LearnedStore's options
    /// (learnedstore and btree only; btree turns the learned path off whatever they say).
    pub fn open(
        engine: &str,
        dir: &std::path::Path,
        lsm: Options,
        convert: (u64, usize),
        checkpoint_log_bytes: u64,
        tree: LearnedStoreOptions,
    ) -> Result<Backend, String> {
        if convert != (0, 0) && engine != "learnedkv" {
            return Err(format!(
                "--convert-at-lsm-bytes and --convert-at-lsm-levels are options of learnedkv, not {engine}"
            ));
        }
        let tiered = |tier| {
            let opts = StoreOptions {
                convert_at_lsm_bytes: convert.0,
                convert_at_lsm_levels: convert.1,
                sync: lsm.sync,
                direct_io: lsm.direct_io,
                lsm: lsm.clone(),
                tier,
                ..StoreOptions::default()
            };
            Store::open(dir, opts).map(Backend::Tiered)
        };
        if engine == "finedex" {
            return open_fine(dir, &lsm, checkpoint_log_bytes);
        }
        if engine == "learnedstore" || engine == "btree" {
            return open_tree(engine, dir, &lsm, checkpoint_log_bytes, tree);
        }
        let opened = match tier_of(engine)? {
            None => Db::open(dir, lsm.clone()).map(Backend::Lsm),
            Some(tier) => tiered(tier),
        };
        opened.map_err(|e| match e {
            lidb_lsm::Error::Corruption { .. } => format!(
                "{e}\n(`--recovery-mode point-in-time` opens the intact \
                 prefix of a damaged log, and `lidb repair --engine {engine} --db {}` rebuilds \
                 the store from what reads cleanly)",
                dir.display()
            ),
            e => e.to_string(),
        })
    }

    /// What the open cut, one `recovery: ...` line per cut (empty when nothing was cut).
    pub fn recovery_report(&self) -> String {
        match self {
            Backend::Lsm(db) => db.recovery_report().to_string(),
            Backend::Tiered(s) => s.recovery_report().to_string(),
            Backend::Fine(s) => s.recovery_report().to_string(),
            Backend::Tree(s) => s.recovery_report().to_string(),
        }
    }

    pub fn put(&self, k: &[u8], v: &[u8]) -> R<()> {
        match self {
            Backend::Lsm(db) => Ok(db.put(k, v)?),
            Backend::Tiered(s) => Ok(s.put(k, v)?),
            Backend::Fine(s) => Ok(s.put(k, v)?),
            Backend::Tree(s) => Ok(s.put(k, v)?),
        }
    }

    pub fn get(&self, k: &[u8]) -> R<Option<Vec<u8>>> {
        match self {
            Backend::Lsm(db) => Ok(db.get(k)?),
            Backend::Tiered(s) => Ok(s.get(k)?),
            Backend::Fine(s) => Ok(s.get(k)),
            Backend::Tree(s) => Ok(s.get(k)?),
        }
    }

    pub fn delete(&self, k: &[u8]) -> R<()> {
        match self {
            Backend::Lsm(db) => Ok(db.delete(k)?),
            Backend::Tiered(s) => Ok(s.delete(k)?),
            Backend::Fine(s) => Ok(s.delete(k).map(|_| ())?),
            Backend::Tree(s) => Ok(s.delete(k).map(|_| ())?),
        }
    }

    /// Calls `each` for up to `limit` entries in `[start, end)`.
    pub fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> R<()> {
        match self {
            Backend::Lsm(db) => drain(&mut db.scan(start, Some(end))?, limit, each)?,
            Backend::Tiered(s) => drain(&mut s.scan(start, Some(end))?, limit, each)?,
            Backend::Fine(s) => {
                let rows = s.scan(start, Some(end), limit);
                for (k, v) in &rows {
                    each(k, v);
                }
                rows.len()
            }
            Backend::Tree(s) => {
                let rows = s.scan(start, Some(end), limit)?;
                for (k, v) in &rows {
                    each(k, v);
                }
                rows.len()
            }
        };
        Ok(())
    }

    pub fn flush(&self) -> R<()> {
        match self {
            Backend::Lsm(db) => Ok(db.flush()?),
            Backend::Tiered(s) => Ok(s.flush()?),
            Backend::Fine(s) => Ok(s.flush()?),
            Backend::Tree(s) => Ok(s.flush()?),
        }
    }

    pub fn compact(&self) -> R<()> {
        match self {
            Backend::Lsm(db) => Ok(db.compact()?),
            Backend::Tiered(s) => Ok(s.compact()?),
            Backend::Fine(_) | Backend::Tree(_) => Err(CliError::Usage(
                "compact is a command of the LSM engines; finedex, learnedstore and btree have \
                 checkpoint"
                    .into(),
            )),
        }
    }

    /// Writes a checkpoint and starts a new log (finedex, learnedstore and btree: for the tree,
    /// its dirty pages written to the page file and the logs it covers removed).
    pub fn checkpoint(&self) -> Result<(), String> {
        match self {
            Backend::Fine(s) => s.checkpoint().map_err(|e| e.to_string()),
            Backend::Tree(s) => s.checkpoint().map_err(|e| e.to_string()),
            _ => Err("checkpoint is a command of finedex, learnedstore and btree".into()),
        }
    }

    /// Runs a GC and returns when it is installed (tiered engines only).
    pub fn gc(&self) -> Result<(), String> {
        match self {
            Backend::Lsm(_) | Backend::Fine(_) | Backend::Tree(_) => {
                Err("gc is a command of the tiered engines (learnedkv, lsm+, lsm+tier)".into())
            }
            Backend::Tiered(s) => s.gc().map_err(|e| e.to_string()),
        }
    }

    /// Runs a range-query-assisted conversion and returns when it is installed (learnedkv only).
    pub fn convert(&self) -> Result<(), String> {
        match self {
            Backend::Lsm(_) | Backend::Fine(_) | Backend::Tree(_) => {
                Err("convert is a command of learnedkv".into())
            }
            Backend::Tiered(s) => s.convert().map_err(|e| e.to_string()),
        }
    }

    pub fn stats(&self) -> Value {
        match self {
            Backend::Lsm(db) => lsm_stats(db),
            Backend::Tree(s) => tree_stats(s),
            Backend::Fine(s) => {
                let st = s.index_stats();
                let b = s.bucket_stats();
                json!({
                    "keys": b.keys, "buckets": b.buckets, "bucket_mean": b.mean(),
                    "bucket_largest": b.largest, "layers": b.layers, "layers_deep": b.deepest,
                    "layers_index_heap_bytes": b.index_heap_bytes,
                    "index_top_nodes": st.top_nodes, "index_small_models": st.small_models,
                    "index_load_factor": st.load_factor,
                    "level_bin_retrains": st.level_bin_retrains,
                    "model_retrains": st.model_retrains, "index_heap_bytes": st.heap_bytes,
                })
            }
            Backend::Tiered(s) => {
                let st = s.stats();
                let sp = s.space();
                json!({
                    "reads_from_lsm": st.reads_from_lsm, "reads_from_tier": st.reads_from_tier,
                    "reads_missed": st.reads_missed, "lsm_skipped": st.lsm_skipped, "gcs": st.gcs,
                    "conversions": st.conversions,
                    "live_bytes_estimate": st.live_bytes_estimate,
                    "lsm_bytes": sp.lsm_bytes, "key_list_bytes": sp.key_list_bytes,
                    "model_bytes": sp.model_bytes, "vlog_bytes": sp.vlog_bytes,
                })
            }
        }
    }

    pub fn close(self) -> R<()> {
        match self {
            Backend::Lsm(db) => Ok(db.close()?),
            Backend::Tiered(s) => Ok(s.close()?),
            Backend::Fine(s) => Ok((*s).close()?),
            Backend::Tree(s) => Ok((*s).close()?),
        }
    }
}

/// Opens FineStore in `dir` with the `sync` and recovery mode of `lsm` (its other options are
/// the LSM's and do not apply), checkpointing by itself every `checkpoint_log_bytes` of log.
fn open_fine(
    dir: &std::path::Path,
    lsm: &Options,
    checkpoint_log_bytes: u64,
) -> Result<Backend, String> {
    let opts = FineStoreOptions {
        sync: lsm.sync,
        recovery_mode: lsm.recovery_mode,
        checkpoint_log_bytes,
        ..FineStoreOptions::default()
    };
    FineStore::open(dir, opts)
        .map(|s| Backend::Fine(Box::new(s)))
        .map_err(|e| match e {
            lidb_lsm::Error::Corruption { .. } => format!(
                "{e}\n(`--recovery-mode point-in-time` opens the intact prefix of a damaged log, \
                 and `lidb repair --engine finedex --db {}` rebuilds the store from what reads \
                 cleanly)",
                dir.display()
            ),
            e => e.to_string(),
        })
}

/// Opens LearnedStore in `dir` with `opts` (the learned path off for btree), the `sync` and
/// recovery mode of `lsm` (its other options are the LSM's and do not apply), checkpointing by
/// itself every `checkpoint_log_bytes` of log.
fn open_tree(
    engine: &str,
    dir: &std::path::Path,
    lsm: &Options,
    checkpoint_log_bytes: u64,
    mut opts: LearnedStoreOptions,
) -> Result<Backend, String> {
    opts.wal.sync = lsm.sync;
    opts.wal.recovery_mode = lsm.recovery_mode;
    opts.wal.checkpoint_log_bytes = checkpoint_log_bytes;
    if engine == "btree" {
        opts.learned.enabled = false;
    }
    LearnedStore::open(dir, &opts)
        .map(|s| Backend::Tree(Box::new(s)))
        .map_err(|e| match e {
            lidb_btree::Error::Corruption { .. } => format!(
                "{e}\n(`--recovery-mode point-in-time` opens the intact prefix of a damaged log \
                 and saves the rest under {}/lost/; `lidb repair --engine {engine}` does that \
                 and rebuilds the learned table)",
                dir.display()
            ),
            e => e.to_string(),
        })
}

/// LearnedStore's counters: the pool, the page device's I/O, the file's slots.
fn tree_stats(s: &LearnedStore) -> Value {
    let st = s.stats();
    json!({
        "pool_hits": st.pool.hits, "pool_misses": st.pool.misses,
        "pool_write_backs": st.pool.write_backs, "pool_evictions": st.pool.evictions,
        "pool_cooled": st.pool.cooled, "pool_cooling_rehits": st.pool.cooling_rehits,
        "pool_frames_used": st.pool.frames_used, "pool_frames": st.pool.frames,
        "device_reads": st.io.reads, "device_writes": st.io.writes,
        "device_bytes_read": st.io.bytes_read, "device_bytes_written": st.io.bytes_written,
        "device_syncs": st.io.syncs,
        "file_slots": st.file_slots, "file_slots_used": st.file_slots_used,
    })
}

fn lsm_stats(db: &Db) -> Value {
    let s = db.stats();
    let levels: Vec<_> = s
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| {
            json!({"level": l.level, "files": l.files, "bytes": l.bytes, "entries": l.entries,
                   "index_bytes": l.index_bytes})
        })
        .collect();
    json!({
        "levels": levels,
        "memory": {"index_bytes": s.memory.index_bytes, "filter_bytes": s.memory.filter_bytes,
                   "cache_bytes": s.memory.cache_bytes, "memtable_bytes": s.memory.memtable_bytes},
        "lookups": s.lookups,
        "tables_probed": s.read.tables_probed,
        "filter_negatives": s.read.filter_negatives,
        "data_reads": s.read.data_reads,
        "bytes_read": s.read.bytes_read,
        "flushes": s.compaction.flushes,
        "compactions": s.compaction.compactions,
        "last_sequence": s.last_sequence,
    })
}
