#!/usr/bin/env bash
# Issue 46's CUDA refactors (one GEMM layer, switches in one place) and issue 45's decode-b1
# fusion checked on the GPU machine in one call: this tree's bundle ($G) against the commit
# before's ($B), both made by scripts/bundle_cuda.sh (the baseline needs only `tandem` and
# `bench/offline_bench`: scripts/bundle_cuda.sh BUILD OUT, then delete its tests/).
#   tests   $G's test_backend_cuda (the sm90 prefill's own tests first, on a short leash),
#           then the rest, and test_golden '*Cuda*:FusedDecode*'                      ~6 min
#   perf    the 8B shape (random-model, bf16 and FP8 per channel): decode-b1 of both, then
#           offline-128/128 and the sweep at 256 in FP8, $B and $G interleaved (B G G B);
#           decode-b1 in FP8 also with TANDEM_FP8_DECODE_FUSION=0 on $G (the fusion's A/B)
#                                                                                   ~9 min
# Logs go under $OUT; every figure is printed with the binary that made it.
#   B=.device/base G=.device/gpu OUT=/tmp/out scripts/gpu_house.sh [tests] [perf]
set -u
G=${G:-build/bundle}; B=${B:-}; OUT=${OUT:-/tmp/tandem-house}
M=${M:-/tmp/llama8b}; M8=${M8:-/tmp/llama8b-fp8}
parts=${*:-tests perf}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
# The tests find their data at the path they were built with.
for d in /work/main /work/wt/cuda-house; do
  [ -e "$d/tests/data" ] || { mkdir -p "$(dirname "$d")" && ln -sfn "$PWD" "$d"; }
done
has() { [[ " $parts " == *" $1 "* ]]; }
passed() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tr '\n' ' '; }

if has tests; then
  timeout 150 "$G/tests/test_backend_cuda" --gtest_filter='CudaAttentionSm90*' > "$OUT/sm90.log" 2>&1
  rc=$?; echo "test_backend_cuda(CudaAttentionSm90*) rc=$rc $(passed "$OUT/sm90.log")"
  # (The tests build their backends with the default options: a hang elsewhere ends at
  # the next timeout, not sooner.)
  [ $rc = 124 ] && echo "sm90 prefill HUNG: see $OUT/sm90.log"
  timeout 330 "$G/tests/test_backend_cuda" --gtest_filter="*:-CudaAttentionSm90*" > "$OUT/cuda.log" 2>&1
  echo "test_backend_cuda(rest) rc=$? $(passed "$OUT/cuda.log")"
  grep -E '^\[  FAILED  \]' "$OUT/sm90.log" "$OUT/cuda.log" | head -20
  timeout 400 "$G/tests/test_golden" --gtest_filter='*Cuda*:FusedDecode*' > "$OUT/golden.log" 2>&1
  echo "test_golden(*Cuda*:FusedDecode*) rc=$? $(passed "$OUT/golden.log")"
  grep -E '^\[  FAILED  \]' "$OUT/golden.log" | head -20
fi

# offline LABEL BUNDLE [ENV=VALUE ...] -- offline_bench arguments: one figure line.
offline() {
  local label=$1 bundle=$2; shift 2
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  echo -n "$label: "
  env "${envs[@]}" LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" \
    timeout 120 "$bundle/bench/offline_bench" "$@" 2>&1 | tail -1
}

# The sweep at 256 against `serve` of BUNDLE, measured by $G's client.
sweep() {
  local label=$1 bundle=$2 m=$3
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" "$bundle/tandem" serve --model "$m" \
    --port 8321 --batch 256 --max-batched-tokens 8192 > "$OUT/serve-$label.log" 2>&1 &
  local server=$!
  for _ in $(seq 120); do curl -sf localhost:8321/health > /dev/null && break; sleep 1; done
  echo -n "sweep at 256, $label: "
  timeout 150 "$G/tandem" bench --url http://127.0.0.1:8321 --concurrency 256 --num-requests 1024 \
    --input-len 128 --output-len 256 2> "$OUT/sweep-$label.err" | tail -2 | tr '\n' ' '; echo
  kill $server; wait $server 2> /dev/null
}

if has perf; then
  [ -n "$B" ] || { echo "perf: B (the baseline bundle) is not set"; exit 1; }
  [ -f "$M/config.json" ] || timeout 240 "$G/tandem" random-model --like llama-3.1-8b --out "$M" > /dev/null
  [ -f "$M8/config.json" ] || timeout 240 "$G/tandem" random-model --like llama-3.1-8b --dtype fp8 --out "$M8" > /dev/null
  b1=(--num 1 --batch 1 --input 128 --output 256 --repeat 3)
  echo "-- decode-b1, bf16"
  for who in base new new base; do
    bundle=$B; [ $who = new ] && bundle=$G
    offline "$who" "$bundle" -- "$M" "${b1[@]}"
  done
  echo "-- decode-b1, FP8"
  for who in base new new-nofusion new base new-nofusion; do
    bundle=$B; envs=(); [ $who != base ] && bundle=$G
    [ $who = new-nofusion ] && envs=(TANDEM_FP8_DECODE_FUSION=0)
    offline "$who" "$bundle" "${envs[@]}" -- "$M8" "${b1[@]}"
  done
  echo "-- offline-128/128, FP8"
  for who in base new new base; do
    bundle=$B; [ $who = new ] && bundle=$G
    offline "$who" "$bundle" -- "$M8" --num 1024 --batch 256 --input 128 --output 128
  done
  echo "-- sweep at 256, FP8"
  sweep base "$B" "$M8"
  sweep new "$G" "$M8"
fi
