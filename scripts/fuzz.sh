#!/usr/bin/env bash
# Runs every fuzz target built in BUILD_DIR/tests/fuzz/ for SECONDS each (default 25; longer
# by hand, e.g. 3600) from the
# committed corpus under tests/fuzz/corpus/<target>/. New inputs the fuzzer finds go to a
# scratch folder (printed), not into the tree; a crash stops the run with its input saved
# there. Needs a build made with -DTANDEM_FUZZ=ON (scripts/sanitize.sh makes build-san/).
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-25}"
build="${2:-build-san}"
scratch=$(mktemp -d /tmp/tandem-fuzz-XXXXXX)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
targets=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/^fuzz_//; s/\.cpp$//')
bin() { echo "$build/tests/fuzz/fuzz_$1"; }
for target in $targets; do
  if [ ! -x "$(bin "$target")" ]; then
    echo "fuzz: $(bin "$target") is not built (configure with -DTANDEM_FUZZ=ON)" >&2
    exit 1
  fi
done
# One target per core at a time (TANDEM_JOBS, default nproc): each libFuzzer run is one
# process, so CI's two cores fuzz two targets at once, each for its full time.
fuzz_one() {
  local target=$1
  mkdir -p "$scratch/$target"
  "$(bin "$target")" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$scratch/$target/crash-" \
    "$scratch/$target" $(ls -d "tests/fuzz/corpus/$target" 2>/dev/null) > "$scratch/$target.log" 2>&1 || true
}
jobs="${TANDEM_JOBS:-$(nproc)}"
running=()
for target in $targets; do
  fuzz_one "$target" &
  running+=($!)
  if [ "${#running[@]}" -ge "$jobs" ]; then
    wait "${running[0]}"
    running=("${running[@]:1}")
  fi
done
wait
crashed=0
for target in $targets; do
  echo "fuzz: $target for ${seconds} s"
  grep -E "^(#|stat::|INFO: (Running|Loaded|seed))|ERROR|SUMMARY|Test unit" "$scratch/$target.log" | tail -n 8 || true
  if ls "$scratch/$target"/crash-* >/dev/null 2>&1; then
    echo "fuzz: $target found a crash; inputs in $scratch/$target/, its log $scratch/$target.log" >&2
    crashed=1
  fi
done
[ "$crashed" = 0 ] || exit 1
echo "fuzz: no crashes (new inputs, if any, in $scratch)"
