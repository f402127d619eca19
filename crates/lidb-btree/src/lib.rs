//! LearnedStore (Maharjan et al., "From LeanStore to LearnedStore: Using a Learned Index to
//! Improve Database Index Search"): a B+-tree over a page file with its own buffer manager
//! (LeanStore's pointer swizzling and cooling replacement), whose leaves are also reached through
//! a learned model over the leaves' boundary keys, with the tree walk as the fallback.
//!
//! Layout of the crate, in the order data flows through it (parts marked *planned* are not
//! built yet):
//! - `error.rs`: the error type;
//! - *planned* `device.rs`, `page.rs`, `pagefile.rs`: the page device (O_DIRECT file or memory
//!   with crash simulation), the checksummed page format, and the shadow-slot page file whose
//!   checkpoints are atomic;
//! - *planned* `latch.rs`, `buffer.rs`: frames with hybrid latches, swips, HOT/COOLING/UNLINKED
//!   states and the cooling FIFO;
//! - *planned* `node.rs`, `tree.rs`: slotted nodes with fence keys, the B+-tree over the pool;
//! - *planned* `wal.rs`, `store.rs`: the logical write-ahead log, checkpoints and recovery;
//! - *planned* `learned/`: the leaf mapping table, its model, and retraining.

#![forbid(unsafe_code)]

mod btree;
pub mod buffer;
pub mod device;
mod error;
pub mod latch;
pub mod node;
pub mod page;
pub mod pagefile;
pub mod tree;

pub use btree::{BTree, Options, Stats};
pub use buffer::PoolStats;
pub use device::{FileDevice, IoCounters, MemDevice, PageDevice};
pub use pagefile::CheckpointInfo;
pub use tree::{LeafProbe, LeafRef, Tree};

pub use error::{Error, Result, io_err};
