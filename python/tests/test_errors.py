"""Every error is a Python exception carrying the library's message; nothing crashes the
interpreter, whatever the input."""

import numpy as np
import pytest

import lidb
from conftest import make_keys


def test_unsorted_keys_name_the_position():
    keys = np.array([1, 2, 3, 5, 4, 6], dtype=np.uint64)
    with pytest.raises(ValueError, match="position 4"):
        lidb.build("pgm", keys, 8)


def test_unknown_family_lists_the_known_ones():
    with pytest.raises(ValueError) as e:
        lidb.build("btree", [1, 2, 3], 8)
    for name in lidb.FAMILIES:
        assert name in str(e.value)


@pytest.mark.parametrize("boundary", [0, 1, -5])
def test_bad_boundary(boundary):
    with pytest.raises(ValueError, match="boundary"):
        lidb.build("pgm", [1, 2, 3], boundary)


@pytest.mark.parametrize("boundary", ["64", 6.4, None, True])
def test_boundary_of_the_wrong_type(boundary):
    with pytest.raises(TypeError, match="boundary"):
        lidb.build("pgm", [1, 2, 3], boundary)


@pytest.mark.parametrize(
    "params, error",
    [
        ({"rs_radix_bits": 31}, ValueError),
        ({"pgm_epsilon_recursive": 0}, ValueError),
        ({"lpa_learning_rate": 1.5}, ValueError),
        ({"lpa_learning_step": 0}, ValueError),
        ({"fiting_fanout": 1}, ValueError),
        ({"rmi_root": "quadratic"}, ValueError),
        ({"rmi_root": 3}, TypeError),
        ({"epsilon": 64}, TypeError),
        ({"rs_radix_bits": "8"}, TypeError),
    ],
)
def test_bad_parameters(params, error):
    with pytest.raises(error):
        lidb.build("rs", make_keys("dense", 100), 8, **params)


@pytest.mark.parametrize(
    "keys, error, message",
    [
        ([1, -2, 3], ValueError, r"keys\[1\] = -2"),
        (np.array([3, -1], dtype=np.int64), ValueError, r"keys\[1\] = -1"),
        ([1, 1 << 64], ValueError, "not an unsigned 64-bit integer"),
        ([1.0, 2.5], TypeError, "not an integer"),
        (np.array([1.0, 2.0]), TypeError, "float64"),
        (np.array([[1, 2], [3, 4]], dtype=np.uint64), ValueError, "one-dimensional"),
        (["a", "b"], TypeError, "dtype"),
        (np.array([True, False]), TypeError, "bool"),
    ],
)
def test_keys_that_are_not_u64(keys, error, message):
    with pytest.raises(error, match=message):
        lidb.build("pgm", keys, 8)


def test_queries_outside_the_domain():
    index = lidb.build("pgm", [1, 2, 3], 8)
    with pytest.raises(OverflowError):
        index.search(-1)
    with pytest.raises(OverflowError):
        index.search(1 << 64)
    with pytest.raises(ValueError, match=r"queries\[0\] = -1"):
        index.search_many([-1, 2])


def test_decode_of_garbage_raises_value_error():
    with pytest.raises(ValueError, match="corrupt index encoding"):
        lidb.decode(b"")
    with pytest.raises(ValueError, match="magic"):
        lidb.decode(b"x" * 100)
    with pytest.raises(TypeError):
        lidb.decode("not bytes")


@pytest.mark.parametrize("family", lidb.FAMILIES)
def test_decode_never_crashes_on_damaged_encodings(family):
    """Truncations and bit flips of a real encoding: each decodes or raises ValueError."""
    data = lidb.build(family, make_keys("lognormal", 2_000), 16).encode()
    rng = np.random.default_rng(7)
    cuts = list(range(0, len(data), max(1, len(data) // 50)))
    for cut in cuts:
        with pytest.raises(ValueError):
            lidb.decode(data[:cut])
    for _ in range(200):
        damaged = bytearray(data)
        damaged[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        try:
            lidb.decode(bytes(damaged))
        except ValueError:
            pass
    for _ in range(100):
        noise = rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
        with pytest.raises(ValueError):
            lidb.decode(noise)
