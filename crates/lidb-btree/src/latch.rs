//! The per-frame hybrid latch is lidb-sync's [`HybridLatch`]: a version word plus a mutex
//! (LeanStore's `HybridLatch` in safe Rust). Readers take nothing: [`HybridLatch::optimistic`]
//! gives the version, they read the frame's atomic words with `Relaxed` loads, and keep what they
//! read only if [`HybridLatch::validate`] says the version is unchanged; writers lock, and the
//! guard's drop publishes (version + 2). The orderings, their argument, the loom model and the
//! exhaustive interleaving test are in `crates/lidb-sync/src/latch.rs`.
//!
//! Callers: the buffer pool and the tree, from any thread. A frame reused for another page has a
//! new version (the counter never goes back), so a reader that read the old page fails its
//! validation.

pub use lidb_sync::latch::{ExclusiveGuard, HybridLatch};
