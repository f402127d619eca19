"""What converts to the 1-D uint64 arrays the native module works on, and what is refused.

The native functions call :func:`as_u64_array` for anything that is not already a contiguous
numpy uint64 array, so this is the one place that decides. Values a u64 cannot hold are refused
with the position of the first one, never wrapped around (numpy's own ``astype`` would turn -1
into 2**64 - 1).
"""

from __future__ import annotations

import numpy as np

U64_MAX = (1 << 64) - 1


def as_u64_array(values, what: str = "keys") -> np.ndarray:
    """Returns ``values`` as a contiguous 1-D numpy uint64 array.

    Accepts numpy arrays of any integer dtype and sequences of Python ints; raises ``ValueError``
    for a negative or too large value (naming its position) or for more than one dimension, and
    ``TypeError`` for floats, bools and anything else that is not integers.
    """
    if isinstance(values, np.ndarray):
        arr = values
    else:
        try:
            arr = np.asarray(values)
        except OverflowError:
            arr = np.asarray(values, dtype=object)
        if arr.ndim == 1 and arr.dtype.kind == "f":
            # numpy picks float64 for ints beside ones >= 2**63: check the Python values.
            arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got {arr.ndim} dimensions")
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    kind = arr.dtype.kind
    if arr.dtype == np.uint64:
        return np.ascontiguousarray(arr)
    if kind == "u":
        return arr.astype(np.uint64)
    if kind == "i":
        negative = np.flatnonzero(arr < 0)
        if negative.size:
            i = int(negative[0])
            raise ValueError(f"{what}[{i}] = {int(arr[i])} is not an unsigned 64-bit integer")
        return arr.astype(np.uint64)
    if kind == "O":
        return _from_objects(arr, what)
    raise TypeError(
        f"{what} must be unsigned 64-bit integers (a numpy uint64 array), got dtype {arr.dtype}"
    )


def _from_objects(arr: np.ndarray, what: str) -> np.ndarray:
    """Python ints too large for numpy to pick a dtype for: checked one by one."""
    out = np.empty(arr.size, dtype=np.uint64)
    for i, v in enumerate(arr.tolist()):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what}[{i}] = {v!r} is not an integer")
        if not 0 <= int(v) <= U64_MAX:
            raise ValueError(f"{what}[{i}] = {int(v)} is not an unsigned 64-bit integer")
        out[i] = int(v)
    return out
