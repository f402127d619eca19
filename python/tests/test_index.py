"""The conformance harness from Python: every family x boundary x distribution, checked against
numpy.searchsorted (the reference lower_bound) through search and search_many."""

import pickle
import threading
import time

import numpy as np
import pytest

import lidb
from conftest import DISTRIBUTIONS, U64_MAX, make_keys, queries_for

BOUNDARIES = [2, 16, 128]
N = 20_000


def check_contract(index, keys, queries):
    """The bound contract of crates/lidb-index/src/bound.rs for every query, vectorised."""
    n = keys.size
    lo, hi = index.search_many(queries)
    assert lo.dtype == np.uint64 and hi.dtype == np.uint64
    assert lo.shape == queries.shape and hi.shape == queries.shape
    lb = np.searchsorted(keys, queries, side="left").astype(np.uint64)
    bad = ~((lo <= lb) & (lb <= hi) & (hi <= n) & ((lb == n) | (lb < hi)))
    if index.is_bounded:
        bad |= (hi - lo) > index.boundary
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        pytest.fail(
            f"{index!r}: query {int(queries[i])} answered [{int(lo[i])}, {int(hi[i])}), "
            f"lower_bound is {int(lb[i])}"
        )
    # The full lookup in Rust gives numpy's answer for every query.
    assert np.array_equal(index.lower_bound_many(keys, queries), lb)
    # The last-mile search inside every window gives numpy's answer.
    sample = range(0, queries.size, max(1, queries.size // 500))
    for i in sample:
        q, a, b = queries[i], int(lo[i]), int(hi[i])
        assert a + int(np.searchsorted(keys[a:b], q)) == int(lb[i])
        # search agrees with search_many, lower_bound with lower_bound_many.
        assert index.search(int(q)) == (a, b)
        assert index.lower_bound(keys, int(q)) == int(lb[i])


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("family", lidb.FAMILIES)
def test_every_family_keeps_the_contract(family, distribution):
    keys = make_keys(distribution, N)
    queries = queries_for(keys, 5_000)
    for boundary in BOUNDARIES:
        index = lidb.build(family, keys, boundary)
        assert index.family == family
        assert index.boundary == boundary
        assert index.key_count == N
        check_contract(index, keys, queries)


@pytest.mark.parametrize("family", lidb.FAMILIES)
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_tiny_key_sets(family, n):
    keys = np.array([0, 7, U64_MAX][:n], dtype=np.uint64)
    index = lidb.build(family, keys, 2)
    check_contract(index, keys, queries_for(keys, 50))


@pytest.mark.parametrize("family", lidb.FAMILIES)
def test_encode_decode_round_trip(family):
    keys = make_keys("lognormal", N)
    queries = queries_for(keys, 2_000)
    index = lidb.build(family, keys, 32)
    data = index.encode()
    assert isinstance(data, bytes)
    assert len(data) == index.size_bytes
    again = lidb.decode(data)
    assert again.family == family and again.boundary == 32 and again.key_count == N
    assert again.encode() == data
    assert again.stats() == index.stats()
    for a, b in zip(index.search_many(queries), again.search_many(queries)):
        assert np.array_equal(a, b)
    unpickled = pickle.loads(pickle.dumps(index))
    assert unpickled.encode() == data


def test_stats_name_the_structure():
    keys = make_keys("sparse", N)
    stats = lidb.build("pgm", keys, 64).stats()
    assert stats["family"] == "pgm"
    assert stats["keys"] == N
    assert stats["boundary"] == 64
    assert stats["models"] >= 1
    assert stats["size_bytes"] == lidb.build("pgm", keys, 64).size_bytes
    assert isinstance(stats["segments_per_level"], list)
    assert lidb.build("binary", keys, 64).stats()["models"] == 0


def test_family_parameters_are_passed_through():
    keys = make_keys("lognormal", N)
    queries = queries_for(keys, 2_000)
    variants = [
        ("pgm", {"pgm_epsilon_recursive": 1}),
        ("rs", {"rs_radix_bits": 0}),
        ("rs", {"rs_radix_bits": 18}),
        ("rmi", {"rmi_root": "cubic"}),
        ("lpa", {"lpa_threshold": 3, "lpa_learning_step": 4, "lpa_learning_rate": 0.25}),
        ("lpa", {"lpa_threshold": None}),
        ("fiting", {"fiting_fanout": 2}),
        # A parameter of another family is accepted and ignored, as on the command line.
        ("fp", {"rs_radix_bits": 4}),
    ]
    for family, params in variants:
        check_contract(lidb.build(family, keys, 16, **params), keys, queries)
    small = lidb.build("rs", keys, 16, rs_radix_bits=0).size_bytes
    large = lidb.build("rs", keys, 16, rs_radix_bits=18).size_bytes
    assert large > small


def test_queries_in_any_integer_form():
    keys = make_keys("dense", 1_000)
    index = lidb.build("pgm", keys, 8)
    expected = index.search_many(keys)
    for form in [keys.astype(np.int64), keys.tolist(), keys[::-1][::-1], keys.astype(np.uint32)]:
        got = index.search_many(form)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    strided = np.repeat(keys, 2)[::2]
    assert not strided.flags.c_contiguous
    assert np.array_equal(index.search_many(strided)[0], expected[0])
    assert index.search(np.uint64(1500)) == index.search(1500)
    empty_lo, empty_hi = index.search_many([])
    assert empty_lo.size == 0 and empty_hi.size == 0


def test_keys_in_any_integer_form():
    keys = make_keys("dense", 1_000)
    encoded = lidb.build("pgm", keys, 8).encode()
    for form in [keys.astype(np.int64), keys.tolist(), np.repeat(keys, 2)[::2]]:
        assert lidb.build("pgm", form, 8).encode() == encoded
    # Python ints at both ends of the domain, where numpy alone would choose float64.
    mixed = [0, 1, 1 << 63, U64_MAX]
    index = lidb.build("pgm", mixed, 2)
    assert index.search(U64_MAX) == (3, 4)


def test_lower_bound_needs_the_keys_the_index_was_built_from():
    keys = make_keys("dense", 1_000)
    index = lidb.build("pgm", keys, 8)
    with pytest.raises(ValueError, match="built over 1000"):
        index.lower_bound(keys[:-1], 5)
    with pytest.raises(ValueError, match="built over 1000"):
        index.lower_bound_many(np.concatenate([keys, keys]), keys)
    # Other integer forms of the same keys are converted.
    assert index.lower_bound(keys.tolist(), 1500) == 500


def test_search_many_from_threads():
    keys = make_keys("sparse", 100_000)
    index = lidb.build("rs", keys, 32)
    queries = queries_for(keys, 50_000)
    expected = index.search_many(queries)
    results = [None] * 4

    def work(i):
        results[i] = index.search_many(queries)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert np.array_equal(r[0], expected[0]) and np.array_equal(r[1], expected[1])


def test_real_dataset(real_dataset):
    keys = lidb.read_sosd(real_dataset("osm_cellids_274K_uint64.zst"))
    assert keys.dtype == np.uint64 and keys.size == 273_745
    queries = queries_for(keys, 20_000)
    for family in lidb.FAMILIES:
        check_contract(lidb.build(family, keys, 64), keys, queries)


def test_search_many_releases_the_gil():
    """While one thread is inside search_many, another keeps running Python code.

    With the GIL held for the whole call, the main thread's loop would stall for as long as the
    call lasts; released, its longest stall is a scheduling hiccup. The call is made long (over a
    second here on 2 busy cores) so the two cases are far apart."""
    keys = make_keys("sparse", 200_000)
    index = lidb.build("pgm", keys, 2)
    queries = np.random.default_rng(1).integers(0, U64_MAX, 1_500_000, dtype=np.uint64)
    started = threading.Event()
    span = {}

    def work():
        started.set()
        t0 = time.perf_counter()
        index.search_many(queries)
        span["call"] = (t0, time.perf_counter())

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    ticks = []
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    t0, t1 = span["call"]
    inside = [t for t in ticks if t0 <= t <= t1]
    edges = [t0] + inside + [t1]
    longest_stall = max(b - a for a, b in zip(edges, edges[1:]))
    print(f"search_many {t1 - t0:.3f} s, longest stall {longest_stall:.4f} s")
    assert t1 - t0 > 0.05, "the call was too short to tell"
    assert longest_stall < 0.5 * (t1 - t0), (
        f"the main thread stalled {longest_stall:.3f} s of a {t1 - t0:.3f} s search_many"
    )
