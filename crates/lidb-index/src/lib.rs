//! lidb-index: learned indexes over sorted u64 keys behind one contract.
//!
//! Build any family with [`build`], ask it for a range with [`LearnedIndex::search`]: for any u64
//! query the range `[lo, hi)` holds `lower_bound(q)` and is at most the position boundary B wide
//! (see [`bound`] for the exact contract). Indexes encode to self-describing, checksummed bytes
//! ([`LearnedIndex::encode`], [`decode`]) whose length is [`LearnedIndex::size_bytes`].
//!
//! This crate does no I/O and holds no keys: callers own the sorted keys and do the last-mile
//! search (see [`lower_bound_with`]).

pub mod bound;
pub mod codec;
pub mod error;
pub mod family;
pub mod points;
pub mod radix;
pub mod segment;
pub mod spline;

pub mod binary;
pub mod fiting;
pub mod fp;
pub mod lpa;
pub mod pgm;
pub mod plex;
pub mod plr;
pub mod rmi;
pub mod rs;

pub use bound::{Bound, eps_for_boundary, lower_bound};
pub use error::{Error, Result};
pub use family::{
    Family, IndexStats, LearnedIndex, Params, RmiRoot, StatValue, build, decode, lower_bound_with,
};
