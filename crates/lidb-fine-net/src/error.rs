//! Errors of the fine-wire codec, server and client. A broken internal invariant is a bug and
//! is asserted, not returned.

use std::fmt;

/// What a frame, a connection or a server can refuse.
#[derive(Debug)]
#[non_exhaustive]
pub enum WireError {
    /// The socket failed or closed.
    Io(std::io::Error),
    /// Bytes that are not a valid frame or message.
    Malformed { detail: String },
    /// The server answered BAD_REQUEST.
    BadRequest { detail: String },
    /// The server answered WRONG_SHARD for this key.
    WrongShard { key: u64 },
    /// A key outside the range `[lo, hi]` of the shard asked (in-process calls, RESP).
    OutsideShard { key: u64, lo: u64, hi: u64 },
    /// No server of the shard map owns this key.
    NoShard { key: u64 },
    /// The shard map is unusable (overlapping ranges, no servers).
    ShardMap { detail: String },
    /// The durable server's store refused a write or did not open.
    Store(lidb_storage::Error),
}

impl WireError {
    pub fn malformed(detail: impl Into<String>) -> WireError {
        WireError::Malformed {
            detail: detail.into(),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "fine-wire i/o: {e}"),
            WireError::Malformed { detail } => write!(f, "malformed fine-wire frame: {detail}"),
            WireError::BadRequest { detail } => write!(f, "server refused the request: {detail}"),
            WireError::WrongShard { key } => write!(f, "key {key} is outside the server's range"),
            WireError::OutsideShard { key, lo, hi } => {
                write!(f, "key {key} is outside this shard's range {lo}-{hi}")
            }
            WireError::NoShard { key } => write!(f, "no server of the shard map owns key {key}"),
            WireError::ShardMap { detail } => write!(f, "bad shard map: {detail}"),
            WireError::Store(e) => write!(f, "fine server store: {e}"),
        }
    }
}

impl std::error::Error for WireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WireError::Io(e) => Some(e),
            WireError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> WireError {
        WireError::Io(e)
    }
}
