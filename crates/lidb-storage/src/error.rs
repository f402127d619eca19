//! The error of every engine that stores through this crate (lidb-lsm re-exports it as its own,
//! and lidb-kv, lidb-fine and lidb-btree's log return it). `Corruption` (bad bytes on disk) is kept apart from `Io` (the
//! operating system refused), and both name the file. A broken internal invariant is a bug and
//! panics in debug builds instead.

use std::fmt;
use std::path::PathBuf;

#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The operating system (or the injected storage) failed an operation on `file`.
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Bytes of `file` are not what the format says (checksum, structure, version).
    Corruption { file: PathBuf, detail: String },
    /// An option is out of range or options contradict each other; the message names it.
    InvalidOption(String),
    /// The database was closed, or a background error stopped it; no further writes.
    Closed(String),
    /// Building or decoding a learned index failed.
    Index(lidb_index::Error),
    /// A memory-only read (`Db::get_if_in_memory`) would have had to read the storage. Only
    /// that path produces it, and it answers "not in memory" instead of returning it.
    NotInMemory,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { file, source } => write!(f, "{}: {source}", file.display()),
            Error::Corruption { file, detail } => {
                write!(f, "{}: corruption: {detail}", file.display())
            }
            Error::InvalidOption(msg) => write!(f, "invalid option: {msg}"),
            Error::Closed(why) => write!(f, "database closed: {why}"),
            Error::Index(e) => write!(f, "{e}"),
            Error::NotInMemory => write!(f, "the answer needs a read from storage"),
        }
    }
}

impl Error {
    /// The same error again, for each writer of a write group that failed together (`Error`
    /// is not `Clone`: an `io::Error` is rebuilt from its kind and message).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { file, source } => Error::Io {
                file: file.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption { file, detail } => Error::Corruption {
                file: file.clone(),
                detail: detail.clone(),
            },
            Error::InvalidOption(msg) => Error::InvalidOption(msg.clone()),
            Error::Closed(why) => Error::Closed(why.clone()),
            Error::NotInMemory => Error::NotInMemory,
            Error::Index(e) => Error::Closed(format!("a write group failed: {e}")),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Index(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lidb_index::Error> for Error {
    fn from(e: lidb_index::Error) -> Self {
        Error::Index(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Maps an `io::Error` on `file` into `Error::Io`.
pub fn io_err(file: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let file = file.into();
    move |source| Error::Io { file, source }
}

/// Builds a `Corruption` error.
pub fn corruption(file: impl Into<PathBuf>, detail: impl Into<String>) -> Error {
    Error::Corruption {
        file: file.into(),
        detail: detail.into(),
    }
}
