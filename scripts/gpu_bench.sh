#!/usr/bin/env bash
# The GPU benchmarks of bench/RESULTS.md, in one run on the GPU machine, from a bundle
# made by scripts/bundle_cuda.sh (G = the bundle folder). Writes logs under $OUT.
#   G=.device/gpu OUT=/tmp/out scripts/gpu_bench.sh          everything
#   G=.device/gpu OUT=/tmp/out scripts/gpu_bench.sh prefix   only the prefix-cache part
#   G=.device/gpu OUT=/tmp/out scripts/gpu_bench.sh fp8      only the FP8-weights part
#   G=.device/gpu OUT=/tmp/out scripts/gpu_bench.sh lora     only the LoRA part
# `fp8` (issue 20): decode-b1, offline-128/128, the sweep at 256 and offline-2048/2048 with
# the fp8 KV cache, on random-model --dtype fp8 of the 8B shape ($M8) beside the bf16 one
# ($M), in one call (~10 min with both models to write; `fp8 bf16` or `fp8 fp8` runs one
# model's half, for device calls of under 10 minutes).
set -u
G=${G:-build/bundle}; OUT=${OUT:-/tmp/tandem-bench}; M=${M:-/tmp/llama8b}; M8=${M8:-/tmp/llama8b-fp8}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
step() { echo "== $*" >&2; }
if [ "${1:-}" = fp8 ]; then
  which=${2:-both}; models=()
  [ "$which" = fp8 ] || models+=("$M")
  [ "$which" = bf16 ] || models+=("$M8")
  [ "$which" = fp8 ] || [ -f "$M/config.json" ] || { step random-model bf16; ( time "$G/tandem" random-model --like llama-3.1-8b --out "$M" ) 2>&1 | tail -4; }
  [ "$which" = bf16 ] || [ -f "$M8/config.json" ] || { step random-model fp8; ( time "$G/tandem" random-model --like llama-3.1-8b --dtype fp8 --out "$M8" ) 2>&1 | tail -4; }
  for m in "${models[@]}"; do
    step "$(basename "$m")"
    echo -n "decode-b1: "; timeout 60 "$G/bench/offline_bench" "$m" --num 1 --batch 1 --input 128 --output 256 --repeat 3 | tail -1
    echo -n "offline-128/128: "; timeout 90 "$G/bench/offline_bench" "$m" --num 1024 --batch 256 --input 128 --output 128 | tail -1
    echo -n "offline-2048/2048 fp8 KV: "; timeout 150 "$G/bench/offline_bench" "$m" --num 384 --batch 384 --input 2048 --output 2048 --kv-cache-dtype fp8 | tail -1
    "$G/tandem" serve --model "$m" --port 8321 --batch 256 --max-batched-tokens 8192 > "$OUT/serve-$(basename "$m").log" 2>&1 &
    server=$!
    for i in $(seq 90); do curl -sf localhost:8321/health > /dev/null && break; sleep 1; done
    curl -s localhost:8321/v1/models | head -c 400; echo
    echo -n "sweep at 256: "; timeout 120 "$G/tandem" bench --url http://127.0.0.1:8321 --concurrency 256 --num-requests 1024 \
      --input-len 128 --output-len 256 --json "$OUT/sweep256-$(basename "$m").json" 2> "$OUT/bench-$(basename "$m").err" | tail -3
    kill $server; wait $server
  done
  exit 0
fi
# LoRA (issue 23): 8 random rank-16 adapters on every projection of the 8B shape
# (random-lora), the sweep at 64 with the requests spread evenly over them (>= 80% of the
# base model's output tok/s) against the base model on a server without adapters, and
# base-model requests on the server with them (what loaded-but-unused adapters cost).
lora_part() {
  [ -f "$M/config.json" ] || { step random-model; ( time "$G/tandem" random-model --like llama-3.1-8b --out "$M" ) 2>&1 | tail -4; }
  L=${L:-/tmp/llama8b-loras}; mods=(); names=()
  for i in 1 2 3 4 5 6 7 8; do
    [ -f "$L/a$i/adapter_config.json" ] || "$G/tandem" random-lora --model "$M" --out "$L/a$i" --rank 16 --seed $i
    mods+=("a$i=$L/a$i"); names+=("a$i")
  done
  for mode in base lora; do
    extra=(); [ $mode = lora ] && extra=(--lora-modules "${mods[@]}")
    step "lora: server $mode"
    "$G/tandem" serve --model "$M" --port 8323 --batch 256 --max-batched-tokens 8192 "${extra[@]}" \
      > "$OUT/serve_lora_$mode.log" 2>&1 &
    server=$!
    for i in $(seq 90); do curl -sf localhost:8323/health > /dev/null && break; sleep 1; done
    curl -s localhost:8323/v1/models | head -c 300; echo
    echo "-- $mode server, base-model requests"
    timeout 120 "$G/tandem" bench --url http://127.0.0.1:8323 --concurrency 64 --num-requests 256 \
      --input-len 128 --output-len 256 --json "$OUT/lora_${mode}_base.json" 2>> "$OUT/bench_lora.err" | tail -3
    if [ $mode = lora ]; then
      echo "-- lora server, requests spread over ${names[*]}"
      timeout 120 "$G/tandem" bench --url http://127.0.0.1:8323 --concurrency 64 --num-requests 256 \
        --input-len 128 --output-len 256 --models "$(IFS=,; echo "${names[*]}")" \
        --json "$OUT/lora_spread.json" 2>> "$OUT/bench_lora.err" | tail -3
    fi
    kill $server; wait $server
  done
}
if [ "${1:-all}" = lora ]; then lora_part; exit; fi
[ -f "$M/config.json" ] && [ "${1:-all}" = prefix ] ||
  { step random-model; ( time "$G/tandem" random-model --like llama-3.1-8b --out "$M" ) 2>&1 | tail -4; }

# The prefix cache (issue 19), with it (the default) and without, one server each:
# 64 requests sharing a 2,000-token prefix + 64 own tokens, 32 new, at concurrency 1 and 8
# (TTFT p50 should be >= 5x lower with the cache); 16 chats of 8 turns at concurrency 8
# (TTFT flat in the turn with the cache); the plain sweep at 0% hits (within 2%).
prefix_part() {
  for mode in on off; do
    flag=""; [ $mode = off ] && flag=--no-enable-prefix-caching
    step "prefix cache $mode"
    "$G/tandem" serve --model "$M" --port 8322 --batch 256 --max-batched-tokens 8192 $flag \
      > "$OUT/serve_prefix_$mode.log" 2>&1 &
    server=$!
    for i in $(seq 60); do curl -sf localhost:8322/health > /dev/null && break; sleep 1; done
    timeout 120 "$G/tandem" bench --url http://127.0.0.1:8322 --shared-prefix-len 2000 \
      --input-len 64 --output-len 32 --concurrency 1,8 --num-requests 64 \
      --json "$OUT/prefix_shared_$mode.json" 2> "$OUT/prefix_shared_$mode.err"
    timeout 120 "$G/tandem" bench --url http://127.0.0.1:8322 --multi-turn 8 --input-len 256 \
      --output-len 64 --concurrency 8 --num-requests 16 \
      --json "$OUT/prefix_turns_$mode.json" 2> "$OUT/prefix_turns_$mode.err"
    timeout 200 "$G/tandem" bench --url http://127.0.0.1:8322 --concurrency 1,8,32,64,128,256 \
      --input-len 128 --output-len 256 --json "$OUT/prefix_sweep_$mode.json" 2> "$OUT/prefix_sweep_$mode.err"
    kill $server; wait $server
  done
}
if [ "${1:-all}" = prefix ]; then prefix_part; exit; fi
step decode-b1
timeout 60 "$G/bench/offline_bench" "$M" --num 1 --batch 1 --input 128 --output 256 --repeat 3 | tail -1
TANDEM_CUDA_GRAPHS=0 timeout 60 "$G/bench/offline_bench" "$M" --num 1 --batch 1 --input 128 --output 256 | tail -1 | sed 's/^/without graphs: /'
step offline
timeout 90 "$G/bench/offline_bench" "$M" --num 1024 --batch 256 --input 128 --output 128 | tail -1
timeout 150 "$G/bench/offline_bench" "$M" --num 160 --batch 160 --input 2048 --output 2048 | tail -1
# The fp8 KV cache holds 2x the rows in the same memory (the >= 8,000 figure of RESULTS).
timeout 150 "$G/bench/offline_bench" "$M" --num 384 --batch 384 --input 2048 --output 2048 \
  --kv-cache-dtype fp8 | tail -1
step sweep
"$G/tandem" serve --model "$M" --port 8321 --batch 256 --max-batched-tokens 8192 > "$OUT/serve.log" 2>&1 &
server=$!
for i in $(seq 60); do curl -sf localhost:8321/health > /dev/null && break; sleep 1; done
timeout 200 "$G/tandem" bench --url http://127.0.0.1:8321 --concurrency 1,8,32,64,128,256 \
  --input-len 128 --output-len 256 --json "$OUT/sweep.json" --plot "$OUT/sweep.svg" 2> "$OUT/bench.err"
kill $server; wait $server
# Structured output (issue 21): the sweep at 64 unconstrained, every row constrained (>= 80%
# of unconstrained), and half constrained (the unconstrained rows' TPOT within 2%). The
# schema is an unbounded array of records, so rows run to --output-len or take EOS after `]`;
# S=bench/schemas/endless_records.json (at least 40 records: no row can end before 256
# tokens) compares rows of equal length.
step structured
"$G/tandem" serve --model "$M" --port 8321 --batch 256 --max-batched-tokens 8192 > "$OUT/serve2.log" 2>&1 &
server=$!
for i in $(seq 60); do curl -sf localhost:8321/health > /dev/null && break; sleep 1; done
S=${S:-bench/schemas/long_records.json}
for f in none 1 0.5; do
  extra=(); [ "$f" != none ] && extra=(--json-schema "$S" --constrained-fraction "$f")
  echo "-- constrained fraction: $f"
  timeout 120 "$G/tandem" bench --url http://127.0.0.1:8321 --concurrency 64 --num-requests 256 \
    --input-len 128 --output-len 256 "${extra[@]}" 2>> "$OUT/bench_structured.err" | tail -3
done
kill $server; wait $server
step hf-generate-batch
timeout 150 python3 bench/hf_generate_batch.py --model "$M" --num 256 --input-len 128 --output-len 128 2>&1 | tail -2
prefix_part
lora_part
