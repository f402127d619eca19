//! `lidb repair`: rebuilds a store that does not open from what reads cleanly (lidb_lsm::repair
//! for lsm, lidb_kv::repair for the tiered engines, `FineStore::repair` for finedex,
//! `LearnedStore::repair` for learnedstore and btree), sets aside in DIR/lost/ what does not,
//! and prints what it kept and what it set aside on stdout. LearnedStore's repair cuts a damaged
//! last log at its last good record, rebuilds the learned table from the tree and checkpoints;
//! damage it cannot cut (an earlier log, an LSN gap, the page file) is its open's error.

use std::sync::Arc;

use clap::Args;
use lidb_kv::StoreOptions;
use lidb_lsm::storage::Storage;
use lidb_lsm::storage::fs::FsStorage;

use crate::error::CliError;
use crate::kv_backend::tier_of;
use crate::kv_cmd::StoreArgs;

/// Options of `lidb repair`: the store and how its new tables are written (as `lidb kv`).
#[derive(Debug, Args)]
pub struct RepairArgs {
    #[command(flatten)]
    store: StoreArgs,
}

pub fn run(a: RepairArgs, given: &[String]) -> Result<(), CliError> {
    crate::kv_cmd::refuse_ignored(&a.store.engine, given)?;
    let dir = &a.store.db;
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--db: {} is not a directory",
            dir.display()
        )));
    }
    if a.store.engine == "lsm" && dir.join(lidb_kv::manifest::STATE_FILE).exists() {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a tiered store (it has KVSTATE); name its engine \
             (learnedkv, lsm+ or lsm+tier)",
            dir.display()
        )));
    }
    let tree_store = dir.join(lidb_btree::PAGE_FILE_NAME).exists();
    if a.store.engine == "learnedstore" || a.store.engine == "btree" {
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
    if a.store.engine == "finedex" {
        print!("{}", lidb_fine::FineStore::repair(dir)?);
        return Ok(());
    }
    if fine_state {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a FineStore (it has FINESTATE); name its engine (finedex)",
            dir.display()
        )));
    }
    let lsm = a.store.lsm_options()?;
    let storage: Arc<dyn Storage> = Arc::new(FsStorage);
    let text = match tier_of(&a.store.engine).map_err(CliError::Usage)? {
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
