//! The paged-store peers of `lidb bench btree` (the LearnedStore paper's experiments), behind
//! lidb-bench's `PagedStore`: [`redb_peer`] over the `O_DIRECT` backend of [`direct`], and
//! [`lmdb_peer`] in a memory cgroup of the pool's size (lidb-bench's `btree::memcap`).
//!
//! Used from one thread at a time, as the runners of lidb-bench's `btree` drive every store.

pub mod direct;
pub mod lmdb_peer;
pub mod redb_peer;
