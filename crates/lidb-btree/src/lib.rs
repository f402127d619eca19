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
//! - `wal/`: the logical write-ahead log (record payloads, log files and `WALSTATE`, group
//!   commit over lidb-lsm's record log, reading logs back);
//! - `store/`: [`BTreeStore`], the durable handle: the [`CheckpointTarget`] trait the tree
//!   implements, open and recovery, checkpoints (a log switch, the tree's checkpoint at the
//!   switch LSN, then the old logs removed) and the checkpointer thread;
//! - `testing.rs`: `MemTarget`, an in-memory stand-in target for tests of the durability layer;
//! - *planned* `learned/`: the leaf mapping table, its model, and retraining.

#![forbid(unsafe_code)]

mod error;
pub mod store;
pub mod testing;
pub mod wal;

pub use error::{Error, Result, io_err};
pub use store::{BTreeStore, CheckpointInfo, CheckpointTarget, WalOptions, WalRecovery};
