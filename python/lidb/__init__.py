"""lidb: learned indexes over sorted u64 keys, from Python.

The native part (``lidb._lidb``, Rust) builds and searches indexes and reads and writes SOSD
files; the pure-Python part adds a pygm-like sorted container:

- ``build(family, keys, boundary, **params)`` -> ``Index`` with ``search(q) -> (lo, hi)``,
  ``search_many(qs) -> (lo_array, hi_array)``, ``size_bytes``, ``stats()``, ``encode()``;
- ``decode(data)`` -> ``Index``;
- ``read_sosd(path)`` -> numpy uint64 array, ``write_sosd(path, keys)`` (plain, or zstd for a
  name ending in ``.zst``);
- ``SortedList`` / ``SortedSet``: ``bisect_left/right``, ``find_le/ge/lt/gt``, ``range`` ...

For every query q, ``search(q)`` returns ``(lo, hi)`` with ``keys[lo:hi]`` holding the first
position whose key is >= q, and ``hi - lo <= boundary`` (every family but ``binary``).
"""

from ._lidb import (
    DATA_DIR_ENV,
    FAMILIES,
    Index,
    __version__,
    build,
    decode,
    read_sosd,
    write_sosd,
)
from .sorted_list import SortedList, SortedSet

__all__ = [
    "DATA_DIR_ENV",
    "FAMILIES",
    "Index",
    "SortedList",
    "SortedSet",
    "__version__",
    "build",
    "decode",
    "read_sosd",
    "write_sosd",
]
