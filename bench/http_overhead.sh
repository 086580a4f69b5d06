#!/usr/bin/env bash
# What the HTTP layer costs, two builds side by side in one run: `tandem bench` against
# `tandem serve --batch 32` on the llama oracle model (random weights, 512-token vocab, so
# the model's own time per token is small and the server's overhead shows), short requests
# (16 prompt tokens, 16 streamed tokens) at concurrency 1, 8 and 32. Each binary is run
# ROUNDS times, alternating, so a busy machine slows both alike.
#   bench/http_overhead.sh BIN_A [BIN_B] [ROUNDS (default 2)]
set -euo pipefail
a=${1:?usage: bench/http_overhead.sh BIN_A [BIN_B] [ROUNDS]}
b=${2:-}
rounds=${3:-2}
model=tests/data/oracle/llama
# Each binary has its own port: a server's closed connections linger in TIME_WAIT, and
# cpp-httplib (SO_REUSEPORT, no SO_REUSEADDR) leaves ones that block another binder.
run() {
  local bin=$1 port=$2
  "$bin" serve --device cpu --model "$model" --port $port --batch 32 --max-model-len 1024 \
    > /tmp/http_overhead_serve.log 2>&1 &
  local pid=$!
  for _ in $(seq 120); do curl -sf localhost:$port/health >/dev/null && break; sleep 0.2; done
  echo "== $bin"
  "$bin" bench --url http://127.0.0.1:$port --concurrency 1,8,32 --num-requests 64 \
    --input-len 16 --output-len 16 --vocab 512 2>/dev/null
  kill $pid; wait $pid 2>/dev/null || true
}
for _ in $(seq "$rounds"); do
  run "$a" 18620
  [ -n "$b" ] && run "$b" 18621
done
