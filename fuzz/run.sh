#!/usr/bin/env bash
# Short fuzz pass over every target (CI runs it): fuzz/run.sh [seconds_per_target, default 7].
# Builds with cargo-fuzz (installed if absent) on nightly when rustup has it, else on stable with
# RUSTC_BOOTSTRAP=1; runs each target from a copy of its committed corpus (fuzz/corpus/<target>),
# so the run adds no files to the repository; fails if any target finds a crash (the input is
# left under fuzz/artifacts/<target>/, which git ignores).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-7}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

echo "== building the fuzz targets"
"${fuzz[@]}" build -O

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
for target in $("${fuzz[@]}" list); do
  echo "== fuzz $target (${seconds} s)"
  mkdir -p "$work/$target"
  if [ -d "corpus/$target" ]; then
    cp -r "corpus/$target/." "$work/$target/"
  fi
  if ! "${fuzz[@]}" run -O "$target" "$work/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
      -print_final_stats=0 2>"$work/$target.log"; then
    tail -n 40 "$work/$target.log"
    failed+=("$target")
  else
    grep -E '^(Done|#[0-9]+ *DONE)' "$work/$target.log" | tail -n 1 || true
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing found crashes in: ${failed[*]} (inputs under fuzz/artifacts/)"
  exit 1
fi
echo "fuzzing passed"
