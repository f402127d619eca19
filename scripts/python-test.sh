#!/usr/bin/env bash
# The Python package (python/) end to end, as a user installs it: a virtualenv, `pip install
# ./python pytest` (maturin builds the Rust extension in release; numpy comes as a dependency),
# mypy's stubtest (the stubs match the native module) and mypy over the package and its tests,
# then the pytest suite (python/tests). Before that, rustfmt and clippy on the package's crate,
# which the root workspace excludes (see python/Cargo.toml).
#
#   scripts/python-test.sh              everything above
#   scripts/python-test.sh -k sorted    extra arguments go to pytest
#
# PYTHON (default python3) is the interpreter the virtualenv is made from; VENV (default
# target/python-venv) where it lives, reused across runs. The crate builds into
# target/python (CARGO_TARGET_DIR), so repeated runs compile only what changed. Tests that need
# the real datasets find them as the Rust tests do (LIDB_DATA_DIR, else ../shared/datasets) and
# are reported as skipped, with the reason, when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv="$(realpath -m "${VENV:-target/python-venv}")"
export CARGO_TARGET_DIR="$PWD/target/python"

echo "-- rustfmt and clippy on python/ (the extension's crate)"
cargo fmt --manifest-path python/Cargo.toml -- --check
cargo clippy --quiet --manifest-path python/Cargo.toml --all-targets -- -D warnings

echo "-- virtualenv $venv ($("$python" --version))"
"$python" -m venv "$venv"

echo "-- pip install ./python pytest mypy (builds the extension)"
start=$(date +%s)
# pip always rebuilds and reinstalls a package given as a directory, same version or not.
"$venv/bin/python" -m pip install --quiet ./python pytest mypy
echo "   built and installed in $(($(date +%s) - start)) s"

echo "-- type stubs: stubtest lidb._lidb, mypy python/lidb python/tests"
"$venv/bin/python" -m mypy.stubtest lidb._lidb
(cd python && "$venv/bin/python" -m mypy --no-incremental --cache-dir=/dev/null lidb tests)

echo "-- pytest python/tests"
# From the repository root, so the source tree's python/lidb (no native module) does not shadow
# the installed package; -rs prints why each skipped test was skipped.
"$venv/bin/python" -m pytest -rs -p no:cacheprovider python/tests "$@"
