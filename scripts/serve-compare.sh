#!/usr/bin/env bash
# lidb serve against Debian's redis-server with the same redis-benchmark flags, taking turns for
# several rounds (the machine is shared: a ratio is only meaningful within one round). Each round
# starts, in turn, redis-server (--save '' --appendonly no), `lidb serve` (default options) and
# `lidb serve --no-memory-reads` (every request on the engine threads), each on a fresh database,
# and runs one redis-benchmark per test (SET first, so GET finds its keys). Beside each
# throughput it reads the server process's CPU time and context switches from /proc around that
# test: CPU milliseconds per 1000 requests is steadier than throughput on a loaded machine.
#
#   cargo build --release --bin lidb && scripts/serve-compare.sh
#
# ROUNDS (3), REQUESTS (300000), TESTS ("set get mset"), CLIENTS (8), PIPELINE (16),
# KEYSPACE (redis-benchmark -r; empty: its one fixed key), BENCH_THREADS (redis-benchmark
# --threads; empty: one), ENGINE (lsm), LIDB (the binary), OUT (a JSON-lines file of every
# measurement; default: printed only). VARIANTS ("lidb lidb-no-memory-reads") picks the lidb
# servers of each round: lidb (default options), lidb-no-memory-reads, lidb-tpc
# (--thread-per-core), base (the binary BASE_LIDB, default options, to compare two builds in
# one run); LIDB_ARGS (words) are added to every lidb server's options. Loopback only; every
# server is stopped by its PID; lidb must exit 0 on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
lidb="${LIDB:-target/release/lidb}"
rounds="${ROUNDS:-3}"
requests="${REQUESTS:-300000}"
tests="${TESTS:-set get mset}"
engine="${ENGINE:-lsm}"
keyspace=()
[ -n "${KEYSPACE:-}" ] && keyspace=(-r "$KEYSPACE")
[ -n "${BENCH_THREADS:-}" ] && keyspace+=(--threads "$BENCH_THREADS")
variants="${VARIANTS:-lidb lidb-no-memory-reads}"

work="$(mktemp -d)"
out="${OUT:-$work/results.jsonl}"
: >"$out"
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh
trap serve_cleanup EXIT
fail() {
  echo "serve-compare: $*" >&2
  [ -s "$work/lidb.err" ] && sed 's/^/  lidb stderr: /' "$work/lidb.err" >&2
  exit 1
}

# CPU ticks (user + system), context switches and the voluntary ones (a thread that slept: the
# hand-offs; the others are preemptions, which a loaded machine adds) of process $1, all threads.
sample() {
  local ticks switches
  ticks="$(awk '{ print $14 + $15 }' "/proc/$1/stat")"
  switches="$(cat /proc/"$1"/task/*/status |
    awk '/ctxt_switches/ { s += $2 } /^voluntary_ctxt_switches/ { v += $2 } END { print s, v }')"
  echo "$ticks $switches"
}

# Runs every test against the server $2 (pid $3) on port $4; appends one JSON line per test.
measure() {
  local server="$1" pid="$2" port="$3" round="$4" t before after csv
  for t in $tests; do
    before="$(sample "$pid")"
    csv="$(timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -t "$t" -n "$requests" \
      -c "${CLIENTS:-8}" -P "${PIPELINE:-16}" "${keyspace[@]}" --csv | grep -v '^"test"')" ||
      fail "redis-benchmark -t $t against $server failed"
    after="$(sample "$pid")"
    python3 - "$server" "$round" "$requests" "$before" "$after" "$csv" "$(cut -d' ' -f1 /proc/loadavg)" "$(getconf CLK_TCK)" >>"$out" <<'PY'
import csv, json, sys
server, rnd, n, before, after, line, load, hz = sys.argv[1:]
row = next(csv.reader([line]))
t0, s0, v0 = map(int, before.split()); t1, s1, v1 = map(int, after.split())
n = int(n)
print(json.dumps({"server": server, "round": int(rnd), "test": row[0].split(" (")[0], "rps": float(row[1]),
                  "p50_ms": float(row[4]), "p99_ms": float(row[6]),
                  "cpu_ms_per_1k": (t1 - t0) * 1000 / int(hz) * 1000 / n,
                  "switches_per_1k": (s1 - s0) * 1000 / n,
                  "voluntary_per_1k": (v1 - v0) * 1000 / n, "load": float(load)}))
PY
  done
}

for round in $(seq "$rounds"); do
  echo "== round $round of $rounds"
  start_redis_server
  measure redis "$redis_pid" "$redis_port" "$round"
  stop_redis_server
  for variant in $variants; do
    rm -rf "$work/db"
    extra=()
    binary="${LIDB:-target/release/lidb}"
    case "$variant" in
      lidb) ;;
      lidb-no-memory-reads) extra=(--no-memory-reads) ;;
      lidb-tpc) extra=(--thread-per-core) ;;
      base) binary="${BASE_LIDB:?BASE_LIDB names the base binary}" ;;
      *) fail "unknown variant $variant" ;;
    esac
    lidb="$binary" LIDB_SERVE_ARGS="${extra[*]} ${LIDB_ARGS:-}" start_lidb_serve "$engine" >/dev/null
    measure "$variant" "$lidb_pid" "$port" "$round"
    stop_lidb_serve >/dev/null
  done
done

python3 - "$out" "$variants" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault((r["test"], r["server"]), []).append(r)
print(f"{'test':6} {'server':22} {'round':>5} {'req/s':>10} {'p50 ms':>7} {'p99 ms':>7} "
      f"{'cpu ms/1k':>9} {'ctxsw/1k':>8} {'vol/1k':>7} {'load':>5}")
for (test, server), rs in sorted(by.items()):
    for r in rs:
        print(f"{test:6} {server:22} {r['round']:>5} {r['rps']:>10.0f} {r['p50_ms']:>7.3f} "
              f"{r['p99_ms']:>7.3f} {r['cpu_ms_per_1k']:>9.3f} {r['switches_per_1k']:>8.1f} "
              f"{r['voluntary_per_1k']:>7.1f} {r['load']:>5.2f}")
print("ratios to redis in the same round (median over rounds):")
tests = sorted({t for t, _ in by})
for test in tests:
    for server in sys.argv[2].split():
        ratios = []
        for r in by.get((test, server), []):
            peer = [x for x in by.get((test, "redis"), []) if x["round"] == r["round"]]
            if peer:
                ratios.append(r["rps"] / peer[0]["rps"])
        if ratios:
            shown = ", ".join(f"{x:.2f}" for x in ratios)
            print(f"  {test:6} {server:22} median {statistics.median(ratios):.2f}  ({shown})")
PY
