//! `lidb repair`: rebuilds a store that does not open from what reads cleanly (lidb_lsm::repair
//! for lsm, lidb_kv::repair for the tiered engines, `FineStore::repair` for finedex,
//! `LearnedStore::repair` for learnedstore and btree), sets aside in DIR/lost/ what does not,
//! and prints what it kept and what it set aside on stdout. LearnedStore's repair cuts a damaged
//! last log at its last good record, rebuilds the learned table from the tree and checkpoints;
//! damage it cannot cut (an earlier log, an LSN gap, the page file) is its open's error.

use std::sync::Arc;

use std::path::PathBuf;

use clap::Args;
use lidb_engines::EngineKind;
use lidb_index::Params;
use lidb_kv::StoreOptions;
use lidb_lsm::{IndexOptions, Options};
use lidb_storage::Storage;
use lidb_storage::fs::FsStorage;

use crate::engine_args::{CommandUse, EngineArgs};
use crate::error::CliError;

/// Options of `lidb repair`: the store and how its new tables are written. It takes the engine
/// options every command takes; of them it uses --engine, --index, --boundary and --sst-size,
/// and refuses the others.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Directory of the store to repair (it must exist).
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
}

pub fn run(a: RepairArgs, given: &[String]) -> Result<(), CliError> {
    a.engine.refuse_ignored(CommandUse::Repair, given)?;
    let engine = a.engine.engine;
    let dir = &a.db;
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--db: {} is not a directory",
            dir.display()
        )));
    }
    if engine == EngineKind::Lsm && dir.join(lidb_kv::manifest::STATE_FILE).exists() {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a tiered store (it has KVSTATE); name its engine \
             (learnedkv, lsm+ or lsm+tier)",
            dir.display()
        )));
    }
    let tree_store = dir.join(lidb_btree::PAGE_FILE_NAME).exists();
    if matches!(engine, EngineKind::LearnedStore | EngineKind::Btree) {
        if !tree_store {
            return Err(CliError::Usage(format!(
                "--db: {} holds no LearnedStore (no {})",
                dir.display(),
                lidb_btree::PAGE_FILE_NAME
            )));
        }
        // The page size comes from the page file; buffered I/O for the one-off repair.
        let mut opts = lidb_btree::LearnedStoreOptions::default();
        opts.tree.direct_io = false;
        print!("{}", lidb_btree::LearnedStore::repair(dir, &opts)?);
        return Ok(());
    }
    if tree_store {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a LearnedStore (it has {}); name its engine (learnedstore or \
             btree)",
            dir.display(),
            lidb_btree::PAGE_FILE_NAME
        )));
    }
    let fine_state = dir.join("FINESTATE").exists();
    if engine == EngineKind::Finedex {
        print!("{}", lidb_fine::FineStore::repair(dir)?);
        return Ok(());
    }
    if fine_state {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a FineStore (it has FINESTATE); name its engine (finedex)",
            dir.display()
        )));
    }
    if engine == EngineKind::RocksDb {
        return Err(CliError::Usage(
            "--engine: lidb repair rebuilds lidb's stores; RocksDB has its own (ldb repair)".into(),
        ));
    }
    let lsm = Options {
        index: IndexOptions {
            family: a.engine.lsm.index.family,
            params: Params::new(a.engine.lsm.boundary),
            level_boundaries: Vec::new(),
            kind: a.engine.lsm.index.kind,
        },
        sst_size_bytes: a.engine.lsm.sst_size,
        ..Options::default()
    };
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    let cfg = a.engine.config(dir.clone())?;
    let tier = engine.tiering().map(|t| lidb_engines::tier_kind(t, &cfg));
    let text = match tier {
        None => lidb_lsm::repair::repair_db(&storage, dir, &lsm)?.to_string(),
        Some(tier) => {
            let opts = StoreOptions {
                lsm,
                tier,
                ..StoreOptions::default()
            };
            lidb_kv::repair::repair_store(&storage, dir, &opts)?.to_string()
        }
    };
    print!("{text}");
    Ok(())
}
