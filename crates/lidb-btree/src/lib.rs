//! LearnedStore (Maharjan et al., "From LeanStore to LearnedStore: Using a Learned Index to
//! Improve Database Index Search"): a B+-tree over a page file with its own buffer manager
//! (LeanStore's pointer swizzling and cooling replacement), whose leaves are also reached through
//! a learned model over the leaves' boundary keys, with the tree walk as the fallback.
//!
//! Layout of the crate, in the order data flows through it (parts marked *planned* are not
//! built yet; `tree/mod.rs` has the latching protocol and lock order):
//! - `error.rs`: the error type;
//! - `device.rs`, `page.rs`, `pagefile.rs`: the page device (O_DIRECT file, or memory with
//!   crash simulation), the checksummed page header, and the shadow-slot page file whose
//!   checkpoints are atomic (docs/format/btree-pagefile.md);
//! - `latch.rs`, `buffer/`: hybrid latches, frames with swips and HOT/COOLING/UNLINKED states,
//!   the page table, the cooling FIFO, loads and write-back;
//! - `node.rs`: slotted nodes with fence keys and a per-leaf linear model
//!   (docs/format/btree-node.md);
//! - `tree/`: the B+-tree over the pool (walks, `smo.rs` splits and merges, `cooling.rs` the
//!   provider's half, `bulk.rs`, the learned path's entry points: `leaf.rs` leaves from their
//!   parents and probes by page id, `leaf_write.rs` writes by page id, `resident.rs` lookups
//!   that read nothing; `simulate.rs` the inner-miss simulation);
//! - `btree.rs`: the tree's handle (`BTree`, `Options`) and the provider thread;
//! - `wal/`: the logical write-ahead log (record payloads, log files and `WALSTATE`, group
//!   commit over lidb-lsm's record log, reading logs back);
//! - `store/`: [`BTreeStore`], the durable handle: the [`CheckpointTarget`] trait the tree
//!   implements, open and recovery, checkpoints (a log switch, the tree's checkpoint at the
//!   switch LSN, then the old logs removed) and the checkpointer thread;
//! - `engine.rs`: [`LearnedStore`], the engine users open: the tree under the log in one
//!   directory, with `row_cache.rs` (records gets found, beside the pool; writes invalidate
//!   them) in front of its gets; `repair.rs`: its offline repair (the log cut at its last
//!   good record, the learned table rebuilt from the tree, a checkpoint);
//! - `fuzzing.rs`: entry points for the fuzz targets in `fuzz/` (hidden; the learned blob's
//!   decoder is private);
//! - `testing.rs`: `MemTarget`, an in-memory stand-in target for tests of the durability layer;
//! - `learned/`: the learned leaf path: the leaf mapping table (fences, page ids, frame hints)
//!   filled from the leaves' parents, its model (lidb-index's RadixSpline over key images), the
//!   lookups and writes through it with the tree walk as fallback, the two retraining threads,
//!   and the table's checkpoint blob (docs/format/btree-learned.md).
//!
//! Use (the write-ahead log and the benchmarks build on this):
//!
//! ```
//! use lidb_btree::{BTree, LeafProbe, Options};
//! # fn main() -> lidb_btree::Result<()> {
//! let opts = Options { pool_bytes: 1 << 20, direct_io: false, ..Options::default() };
//! let tree = BTree::in_memory(&opts)?; // or BTree::create(path, &opts) / BTree::open(..)
//! tree.put(b"apple", b"red")?;
//! assert_eq!(tree.get(b"apple")?, Some(b"red".to_vec()));
//! assert_eq!(tree.scan(b"a", Some(b"b"), 10)?.len(), 1);
//! // Durable state: every write so far, the log position it covers, an opaque blob.
//! tree.checkpoint(17, b"model bytes")?;
//! assert_eq!(tree.checkpoint_info().lsn, 17);
//! // The learned path: leaves from their parents, then a leaf reached by page id.
//! let leaves = tree.leaf_parents()?;
//! let leaf = &leaves[0];
//! match tree.probe_leaf(leaf.pid, leaf.frame, b"apple")? {
//!     LeafProbe::Found { value, .. } => assert_eq!(value, b"red"),
//!     LeafProbe::Absent { .. } | LeafProbe::Miss => unreachable!(),
//! }
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod btree;
pub mod buffer;
pub mod device;
mod engine;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod latch;
mod learned;
pub mod node;
pub mod page;
pub mod pagefile;
mod repair;
mod row_cache;
pub mod store;
pub mod testing;
pub mod tree;
pub mod wal;

pub use btree::{BTree, Options, Stats};
pub use buffer::PoolStats;
pub use device::{FileDevice, IoCounters, MemDevice, PageDevice};
pub use engine::{LearnedOptions, LearnedStore, LearnedStoreOptions, PAGE_FILE_NAME, TreeTarget};
pub use learned::{LearnedSource, LearnedStats};
pub use repair::RepairReport;
pub use row_cache::RowCacheStats;
pub use tree::{LeafGuard, LeafProbe, LeafRef, LeafWrite, Tree};

pub use error::{Error, Result, io_err};
pub use store::{BTreeStore, CheckpointInfo, CheckpointTarget, WalOptions, WalRecovery};
