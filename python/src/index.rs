//! `lidb.Index`: one built (or decoded) index of any family, immutable, shared by any number of
//! Python threads. It holds no keys, like the Rust index: `search` answers the range of positions
//! `[lo, hi)` that holds `lower_bound(q)` in the keys it was built over, at most `boundary` wide
//! (the contract of `lidb_index::bound`).

use std::sync::Arc;

use lidb_index::{LearnedIndex, StatValue};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::arrays;
use crate::errors::guard;

/// The `(lo, hi)` arrays of `search_many`.
type Bounds<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>);

/// A learned index over sorted u64 keys (see `lidb.build`).
#[pyclass(frozen, module = "lidb", name = "Index")]
#[derive(Debug)]
pub struct Index {
    inner: Arc<dyn LearnedIndex>,
}

impl Index {
    pub fn new(inner: Box<dyn LearnedIndex>) -> Index {
        Index {
            inner: Arc::from(inner),
        }
    }

    /// The index itself, shared with a `SortedKeys` (indexes are immutable).
    pub fn shared(&self) -> Arc<dyn LearnedIndex> {
        Arc::clone(&self.inner)
    }

    /// `keys` if it is as long as the key set the index was built over (a cheap guard against
    /// passing another array: the answer over other keys would be meaningless, though never a
    /// panic, since `lower_bound_with` reads only the positions that exist).
    fn same_keys<'a>(&self, keys: &'a [u64]) -> PyResult<&'a [u64]> {
        if keys.len() as u64 != self.inner.key_count() {
            return Err(PyValueError::new_err(format!(
                "keys hold {} keys but the index was built over {}: pass the keys it was built from",
                keys.len(),
                self.inner.key_count()
            )));
        }
        Ok(keys)
    }
}

#[pymethods]
impl Index {
    /// The range `(lo, hi)` of positions that holds `lower_bound(q)`, at most `boundary` wide.
    fn search(&self, q: u64) -> PyResult<(u64, u64)> {
        let b = guard("search", || self.inner.search(q))?;
        Ok((b.lo, b.hi))
    }

    /// `search` for every query of a 1-D array: two uint64 arrays `(lo, hi)`, GIL released.
    fn search_many<'py>(&self, queries: &Bound<'py, PyAny>) -> PyResult<Bounds<'py>> {
        let py = queries.py();
        let queries = arrays::u64_array(queries, "queries")?;
        let queries = arrays::readonly(&queries, "queries")?;
        let queries = arrays::as_slice(&queries, "queries")?;
        let (lo, hi) = py.detach(|| {
            guard("search_many", || {
                let mut lo = Vec::with_capacity(queries.len());
                let mut hi = Vec::with_capacity(queries.len());
                for &q in queries {
                    let b = self.inner.search(q);
                    lo.push(b.lo);
                    hi.push(b.hi);
                }
                (lo, hi)
            })
        })?;
        Ok((PyArray1::from_vec(py, lo), PyArray1::from_vec(py, hi)))
    }

    /// The full lookup over the keys the index was built from: `search(q)`, then a binary search
    /// of `keys[lo:hi]`, so the same as `numpy.searchsorted(keys, q)`. Pass the same uint64
    /// array every time (another dtype is converted on each call).
    fn lower_bound(&self, keys: &Bound<'_, PyAny>, q: u64) -> PyResult<u64> {
        let keys = arrays::u64_array(keys, "keys")?;
        let keys = arrays::readonly(&keys, "keys")?;
        let keys = self.same_keys(arrays::as_slice(&keys, "keys")?)?;
        guard("lower_bound", || {
            lidb_index::lower_bound_with(self.inner.as_ref(), keys, q)
        })
    }

    /// `lower_bound` for every query of a 1-D array, as a uint64 array; GIL released.
    fn lower_bound_many<'py>(
        &self,
        keys: &Bound<'py, PyAny>,
        queries: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let py = queries.py();
        let keys = arrays::u64_array(keys, "keys")?;
        let keys = arrays::readonly(&keys, "keys")?;
        let keys = self.same_keys(arrays::as_slice(&keys, "keys")?)?;
        let queries = arrays::u64_array(queries, "queries")?;
        let queries = arrays::readonly(&queries, "queries")?;
        let queries = arrays::as_slice(&queries, "queries")?;
        let positions = py.detach(|| {
            guard("lower_bound_many", || {
                let index = self.inner.as_ref();
                queries
                    .iter()
                    .map(|&q| lidb_index::lower_bound_with(index, keys, q))
                    .collect::<Vec<u64>>()
            })
        })?;
        Ok(PyArray1::from_vec(py, positions))
    }

    /// The family's name, one of `lidb.FAMILIES`.
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family().name()
    }

    /// The position boundary B the index was built with.
    #[getter]
    fn boundary(&self) -> u64 {
        self.inner.boundary()
    }

    /// The number of keys the index was built over.
    #[getter]
    fn key_count(&self) -> u64 {
        self.inner.key_count()
    }

    /// Exact size of the encoded index in bytes (`len(encode())`).
    #[getter]
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    /// Whether `search` keeps the boundary (every family but `binary`).
    #[getter]
    fn is_bounded(&self) -> bool {
        self.inner.family().is_bounded()
    }

    /// The structure of the index: family, keys, boundary, size_bytes, models, and the
    /// family-specific figures named as in `lidb index stats --json`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = guard("stats", || self.inner.stats())?;
        let d = PyDict::new(py);
        d.set_item("family", self.family())?;
        d.set_item("keys", self.key_count())?;
        d.set_item("boundary", self.boundary())?;
        d.set_item("size_bytes", self.size_bytes())?;
        d.set_item("models", stats.models)?;
        for (name, value) in stats.details {
            match value {
                StatValue::U64(v) => d.set_item(name, v)?,
                StatValue::F64(v) => d.set_item(name, v)?,
                StatValue::List(v) => d.set_item(name, v)?,
            }
        }
        Ok(d)
    }

    /// The self-describing, checksummed encoding (docs/format/index.md); `lidb.decode` reads it.
    fn encode<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py.detach(|| guard("encode", || self.inner.encode()))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Pickling goes through the encoding: `lidb.decode(index.encode())`.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let decode = py.import("lidb")?.getattr("decode")?;
        let args = PyTuple::new(py, [self.encode(py)?])?;
        PyTuple::new(py, [decode, args.into_any()])
    }

    fn __repr__(&self) -> String {
        format!(
            "lidb.Index(family='{}', keys={}, boundary={}, size_bytes={})",
            self.family(),
            self.key_count(),
            self.boundary(),
            self.size_bytes()
        )
    }
}
