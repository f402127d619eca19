"""Type stubs of the native module (python/src/*.rs)."""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, final

from typing_extensions import Self, disjoint_base

import numpy as np
import numpy.typing as npt

__all__ = [
    "DATA_DIR_ENV",
    "FAMILIES",
    "Index",
    "SortedKeys",
    "__version__",
    "build",
    "decode",
    "read_sosd",
    "write_sosd",
]

__version__: str
FAMILIES: List[str]
"""The index families ``build`` accepts: fp, binary, plr, fiting, pgm, rs, rmi, lpa."""
DATA_DIR_ENV: str
"""The environment variable that names the dataset directory (``LIDB_DATA_DIR``)."""

_Keys = Union[npt.NDArray[np.integer], Sequence[int]]
_Path = Union[str, "os.PathLike[str]"]

@final
class Index:
    """A learned index over sorted u64 keys; immutable, shareable between threads."""

    @property
    def family(self) -> str: ...
    @property
    def boundary(self) -> int: ...
    @property
    def key_count(self) -> int: ...
    @property
    def size_bytes(self) -> int:
        """Exact size of the encoded index in bytes (``len(encode())``)."""
    @property
    def is_bounded(self) -> bool:
        """Whether ``search`` keeps the boundary (every family but ``binary``)."""
    def search(self, q: int) -> Tuple[int, int]:
        """``(lo, hi)``: ``keys[lo:hi]`` holds ``lower_bound(q)``; ``hi - lo <= boundary``.
        Raises OverflowError for q outside [0, 2**64)."""
    def search_many(
        self, queries: _Keys
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """``search`` for every query; the GIL is released meanwhile."""
    def lower_bound(self, keys: _Keys, q: int) -> int:
        """``search(q)`` then a binary search of ``keys[lo:hi]``: ``numpy.searchsorted(keys, q)``.
        ``keys`` must be the keys the index was built from (ValueError if their count differs)."""
    def lower_bound_many(self, keys: _Keys, queries: _Keys) -> npt.NDArray[np.uint64]:
        """``lower_bound`` for every query; the GIL is released meanwhile."""
    def stats(self) -> Dict[str, Any]:
        """family, keys, boundary, size_bytes, models and the family's own figures."""
    def encode(self) -> bytes: ...
    def __reduce__(self) -> Tuple[Any, Tuple[bytes]]: ...

@disjoint_base
class SortedKeys:
    """Sorted u64 keys (a copy) and the index built over them: the base class of
    ``lidb.SortedList``, whose scalar queries are these methods. Queries are any real number,
    as for ``bisect`` on a list of ints; NaN raises ValueError, non-numbers TypeError."""

    def __new__(cls, keys: _Keys, index: Index) -> Self:
        """ValueError unless ``keys`` are sorted and are the keys ``index`` was built over."""
    def bisect_left(self, x: object) -> int: ...
    def bisect_right(self, x: object) -> int: ...
    def rank(self, x: object) -> int:
        """Number of elements <= x."""
    def count(self, x: object) -> int: ...
    def find_lt(self, x: object) -> Optional[int]: ...
    def find_le(self, x: object) -> Optional[int]: ...
    def find_gt(self, x: object) -> Optional[int]: ...
    def find_ge(self, x: object) -> Optional[int]: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...

def build(
    family: str,
    keys: _Keys,
    boundary: int,
    *,
    pgm_epsilon_recursive: int = 4,
    rs_radix_bits: int = 8,
    rmi_root: str = "linear",
    lpa_threshold: Optional[int] = None,
    lpa_learning_step: int = 32,
    lpa_learning_rate: float = 0.5,
    fiting_fanout: int = 16,
) -> Index:
    """Builds an index of ``family`` over sorted (non-decreasing) u64 ``keys``.

    Raises ValueError for unsorted keys (naming the first position out of order), an unknown
    family (listing the known ones), a boundary below 2 or a parameter out of range; TypeError
    for an unknown parameter name or keys that are not integers."""

def decode(data: bytes) -> Index:
    """The index ``Index.encode`` wrote; ValueError for corrupt or truncated bytes."""

def read_sosd(path: _Path, *, sorted: bool = True) -> npt.NDArray[np.uint64]:
    """Reads a SOSD u64 file, plain or zstd. ValueError for a malformed file or, with
    ``sorted=True``, keys out of order; OSError (FileNotFoundError, ...) when it cannot be read."""

def write_sosd(path: _Path, keys: _Keys) -> None:
    """Writes a SOSD u64 file, zstd-compressed when ``path`` ends in ``.zst``, atomically."""
