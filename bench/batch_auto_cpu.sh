#!/usr/bin/env bash
# `--batch auto` on the CPU against hand-picked row counts and step budgets, through the
# server: for each model, `tandem serve` at each setting, then `tandem bench` at
# concurrency 1, 4 and 16 (128 -> 64 tokens); output tok/s and TTFT p50 per concurrency.
# Settings run in rounds (every setting once per round) so the machine's load hits them alike.
#   bench/batch_auto_cpu.sh [BUILD_DIR (default: build)]   (env: ROUNDS, MODELS, SETTINGS)
set -euo pipefail
build=${1:-build}
rounds=${ROUNDS:-1}
llama=/tmp/llama100m
[ -f "$llama/config.json" ] || "$build/tandem" random-model --like llama-100m --out "$llama" > /dev/null
models=${MODELS:-"models/tiny-kjv $llama"}
settings=${SETTINGS:-"auto:auto 1:auto 4:auto 8:auto 16:auto 32:auto 16:2048"}
port=8397
out=$(mktemp -d)
for r in $(seq "$rounds"); do
  for model in $models; do
    for s in $settings; do
      rows=${s%%:*}; tokens=${s##*:}
      "$build/tandem" serve --model "$model" --device cpu --port $port --batch "$rows" \
        --max-batched-tokens "$tokens" > "$out/serve.log" 2>&1 &
      pid=$!
      for i in $(seq 120); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
      "$build/tandem" bench --url http://127.0.0.1:$port --concurrency 1,4,16 --input-len 128 \
        --output-len 64 --num-requests 16 2> /dev/null |
        awk -v m="$(basename "$model")" -v s="$s" -v r="$r" \
          '$1 ~ /^[0-9]+$/ {printf "%s round %s batch:tokens %-10s conc %3s  %8.1f tok/s  TTFT p50 %8.1f ms\n", m, r, s, $1, $5, $6}'
      kill $pid; wait $pid 2> /dev/null || true
    done
  done
done
rm -rf "$out"
