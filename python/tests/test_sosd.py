"""SOSD files from Python: write and read back, plain and zstd, and the errors of bad files."""

import numpy as np
import pytest

import lidb
from conftest import U64_MAX, make_keys

ZSTD_MAGIC = bytes([0x28, 0xB5, 0x2F, 0xFD])


@pytest.mark.parametrize("name", ["keys.bin", "keys.zst"])
@pytest.mark.parametrize("distribution", ["dense", "extremes", "duplicates"])
def test_round_trip(tmp_path, name, distribution):
    keys = make_keys(distribution, 50_000)
    path = tmp_path / name
    lidb.write_sosd(path, keys)
    head = path.read_bytes()[:8]
    if name.endswith(".zst"):
        assert head[:4] == ZSTD_MAGIC
    else:
        assert int.from_bytes(head, "little") == keys.size
        assert path.stat().st_size == 8 + 8 * keys.size
    back = lidb.read_sosd(path)
    assert back.dtype == np.uint64
    assert np.array_equal(back, keys)
    assert np.array_equal(lidb.read_sosd(str(path)), keys)


def test_plain_file_is_the_sosd_layout(tmp_path):
    path = tmp_path / "by_hand.bin"
    keys = np.array([0, 5, U64_MAX], dtype="<u8")
    path.write_bytes(np.uint64(3).astype("<u8").tobytes() + keys.tobytes())
    assert lidb.read_sosd(path).tolist() == [0, 5, U64_MAX]


def test_empty_file_round_trip(tmp_path):
    path = tmp_path / "empty.zst"
    lidb.write_sosd(path, [])
    assert lidb.read_sosd(path).size == 0


def test_unsorted_files(tmp_path):
    path = tmp_path / "queries.bin"
    lidb.write_sosd(path, [5, 3, 9])
    with pytest.raises(ValueError, match="position 1"):
        lidb.read_sosd(path)
    assert lidb.read_sosd(path, sorted=False).tolist() == [5, 3, 9]


def test_malformed_files(tmp_path):
    short = tmp_path / "short.bin"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="too short"):
        lidb.read_sosd(short)
    wrong_count = tmp_path / "count.bin"
    wrong_count.write_bytes((10).to_bytes(8, "little") + bytes(16))
    with pytest.raises(ValueError, match="header says 10"):
        lidb.read_sosd(wrong_count)
    corrupt = tmp_path / "corrupt.zst"
    corrupt.write_bytes(ZSTD_MAGIC + b"\xff" * 40)
    with pytest.raises(ValueError):
        lidb.read_sosd(corrupt)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        lidb.read_sosd(tmp_path / "missing.bin")
    with pytest.raises(OSError):
        lidb.write_sosd(tmp_path / "no" / "such" / "dir.bin", [1, 2])


def test_real_dataset_reads_and_round_trips(tmp_path, real_dataset):
    keys = lidb.read_sosd(real_dataset("osm_cellids_274K_uint64.zst"))
    assert keys.size == 273_745
    assert np.all(keys[1:] >= keys[:-1])
    assert np.unique(keys).size == 273_719
    copy = tmp_path / "copy.zst"
    lidb.write_sosd(copy, keys)
    assert np.array_equal(lidb.read_sosd(copy), keys)
