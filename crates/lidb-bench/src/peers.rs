//! [`Peers`]: the one registration point for what a binary links beyond lidb's own
//! implementations: third-party concurrent indexes (`lidb bench concurrent --index`), paged
//! stores (`lidb bench btree --engine`) and a counting global allocator. The lean `lidb` binary
//! passes [`Peers::none`]; the `lidb-bench` binary (package lidb-bench-bin) passes lidb-peers'
//! peers and its allocator, so the server process never links redb, LMDB, congee, scc or
//! crossbeam-skiplist.
//!
//! The names of the peers lidb-peers registers are listed here too ([`INDEX_PEERS`],
//! [`STORE_PEERS`]), so a binary without them can tell a peer from a typo and say where the peer
//! lives; lidb-peers' tests keep the lists equal to what it registers.
//!
//! Built once at startup on the main thread, then only read.

use crate::btree::{PagedStore, StoreError, StoreSetup};
use crate::concurrent::{AllocCounter, IndexKind};

/// The concurrent-index peers lidb-peers registers, by name.
pub const INDEX_PEERS: [&str; 4] = ["skipmap", "scc-tree", "congee", "li+delta"];

/// The paged-store peers lidb-peers registers, by name.
pub const STORE_PEERS: [&str; 2] = ["redb", "lmdb"];

/// Opens a fresh, empty store set up by a [`StoreSetup`].
pub type OpenFn = fn(&StoreSetup) -> Result<Box<dyn PagedStore>, StoreError>;

/// A paged store peer of `lidb bench btree`: its name in `--engine` and rows, and how to open it.
#[derive(Debug, Clone, Copy)]
pub struct StorePeer {
    pub name: &'static str,
    pub open: OpenFn,
}

/// What a binary brings beyond lidb's own implementations (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// Concurrent indexes, after lidb's own in `--index all`.
    pub indexes: Vec<IndexKind>,
    /// Paged stores, after lidb's own in `--engine all`.
    pub stores: Vec<StorePeer>,
    /// The binary's counting global allocator: measures an index's bulk load.
    pub alloc_counter: Option<AllocCounter>,
}

impl Peers {
    /// No peers and the system allocator: the lean `lidb` binary.
    pub fn none() -> Peers {
        Peers::default()
    }

    /// Every concurrent index this binary can run: lidb's own, then the registered peers.
    pub fn all_indexes(&self) -> Vec<IndexKind> {
        let mut all = IndexKind::OWN.to_vec();
        all.extend(self.indexes.iter().copied());
        all
    }

    /// The registered store peer `name`.
    pub fn store(&self, name: &str) -> Option<&StorePeer> {
        self.stores.iter().find(|s| s.name == name)
    }

    /// Whether `name` is a known peer (index or store) that this binary did not register.
    pub fn lacks(&self, name: &str) -> bool {
        let registered =
            self.indexes.iter().any(|k| k.name() == name) || self.store(name).is_some();
        !registered && (INDEX_PEERS.contains(&name) || STORE_PEERS.contains(&name))
    }

    /// Whether every known peer is registered (a `--index all` or `--engine all` here runs them).
    pub fn complete(&self) -> bool {
        !INDEX_PEERS
            .iter()
            .chain(&STORE_PEERS)
            .any(|n| self.lacks(n))
    }
}
