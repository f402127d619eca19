//! What an engine call failed with, as a kind a caller can act on: `lidb serve` answers each
//! kind with its own RESP error prefix and `lidb kv` with its own exit code (docs/guide.md, "Engine options and errors"),
//! so a client tells damage from a full disk from a bad option without reading the message.

use std::path::PathBuf;

/// An engine's failure. `Display` is one line that names the file where there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// Bytes of `file` are not what its format says (checksum, structure, version); `detail`
    /// says where (an offset or a record) and what.
    Corruption { file: PathBuf, detail: String },
    /// The operating system (or an injected fault) failed an operation on `file`.
    Io {
        file: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    /// An option is out of range, or options contradict each other; the message names it.
    InvalidOption(String),
    /// A key or value the engine cannot hold; the message says why.
    TooLarge(String),
    /// The engine was closed, or a background error stopped its writes.
    Closed(String),
    /// The engine has no such operation (conversion on an engine without a learned tier).
    Unsupported(String),
    /// Anything else an engine reports (an index that failed to build, RocksDB's own errors,
    /// a remote shard's wire error), as its message.
    Other(String),
}

impl EngineError {
    /// The RESP error prefix `lidb serve` answers this kind with (Redis clients take the first
    /// word of an error as its code): `CORRUPTION`, `IOERR`, `CLOSED`, `TOOLARGE`, `UNSUPPORTED`,
    /// or `ERR` for a bad option and anything else.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Corruption { .. } => "CORRUPTION",
            EngineError::Io { .. } => "IOERR",
            EngineError::Closed(_) => "CLOSED",
            EngineError::TooLarge(_) => "TOOLARGE",
            EngineError::Unsupported(_) => "UNSUPPORTED",
            EngineError::InvalidOption(_) | EngineError::Other(_) => "ERR",
        }
    }

    /// The message alone, as `Display` writes it.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Corruption { file, detail } => {
                write!(f, "{}: corruption: {detail}", file.display())
            }
            EngineError::Io { file, message, .. } => write!(f, "{}: {message}", file.display()),
            EngineError::InvalidOption(msg) => write!(f, "invalid option: {msg}"),
            EngineError::TooLarge(msg) => write!(f, "too large: {msg}"),
            EngineError::Closed(why) => write!(f, "database closed: {why}"),
            EngineError::Unsupported(msg) | EngineError::Other(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<lidb_storage::Error> for EngineError {
    fn from(e: lidb_storage::Error) -> Self {
        match e {
            lidb_storage::Error::Corruption { file, detail } => {
                EngineError::Corruption { file, detail }
            }
            lidb_storage::Error::Io { file, source } => EngineError::Io {
                file,
                kind: source.kind(),
                message: source.to_string(),
            },
            lidb_storage::Error::InvalidOption(msg) => EngineError::InvalidOption(msg),
            lidb_storage::Error::Closed(why) => EngineError::Closed(why),
            other => EngineError::Other(other.to_string()),
        }
    }
}

impl From<lidb_btree::Error> for EngineError {
    fn from(e: lidb_btree::Error) -> Self {
        match e {
            lidb_btree::Error::Corruption { file, detail } => {
                EngineError::Corruption { file, detail }
            }
            lidb_btree::Error::Io { file, source } => EngineError::Io {
                file,
                kind: source.kind(),
                message: source.to_string(),
            },
            lidb_btree::Error::InvalidOption(msg) => EngineError::InvalidOption(msg),
            lidb_btree::Error::TooLarge(msg) => EngineError::TooLarge(msg),
            lidb_btree::Error::Closed(why) => EngineError::Closed(why),
            lidb_btree::Error::Log(e) => EngineError::from(e),
            other => EngineError::Other(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_its_code_and_the_message_of_the_engine() {
        let corrupt = EngineError::from(lidb_storage::Error::Corruption {
            file: PathBuf::from("d/000001.log"),
            detail: "record at 4096: bad checksum".into(),
        });
        assert_eq!(corrupt.code(), "CORRUPTION");
        assert_eq!(
            corrupt.to_string(),
            "d/000001.log: corruption: record at 4096: bad checksum"
        );
        let io = EngineError::from(lidb_storage::Error::Io {
            file: PathBuf::from("d/x"),
            source: std::io::Error::new(std::io::ErrorKind::StorageFull, "no space"),
        });
        assert_eq!(io.code(), "IOERR");
        assert!(matches!(
            io,
            EngineError::Io {
                kind: std::io::ErrorKind::StorageFull,
                ..
            }
        ));
        let closed = EngineError::from(lidb_btree::Error::Log(lidb_storage::Error::Closed(
            "sync failed".into(),
        )));
        assert_eq!(closed.code(), "CLOSED");
        assert_eq!(closed.to_string(), "database closed: sync failed");
        let large = EngineError::from(lidb_btree::Error::TooLarge("value of 9 MiB".into()));
        assert_eq!(large.code(), "TOOLARGE");
        assert_eq!(
            EngineError::InvalidOption("x".into()).code(),
            EngineError::Other("y".into()).code()
        );
    }
}
