# Shared by the scripts that serve (sourced, not run): start and stop `lidb serve` and
# redis-server on free ports of 127.0.0.1, and stop whatever is left at exit. The caller sets
# `lidb` (the binary), `work` (a scratch directory) and a `fail MESSAGE` function, and installs
# `trap serve_cleanup EXIT`.

lidb_pid=""
redis_pid=""

# Kills a server still running and removes $work: the callers' EXIT trap.
serve_cleanup() {
  for p in $lidb_pid $redis_pid; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

# A free TCP port of 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts redis-server without persistence on a free port, its files in $work, with the extra
# arguments given; sets redis_pid and redis_port and waits (10 s at most) for it to answer PING.
start_redis_server() {
  redis_port="$(free_port)"
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --daemonize no --dir "$work" "$@" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do
    timeout 2 redis-cli -h 127.0.0.1 -p "$redis_port" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "redis-server on port $redis_port did not answer PING within 10 s"
}

# Stops redis-server (SIGTERM) and waits for it.
stop_redis_server() {
  kill -TERM "$redis_pid"
  wait "$redis_pid" || true
  redis_pid=""
}

# Starts `lidb serve --engine $1` on a fresh database in $work/db, with the extra options of
# LIDB_SERVE_ARGS (words) if set; sets lidb_pid, addr and port.
start_lidb_serve() {
  local extra=()
  read -r -a extra <<<"${LIDB_SERVE_ARGS:-}"
  echo "== lidb serve --engine $1 ${extra[*]}"
  # A previous server's first line must not be read as this one's address.
  rm -f "$work/lidb.out" "$work/lidb.err"
  "$lidb" serve --engine "$1" --db "$work/db" --listen 127.0.0.1:0 "${extra[@]}" >"$work/lidb.out" 2>"$work/lidb.err" &
  lidb_pid=$!
  for _ in $(seq 100); do
    [ -s "$work/lidb.out" ] && break
    kill -0 "$lidb_pid" 2>/dev/null || fail "lidb serve exited before listening"
    sleep 0.1
  done
  addr="$(head -n 1 "$work/lidb.out" | awk '$1 == "listening" && $2 == "on" { print $3 }')"
  [ -n "$addr" ] || fail "no 'listening on ADDRESS' first line"
  port="${addr##*:}"
  echo "listening on $addr (pid $lidb_pid)"
}

# Sends SIGTERM to the server and requires it to exit 0 within 30 s.
stop_lidb_serve() {
  echo "== SIGTERM to lidb serve (pid $lidb_pid)"
  kill -TERM "$lidb_pid"
  for _ in $(seq 300); do
    kill -0 "$lidb_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$lidb_pid" 2>/dev/null && fail "lidb serve still running 30 s after SIGTERM"
  local status=0
  wait "$lidb_pid" || status=$?
  lidb_pid=""
  [ "$status" = 0 ] || fail "lidb serve exited with $status after SIGTERM"
}
