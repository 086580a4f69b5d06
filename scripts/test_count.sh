#!/usr/bin/env bash
# Lists how many gtest cases each test binary of a build holds, and the total, so a CI log
# shows that no test was lost between the Release and the sanitizer jobs.
#   scripts/test_count.sh [BUILD_DIR (default: build)]
set -euo pipefail
build="${1:-build}"
total=0
line=""
for bin in "$build"/tests/test_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  n=$("$bin" --gtest_list_tests | grep -c '^  ' || true)
  total=$((total + n))
  line+=" $(basename "$bin")=$n"
done
echo "test count ($build):$line total=$total"
