#!/usr/bin/env bash
# Offline throughput of the CPU backend against the row count (the figures `--batch auto`
# picks a CPU row count from): B requests of 128 -> 64 tokens at --batch B, B = 1, 2, 4,
# 8, 16, 32, on the embedded model and on a random llama-100m; output tok/s with
# prefill included, and the decode-only step time. Median of REPEATS runs.
#   bench/cpu_batch_sweep.sh [BUILD_DIR (default: build)]   (env: REPEATS, THREADS, MODELS)
set -euo pipefail
build=${1:-build}
repeats=${REPEATS:-3}
threads=${THREADS:-2}
llama=/tmp/llama100m
[ -f "$llama/config.json" ] || "$build/tandem" random-model --like llama-100m --out "$llama" > /dev/null
models=${MODELS:-"models/tiny-kjv $llama"}
for model in $models; do
  echo "model $model, $threads threads"
  for b in 1 2 4 8 16 32; do
    rates=(); steps=()
    for r in $(seq "$repeats"); do
      log=$("$build/bench/offline_bench" "$model" --device cpu --input 128 --output 64 --num "$b" \
        --batch "$b" --threads "$threads" 2>&1)
      rates+=("$(grep -oP '= \K[0-9.]+(?= output tok/s \(after)' <<< "$log")")
      steps+=("$(grep -oP '\(\K[0-9.]+(?= ms each)' <<< "$log")")
    done
    med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
    echo "  batch $b: $(med "${rates[@]}") output tok/s (prefill included), decode step $(med "${steps[@]}") ms   [runs: ${rates[*]}]"
  done
done
