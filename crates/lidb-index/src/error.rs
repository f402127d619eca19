//! Errors of the index library. Building reports bad input; decoding reports corrupt bytes.
//! A broken internal invariant is a bug and panics (in debug builds) instead.

use std::fmt;

/// Everything that can go wrong when building or decoding an index.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The keys are not in non-decreasing order: `keys[position] < keys[position - 1]`.
    Unsorted { position: u64 },
    /// A parameter is out of its range (the message names it and the range).
    InvalidParam(String),
    /// More keys than one index addresses (positions are stored as u32).
    TooManyKeys { keys: u64, max: u64 },
    /// Encoded bytes are truncated, corrupt, or of an unknown format or version.
    Corruption { detail: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unsorted { position } => write!(
                f,
                "keys are not sorted: key at position {position} is smaller than the key before it"
            ),
            Error::InvalidParam(msg) => write!(f, "invalid parameter: {msg}"),
            Error::TooManyKeys { keys, max } => {
                write!(f, "too many keys for one index: {keys} (at most {max})")
            }
            Error::Corruption { detail } => write!(f, "corrupt index encoding: {detail}"),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Builds a `Corruption` error from anything printable.
pub(crate) fn corrupt(detail: impl Into<String>) -> Error {
    Error::Corruption {
        detail: detail.into(),
    }
}
