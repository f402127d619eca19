//! The LearnedStore paper's experiments (section V) over paged B+-trees:
//! `lidb bench btree --experiment memory|partial|cold|writes`.
//!
//! Layout, one concept per file:
//! - [`store`]: the [`PagedStore`] trait every engine implements, and its error.
//! - [`engines`]: which engines a build can run and how each is opened (the registration point
//!   for the LearnedStore engine's "learnedstore" and "btree").
//! - [`config`]: the run's [`Config`] and its checks; values derived from their keys.
//! - [`measure`]: the timed loops and the startup time (time to 90% of the peak).
//! - [`experiments`]: the four experiments, from a config to a [`Report`].
//! - [`rows`]: the output rows, JSON lines and the table.
//! - [`learned_peer`]: LearnedStore (lidb-btree) as "learnedstore" and "btree".
//! - [`memcap`] and [`oscache`]: the memory cgroup and the page-cache drop that the peers use.
//! - [`reference`]: a `BTreeMap` for the harness's own tests.
//!
//! The peers redb (over an `O_DIRECT` backend) and lmdb (in a memory cgroup of the pool's size)
//! live in the lidb-peers crate and reach the runners through [`crate::peers::Peers`].
//!
//! Everything runs on the calling thread. A wrong value read stops the run ([`Error::WrongValue`]).

pub mod config;
pub mod engines;
pub mod experiments;
pub mod learned_peer;
pub mod measure;
pub mod memcap;
pub mod oscache;
pub mod reference;
pub mod rows;
pub mod store;

#[cfg(test)]
mod tests;

use std::fmt;

pub use config::{Config, Dataset, Experiment};
pub use engines::{OpenStore, StoreSetup, btree_engines, check_engines, open_engine};
pub use experiments::{Report, run};
pub use rows::Row;
pub use store::{PagedStore, StoreError};

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An engine operation failed.
    Store { engine: String, source: StoreError },
    /// A read got no value or one not of its key: a bug in the engine.
    WrongValue {
        engine: String,
        key: u64,
        detail: String,
    },
    /// A known engine this binary does not link (the peers are in `lidb-bench`, not `lidb`).
    NotBuilt(String),
    /// A configuration that cannot run; the message names the option.
    Invalid(String),
}

impl Error {
    /// Maps a store error of `engine`.
    pub fn store(engine: &str) -> impl Fn(StoreError) -> Error + '_ {
        move |source| Error::Store {
            engine: engine.to_string(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Store { engine, source } => write!(f, "{engine}: {source}"),
            Error::WrongValue {
                engine,
                key,
                detail,
            } => write!(f, "wrong answer from {engine} for key {key}: {detail}"),
            Error::NotBuilt(name) => write!(
                f,
                "engine {name} is not built into this binary (the peers redb and lmdb run in \
                 lidb-bench: cargo build --release -p lidb-bench-bin)"
            ),
            Error::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for Error {}
