//! lidb-data: datasets, key mapping, synthetic distributions and workloads.
//!
//! Modules:
//! - [`error`]: the typed [`Error`] every function returns; each names its file or spec.
//! - [`sosd`]: SOSD key files (u64 count, then little-endian u64 or u32 keys), plain or zstd.
//! - [`text`]: text key files, one byte-string key per line, plain or zstd.
//! - [`keymap`]: the order-preserving (monotone, not injective) u64 image of byte keys that
//!   learned models see.
//! - [`datadir`]: where the real datasets live ([`DATA_DIR_ENV`]) and the skip helper for tests
//!   that need them.
//! - [`synthetic`]: seeded synthetic key distributions and the `synthetic:NAME:N` spec.
//! - [`table2`]: the LearnedStore paper's Table II sets (lineargen, piecewise, randomgen), named
//!   through [`synthetic`].
//! - [`queries`]: seeded point-query sets over sorted keys (present, absent, mixed, extremes).
//! - [`zipf`]: YCSB's Zipfian, scrambled Zipfian and skewed-latest generators.
//! - [`ycsb`]: YCSB core workloads A-F as a seeded stream of operations on record numbers.
//! - [`mod@info`]: summary statistics of a key set ([`KeyInfo`], [`info()`]).
//!
//! Every generator is seeded (ChaCha8) and gives the same output for the same seed everywhere.
//! Nothing in this crate panics on bad input: missing or malformed files and bad specs are
//! [`Error`] values.

pub mod datadir;
pub mod error;
mod fileio;
pub mod info;
pub mod keymap;
pub mod queries;
pub mod sosd;
pub mod synthetic;
pub mod table2;
pub mod text;
pub mod ycsb;
pub mod zipf;

#[cfg(test)]
mod testutil;

pub use datadir::{
    DATA_DIR_ENV, REAL_DATASETS, REAL_U64_DATASETS, WORDS_DATASET, data_dir, real_dataset,
    require_data, require_dataset,
};
pub use error::{Error, Result};
pub use fileio::ZSTD_MAGIC;
pub use info::{KeyInfo, info};
pub use synthetic::Distribution;
pub use ycsb::{Generator, Op, RequestDistribution, Workload, record_key};
