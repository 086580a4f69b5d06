#!/usr/bin/env bash
# The sanitizer job (CI runs it after scripts/test.sh): the unit tests and the fuzz targets,
# built with clang under AddressSanitizer + UndefinedBehaviorSanitizer (CPU backend only) in
# build-san/; the tests run, then each fuzz target for a bounded time (scripts/fuzz.sh;
# TANDEM_FUZZ_SECONDS per target, 20 by default). The golden tests (real models, real
# servers) run once, in the Release job: here they would cost most of the job's time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TANDEM_JOBS:-$(nproc)}"
unity=OFF
[ "${TANDEM_UNITY:-0}" = 1 ] && unity=ON
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 (the test sources too, TANDEM_TEST_OPT): what ASan is usually run at; most of the
# build time is the compiler's. -O0 test sources halve their compile time but double the
# tests' (a test's inline and template code runs at -O0, the libraries' calls into it too),
# and timing-bound server tests then fail.
gen=()  # Ninja as in scripts/build.sh
[ -f build-san/CMakeCache.txt ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
cmake -S . -B build-san "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DCMAKE_CXX_COMPILER=clang++ -DTANDEM_CUDA=OFF -DTANDEM_BENCH=OFF \
  -DTANDEM_SANITIZE=ON -DTANDEM_FUZZ=ON -DTANDEM_GOLDEN_TESTS=OFF -DTANDEM_UNITY=$unity "${launcher[@]}" >/dev/null
start=$(date +%s)
cmake --build build-san -j "$jobs" --target unit_tests fuzz_targets
built=$(date +%s)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
scripts/test_count.sh build-san
# Two tests are the Release job's only: each is mostly model arithmetic repeated, and under
# ASan each was a test binary's longest by far (~500 s and ~250 s of the job's ~510 s):
# SpecDistribution.* (60,000 sampled requests through the engine for a chi-square test; its
# code paths run here in the other speculative sampling tests, SpecEngine.*) and
# EvalUrl.InProcessAndUrlRunsAgreeOnTheTinyModel (four eval tasks on the embedded model, in
# process and through a server; the URL client runs here in the other EvalUrl tests).
skip='-SpecDistribution.*:EvalUrl.InProcessAndUrlRunsAgreeOnTheTinyModel'
(cd build-san && GTEST_FILTER="$skip" ctest --output-on-failure -j "$jobs")
tested=$(date +%s)
scripts/fuzz.sh "${TANDEM_FUZZ_SECONDS:-20}" build-san
echo "sanitize: build $((built - start)) s, tests $((tested - built)) s, fuzz $(($(date +%s) - tested)) s"
