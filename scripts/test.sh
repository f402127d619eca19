#!/usr/bin/env bash
# Every test suite of lidb, on a fresh Debian machine with a Rust toolchain: installs what the
# suites outside cargo need (Debian's packages, when absent and when run as root), then runs
#   1. cargo test --workspace                     (every Rust crate), then the loom models
#   2. the engine conformance harness with real RocksDB (cargo feature rocksdb)
#   3. the YCSB binding's JUnit tests             (ycsb/, Maven)
#   4. lidb serve with redis-cli and redis-benchmark, beside Debian's redis-server
#   5. one small YCSB workload through the real YCSB client against lidb serve
#   6. the Python package: pip install ./python into a virtualenv, then its pytest suite
#   7. lidb stress for every engine: kills, power cuts and I/O faults, 30 s each (scripts/stress.sh)
# Stops at the first failure. SKIP_PACKAGES=1 skips the installs (you installed them yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
# Logs without colour codes when the output is not a terminal (CI's log, a file).
[ -t 1 ] || export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# Runs a cargo test command, its output shown as it comes and kept, then one line with the
# number of tests it ran (the sum of every "test result:" line).
counted() {
  local log="$logs/cargo.log"
  "$@" 2>&1 | tee "$log"
  awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^ignored/) g += $i } }
       END { printf "-- %d tests passed, %d ignored\n", p, g }' "$log"
}

install() {
  [ "${SKIP_PACKAGES:-0}" = 1 ] && return 0
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== apt-get install ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# librocksdb-dev and libclang-dev: the rocksdb feature (bindgen); redis-*: the serve smoke run;
# OpenJDK 17 and Maven: the YCSB binding (which fetches YCSB core and Jedis from Maven Central);
# python3-venv: the Python package's virtualenv (pip fetches maturin, numpy and pytest from PyPI);
# nutcracker: twemproxy, the baseline deployment of `lidb fine bench --mode twemproxy` (its test
# in lidb-cli's fine_resp.rs says "skipped" without it).
install librocksdb-dev libclang-dev redis-tools redis-server openjdk-17-jdk-headless maven python3-venv nutcracker

echo "== 1. cargo test --workspace"
counted cargo test --workspace

echo "== 1b. loom models: the hybrid latch (lidb-sync) and the page cache's shards (lidb-storage)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom counted cargo test -p lidb-sync --release --test loom
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom counted cargo test -p lidb-storage --release --lib cache::loom_model

echo "== 2. the engine conformance harness with real RocksDB"
counted cargo test -p lidb-bench --features rocksdb --test engines

echo "== 3. the YCSB binding's unit tests (mvn test)"
# Offline first (a warm ~/.m2 needs no network); on a fresh ~/.m2 the offline try fails and its
# log is dropped, so only the run that counts is shown. Batch mode: no colour codes.
if ! (cd ycsb && mvn -B -o test) > "$logs/mvn.log" 2>&1; then
  (cd ycsb && mvn -B test) > "$logs/mvn.log" 2>&1 || { cat "$logs/mvn.log"; exit 1; }
fi
grep -E '^\[(INFO|WARNING|ERROR)\] Tests run:' "$logs/mvn.log" | tail -n 1 | sed 's/^\[[A-Z]*\] /-- JUnit: /' || true

echo "== 4. lidb serve with redis-cli and redis-benchmark, beside redis-server (scripts/serve-smoke.sh)"
cargo build --release --quiet --bin lidb
scripts/serve-smoke.sh --compare

echo "== 5. YCSB workload A through the real YCSB client, small (scripts/ycsb-run.sh)"
RECORDS=2000 OPERATIONS=2000 VERIFY=1 timeout 1200 scripts/ycsb-run.sh a lsm

echo "== 6. the Python package: pip install ./python, pytest (scripts/python-test.sh)"
scripts/python-test.sh

echo "== 7. lidb stress: every engine under kills, power cuts and faults (scripts/stress.sh)"
DURATION="${STRESS_DURATION:-30s}" scripts/stress.sh

echo "all test suites passed"
