#!/usr/bin/env bash
# Smoke run of `lidb serve` with Debian's redis-cli and redis-benchmark (CI runs it; by hand after
# `cargo build --release --bin lidb`):
#
#   scripts/serve-smoke.sh            redis-cli (RESP2 and -3) and redis-py checks, one
#                                     redis-benchmark run against lidb, then the same clients
#                                     against lidb with --requirepass-file and over TLS
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
trap serve_cleanup EXIT

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

echo "== redis-cli -3 checks (RESP3 after HELLO 3)"
expect OK -3 SET smoke:r3 v
expect v -3 GET smoke:r3
expect "" -3 GET smoke:none
expect 'save ' -3 CONFIG GET save   # a map: key and value on one line
cli -3 HELLO 3 | grep -qx 'server lidb' || fail "redis-cli -3 HELLO 3 does not name lidb"
cli -3 INFO server | grep -q "^engine:$engine" || fail "INFO server (RESP3) does not name the engine"
expect 1 -3 DEL smoke:r3

# redis-py, the Python client, in a virtualenv of its own (PyPI's `redis`, with its defaults:
# redis-py 8 opens every connection with HELLO 3, and HELLO 3 AUTH with a password), and with
# protocol=2: commands, a pipeline, SCAN through scan_iter, MGET, and a binary value;
# REDIS_PY=0 skips it.
if [ "${REDIS_PY:-1}" = 1 ]; then
  echo "== redis-py against lidb serve"
  python3 -m venv "$work/venv" >/dev/null || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$work/venv/bin/pip" install --quiet redis >/dev/null || fail "pip install redis failed"
  for protocol in default 2; do
  "$work/venv/bin/python" - "$port" "$protocol" <<'PY' || fail "redis-py checks failed (protocol $protocol)"
import sys
import redis
kwargs = {} if sys.argv[2] == "default" else {"protocol": int(sys.argv[2])}
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=10, **kwargs)
assert r.ping()
hello = r.execute_command("HELLO")
want = 2 if kwargs else (3 if int(redis.__version__.split(".")[0]) >= 8 else 2)
proto = hello[b"proto"] if isinstance(hello, dict) else hello[hello.index(b"proto") + 1]
assert proto == want, (hello, want)
assert r.client_setname("smoke") and r.client_getname() in ("smoke", b"smoke")
assert "engine" in r.info("server")
assert r.config_get("save") in ({"save": ""}, {b"save": b""})
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
print("redis-py", redis.__version__, "protocol", proto, "ok")
PY
  done
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
  echo "== redis-server on 127.0.0.1 (--save '' --appendonly no)"
  start_redis_server
  echo "== redis-benchmark -h 127.0.0.1 -p PORT ${bench_flags[*]}   (redis-server $(redis-server --version | awk '{print $3}'))"
  bench "$redis_port" | tee "$work/redis.csv"
  stop_redis_server
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

# The same clients against a server with a password (from a file, so it is not in `ps`).
printf 'smoke-secret\n' >"$work/password"
LIDB_SERVE_ARGS="--requirepass-file $work/password" start_lidb_serve "$engine"
echo "== redis-cli and redis-py with --requirepass-file"
# redis-cli may exit non-zero after an error reply: its output is what is checked.
got="$(cli GET smoke:a 2>&1 || true)"
grep -q '^NOAUTH Authentication required' <<<"$got" || fail "GET without AUTH: got '$got', want NOAUTH"
got="$(cli -a wrong --no-auth-warning GET smoke:a 2>&1 || true)"
grep -q 'WRONGPASS' <<<"$got" || fail "a wrong password: got '$got', want WRONGPASS"
expect OK -a smoke-secret --no-auth-warning SET smoke:a 1
expect 1 -3 -a smoke-secret --no-auth-warning GET smoke:a
cli -a smoke-secret --no-auth-warning INFO stats | grep -q '^acl_access_denied_auth:1' || fail "INFO does not count the wrong password"
if [ "${REDIS_PY:-1}" = 1 ]; then
  "$work/venv/bin/python" - "$port" <<'PY' || fail "redis-py checks with a password failed"
import sys
import redis
port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, password="smoke-secret")
assert r.get("smoke:a") == b"1"
for bad in ({"password": "wrong"}, {}):
    try:
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **bad).get("smoke:a")
    except redis.exceptions.AuthenticationError:
        pass
    else:
        raise AssertionError(f"no AuthenticationError with {bad}")
print("redis-py with a password ok")
PY
fi
stop_lidb_serve

# The same clients over TLS: a CA and a certificate for 127.0.0.1 made here with openssl, the
# listener speaking only TLS; redis-cli --tls where it was built with TLS, redis-py ssl=True.
if command -v openssl >/dev/null; then
  echo "== TLS: redis-cli --tls and redis-py ssl=True"
  tls="$work/tls"
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=smoke-ca \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" >/dev/null 2>&1 || fail "openssl: no CA"
  openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$tls/server.key" \
    -out "$tls/server.csr" >/dev/null 2>&1 || fail "openssl: no request"
  printf 'subjectAltName=IP:127.0.0.1\n' >"$tls/san.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/san.ext" -out "$tls/server.pem" >/dev/null 2>&1 ||
    fail "openssl: no server certificate"
  LIDB_SERVE_ARGS="--tls-cert $tls/server.pem --tls-key $tls/server.key" start_lidb_serve "$engine"
  if redis-cli --help 2>&1 | grep -q -- '--tls'; then
    got="$(timeout 10 redis-cli --tls --cacert "$tls/ca.pem" -h 127.0.0.1 -p "$port" SET tls:a 1)"
    [ "$got" = OK ] || fail "redis-cli --tls SET: got '$got'"
    got="$(timeout 10 redis-cli -h 127.0.0.1 -p "$port" PING 2>&1 || true)"
    [ "$got" != PONG ] || fail "a plain client was answered on the TLS listener"
  else
    echo "# this redis-cli has no --tls: its TLS check skipped"
  fi
  if [ "${REDIS_PY:-1}" = 1 ]; then
    "$work/venv/bin/python" - "$port" "$tls/ca.pem" <<'PY' || fail "redis-py over TLS failed"
import sys
import redis
port, ca = int(sys.argv[1]), sys.argv[2]
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, ssl=True, ssl_ca_certs=ca)
assert r.set("tls:b", "2") and r.get("tls:b") == b"2"
try:
    redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, ssl=True).ping()
except redis.exceptions.ConnectionError:
    pass
else:
    raise AssertionError("a client that does not trust the CA was answered")
print("redis-py", redis.__version__, "over TLS ok")
PY
  fi
  stop_lidb_serve
else
  echo "# openssl not installed: the TLS checks skipped"
fi
echo "serve smoke passed"
