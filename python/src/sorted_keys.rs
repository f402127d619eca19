//! `lidb._lidb.SortedKeys`: sorted u64 keys and the index built over them, searched in one call.
//!
//! The base class of the pure-Python `lidb.SortedList` (python/lidb/sorted_list.py): its scalar
//! queries (`bisect_left/right`, `count`, `find_lt/le/gt/ge`, `in`, `len`) are methods of this
//! class, so `sl.bisect_left(x)` is one call into Rust, with no Python frame and no numpy borrow
//! on the way. For that the class holds its own copy of the keys (8 bytes a key, beside the
//! numpy array the Python side keeps for slicing and iteration): reading a numpy array from Rust
//! without `unsafe` needs a checked borrow on every call, which cost more than the search.
//!
//! Queries follow `bisect` on a list of Python ints: any real number, including values outside
//! the u64 domain. Ints (bools too) and floats are handled here; other numbers (numpy floats,
//! `Fraction`, ...) go through `lidb.sorted_list._ceil` / `_floor` once, which also decide what
//! is refused (NaN: ValueError, non-numbers: TypeError).
//!
//! Threads: immutable once built (`frozen`), so any Python thread may call any method; the
//! scalar calls keep the GIL (they take well under a microsecond).
//!
//! Invariants:
//! 1. `keys` is sorted (non-decreasing) and is the key set `index` was built over (the
//!    constructor checks both), so `lower_bound` is `keys.partition_point(|k| k < q)`.
//! 2. No panic reaches Python: searches go through `errors::guard`.

use std::sync::Arc;

use lidb_index::LearnedIndex;
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyFloat;

use crate::arrays;
use crate::errors::guard;
use crate::index::Index;

/// 2^64 as an f64 (exact): the first float above every u64.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// An integer query (the ceiling or floor of a real number), placed against the u64 domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    /// Below 0: before every key.
    Below,
    /// A u64 value.
    At(u64),
    /// Above 2^64 - 1: after every key.
    Above,
}

impl Query {
    /// The query plus one (`floor(x) + 1` of `bisect_right`).
    fn next(self) -> Query {
        match self {
            Query::Below => Query::Below,
            Query::At(q) => q.checked_add(1).map_or(Query::Above, Query::At),
            Query::Above => Query::Above,
        }
    }
}

/// Rounding of a non-integer query to the integer lattice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    Ceil,
    Floor,
}

impl Round {
    fn python_helper(self) -> &'static str {
        match self {
            Round::Ceil => "_ceil",
            Round::Floor => "_floor",
        }
    }
}

/// Sorted u64 keys with the learned index built over them (see the module docs).
#[pyclass(frozen, subclass, module = "lidb._lidb", name = "SortedKeys")]
#[derive(Debug)]
pub struct SortedKeys {
    keys: Box<[u64]>,
    index: Arc<dyn LearnedIndex>,
}

impl SortedKeys {
    /// The first position whose key is >= q.
    fn lower_bound(&self, q: Query) -> PyResult<usize> {
        match q {
            Query::Below => Ok(0),
            Query::Above => Ok(self.keys.len()),
            Query::At(q) => guard("lower_bound", || {
                lidb_index::lower_bound_with(self.index.as_ref(), &self.keys, q) as usize
            }),
        }
    }

    fn bisect(&self, x: &Bound<'_, PyAny>, right: bool) -> PyResult<usize> {
        if right {
            self.lower_bound(to_query(x, Round::Floor)?.next())
        } else {
            self.lower_bound(to_query(x, Round::Ceil)?)
        }
    }

    /// How many keys from position `lo` on equal `q`: a galloping search from `lo` (a run of
    /// length r costs O(log r) reads, and a miss or a unique key one or two, where a second
    /// `lower_bound` would cost a whole search).
    fn run_length(&self, lo: usize, q: u64) -> usize {
        let Some(run) = self.keys.get(lo..) else {
            return 0;
        };
        // Invariant: run[..known] all equal q.
        let mut known = 0;
        let mut step = 1;
        while run.get(known) == Some(&q) {
            known += 1;
            let probe = known.saturating_add(step).min(run.len());
            if run.get(probe - 1) == Some(&q) {
                known = probe;
                step = step.saturating_mul(2);
            } else {
                let tail = run.get(known..probe - 1).unwrap_or_default();
                return known + tail.partition_point(|&k| k == q);
            }
        }
        known
    }

    /// The key at `i`, if any.
    fn key(&self, i: usize) -> Option<u64> {
        self.keys.get(i).copied()
    }

    /// The key before position `i`, if any.
    fn key_before(&self, i: usize) -> Option<u64> {
        i.checked_sub(1).and_then(|i| self.key(i))
    }
}

#[pymethods]
impl SortedKeys {
    /// Takes a copy of `keys` (sorted, non-decreasing u64) and shares `index`, which must have
    /// been built over them.
    #[new]
    fn new(keys: &Bound<'_, PyAny>, index: &Index) -> PyResult<SortedKeys> {
        let array = arrays::u64_array(keys, "keys")?;
        let borrowed = arrays::readonly(&array, "keys")?;
        let keys: Box<[u64]> = arrays::as_slice(&borrowed, "keys")?.into();
        let index = index.shared();
        if keys.len() as u64 != index.key_count() {
            return Err(PyValueError::new_err(format!(
                "keys hold {} keys but the index was built over {}",
                keys.len(),
                index.key_count()
            )));
        }
        if let Some(i) = keys.windows(2).position(|w| w.first() > w.get(1)) {
            return Err(PyValueError::new_err(format!(
                "keys are not sorted: keys[{}] > keys[{}]",
                i,
                i + 1
            )));
        }
        Ok(SortedKeys { keys, index })
    }

    /// Position of the first element >= x (as `bisect.bisect_left`).
    fn bisect_left(&self, x: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.bisect(x, false)
    }

    /// Position after the last element <= x (as `bisect.bisect_right`).
    fn bisect_right(&self, x: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.bisect(x, true)
    }

    /// Number of elements <= x.
    fn rank(&self, x: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.bisect(x, true)
    }

    /// Number of elements equal to x.
    fn count(&self, x: &Bound<'_, PyAny>) -> PyResult<usize> {
        match exact_value(x) {
            Exact::Value(q) => Ok(self.run_length(self.lower_bound(Query::At(q))?, q)),
            Exact::Absent => {
                // Nothing equals x, but NaN is still refused, as by bisect_left.
                to_query(x, Round::Ceil)?;
                Ok(0)
            }
            Exact::Other => {
                let lo = self.bisect(x, false)?;
                Ok(self.bisect(x, true)?.saturating_sub(lo))
            }
        }
    }

    /// The largest element < x, or None.
    fn find_lt(&self, x: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.key_before(self.bisect(x, false)?))
    }

    /// The largest element <= x, or None.
    fn find_le(&self, x: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.key_before(self.bisect(x, true)?))
    }

    /// The smallest element > x, or None.
    fn find_gt(&self, x: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.key(self.bisect(x, true)?))
    }

    /// The smallest element >= x, or None.
    fn find_ge(&self, x: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.key(self.bisect(x, false)?))
    }

    fn __len__(&self) -> usize {
        self.keys.len()
    }

    /// Whether an element equals x; False (not an exception) for NaN and non-numbers.
    fn __contains__(&self, x: &Bound<'_, PyAny>) -> PyResult<bool> {
        match exact_value(x) {
            Exact::Value(q) => Ok(self.key(self.lower_bound(Query::At(q))?) == Some(q)),
            Exact::Absent => Ok(false),
            // Other numbers: as `bisect_left(x)`, then the key compared with x by Python.
            Exact::Other => match self.bisect(x, false) {
                Ok(i) => match self.key(i) {
                    Some(k) => x.eq(k),
                    None => Ok(false),
                },
                Err(e) if e.is_instance_of::<PyTypeError>(x.py()) => Ok(false),
                Err(e) if e.is_instance_of::<PyValueError>(x.py()) => Ok(false),
                Err(e) => Err(e),
            },
        }
    }
}

/// `x` as an integer query, rounded as `round` says when it is not an integer.
fn to_query(x: &Bound<'_, PyAny>, round: Round) -> PyResult<Query> {
    if let Ok(f) = x.cast::<PyFloat>() {
        return float_query(f.value(), round);
    }
    match x.extract::<u64>() {
        Ok(q) => Ok(Query::At(q)),
        // An integer (int or anything with `__index__`) outside the u64 domain.
        Err(e) if e.is_instance_of::<PyOverflowError>(x.py()) => {
            Ok(if x.lt(0)? { Query::Below } else { Query::Above })
        }
        // Not an integer: the Python helper rounds other real numbers and refuses the rest.
        Err(_) => {
            let helper = x
                .py()
                .import("lidb.sorted_list")?
                .getattr(round.python_helper())?;
            let rounded = helper.call1((x,))?;
            match rounded.extract::<u64>() {
                Ok(q) => Ok(Query::At(q)),
                Err(_) => Ok(if rounded.lt(0)? {
                    Query::Below
                } else {
                    Query::Above
                }),
            }
        }
    }
}

/// The integer query of a float: NaN is refused, infinities lie outside the domain.
fn float_query(f: f64, round: Round) -> PyResult<Query> {
    if f.is_nan() {
        return Err(PyValueError::new_err("cannot search for NaN"));
    }
    let r = match round {
        Round::Ceil => f.ceil(),
        Round::Floor => f.floor(),
    };
    Ok(if r < 0.0 {
        Query::Below
    } else if r >= TWO_POW_64 {
        Query::Above
    } else {
        Query::At(r as u64)
    })
}

/// What can equal x among u64 keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exact {
    /// x is an int, an integer-valued float, or has `__index__`, and equals this u64.
    Value(u64),
    /// x is an int or float that no u64 equals (a fraction, NaN, infinite or out of range).
    Absent,
    /// x is something else: Python decides.
    Other,
}

fn exact_value(x: &Bound<'_, PyAny>) -> Exact {
    if let Ok(f) = x.cast::<PyFloat>() {
        let f = f.value();
        return match float_query(f, Round::Floor) {
            Ok(Query::At(q)) if f.fract() == 0.0 => Exact::Value(q),
            _ => Exact::Absent,
        };
    }
    match x.extract::<u64>() {
        Ok(q) => Exact::Value(q),
        Err(e) if e.is_instance_of::<PyOverflowError>(x.py()) => Exact::Absent,
        Err(_) => Exact::Other,
    }
}
