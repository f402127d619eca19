#!/usr/bin/env bash
# Instructions per request of the server process, counted by valgrind's callgrind (user space
# only: the kernel's share of a request is not in it), for Debian's redis-server, `lidb serve`
# and `lidb serve --no-memory-reads`, one redis-benchmark test at a time. Unlike throughput on this
# shared machine, the count does not depend on what else runs.
#
#   cargo build --release --bin lidb && scripts/serve-callgrind.sh
#
# REQUESTS (20000), TESTS ("get set"), ENGINE (lsm), LIDB (the binary). Each server runs under
# callgrind on a free port of 127.0.0.1; the counters are zeroed (callgrind_control --dump) just
# before the measured test and dumped just after it, so start-up, the SET that fills the keys
# for GET and the shutdown are not counted. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
lidb="${LIDB:-target/release/lidb}"
requests="${REQUESTS:-20000}"
tests="${TESTS:-get set}"
engine="${ENGINE:-lsm}"
command -v valgrind >/dev/null || { echo "serve-callgrind: valgrind is not installed" >&2; exit 2; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The newest callgrind dump of this run.
last_dump() {
  find "$work" -maxdepth 1 -name 'callgrind.out*' -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2
}

# Runs test $2 against server $1 (the rest: its command, PORT and DIR replaced).
measure() {
  local name="$1" test="$2" port dump total
  shift 2
  port="$(free_port)"
  rm -rf "$work/db"
  local cmd=("${@//PORT/$port}")
  cmd=("${cmd[@]//DIR/$work}")
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "${cmd[@]}" \
    >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 600); do
    timeout 2 redis-cli -h 127.0.0.1 -p "$port" PING >/dev/null 2>&1 && break
    sleep 0.2
  done
  if [ "$test" = get ]; then
    timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -t set -n "$requests" -c 8 -P 16 -q >/dev/null
  fi
  callgrind_control --dump "$server_pid" >/dev/null 2>&1
  sleep 1
  timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -t "$test" -n "$requests" -c 8 -P 16 -q >/dev/null
  callgrind_control --dump "$server_pid" >/dev/null 2>&1
  sleep 1
  dump="$(last_dump)"
  total="$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")"
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
  rm -f "$work"/callgrind.out*
  python3 -c "print(f'{\"$name\":24} {\"$test\":4} {$total / $requests:>10.0f} instructions per request')"
}

echo "server                   test instructions per request (callgrind, $requests requests, -c 8 -P 16)"
for t in $tests; do
  measure redis-server "$t" redis-server --bind 127.0.0.1 --port PORT --save '' --appendonly no --dir DIR
  measure "lidb ($engine)" "$t" "$lidb" serve --engine "$engine" --db DIR/db --listen 127.0.0.1:PORT
  measure "lidb --no-memory-reads" "$t" "$lidb" serve --engine "$engine" --db DIR/db \
    --listen 127.0.0.1:PORT --no-memory-reads
done
