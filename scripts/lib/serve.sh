# Shared by scripts/serve-smoke.sh and scripts/ycsb-run.sh (sourced, not run): start and stop
# `lidb serve` on a free port of 127.0.0.1. The caller sets `lidb` (the binary), `work` (a
# scratch directory) and a `fail MESSAGE` function, and kills "$lidb_pid" in its EXIT trap if set.

lidb_pid=""

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
