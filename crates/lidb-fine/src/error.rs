//! Errors of the index's public API. A broken internal invariant is a bug and is asserted, not
//! returned.

use std::fmt;

/// What a [`crate::FineIndex`] call can refuse.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FineError {
    /// A [`crate::Config`] outside the bounds the structure needs.
    InvalidConfig(String),
    /// Bulk-load keys that are not strictly increasing; `position` is the first offending one.
    Unsorted { position: u64 },
    /// More trained keys than the models' u32 positions can address.
    TooManyKeys { count: u64 },
}

impl fmt::Display for FineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FineError::InvalidConfig(msg) => write!(f, "invalid finedex config: {msg}"),
            FineError::Unsorted { position } => write!(
                f,
                "bulk-load keys are not strictly increasing at position {position}"
            ),
            FineError::TooManyKeys { count } => {
                write!(
                    f,
                    "{count} trained keys exceed the 2^32 - 1 a model can address"
                )
            }
        }
    }
}

impl std::error::Error for FineError {}

/// Result of the public API.
pub type Result<T> = std::result::Result<T, FineError>;
