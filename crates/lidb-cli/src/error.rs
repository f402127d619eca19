//! The CLI's error: anything a subcommand can fail with, printed as one line.

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    Index(lidb_index::Error),
    Data(lidb_data::Error),
    Bench(lidb_bench::index_bench::Error),
    Lsm(lidb_storage::Error),
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
    /// `lidb serve` could not listen, or stop cleanly.
    Serve(String),
    /// An engine call failed (`lidb kv`, `lidb serve`, `lidb repair`).
    Engine(lidb_engines::EngineError),
    /// An engine did not open: what was opened, why, and for damage what to do.
    Open {
        what: String,
        error: lidb_engines::EngineError,
        hint: String,
    },
}

impl CliError {
    /// The process exit code for this error (docs/guide.md, "Engine options and errors"): 2 for a usage error (as clap's
    /// own), 3 for damage found in a store, 4 for an I/O error, 5 for a store closed by an
    /// earlier failure, 1 for anything else.
    pub fn exit_code(&self) -> u8 {
        use lidb_engines::EngineError as E;
        let engine = match self {
            CliError::Usage(_) => return 2,
            CliError::Engine(e) | CliError::Open { error: e, .. } => e,
            CliError::Lsm(lidb_storage::Error::Corruption { .. })
            | CliError::Btree(lidb_btree::Error::Corruption { .. }) => return 3,
            CliError::Lsm(lidb_storage::Error::Io { .. })
            | CliError::Btree(lidb_btree::Error::Io { .. })
            | CliError::Io { .. } => return 4,
            _ => return 1,
        };
        match engine {
            E::Corruption { .. } => 3,
            E::Io { .. } => 4,
            E::Closed(_) => 5,
            E::InvalidOption(_) => 2,
            _ => 1,
        }
    }
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
            CliError::Engine(e) => write!(f, "{e}"),
            CliError::Open { what, error, hint } => write!(f, "{what}: {error}{hint}"),
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

impl From<lidb_storage::Error> for CliError {
    fn from(e: lidb_storage::Error) -> Self {
        CliError::Lsm(e)
    }
}

impl From<lidb_engines::EngineError> for CliError {
    fn from(e: lidb_engines::EngineError) -> Self {
        CliError::Engine(e)
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
