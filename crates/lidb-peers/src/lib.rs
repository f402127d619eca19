//! lidb-peers: the third-party peers of lidb's benchmarks, in a crate of their own so that the
//! `lidb` binary (which runs `lidb serve`, `lidb kv` and `lidb repair`) links none of them.
//!
//! - [`concurrent`]: `lidb bench concurrent`'s peers behind lidb-bench's `ConcurrentIndex`:
//!   skipmap (crossbeam-skiplist), scc-tree (scc), congee, and li+delta (the FINEdex paper's
//!   delta-buffer design, whose buffer is a crossbeam-skiplist `SkipMap`).
//! - [`btree`]: `lidb bench btree`'s peers behind lidb-bench's `PagedStore`: redb (over an
//!   `O_DIRECT` backend) and lmdb (heed).
//!
//! [`peers`] hands all of them to lidb-bench's runners as one [`Peers`] value; the `lidb-bench`
//! binary (package lidb-bench-bin) passes it to the CLI with its counting allocator.
//!
//! Threads: see each module; [`peers`] is called once at startup.

pub mod btree;
pub mod concurrent;

use lidb_bench::concurrent::IndexKind;
use lidb_bench::peers::{Peers, StorePeer};

/// The concurrent-index peers, in the order `--index all` runs them after lidb's own.
pub fn indexes() -> Vec<IndexKind> {
    use concurrent::{CongeePeer, LiDelta, SccTree, SkipMapPeer};
    vec![
        IndexKind::new("skipmap", |e| Ok(Box::new(SkipMapPeer::bulk_load(e)))),
        IndexKind::new("scc-tree", |e| Ok(Box::new(SccTree::bulk_load(e)))),
        IndexKind::new("congee", |e| Ok(Box::new(CongeePeer::bulk_load(e)))),
        IndexKind::new("li+delta", |e| Ok(Box::new(LiDelta::bulk_load(e)?))),
    ]
}

/// The paged-store peers, in the order `--engine all` runs them after lidb's own.
pub fn stores() -> Vec<StorePeer> {
    vec![
        StorePeer {
            name: btree::redb_peer::NAME,
            open: btree::redb_peer::open,
        },
        StorePeer {
            name: btree::lmdb_peer::NAME,
            open: btree::lmdb_peer::open,
        },
    ]
}

/// Every peer of this crate; no allocation counter (the binary adds its own).
pub fn peers() -> Peers {
    Peers {
        indexes: indexes(),
        stores: stores(),
        alloc_counter: None,
    }
}
