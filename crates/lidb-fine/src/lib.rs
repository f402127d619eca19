//! FINEdex (Li et al., "FINEdex: a fine-grained learned index scheme for scalable and concurrent
//! memory systems", VLDB 2021; the seed paper calls the system FineStore): a concurrent learned
//! index over u64 keys and u64 values.
//!
//! Layout of the crate, in the order data flows through it:
//! - `model.rs`: LPA models (the probe, with the authors' step reset) over one trained array;
//! - `layout.rs`: the top-level nodes and the flat array of first keys that routes to them;
//! - `node.rs`: a trained array with its models (a top-level node, or a small model): its keys,
//!   its records' slots, its gap table;
//! - `record.rs`: one trained record (24 bytes: its key, and a slot of state and value words):
//!   value, removal flag, per-record lock, write version, and the id of its gap;
//! - `gap_table.rs`: a node's gaps by id, append-only, in segments that double in size;
//! - `gap.rs`: the gap below a record: level bins, then the small model they were retrained into;
//! - `bins.rs`: the level bins (root bin, child bins) and their optimistic reads;
//! - `seqlock.rs`: the per-bin latch (version word + mutex) and its memory orderings;
//! - `index.rs`: [`FineIndex`], point operations and model retraining;
//! - `pin.rs`: publication of the layout (`ArcSwap` and a version word) and each thread's pins of
//!   it, so that a point operation writes nothing shared to find its layout;
//! - `scan.rs`: ordered range scans; `stats.rs`: structure figures and the load factor;
//! - `retrainer.rs`: an optional background thread for model retraining;
//! - `store/`: [`FineStore`], byte keys and values over layers of the index (one per 8-byte key
//!   slice), its log and checkpoints;
//! - `remote/`: trained-data regions, the remote layout, level-bin ops and the extended RCU
//!   barrier for remote clients (docs/format/fine-wire.md).
//!
//! Lock order: a writer holds one record's lock (its write counted in its node's region words,
//! `remote/words.rs`, which are counters, not locks; a gap created under it may initialise a
//! segment of its node's gap table, a `OnceLock` under which nothing else is taken), or one child
//! bin's latch, or a level-bin set's root latch and then its child bins' latches in id order
//! (`bins.rs`); a writer that triggers model retraining has released those first. Model
//! retraining holds `retrain_lock`, and under it one record's lock at a time (moving it);
//! statistics take one set's latches at a time. Readers and remote copies hold none. So there is
//! no lock cycle. A thread's pins (`pin.rs`) are a thread-local `RefCell`, borrowed shared for
//! the length of an operation and mutably only to install a pin, never across a wait; a call
//! that finds them borrowed (an `upsert` closure calling an index) runs on a guard instead.
//!
//! Everything is safe Rust: keys, values and versions are 8-byte atomics.

#![forbid(unsafe_code)]

mod bins;
mod config;
mod error;
mod gap;
mod gap_table;
mod index;
mod layout;
mod model;
mod node;
mod pin;
mod record;
mod remote;
mod retrainer;
mod scan;
mod seqlock;
mod stats;
mod store;

pub use config::Config;
pub use error::{FineError, Result};
pub use index::{FineIndex, ModelRetrain};
pub use remote::{
    BIN_REGION_RETIRED, Barrier, BarrierStats, BinAnswer, BinOp, RETIRED, RemoteLayout,
    TrainedRegion, WORDS_PER_RECORD, WRITING, bin_copy_is_valid, copy_is_valid, predict_window,
};
pub use retrainer::Retrainer;
pub use stats::FineStats;
pub use store::{
    BUCKET_SPLIT_AT, BucketStats, FineRecovery, FineRepair, FineStore, FineStoreOptions,
};
