//! The concurrent-index peers of `lidb bench concurrent` (see [`peers`] for skipmap, scc-tree and
//! congee, [`delta`] for li+delta), each behind lidb-bench's `ConcurrentIndex`.
//!
//! Threads: any; every type is `Send + Sync` and every method takes `&self`.

pub mod delta;
pub mod peers;

pub use delta::LiDelta;
pub use peers::{CongeePeer, SccTree, SkipMapPeer};
