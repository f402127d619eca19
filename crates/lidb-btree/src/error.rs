//! Errors of the B+-tree engine. `Corruption` (bad bytes on disk: a page checksum, a log record)
//! is kept apart from `Io` (the operating system refused), and both name the file (and the page
//! where there is one). A broken internal invariant is a bug and panics instead.

use std::fmt;
use std::path::PathBuf;

#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The operating system (or the injected device) failed an operation on `file`.
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Bytes of `file` are not what the format says (checksum, structure, version).
    Corruption { file: PathBuf, detail: String },
    /// An option is out of range or options contradict each other; the message names it.
    InvalidOption(String),
    /// A key or value the tree cannot hold (too large for the page size); the message says why.
    TooLarge(String),
    /// The store was closed, or a background error stopped it; no further writes.
    Closed(String),
    /// An error of the shared log or storage layer (lidb-lsm), for the write-ahead log.
    Log(lidb_storage::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { file, source } => write!(f, "{}: {source}", file.display()),
            Error::Corruption { file, detail } => {
                write!(f, "{}: corruption: {detail}", file.display())
            }
            Error::InvalidOption(msg) => write!(f, "invalid option: {msg}"),
            Error::TooLarge(msg) => write!(f, "too large: {msg}"),
            Error::Closed(why) => write!(f, "store closed: {why}"),
            Error::Log(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Log(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lidb_storage::Error> for Error {
    fn from(e: lidb_storage::Error) -> Self {
        Error::Log(e)
    }
}

/// Result of the crate's API.
pub type Result<T> = std::result::Result<T, Error>;

/// Maps an `io::Error` on `file` into `Error::Io`.
pub fn io_err(file: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let file = file.into();
    move |source| Error::Io { file, source }
}
