//! Which engines `lidb bench btree` can run, and how each is opened: the one registration point.
//!
//! The LearnedStore engine (crate lidb-btree) registers here as two engines, "learnedstore"
//! (learned path on) and "btree" (learned path off), so one run compares them, and as
//! "learnedstore:FAMILY/B" (the learned path with another leaf model: a sweep of models in one
//! run). The third-party peers (redb and lmdb, crate lidb-peers) follow them when the binary
//! registers them in its [`Peers`]; the lean `lidb` binary has none. To add a lidb engine:
//! implement [`PagedStore`] for it, add its name to [`btree_engines`] and a match arm to
//! [`open_engine`]; a third-party one goes to lidb-peers as a [`crate::peers::StorePeer`].
//! [`Error::NotBuilt`] stays for a known name a build leaves out.

use std::path::PathBuf;

use super::Error;
use super::learned_peer::{self, LearnedPeer};
use super::store::PagedStore;
use crate::peers::{Peers, STORE_PEERS};

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

/// The engines this build can run with `peers`, in the default order of a run.
pub fn btree_engines(peers: &Peers) -> Vec<&'static str> {
    let mut names = vec![learned_peer::LEARNED, learned_peer::PLAIN];
    names.extend(peers.stores.iter().map(|s| s.name));
    names
}

/// Every engine name `--engine` accepts, built or not.
pub fn known_engines() -> Vec<&'static str> {
    let mut names = LEARNED_ENGINES.to_vec();
    names.extend(STORE_PEERS);
    names
}

/// Checks `names` before a run: each must be known and built.
pub fn check_engines(peers: &Peers, names: &[String]) -> Result<(), Error> {
    let built = btree_engines(peers);
    for name in names {
        if let Some(model) = learned_peer::learned_of(name) {
            model.map_err(|e| Error::Invalid(format!("engine '{name}': {e}")))?;
            continue;
        }
        if known_engines().contains(&name.as_str()) && !built.contains(&name.as_str()) {
            return Err(Error::NotBuilt(name.clone()));
        }
        if !built.contains(&name.as_str()) {
            return Err(unknown(name));
        }
    }
    if names.is_empty() {
        return Err(Error::Invalid("--engine: no engine given".into()));
    }
    Ok(())
}

fn unknown(name: &str) -> Error {
    Error::Invalid(format!(
        "unknown engine '{name}'; known: {}",
        known_engines().join(", ")
    ))
}

/// A fresh, empty engine `name` set up by `setup`, lidb's own or one of `peers`.
pub fn open_engine(
    peers: &Peers,
    name: &str,
    setup: &StoreSetup,
) -> Result<Box<dyn PagedStore>, Error> {
    if let Some(model) = learned_peer::learned_of(name) {
        let model = model.map_err(|e| Error::Invalid(format!("engine '{name}': {e}")))?;
        return Ok(Box::new(
            LearnedPeer::create(&setup.dir, setup.pool_bytes, Some(model))
                .map_err(Error::store(name))?,
        ));
    }
    if name == learned_peer::PLAIN {
        return Ok(Box::new(
            LearnedPeer::create(&setup.dir, setup.pool_bytes, None).map_err(Error::store(name))?,
        ));
    }
    if let Some(peer) = peers.store(name) {
        return (peer.open)(setup).map_err(Error::store(name));
    }
    if known_engines().contains(&name) {
        return Err(Error::NotBuilt(name.to_string()));
    }
    Err(unknown(name))
}
