//! How failures of the Rust crates become Python exceptions, and the guard that keeps a Rust
//! panic from reaching the interpreter.
//!
//! Mapping (the message is always the library's own `Display`):
//! - `lidb_index::Error` (unsorted keys, bad parameters, too many keys, corrupt encodings):
//!   `ValueError`;
//! - `lidb_data::Error::Io`: `FileNotFoundError`, `PermissionError` or `OSError` by the kind of
//!   the operating system's error; every other `lidb_data::Error` (bad format, unsorted file, bad
//!   spec): `ValueError`;
//! - a panic inside the Rust crates (a bug, never expected): `RuntimeError` naming the operation.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::PyErr;
use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};

/// The exception for an error of the index library.
pub fn index_error(e: lidb_index::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The exception for an error of the data library.
pub fn data_error(e: lidb_data::Error) -> PyErr {
    let message = e.to_string();
    match &e {
        lidb_data::Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
            _ => PyOSError::new_err(message),
        },
        _ => PyValueError::new_err(message),
    }
}

/// Runs `f`, turning a panic into `RuntimeError` (the Rust crates return errors for bad input;
/// a panic is a bug of lidb, and Python code must still be able to catch it as an `Exception`).
pub fn guard<T>(operation: &str, f: impl FnOnce() -> T) -> Result<T, PyErr> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        PyRuntimeError::new_err(format!(
            "lidb bug: {operation} panicked ({detail}); please report it"
        ))
    })
}
