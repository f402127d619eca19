#!/usr/bin/env bash
# `lidb stress` for every engine, the way CI runs it: for each engine, one run in kill mode with
# I/O faults (a child process SIGKILLed at a random moment of every KILL_EVERY, faults injected
# in its storage, every key verified after every kill), one deterministic run with simulated
# power cuts, and for lsm and finedex one run through `lidb serve` with the server killed.
# Prints one summary line per run; stops at the first failure (exit 1, the failing seed named).
#
#   cargo build --release --bin lidb && scripts/stress.sh
#
# DURATION: of each kill-mode run (default 30s). ENGINES: space-separated (default: all seven).
# THREADS (8), KEYS (10000), KILL_EVERY (2s), FAULTS (the spec below), SEED (default: from the
# clock; printed, so a failing run can be repeated), OPS: operations of each deterministic run
# (default 30000). LIDB: the binary (target/release/lidb). A longer run of one engine is one
# command, e.g.:  target/release/lidb stress --engine lsm --duration 30m --kill-every 5s \
#                   --faults "$FAULTS"
set -euo pipefail
cd "$(dirname "$0")/.."
lidb="${LIDB:-target/release/lidb}"
duration="${DURATION:-30s}"
engines="${ENGINES:-lsm learnedkv lsm+ lsm+tier finedex learnedstore btree}"
threads="${THREADS:-8}"
keys="${KEYS:-10000}"
kill_every="${KILL_EVERY:-2s}"
faults="${FAULTS:-read-eio=0.001,write-eio=0.0002,short-write=0.0002,sync-fail=0.0002,enospc=1MiB}"
seed="${SEED:-$(date +%s)}"
ops="${OPS:-30000}"
[ -x "$lidb" ] || { echo "stress.sh: $lidb not found: cargo build --release --bin lidb" >&2; exit 1; }

for engine in $engines; do
  echo "== $engine: kill mode with faults ($duration, a kill within every $kill_every)"
  "$lidb" stress --engine "$engine" --threads "$threads" --keys "$keys" --duration "$duration" \
    --kill-every "$kill_every" --faults "$faults" --seed "$seed"
  case "$engine" in
    learnedstore|btree) ;;  # their page file is not on lidb's storage layer: no power cuts
    *)
      echo "== $engine: deterministic, power cuts and faults ($ops operations)"
      "$lidb" stress --engine "$engine" --deterministic --keys 2000 --ops "$ops" \
        --faults "$faults" --seed "$seed" --duration 5m ;;
  esac
done
for engine in lsm finedex; do
  case " $engines " in *" $engine "*) ;; *) continue ;; esac
  echo "== $engine through lidb serve, the server killed ($duration)"
  "$lidb" stress --serve --engine "$engine" --threads "$threads" --keys "$keys" \
    --duration "$duration" --kill-every "$kill_every" --seed "$seed"
done
echo "stress: every run passed (seed $seed)"
