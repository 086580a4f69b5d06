#!/usr/bin/env bash
# The CPU throughput curve of the batching issue: `tandem bench` against `tandem serve` on a
# ~100M-parameter random llama, aggregate output tok/s at concurrency 1, 2, 4, 8, 16 with
# --batch 16 and with --batch 1 (the serial path). Writes bench/figures/cpu_batch{1,16}.svg.
#   bench/cpu_batch_curve.sh [BUILD_DIR (default: build)]
set -euo pipefail
build=${1:-build}
model=${MODEL:-/tmp/llama100m}
[ -f "$model/config.json" ] || "$build/tandem" random-model --like llama-100m --out "$model" >/dev/null
mkdir -p bench/figures
for batch in 1 16; do
  port=$((18500 + batch))
  "$build/tandem" serve --device cpu --model "$model" --port $port --batch $batch > /tmp/cpu_curve_serve.log 2>&1 &
  pid=$!
  for _ in $(seq 120); do curl -sf localhost:$port/health >/dev/null && break; sleep 1; done
  echo "--batch $batch"
  "$build/tandem" bench --url http://127.0.0.1:$port --concurrency 1,2,4,8,16 --num-requests 16 \
    --input-len 64 --output-len 32 --plot bench/figures/cpu_batch$batch.svg 2>/dev/null
  kill $pid; wait $pid 2>/dev/null || true
done
