//! Keys and queries from Python: 1-D numpy uint64 arrays, borrowed read-only without copying.
//!
//! A contiguous uint64 array is used as it is. Anything else (a list, another integer dtype, a
//! strided view) is handed to `lidb._convert.as_u64_array`, the one place that decides what
//! converts to u64 and what is refused (negative or too large values, floats, more than one
//! dimension), so the Rust side and the pure-Python container agree.

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `values` as a contiguous 1-D uint64 array (the same object when it already is one).
pub fn u64_array<'py>(
    values: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    if let Ok(array) = values.cast::<PyArray1<u64>>()
        && array.is_contiguous()
    {
        return Ok(array.clone());
    }
    let converted = values
        .py()
        .import("lidb._convert")?
        .getattr("as_u64_array")?
        .call1((values, what))?;
    Ok(converted.cast_into::<PyArray1<u64>>()?)
}

/// A read-only borrow of `array` (refused, not a panic, if Rust code holds it writable).
pub fn readonly<'py>(
    array: &Bound<'py, PyArray1<u64>>,
    what: &str,
) -> PyResult<PyReadonlyArray1<'py, u64>> {
    array
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// The elements of a borrowed array; `u64_array` made it contiguous, so this fails only if
/// someone changed it in between.
pub fn as_slice<'a>(array: &'a PyReadonlyArray1<'_, u64>, what: &str) -> PyResult<&'a [u64]> {
    array
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}
