//! `lidb repair`: rebuilds a store that does not open from what reads cleanly (lidb_lsm::repair
//! for lsm, lidb_kv::repair for the tiered engines, `FineStore::repair` for finedex), sets aside
//! in DIR/lost/ what does not, and prints what it kept and what it set aside on stdout.
//! LearnedStore (learnedstore, btree) has no repair yet: it is refused with what to do instead.

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
    if a.store.engine == "learnedstore" || a.store.engine == "btree" {
        return Err(CliError::Usage(format!(
            "--engine: lidb repair does not rebuild {engine} stores yet; open it with `lidb kv \
             --engine {engine} --db {dir} --recovery-mode point-in-time`, which keeps the intact \
             prefix of a damaged log and saves the rest under {dir}/lost/",
            engine = a.store.engine,
            dir = dir.display()
        )));
    }
    if dir.join(lidb_btree::PAGE_FILE_NAME).exists() {
        return Err(CliError::Usage(format!(
            "--engine: {} holds a LearnedStore (it has {}), which lidb repair does not rebuild \
             yet; see `lidb kv --engine learnedstore --recovery-mode point-in-time`",
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
