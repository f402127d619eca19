#!/usr/bin/env bash
# The scaling matrix in one command: throughput at every thread count of THREADS for
#   1. `lidb-bench bench concurrent`: every concurrent index, lidb's own and the third-party peers
#      (congee, scc-tree, skipmap, li+delta: linked into the lidb-bench binary only), workloads c
#      and a;
#   2. `lidb bench ycsb`: workloads c and a for lsm, learnedkv, learnedstore, finedex (and rocksdb
#      when the binary was built with --features rocksdb), once with caches that hold the data
#      and once under `--memory $MEMORY` (64MiB); c loads each engine once and runs every thread
#      count over it, a loads a fresh engine per thread count (see `lidb bench ycsb --help`);
#   3. `lidb serve` against redis-server, each with THREADS server threads (lidb --threads,
#      redis --io-threads) driven by `redis-benchmark --threads` at the same count, SET then GET,
#      as scripts/serve-compare.sh does (fresh database per count, 127.0.0.1 only).
# Every JSON row goes to one file, bench-out/$OUT, then `lidb bench plot-scaling` draws
# throughput against threads per workload into bench-out/<OUT without its extension>.svg and
# prints the figures (with the top count over 2 threads: below 0.9x means a read path that
# convoys above the core count).
#
#   cargo build --release --bin lidb --bin lidb-bench && scripts/scale.sh
#
# THREADS: comma-separated counts (default 1,2,4,8,16 when nproc >= 16, else 1,2,8,16: more
# threads than cores on purpose). OUT: a file name of letters, digits, '.', '_' and '-'
# (default scale.jsonl). LIDB: the binary (target/release/lidb); LIDB_BENCH: the binary with
# the peers, for step 1 (target/release/lidb-bench). Sizes (defaults for nproc >= 16,
# sized for the whole matrix in under 8 minutes there, and smaller below): KV_RECORDS, KV_OPS
# (per phase), PHASES (2: one warm-up, figures from the last), VALUE_SIZE, CONC_RECORDS,
# CONC_OPS, CONC_DATA (the concurrent indexes' keys: lognormal, about twice CONC_RECORDS, since a
# synthetic set of N draws has a little under N distinct keys), SERVE_REQUESTS, CLIENTS (redis-benchmark connections, at least the thread count),
# PIPELINE. MAX_SECONDS (480) bounds the whole run: each step gets what is left, and a step cut
# short fails the script. Servers are stopped by their PIDs at exit (trap), whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
lidb="${LIDB:-target/release/lidb}"
lidb_bench="${LIDB_BENCH:-target/release/lidb-bench}"
cores="$(nproc)"
if [ "$cores" -ge 16 ]; then
  threads="${THREADS:-1,2,4,8,16}"
  kv_records="${KV_RECORDS:-150K}" kv_ops="${KV_OPS:-200K}"
  conc_records="${CONC_RECORDS:-1M}" conc_ops="${CONC_OPS:-1M}"
  conc_data="${CONC_DATA:-synthetic:lognormal:2M}"
  serve_requests="${SERVE_REQUESTS:-200000}"
else
  threads="${THREADS:-1,2,8,16}"
  kv_records="${KV_RECORDS:-20K}" kv_ops="${KV_OPS:-20K}"
  conc_records="${CONC_RECORDS:-100K}" conc_ops="${CONC_OPS:-100K}"
  conc_data="${CONC_DATA:-synthetic:lognormal:1M}"
  serve_requests="${SERVE_REQUESTS:-50000}"
fi
phases="${PHASES:-2}"
value_size="${VALUE_SIZE:-512}"
memory="${MEMORY:-64MiB}"
pipeline="${PIPELINE:-16}"
max_seconds="${MAX_SECONDS:-480}"
out_name="${OUT:-scale.jsonl}"

fail() {
  echo "scale: $*" >&2
  [ -n "${work:-}" ] && [ -s "$work/lidb.err" ] && sed 's/^/  lidb stderr: /' "$work/lidb.err" >&2
  exit 1
}
[[ "$out_name" =~ ^[A-Za-z0-9._-]+$ ]] || fail "OUT=$out_name: use letters, digits, '.', '_' and '-' only"
[[ "$threads" =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "THREADS=$threads: want counts like 1,2,8,16"
[ -x "$lidb" ] || fail "no binary $lidb: cargo build --release --bin lidb --bin lidb-bench"
[ -x "$lidb_bench" ] || fail "no binary $lidb_bench: cargo build --release --bin lidb --bin lidb-bench"
mkdir -p bench-out
out="bench-out/$out_name"
svg="bench-out/${out_name%.*}.svg"
: >"$out"

work="$(mktemp -d)"
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh
trap serve_cleanup EXIT

# Seconds left of MAX_SECONDS; fails once none are.
left() {
  local l=$((max_seconds - SECONDS))
  [ "$l" -gt 0 ] || fail "MAX_SECONDS=$max_seconds spent before $1"
  echo "$l"
}

# Runs one benchmark (the binary, then its arguments) with what is left of the time, rows
# appended to $out.
bench() {
  local bin="$1" t
  shift
  t="$(left "$(basename "$bin") $*")"
  echo "== $(basename "$bin") $* (${t}s left)" >&2
  timeout "$t" "$bin" "$@" --json >>"$out" 2>"$work/lidb.err" || fail "$(basename "$bin") $* failed or ran out of time"
}

echo "# scale: cores=$cores threads=$threads kv_records=$kv_records kv_ops=$kv_ops phases=$phases \
value_size=$value_size memory=$memory conc_records=$conc_records conc_ops=$conc_ops \
serve_requests=$serve_requests out=$out"

# 1. The concurrent indexes.
bench "$lidb_bench" bench concurrent --index all --workload c,a --threads "$threads" \
  --records "$conc_records" --ops "$conc_ops" --data "$conc_data"

# 2. The engines, in memory and under a budget. rocksdb only where it is built in: the engine
# check refuses it ("not built in") before --records 0 is refused.
engines="lsm,learnedkv,learnedstore,finedex"
probe="$("$lidb" bench ycsb --engine rocksdb --records 0 --dir "$work" 2>&1 || true)"
if [[ "$probe" == *"not built in"* ]]; then
  echo "# rocksdb: not built in (cargo build --release --features rocksdb for it)"
else
  engines="$engines,rocksdb"
fi
# Caches and pools that hold every record twice over (the "in memory" runs), and a small memtable
# so the LSMs' reads go through their tables and cache rather than the memtable alone.
data_mib=$(python3 -c "
import sys
n = sys.argv[1].upper()
n = int(float(n[:-1]) * {'K': 1e3, 'M': 1e6}[n[-1]]) if n[-1] in 'KM' else int(n)
print(n * ($value_size + 8) * 2 // (1 << 20) + 16)" "$kv_records")
for workload in c a; do
  for mode in memory budget; do
    extra=(--cache "${data_mib}MiB" --pool "${data_mib}MiB")
    [ "$mode" = budget ] && extra=(--memory "$memory" --pool "$memory")
    bench "$lidb" bench ycsb --engine "$engines" --workload "$workload" --threads "$threads" \
      --records "$kv_records" --ops-per-phase "$kv_ops" --phases "$phases" \
      --value-size "$value_size" --memtable 2MiB --device-probe-reads 0 --dir "$work" "${extra[@]}"
  done
done

# 3. lidb serve against redis-server, server and client threads at each count.
# Runs SET then GET with redis-benchmark against 127.0.0.1:$3 at $2 threads; rows for server $1.
measure() {
  local server="$1" count="$2" port="$3" test csv t
  local clients=$((count > ${CLIENTS:-32} ? count : ${CLIENTS:-32}))
  for test in set get; do
    t="$(left "redis-benchmark $test")"
    csv="$(timeout "$t" redis-benchmark -h 127.0.0.1 -p "$port" -t "$test" -n "$serve_requests" \
      -r 100000 -c "$clients" -P "$pipeline" --threads "$count" --csv | grep -v '^"test"')" ||
      fail "redis-benchmark -t $test against $server at $count threads failed"
    python3 - "$server" "$test" "$count" "$clients" "$csv" >>"$out" <<'PY'
import csv, json, sys
server, test, count, clients, line = sys.argv[1:]
row = next(csv.reader([line]))
print(json.dumps({"bench": "serve", "engine": server, "workload": test, "threads": int(count),
                  "clients": int(clients), "kops_per_s": float(row[1]) / 1e3,
                  "p50_ms": float(row[4]), "p99_ms": float(row[6])}))
PY
  done
}
IFS=, read -r -a counts <<<"$threads"
for count in "${counts[@]}"; do
  echo "== serve at $count threads ($(left serve)s left)" >&2
  io=()
  [ "$count" -gt 1 ] && io=(--io-threads "$count" --io-threads-do-reads yes)
  start_redis_server "${io[@]}"
  measure redis "$count" "$redis_port"
  stop_redis_server
  rm -rf "$work/db"
  LIDB_SERVE_ARGS="--threads $count" start_lidb_serve lsm >/dev/null
  measure lidb "$count" "$port"
  stop_lidb_serve >/dev/null
done

# 4. The figure and the figures.
"$lidb" bench plot-scaling --input "$out" --output "$svg" \
  --title "throughput against threads ($cores cores, threads $threads)"
echo "# rows: $out ($(wc -l <"$out") lines); ${SECONDS}s in all"
