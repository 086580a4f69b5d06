#!/usr/bin/env bash
# `tandem eval` on the embedded model on the CPU, in-process:
#   1. the batched engine scorer against the reference (teacher-forced) scorer on the
#      first LIMIT items of every task: wall time of each, and their scores compared;
#   2. every task in full with the engine scorer at 16 bits (f32 here), with
#      --quantization fp8 and with --kv-cache-dtype fp8, each compared with the 16-bit
#      run by tools/eval-tasks/compare_runs.py (difference and paired stderr).
# The --json files and tables stay in OUT.
#   bench/eval_cpu.sh [BUILD_DIR (default: build)]   (env: LIMIT (default 40), OUT, SKIP_FULL)
set -euo pipefail
build=${1:-build}
limit=${LIMIT:-40}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
echo "results in $out"

# run NAME FLAGS...: one eval, its wall seconds printed.
run() {
  local name=$1
  shift
  local start end
  start=$(date +%s.%N)
  "$build/tandem" eval --device cpu "$@" --json "$out/$name.json" > "$out/$name.txt" 2> "$out/$name.log"
  end=$(date +%s.%N)
  awk -v n="$name" -v s="$start" -v e="$end" 'BEGIN {printf "%-22s %8.1f s wall\n", n, e - s}'
}

run "reference_limit$limit" --scorer reference --limit "$limit"
run "engine_limit$limit" --limit "$limit"
python3 tools/eval-tasks/compare_runs.py "$out/reference_limit$limit.json" "$out/engine_limit$limit.json"
[ -n "${SKIP_FULL:-}" ] && exit 0

run engine_f32
run engine_fp8_weights --quantization fp8
run engine_fp8_kv --kv-cache-dtype fp8
cat "$out/engine_f32.txt"
echo "--quantization fp8 against f32:"
python3 tools/eval-tasks/compare_runs.py "$out/engine_f32.json" "$out/engine_fp8_weights.json"
echo "--kv-cache-dtype fp8 against f32:"
python3 tools/eval-tasks/compare_runs.py "$out/engine_f32.json" "$out/engine_fp8_kv.json"
