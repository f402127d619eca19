#!/usr/bin/env bash
# One YCSB core workload through the real YCSB client (site.ycsb:core 0.17.0) and lidb's own DB
# binding (ycsb/, Jedis over the Redis protocol) against `lidb serve` (CI runs `a lsm`):
#
#   scripts/ycsb-run.sh [WORKLOAD] [ENGINE]     WORKLOAD a..f (default a), ENGINE default lsm
#
# Builds ycsb/ with `mvn package` (the first build downloads from Maven Central into ~/.m2; later
# builds run offline), starts `lidb serve --engine ENGINE` on a free port of 127.0.0.1 with a fresh
# database, loads the workload's records (-load) and runs its operations (-t), printing YCSB's
# [OVERALL] and per-operation lines of each phase, then stops the server by its PID with SIGTERM
# and requires exit 0. Exits non-zero if YCSB reports any failed operation.
#
# LIDB_SERVE_ARGS adds options to `lidb serve` (learnedstore and btree hold values up to a quarter
# page: YCSB's records of about 1.1 KiB need LIDB_SERVE_ARGS="--page-size 8192").
# LIDB picks the binary (default target/release/lidb, built if absent), RECORDS and OPERATIONS
# override the workload's recordcount and operationcount, THREADS the YCSB client threads
# (default 1); VERIFY=1 adds YCSB's `-p dataintegrity=true` (values derived from key and field,
# every read checked; a wrong value is Return=UNEXPECTED_STATE, a failure here). Every wait is
# bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
workload="${1:-a}"
engine="${2:-lsm}"
lidb="${LIDB:-target/release/lidb}"
threads="${THREADS:-1}"
workload_file="ycsb/workloads/workload$workload"
[ -f "$workload_file" ] || { echo "ycsb-run: no workload file $workload_file (use a..f)" >&2; exit 2; }

work="$(mktemp -d)"
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh
trap serve_cleanup EXIT

fail() {
  echo "ycsb-run: $*" >&2
  [ -s "$work/lidb.err" ] && sed 's/^/  lidb stderr: /' "$work/lidb.err" >&2
  exit 1
}

echo "== mvn package (ycsb/)"
mvn_flags=(-q -B -Dstyle.color=never -f ycsb/pom.xml package)
if ! timeout 300 mvn -o "${mvn_flags[@]}" >"$work/mvn-offline.log" 2>&1; then
  echo "(offline build failed; building with Maven Central)"
  timeout 600 mvn "${mvn_flags[@]}" || fail "mvn package failed"
fi
jar="$(ls ycsb/target/lidb-ycsb-binding-*.jar)"
classpath="$jar:ycsb/target/lib/*"

if [ ! -x "$lidb" ]; then
  echo "== cargo build --release --bin lidb"
  cargo build --release --bin lidb
fi

start_lidb_serve "$engine"

file_count() { awk -F= -v k="$1" '$1 == k { v = $2 } END { print v }' "$workload_file"; }
records="${RECORDS:-$(file_count recordcount)}"
operations="${OPERATIONS:-$(file_count operationcount)}"
counts=(-p "recordcount=$records" -p "operationcount=$operations")
[ "${VERIFY:-0}" = 1 ] && counts+=(-p dataintegrity=true)
ycsb() {
  local phase="$1" want="$2"
  echo "== YCSB $phase: java -cp ... site.ycsb.Client $phase -db dev.lidb.ycsb.LidbClient -P $workload_file" \
    "-p lidb.port=PORT -threads $threads ${counts[*]}"
  timeout 600 java -cp "$classpath" site.ycsb.Client "$phase" -db dev.lidb.ycsb.LidbClient \
    -P "$workload_file" -p lidb.host=127.0.0.1 -p "lidb.port=$port" -threads "$threads" \
    "${counts[@]}" >"$work/ycsb$phase.out" 2>"$work/ycsb$phase.err" ||
    { sed 's/^/  ycsb stderr: /' "$work/ycsb$phase.err" >&2; fail "YCSB $phase failed"; }
  grep '^\[' "$work/ycsb$phase.out" || true
  grep -q '^\[OVERALL\], Throughput' "$work/ycsb$phase.out" || fail "YCSB $phase printed no [OVERALL] throughput"
  # A failed operation: a [READ-FAILED]-style line, or any Return= other than OK and BATCHED_OK
  # (ERROR, NOT_FOUND, UNEXPECTED_STATE from VERIFY=1, ...).
  if grep -q -e '-FAILED\]' "$work/ycsb$phase.out" ||
    grep 'Return=' "$work/ycsb$phase.out" | grep -q -v -e 'Return=OK,' -e 'Return=BATCHED_OK,'; then
    grep -e '^\[' "$work/ycsb$phase.err" | head -20 >&2 || true
    grep -e 'lidb ' "$work/ycsb$phase.err" | head -20 >&2 || true
    fail "YCSB $phase reported failed operations"
  fi
  # YCSB exits 0 even when a client thread's init fails; count what ran. A read-modify-write is
  # measured as a READ, an UPDATE and a READ-MODIFY-WRITE.
  local done
  done="$(awk -F', ' '$2 == "Operations" {
      if ($1 ~ /^\[(READ|UPDATE|INSERT|SCAN|DELETE)\]$/) n += $3
      if ($1 == "[READ-MODIFY-WRITE]") n -= $3
    } END { print n + 0 }' "$work/ycsb$phase.out")"
  [ "$done" = "$want" ] || {
    grep -v '^\[' "$work/ycsb$phase.out" "$work/ycsb$phase.err" | head -20 >&2
    fail "YCSB $phase ran $done operations, not $want"
  }
}
ycsb -load "$records"
ycsb -t "$operations"

stop_lidb_serve
echo "ycsb run passed (workload $workload, engine $engine)"
