//! Errors of the data crate: every failure names the file (or the spec) it is about.
//!
//! `Io` is the operating system failing us; `Format` is bytes that are not what the format says
//! (wrong sizes, corrupt zstd streams, unrepresentable keys); `Unsorted` is a well-formed file
//! whose keys are out of order; `InvalidSpec` is a bad name, count or parameter given by a caller.
//! A broken internal invariant is a bug and panics instead of becoming one of these.

use std::fmt;
use std::path::{Path, PathBuf};

/// Everything that can go wrong when reading, writing or generating key sets.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The operating system failed to open, read, write or rename `path`.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bytes of `path` do not follow its format; `detail` says how, with the numbers.
    Format { path: PathBuf, detail: String },
    /// The keys of `path` are not in non-decreasing order: the key at `position` (0-based) is
    /// smaller than the key before it, and this is the first such position.
    Unsorted { path: PathBuf, position: u64 },
    /// A dataset spec, distribution name, count or generator parameter is not valid; the message
    /// names the problem and what would have been accepted.
    InvalidSpec(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Format { path, detail } => write!(f, "{}: {detail}", path.display()),
            Error::Unsorted { path, position } => write!(
                f,
                "{}: keys are not sorted: the key at position {position} is smaller than the key before it",
                path.display()
            ),
            Error::InvalidSpec(msg) => write!(f, "invalid spec: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Builds an `Io` error for `path`.
pub(crate) fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Builds a `Format` error for `path`.
pub(crate) fn format_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Format {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_file_on_one_line() {
        let e = format_error(
            Path::new("tweetids.zst"),
            "header says 10000000 keys but the file holds 9999999",
        );
        assert_eq!(
            e.to_string(),
            "tweetids.zst: header says 10000000 keys but the file holds 9999999"
        );
        let e = Error::Unsorted {
            path: PathBuf::from("a.bin"),
            position: 7,
        };
        assert!(e.to_string().starts_with("a.bin: "));
        assert!(e.to_string().contains("position 7"));
        let e = io_error(
            Path::new("missing.bin"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert!(e.to_string().starts_with("missing.bin: "));
        assert!(std::error::Error::source(&e).is_some());
        for e in [e, Error::InvalidSpec("x".into())] {
            assert!(!e.to_string().contains('\n'));
        }
    }
}
