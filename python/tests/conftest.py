"""Shared fixtures of the lidb Python tests: seeded key distributions, and the real-data
directory found as the Rust tests find it (crates/lidb-data/src/datadir.rs)."""

import os
from pathlib import Path

import numpy as np
import pytest

import lidb

U64_MAX = (1 << 64) - 1
SEED = 20261123

# The repository root: python/tests/conftest.py is two levels below it.
REPO_ROOT = Path(__file__).resolve().parents[2]


def _dense(rng, n):
    return np.arange(1000, 1000 + n, dtype=np.uint64)


def _sparse(rng, n):
    return np.sort(rng.integers(0, U64_MAX, n, dtype=np.uint64, endpoint=True))


def _duplicates(rng, n):
    # Few distinct values, long runs of each (the staircase's second points).
    distinct = np.sort(rng.integers(0, 1 << 40, 50, dtype=np.uint64))
    return np.sort(rng.choice(distinct, n))


def _extremes(rng, n):
    # Runs of 0 and of 2**64 - 1 around random keys across the whole domain.
    middle = rng.integers(1, U64_MAX, n - 200, dtype=np.uint64)
    ends = np.array([0] * 100 + [U64_MAX] * 100, dtype=np.uint64)
    return np.sort(np.concatenate([middle, ends]))


def _lognormal(rng, n):
    x = rng.lognormal(0.0, 2.0, n) * 1e9
    return np.sort(np.minimum(x, 1.8e19).astype(np.uint64))


def _clustered(rng, n):
    centers = rng.integers(0, 1 << 62, 20, dtype=np.uint64)
    offsets = rng.integers(0, 1 << 20, n, dtype=np.uint64)
    return np.sort(rng.choice(centers, n) + offsets)


DISTRIBUTIONS = {
    "dense": _dense,
    "sparse": _sparse,
    "duplicates": _duplicates,
    "extremes": _extremes,
    "lognormal": _lognormal,
    "clustered": _clustered,
}


def make_keys(name: str, n: int, seed: int = SEED) -> np.ndarray:
    """Seeded sorted uint64 keys of distribution `name`."""
    return DISTRIBUTIONS[name](np.random.default_rng(seed), n)


def queries_for(keys: np.ndarray, count: int, seed: int = SEED) -> np.ndarray:
    """Queries that probe every case: present keys, their neighbours, random u64, extremes."""
    rng = np.random.default_rng(seed + 1)
    parts = [np.array([0, 1, U64_MAX - 1, U64_MAX], dtype=np.uint64)]
    parts.append(rng.integers(0, U64_MAX, count, dtype=np.uint64, endpoint=True))
    if keys.size:
        present = rng.choice(keys, count)
        parts += [present, present[present > 0] - 1, present[present < U64_MAX] + 1]
    return np.concatenate(parts)


def data_dir():
    """The dataset directory: $LIDB_DATA_DIR, else <repo>/../shared/datasets, else
    ../shared/datasets from the current directory; None when none is a directory."""
    candidates = [
        os.environ.get(lidb.DATA_DIR_ENV),
        REPO_ROOT / ".." / "shared" / "datasets",
        Path("..") / "shared" / "datasets",
    ]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


@pytest.fixture
def real_dataset():
    """Returns a function name -> path of a real dataset, skipping visibly when it is absent."""

    def find(name):
        d = data_dir()
        if d is None:
            pytest.skip(f"dataset directory not found; set {lidb.DATA_DIR_ENV}")
        path = d / name
        if not path.is_file():
            pytest.skip(f"dataset {name} not found in {d}; set {lidb.DATA_DIR_ENV}")
        return path

    return find
