//! lidb-sync: the small concurrency primitives that keep a read path from writing what other
//! readers write.
//!
//! On many cores a counter that every lookup increments, or a `Mutex` that every lookup takes, is
//! a convoy: each update moves one cache line between cores, and 16 threads spend their time
//! waiting for it. RocksDB keeps its statistics per core for this reason. The types here do the
//! same: each thread updates a shard of its own (its own cache line), and a reader of the total
//! sums the shards.
//!
//! - [`sharded::Sharded`]: a value per shard (any `Default + Send` type, for example a struct of
//!   statistics), updated under the shard's own uncontended lock and folded on read.
//! - [`sharded::Counter`]: a sharded `u64` counter (relaxed atomics, summed on read).
//! - [`sharded::CachePadded`]: a value alone on its cache lines.
//! - [`latch::HybridLatch`]: a version word plus a mutex; readers validate a version instead of
//!   locking (the level bins of FINEdex and the frames of the B+-tree).
//!
//! Threads: every type is `Send + Sync` and every method takes `&self`. A thread is given its
//! shard once, on its first update (round robin over the shard count), so up to [`SHARDS`]
//! threads never share a shard; more threads share them two or more to one, which is still
//! correct, only less private.

pub mod latch;
pub mod sharded;

pub use latch::{ExclusiveGuard, HybridLatch, RETIRED};
pub use sharded::{CachePadded, Counter, SHARDS, Sharded};
