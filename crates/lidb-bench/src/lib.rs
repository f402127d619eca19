//! lidb-bench: experiments as commands. Each experiment is a function from a configuration to
//! rows of measurements; the CLI prints them as a table for people or as JSON lines.
//!
//! Measurements put machine-independent counters (bound width, bytes) beside times,
//! every run prints the seed and configuration it ran with, and comparisons are made inside one run.

pub mod amplification;
pub mod btree;
pub mod concurrent;
pub mod device;
pub mod device_limit;
/// The engine trait and every engine (the lidb-engines crate, under its old path).
pub use lidb_engines as engines;
pub mod index_bench;
pub mod kv;
pub mod lsm;
pub mod peers;
pub mod plot;
pub mod progress;
pub mod report;
pub mod string_index_bench;
pub mod table;
pub mod timing;
pub mod unclustered;
