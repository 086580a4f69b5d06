#!/usr/bin/env bash
# FP8 weights on the CPU against bf16: one random qwen3-0.6b-shaped model written both ways
# (`random-model --dtype fp8`: per-channel e4m3 layers, bf16 embeddings and tied lm_head),
# run by offline_bench on the CPU backend — decode at 1, 4 and 16 rows (output tok/s after
# the first token) and one 256-token prefill (prompt tok/s) — the runs of each figure
# interleaved, REPEATS times, medians printed. BASE_BENCH names a second offline_bench
# (say, the previous commit's) that runs the FP8 model in the same loop.
#   bench/cpu_fp8.sh            THREADS (2), REPEATS (3), BUILD (build), WORK (/tmp/cpu_fp8)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
threads=${THREADS:-2}
repeats=${REPEATS:-3}
work=${WORK:-/tmp/cpu_fp8}
base=${BASE_BENCH:-}
mkdir -p "$work"
for d in bf16 fp8; do
  [ -e "$work/$d/config.json" ] ||
    "$build/tandem" random-model --like qwen3-0.6b --dtype "$d" --out "$work/$d" > /dev/null
done

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
run() {  # BENCH MODEL ROWS INPUT OUTPUT PATTERN -> the figure
  "$1" "$2" --device cpu --input "$4" --output "$5" --num "$3" --batch "$3" --threads "$threads" 2>&1 |
    grep -oP "$6" | head -1
}
decode='after the first token: \K[0-9.]+'
prefill='[0-9.]+(?= prompt tok/s)'
runs=("new bf16|$build/bench/offline_bench|$work/bf16" "new fp8|$build/bench/offline_bench|$work/fp8")
[ -n "$base" ] && runs+=("base fp8|$base|$work/fp8")

printf '%-10s %12s %12s %12s %14s\n' "" "decode b1" "decode b4" "decode b16" "prefill 256"
declare -A got
for ((r = 0; r < repeats; r++)); do
  for spec in "${runs[@]}"; do
    IFS='|' read -r name bin model <<< "$spec"
    for rows in 1 4 16; do got["$name|b$rows"]+="$(run "$bin" "$model" "$rows" 16 32 "$decode") "; done
    got["$name|prefill"]+="$(run "$bin" "$model" 1 256 2 "$prefill") "
  done
done
for spec in "${runs[@]}"; do
  IFS='|' read -r name _ _ <<< "$spec"
  printf '%-10s' "$name"
  for key in b1 b4 b16 prefill; do
    printf ' %12s' "$(tr ' ' '\n' <<< "${got["$name|$key"]}" | grep . | median)"
  done
  printf '\n'
done
echo "(tok/s, medians of $repeats; $threads threads; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
