//! The CLI's error: anything a subcommand can fail with, printed as one line.

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    Index(lidb_index::Error),
    Data(lidb_data::Error),
    Bench(lidb_bench::index_bench::Error),
    Lsm(lidb_lsm::Error),
    /// LearnedStore (`lidb kv --engine learnedstore|btree`).
    Btree(lidb_btree::Error),
    LsmBench(lidb_bench::lsm::Error),
    KvBench(lidb_bench::kv::Error),
    BtreeBench(lidb_bench::btree::Error),
    /// Writing output (stdout or a file) failed.
    Io {
        what: String,
        source: std::io::Error,
    },
    /// An option's value is not acceptable; the message names the option.
    Usage(String),
    /// A benchmark ran but its answers were wrong; the message says what failed.
    Check(String),
    /// `lidb serve` could not open its engine, listen, or stop cleanly.
    Serve(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Index(e) => write!(f, "{e}"),
            CliError::Data(e) => write!(f, "{e}"),
            CliError::Bench(e) => write!(f, "{e}"),
            CliError::Lsm(e) => write!(f, "{e}"),
            CliError::Btree(e) => write!(f, "{e}"),
            CliError::LsmBench(e) => write!(f, "{e}"),
            CliError::KvBench(e) => write!(f, "{e}"),
            CliError::BtreeBench(e) => write!(f, "{e}"),
            CliError::Io { what, source } => write!(f, "{what}: {source}"),
            CliError::Usage(msg) => write!(f, "{msg}"),
            CliError::Check(msg) => write!(f, "{msg}"),
            CliError::Serve(msg) => write!(f, "{msg}"),
        }
    }
}

impl From<lidb_index::Error> for CliError {
    fn from(e: lidb_index::Error) -> Self {
        CliError::Index(e)
    }
}

impl From<lidb_data::Error> for CliError {
    fn from(e: lidb_data::Error) -> Self {
        CliError::Data(e)
    }
}

impl From<lidb_lsm::Error> for CliError {
    fn from(e: lidb_lsm::Error) -> Self {
        CliError::Lsm(e)
    }
}

impl From<lidb_btree::Error> for CliError {
    fn from(e: lidb_btree::Error) -> Self {
        CliError::Btree(e)
    }
}

impl From<lidb_bench::index_bench::Error> for CliError {
    fn from(e: lidb_bench::index_bench::Error) -> Self {
        CliError::Bench(e)
    }
}

/// Maps an I/O error on `what` (a file name or "stdout").
pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
    let what = what.into();
    move |source| CliError::Io { what, source }
}
