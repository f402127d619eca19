//! SOSD key files from Python, over `lidb_data::sosd`: an 8-byte little-endian count, then the
//! u64 keys; zstd-compressed when written to a name ending in `.zst`, detected by its magic bytes
//! when read. Reads and writes run with the GIL released.

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::arrays;
use crate::errors::{data_error, guard};

/// Reads a SOSD u64 file (plain or zstd) into a uint64 array. With `sorted=True` (the default)
/// keys out of order raise `ValueError` naming the first such position; `sorted=False` reads a
/// query file in any order.
#[pyfunction]
#[pyo3(signature = (path, *, sorted = true))]
pub fn read_sosd(
    py: Python<'_>,
    path: PathBuf,
    sorted: bool,
) -> PyResult<Bound<'_, PyArray1<u64>>> {
    let keys = py.detach(|| {
        guard("read_sosd", || {
            if sorted {
                lidb_data::sosd::read_u64(&path)
            } else {
                lidb_data::sosd::read_u64_any_order(&path)
            }
        })
    })?;
    Ok(PyArray1::from_vec(py, keys.map_err(data_error)?))
}

/// Writes `keys` (any order) as a SOSD u64 file, zstd when `path` ends in `.zst`, atomically.
#[pyfunction]
pub fn write_sosd(py: Python<'_>, path: PathBuf, keys: &Bound<'_, PyAny>) -> PyResult<()> {
    let keys = arrays::u64_array(keys, "keys")?;
    let keys = arrays::readonly(&keys, "keys")?;
    let keys = arrays::as_slice(&keys, "keys")?;
    py.detach(|| guard("write_sosd", || lidb_data::sosd::write_u64(&path, keys)))?
        .map_err(data_error)
}
