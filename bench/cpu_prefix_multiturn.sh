#!/usr/bin/env bash
# The prefix cache on the CPU (issue 19): `tandem bench --multi-turn` against `tandem serve`
# on the embedded model, once with the prefix cache (the default) and once with
# --no-enable-prefix-caching; TTFT per turn. Each turn resends the conversation so far
# plus 64 new tokens and generates 32.
#   bench/cpu_prefix_multiturn.sh [BUILD_DIR (default: build)] [TURNS (default: 8)]
set -euo pipefail
build=${1:-build}
turns=${2:-8}
for mode in on off; do
  port=$((18600 + RANDOM % 300))
  flag=""; [ $mode = off ] && flag="--no-enable-prefix-caching"
  "$build/tandem" serve --device cpu --port $port --batch 4 $flag > /tmp/prefix_multiturn_serve.log 2>&1 &
  pid=$!
  for _ in $(seq 120); do curl -sf localhost:$port/health >/dev/null && break; sleep 1; done
  echo "prefix caching $mode"
  "$build/tandem" bench --url http://127.0.0.1:$port --multi-turn "$turns" --concurrency 1 \
    --num-requests 4 --input-len 64 --output-len 32 2>&1 | grep -v '^concurrency\|^  concurrency'
  kill $pid; wait $pid 2>/dev/null || true
done
