#!/usr/bin/env bash
# The results page in one command: reruns the headline experiments, one JSON-lines file each in
# OUT_DIR (first line {"report_command": ...}, then the rows of the command's --json output),
# records the machine in OUT_DIR/machine.json, then `lidb bench report` rewrites the rows of
# BENCHMARKS.md's results table and draws docs/plots/report-*.svg:
#   index.jsonl         `lidb index bench` on one real data set (tweetids_10M), B = 16;
#   ycsb.jsonl          `lidb-bench bench ycsb` workload C: lsm, learnedkv, lsm+ (and rocksdb
#                       when the binary has it: LIDB_BENCH=rocksdb-current/target/release/lidb-bench
#                       for the current RocksDB), one run;
#   finedex.jsonl       `lidb-bench bench concurrent`: finedex, li+delta, congee, c and insert;
#   learnedstore.jsonl  `lidb bench btree --experiment memory`: learnedstore against btree;
#   serve.jsonl         `lidb serve` (lsm) against redis-server, redis-benchmark SET and GET,
#                       five rounds taking turns, medians (skipped, with a line saying so,
#                       where redis-server is not installed);
#   stress.jsonl        `lidb stress` with kills, its summary line as JSON.
#
#   scripts/report.sh [--quick] [OUT_DIR]      (OUT_DIR default bench-out/report)
#
# Full size took 6 minutes on the project's 2-core machine (2026-11-28). --quick runs small sizes (a few minutes)
# to check the pipeline end to end; its figures are not the page's, so it renders into
# OUT_DIR/BENCHMARKS.md and OUT_DIR/plots instead of the real page. LIDB_DATA_DIR: where the
# SOSD files are (default ../shared/datasets). LIDB, LIDB_BENCH: the binaries (default
# target/release/lidb and target/release/lidb-bench; built here unless NO_BUILD=1). Every
# process it starts (servers) is stopped by its PID at exit (trap), whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
out_dir="${1:-bench-out/report}"
lidb="${LIDB:-target/release/lidb}"
lidb_bench="${LIDB_BENCH:-target/release/lidb-bench}"
data_dir="${LIDB_DATA_DIR:-../shared/datasets}"

fail() {
  echo "report: $*" >&2
  [ -n "${work:-}" ] && [ -s "$work/lidb.err" ] && sed 's/^/  stderr: /' "$work/lidb.err" >&2
  exit 1
}

if [ "${NO_BUILD:-0}" != 1 ]; then
  echo "== cargo build --release -p lidb-cli -p lidb-bench-bin"
  cargo build --release -p lidb-cli -p lidb-bench-bin
fi
[ -x "$lidb" ] || fail "no binary $lidb"
[ -x "$lidb_bench" ] || fail "no binary $lidb_bench"

if [ "$quick" = 1 ]; then
  index_data="$data_dir/osm_cellids_274K_uint64.zst" queries=20000
  kv_records=20K kv_ops=20K
  conc_records=100K conc_ops=100K conc_data=synthetic:lognormal:250K
  btree_data=synthetic:lineargen:100K btree_ops=50K
  serve_requests=20000 serve_rounds=2 stress_duration=10s stress_engines=lsm
else
  index_data="$data_dir/tweetids_10M_uint64.zst" queries=200000
  kv_records=1M kv_ops=500K
  conc_records=2M conc_ops=2M conc_data=synthetic:lognormal:5M
  btree_data=synthetic:lineargen:2M btree_ops=500K
  serve_requests=200000 serve_rounds=5 stress_duration=60s stress_engines=lsm,learnedkv,finedex
fi
[ -f "$index_data" ] || fail "no $index_data (set LIDB_DATA_DIR)"

mkdir -p "$out_dir"
rm -f "$out_dir"/*.jsonl
work="$(mktemp -d)"
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh
trap serve_cleanup EXIT

python3 - "$(uname -n)" "$(nproc)" "$quick" >"$out_dir/machine.json" <<'PY'
import datetime, json, sys
host, cores, quick = sys.argv[1:]
kib = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:"))
print(json.dumps({"host": host, "cores": int(cores), "memory_gib": round(kib / 2**20),
                  "date": datetime.date.today().isoformat(), "quick": quick == "1"}))
PY

# Runs one benchmark into $out_dir/$1.jsonl: the command line first, then its --json rows.
# The line records the command as a reader would type it (binary by name, no scratch paths).
run() {
  local name="$1" bin="$2"
  shift 2
  local shown="$(basename "$bin") $*"
  shown="${shown//$work/DIR}"
  echo "== [$((SECONDS / 60))m] $name: $shown"
  python3 -c 'import json, sys; print(json.dumps({"report_command": sys.argv[1]}))' "$shown" >"$out_dir/$name.jsonl"
  "$bin" "$@" --json >>"$out_dir/$name.jsonl" 2>"$work/lidb.err" || fail "$name: $shown failed"
}

# 1. Index families on one real data set.
run index "$lidb" index bench --data "$index_data" --index binary,fp,pgm,rs,rmi,lpa,plex \
  --boundary 16 --queries "$queries" --seed 42

# 2. The LSM and LearnedKV against lsm+ and RocksDB (where built in) on YCSB C, in lidb-bench:
# a comparison with a peer runs where every engine has one allocator (lidb's own binary uses
# mimalloc; lidb-bench the system's, as RocksDB's C++ does).
engines="lsm,learnedkv,lsm+"
probe="$("$lidb_bench" bench ycsb --engine rocksdb --records 0 --dir "$work" 2>&1 || true)"
if [[ "$probe" == *"not built in"* ]]; then
  echo "# rocksdb: not built in (cargo build --release --features rocksdb for it)"
else
  engines="$engines,rocksdb"
fi
# rocksdb gets half its cache as a row cache, its counterpart of lsm's entries cache (measured
# best for YCSB C; docs/bench-log/12-rocksdb-current.md).
run ycsb "$lidb_bench" bench ycsb --engine "$engines" --workload c --records "$kv_records" \
  --ops-per-phase "$kv_ops" --phases 2 --memtable 8MiB --rocksdb-row-cache 0.5 \
  --device-probe-reads 0 --seed 42 --dir "$work"

# 3. FINEdex against li+delta and congee (peers linked into lidb-bench only).
run finedex "$lidb_bench" bench concurrent --index finedex,li+delta,congee --workload c,insert \
  --threads 1,2 --records "$conc_records" --ops "$conc_ops" --data "$conc_data"

# 4. LearnedStore against the same tree without its learned path.
run learnedstore "$lidb" bench btree --experiment memory --data "$btree_data" \
  --ops "$btree_ops" --engine learnedstore,btree

# 5. lidb serve against redis-server, one server thread each, SET then GET, in $serve_rounds
# rounds taking turns (this machine is shared: one short run swung the SET ratio from 0.72x to
# 0.94x between two reports). Each server's row holds its median throughput over the rounds;
# lidb's rows also hold the median of the per-round ratios to redis-server, which the page shows.
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  echo "== [$((SECONDS / 60))m] serve: redis-benchmark -n $serve_requests -c 8 -P 16 against redis-server and lidb serve, $serve_rounds rounds"
  python3 -c 'import json, sys; print(json.dumps({"report_command": sys.argv[1]}))' \
    "redis-benchmark -t set,get -n $serve_requests -r 100000 -c 8 -P 16 against redis-server and lidb serve --engine lsm, $serve_rounds rounds taking turns (medians)" \
    >"$out_dir/serve.jsonl"
  measure() {
    local server="$1" port="$2" round="$3" test csv
    for test in set get; do
      csv="$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -t "$test" -n "$serve_requests" \
        -r 100000 -c 8 -P 16 --csv | grep -v '^"test"')" || fail "redis-benchmark $test against $server"
      python3 - "$server" "$test" "$round" "$csv" >>"$work/serve-rounds.jsonl" <<'PY'
import csv, json, sys
server, test, round_, line = sys.argv[1:]
row = next(csv.reader([line]))
print(json.dumps({"server": server, "test": test, "round": int(round_),
                  "kops_per_s": float(row[1]) / 1e3}))
PY
    done
  }
  : >"$work/serve-rounds.jsonl"
  for round in $(seq 1 "$serve_rounds"); do
    start_redis_server
    measure redis "$redis_port" "$round"
    stop_redis_server
    start_lidb_serve lsm >/dev/null
    measure lidb "$port" "$round"
    stop_lidb_serve >/dev/null
  done
  python3 - "$work/serve-rounds.jsonl" >>"$out_dir/serve.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def kops(server, test):
    return {r["round"]: r["kops_per_s"] for r in runs if r["server"] == server and r["test"] == test}
for test in ["set", "get"]:
    redis, lidb = kops("redis", test), kops("lidb", test)
    for server, got in [("redis", redis), ("lidb", lidb)]:
        row = {"bench": "serve", "engine": server, "workload": test, "threads": 1,
               "kops_per_s": statistics.median(got.values()),
               "rounds_kops_per_s": [got[k] for k in sorted(got)]}
        if server == "lidb":
            row["ratio_to_redis"] = statistics.median(
                lidb[k] / redis[k] for k in lidb if redis.get(k))
        print(json.dumps(row))
PY
else
  echo "# serve: redis-server or redis-benchmark not installed; skipped (its row stays as it was)"
fi

# 6. lidb stress with kills: the summary line (key=value words) as one JSON row per engine.
echo "{\"report_command\": \"lidb stress --engine {$stress_engines} --threads 4 --keys 10000 --duration $stress_duration --kill-every 2s --seed 42\"}" >"$out_dir/stress.jsonl"
IFS=, read -r -a stress_list <<<"$stress_engines"
for engine in "${stress_list[@]}"; do
  echo "== [$((SECONDS / 60))m] stress: $engine for $stress_duration"
  "$lidb" stress --engine "$engine" --threads 4 --keys 10000 --duration "$stress_duration" \
    --kill-every 2s --seed 42 --db "$work/stress-$engine" >"$work/stress.out" 2>"$work/lidb.err" ||
    fail "lidb stress --engine $engine failed"
  python3 - "$work/stress.out" >>"$out_dir/stress.jsonl" <<'PY'
import json, sys
line = next(l for l in open(sys.argv[1]) if l.startswith("stress: "))
row = {"bench": "stress"}
for word in line.split()[1:]:
    k, _, v = word.partition("=")
    if v:
        try:
            row[k] = float(v) if "." in v else int(v)
        except ValueError:
            row[k] = v
print(json.dumps(row))
PY
done

# 7. The page and the plots.
page=BENCHMARKS.md plots=docs/plots
if [ "$quick" = 1 ]; then
  cp BENCHMARKS.md "$out_dir/BENCHMARKS.md"
  page="$out_dir/BENCHMARKS.md" plots="$out_dir/plots"
  echo "# quick run: rendering into $page and $plots, not the real page"
fi
"$lidb" bench report --input "$out_dir" --page "$page" --plots "$plots"
echo "# report: ${SECONDS}s in all; rows in $out_dir"
