"""The pygm-like container against Python's bisect module on a plain sorted list."""

import bisect
import pickle
import random

import numpy as np
import pytest

import lidb
from conftest import U64_MAX, make_keys

FAMILIES_UNDER_TEST = ["pgm", "rs", "fp", "binary", "lpa"]


def reference_find(ref, x):
    """find_lt, find_le, find_gt, find_ge of the bisect documentation, None when absent."""
    i, j = bisect.bisect_left(ref, x), bisect.bisect_right(ref, x)
    return (
        ref[i - 1] if i else None,
        ref[j - 1] if j else None,
        ref[j] if j < len(ref) else None,
        ref[i] if i < len(ref) else None,
    )


def probes(ref, rng, count):
    """Present keys, neighbours, random u64, values outside the domain, and floats."""
    xs = [0, 1, -1, -(1 << 70), U64_MAX, U64_MAX - 1, 1 << 64, 1 << 70, 0.5, -0.5, 1e30]
    xs += [float("inf"), float("-inf")]
    for _ in range(count):
        if ref:
            k = rng.choice(ref)
            xs += [k, k - 1, k + 1, k + 0.5, k - 0.25]
        xs.append(rng.randrange(0, U64_MAX + 1))
    return xs


@pytest.mark.parametrize("family", FAMILIES_UNDER_TEST)
@pytest.mark.parametrize("distribution", ["dense", "duplicates", "extremes", "sparse"])
def test_queries_match_bisect(family, distribution):
    keys = make_keys(distribution, 5_000)
    rng = random.Random(11)
    shuffled = keys.copy()
    np.random.default_rng(3).shuffle(shuffled)
    sl = lidb.SortedList(shuffled, family=family, boundary=16)
    ref = sorted(int(k) for k in keys)
    assert len(sl) == len(ref)
    assert list(sl) == ref
    assert list(reversed(sl)) == ref[::-1]
    for x in probes(ref, rng, 300):
        assert sl.bisect_left(x) == bisect.bisect_left(ref, x), x
        assert sl.bisect_right(x) == bisect.bisect_right(ref, x), x
        assert sl.rank(x) == bisect.bisect_right(ref, x), x
        assert sl.count(x) == ref.count(x) if isinstance(x, int) else True
        got = (sl.find_lt(x), sl.find_le(x), sl.find_gt(x), sl.find_ge(x))
        assert got == reference_find(ref, x), x
        assert (x in sl) == (x in ref), x


def test_range_matches_a_filter():
    keys = make_keys("duplicates", 3_000)
    sl = lidb.SortedList(keys, boundary=8)
    ref = sorted(int(k) for k in keys)
    rng = random.Random(5)
    for _ in range(200):
        a, b = sorted(rng.choice(ref) + rng.randint(-2, 2) for _ in range(2))
        for inc in [(True, True), (True, False), (False, True), (False, False)]:
            expected = [
                k for k in ref if (a <= k if inc[0] else a < k) and (k <= b if inc[1] else k < b)
            ]
            assert list(sl.range(a, b, inclusive=inc)) == expected
            assert list(sl.range(a, b, inclusive=inc, reverse=True)) == expected[::-1]
    assert list(sl.range(10, 5)) == []
    assert list(sl.range(-1, 1 << 70)) == ref


def test_pygm_example():
    sl = lidb.SortedList([0, 1, 34, 144, 1, 55, 233, 2, 3, 21, 89, 5, 8, 13])
    assert sl.find_gt(9) == 13
    assert sl.count(1) == 2
    assert 42 not in sl
    assert list(sl.range(0, 21, inclusive=(False, True))) == [1, 1, 2, 3, 5, 8, 13, 21]
    assert sl.rank(0) == 1
    assert repr(sl) == "SortedList([0, 1, 1, ..., 144, 233], family='pgm')"


def test_sequence_protocol():
    sl = lidb.SortedList([30, 10, 20, 20])
    assert sl[0] == 10 and sl[-1] == 30 and isinstance(sl[1], int)
    assert sl[np.int64(2)] == 20
    with pytest.raises(IndexError):
        sl[4]
    part = sl[1:3]
    assert isinstance(part, np.ndarray) and part.tolist() == [20, 20]
    assert sl.index(20) == 1
    assert sl.index(20, 2) == 2
    with pytest.raises(ValueError):
        sl.index(20, 0, 1)
    with pytest.raises(ValueError):
        sl.index(25)
    assert "x" not in sl and None not in sl and float("nan") not in sl
    assert 20.0 in sl and 20.5 not in sl
    with pytest.raises(ValueError, match="NaN"):
        sl.bisect_left(float("nan"))
    with pytest.raises(TypeError):
        sl.bisect_left("20")


def test_keys_are_sorted_copies_and_read_only():
    source = np.array([3, 1, 2], dtype=np.uint64)
    sl = lidb.SortedList(source)
    source[0] = 99
    assert list(sl) == [1, 2, 3]
    assert not sl.keys.flags.writeable
    with pytest.raises(ValueError):
        sl.keys[0] = 5


def test_sorted_set_drops_duplicates():
    keys = make_keys("duplicates", 4_000)
    ss = lidb.SortedSet(keys)
    ref = sorted(set(int(k) for k in keys))
    assert list(ss) == ref
    for x in ref[::7]:
        assert ss.count(x) == 1
        assert ss.bisect_left(x) == bisect.bisect_left(ref, x)
    assert list(lidb.SortedSet([])) == []


def test_empty_and_extreme_containers():
    empty = lidb.SortedList()
    assert len(empty) == 0 and list(empty) == []
    assert empty.bisect_left(5) == 0 and empty.find_ge(0) is None and 0 not in empty
    ends = lidb.SortedList([U64_MAX, 0, U64_MAX])
    assert ends.find_le(U64_MAX) == U64_MAX
    assert ends.bisect_left(U64_MAX) == 1 and ends.bisect_right(U64_MAX) == 3
    assert ends.find_gt(0) == U64_MAX and ends.find_lt(0) is None


def test_stats_and_pickle():
    sl = lidb.SortedList(make_keys("lognormal", 10_000), family="rs", boundary=32)
    stats = sl.stats()
    assert stats["family"] == "rs" and stats["data_size_bytes"] == 80_000
    assert sl.learned_index.size_bytes == stats["size_bytes"]
    again = pickle.loads(pickle.dumps(sl))
    assert list(again) == list(sl)
    assert again.bisect_left(12345) == sl.bisect_left(12345)


def test_bad_container_arguments():
    with pytest.raises(ValueError, match="known"):
        lidb.SortedList([1, 2], family="nope")
    with pytest.raises(ValueError, match="keys\\[0\\]"):
        lidb.SortedList([-1, 2])
    with pytest.raises(ValueError, match="boundary"):
        lidb.SortedList([1, 2], boundary=1)
