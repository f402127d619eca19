"""A pygm-like sorted container over a learned index: ``SortedList`` and ``SortedSet``.

pygm (the PGM-index's Python package) is what researchers know; these classes keep its query
interface (``bisect_left/right``, ``find_lt/le/gt/ge``, ``rank``, ``count``, ``index``,
``range``, ``len``, ``in``, ``[]``, iteration) over any lidb family.

Like pygm, the container copies and sorts the keys it is given (they need not be sorted);
``SortedList`` keeps duplicates and ``SortedSet`` drops them. Unlike pygm it is immutable (no
``+``/``-``), holds unsigned 64-bit integers only, and a slice gives a numpy array, not a new
container. ``find_*`` return ``None`` when there is no such element, as in pygm.

Queries may be any real number (``bisect`` semantics: ``bisect_left(2.5)`` is the position of
the first key >= 2.5) including values outside the u64 domain; NaN raises ``ValueError`` and
non-numbers raise ``TypeError``.

Every lookup is the index's ``lower_bound``: ``search(q)``, which bounds the answer to at most
``boundary`` positions, then a binary search of those positions, both in Rust.
Instances are immutable and safe to share between threads.
"""

from __future__ import annotations

import collections.abc
import math
import numbers
import operator
from typing import Iterator, Optional, Tuple

import numpy as np

from . import _lidb
from ._convert import U64_MAX, as_u64_array

# Elements converted to Python ints at a time while iterating.
_ITER_CHUNK = 4096


# _ceil and _floor: how SortedKeys (Rust) rounds the queries that are neither ints nor floats
# (numpy floats, Fraction, ...) and refuses the rest; ints and floats it handles itself, alike.


def _ceil(x) -> int:
    """The smallest integer >= x (x an integer or a real number)."""
    try:
        return operator.index(x)
    except TypeError:
        pass
    if isinstance(x, numbers.Real):
        f = float(x)
        if math.isnan(f):
            raise ValueError("cannot search for NaN")
        if math.isinf(f):
            return -1 if f < 0 else U64_MAX + 1
        return int(math.ceil(x))
    raise TypeError(f"keys are integers: cannot search for a {type(x).__name__}")


def _floor(x) -> int:
    """The largest integer <= x."""
    try:
        return operator.index(x)
    except TypeError:
        pass
    if isinstance(x, numbers.Real):
        f = float(x)
        if math.isnan(f):
            raise ValueError("cannot search for NaN")
        if math.isinf(f):
            return -1 if f < 0 else U64_MAX + 1
        return int(math.floor(x))
    raise TypeError(f"keys are integers: cannot search for a {type(x).__name__}")


class SortedList(_lidb.SortedKeys, collections.abc.Sequence):
    """An immutable sorted list of u64 keys, duplicates kept, searched through a learned index.

    Args:
        keys: the elements, in any order (a numpy integer array or a sequence of ints).
        family: the index family, one of ``lidb.FAMILIES`` (default ``"pgm"``).
        boundary: the position boundary B of the index (default 64, pygm's epsilon).
        **params: family-specific parameters, as for ``lidb.build``.

    The scalar queries (``bisect_left/right``, ``rank``, ``count``, ``find_lt/le/gt/ge``,
    ``in``, ``len``) are the native base class's (``lidb._lidb.SortedKeys``): one call into
    Rust each, over the base class's own copy of the keys.

    Example:
        >>> sl = lidb.SortedList([0, 1, 34, 144, 1, 55, 233, 2, 3, 21, 89, 5, 8, 13])
        >>> sl.find_gt(9), sl.count(1), 42 in sl
        (13, 2, False)
        >>> list(sl.range(0, 21, inclusive=(False, True)))
        [1, 1, 2, 3, 5, 8, 13, 21]
    """

    _keys: np.ndarray
    _index: _lidb.Index

    def __new__(cls, keys=(), family: str = "pgm", boundary: int = 64, **params):
        arr = np.sort(as_u64_array(keys, "keys"), kind="stable")
        arr = cls._prepare(arr)
        arr.flags.writeable = False
        return cls._assemble(arr, _lidb.build(family, arr, boundary, **params))

    @classmethod
    def _assemble(cls, sorted_keys: np.ndarray, index: _lidb.Index):
        """The container over read-only sorted keys and the index built over them."""
        self = super().__new__(cls, sorted_keys, index)
        self._keys = sorted_keys
        self._index = index
        return self

    def __reduce__(self):
        return (_restore, (type(self), self._keys, self._index))

    @staticmethod
    def _prepare(sorted_keys: np.ndarray) -> np.ndarray:
        return sorted_keys

    # --- the keys and the index ---------------------------------------------------------------------

    @property
    def keys(self) -> np.ndarray:
        """The sorted keys, a read-only numpy uint64 array."""
        return self._keys

    @property
    def learned_index(self) -> _lidb.Index:
        """The ``lidb.Index`` built over the keys."""
        return self._index

    def stats(self) -> dict:
        """The index's ``stats()``, plus ``data_size_bytes``, the size of the keys."""
        d = self._index.stats()
        d["data_size_bytes"] = int(self._keys.nbytes)
        return d

    # --- pygm's queries (the scalar ones are SortedKeys's) --------------------------------

    def index(self, x, start: Optional[int] = None, stop: Optional[int] = None) -> int:
        """Position of the first element equal to x within ``[start, stop)``; ValueError if none."""
        n = len(self._keys)
        start, stop, _ = slice(start, stop).indices(n)
        i = max(self.bisect_left(x), start)
        if i < stop and int(self._keys[i]) == x:
            return i
        raise ValueError(f"{x!r} is not in the list")

    def range(
        self,
        a,
        b,
        inclusive: Tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[int]:
        """The elements between a and b in order (reversed if ``reverse``), each bound
        inclusive or not as ``inclusive`` says."""
        lo = self.bisect_left(a) if inclusive[0] else self.bisect_right(a)
        hi = self.bisect_right(b) if inclusive[1] else self.bisect_left(b)
        view = self._keys[lo : max(lo, hi)]
        return _iterate(view[::-1] if reverse else view)

    # --- the sequence protocol -------------------------------------------------------------

    def __getitem__(self, i):
        """An element as a Python int; a slice as a numpy uint64 array (a copy)."""
        if isinstance(i, slice):
            return self._keys[i].copy()
        return int(self._keys[operator.index(i)])

    def __iter__(self) -> Iterator[int]:
        return _iterate(self._keys)

    def __reversed__(self) -> Iterator[int]:
        return _iterate(self._keys[::-1])

    def __repr__(self) -> str:
        n = len(self._keys)
        if n < 6:
            preview = repr([int(k) for k in self._keys])
        else:
            k = self._keys
            preview = f"[{k[0]}, {k[1]}, {k[2]}, ..., {k[-2]}, {k[-1]}]"
        return f"{type(self).__name__}({preview}, family={self._index.family!r})"


class SortedSet(SortedList):
    """A ``SortedList`` without duplicates: equal keys are kept once."""

    @staticmethod
    def _prepare(sorted_keys: np.ndarray) -> np.ndarray:
        if sorted_keys.size == 0:
            return sorted_keys
        keep = np.empty(sorted_keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=keep[1:])
        return sorted_keys[keep]


def _restore(cls, sorted_keys: np.ndarray, index: _lidb.Index) -> SortedList:
    """Unpickles a container: its keys and its index as they were (no rebuild)."""
    sorted_keys.flags.writeable = False
    return cls._assemble(sorted_keys, index)


def _iterate(view: np.ndarray) -> Iterator[int]:
    for start in range(0, len(view), _ITER_CHUNK):
        yield from view[start : start + _ITER_CHUNK].tolist()
