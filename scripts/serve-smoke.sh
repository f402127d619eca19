#!/usr/bin/env bash
# Smoke run of `lidb serve` with Debian's redis-cli and redis-benchmark (CI runs it; by hand after
# `cargo build --release --bin lidb`):
#
#   scripts/serve-smoke.sh            redis-cli and redis-py checks and one redis-benchmark run
#                                     against lidb
#   scripts/serve-smoke.sh --compare  the same benchmark against Debian's redis-server too
#
# ENGINE (default lsm) picks the engine, LIDB the binary (default target/release/lidb),
# REQUESTS (default 20000) the benchmark's -n. Servers listen on 127.0.0.1 only, on free ports;
# every wait is bounded; lidb is stopped by its PID with SIGTERM and must exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
lidb="${LIDB:-target/release/lidb}"
engine="${ENGINE:-lsm}"
requests="${REQUESTS:-20000}"
compare=0
[ "${1:-}" = "--compare" ] && compare=1
bench_flags=(-t set,get,mset -n "$requests" -c 8 -P 16 --csv)

work="$(mktemp -d)"
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh
redis_pid=""
cleanup() {
  for p in $lidb_pid $redis_pid; do
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "serve-smoke: $*" >&2
  [ -s "$work/lidb.err" ] && sed 's/^/  lidb stderr: /' "$work/lidb.err" >&2
  exit 1
}

start_lidb_serve "$engine"

cli() { timeout 10 redis-cli -h 127.0.0.1 -p "$port" "$@"; }
expect() {
  local want="$1"
  shift
  local got
  got="$(cli "$@")" || fail "redis-cli $* failed"
  [ "$got" = "$want" ] || fail "redis-cli $*: got '$got', want '$want'"
}

echo "== redis-cli checks"
expect PONG PING
expect OK SET smoke:a 1
expect OK SET smoke:b "two words"
expect 1 GET smoke:a
expect "two words" GET smoke:b
expect OK MSET smoke:c 3 smoke:d 4
expect 2 DEL smoke:a smoke:nope smoke:d
expect "" GET smoke:a
expect "$(printf '0\nsmoke:b\nsmoke:c')" SCAN 0 MATCH 'smoke:*' COUNT 100
expect "$(printf '\nsmoke:b\nsmoke:c')" LIDB.RANGE - + LIMIT 10
expect 2 DBSIZE
cli INFO server | grep -q "^engine:$engine" || fail "INFO server does not name the engine"
expect OK FLUSHDB
expect 0 DBSIZE

# redis-py, the Python client, in a virtualenv of its own (PyPI's `redis`, with protocol=2):
# commands, a pipeline, SCAN through scan_iter, MGET, and a binary value; REDIS_PY=0 skips it.
if [ "${REDIS_PY:-1}" = 1 ]; then
  echo "== redis-py against lidb serve"
  python3 -m venv "$work/venv" >/dev/null || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$work/venv/bin/pip" install --quiet redis >/dev/null || fail "pip install redis failed"
  "$work/venv/bin/python" - "$port" <<'PY' || fail "redis-py checks failed"
import sys
import redis
# redis-py 8 asks for RESP3 (HELLO 3) unless told otherwise; lidb speaks RESP2 and refuses HELLO.
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=10, protocol=2)
assert r.ping()
assert r.set("py:a", "1") and r.get("py:a") == b"1"
pipe = r.pipeline(transaction=False)
for i in range(100):
    pipe.set(f"py:k{i:03}", i)
assert all(pipe.execute())
assert r.mget("py:k000", "py:k099", "py:none") == [b"0", b"99", None]
assert sorted(r.scan_iter(match="py:k*", count=7)) == [f"py:k{i:03}".encode() for i in range(100)]
blob = bytes(range(256)) * 4
r.set(b"py:\x00bin", blob)
assert r.get(b"py:\x00bin") == blob
assert r.delete("py:a", "py:none") == 1 and r.exists("py:a") == 0
assert r.dbsize() == 101
assert r.flushdb()
print("redis-py", redis.__version__, "ok")
PY
fi

bench() {
  timeout 300 redis-benchmark -h 127.0.0.1 -p "$1" "${bench_flags[@]}"
}

echo "== redis-benchmark -h 127.0.0.1 -p PORT ${bench_flags[*]}   (lidb serve --engine $engine)"
bench "$port" | tee "$work/lidb.csv"
for test in SET GET MSET; do
  grep -q "^\"$test" "$work/lidb.csv" || fail "redis-benchmark printed no $test row"
done

if [ "$compare" = 1 ]; then
  redis_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  echo "== redis-server on 127.0.0.1:$redis_port (--save '' --appendonly no)"
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --daemonize no --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do
    timeout 2 redis-cli -h 127.0.0.1 -p "$redis_port" PING >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "== redis-benchmark -h 127.0.0.1 -p PORT ${bench_flags[*]}   (redis-server $(redis-server --version | awk '{print $3}'))"
  bench "$redis_port" | tee "$work/redis.csv"
  kill -TERM "$redis_pid"
  wait "$redis_pid" || true
  redis_pid=""
  echo "== requests per second, lidb / redis"
  python3 - "$work/lidb.csv" "$work/redis.csv" <<'PY'
import csv, sys
def rps(path):
    with open(path) as f:
        return {row[0]: float(row[1]) for row in csv.reader(f) if row and row[0] != "test"}
lidb, redis = rps(sys.argv[1]), rps(sys.argv[2])
for test in lidb:
    if test in redis:
        print(f"{test}: lidb {lidb[test]:.0f} rps, redis {redis[test]:.0f} rps, ratio {lidb[test] / redis[test]:.2f}")
PY
fi

stop_lidb_serve
echo "serve smoke passed"
