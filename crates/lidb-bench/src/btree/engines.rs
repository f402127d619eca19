//! Which engines `lidb bench btree` can run, and how each is opened: the one registration point.
//!
//! The LearnedStore engine (crate lidb-btree) registers here as two engines, "learnedstore"
//! (learned path on) and "btree" (learned path off), so one run compares them, and as
//! "learnedstore:FAMILY/B" (the learned path with another leaf model: a sweep of models in one
//! run); the peers redb and lmdb follow. To add an engine: implement [`PagedStore`] for it, add its name to
//! [`btree_engines`] and a match arm to [`open_engine`]. [`Error::NotBuilt`] stays for a known
//! name a build leaves out.

use std::path::PathBuf;

use super::Error;
use super::learned_peer::{self, LearnedPeer};
use super::lmdb_peer::{self, LmdbStore};
use super::redb_peer::{self, RedbStore};
use super::store::PagedStore;

/// The LearnedStore engine's two names: learned path on, and off.
pub const LEARNED_ENGINES: [&str; 2] = ["learnedstore", "btree"];

/// Everything an engine needs to be created.
#[derive(Debug, Clone)]
pub struct StoreSetup {
    /// A directory of the engine's own (created if missing; old contents may be replaced).
    pub dir: PathBuf,
    /// The pool (cache) the engine may use.
    pub pool_bytes: u64,
    /// Key and value bytes the run will load, to size files that need it (LMDB's map).
    pub data_bytes: u64,
}

/// How the runners get a fresh, empty engine by name (tests pass the reference store).
pub type OpenStore<'a> = &'a dyn Fn(&str, &StoreSetup) -> Result<Box<dyn PagedStore>, Error>;

/// The engines this build can run, in the default order of a run.
pub fn btree_engines() -> Vec<&'static str> {
    vec![
        learned_peer::LEARNED,
        learned_peer::PLAIN,
        redb_peer::NAME,
        lmdb_peer::NAME,
    ]
}

/// Every engine name `--engine` accepts, built or not.
pub fn known_engines() -> Vec<&'static str> {
    let mut names = LEARNED_ENGINES.to_vec();
    names.extend(btree_engines());
    names
}

/// Checks `names` before a run: each must be known and built.
pub fn check_engines(names: &[String]) -> Result<(), Error> {
    let built = btree_engines();
    for name in names {
        if let Some(model) = learned_peer::learned_of(name) {
            model.map_err(|e| Error::Invalid(format!("engine '{name}': {e}")))?;
            continue;
        }
        if LEARNED_ENGINES.contains(&name.as_str()) && !built.contains(&name.as_str()) {
            return Err(Error::NotBuilt(name.clone()));
        }
        if !built.contains(&name.as_str()) {
            return Err(Error::Invalid(format!(
                "unknown engine '{name}'; known: {}",
                known_engines().join(", ")
            )));
        }
    }
    if names.is_empty() {
        return Err(Error::Invalid("--engine: no engine given".into()));
    }
    Ok(())
}

/// A fresh, empty engine `name` set up by `setup`.
pub fn open_engine(name: &str, setup: &StoreSetup) -> Result<Box<dyn PagedStore>, Error> {
    if let Some(model) = learned_peer::learned_of(name) {
        let model = model.map_err(|e| Error::Invalid(format!("engine '{name}': {e}")))?;
        return Ok(Box::new(
            LearnedPeer::create(&setup.dir, setup.pool_bytes, Some(model))
                .map_err(Error::store(name))?,
        ));
    }
    let store: Box<dyn PagedStore> = match name {
        learned_peer::PLAIN => Box::new(
            LearnedPeer::create(&setup.dir, setup.pool_bytes, None).map_err(Error::store(name))?,
        ),
        redb_peer::NAME => {
            Box::new(RedbStore::create(&setup.dir, setup.pool_bytes).map_err(Error::store(name))?)
        }
        lmdb_peer::NAME => {
            // Room for the records three times over (B-tree pages half full after splits, and
            // the inserts of `writes`), at least 64 MiB.
            let map = (setup.data_bytes.saturating_mul(3)).max(64 << 20);
            Box::new(
                LmdbStore::create(&setup.dir, setup.pool_bytes, map).map_err(Error::store(name))?,
            )
        }
        other if LEARNED_ENGINES.contains(&other) => {
            return Err(Error::NotBuilt(other.to_string()));
        }
        other => {
            return Err(Error::Invalid(format!(
                "unknown engine '{other}'; known: {}",
                known_engines().join(", ")
            )));
        }
    };
    Ok(store)
}
