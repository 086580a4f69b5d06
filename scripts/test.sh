#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, golden, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --tests
# The bootstrap fetched every test file: a test that finds one missing fails, not skips.
export TANDEM_REQUIRE_FETCHED=1
start=$(date +%s)
scripts/build.sh
built=$(date +%s)
scripts/test_count.sh build
(cd build && ctest --output-on-failure -j "${TANDEM_JOBS:-$(nproc)}")
tested=$(date +%s)
for step in tests/e2e/run_*.sh; do
  [ -e "$step" ] && bash "$step"
done
echo "tests: all passed (build $((built - start)) s, ctest $((tested - built)) s, e2e $(($(date +%s) - tested)) s)"
