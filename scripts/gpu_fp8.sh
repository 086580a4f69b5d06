#!/usr/bin/env bash
# FP8 weights on the GPU machine (issue 20), from a bundle made by scripts/bundle_cuda.sh:
#   tests    the FP8 CUDA op tests against the CPU twin, the FP8 oracle and its KL gate
#   kernels  cuda_fp8_bench: FP8 GEMM TFLOP/s at 256/2048/8192 rows against cuBLASLt bf16,
#            the FP8 weight stream's GB/s against 4.3 TB/s
#   e2e      the fp8 part of scripts/gpu_bench.sh: decode-b1, offline-128/128, the sweep at
#            256 and offline-2048/2048 with --kv-cache-dtype fp8, the 8B shape in fp8
#            (random-model --dtype fp8) beside bf16, in this one call
# Logs go under $OUT; each part prints its figures. Default: tests kernels.
#   G=.device/gpu OUT=/tmp/out scripts/gpu_fp8.sh [tests] [kernels] [e2e | e2e-bf16 | e2e-fp8]
# (tests + kernels take ~3 min; e2e ~10, so give it a device call of its own, or its two
# halves one each: e2e-bf16, e2e-fp8; the 16-bit half is the same-run comparison.)
set -u
G=${G:-build/bundle}; OUT=${OUT:-/tmp/tandem-fp8}
parts=${*:-tests kernels}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
# The tests find their data at the path they were built with (main's or this branch's).
for d in /work/main /work/wt/fp8; do
  [ -e "$d/tests/data" ] || { mkdir -p "$(dirname "$d")" && ln -sfn "$PWD" "$d"; }
done
has() { [[ " $parts " == *" $1 "* ]]; }
if has tests; then
  timeout 240 "$G/tests/test_backend_cuda" --gtest_filter='CudaFp8*' > "$OUT/fp8_ops.log" 2>&1
  echo "test_backend_cuda(CudaFp8*) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/fp8_ops.log" | tr '\n' ' ')"
  grep -E 'Failure|rel_err|Which is|path [0-9]' "$OUT/fp8_ops.log" | head -30
  timeout 240 "$G/tests/test_golden" --gtest_filter='*Fp8*' > "$OUT/fp8_golden.log" 2>&1
  echo "test_golden(*Fp8*) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/fp8_golden.log" | tr '\n' ' ')"
  grep -E 'KL|rel err|Failure' "$OUT/fp8_golden.log" | head -30
  # The bf16 paths must be unchanged by the FP8 work.
  timeout 300 "$G/tests/test_backend_cuda" --gtest_filter='-CudaFp8*' > "$OUT/cuda_rest.log" 2>&1
  echo "test_backend_cuda(rest) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cuda_rest.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/cuda_rest.log" | head -10
fi
if has kernels; then
  timeout 180 "$G/bench/cuda_fp8_bench" 20 2>&1 | tee "$OUT/fp8_bench.log"
fi
if has e2e; then G=$G OUT=$OUT bash "$(dirname "$0")/gpu_bench.sh" fp8; fi
if has e2e-bf16; then G=$G OUT=$OUT bash "$(dirname "$0")/gpu_bench.sh" fp8 bf16; fi
if has e2e-fp8; then G=$G OUT=$OUT bash "$(dirname "$0")/gpu_bench.sh" fp8 fp8; fi
