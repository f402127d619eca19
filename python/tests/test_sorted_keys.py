"""The native scalar queries (``lidb._lidb.SortedKeys``, SortedList's base class) against
Python's bisect on a plain sorted list, for every kind of query the Rust side handles itself
(ints, bools, floats, values outside the u64 domain) and those it hands back to Python."""

import bisect
import decimal
import fractions
import pickle
import random

import numpy as np
import pytest

import lidb
from conftest import U64_MAX, make_keys


def all_answers(sl, x):
    return (
        sl.bisect_left(x),
        sl.bisect_right(x),
        sl.rank(x),
        sl.count(x),
        sl.find_lt(x),
        sl.find_le(x),
        sl.find_gt(x),
        sl.find_ge(x),
        x in sl,
    )


def reference_answers(ref, x):
    i, j = bisect.bisect_left(ref, x), bisect.bisect_right(ref, x)
    return (
        i,
        j,
        j,
        j - i,
        ref[i - 1] if i else None,
        ref[j - 1] if j else None,
        ref[j] if j < len(ref) else None,
        ref[i] if i < len(ref) else None,
        x in ref,
    )


EXTREMES = [0, 1, -1, U64_MAX, U64_MAX - 1, 1 << 64, (1 << 64) + 1, -(1 << 100), 1 << 100]
FLOATS = [0.0, -0.0, 0.5, -0.5, -1.5, 1e19, 1.8446744073709552e19, 1e300, -1e300]
FLOATS += [float("inf"), float("-inf"), 2.0**63, 2.0**64 - 2048]


@pytest.mark.parametrize("distribution", ["dense", "duplicates", "extremes", "sparse"])
def test_every_query_kind_matches_bisect(distribution):
    keys = make_keys(distribution, 3_000)
    sl = lidb.SortedList(keys, boundary=8)
    ref = sorted(int(k) for k in keys)
    rng = random.Random(17)
    xs = EXTREMES + FLOATS + [True, False]
    for _ in range(200):
        k = rng.choice(ref)
        xs += [k, k - 1, k + 1, float(k), k + 0.5, k - 0.5, rng.randrange(0, U64_MAX + 1)]
    for x in xs:
        assert all_answers(sl, x) == reference_answers(ref, x), x


def test_numpy_scalars_and_other_numbers():
    ref = [0, 3, 3, 3, 7, 10, U64_MAX]
    sl = lidb.SortedList(ref)
    others = [np.uint64(3), np.int64(-1), np.uint8(7), np.float32(3.0), np.float32(2.5)]
    others += [np.float64(6.5), fractions.Fraction(7, 1), fractions.Fraction(13, 2)]
    others += [np.uint64(U64_MAX), np.bool_(True)]
    for x in others:
        if isinstance(x, np.bool_):
            # Neither an integer nor a real number to Python's bisect helpers: refused.
            with pytest.raises(TypeError):
                sl.bisect_left(x)
            assert x not in sl
            continue
        assert all_answers(sl, x) == reference_answers(ref, x), x


def test_refused_queries():
    sl = lidb.SortedList([1, 2, 3])
    for query in (sl.bisect_left, sl.bisect_right, sl.count, sl.find_le, sl.find_gt):
        with pytest.raises(ValueError, match="NaN"):
            query(float("nan"))
        with pytest.raises(TypeError):
            query("2")
        with pytest.raises(TypeError):
            query(decimal.Decimal(2))
        with pytest.raises(TypeError):
            query(None)
    for x in (float("nan"), np.float32("nan"), "2", None, decimal.Decimal(2), [2]):
        assert x not in sl


def test_count_of_long_runs():
    # Runs of every length around the powers of two that the galloping count steps through.
    lengths = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000]
    ref = sorted(v for v, n in enumerate(lengths) for _ in range(n))
    sl = lidb.SortedList(ref, boundary=4)
    for v, n in enumerate(lengths):
        assert sl.count(v) == n
        assert sl.count(float(v)) == n
        assert sl.count(np.uint64(v)) == n
    assert sl.count(len(lengths)) == 0 and sl.count(-1) == 0 and sl.count(0.5) == 0
    only = lidb.SortedList([U64_MAX] * 5)
    assert only.count(U64_MAX) == 5 and only.count(1 << 64) == 0


def test_sorted_keys_checks_its_arguments():
    keys = np.arange(10, dtype=np.uint64)
    index = lidb.build("pgm", keys, 16)
    base = lidb._lidb.SortedKeys(keys, index)
    assert len(base) == 10 and base.bisect_left(4.5) == 5 and 9 in base
    with pytest.raises(ValueError, match="built over 10"):
        lidb._lidb.SortedKeys(keys[:5], index)
    with pytest.raises(ValueError, match="not sorted"):
        lidb._lidb.SortedKeys(keys[::-1].copy(), index)


def test_pickle_keeps_family_boundary_and_answers():
    keys = make_keys("lognormal", 5_000)
    ss = lidb.SortedSet(keys, family="rs", boundary=32, rs_radix_bits=10)
    again = pickle.loads(pickle.dumps(ss))
    assert type(again) is lidb.SortedSet
    assert again.stats() == ss.stats()
    assert not again.keys.flags.writeable
    for q in keys[::97].tolist():
        assert all_answers(again, q) == all_answers(ss, q)
