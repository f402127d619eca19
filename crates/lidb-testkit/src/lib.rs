//! lidb-testkit: the primitives lidb's tests share, each written once.
//!
//! - [`scratch`]: a scratch directory on the real file system, removed on drop unless
//!   `LIDB_KEEP_SCRATCH=1` asks to keep it for inspection.
//! - [`seed`]: the seeded case runner of model and random tests: N cases, seeds derived from a
//!   base that `LIDB_SEED` overrides (`LIDB_CASES` the count), and on a failure the exact
//!   command that replays the failing case alone.
//! - [`mem`]: helpers over the in-memory storage of lidb-storage: file snapshots and restores,
//!   damage (bit flips, zeroed runs, truncations), and a runner that cuts the power at every
//!   N-th storage operation of a workload.
//!
//! Only tests (dev-dependencies) use this crate; it is not published. Engine-specific option
//! builders stay in each crate's `tests/support/` module.
//!
//! Threads: every function may be called from any test thread; nothing here is shared between
//! calls except what the caller passes in.

pub mod mem;
pub mod scratch;
pub mod seed;

pub use scratch::Scratch;
pub use seed::{Cases, cases};
