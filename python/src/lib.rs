//! `lidb._lidb`: the native half of the `lidb` Python package (python/lidb/__init__.py re-exports
//! it beside the pure-Python sorted container).
//!
//! What it exposes, each a thin shell over a public API of the Rust crates (nothing here
//! reimplements an index or a file format):
//! - [`build`] and [`decode`] over `lidb_index::{build, decode}`, returning an [`index::Index`];
//! - [`sorted_keys::SortedKeys`], sorted keys with their index, the base class of
//!   `lidb.SortedList` whose scalar queries are one call each;
//! - [`read_sosd`] and [`write_sosd`] over `lidb_data::sosd` (plain or zstd);
//! - `FAMILIES` (the names `build` accepts) and `DATA_DIR_ENV` (the variable naming the dataset
//!   directory, shared with the Rust tests).
//!
//! Threads: every function may be called from any Python thread. Building, decoding, batch
//! searches and file I/O run with the GIL released (`Python::detach`), on data owned by Rust or
//! borrowed read-only from numpy.
//!
//! Invariants:
//! 1. No Rust panic reaches the interpreter: every call into the Rust crates goes through
//!    [`errors::guard`], which turns a panic (a bug) into `RuntimeError`; library errors become
//!    `ValueError` or `OSError` with the library's own message (see `errors.rs`).
//! 2. Keys and queries enter as 1-D numpy uint64 arrays, borrowed without copying when they are
//!    contiguous; anything else goes through `lidb._convert.as_u64_array`, which refuses values a
//!    u64 cannot hold instead of wrapping them (see `arrays.rs`).

//! 3. No unsafe code: the crate denies `unsafe_code` like the workspace (pyo3's macros keep their
//!    FFI glue out of the lint's reach), so every raw pointer stays inside pyo3 and numpy.

#![forbid(unsafe_code)]

mod arrays;
mod errors;
mod index;
mod params;
mod sorted_keys;
mod sosd;

use lidb_index::Family;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{guard, index_error};
use crate::index::Index;

/// Builds an index of `family` over the sorted u64 `keys` with position boundary `boundary`.
///
/// `params` are the family-specific parameters, named as the CLI's flags (`pgm_epsilon_recursive`,
/// `rs_radix_bits`, `rmi_root`, `lpa_threshold`, `lpa_learning_step`, `lpa_learning_rate`,
/// `fiting_fanout`); each applies to its own family only.
#[pyfunction]
#[pyo3(signature = (family, keys, boundary, **params))]
fn build(
    py: Python<'_>,
    family: &str,
    keys: &Bound<'_, PyAny>,
    boundary: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyDict>>,
) -> PyResult<Index> {
    let family = Family::from_name(family).map_err(index_error)?;
    let params = params::from_python(boundary, params)?;
    let keys = arrays::u64_array(keys, "keys")?;
    let keys = arrays::readonly(&keys, "keys")?;
    let keys = arrays::as_slice(&keys, "keys")?;
    let built = py.detach(|| guard("build", || lidb_index::build(family, keys, &params)))?;
    Ok(Index::new(built.map_err(index_error)?))
}

/// Decodes an index from the bytes `Index.encode` produced; corrupt bytes raise `ValueError`.
#[pyfunction]
fn decode(py: Python<'_>, data: &[u8]) -> PyResult<Index> {
    let decoded = py.detach(|| guard("decode", || lidb_index::decode(data)))?;
    Ok(Index::new(decoded.map_err(index_error)?))
}

#[pymodule]
fn _lidb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(sosd::read_sosd, m)?)?;
    m.add_function(wrap_pyfunction!(sosd::write_sosd, m)?)?;
    m.add_class::<Index>()?;
    m.add_class::<sorted_keys::SortedKeys>()?;
    let families: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
    m.add("FAMILIES", families)?;
    m.add("DATA_DIR_ENV", lidb_data::DATA_DIR_ENV)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
