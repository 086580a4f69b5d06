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
for target in $targets; do
  bin="$build/tests/fuzz/fuzz_$target"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin is not built (configure with -DTANDEM_FUZZ=ON)" >&2
    exit 1
  fi
  mkdir -p "$scratch/$target"
  echo "fuzz: $target for ${seconds} s"
  "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$scratch/$target/crash-" \
    "$scratch/$target" $(ls -d "tests/fuzz/corpus/$target" 2>/dev/null) 2>&1 | grep -E "^(#|stat::|INFO: (Running|Loaded|seed))|ERROR|SUMMARY|Test unit" | tail -n 8 || true
  if ls "$scratch/$target"/crash-* >/dev/null 2>&1; then
    echo "fuzz: $target found a crash; inputs in $scratch/$target/" >&2
    exit 1
  fi
done
echo "fuzz: no crashes (new inputs, if any, in $scratch)"
